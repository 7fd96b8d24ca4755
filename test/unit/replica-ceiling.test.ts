/**
 * Issue 29 item 3: the hard ceiling on replicas per job (`src/topology/ceiling.ts`), independent of the
 * policy: the job rule `job-replica-ceiling` (always denies, one violation per replica spec at its
 * `replicas` field), and what the pod mutation does for a pod of a job over it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../src/admission/types.js";
import { checkPolicy } from "../../src/policy/load.js";
import { MAX_JOB_REPLICAS } from "../../src/topology/ceiling.js";
import { enforce } from "../../src/validate/enforcement.js";
import { newOrWorse, validateJob } from "../../src/validate/job.js";
import { effectiveLimits } from "../../src/validate/limits.js";
import type { ValidationContext } from "../../src/validate/types.js";
import { job, kindOf } from "../fixtures/jobs.js";

// No replica caps at all in the policy, and every configurable rule only warns: the ceiling still denies.
const lax = checkPolicy({ enforcement: { mode: "warn" } }, "lax");
const ctx: ValidationContext = { policy: lax, namespace: "team-a", limits: effectiveLimits(lax, "team-a") };
const ceilingOf = (j: KubeObject): Array<[string, string]> =>
  validateJob(j, kindOf(String(j.kind)), ctx).violations.filter((v) => v.rule === "job-replica-ceiling").map((v) => [v.field, v.message]);
const msg = (n: number, total: number): string => `${n} of the job's ${total} replicas; at most ${MAX_JOB_REPLICAS} replicas per job in all (Quartermaster's ceiling)`;

describe("job-replica-ceiling", () => {
  const INT32_MAX = 2 ** 31 - 1;
  const cases: Array<{ name: string; job: KubeObject; want: Array<[string, string]> }> = [
    { name: "TFJob with 4 replicas → allowed", job: job("TFJob", "small", "team-a", { PS: 1, Worker: 3 }), want: [] },
    { name: "TFJob exactly at the ceiling → allowed", job: job("TFJob", "at", "team-a", { Chief: 1, Worker: MAX_JOB_REPLICAS - 1 }), want: [] },
    {
      name: "TFJob one over, summed over types → each replicaSpec's replicas field",
      job: job("TFJob", "over", "team-a", { Chief: 1, Worker: MAX_JOB_REPLICAS }),
      want: [
        ["spec.tfReplicaSpecs.Chief.replicas", msg(1, MAX_JOB_REPLICAS + 1)],
        ["spec.tfReplicaSpecs.Worker.replicas", msg(MAX_JOB_REPLICAS, MAX_JOB_REPLICAS + 1)],
      ],
    },
    {
      name: "TFJob Worker 2^31−1",
      job: job("TFJob", "huge", "team-a", { Worker: INT32_MAX }),
      want: [["spec.tfReplicaSpecs.Worker.replicas", msg(INT32_MAX, INT32_MAX)]],
    },
    {
      name: "PyTorchJob, unset Master counts 1 → over by one",
      job: job("PyTorchJob", "pt", "team-a", { Master: {}, Worker: MAX_JOB_REPLICAS }),
      want: [
        ["spec.pytorchReplicaSpecs.Master.replicas", msg(1, MAX_JOB_REPLICAS + 1)],
        ["spec.pytorchReplicaSpecs.Worker.replicas", msg(MAX_JOB_REPLICAS, MAX_JOB_REPLICAS + 1)],
      ],
    },
    { name: "MXJob over", job: job("MXJob", "mx", "team-a", { Scheduler: 1, Server: 5000, Worker: 5000 }), want: [
      ["spec.mxReplicaSpecs.Scheduler.replicas", msg(1, 10001)],
      ["spec.mxReplicaSpecs.Server.replicas", msg(5000, 10001)],
      ["spec.mxReplicaSpecs.Worker.replicas", msg(5000, 10001)],
    ] },
    { name: "Caffe2Job over: its single pool", job: job("Caffe2Job", "c2", "team-a", { Worker: 20_000 }), want: [["spec.replicaSpecs.replicas", msg(20_000, 20_000)]] },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(ceilingOf(c.job), c.want));

  it("denies even where the policy says every rule only warns, and cannot be configured away", () => {
    const j = job("TFJob", "over", "team-a", { Worker: MAX_JOB_REPLICAS + 1 });
    const out = enforce(validateJob(j, kindOf("TFJob"), ctx), lax.enforcement, "team-a");
    assert.deepEqual(out.violations.map((v) => v.rule), ["job-replica-ceiling"]);
  });

  it("an UPDATE of a job already over it (labels only) is not refused for it; one that adds replicas is", () => {
    const kind = kindOf("TFJob");
    const before = job("TFJob", "over", "team-a", { Worker: MAX_JOB_REPLICAS + 1 });
    const same = job("TFJob", "over", "team-a", { Worker: MAX_JOB_REPLICAS + 1 });
    const more = job("TFJob", "over", "team-a", { Worker: MAX_JOB_REPLICAS + 2 });
    const rules = (now: KubeObject) => newOrWorse(validateJob(now, kind, ctx), validateJob(before, kind, ctx)).violations.map((v) => v.rule);
    assert.deepEqual(rules(same), []);
    assert.deepEqual(rules(more), ["job-replica-ceiling"]);
  });
});

/**
 * Issue 29 item 3: the hard ceiling on replicas per job (`src/membership/ceiling.ts`), independent of the
 * policy: the job rule `job-replica-ceiling` (always denies, one violation per replica spec at its
 * `replicas` field), and what the pod mutation does for a pod of a job over it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { MAX_JOB_REPLICAS } from "../../../src/membership/ceiling.js";
import { enforce } from "../../../src/validate/enforcement.js";
import { newOrWorse, validateJob } from "../../../src/validate/job.js";
import { validateScale } from "../../../src/validate/scale.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import type { V1Pod } from "@kubernetes/client-node";
import { applyPatch } from "../../../src/admission/patch.js";
import { ClusterSpecMemo, clusterSpec } from "../../../src/mutate/frameworks.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { mutatePods } from "../../../webhooks/mutate-pods.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, job, kindOf, topology } from "../../fixtures/jobs.js";
import { ctx as podCtx, testPod } from "../../fixtures/pods.js";
import { review } from "../../fixtures/reviews.js";

// No replica caps at all in the policy, and every configurable rule only warns: the ceiling still denies.
const lax = checkPolicy({ enforcement: { mode: "warn" } }, "lax");
const ctx: ValidationContext = { policy: lax, namespace: "team-a", limits: effectiveLimits(lax, "team-a") };
const ceilingOf = (j: KubeObject): Array<[string, string]> =>
  validateJob(j, kindOf(String(j.kind)), ctx)
    .violations.filter((v) => v.rule === "job-replica-ceiling")
    .map((v) => [v.field, v.message]);
const msg = (n: number, total: number): string =>
  `${n} of the job's ${total} replicas; at most ${MAX_JOB_REPLICAS} replicas per job in all (Quartermaster's ceiling)`;

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
    {
      name: "MXJob over",
      job: job("MXJob", "mx", "team-a", { Scheduler: 1, Server: 5000, Worker: 5000 }),
      want: [
        ["spec.mxReplicaSpecs.Scheduler.replicas", msg(1, 10001)],
        ["spec.mxReplicaSpecs.Server.replicas", msg(5000, 10001)],
        ["spec.mxReplicaSpecs.Worker.replicas", msg(5000, 10001)],
      ],
    },
    {
      name: "Caffe2Job over: its single pool",
      job: job("Caffe2Job", "c2", "team-a", { Worker: 20_000 }),
      want: [["spec.replicaSpecs.replicas", msg(20_000, 20_000)]],
    },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(ceilingOf(c.job), c.want));

  it("denies even where the policy says every rule only warns, and cannot be configured away", () => {
    const j = job("TFJob", "over", "team-a", { Worker: MAX_JOB_REPLICAS + 1 });
    const out = enforce(validateJob(j, kindOf("TFJob"), ctx), lax.enforcement, "team-a");
    assert.deepEqual(
      out.violations.map((v) => v.rule),
      ["job-replica-ceiling"],
    );
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

describe("job-replica-ceiling on /scale", () => {
  const kind = kindOf("PyTorchJob");
  const stored = job("PyTorchJob", "pt", "team-a", { Master: 1, Worker: 8 });
  const scale = (replicas: number): KubeObject => ({
    apiVersion: "autoscaling/v1",
    kind: "Scale",
    metadata: { name: "pt", namespace: "team-a" },
    spec: { replicas },
  });
  const cases: Array<[string, number, string[]]> = [
    ["to the ceiling (1 Master + 9,999 Workers) → allowed", MAX_JOB_REPLICAS - 1, []],
    ["one over → denied at the Scale's spec.replicas", MAX_JOB_REPLICAS, ["job-replica-ceiling spec.replicas", "job-replica-ceiling spec.replicas"]],
  ];
  for (const [name, n, want] of cases) {
    it(name, () => {
      const out = validateScale({ scale: scale(n), job: stored, kind, ctx });
      assert.deepEqual(
        out.violations.filter((v) => v.rule === "job-replica-ceiling").map((v) => `${v.rule} ${v.field}`),
        want,
      );
    });
  }
});

describe("a pod of a job over the ceiling: admitted without a cluster spec, with a warning", () => {
  const CONTAINER: Record<string, string> = {
    TFJob: "tensorflow",
    PyTorchJob: "pytorch",
    MXJob: "mxnet",
    Caffe2Job: "caffe2",
    XGBoostJob: "xgboost",
    JAXJob: "jax",
    PaddleJob: "paddle",
  };
  const owned = (kind: string, jobName: string, pod: string) => ({
    ...testPod({ spec: { containers: [{ name: CONTAINER[kind]!, image: "img" }] } }),
    metadata: {
      name: pod,
      namespace: "team-a",
      ownerReferences: [{ apiVersion: `${kindOf(kind).group}/${kindOf(kind).version}`, kind, name: jobName, uid: `uid-${jobName}`, controller: true }],
    },
  });
  const deps = (jobs: KubeObject[]) => ({ policy: podCtx().policy, log: capturingLogger().log, jobs: fakeJobReader(jobs), now: () => new Date() });
  const envNames = (pod: V1Pod): string[] => (pod.spec?.containers ?? []).flatMap((c) => (c.env ?? []).map((e) => e.name));
  const INT32_MAX = 2 ** 31 - 1;
  const cases: Array<{ name: string; kind: string; replicas: Record<string, number>; pod: string; want: string }> = [
    {
      name: "TFJob with 2^31−1 workers",
      kind: "TFJob",
      replicas: { Worker: INT32_MAX },
      pod: "w-worker-7",
      want: `quartermaster: no cluster spec: the job has ${INT32_MAX} replicas in all, over Quartermaster's ceiling of 10000 per job`,
    },
    {
      name: "TFJob one over",
      kind: "TFJob",
      replicas: { PS: 1, Worker: 10_000 },
      pod: "w-worker-0",
      want: "quartermaster: no cluster spec: the job has 10001 replicas in all, over Quartermaster's ceiling of 10000 per job",
    },
    {
      name: "MXJob over",
      kind: "MXJob",
      replicas: { Scheduler: 1, Worker: 20_000 },
      pod: "w-worker-3",
      want: "quartermaster: no cluster spec: the job has 20001 replicas in all, over Quartermaster's ceiling of 10000 per job",
    },
    {
      name: "Caffe2Job over",
      kind: "Caffe2Job",
      replicas: { Worker: 1_000_000 },
      pod: "w-worker-3",
      want: "quartermaster: no cluster spec: the job has 1000000 replicas in all, over Quartermaster's ceiling of 10000 per job",
    },
    {
      name: "PyTorchJob over (no per-replica list, still refused a spec)",
      kind: "PyTorchJob",
      replicas: { Master: 1, Worker: INT32_MAX - 1 },
      pod: "w-worker-3",
      want: `quartermaster: no cluster spec: the job has ${INT32_MAX} replicas in all, over Quartermaster's ceiling of 10000 per job`,
    },
  ];
  for (const c of cases) {
    it(`${c.name} → no cluster-spec env, the warning; mutating again changes nothing`, async () => {
      const webhook = mutatePods(deps([job(c.kind, "w", "team-a", c.replicas)]));
      const pod = owned(c.kind, "w", c.pod);
      const first = await webhook.admit(review({ object: pod as never }));
      assert.equal(first.review.response?.allowed, true);
      assert.ok(first.review.response?.warnings?.includes(c.want), JSON.stringify(first.review.response?.warnings));
      const patch = first.review.response?.patch;
      const mutated = patch ? applyPatch(pod as V1Pod, JSON.parse(Buffer.from(patch, "base64").toString()) as never) : (pod as V1Pod);
      assert.deepEqual(envNames(mutated), []);
      assert.ok(!(mutated.metadata?.annotations?.["quartermaster.dev/mutations"] ?? "").includes("cluster-spec"));
      const second = await webhook.admit(review({ object: mutated as never }));
      assert.equal(second.review.response?.patch, undefined);
      assert.ok(second.review.response?.warnings?.includes(c.want));
    });
  }

  it("at the ceiling → the cluster spec is set", async () => {
    const webhook = mutatePods(deps([job("TFJob", "w", "team-a", { Worker: 10_000 })]));
    const pod = owned("TFJob", "w", "w-worker-9999");
    const res = await webhook.admit(review({ object: pod as never }));
    const mutated = applyPatch(pod as V1Pod, JSON.parse(Buffer.from(res.review.response!.patch!, "base64").toString()) as never);
    assert.deepEqual(envNames(mutated), ["TF_CONFIG"]);
  });
});

describe("cluster spec built once per job, not per pod", () => {
  const jobs: Array<[string, KubeObject, Array<[string, number]>]> = [
    [
      "TFJob",
      job("TFJob", "tf", "team-a", { Chief: 1, PS: 2, Worker: 40 }),
      [["Chief", 0], ["PS", 1], ...Array.from({ length: 40 }, (_, i): [string, number] => ["Worker", i])],
    ],
    [
      "TFJob, cluster domain and dynamic workers",
      job("TFJob", "tfd", "team-a", { PS: 2, Worker: 10 }, { enableDynamicWorker: true }),
      [
        ["PS", 0],
        ["Worker", 3],
        ["Worker", 9],
      ],
    ],
    [
      "MXJob",
      job("MXJob", "mx", "team-a", { Scheduler: 1, Server: 3, Worker: 30 }),
      [["Scheduler", 0], ["Server", 2], ...Array.from({ length: 30 }, (_, i): [string, number] => ["Worker", i])],
    ],
    ["Caffe2Job", job("Caffe2Job", "c2", "team-a", { Worker: 30 }), Array.from({ length: 30 }, (_, i): [string, number] => ["Worker", i])],
    [
      "XGBoostJob",
      job("XGBoostJob", "xg", "team-a", { Master: 1, Worker: 30 }),
      [["Master", 0], ...Array.from({ length: 30 }, (_, i): [string, number] => ["Worker", i])],
    ],
    [
      "PyTorchJob",
      job("PyTorchJob", "pt", "team-a", { Master: 1, Worker: 30 }),
      [
        ["Master", 0],
        ["Worker", 29],
      ],
    ],
  ];
  for (const [name, j, pods] of jobs) {
    it(`${name}: ${pods.length} pods → one build, every env byte for byte as without the memo`, () => {
      const memo = new ClusterSpecMemo();
      for (const domain of ["", "cluster.local"]) {
        for (const [type, i] of pods) {
          assert.deepEqual(clusterSpec(topology(j, type, i), "team-a", domain, memo), clusterSpec(topology(j, type, i), "team-a", domain));
        }
      }
      assert.equal(memo.builds, 2); // one per cluster domain
    });
  }

  it("through the pipeline: 200 pods of one 10,000-replica job → one build; a new job object → a new build", () => {
    const memo = new ClusterSpecMemo();
    const big = job("TFJob", "big", "team-a", { Worker: 10_000 });
    for (let i = 0; i < 200; i++) {
      const out = mutatePod(testPod({ spec: { containers: [{ name: "tensorflow", image: "img" }] } }), {
        ...podCtx(),
        clusterSpecs: memo,
        topology: topology(big, "Worker", i),
      });
      assert.equal(out.pod.spec?.containers[0]?.env?.[0]?.name, "TF_CONFIG");
    }
    assert.equal(memo.builds, 1);
    const reread = job("TFJob", "big", "team-a", { Worker: 10_000 }); // what the reader returns after its cache expires
    mutatePod(testPod({ spec: { containers: [{ name: "tensorflow", image: "img" }] } }), {
      ...podCtx(),
      clusterSpecs: memo,
      topology: topology(reread, "Worker", 0),
    });
    assert.equal(memo.builds, 2);
  });

  it("the webhook keeps its own memo: the job's spec is read a bounded number of times however many pods", async () => {
    let reads = 0;
    const base = job("TFJob", "big", "team-a", { Worker: 10_000 });
    // Counts reads of the job's spec; the replica lists and prepared parts are built from it.
    const counted = new Proxy(base, { get: (t, k, r) => (k === "spec" && reads++, Reflect.get(t, k, r)) });
    const webhook = mutatePods({ policy: podCtx().policy, log: capturingLogger().log, jobs: fakeJobReader([counted]), now: () => new Date() });
    const pod = (i: number) => ({
      ...testPod({ spec: { containers: [{ name: "tensorflow", image: "img" }] } }),
      metadata: {
        name: `big-worker-${i}`,
        namespace: "team-a",
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "big", uid: "uid-big", controller: true }],
      },
    });
    await webhook.admit(review({ object: pod(0) as never }));
    const afterOne = reads;
    for (let i = 1; i < 30; i++) await webhook.admit(review({ object: pod(i) as never }));
    assert.equal(reads, afterOne);
  });
});

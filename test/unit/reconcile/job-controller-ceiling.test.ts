/**
 * Issue 29 item 3, the Caffe2 job controller: a job over MAX_JOB_REPLICAS gets no pods and a TooManyReplicas
 * condition (never a RangeError), creates are paced (MAX_CREATES_PER_DECISION), and the cluster spec's host
 * list is built once per job, not per pod. Tables of named cases.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import type { JobKind } from "../../../src/policy/types.js";
import { decideJob, MAX_CREATES_PER_DECISION, REASON_TOO_MANY_REPLICAS } from "../../../src/reconcile/job-controller.js";
import { MAX_JOB_REPLICAS } from "../../../src/membership/ceiling.js";
import { ClusterSpecMemo } from "../../../src/mutate/frameworks.js";
import { caffe2JobObject } from "../../fixtures/jobs.js";

const CAFFE2: JobKind = { kind: "Caffe2Job", group: "kubeflow.org", version: "v1alpha1", plural: "caffe2jobs", framework: "caffe2" };
const NOW = new Date("2026-11-26T12:00:00Z");

function caffe2Job(replicas: number): KubeObject {
  return caffe2JobObject({ replicas });
}

const pod = (index: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: `team-a-ex-worker-${index}`,
    namespace: "team-a",
    uid: `p-${index}`,
    labels: { caffe2_replica_type: "worker", caffe2_replica_index: index },
  },
  status: { phase: "Running" },
});

describe("decideJob: the replica ceiling", () => {
  const cases: Array<{ name: string; replicas: number }> = [
    { name: "one over the ceiling", replicas: MAX_JOB_REPLICAS + 1 },
    { name: "2^31−1 (int32 max)", replicas: 2 ** 31 - 1 },
    { name: "2^32 (was a RangeError in slices)", replicas: 2 ** 32 },
    { name: "2^53−1", replicas: Number.MAX_SAFE_INTEGER },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decideJob({ job: caffe2Job(c.replicas), kind: CAFFE2, pods: [], services: [], now: NOW });
      assert.equal(d.creates.length, 0);
      assert.equal(d.deletes.length, 0);
      assert.ok(
        d.problems.some((p) => p.includes(String(MAX_JOB_REPLICAS)) && p.includes("ceiling")),
        d.problems.join("\n"),
      );
      const conds = (d.status?.conditions ?? []) as Array<{ type: string; status: string; reason: string; message: string }>;
      const cond = conds.find((x) => x.reason === REASON_TOO_MANY_REPLICAS);
      assert.ok(cond, "a TooManyReplicas condition");
      assert.equal(cond.status, "True");
      assert.match(cond.message, new RegExp(`ceiling of ${MAX_JOB_REPLICAS}`));
      assert.ok(d.events.some((e) => e.type === "Warning" && e.reason === REASON_TOO_MANY_REPLICAS));
    });
  }

  it("at the ceiling: not refused", () => {
    const d = decideJob({ job: caffe2Job(MAX_JOB_REPLICAS), kind: CAFFE2, pods: [], services: [], now: NOW });
    assert.ok(!d.problems.some((p) => p.includes("ceiling")));
    assert.ok(d.creates.length > 0);
  });

  const labels: Array<{ name: string; index: string }> = [
    { name: "a pod labelled index 2^32", index: String(2 ** 32) },
    { name: "a pod labelled index 2^40", index: String(2 ** 40) },
    { name: "a pod labelled index past 2^53", index: "99999999999999999999" },
  ];
  for (const c of labels) {
    it(`${c.name}: no RangeError, the pass goes on`, () => {
      const d = decideJob({ job: caffe2Job(2), kind: CAFFE2, pods: [pod(c.index)], services: [], now: NOW });
      assert.ok(d.creates.length > 0);
    });
  }
});

describe("decideJob: creates paced", () => {
  const cases: Array<{ name: string; replicas: number; pods: number; creates: number; deferred: boolean }> = [
    { name: "2 replicas: 2 pods and 2 Services", replicas: 2, pods: 0, creates: 4, deferred: false },
    { name: "250 replicas: exactly the bound", replicas: 250, pods: 0, creates: MAX_CREATES_PER_DECISION, deferred: false },
    { name: "1,000 replicas: the bound, the rest later", replicas: 1000, pods: 0, creates: MAX_CREATES_PER_DECISION, deferred: true },
    { name: "ceiling: the bound", replicas: MAX_JOB_REPLICAS, pods: 0, creates: MAX_CREATES_PER_DECISION, deferred: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decideJob({ job: caffe2Job(c.replicas), kind: CAFFE2, pods: [], services: [], now: NOW });
      assert.equal(d.creates.length, c.creates);
      assert.equal(
        d.problems.some((p) => p.includes("wait for the next pass")),
        c.deferred,
      );
    });
  }

  it("the next pass (creates in flight) continues where the last stopped", () => {
    const first = decideJob({ job: caffe2Job(1000), kind: CAFFE2, pods: [], services: [], now: NOW });
    const inFlight = { creates: new Set(first.creates.map((x) => `${x.kind}/${x.name}`)), deletes: new Set<string>() };
    const second = decideJob({ job: caffe2Job(1000), kind: CAFFE2, pods: [], services: [], now: NOW, inFlight });
    assert.equal(second.creates.length, MAX_CREATES_PER_DECISION);
    assert.ok(second.creates.every((x) => !inFlight.creates.has(`${x.kind}/${x.name}`)));
  });
});

describe("decideJob: the host list once per job", () => {
  const cases: Array<{ name: string; replicas: number }> = [
    { name: "1,000 replicas (was 0.37 s / 40 MiB)", replicas: 1000 },
    { name: "4,000 replicas (was 5.9 s)", replicas: 4000 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const memo = new ClusterSpecMemo();
      const d = decideJob({ job: caffe2Job(c.replicas), kind: CAFFE2, pods: [], services: [], now: NOW, memo });
      const pods = d.creates.filter((x) => x.kind === "Pod");
      assert.ok(pods.length > 1);
      assert.equal(memo.builds, 1, "one build for all the decision's pods");
      // Every pod's CAFFE2_CONFIG lists all replicas.
      const envOf = (p: KubeObject) =>
        ((p as any).spec.containers[0].env as Array<{ name: string; value: string }>).find((e) => e.name === "CAFFE2_CONFIG")?.value;
      for (const p of [pods[0]!, pods.at(-1)!]) assert.equal(JSON.parse(envOf(p.body)!).cluster.worker.length, c.replicas);
    });
  }
});

/**
 * `explain`'s verdict (src/explain/verdict.ts, issue 49): one named case per reason, asserting the main reason, a
 * key evidence item and the next step; two cases where two causes hold (the main one named first); and for each
 * reason, the same evidence with the cause removed, showing the verdict move on to the next reason or to running.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { explainJob } from "../../../src/explain/verdict.js";
import { REASONS, type ExplainEvidence, type Reason, type Verdict } from "../../../src/explain/types.js";
import { NOW, ago, clusterQueue, event, evidence, job, kindFacts, ledgerNode, localQueue, node, pendingPods, pod, workload } from "../../fixtures/explain.js";

interface Case {
  name: string;
  given: ExplainEvidence;
  reason: Reason;
  /** A pattern some evidence item (`object: text`) matches. */
  evidence: RegExp;
  next: RegExp;
  /** A pattern the summary matches. */
  summary?: RegExp;
  also?: Reason[];
  /** The same job with the cause removed, and the reason it then gets. */
  fixed?: { given: ExplainEvidence; reason: Reason };
}

const deepFreeze = <T>(o: T): T => {
  if (o && typeof o === "object") {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
};

const admitted = (age: number): unknown[] => [
  { type: "QuotaReserved", status: "True", reason: "QuotaReserved", lastTransitionTime: ago(age) },
  { type: "Admitted", status: "True", reason: "Admitted", lastTransitionTime: ago(age) },
];
const waiting = (message: string, reason = "Pending"): unknown[] => [{ type: "QuotaReserved", status: "False", reason, message, lastTransitionTime: ago(420) }];
const queuedJob = job({ suspend: true, queue: "gpu", conditions: [] });
const runningWithQueue = {
  job: job({ queue: "gpu" }),
  workload: workload({ conditions: admitted(600), admission: true }),
  localQueue,
  clusterQueue: clusterQueue(16, 16),
};
/** Admitted 10 minutes ago, evicted 40 s ago (deactivated), the quota still reserved: Kueue waits for the job's controller. */
const evictedHolding = (): unknown[] => [
  ...admitted(600),
  { type: "Evicted", status: "True", reason: "Deactivated", message: "The workload is deactivated", lastTransitionTime: ago(40) },
];
const evictedJob = {
  job: job({ suspend: true, queue: "gpu" }),
  workload: workload({ conditions: evictedHolding(), admission: true }),
  localQueue,
  clusterQueue: clusterQueue(16, 16),
};
/** A pod deleted `deletedAgo` seconds before its deletion time (negative: its grace period still running). */
const deleted = (name: string, deletionAgo: number, finalizers?: string[]): ReturnType<typeof pod> => {
  const p = pod({ name, node: "gpu-a1" });
  return { ...p, metadata: { ...(p.metadata as object), deletionTimestamp: ago(deletionAgo), ...(finalizers ? { finalizers } : {}) } };
};
const taint = { key: "dedicated", value: "inference", effect: "NoSchedule" };
const claim = (allocated: boolean): Record<string, unknown> => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaim",
  metadata: { name: "gpus-0", namespace: "team-a" },
  spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count: 8 } }] } },
  status: allocated ? { allocation: { devices: { results: [] } } } : {},
});

const CASES: Case[] = [
  {
    name: "no such job → not-found, and a refused CREATE is named as a likely cause",
    given: evidence({ job: undefined, pods: [] }),
    reason: "not-found",
    evidence: /PyTorchJob team-a\/llm: not found/,
    next: /refused at CREATE/,
    fixed: { given: evidence(), reason: "running" },
  },
  {
    name: "Succeeded condition → finished",
    given: evidence({
      job: job({ conditions: [{ type: "Succeeded", status: "True", reason: "PyTorchJobSucceeded", lastTransitionTime: ago(60) }] }),
      pods: [],
    }),
    reason: "finished",
    evidence: /Succeeded=True \(PyTorchJobSucceeded\)/,
    next: /nothing/,
    fixed: { given: evidence(), reason: "running" },
  },
  {
    name: "Quartermaster refused Kueue's admission UPDATE → refused, naming the field",
    given: evidence({
      ...runningWithQueue,
      job: job({ suspend: true, queue: "gpu", conditions: [] }),
      pods: [],
      events: [
        event(
          "KueueAdmissionRefused",
          "Quartermaster refused Kueue's admission of the job: spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector: flavor a100 pins nvidia.com/gpu.product=H100",
          {
            source: "quartermaster-webhook",
          },
        ),
      ],
    }),
    reason: "refused",
    evidence: /KueueAdmissionRefused \(quartermaster-webhook, ×3.*nodeSelector/,
    next: /change spec\.pytorchReplicaSpecs\.Worker\.template\.spec\.nodeSelector/,
    also: ["phantom-reservation"],
    fixed: { given: evidence(runningWithQueue), reason: "running" },
  },
  {
    name: "a refusal Event left from before the job was fixed, the job now running → running",
    given: evidence({
      ...runningWithQueue,
      events: [event("KueueAdmissionRefused", "Quartermaster refused Kueue's admission of the job: spec: too many GPUs", { source: "quartermaster-webhook" })],
    }),
    reason: "running",
    evidence: /2 of 2 pods Running/,
    next: /nothing/,
  },
  {
    name: "asks 16 GPUs of a ClusterQueue of 8 outside any cohort → inadmissible",
    given: evidence({
      job: queuedJob,
      pods: [],
      workload: workload({ conditions: waiting("couldn't assign flavors to pod set worker: insufficient unused quota") }),
      localQueue,
      clusterQueue: clusterQueue(8, 0),
    }),
    reason: "inadmissible",
    evidence: /flavor a100: nvidia.com\/gpu nominal 8, reserved 0, free 8; borrowing none/,
    next: /ask at most 8 nvidia.com\/gpu/,
    fixed: {
      given: evidence({
        job: queuedJob,
        pods: [],
        workload: workload({ conditions: waiting("insufficient unused quota") }),
        localQueue,
        clusterQueue: clusterQueue(16, 16),
      }),
      reason: "queued",
    },
  },
  {
    name: "Kueue says a resource the pods ask is unavailable in the ClusterQueue (not covered) → inadmissible, not queued",
    given: evidence({
      job: queuedJob,
      pods: [],
      workload: workload({ conditions: waiting("couldn't assign flavors to pod set master: resource memory unavailable in ClusterQueue") }),
      localQueue,
      clusterQueue: clusterQueue(16, 0),
    }),
    reason: "inadmissible",
    evidence: /QuotaReserved=False \(Pending\): couldn't assign flavors to pod set master: resource memory unavailable in ClusterQueue/,
    next: /Kueue then reconsiders the workload by itself/,
  },
  {
    name: "its Workload deactivated by the requeuing backoff limit → inadmissible, with the patch that reactivates it",
    given: evidence({
      job: queuedJob,
      pods: [],
      workload: workload({
        active: false,
        conditions: [
          ...waiting("The workload has no reservation", "NoReservation"),
          { type: "Evicted", status: "True", reason: "Deactivated", message: "The workload is deactivated", lastTransitionTime: ago(90) },
          { type: "Requeued", status: "False", reason: "Deactivated", message: "The workload is deactivated", lastTransitionTime: ago(90) },
        ],
        requeue: { count: 4 },
      }),
      localQueue,
      clusterQueue: clusterQueue(16, 0),
    }),
    reason: "inadmissible",
    summary: /Workload pytorchjob-llm-1a2b3 is deactivated/,
    evidence: /Evicted=True \(Deactivated\): The workload is deactivated/,
    next: /kubectl patch workload -n team-a pytorchjob-llm-1a2b3 --type=merge -p '\{"spec":\{"active":true\}\}'/,
    fixed: {
      given: evidence({
        job: queuedJob,
        pods: [],
        workload: workload({ active: true, conditions: waiting("couldn't assign flavors to pod set worker: insufficient unused quota") }),
        localQueue,
        clusterQueue: clusterQueue(16, 16),
      }),
      reason: "queued",
    },
  },
  {
    name: "deactivated while its quota is still reserved, no pods → phantom-reservation first (the quota others wait for)",
    given: evidence({
      ...evictedJob,
      pods: [],
      workload: workload({ active: false, conditions: evictedHolding(), admission: true }),
    }),
    reason: "phantom-reservation",
    evidence: /Evicted=True \(Deactivated\)/,
    next: /Kueue releases it/,
  },
  {
    name: "the job's LocalQueue does not exist → inadmissible",
    given: evidence({ job: queuedJob, pods: [] }),
    reason: "inadmissible",
    evidence: /LocalQueue team-a\/gpu: not found/,
    next: /create LocalQueue gpu/,
  },
  {
    name: "suspended in a full ClusterQueue → queued, with its position, the flavor's quota and the requeue state",
    given: evidence({
      job: queuedJob,
      pods: [],
      workload: workload({
        conditions: waiting("couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor a100, 16 more needed"),
        requeue: { count: 2, requeueAt: ago(30) },
      }),
      localQueue,
      clusterQueue: clusterQueue(16, 16),
      position: { inClusterQueue: 3, inLocalQueue: 1 },
    }),
    reason: "queued",
    evidence: /position 3 in ClusterQueue gpu-cq/,
    next: /free quota in ClusterQueue gpu-cq/,
    fixed: { given: evidence(runningWithQueue), reason: "running" },
  },
  {
    name: "admitted, no pods, the training-operator absent → no-controller",
    given: evidence({
      pods: [],
      job: job({ conditions: [] }),
      kind: kindFacts({ controller: { name: "training-operator", state: "absent", detail: "no Deployment training-operator in any namespace" } }),
    }),
    reason: "no-controller",
    evidence: /controller training-operator: no Deployment training-operator/,
    next: /install or restart training-operator/,
    fixed: { given: evidence({ job: job({ conditions: [] }) }), reason: "running" },
  },
  {
    name: "the CRD's version is not served → no-controller",
    given: evidence({ pods: [], kind: kindFacts({ served: false }) }),
    reason: "no-controller",
    evidence: /kubeflow.org\/v1 is not served/,
    next: /install the CRD of pytorchjobs.kubeflow.org/,
  },
  {
    name: "the operator's FailedCreatePod Warning and no pods → controller-error",
    given: evidence({ pods: [], events: [event("FailedCreatePod", 'Error creating: pods "llm-worker-0" is forbidden: exceeded quota: gpu-quota')] }),
    reason: "controller-error",
    evidence: /FailedCreatePod .*exceeded quota: gpu-quota/,
    next: /controller retries/,
    fixed: { given: evidence(), reason: "running" },
  },
  {
    name: "quota reserved 10 minutes with no pods and the controller running → phantom-reservation",
    given: evidence({ ...runningWithQueue, pods: [] }),
    reason: "phantom-reservation",
    evidence: /16 nvidia.com\/gpu in flavor a100 reserved in ClusterQueue gpu-cq for 10m00s, and the job has no pods/,
    next: /kubectl delete workload -n team-a pytorchjob-llm-1a2b3/,
    fixed: { given: evidence(runningWithQueue), reason: "running" },
  },
  {
    name: "evicted (deactivated) 40 s ago, quota still reserved, the pods gone → phantom-reservation at once, counted from the eviction",
    given: evidence({ ...evictedJob, pods: [] }),
    reason: "phantom-reservation",
    summary: /^quota still reserved 40s after Kueue evicted the workload \(Deactivated\), with no pods \(reserved 10m00s in all\)$/,
    evidence: /Workload team-a\/pytorchjob-llm-1a2b3: Evicted=True \(Deactivated\): The workload is deactivated, for 40s/,
    next: /Kueue releases it once the job's controller reports no active replicas/,
    fixed: { given: evidence(runningWithQueue), reason: "running" },
  },
  {
    name: "evicted, quota still reserved, the only pod terminating past its deletion time (a finalizer) → phantom-reservation, naming the pod",
    given: evidence({ ...evictedJob, pods: [deleted("llm-worker-0", 120, ["example.com/keep"])] }),
    reason: "phantom-reservation",
    summary: /with only pods stuck terminating/,
    evidence: /the job's only pods are 1 terminating past their deletion time \(llm-worker-0 since .* \(finalizers example\.com\/keep\)\)/,
    next: /what keeps the terminating pods/,
  },
  {
    name: "evicted, quota still reserved, a pod terminating within its grace period → not a phantom reservation (the pod still holds its GPUs)",
    given: evidence({ ...evictedJob, pods: [deleted("llm-worker-0", -20), deleted("llm-worker-1", 30)] }),
    reason: "pending",
    evidence: /0 active pod\(s\) of 2/,
    next: /wait a little/,
  },
  {
    name: "a pod on a node the ledger marks stale → stale-node",
    given: evidence({
      ledger: {
        generatedAt: ago(30),
        nodes: [ledgerNode("gpu-a1", 0), ledgerNode("gpu-a2", 0, { stale: true, staleReason: "node lease not renewed for 310s" })],
      },
    }),
    reason: "stale-node",
    evidence: /Running on node gpu-a2, which is stale: node lease not renewed for 310s/,
    next: /drain node gpu-a2/,
    fixed: { given: evidence(), reason: "running" },
  },
  {
    name: "every node carries a taint the pods do not tolerate → untolerated-taint",
    given: evidence({
      pods: pendingPods(),
      nodes: [node("gpu-a1", { taints: [taint] }), node("gpu-a2", { taints: [taint] })],
      ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 8), ledgerNode("gpu-a2", 8)] },
    }),
    reason: "untolerated-taint",
    evidence: /taint dedicated=inference:NoSchedule/,
    next: /add a toleration for dedicated=inference:NoSchedule/,
    fixed: {
      given: evidence({ pods: pendingPods(), ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 8), ledgerNode("gpu-a2", 8)] } }),
      reason: "pending",
    },
  },
  {
    name: "a nodeSelector for H100 on a cluster of A100s → no-matching-node, with the label values there are",
    given: evidence({ pods: pendingPods({ nodeSelector: { "nvidia.com/gpu.product": "H100-SXM5-80GB" } }) }),
    reason: "no-matching-node",
    evidence: /labels nvidia.com\/gpu.product: A100-SXM4-80GB \(2\)/,
    next: /change the job's nodeSelector\/affinity/,
    fixed: {
      given: evidence({ pods: pendingPods(), ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 8), ledgerNode("gpu-a2", 8)] } }),
      reason: "pending",
    },
  },
  {
    name: "8 GPUs per pod where the largest free block is 4 → no-gpu-shape, with the largest free block per shape",
    given: evidence({ pods: pendingPods(), ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 4), ledgerNode("gpu-a2", 2)] } }),
    reason: "no-gpu-shape",
    evidence: /Nodes \(A100-SXM4-80GB nvidia.com\/gpu\): largest free block 4 on gpu-a1 of 2 node\(s\)/,
    next: /ask at most 4 nvidia.com\/gpu per pod/,
    fixed: {
      given: evidence({ pods: pendingPods(), ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 8), ledgerNode("gpu-a2", 8)] } }),
      reason: "pending",
    },
  },
  {
    name: "a ResourceClaim not allocated and no slice publishing devices → dra-unsatisfiable",
    given: evidence({ pods: pendingPods({ gpus: 0, claims: ["gpus-0"] }), claims: [claim(false)] }),
    reason: "dra-unsatisfiable",
    evidence: /ResourceClaim team-a\/gpus-0: not allocated; requests gpu: 8 × gpu.nvidia.com/,
    next: /no DRA driver publishes devices/,
    fixed: { given: evidence({ pods: pendingPods({ gpus: 0, claims: ["gpus-0"] }), claims: [claim(true)] }), reason: "pending" },
  },
  {
    name: "1 of 2 pods running, the other being created → gang-partial, with the GPUs held idle and for how long",
    given: evidence({
      pods: [pod({ name: "llm-worker-0", node: "gpu-a1", startTime: ago(2520) }), pod({ name: "llm-worker-1", phase: "Pending" })],
      ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 0), ledgerNode("gpu-a2", 8)] },
    }),
    reason: "gang-partial",
    evidence: /the running pods hold 8 nvidia.com\/gpu since/,
    next: /waits for all its pods/,
    fixed: { given: evidence(), reason: "running" },
  },
  {
    name: "a warn-mode finding and nothing else known → warned, with the rule and field",
    given: evidence({
      pods: [],
      job: job(),
      policyResults: [
        {
          rule: "job-gpus",
          result: "warn",
          mode: "warn",
          field: "spec",
          message: "the job asks 16 nvidia.com/gpu, over the namespace's 8",
          object: "PyTorchJob/llm",
          uid: "uid-llm",
        },
      ],
    }),
    reason: "warned",
    evidence: /rule job-gpus at spec \(warn\)/,
    next: /fix spec before the rule moves to deny/,
    also: ["pending"],
    fixed: { given: evidence({ pods: [], job: job() }), reason: "pending" },
  },
  {
    name: "both pods Running → running",
    given: evidence(),
    reason: "running",
    evidence: /2 of 2 pods Running/,
    next: /nothing/,
  },
];

/** Two causes at once: the main one first by the order, the other in `also`. */
const TWO_CAUSES: Case[] = [
  {
    name: "admitted with quota reserved, controller not running → no-controller first, phantom-reservation also",
    given: evidence({
      ...runningWithQueue,
      pods: [],
      job: job({ queue: "gpu", conditions: [] }),
      kind: kindFacts({ controller: { name: "training-operator", state: "not-running", detail: "Deployment kubeflow/training-operator: 0 of 1 ready" } }),
    }),
    reason: "no-controller",
    evidence: /0 of 1 ready/,
    next: /install or restart training-operator/,
    also: ["phantom-reservation"],
  },
  {
    name: "no device ledger, the nodes' allocatable enough, kube-scheduler says Insufficient nvidia.com/gpu → no-gpu-shape, with the ask",
    given: evidence({
      pods: [
        pod({
          name: "llm-worker-0",
          phase: "Pending",
          scheduled: {
            reason: "Unschedulable",
            message: "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector.",
          },
        }),
      ],
      ledger: undefined,
    }),
    reason: "no-gpu-shape",
    evidence: /asks 8 nvidia\.com\/gpu per pod .*kube-scheduler finds no node with that many free \(no device ledger read/,
    next: /ask fewer GPUs per pod/,
  },
  {
    name: "1 of 2 running, the other Unschedulable for Insufficient cpu on nodes with free GPUs and other nodes' selectors → gang-partial, not no-gpu-shape or no-matching-node",
    given: evidence({
      pods: [
        pod({ name: "llm-worker-0", node: "gpu-a1", gpus: 1 }),
        pod({
          name: "llm-worker-1",
          phase: "Pending",
          gpus: 1,
          scheduled: {
            reason: "Unschedulable",
            message: "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/5 nodes are available",
          },
        }),
      ],
      ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 7), ledgerNode("gpu-a2", 8)] },
    }),
    reason: "gang-partial",
    evidence: /2 pods expected, 1 running/,
    next: /waits for all its pods/,
    also: ["pending"],
  },
  {
    name: "1 of 2 running, the other fits no free block → no-gpu-shape first, gang-partial also",
    given: evidence({
      pods: [pod({ name: "llm-worker-0", node: "gpu-a1" }), pod({ name: "llm-worker-1", phase: "Pending" })],
      ledger: { generatedAt: ago(30), nodes: [ledgerNode("gpu-a1", 0), ledgerNode("gpu-a2", 4)] },
    }),
    reason: "no-gpu-shape",
    evidence: /largest free block 4 on gpu-a2/,
    next: /ask at most 4/,
    also: ["gang-partial"],
  },
];

const lines = (v: Verdict): string[] => v.evidence.map((e) => `${e.object}: ${e.text}`);

describe("explainJob", () => {
  for (const tc of [...CASES, ...TWO_CAUSES]) {
    it(tc.name, () => {
      const v = explainJob(deepFreeze(tc.given), NOW);
      assert.equal(v.reason, tc.reason, `${v.reason}: ${v.summary}\n${lines(v).join("\n")}`);
      assert.ok(
        lines(v).some((l) => tc.evidence.test(l)),
        `no evidence matches ${tc.evidence}:\n${lines(v).join("\n")}`,
      );
      assert.match(v.next, tc.next);
      if (tc.summary) assert.match(v.summary, tc.summary);
      if (tc.also)
        assert.deepEqual(
          v.also.map((f) => f.reason),
          tc.also,
        );
      for (const f of [v, ...v.also]) assert.ok(f.next.length > 0 && f.evidence.length > 0, `${f.reason} has a next step and evidence`);
    });
  }

  describe("with the cause removed, the verdict moves on", () => {
    for (const tc of CASES.filter((c) => c.fixed)) {
      it(`${tc.reason} → ${tc.fixed!.reason}`, () => {
        const v = explainJob(deepFreeze(tc.fixed!.given), NOW);
        assert.equal(v.reason, tc.fixed!.reason, `${v.reason}: ${v.summary}\n${lines(v).join("\n")}`);
        assert.ok(!v.also.some((f) => f.reason === tc.reason), `${tc.reason} no longer holds`);
      });
    }
  });

  it("has a case for every reason", () => {
    const covered = new Set(CASES.map((c) => c.reason));
    assert.deepEqual(
      REASONS.filter((r) => !covered.has(r) && r !== "pending"),
      [],
    );
  });
});

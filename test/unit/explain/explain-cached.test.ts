/**
 * `explain`'s verdict from the resident reconciler's caches (src/explain/cached.ts, issue 49): the same verdict
 * function over a job, its trimmed pods (as src/kube/cluster.ts slimPod keeps them) and the nodes, each node's
 * free GPUs counted from the cached pods; what the caches lack (Kueue) never makes a wrong reason.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { cachedEvidence, nodeEntriesFromCaches } from "../../../src/explain/cached.js";
import { knownKinds } from "../../../src/explain/kinds.js";
import { explainJob } from "../../../src/explain/verdict.js";
import { verdictMemo } from "../../../src/explain/pods.js";
import { slimPod } from "../../../src/kube/cluster.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { NOW, job, node, pod } from "../../fixtures/explain.js";

const policy = defaultPolicy();
const pytorch = knownKinds(policy).find((k) => k.kind === "PyTorchJob")!;
const settings = { gpu: policy.gpu, acceleratorLabel: policy.accelerator.nodeLabel, graceSeconds: 120 };
const taint = { key: "dedicated", value: "research", effect: "NoSchedule" };

/** The verdict as the reconciler computes it: pods trimmed as its informer keeps them. */
function verdictFromCaches(o: { job?: KubeObject; pods: KubeObject[]; nodes: KubeObject[]; others?: KubeObject[] }) {
  const pods = o.pods.map((p) => slimPod(p));
  const nodes = o.nodes;
  const ledger = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, [...pods, ...(o.others ?? []).map((p) => slimPod(p))], policy.gpu) };
  return explainJob(cachedEvidence({ kind: pytorch, job: o.job ?? job({ replicas: 1 }), pods }, nodes, ledger, settings), NOW);
}

const pendingPod = (name: string, gpus = 8) => pod({ name, phase: "Pending", gpus });

describe("explain from the reconciler's caches", () => {
  it("untolerated-taint: the trimmed pod keeps its tolerations while unbound", () => {
    const v = verdictFromCaches({ pods: [pendingPod("llm-worker-0")], nodes: [node("gpu-a", { taints: [taint] })] });
    assert.equal(v.reason, "untolerated-taint", JSON.stringify(v));
    assert.match(v.next, /dedicated=research:NoSchedule/);
  });

  it("the pod tolerating the taint: no longer untolerated-taint", () => {
    const tolerating = pendingPod("llm-worker-0");
    (tolerating.spec as any).tolerations.push({ key: "dedicated", operator: "Exists", effect: "NoSchedule" });
    const v = verdictFromCaches({ pods: [tolerating], nodes: [node("gpu-a", { taints: [taint] })] });
    assert.equal(v.reason, "pending");
  });

  it("no-gpu-shape: the node's GPUs held by another job's pod bound there (counted from the pods cache)", () => {
    const other = pod({ name: "other-0", node: "gpu-a", gpus: 4 });
    const v = verdictFromCaches({ pods: [pendingPod("llm-worker-0")], nodes: [node("gpu-a")], others: [other] });
    assert.equal(v.reason, "no-gpu-shape", JSON.stringify(v));
    assert.ok(
      v.evidence.some((e) => /largest free block 4 on gpu-a/.test(e.text)),
      JSON.stringify(v.evidence),
    );
    // The other pod gone: 8 free, the pod fits.
    assert.equal(verdictFromCaches({ pods: [pendingPod("llm-worker-0")], nodes: [node("gpu-a")] }).reason, "pending");
  });

  it("no-matching-node: the trimmed pod keeps its nodeSelector while unbound", () => {
    const p = pod({ name: "llm-worker-0", phase: "Pending", nodeSelector: { "nvidia.com/gpu.product": "H100-SXM5-80GB" } });
    assert.equal(verdictFromCaches({ pods: [p], nodes: [node("gpu-a")] }).reason, "no-matching-node");
  });

  it("running: every pod Running", () => {
    assert.equal(verdictFromCaches({ pods: [pod({ name: "llm-worker-0", node: "gpu-a" })], nodes: [node("gpu-a")] }).reason, "running");
  });

  it("a job suspended for a queue, Kueue unread: queued, not inadmissible", () => {
    const v = verdictFromCaches({ job: job({ suspend: true, queue: "gpu", replicas: 1 }), pods: [], nodes: [node("gpu-a")] });
    assert.equal(v.reason, "queued", JSON.stringify(v));
    assert.match(v.next, /quartermaster explain pytorchjob\/llm -n team-a/);
  });

  it("counts each node's GPUs from the bound pods that hold them", () => {
    const pods = [
      pod({ name: "a", node: "gpu-a", gpus: 2 }),
      pod({ name: "b", node: "gpu-a", gpus: 3 }),
      pod({ name: "c", node: "gpu-a", gpus: 8, phase: "Succeeded" }),
      pendingPod("d"),
    ].map((p) => slimPod(p));
    const [entry] = nodeEntriesFromCaches([node("gpu-a")], pods, policy.gpu);
    assert.deepEqual(entry!.resources["nvidia.com/gpu"], { allocatable: 8, allocated: 5, capacity: 8, free: 3, inactive: false, overCommitted: false });
    assert.deepEqual(Object.keys(entry!.resources), ["nvidia.com/gpu"], "cpu is no GPU");
  });
});

describe("a verdict memo shared by a tick's verdicts", () => {
  it("gives each job the verdict it gets alone, keyed by the nodes and the ledger it was given", () => {
    const nodes = [node("gpu-a"), node("gpu-b", { taints: [taint] })];
    const full = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, [slimPod(pod({ name: "o", node: "gpu-a", gpus: 8 }))], policy.gpu) };
    const empty = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, [], policy.gpu) };
    const memo = verdictMemo();
    const pods = [slimPod(pendingPod("llm-worker-0"))];
    const ev = (ledger: typeof full) => cachedEvidence({ kind: pytorch, job: job({ replicas: 1 }), pods }, nodes, ledger, settings);
    const alone = [explainJob(ev(full), NOW), explainJob(ev(empty), NOW)];
    const shared = [explainJob(ev(full), NOW, memo), explainJob(ev(empty), NOW, memo), explainJob(ev(full), NOW, memo)];
    assert.deepEqual(
      alone.map((v) => v.reason),
      ["no-gpu-shape", "pending"],
    );
    assert.deepEqual(shared, [...alone, alone[0]]);
  });
});

describe("slimPod keeps an unbound pod's placement", () => {
  const placed = {
    metadata: { name: "p", namespace: "n" },
    spec: {
      nodeSelector: { zone: "a" },
      affinity: {
        nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "k", operator: "Exists" }] }] } },
        podAntiAffinity: { x: 1 },
      },
      tolerations: [{ key: "t", operator: "Exists" }],
      containers: [{ name: "c" }],
    },
  };
  it("unbound: nodeSelector, required node affinity and tolerations (nothing else of the affinity)", () => {
    const s = slimPod(placed).spec as any;
    assert.deepEqual(s.nodeSelector, { zone: "a" });
    assert.deepEqual(Object.keys(s.affinity), ["nodeAffinity"]);
    assert.deepEqual(s.tolerations, [{ key: "t", operator: "Exists" }]);
  });
  it("bound: none of it", () => {
    const s = slimPod({ ...placed, spec: { ...placed.spec, nodeName: "n1" } }).spec as any;
    assert.equal(s.nodeSelector ?? s.affinity ?? s.tolerations, undefined);
  });
});

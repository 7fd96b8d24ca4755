/**
 * The reconciler trims listed pods and services to what its planners read (memory at 100,000 pods). The plan
 * over trimmed objects must be the plan over whole ones, and client-node's Date timestamps become ISO text.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { slimNamespace, slimNode, slimPod, slimService } from "../../../src/kube/cluster.js";
import { buildLedger } from "../../../src/ledger/compute.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { planPass } from "../../../src/reconcile/plan.js";
import { gpuPod, node, nodeLease, SCOPE, snapshotOf } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const NOW = new Date("2026-11-22T12:00:00Z");

/** A pod as client-node hands it over: Date timestamps, and every field the planners never read. */
function typedPod(name: string, o: { owned?: boolean; node?: string; phase?: string; deleting?: boolean } = {}): KubeObject {
  const p = gpuPod(name, { node: o.node, phase: o.phase, createdAt: new Date(NOW.getTime() - 900_000) }) as any;
  p.metadata.labels = {
    "training.kubeflow.org/job-name": "mnist",
    "training.kubeflow.org/operator-name": "tfjob-controller",
    "training.kubeflow.org/replica-type": "worker",
    "training.kubeflow.org/replica-index": name.slice(-1),
  };
  if (o.owned) p.metadata.ownerReferences = [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true }];
  p.metadata.creationTimestamp = new Date(p.metadata.creationTimestamp);
  if (o.deleting) p.metadata.deletionTimestamp = new Date(NOW.getTime() - 1000);
  // kubectl created it; the reconciler adopted the owned ones in an earlier pass (the Service planner reads that record).
  p.metadata.managedFields = [
    { manager: "kubectl", operation: "Update", time: new Date(NOW), fieldsType: "FieldsV1", fieldsV1: { "f:spec": { "f:containers": {} } } },
  ];
  if (o.owned)
    p.metadata.managedFields.push({
      manager: "quartermaster-reconciler",
      operation: "Update",
      time: new Date(NOW),
      fieldsType: "FieldsV1",
      fieldsV1: { "f:metadata": { "f:ownerReferences": { ".": {}, 'k:{"uid":"uid-mnist"}': { ".": {}, "f:uid": {} } } } },
    });
  p.metadata.annotations = { big: "x".repeat(1000) };
  p.spec.volumes = [{ name: "data", emptyDir: {} }];
  p.spec.containers[0].env = [{ name: "A", value: "b" }];
  p.status.conditions = [
    { type: "PodScheduled", status: "False", reason: "Unschedulable", message: "no GPUs" },
    { type: "Ready", status: "False" },
  ];
  p.status.containerStatuses = [{ name: "main", ready: false }];
  return p;
}

const iso = (x: unknown): unknown => JSON.parse(JSON.stringify(x));

describe("trimmed pods and services", () => {
  const pods = [
    typedPod("mnist-worker-0", { owned: true, node: "gpu-1" }),
    typedPod("mnist-worker-1"),
    typedPod("mnist-worker-2", { owned: true, node: "gpu-1", deleting: true }),
    typedPod("mnist-worker-3", { owned: true }),
  ];
  const services = [
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "mnist-worker-0", namespace: "team-a", uid: "s0", labels: { a: "b" }, creationTimestamp: new Date(NOW) },
      spec: { clusterIP: "None", ports: [{ port: 2222 }] },
    },
  ];
  const snap = (p: KubeObject[], s: KubeObject[]) =>
    snapshotOf({
      jobs: [{ kind: kindOf("TFJob"), job: job("TFJob", "mnist", "team-a", { Worker: { replicas: 4, port: 2222 } }) }],
      pods: p,
      services: s,
      nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })],
      nodeLeases: [nodeLease("gpu-1", NOW)],
    });

  it("the plan (claims, Services, deletions, ledger) over trimmed objects equals the plan over whole ones", () => {
    const whole = planPass(snap(iso(pods) as KubeObject[], iso(services) as KubeObject[]), NOW, defaultPolicy(), SCOPE);
    const cache = new Map();
    const trimmed = planPass(
      snap(
        pods.map((p) => slimPod(p, cache)),
        services.map(slimService),
      ),
      NOW,
      defaultPolicy(),
      SCOPE,
    );
    assert.deepEqual(iso(trimmed), iso(whole));
    assert.ok(whole.claims.length > 0 && whole.creates.length > 0 && whole.ledger.pending.length > 0, "the case exercises claims, Services and the ledger");
  });

  it("timestamps become ISO text; what no planner reads is gone", () => {
    const p = slimPod(pods[2]!) as any;
    assert.equal(p.metadata.creationTimestamp, new Date(NOW.getTime() - 900_000).toISOString());
    assert.equal(p.metadata.deletionTimestamp, new Date(NOW.getTime() - 1000).toISOString());
    assert.deepEqual(
      p.metadata.managedFields,
      [{ manager: "quartermaster-reconciler", operation: "Update", fieldsV1: { "f:metadata": { "f:ownerReferences": { 'k:{"uid":"uid-mnist"}': {} } } } }],
      "of managedFields, who set which ownerReference",
    );
    assert.equal((slimPod(pods[1]!) as any).metadata.managedFields, undefined, "no ownerReference set: no managedFields");
    const cache = new Map();
    const [a, b] = [slimPod(pods[0]!, cache) as any, slimPod(pods[3]!, cache) as any];
    assert.equal(a.metadata.managedFields, b.metadata.managedFields, "the pods of a job share one trimmed managedFields");
    assert.ok(Object.isFrozen(a.metadata.managedFields[0].fieldsV1["f:metadata"]), "shared, so frozen");
    for (const [part, of] of [
      ["owner references", (x: any) => x.metadata.ownerReferences],
      ["containers", (x: any) => x.spec.containers],
      ["container statuses", (x: any) => x.status.containerStatuses],
    ] as const) {
      assert.ok(of(a) !== undefined, `${part}: the case has them`);
      assert.equal(of(a), of(b), `${part}: equal, so shared`);
      assert.ok(Object.isFrozen(of(a)) && Object.isFrozen(of(a)[0]), `${part}: shared, so frozen`);
    }
    const other = structuredClone(pods[3]!) as any;
    other.spec.containers[0].resources = { limits: { "nvidia.com/gpu": "4" } };
    const c = slimPod(other, cache) as any;
    assert.notEqual(c.spec.containers, a.spec.containers, "other resources: a copy of its own");
    assert.deepEqual(c.spec.containers[0].resources, { limits: { "nvidia.com/gpu": "4" } });
    for (const gone of [p.metadata.annotations, p.spec.volumes, p.spec.containers[0].env]) assert.equal(gone, undefined);
    // Container statuses keep only what the job controller reads: name, restartCount, the terminated exit code.
    for (const s of p.status.containerStatuses)
      assert.deepEqual(
        Object.keys(s).filter((k) => k !== "state"),
        ["name", "restartCount"],
      );
    assert.deepEqual(p.status.conditions, [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "no GPUs" }]);
    assert.deepEqual(Object.keys(slimService(services[0]!)), ["apiVersion", "kind", "metadata"]);
  });
});

describe("nodes and namespaces trimmed", () => {
  /** A node as client-node hands it over: Date heartbeats, many conditions, images and the rest. */
  const typedNode = (beat: Date): any => ({
    metadata: { name: "n1", uid: "u1", labels: { a: "b" }, managedFields: [{}] },
    status: {
      capacity: { "nvidia.com/gpu": "8" },
      allocatable: { "nvidia.com/gpu": "8" },
      images: [{ names: ["x"] }],
      conditions: [
        { type: "MemoryPressure", status: "False", lastHeartbeatTime: beat },
        { type: "Ready", status: "True", lastHeartbeatTime: beat, reason: "KubeletReady", message: "ok" },
      ],
    },
  });
  it("a node keeps its Ready condition's heartbeat (as ISO text) and nothing else of its conditions", () => {
    const n = slimNode(typedNode(new Date(NOW.getTime() - 10_000))) as any;
    assert.deepEqual(n.status.conditions, [{ type: "Ready", status: "True", lastHeartbeatTime: new Date(NOW.getTime() - 10_000).toISOString() }]);
    assert.equal(n.status.images, undefined);
  });
  it("a node keeps only the labels asked for (the Kueue flavors' keys), none by default", () => {
    const labelled = {
      ...typedNode(new Date(NOW.getTime())),
      metadata: { name: "gpu-1", uid: "u", labels: { "nvidia.com/gpu.product": "H100", "kubernetes.io/hostname": "gpu-1" } },
    };
    const cases: Array<[string, ReadonlySet<string> | undefined, unknown]> = [
      ["no keys asked for", undefined, undefined],
      ["the flavor's key", new Set(["nvidia.com/gpu.product"]), { "nvidia.com/gpu.product": "H100" }],
      ["a key the node lacks", new Set(["pool"]), undefined],
    ];
    for (const [name, keep, want] of cases) assert.deepEqual((slimNode(labelled, keep) as any).metadata.labels, want, name);
  });
  it("the ledger over a trimmed node without a Lease: a fresh heartbeat → not stale; an old one → stale", () => {
    const stale = (ago: number) =>
      buildLedger({ nodes: [slimNode(typedNode(new Date(NOW.getTime() - ago)))], nodeLeases: [], pods: [], jobs: new Set() }, NOW, defaultPolicy()).nodes[0]!
        .stale;
    assert.deepEqual([stale(10_000), stale(60_000)], [false, true]);
  });
  it("a namespace keeps its name and labels", () => {
    assert.deepEqual(
      slimNamespace({ metadata: { name: "team-a", labels: { "quartermaster.dev/enabled": "true" }, annotations: { x: "y" } }, status: { phase: "Active" } }),
      { name: "team-a", labels: { "quartermaster.dev/enabled": "true" } },
    );
    assert.deepEqual(slimNamespace({ metadata: { name: "bare" } }), { name: "bare" });
  });
});

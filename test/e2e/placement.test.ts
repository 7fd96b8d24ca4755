/**
 * End to end: placement proven by the real kube-scheduler. Ten virtual nodes of nine shapes, labelled and
 * tainted as GPU clusters are (test/fixtures/nodes.ts: NVIDIA GPU feature discovery's labels under the
 * mixed and single MIG strategies, a MIG-disabled A100, H100 and L4 without MIG, an AMD node, spot nodes
 * with AKS's label and taint, CPU-only nodes). The same pods are created in a namespace where Quartermaster's
 * webhooks act and in one where they do not; each is then bound by the scheduler (or left Unschedulable),
 * and the node it got is compared with where the policy says it belongs.
 *
 * The webhook runs with the DEFAULT accelerator settings (the policy below sets only the interruptible
 * placement, which has no default): `nvidia.com/gpu.product` and GFD's MIG labels. The nodes' labels are
 * literals in test/fixtures/nodes.ts, written from what the operators set and never derived from the
 * policy, so a default label that no real node carries leaves these pods unschedulable and the suite fails.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1NodeSelectorTerm, V1Toleration } from "@kubernetes/client-node";
import { defaultPolicy } from "../../src/policy/load.js";
import { PLACEMENT_CLUSTER, SPOT_LABEL, SPOT_TAINT, matchesNodeAffinity } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { createNamespace, type WebhookProcess, startOwnWebhook } from "./harness/webhook.js";

const WITH = "placed"; // opted in: Quartermaster's webhooks act here
const WITHOUT = "unplaced"; // not opted in: the same pods as users wrote them
// Not opted in either, but the pods tolerate their GPU resources' taints, as the ExtendedResourceToleration
// admission plugin would make them: what the tolerations alone buy, without the placement.
const TOLERATED = "tolerated";
const NAMESPACES = [WITH, WITHOUT, TOLERATED] as const;

/** Lease and status renewal, as a kubelet's default (10 s). */
const RENEW_MS = 10_000;

const A100 = "A100-SXM4-40GB";
const H100 = "NVIDIA-H100-80GB-HBM3";
const L4 = "NVIDIA-L4";

interface Case {
  name: string;
  annotations?: Record<string, string>;
  /** Extended resources, as limits (and the same requests). */
  gpus?: Record<string, string>;
  cpu?: string;
  tolerations?: V1Toleration[];
  terms?: V1NodeSelectorTerm[];
  labels?: Record<string, string>;
  replicas?: number;
  /** Nodes the policy allows, with the webhooks; [] when the pod must stay Unschedulable. */
  placed: string[];
  /** Where the pod as written can go, without the webhooks; [] for Unschedulable. */
  unplaced: string[];
}

const GPU_NODES_NOT_SPOT = ["a100-single", "a100-mig-disabled", "h100-no-mig", "h100-zone-b", "l4"];
const NOT_SPOT = PLACEMENT_CLUSTER.filter((n) => n.labels[SPOT_LABEL.key] !== SPOT_LABEL.value).map((n) => n.name);

const CASES: Case[] = [
  // First, so every node is empty when it is scheduled. The pod's own required terms stay, with the
  // placement ANDed into each: zone-b holds h100-zone-b, h100-spot and l4; l4 (the larger, so preferred
  // node) is allowed by the second term alone, never with the H100 requirement.
  {
    name: "own-affinity-h100",
    annotations: { "quartermaster.dev/accelerator": H100 },
    gpus: { "nvidia.com/gpu": "1" },
    terms: [
      { matchExpressions: [{ key: "topology.kubernetes.io/zone", operator: "In", values: ["zone-b"] }] },
      { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["l4"] }] },
    ],
    replicas: 2,
    placed: ["h100-zone-b"],
    unplaced: [],
  },
  { name: "gpu-a100", annotations: { "quartermaster.dev/accelerator": A100 }, gpus: { "nvidia.com/gpu": "1" }, placed: ["a100-mig-disabled"], unplaced: [] },
  {
    name: "gpu-h100",
    annotations: { "quartermaster.dev/accelerator": H100 },
    gpus: { "nvidia.com/gpu": "1" },
    replicas: 2,
    placed: ["h100-no-mig", "h100-zone-b"],
    unplaced: [],
  },
  { name: "gpu-l4", annotations: { "quartermaster.dev/accelerator": L4 }, gpus: { "nvidia.com/gpu": "1" }, placed: ["l4"], unplaced: [] },
  // No accelerator asked: any NVIDIA node with nvidia.com/gpu to give (a100-single's are MIG slices), not spot.
  { name: "gpu-any", gpus: { "nvidia.com/gpu": "1" }, replicas: 2, placed: GPU_NODES_NOT_SPOT, unplaced: [] },
  // Mixed strategy: the slice is its own resource; only a100-mixed offers it (and it is tainted nvidia.com/gpu).
  {
    name: "mig-1g5gb-mixed",
    annotations: { "quartermaster.dev/gpu-partition": "1g.5gb" },
    gpus: { "nvidia.com/mig-1g.5gb": "1" },
    replicas: 2,
    placed: ["a100-mixed"],
    unplaced: [],
  },
  {
    name: "mig-2g10gb-mixed",
    annotations: { "quartermaster.dev/gpu-partition": "2g.10gb" },
    gpus: { "nvidia.com/mig-2g.10gb": "1" },
    placed: ["a100-mixed"],
    unplaced: [],
  },
  {
    name: "mig-1g5gb-a100-mixed",
    annotations: { "quartermaster.dev/accelerator": A100, "quartermaster.dev/gpu-partition": "1g.5gb" },
    gpus: { "nvidia.com/mig-1g.5gb": "1" },
    placed: ["a100-mixed"],
    unplaced: [],
  },
  // Single strategy: the slice is an nvidia.com/gpu on a node whose product is A100-SXM4-40GB-MIG-1g.5gb.
  {
    name: "mig-1g5gb-a100-single",
    annotations: { "quartermaster.dev/accelerator": A100, "quartermaster.dev/gpu-partition": "1g.5gb" },
    gpus: { "nvidia.com/gpu": "1" },
    replicas: 2,
    placed: ["a100-single"],
    unplaced: [],
  },
  // `none`: whole GPUs only. a100-single (MIG slices as nvidia.com/gpu) is the largest node that fits: a
  // missing requirement would put these pods there.
  {
    name: "partition-none",
    annotations: { "quartermaster.dev/gpu-partition": "none" },
    gpus: { "nvidia.com/gpu": "1" },
    replicas: 3,
    placed: ["a100-mig-disabled", "h100-no-mig", "h100-zone-b", "l4"],
    unplaced: [],
  },
  {
    name: "partition-none-a100",
    annotations: { "quartermaster.dev/accelerator": A100, "quartermaster.dev/gpu-partition": "none" },
    gpus: { "nvidia.com/gpu": "1" },
    placed: ["a100-mig-disabled"],
    unplaced: [],
  },
  { name: "gpu-amd", gpus: { "amd.com/gpu": "1" }, placed: ["amd-mi250"], unplaced: [] },
  {
    name: "interruptible-h100",
    annotations: { "quartermaster.dev/interruptible": "true", "quartermaster.dev/accelerator": H100 },
    gpus: { "nvidia.com/gpu": "1" },
    placed: ["h100-spot"],
    unplaced: [],
  },
  { name: "interruptible-cpu", annotations: { "quartermaster.dev/interruptible": "true" }, replicas: 2, placed: ["cpu-spot"], unplaced: ["cpu"] },
  // A pod that tolerates every taint and is not interruptible: kept off spot even where only spot has room.
  { name: "tolerates-all-big", tolerations: [{ operator: "Exists" }], cpu: "200", placed: [], unplaced: ["h100-spot", "cpu-spot"] },
  { name: "tolerates-all", tolerations: [{ operator: "Exists" }], placed: NOT_SPOT, unplaced: PLACEMENT_CLUSTER.map((n) => n.name) },
  { name: "cpu-trainer", placed: ["cpu"], unplaced: ["cpu"] },
  { name: "web", labels: { app: "web" }, placed: ["cpu"], unplaced: ["cpu"] },
];

const POLICY = `# Only the interruptible placement (no defaults); accelerator and partition labels are the defaults.
interruptible:
  tolerations: [{key: ${SPOT_TAINT.key}, operator: Equal, value: ${SPOT_TAINT.value}, effect: ${SPOT_TAINT.effect}}]
  nodeRequirement: {key: ${SPOT_LABEL.key}, operator: In, values: [${SPOT_LABEL.value}]}
  nonInterruptibleNodeRequirement: {key: ${SPOT_LABEL.key}, operator: NotIn, values: [${SPOT_LABEL.value}]}
`;

function pod(c: Case, name: string, tolerateGpus = false): Record<string, unknown> {
  const gpus = c.gpus ?? {};
  const tolerations: V1Toleration[] = [...(c.tolerations ?? [])];
  if (tolerateGpus) {
    for (const r of Object.keys(gpus)) tolerations.push({ key: r, operator: "Exists", effect: "NoSchedule" });
    if (Object.keys(gpus).some((r) => r.startsWith("nvidia.com/mig-"))) tolerations.push({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
  }
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: c.labels ?? { "training.kubeflow.org/job-name": c.name, "training.kubeflow.org/replica-type": "worker" },
      annotations: c.annotations ?? {},
    },
    spec: {
      restartPolicy: "Never",
      ...(tolerations.length > 0 ? { tolerations } : {}),
      ...(c.terms ? { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: c.terms } } } } : {}),
      containers: [
        {
          name: "trainer",
          image: "registry.k8s.io/pause:3.10",
          // 8 cpu: large enough that least-allocated scoring ranks the nodes by size (see PLACEMENT_CLUSTER).
          resources: { requests: { cpu: c.cpu ?? "8", memory: "32Gi", ...gpus }, limits: { ...gpus } },
        },
      ],
    },
  };
}

type Outcome = { node: string } | { unschedulable: string };
const describeOutcome = (o: Outcome | undefined): string => (!o ? "no outcome" : "node" in o ? `bound to ${o.node}` : `Unschedulable: ${o.unschedulable}`);

describe("placement by the real kube-scheduler", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let nodes: VirtualNodes;
  const outcomes = new Map<string, Outcome>(); // `${namespace}/${pod}`
  const pods = new Map<string, any>();

  before(async () => {
    cp = await startControlPlane({ scheduler: true });
    nodes = await startVirtualNodes(cp, PLACEMENT_CLUSTER, RENEW_MS);
    await createNamespace(cp, WITH, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, WITHOUT);
    await createNamespace(cp, TOLERATED);
    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const configs = own.configs;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
    let probe = 0;
    await cp.until("the webhook configurations to take effect", async () => {
      const name = `probe-${++probe}`;
      await cp.api("POST", `/api/v1/namespaces/${WITH}/pods?dryRun=All`, pod(CASES[0]!, name));
      return (await wh.awaitAdmissions(name, 1, 1000)).some((l) => l.webhook === "mutate-pods");
    });

    // Every pod, in both namespaces, in case order (the scheduler's queue is FIFO at equal priority).
    for (const c of CASES) {
      for (let i = 0; i < (c.replicas ?? 1); i++) {
        for (const ns of NAMESPACES) {
          const r = await cp.api("POST", `/api/v1/namespaces/${ns}/pods`, pod(c, `${c.name}-${i}`, ns === TOLERATED));
          assert.equal(r.status, 201, `${ns}/${c.name}-${i}: ${JSON.stringify(r.body)}`);
        }
      }
    }
    // Bound (spec.nodeName) or found Unschedulable by the scheduler: each pod's outcome.
    const total = CASES.reduce((n, c) => n + (c.replicas ?? 1), 0) * NAMESPACES.length;
    await cp.until(
      `all ${total} pods bound or unschedulable`,
      async () => {
        for (const ns of NAMESPACES) {
          for (const p of (await cp.api("GET", `/api/v1/namespaces/${ns}/pods`)).body.items ?? []) {
            const key = `${ns}/${p.metadata.name}`;
            pods.set(key, p);
            const unschedulable = (p.status?.conditions ?? []).find(
              (c: any) => c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable",
            );
            if (p.spec.nodeName) outcomes.set(key, { node: p.spec.nodeName });
            else if (unschedulable) outcomes.set(key, { unschedulable: unschedulable.message });
          }
        }
        return outcomes.size >= total;
      },
      120_000,
      500,
    );
  });

  after(async () => {
    nodes?.stop();
    await wh?.stop();
    await cp?.stop();
  });

  it("covers at least 20 pods over at least 8 node shapes", (t) => {
    for (const [key, o] of [...outcomes].sort(([a], [b]) => a.localeCompare(b))) t.diagnostic(`${key}: ${describeOutcome(o).slice(0, 100)}`);
    const perNamespace = CASES.reduce((n, c) => n + (c.replicas ?? 1), 0);
    assert.ok(perNamespace >= 20, `${perNamespace} pods per namespace`);
    assert.ok(PLACEMENT_CLUSTER.length >= 8);
  });

  it("the virtual nodes are Ready with their allocatable, and their Leases are renewed", async () => {
    const before = new Map<string, number>();
    for (const n of PLACEMENT_CLUSTER) {
      const node = (await cp.api("GET", `/api/v1/nodes/${n.name}`)).body;
      assert.equal(node.status.conditions.find((c: any) => c.type === "Ready")?.status, "True", n.name);
      for (const [r, v] of Object.entries(n.allocatable)) assert.equal(node.status.allocatable[r], String(v), `${n.name} ${r}`);
      const lease = (await cp.api("GET", `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${n.name}`)).body;
      assert.equal(lease.spec.holderIdentity, n.name);
      before.set(n.name, Date.parse(lease.spec.renewTime));
    }
    await cp.until(
      "every node Lease renewed",
      async () => {
        for (const n of PLACEMENT_CLUSTER) {
          const lease = (await cp.api("GET", `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${n.name}`)).body;
          if (!(Date.parse(lease.spec.renewTime) > before.get(n.name)!)) return false;
        }
        return true;
      },
      RENEW_MS * 3,
      250,
    );
  });

  it("the webhook runs the default accelerator labels, and the fixture GPU nodes carry them (not the other way round)", () => {
    const policy = defaultPolicy();
    assert.equal(policy.accelerator.partitionNodeLabel, undefined, "partitions use GFD's labels by default");
    // Literal keys here, as in test/fixtures/nodes.ts: a default changed to a label no real node carries fails.
    assert.equal(policy.accelerator.nodeLabel, "nvidia.com/gpu.product");
    for (const n of PLACEMENT_CLUSTER)
      if (n.labels["nvidia.com/gpu.present"]) assert.ok(n.labels[policy.accelerator.nodeLabel], `${n.name} lacks ${policy.accelerator.nodeLabel}`);
  });

  for (const c of CASES) {
    for (const [ns, allowed] of [
      [WITH, c.placed],
      [WITHOUT, c.unplaced],
    ] as const) {
      const where =
        allowed.length === 0 ? "stays Unschedulable" : allowed.length === 1 ? `is bound to ${allowed[0]}` : `is bound to one of ${allowed.join(", ")}`;
      it(`${c.name} ${ns === WITH ? "with" : "without"} the webhooks ${where}`, () => {
        for (let i = 0; i < (c.replicas ?? 1); i++) {
          const key = `${ns}/${c.name}-${i}`;
          const o = outcomes.get(key);
          const p = pods.get(key);
          const context = `${key}: ${describeOutcome(o)}; affinity ${JSON.stringify(p?.spec?.affinity ?? null)}; tolerations ${JSON.stringify(p?.spec?.tolerations ?? [])}`;
          if (allowed.length === 0) {
            assert.ok(o && "unschedulable" in o, context);
          } else {
            assert.ok(o && "node" in o && allowed.includes(o.node), context);
            // The fixtures' pure NodeAffinity filter agrees with the scheduler about the node it chose.
            const node = PLACEMENT_CLUSTER.find((n) => n.name === (o as { node: string }).node)!;
            assert.ok(matchesNodeAffinity(p, node), `fixture matcher disagrees: ${context}`);
          }
        }
      });
    }
  }

  it("tolerations alone (no webhooks) let GPU pods schedule, but not where the policy says", () => {
    const wrong: string[] = [];
    for (const c of CASES) {
      if (!c.gpus) continue;
      for (let i = 0; i < (c.replicas ?? 1); i++) {
        const o = outcomes.get(`${TOLERATED}/${c.name}-${i}`);
        if (o && "node" in o && !c.placed.includes(o.node)) wrong.push(`${c.name}-${i} on ${o.node}`);
      }
    }
    // Deterministic: when the first tolerated A100 pod comes, nothing has landed on a100-single yet, and
    // least-allocated scoring prefers the largest node that fits: a100-single, whose GPUs are MIG slices.
    const first = outcomes.get(`${TOLERATED}/gpu-a100-0`);
    assert.deepEqual(first, { node: "a100-single" }, describeOutcome(first));
    assert.ok(wrong.length >= 3, `only ${wrong.length} misplaced: ${wrong.join("; ")}`);
  });

  it("the webhooks touched the training pods only where opted in; the CPU pods got no GPU tolerations", () => {
    for (const [key, p] of pods) {
      const mutations = p.metadata.annotations?.["quartermaster.dev/mutations"];
      if (!key.startsWith(`${WITH}/`) || key.startsWith(`${WITH}/web-`)) assert.equal(mutations, undefined, key);
      else assert.ok(mutations, key);
    }
    for (const key of [`${WITH}/cpu-trainer-0`, `${WITH}/web-0`]) {
      const keys = (pods.get(key).spec.tolerations ?? []).map((t: V1Toleration) => t.key);
      assert.ok(!keys.some((k: string) => k?.startsWith("nvidia.com/") || k?.startsWith("amd.com/")), `${key}: ${keys.join(", ")}`);
    }
  });
});

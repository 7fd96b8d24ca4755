/**
 * The device ledger's section per Kueue ResourceFlavor (src/ledger/kueue-quota.ts): quotas summed over the
 * ClusterQueues that list a flavor, the GPUs of the nodes its nodeLabels select, those in use there and Kueue's
 * own usage, as tables of named cases through `buildLedger`; then the section stored in the index and read back,
 * the table and the gauge.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Registry } from "prom-client";
import type { KubeObject } from "../../../src/core/kube.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { buildLedger, type LedgerInput } from "../../../src/ledger/compute.js";
import { kueueLedger, type KueueFlavorResource, type KueueObjects } from "../../../src/ledger/kueue-quota.js";
import { readStored, shardLedger, type StoredConfigMap } from "../../../src/ledger/shards.js";
import { registerLedgerMetrics } from "../../../src/reconcile/metrics.js";
import { ledgerTable } from "../../../src/reconcile/table.js";
import { gpuPod, node, nodeLease } from "../../fixtures/cluster.js";
import { clusterQueue, flavor } from "../../fixtures/kueue.js";

const T0 = new Date("2026-11-29T12:00:00Z");
const policy = defaultPolicy();
const PRODUCT = "nvidia.com/gpu.product";

function labelled(name: string, labels: Record<string, string>, gpus: Record<string, string>): KubeObject {
  const n = node(name, gpus);
  return { ...n, metadata: { ...(n.metadata as object), labels } };
}

const NODES = [
  labelled("a100-1", { [PRODUCT]: "A100-SXM4-80GB", pool: "on-demand" }, { "nvidia.com/gpu": "8" }),
  labelled("a100-2", { [PRODUCT]: "A100-SXM4-80GB", pool: "spot" }, { "nvidia.com/gpu": "8" }),
  labelled("h100-1", { [PRODUCT]: "H100-SXM5-80GB", pool: "on-demand" }, { "nvidia.com/gpu": "8" }),
  labelled("mig-1", { [PRODUCT]: "A100-SXM4-40GB-MIG-1g.5gb" }, { "nvidia.com/mig-1g.5gb": "7" }),
  labelled("cpu-1", { pool: "cpu" }, {}),
];
const PODS = [
  gpuPod("on-a100", { node: "a100-1", gpus: { "nvidia.com/gpu": 3 } }),
  gpuPod("on-h100", { node: "h100-1", gpus: { "nvidia.com/gpu": 8 } }),
  gpuPod("on-mig", { node: "mig-1", gpus: { "nvidia.com/mig-1g.5gb": 2 } }),
];

function section(kueue: KueueObjects | undefined, extra: Partial<LedgerInput> = {}) {
  return buildLedger(
    {
      nodes: NODES,
      nodeLeases: NODES.map((n) => nodeLease(String((n.metadata as { name: string }).name), T0)),
      pods: PODS,
      jobs: new Set(),
      ...(kueue ? { kueue } : {}),
      ...extra,
    },
    T0,
    policy,
  ).kueue;
}

/** The figures compared in the tables (quotas per ClusterQueue checked on their own). */
const figures = (r: KueueFlavorResource | undefined) =>
  r && {
    quota: r.quota,
    physical: r.physical,
    inUse: r.inUse,
    kueueUsage: r.kueueUsage,
    kueueReserved: r.kueueReserved,
    ...(r.borrowingLimit !== undefined ? { borrowingLimit: r.borrowingLimit } : {}),
    ...(r.unlimitedBorrowing ? { unlimitedBorrowing: true } : {}),
  };

describe("ledger per Kueue ResourceFlavor", () => {
  const cases: Array<{
    name: string;
    kueue: KueueObjects;
    flavor: string;
    resource: string;
    want: ReturnType<typeof figures>;
    nodes: number;
    clusterQueues?: string[];
  }> = [
    {
      name: "a flavor with nodeLabels: the nodes carrying every label, their allocatable and what is in use there",
      kueue: {
        resourceFlavors: [flavor("a100", { [PRODUCT]: "A100-SXM4-80GB" })],
        clusterQueues: [clusterQueue("team-a", { a100: { "nvidia.com/gpu": { nominalQuota: "12" }, cpu: { nominalQuota: "100" } } })],
      },
      flavor: "a100",
      resource: "nvidia.com/gpu",
      want: { quota: 12, physical: 16, inUse: 3, kueueUsage: 0, kueueReserved: 0 },
      nodes: 2,
    },
    {
      name: "two labels must both match: the on-demand A100 node alone",
      kueue: {
        resourceFlavors: [flavor("a100-od", { [PRODUCT]: "A100-SXM4-80GB", pool: "on-demand" })],
        clusterQueues: [clusterQueue("team-a", { "a100-od": { "nvidia.com/gpu": { nominalQuota: 8 } } })],
      },
      flavor: "a100-od",
      resource: "nvidia.com/gpu",
      want: { quota: 8, physical: 8, inUse: 3, kueueUsage: 0, kueueReserved: 0 },
      nodes: 1,
    },
    {
      name: "a flavor without nodeLabels selects every node",
      kueue: {
        resourceFlavors: [flavor("default-flavor")],
        clusterQueues: [clusterQueue("any", { "default-flavor": { "nvidia.com/gpu": { nominalQuota: 40 } } })],
      },
      flavor: "default-flavor",
      resource: "nvidia.com/gpu",
      want: { quota: 40, physical: 24, inUse: 11, kueueUsage: 0, kueueReserved: 0 },
      nodes: 5,
    },
    {
      name: "a MIG flavor: the policy's nvidia.com/mig-* resources are GPUs",
      kueue: {
        resourceFlavors: [flavor("mig-1g", { [PRODUCT]: "A100-SXM4-40GB-MIG-1g.5gb" })],
        clusterQueues: [
          clusterQueue("team-mig", { "mig-1g": { "nvidia.com/mig-1g.5gb": { nominalQuota: "7" } } }, { usage: { "mig-1g": { "nvidia.com/mig-1g.5gb": "2" } } }),
        ],
      },
      flavor: "mig-1g",
      resource: "nvidia.com/mig-1g.5gb",
      want: { quota: 7, physical: 7, inUse: 2, kueueUsage: 2, kueueReserved: 0 },
      nodes: 1,
    },
    {
      name: "two ClusterQueues sharing a flavor: quotas, usage and reservations summed; borrowing limits of a cohort summed",
      kueue: {
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [
          clusterQueue(
            "team-a",
            { h100: { "nvidia.com/gpu": { nominalQuota: "8", borrowingLimit: "4" } } },
            { cohort: "research", usage: { h100: { "nvidia.com/gpu": "8" } }, reserved: { h100: { "nvidia.com/gpu": "8" } } },
          ),
          clusterQueue(
            "team-b",
            { h100: { "nvidia.com/gpu": { nominalQuota: "8", borrowingLimit: "2", lendingLimit: "4" } } },
            { cohort: "research", reserved: { h100: { "nvidia.com/gpu": "4" } } },
          ),
        ],
      },
      flavor: "h100",
      resource: "nvidia.com/gpu",
      want: { quota: 16, physical: 8, inUse: 8, kueueUsage: 8, kueueReserved: 12, borrowingLimit: 6 },
      nodes: 1,
      clusterQueues: ["team-a", "team-b"],
    },
    {
      name: "a ClusterQueue of a cohort without a borrowing limit: unlimited borrowing",
      kueue: {
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "4" } } }, { cohort: "research" })],
      },
      flavor: "h100",
      resource: "nvidia.com/gpu",
      want: { quota: 4, physical: 8, inUse: 8, kueueUsage: 0, kueueReserved: 0, unlimitedBorrowing: true },
      nodes: 1,
    },
    {
      name: "a flavor selecting no nodes: physical 0 beside its quota",
      kueue: {
        resourceFlavors: [flavor("b200", { [PRODUCT]: "B200" })],
        clusterQueues: [clusterQueue("team-a", { b200: { "nvidia.com/gpu": { nominalQuota: "16" } } })],
      },
      flavor: "b200",
      resource: "nvidia.com/gpu",
      want: { quota: 16, physical: 0, inUse: 0, kueueUsage: 0, kueueReserved: 0 },
      nodes: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const k = section(c.kueue);
      const f = k?.flavors.find((x) => x.name === c.flavor);
      assert.ok(f, JSON.stringify(k));
      assert.deepEqual(figures(f.resources[c.resource]), c.want);
      assert.equal(f.nodes, c.nodes);
      if (c.clusterQueues) assert.deepEqual(f.clusterQueues, c.clusterQueues);
    });
  }

  it("Kueue absent: no section at all (and the ledger's JSON has no kueue key)", () => {
    assert.equal(section(undefined), undefined);
    const l = buildLedger({ nodes: NODES, nodeLeases: [], pods: PODS, jobs: new Set() }, T0, policy);
    assert.ok(!("kueue" in l));
  });

  it("Kueue installed with nothing configured: an empty section", () => {
    assert.deepEqual(section({ resourceFlavors: [], clusterQueues: [] }), { flavors: [] });
  });

  it("per ClusterQueue quotas are kept, with cohort and limits; CPU quota is not a GPU", () => {
    const k = section({
      resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
      clusterQueues: [
        clusterQueue("team-b", { h100: { "nvidia.com/gpu": { nominalQuota: "8", lendingLimit: "4" }, cpu: { nominalQuota: "64" } } }, { cohort: "c" }),
        clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "2" } } }),
      ],
    });
    const f = k!.flavors[0]!;
    assert.deepEqual(Object.keys(f.resources), ["nvidia.com/gpu"]);
    assert.deepEqual(f.resources["nvidia.com/gpu"]!.quotas, [
      { clusterQueue: "team-a", nominalQuota: 2 },
      { clusterQueue: "team-b", cohort: "c", lendingLimit: 4, nominalQuota: 8 },
    ]);
  });

  it("a flavor a ClusterQueue names that does not exist is listed missing, with no nodes", () => {
    const k = section({ resourceFlavors: [], clusterQueues: [clusterQueue("team-a", { ghost: { "nvidia.com/gpu": { nominalQuota: "8" } } })] });
    assert.deepEqual(
      k!.flavors.map((f) => [f.name, f.missing, f.nodes, f.resources["nvidia.com/gpu"]?.physical]),
      [["ghost", true, 0, 0]],
    );
  });

  it("malformed objects count as absent, never throw", () => {
    const k = kueueLedger(
      {
        resourceFlavors: [{ metadata: {} }, { metadata: { name: "x" }, spec: { nodeLabels: "nope" } }],
        clusterQueues: [
          { metadata: { name: "q" }, spec: { resourceGroups: "nope" } },
          { metadata: { name: "r" }, spec: { resourceGroups: [{ flavors: [{ name: "x", resources: [{ name: "nvidia.com/gpu", nominalQuota: "lots" }] }] }] } },
        ],
      },
      [],
      policy.gpu.resources,
    );
    assert.deepEqual(figures(k.flavors.find((f) => f.name === "x")!.resources["nvidia.com/gpu"]), {
      quota: 0,
      physical: 0,
      inUse: 0,
      kueueUsage: 0,
      kueueReserved: 0,
    });
  });

  it("stored in the index and read back; printed by `quartermaster ledger`; exported as a gauge", async () => {
    const kueue = {
      resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" }), flavor("b200", { [PRODUCT]: "B200" })],
      clusterQueues: [
        clusterQueue(
          "team-a",
          { h100: { "nvidia.com/gpu": { nominalQuota: "16" } }, b200: { "nvidia.com/gpu": { nominalQuota: "8" } } },
          { usage: { h100: { "nvidia.com/gpu": "8" } } },
        ),
      ],
    };
    const l = buildLedger({ nodes: NODES, nodeLeases: [], pods: PODS, jobs: new Set(), kueue }, T0, policy);
    const { index, shards } = shardLedger(l, 512 * 1024);
    const stored = new Map<string, StoredConfigMap>(
      [index, ...shards].map((s) => [s.name, { name: s.name, uid: s.name, resourceVersion: "1", text: s.text, sha256: s.sha256 }]),
    );
    const read = readStored(stored);
    assert.deepEqual(read.problems, []);
    assert.deepEqual(read.ledger?.kueue, l.kueue);
    const text = ledgerTable(read.ledger!);
    assert.match(text, /KUEUE FLAVOR\s+RESOURCE\s+QUOTA\s+PHYSICAL\s+IN USE\s+KUEUE USAGE/);
    assert.match(text, /\nh100\s+nvidia\.com\/gpu\s+16\s+8\s+8\s+8\s+0\s+1\s+team-a\s+nvidia\.com\/gpu\.product=H100-SXM5-80GB\s+quota-over-physical/);
    assert.match(text, /\nb200\s+nvidia\.com\/gpu\s+8\s+0\s+0\s+0\s+0\s+0\s+team-a\s+\S+\s+no-nodes,quota-over-physical/);
    const registry = new Registry();
    registerLedgerMetrics(registry, () => ({ index: read.index!, readAt: T0.getTime() }));
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === "quartermaster_kueue_flavor_gpus")!;
    const series = Object.fromEntries(metric.values.map((v) => [`${v.labels.flavor}/${v.labels.kind}`, v.value]));
    assert.deepEqual(series, {
      "b200/quota": 8,
      "b200/physical": 0,
      "b200/in_use": 0,
      "b200/kueue_usage": 0,
      "b200/kueue_reserved": 0,
      "h100/quota": 16,
      "h100/physical": 8,
      "h100/in_use": 8,
      "h100/kueue_usage": 8,
      "h100/kueue_reserved": 0,
    });
  });

  it("an index without the section (no Kueue, or written before it) still reads; no gauge series", async () => {
    const l = buildLedger({ nodes: NODES, nodeLeases: [], pods: PODS, jobs: new Set() }, T0, policy);
    const { index } = shardLedger(l, 512 * 1024);
    assert.ok(!index.text.includes("kueue"));
    const registry = new Registry();
    registerLedgerMetrics(registry, () => ({ index: JSON.parse(index.text), readAt: 0 }));
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === "quartermaster_kueue_flavor_gpus")!;
    assert.deepEqual(metric.values, []);
  });
});

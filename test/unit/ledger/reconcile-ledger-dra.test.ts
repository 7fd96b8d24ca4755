import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { buildLedger, type Ledger, type LedgerInput } from "../../../src/ledger/compute.js";
import { canonicalJson, CHECKSUM_KEY, INDEX_KEY, shardLedger, readStored } from "../../../src/ledger/shards.js";
import { capacityOf, indexOfData } from "../../../src/run/ledger-index.js";
import { createAdmissionMetrics } from "../../../src/server/metrics.js";
import { ledgerTable } from "../../../src/reconcile/table.js";
import { deviceResource } from "../../../src/ledger/dra-usage.js";
import { gpuPod, node, nodeLease } from "../../fixtures/cluster.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const policy = defaultPolicy();
const fresh = (name: string) => nodeLease(name, at(-5));

function ledger(i: Partial<LedgerInput>, now = T0): Ledger {
  return buildLedger({ nodes: [], nodeLeases: [], pods: [], jobs: new Set(), ...i }, now, policy);
}
const res = (l: Ledger, nodeName: string, r = "nvidia.com/gpu") => l.nodes.find((n) => n.name === nodeName)?.resources[r];

interface Dev {
  name: string;
  profile?: string;
}
function slice(nodeName: string, o: { driver?: string; pool?: string; generation?: number; devices: Array<string | Dev> }): KubeObject {
  const driver = o.driver ?? "gpu.nvidia.com";
  const pool = o.pool ?? nodeName;
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceSlice",
    metadata: { name: `${nodeName}-${driver}-${o.generation ?? 1}` },
    spec: {
      driver,
      nodeName,
      pool: { name: pool, generation: o.generation ?? 1, resourceSliceCount: 1 },
      devices: o.devices.map((d) => {
        const dev = typeof d === "string" ? { name: d } : d;
        return {
          name: dev.name,
          attributes: { type: { string: dev.profile ? "mig" : "gpu" }, ...(dev.profile ? { profile: { string: dev.profile } } : {}) },
        };
      }),
    },
  };
}
const gpus = (n: number, prefix = "gpu-") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

function claim(
  name: string,
  o: {
    namespace?: string;
    devices?: Array<{ device: string; pool?: string; driver?: string }>;
    node?: string;
    holders?: string[];
    spec?: unknown;
    annotations?: Record<string, string>;
  },
): KubeObject {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaim",
    metadata: { name, namespace: o.namespace ?? "team-a", uid: `uid-claim-${name}`, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: o.spec ?? { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count: o.devices?.length ?? 1 } }] } },
    status: {
      ...(o.devices
        ? {
            allocation: {
              devices: {
                results: o.devices.map((d) => ({ request: "gpu", driver: d.driver ?? "gpu.nvidia.com", pool: d.pool ?? o.node ?? "a", device: d.device })),
              },
              ...(o.node ? { nodeSelector: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [o.node] }] }] } } : {}),
            },
          }
        : {}),
      ...(o.holders ? { reservedFor: o.holders.map((h) => ({ resource: "pods", name: h, uid: `uid-${h}` })) } : {}),
    },
  };
}

/** A pod that asks for its GPUs through a claim only (no container GPU request). */
function draPod(
  name: string,
  claimName: string,
  o: { node?: string; phase?: string; scheduled?: { reason: string; message: string }; template?: boolean } = {},
): KubeObject {
  const p = gpuPod(name, {
    gpus: {},
    ...(o.node ? { node: o.node } : {}),
    ...(o.phase ? { phase: o.phase } : {}),
    ...(o.scheduled ? { scheduled: o.scheduled } : {}),
  });
  const spec = p.spec as Record<string, unknown>;
  spec.resourceClaims = [o.template ? { name: "gpus", resourceClaimTemplateName: "tmpl" } : { name: "gpus", resourceClaimName: claimName }];
  if (o.template) (p.status as Record<string, unknown>).resourceClaimStatuses = [{ name: "gpus", resourceClaimName: claimName }];
  return p;
}

/** Every node's allocated figure equals the devices its claims allocated plus its pods' container requests. */
function sumAllocated(l: Ledger, r = "nvidia.com/gpu"): number {
  return l.nodes.reduce((s, n) => s + (n.resources[r]?.allocated ?? 0), 0);
}

describe("device ledger: Dynamic Resource Allocation", () => {
  const cases: Array<{ name: string; input: Partial<LedgerInput>; check: (l: Ledger) => void }> = [
    {
      name: "a node with 8 DRA GPUs, a claim allocating 2 to a running pod: capacity 8, allocated 2",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [slice("a", { devices: gpus(8) })],
        resourceClaims: [claim("c1", { node: "a", devices: [{ device: "gpu-0" }, { device: "gpu-1" }], holders: ["p1"] })],
        pods: [draPod("p1", "c1", { node: "a" })],
      },
      check: (l) => {
        assert.deepEqual(res(l, "a"), {
          allocatable: 8,
          allocated: 2,
          capacity: 8,
          dra: { allocated: 2, capacity: 8 },
          free: 6,
          inactive: false,
          overCommitted: false,
        });
        assert.deepEqual(l.totals["nvidia.com/gpu"], {
          allocatable: 8,
          allocated: 2,
          capacity: 8,
          dra: { allocated: 2, capacity: 8 },
          free: 6,
          unavailable: 0,
        });
        assert.deepEqual(l.nodes[0]!.pods, [{ name: "p1", namespace: "team-a", resources: { "nvidia.com/gpu": 2 }, uid: "uid-p1" }]);
        assert.deepEqual(l.namespaces["team-a"], { "nvidia.com/gpu": { allocated: 2, gpuSeconds: 0 } });
        assert.equal(sumAllocated(l), 2);
      },
    },
    {
      name: "MIG devices by profile: gpu.nvidia.com devices with a profile count as nvidia.com/mig-<profile>",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [
          slice("a", {
            devices: ["gpu-0", { name: "mig-0", profile: "1g.10gb" }, { name: "mig-1", profile: "1g.10gb" }, { name: "mig-2", profile: "3g.40gb" }],
          }),
        ],
        resourceClaims: [claim("c1", { node: "a", devices: [{ device: "mig-1" }], holders: ["p1"] })],
        pods: [draPod("p1", "c1", { node: "a" })],
      },
      check: (l) => {
        assert.equal(res(l, "a")?.capacity, 1);
        assert.deepEqual(res(l, "a", "nvidia.com/mig-1g.10gb"), {
          allocatable: 2,
          allocated: 1,
          capacity: 2,
          dra: { allocated: 1, capacity: 2 },
          free: 1,
          inactive: false,
          overCommitted: false,
        });
        assert.equal(res(l, "a", "nvidia.com/mig-3g.40gb")?.capacity, 1);
        assert.deepEqual(l.nodes[0]!.pods[0]!.resources, { "nvidia.com/mig-1g.10gb": 1 });
      },
    },
    {
      name: "a node with allocatable nvidia.com/gpu and slices of the same GPUs: the larger count, never the sum",
      input: {
        nodes: [node("a", { "nvidia.com/gpu": "8" }), node("b", { "nvidia.com/gpu": "4" })],
        nodeLeases: [fresh("a"), fresh("b")],
        resourceSlices: [slice("a", { devices: gpus(8) }), slice("b", { devices: gpus(6) })],
        pods: [gpuPod("ext", { node: "a", gpus: { "nvidia.com/gpu": 1 } })],
      },
      check: (l) => {
        assert.deepEqual(res(l, "a"), {
          allocatable: 8,
          allocated: 1,
          capacity: 8,
          dra: { allocated: 0, capacity: 8 },
          free: 7,
          inactive: false,
          overCommitted: false,
        });
        assert.equal(res(l, "b")?.capacity, 6);
        assert.equal(l.totals["nvidia.com/gpu"]?.allocatable, 14);
      },
    },
    {
      name: "a claim the scheduler made for an extended-resource request is not counted twice",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [slice("a", { devices: gpus(8) })],
        resourceClaims: [
          claim("ext-claim", { node: "a", devices: [{ device: "gpu-0" }, { device: "gpu-1" }], holders: ["ext"] }),
          claim("annotated", {
            node: "a",
            devices: [{ device: "gpu-2" }],
            holders: ["ext2"],
            annotations: { "resource.kubernetes.io/extended-resource-claim": "true" },
          }),
        ],
        pods: [
          (() => {
            const p = gpuPod("ext", { node: "a", gpus: { "nvidia.com/gpu": 2 } });
            (p.status as Record<string, unknown>).extendedResourceClaimStatus = { resourceClaimName: "ext-claim", requestMappings: [] };
            return p;
          })(),
          gpuPod("ext2", { node: "a", gpus: { "nvidia.com/gpu": 1 } }),
        ],
      },
      check: (l) => {
        assert.equal(res(l, "a")?.allocated, 3);
        assert.deepEqual(res(l, "a")?.dra, { allocated: 0, capacity: 8 });
        assert.deepEqual(
          l.nodes[0]!.pods.map((p) => p.resources["nvidia.com/gpu"]),
          [2, 1],
        );
      },
    },
    {
      name: "a pending DRA pod is listed with the scheduler's message, its claim's GPUs as written",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [slice("a", { devices: gpus(2) })],
        resourceClaims: [
          claim("want4", { spec: { devices: { requests: [{ name: "g", exactly: { deviceClassName: "gpu.nvidia.com", count: 4 } }] } } }),
          claim("cpu", { spec: { devices: { requests: [{ name: "n", exactly: { deviceClassName: "nic.example.com" } }] } } }),
        ],
        pods: [
          draPod("waiting", "want4", {
            template: true,
            scheduled: { reason: "Unschedulable", message: "0/1 nodes are available: 1 cannot allocate all claims." },
          }),
          draPod("nic-only", "cpu", { scheduled: { reason: "Unschedulable", message: "no NIC" } }),
        ],
      },
      check: (l) => {
        assert.equal(l.pending.length, 1);
        const p = l.pending[0]!;
        assert.equal(p.name, "waiting");
        assert.equal(p.reason, "Unschedulable");
        assert.equal(p.message, "0/1 nodes are available: 1 cannot allocate all claims.");
        assert.deepEqual(p.resources, { "nvidia.com/gpu": 4 });
        assert.equal(res(l, "a")?.allocated, 0);
      },
    },
    {
      name: "slices of an older pool generation are ignored",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [slice("a", { generation: 1, devices: gpus(8) }), slice("a", { generation: 2, devices: gpus(4) })],
      },
      check: (l) => {
        assert.equal(res(l, "a")?.capacity, 4);
        assert.deepEqual(l.totals["nvidia.com/gpu"]?.dra, { allocated: 0, capacity: 4 });
      },
    },
    {
      name: "slices of drivers that are no GPU class, and pools not local to a node, publish no GPUs",
      input: {
        nodes: [node("a", {})],
        nodeLeases: [fresh("a")],
        resourceSlices: [
          slice("a", { driver: "nic.example.com", devices: gpus(4, "nic-") }),
          (() => {
            const s = slice("a", { pool: "network", devices: gpus(4) });
            delete (s.spec as Record<string, unknown>).nodeName;
            return s;
          })(),
        ],
      },
      check: (l) => {
        assert.deepEqual(l.nodes[0]!.resources, {});
        assert.deepEqual(l.totals, {});
      },
    },
  ];
  for (const c of cases) it(c.name, () => c.check(ledger(c.input)));

  it("GPU-seconds accrue for a pod holding a claim, as for a container request", () => {
    const input: Partial<LedgerInput> = {
      nodes: [node("a", { "nvidia.com/gpu": "8" })],
      nodeLeases: [fresh("a")],
      resourceSlices: [slice("a", { pool: "dra-pool", devices: gpus(8, "dra-") })],
      resourceClaims: [
        claim("c1", {
          devices: [
            { device: "dra-0", pool: "dra-pool" },
            { device: "dra-1", pool: "dra-pool" },
          ],
          holders: ["p1"],
        }),
      ],
      pods: [draPod("p1", "c1", { node: "a" }), gpuPod("ext", { node: "a", gpus: { "nvidia.com/gpu": 1 } })],
      jobs: new Set(),
    };
    const first = ledger(input, T0);
    const second = ledger({ ...input, previous: first }, at(60));
    assert.deepEqual(second.namespaces["team-a"], { "nvidia.com/gpu": { allocated: 3, gpuSeconds: 180 } });
    assert.equal(res(second, "a")?.allocated, 3);
    assert.equal(sumAllocated(second), 3);
  });

  it("a claim shared by two pods counts its devices once, charged to the first pod by uid", () => {
    const l = ledger({
      nodes: [node("a", {})],
      nodeLeases: [fresh("a")],
      resourceSlices: [slice("a", { devices: gpus(8) })],
      resourceClaims: [claim("shared", { node: "a", devices: [{ device: "gpu-3" }], holders: ["p2", "p1"] })],
      pods: [draPod("p1", "shared", { node: "a" }), draPod("p2", "shared", { node: "a" })],
    });
    assert.equal(res(l, "a")?.allocated, 1);
    assert.deepEqual(
      l.nodes[0]!.pods.map((p) => p.uid),
      ["uid-p1"],
    );
    assert.equal(l.namespaces["team-a"]?.["nvidia.com/gpu"]?.allocated, 1);
  });

  it("the ledger's allocated GPUs equal the sum of allocated devices (several nodes, claims and resources)", () => {
    const l = ledger({
      nodes: [node("a", {}), node("b", {})],
      nodeLeases: [fresh("a"), fresh("b")],
      resourceSlices: [slice("a", { devices: gpus(8) }), slice("b", { devices: [...gpus(4), { name: "mig-0", profile: "1g.10gb" }] })],
      resourceClaims: [
        claim("c1", { node: "a", devices: [{ device: "gpu-0" }, { device: "gpu-5" }, { device: "gpu-7" }], holders: ["p1"] }),
        claim("c2", { node: "b", devices: [{ device: "gpu-1" }, { device: "mig-0" }], holders: ["p2"] }),
        claim("unreserved", { node: "b", devices: [{ device: "gpu-2" }] }),
      ],
      pods: [draPod("p1", "c1", { node: "a" }), draPod("p2", "c2", { node: "b" })],
    });
    const devices = 3 + 2 + 1;
    const allocated = Object.values(l.totals).reduce((s, t) => s + t.allocated, 0);
    assert.equal(allocated, devices);
    assert.equal(
      Object.values(l.totals).reduce((s, t) => s + (t.dra?.allocated ?? 0), 0),
      devices,
    );
    assert.equal(l.totals["nvidia.com/gpu"]?.allocated, 5);
    assert.equal(l.totals["nvidia.com/mig-1g.10gb"]?.allocated, 1);
  });

  it("a cluster without DRA gets the ledger it had: no dra figures, identical JSON", () => {
    const input: Partial<LedgerInput> = {
      nodes: [node("a", { "nvidia.com/gpu": "8" })],
      nodeLeases: [fresh("a")],
      pods: [gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 } }), gpuPod("w", { scheduled: { reason: "Unschedulable", message: "m" } })],
    };
    const without = ledger(input);
    const empty = ledger({ ...input, resourceSlices: [], resourceClaims: [] });
    assert.equal(JSON.stringify(empty), JSON.stringify(without));
    assert.equal(res(without, "a")?.dra, undefined);
    assert.equal(without.totals["nvidia.com/gpu"]?.dra, undefined);
  });

  it("the ledger with DRA figures is still its canonical JSON", () => {
    const l = ledger(cases[0]!.input);
    assert.equal(canonicalJson(l), JSON.stringify(l));
  });

  it("deviceResource: the class's resource, a partition for a profile of a partitioned class of the same vendor", () => {
    const classes = policy.gpu.deviceClasses;
    assert.equal(deviceResource("gpu.nvidia.com", undefined, classes), "nvidia.com/gpu");
    assert.equal(deviceResource("gpu.nvidia.com", "2g.20gb", classes), "nvidia.com/mig-2g.20gb");
    assert.equal(deviceResource("mig.nvidia.com", "1g.5gb", classes), "nvidia.com/mig-1g.5gb");
    assert.equal(deviceResource("mig.nvidia.com", undefined, classes), "nvidia.com/mig-any");
    assert.equal(deviceResource("gpu.amd.com", "cpx", classes), "amd.com/gpu");
    assert.equal(deviceResource("nic.example.com", undefined, classes), undefined);
  });

  it("the stored index keeps its fields and adds dra: capacity check, metrics side by side, table columns", async () => {
    const l = ledger({
      nodes: [node("a", {}), node("b", { "amd.com/gpu": "2" })],
      nodeLeases: [fresh("a"), fresh("b")],
      resourceSlices: [slice("a", { devices: gpus(8) })],
      resourceClaims: [claim("c1", { node: "a", devices: [{ device: "gpu-0" }, { device: "gpu-1" }], holders: ["p1"] })],
      pods: [draPod("p1", "c1", { node: "a" }), gpuPod("ext", { node: "a", gpus: { "nvidia.com/gpu": 1 } })],
    });
    const { index } = shardLedger(l, 900_000);
    const read = indexOfData({ [INDEX_KEY]: index.text, [CHECKSUM_KEY]: index.sha256 });
    assert.ok(read, "the index with dra figures reads back (schema, checksum)");
    assert.equal(capacityOf(read).total("nvidia.com/gpu"), 8);
    assert.deepEqual(read.totals["nvidia.com/gpu"], { allocatable: 8, allocated: 3, capacity: 8, dra: { allocated: 2, capacity: 8 }, free: 5, unavailable: 0 });
    const m = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => ({ index: read, readAt: T0.getTime() }) });
    const values: Record<string, number> = {};
    for (const v of (await m.registry.getSingleMetric("quartermaster_ledger_gpus_by_source")!.get()).values)
      values[`${v.labels.resource}/${v.labels.source}/${v.labels.state}`] = v.value;
    assert.deepEqual(values, {
      "amd.com/gpu/extended-resource/allocated": 0,
      "nvidia.com/gpu/dra/capacity": 8,
      "nvidia.com/gpu/dra/allocated": 2,
      "nvidia.com/gpu/extended-resource/allocated": 1,
    });
    const text = ledgerTable(l);
    assert.match(text, /DRA CAPACITY +DRA ALLOCATED +REQUESTS ALLOCATED/);
    assert.match(text, /nvidia\.com\/gpu +8 +8 +0 +3 +5 +8 +2 +1/);
    assert.doesNotMatch(ledgerTable(ledger({ nodes: [node("a", { "nvidia.com/gpu": "8" })], nodeLeases: [fresh("a")] })), /DRA/);
    // The shards read back too (the node entries' dra figures in the shard schema).
    const stored = readStored(
      new Map(shardLedger(l, 900_000).shards.map((sh) => [sh.name, { name: sh.name, uid: "u", resourceVersion: "1", text: sh.text, sha256: sh.sha256 }])).set(
        index.name,
        { name: index.name, uid: "u", resourceVersion: "1", text: index.text, sha256: index.sha256 },
      ),
    );
    assert.deepEqual(stored.ledger?.nodes, l.nodes);
  });
});

/**
 * What one node offers, from the device ledger to the webhooks: the ledger's largest healthy node per GPU resource
 * and per DeviceClass (kept in its index), trusted while fresh; the rule `no-node-shape` (a pod larger than every
 * node, `warn` unless set) on training jobs and workloads; and a DRA request for `All` devices counted as the
 * largest node's devices instead of unknown (issue 45's last gap: no capacity was ever given to the webhooks).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { claimGpuRequests } from "../../../src/core/dra.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { capacityOf, draCapacityOf, NODE_SHAPES_MAX_AGE_MS } from "../../../src/run/ledger-index.js";
import type { CapacitySource } from "../../../src/validate/job.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";
import { buildLedger, largestNode, type NodeEntry } from "../../../src/ledger/compute.js";
import { readIndex, shardLedger } from "../../../src/ledger/shards.js";
import { modeOf } from "../../../src/validate/enforcement.js";
import { nodeShapeFindings, type ClusterCapacity } from "../../../src/validate/job.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { fakeJobReader, job } from "../../fixtures/jobs.js";
import { review } from "../../fixtures/reviews.js";

const NOW = Date.parse("2026-12-05T12:00:00Z");
const GIB = 10n ** 9n; // one unit in nano-units

const entry = (name: string, stale: boolean, resources: Record<string, number>): NodeEntry => ({
  name,
  pods: [],
  stale,
  resources: Object.fromEntries(
    Object.entries(resources).map(([r, n]) => [r, { allocatable: n, allocated: 0, capacity: n, free: n, inactive: n === 0, overCommitted: false }]),
  ),
});

describe("the ledger's largest node", () => {
  it("is the most one healthy node offers per resource; a stale node does not count", () => {
    const got = largestNode(
      [entry("a", false, { "nvidia.com/gpu": 8 }), entry("b", false, { "nvidia.com/gpu": 4, "amd.com/gpu": 2 }), entry("c", true, { "nvidia.com/gpu": 16 })],
      new Map([["gpu.nvidia.com", 8]]),
    );
    assert.deepEqual(got, { deviceClasses: { "gpu.nvidia.com": 8 }, resources: { "amd.com/gpu": 2, "nvidia.com/gpu": 8 } });
  });

  it("is built from nodes and kept through the index the webhooks read", () => {
    const node = (name: string, gpus: string): KubeObject =>
      ({ metadata: { name }, status: { capacity: { "nvidia.com/gpu": gpus }, allocatable: { "nvidia.com/gpu": gpus } } }) as KubeObject;
    const lease = (name: string): KubeObject => ({ metadata: { name }, spec: { renewTime: new Date(NOW).toISOString() } }) as KubeObject;
    const ledger = buildLedger(
      { nodes: [node("n1", "8"), node("n2", "4")], nodeLeases: [lease("n1"), lease("n2")], pods: [], jobs: new Set() },
      new Date(NOW),
      defaultPolicy(),
    );
    assert.deepEqual(ledger.largest?.resources, { "nvidia.com/gpu": 8 });
    const stored = shardLedger(ledger, 524_288);
    const read = readIndex({ text: stored.index.text, sha256: stored.index.sha256 });
    assert.ok("index" in read, JSON.stringify(read));
    assert.deepEqual(read.index.largest, ledger.largest);
  });
});

describe("capacity from the index: node shapes only while fresh", () => {
  const index = (ageMs: number, largest = true) => ({
    counts: { jobs: 0, nodes: 1, pendingGpuPods: 0, podsHoldingDevices: 0, staleNodes: 0 },
    generatedAt: new Date(NOW - ageMs).toISOString(),
    namespaces: {},
    shards: [],
    totals: { "nvidia.com/gpu": { allocatable: 16, allocated: 0, capacity: 16, free: 16, unavailable: 0 } },
    version: 1,
    ...(largest ? { largest: { deviceClasses: { "gpu.nvidia.com": 8 }, resources: { "nvidia.com/gpu": 8 } } } : {}),
  });
  const cases: Array<[string, number, boolean, number | undefined, number | undefined]> = [
    ["a minute old: the largest node, and 0 for a resource no node has", 60_000, true, 8, 8],
    ["just past the limit: unknown (fail open)", NODE_SHAPES_MAX_AGE_MS + 1, true, undefined, undefined],
    ["an index written before node shapes: unknown", 60_000, false, undefined, undefined],
  ];
  for (const [name, age, largest, perNode, perClass] of cases) {
    it(name, () => {
      const idx = index(age, largest) as never;
      const cap = capacityOf(idx, () => NOW);
      assert.equal(cap.total("nvidia.com/gpu"), 16, "the totals stay whatever the age");
      assert.equal(cap.largestNode?.("nvidia.com/gpu"), perNode);
      if (perNode !== undefined) assert.equal(cap.largestNode?.("amd.com/gpu"), 0);
      assert.equal(draCapacityOf(idx, () => NOW)?.get("gpu.nvidia.com"), perClass);
      // One map per index (the rules keep what they read of a claim per capacity object).
      if (draCapacityOf(idx, () => NOW))
        assert.equal(
          draCapacityOf(idx, () => NOW),
          draCapacityOf(idx, () => NOW),
        );
    });
  }
});

describe("no-node-shape findings", () => {
  const cap = (largest: Record<string, number> | undefined): ClusterCapacity => ({
    total: () => 64,
    largestNode: (r) => (largest === undefined ? undefined : (largest[r] ?? 0)),
  });
  const cases: Array<[string, Record<string, number> | undefined, string, bigint, RegExp | undefined]> = [
    [
      "16 per pod, largest node 8: never schedulable",
      { "nvidia.com/gpu": 8 },
      "nvidia.com/gpu",
      16n,
      /16 nvidia.com\/gpu per Worker pod, over the largest node's 8/,
    ],
    ["8 per pod on an 8-GPU node: fits", { "nvidia.com/gpu": 8 }, "nvidia.com/gpu", 8n, undefined],
    ["a resource no node has", { "nvidia.com/gpu": 8 }, "amd.com/gpu", 1n, /no node has amd.com\/gpu/],
    ["node shapes unknown: skipped", undefined, "nvidia.com/gpu", 64n, undefined],
  ];
  for (const [name, largest, resource, perPod, text] of cases) {
    it(name, () => {
      const f = nodeShapeFindings([{ name: "Worker", field: "spec.x.template", demand: new Map([[resource, perPod * GIB]]) }], cap(largest));
      if (!text) return assert.deepEqual(f.violations, []);
      assert.equal(f.violations.length, 1);
      assert.equal(f.violations[0]!.rule, "no-node-shape");
      assert.equal(f.violations[0]!.field, "spec.x.template");
      assert.match(f.violations[0]!.message, text);
    });
  }
});

describe("no-node-shape's mode: warn unless named", () => {
  const base = defaultPolicy().enforcement;
  const cases: Array<[string, Partial<Policy["enforcement"]>, string]> = [
    ["the default policy (mode deny): warn", {}, "warn"],
    ["named deny in enforcement.rules: deny", { rules: { "no-node-shape": "deny" } }, "deny"],
    ["mode audit is milder still: audit", { mode: "audit" }, "audit"],
    ["a namespace entry's blanket deny: warn", { namespaces: [{ pattern: "team-*", mode: "deny" }] }, "warn"],
    ["a namespace entry naming it: deny", { namespaces: [{ pattern: "team-*", rules: { "no-node-shape": "deny" } }] }, "deny"],
  ];
  for (const [name, over, want] of cases) it(name, () => assert.equal(modeOf({ ...base, ...over }, "no-node-shape", "team-a"), want));
  it("other rules keep the blanket deny", () => assert.equal(modeOf(base, "job-gpus", "team-a"), "deny"));
});

describe("/validate/jobs with node shapes: training jobs and workloads", () => {
  const pytorch = (perPod: number): KubeObject => {
    const j = structuredClone(job("PyTorchJob", "big", "team-a", { Master: 1, Worker: 1 })) as any;
    for (const t of ["Master", "Worker"])
      j.spec.pytorchReplicaSpecs[t].template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": String(perPod) } };
    return j;
  };
  const jobSet = (perPod: number): KubeObject =>
    ({
      apiVersion: "jobset.x-k8s.io/v1alpha2",
      kind: "JobSet",
      metadata: { name: "js", namespace: "team-a" },
      spec: {
        replicatedJobs: [
          {
            name: "workers",
            replicas: 1,
            template: {
              spec: {
                parallelism: 2,
                completions: 2,
                template: { spec: { containers: [{ name: "c", resources: { limits: { "nvidia.com/gpu": String(perPod) } } }] } },
              },
            },
          },
        ],
      },
    }) as KubeObject;
  const ledger: CapacitySource = { current: () => ({ total: () => 64, largestNode: (r) => (r === "nvidia.com/gpu" ? 8 : 0) }) };
  const policy = (rules: Record<string, "deny" | "warn">): Policy => {
    const p = defaultPolicy();
    return { ...p, enforcement: { ...p.enforcement, rules } };
  };
  const cases: Array<[string, string, KubeObject, Record<string, "deny" | "warn">, boolean, RegExp | undefined]> = [
    [
      "PyTorchJob of 16 per pod: admitted with a warning",
      "/validate/jobs",
      pytorch(16),
      {},
      true,
      /no-node-shape \(warn\): spec.pytorchReplicaSpecs.Worker.template: 16 nvidia.com\/gpu per Worker pod/,
    ],
    [
      "PyTorchJob of 16 per pod, rule set to deny: refused",
      "/validate/jobs",
      pytorch(16),
      { "no-node-shape": "deny" },
      false,
      /spec.pytorchReplicaSpecs.Master.template/,
    ],
    ["PyTorchJob of 8 per pod: admitted, nothing said", "/validate/jobs", pytorch(8), { "no-node-shape": "deny" }, true, undefined],
    ["JobSet of 12 per pod, rule set to deny: refused", "/validate/jobs", jobSet(12), { "no-node-shape": "deny" }, false, /12 nvidia.com\/gpu per workers pod/],
  ];
  for (const [name, path, object, rules, allowed, text] of cases) {
    it(name, async () => {
      const hooks = createWebhooks({ policy: policy(rules), log: silentLogger(), jobs: fakeJobReader(), capacity: ledger, now: () => new Date() });
      const gvk =
        object.kind === "JobSet"
          ? {
              kind: { group: "jobset.x-k8s.io", version: "v1alpha2", kind: "JobSet" },
              resource: { group: "jobset.x-k8s.io", version: "v1alpha2", resource: "jobsets" },
            }
          : { kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" }, resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" } };
      const hook = hooks[path]!;
      const { review: out } = await hook.admit(review({ ...gvk, object }));
      const response = out.response as { allowed: boolean; status?: { message?: string }; warnings?: string[] };
      assert.equal(response.allowed, allowed, JSON.stringify(response));
      const said = `${response.status?.message ?? ""} ${(response.warnings ?? []).join(" ")}`;
      if (text) assert.match(said, text);
      else assert.doesNotMatch(said, /no-node-shape|largest node/);
    });
  }
});

describe("DRA allocationMode All: the largest node's devices, not unknown", () => {
  const spec = { devices: { requests: [{ name: "all", exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "All" } }] } };
  const classes = defaultPolicy().gpu.deviceClasses;
  it("counted as the largest node's devices of the class when the ledger is fresh", () => {
    const [req] = claimGpuRequests(spec, classes, new Map([["gpu.nvidia.com", 8]]));
    assert.equal(req?.count, 8);
  });
  it("unknown without node shapes", () => {
    const [req] = claimGpuRequests(spec, classes, undefined);
    assert.equal(req?.count, undefined);
  });
});

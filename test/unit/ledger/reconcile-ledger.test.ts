import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import { buildLedger, gpuSecondsAt, settledUsage, type Ledger, type LedgerInput } from "../../../src/ledger/compute.js";
import {
  assembleLedger,
  canonicalJson,
  LEDGER_INDEX_NAME,
  MAX_LEDGER_SHARDS,
  planLedgerWrites,
  shardChanges,
  readStored,
  sha256,
  shardLedger,
  shardName,
  type StoredConfigMap,
} from "../../../src/ledger/shards.js";
import { ledgerState } from "../../../src/doctor/ledger.js";
import { capacityOfIndex } from "../../../src/run/ledger-index.js";
import { gpuPod, node, nodeLease } from "../../fixtures/cluster.js";

const T0 = new Date("2026-11-22T12:00:00Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const policy = defaultPolicy();
const fresh = (name: string) => nodeLease(name, at(-5));

function ledger(i: Partial<LedgerInput>, now = T0, p = policy): Ledger {
  return buildLedger({ nodes: [], nodeLeases: [], pods: [], jobs: new Set(), ...i }, now, p);
}
const res = (l: Ledger, nodeName: string, r = "nvidia.com/gpu") => l.nodes.find((n) => n.name === nodeName)?.resources[r];

describe("device ledger: per node and resource", () => {
  it("allocated = effective requests of bound pods not Succeeded/Failed; free = allocatable − allocated", () => {
    const l = ledger({
      nodes: [node("a", { "nvidia.com/gpu": "8" })],
      nodeLeases: [fresh("a")],
      pods: [
        gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 } }),
        gpuPod("p2", { node: "a", gpus: { "nvidia.com/gpu": 3 }, phase: "Pending" }),
        gpuPod("done", { node: "a", gpus: { "nvidia.com/gpu": 4 }, phase: "Succeeded" }),
        gpuPod("failed", { node: "a", gpus: { "nvidia.com/gpu": 4 }, phase: "Failed" }),
        gpuPod("cpu-only", { node: "a", gpus: {} }),
      ],
    });
    assert.deepEqual(res(l, "a"), { capacity: 8, allocatable: 8, allocated: 5, free: 3, overCommitted: false, inactive: false });
    assert.deepEqual(
      l.nodes[0]!.pods.map((p) => p.uid),
      ["uid-p1", "uid-p2"],
    );
    assert.deepEqual(l.totals["nvidia.com/gpu"], { capacity: 8, allocatable: 8, unavailable: 0, allocated: 5, free: 3 });
  });

  const flags: Array<[string, Partial<LedgerInput>, Record<string, unknown>]> = [
    [
      "over-committed: allocated above allocatable, free never below 0",
      { nodes: [node("a", { "nvidia.com/gpu": "4" })], pods: [gpuPod("p", { node: "a", gpus: { "nvidia.com/gpu": 6 } })] },
      { allocated: 6, free: 0, overCommitted: true, inactive: false },
    ],
    [
      "inactive: the kubelet's mark (capacity 0, allocatable 0) with pods still bound",
      { nodes: [node("a", { "nvidia.com/gpu": "0" })], pods: [gpuPod("p", { node: "a" })] },
      { capacity: 0, allocatable: 0, allocated: 1, inactive: true, overCommitted: true },
    ],
    [
      "inactive: capacity present, zero allocatable (unhealthy devices)",
      { nodes: [node("a", { "nvidia.com/gpu": "8" }, { "nvidia.com/gpu": "0" })] },
      { capacity: 8, allocatable: 0, inactive: true },
    ],
    [
      "inactive: pods hold a resource the node no longer lists",
      { nodes: [node("a", {})], pods: [gpuPod("p", { node: "a" })] },
      { capacity: 0, allocatable: 0, allocated: 1, inactive: true },
    ],
    ["fractional or odd capacity strings count whole devices", { nodes: [node("a", { "nvidia.com/gpu": "2500m" })] }, { capacity: 2, allocatable: 2 }],
  ];
  for (const [name, input, want] of flags) {
    it(name, () => {
      const got = res(ledger({ nodeLeases: [fresh("a")], ...input }), "a")!;
      for (const [k, v] of Object.entries(want)) assert.equal((got as unknown as Record<string, unknown>)[k], v, k);
    });
  }

  it("MIG and AMD resources are tracked by the policy's patterns; cpu and memory are not", () => {
    const l = ledger({
      nodes: [node("a", { "nvidia.com/mig-1g.5gb": "7", "amd.com/gpu": "4", memory: "1Ti" })],
      nodeLeases: [fresh("a")],
      pods: [gpuPod("m", { node: "a", gpus: { "nvidia.com/mig-1g.5gb": 2 } })],
    });
    assert.deepEqual(Object.keys(l.nodes[0]!.resources), ["amd.com/gpu", "nvidia.com/mig-1g.5gb"]);
    assert.equal(res(l, "a", "nvidia.com/mig-1g.5gb")!.free, 5);
  });

  it("a pod bound to a node that no longer exists → a missing, stale node entry holding it", () => {
    const l = ledger({ pods: [gpuPod("p", { node: "gone" })] });
    assert.equal(l.nodes[0]!.missing, true);
    assert.equal(l.nodes[0]!.stale, true);
    assert.deepEqual(
      l.nodes[0]!.pods.map((p) => p.uid),
      ["uid-p"],
    );
  });
});

describe("device ledger: stale nodes (Lease renewTime older than the grace period; without a Lease, the Ready heartbeat)", () => {
  const cases: Array<[string, KubeObject[], boolean, string | undefined]> = [
    ["renewed 5 s ago → fresh", [nodeLease("a", at(-5))], false, undefined],
    ["renewed exactly 40 s ago → not yet stale (strictly older)", [nodeLease("a", at(-40))], false, undefined],
    ["renewed 41 s ago → stale", [nodeLease("a", at(-41))], true, `Lease last renewed at ${at(-41).toISOString()} (grace 40s)`],
    ["no Lease and no Ready condition → stale", [], true, "no Lease in kube-node-lease and no Ready heartbeat"],
  ];
  for (const [name, leases, stale, reason] of cases) {
    it(name, () => {
      const l = ledger({
        nodes: [node("a", { "nvidia.com/gpu": "8" })],
        nodeLeases: leases,
        pods: [gpuPod("p", { node: "a", gpus: { "nvidia.com/gpu": 2 } })],
      });
      assert.equal(l.nodes[0]!.stale, stale);
      assert.equal(l.nodes[0]!.staleReason, reason);
      // The renewal is kept only where it explains staleness (on a healthy node it would rewrite a shard every pass).
      const renewal = (leases[0]?.spec as { renewTime?: string } | undefined)?.renewTime;
      assert.equal(l.nodes[0]!.leaseRenewTime, stale ? renewal : undefined);
      assert.equal(res(l, "a")!.free, stale ? 0 : 6);
      assert.equal(l.totals["nvidia.com/gpu"]!.unavailable, stale ? 8 : 0);
    });
  }
  it("a stale node's entry is the same a pass later (its reason names the renewal's time, not an age)", () => {
    const input = { nodes: [node("a", { "nvidia.com/gpu": "8" })], nodeLeases: [nodeLease("a", at(-100))], pods: [] };
    const one = ledger(input, T0);
    const two = ledger({ ...input, previous: one }, at(30));
    assert.equal(one.nodes[0]!.stale, true);
    assert.deepEqual(two.nodes, one.nodes);
  });
  // A node's Ready condition as its kubelet writes it (status.conditions[type=Ready].lastHeartbeatTime).
  const withHeartbeat = (n: KubeObject, beat: Date | undefined): KubeObject => {
    const copy = structuredClone(n) as any;
    copy.status.conditions = [{ type: "Ready", status: "True", ...(beat ? { lastHeartbeatTime: beat.toISOString() } : {}) }];
    return copy;
  };
  const heartbeatCases: Array<[string, Date | undefined, KubeObject[], boolean, string | undefined]> = [
    ["no Lease, Ready heartbeat 10 s ago → fresh (free GPUs count)", at(-10), [], false, undefined],
    ["no Lease, Ready heartbeat exactly 40 s ago → fresh", at(-40), [], false, undefined],
    [
      "no Lease, Ready heartbeat 41 s ago → stale",
      at(-41),
      [],
      true,
      `no Lease in kube-node-lease; last Ready heartbeat at ${at(-41).toISOString()} (grace 40s)`,
    ],
    ["no Lease, a Ready condition without a heartbeat → stale", undefined, [], true, "no Lease in kube-node-lease and no Ready heartbeat"],
    [
      "a Lease renewed 41 s ago decides, whatever the heartbeat says",
      at(-1),
      [nodeLease("a", at(-41))],
      true,
      `Lease last renewed at ${at(-41).toISOString()} (grace 40s)`,
    ],
    ["a Lease renewed 5 s ago decides, an old heartbeat notwithstanding", at(-3600), [nodeLease("a", at(-5))], false, undefined],
  ];
  for (const [name, beat, leases, stale, reason] of heartbeatCases) {
    it(name, () => {
      const l = ledger({
        nodes: [withHeartbeat(node("a", { "nvidia.com/gpu": "8" }), beat)],
        nodeLeases: leases,
        pods: [gpuPod("p", { node: "a", gpus: { "nvidia.com/gpu": 2 } })],
      });
      assert.equal(l.nodes[0]!.stale, stale);
      assert.equal(l.nodes[0]!.staleReason, reason);
      // The renewal is kept only where it explains staleness (on a healthy node it would rewrite a shard every pass).
      const renewal = (leases[0]?.spec as { renewTime?: string } | undefined)?.renewTime;
      assert.equal(l.nodes[0]!.leaseRenewTime, stale ? renewal : undefined);
      assert.equal(res(l, "a")!.free, stale ? 0 : 6);
    });
  }
  it("the grace period comes from the policy", () => {
    const p = checkPolicy({ reconciler: { leaseGracePeriodSeconds: 50 } }, "t");
    assert.equal(ledger({ nodes: [node("a", { "nvidia.com/gpu": "8" })], nodeLeases: [nodeLease("a", at(-45))] }, T0, p).nodes[0]!.stale, false);
  });
});

describe("device ledger: pending GPU pods", () => {
  const scheduled = { reason: "Unschedulable", message: "0/5 nodes are available: 5 Insufficient nvidia.com/gpu." };
  const cases: Array<[string, KubeObject, boolean]> = [
    ["unscheduled 301 s → listed with the scheduler's reason", gpuPod("p", { createdAt: at(-301), scheduled }), true],
    ["unscheduled exactly 300 s → not yet", gpuPod("p", { createdAt: at(-300), scheduled }), false],
    ["bound → not pending", gpuPod("p", { createdAt: at(-999), node: "a", phase: "Pending" }), false],
    ["no GPUs → not listed", gpuPod("p", { createdAt: at(-999), gpus: {} }), false],
  ];
  for (const [name, p, listed] of cases) {
    it(name, () => {
      const l = ledger({ pods: [p] });
      assert.equal(l.pending.length, listed ? 1 : 0);
      if (listed)
        assert.deepEqual(l.pending[0], {
          namespace: "team-a",
          name: "p",
          uid: "uid-p",
          resources: { "nvidia.com/gpu": 1 },
          createdAt: at(-301).toISOString(),
          pendingSeconds: 301,
          reason: "Unschedulable",
          message: scheduled.message,
        });
    });
  }
});

describe("device ledger: totals per namespace and job, GPU-seconds between passes", () => {
  const nodes = [node("a", { "nvidia.com/gpu": "8" })];
  const leases = (t: Date) => [nodeLease("a", t)];
  const first = ledger({
    nodes,
    nodeLeases: leases(T0),
    pods: [
      gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 }, job: "mnist" }),
      gpuPod("p2", { node: "a", gpus: { "nvidia.com/gpu": 1 }, namespace: "team-b" }),
    ],
    jobs: new Set(["team-a/mnist"]),
  });

  it("first pass: allocations, no GPU-seconds yet", () => {
    assert.deepEqual(first.namespaces, {
      "team-a": { "nvidia.com/gpu": { allocated: 2, gpuSeconds: 0 } },
      "team-b": { "nvidia.com/gpu": { allocated: 1, gpuSeconds: 0 } },
    });
    assert.deepEqual(first.jobs, { "team-a/mnist": { "nvidia.com/gpu": { allocated: 2, gpuSeconds: 0, since: first.generatedAt } } });
  });

  it("60 s later: pods present in both passes accrue count × seconds; new and recreated pods accrue nothing", () => {
    const second = ledger(
      {
        nodes,
        nodeLeases: leases(at(60)),
        pods: [
          gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 }, job: "mnist" }),
          gpuPod("p2", { node: "a", gpus: { "nvidia.com/gpu": 1 }, namespace: "team-b", uid: "uid-p2-recreated" }),
          gpuPod("p3", { node: "a", gpus: { "nvidia.com/gpu": 4 }, job: "mnist" }),
        ],
        jobs: new Set(["team-a/mnist"]),
        previous: first,
      },
      at(60),
    );
    assert.deepEqual(second.namespaces["team-a"], { "nvidia.com/gpu": { allocated: 6, gpuSeconds: 120 } });
    assert.deepEqual(second.namespaces["team-b"], { "nvidia.com/gpu": { allocated: 1, gpuSeconds: 0 } });
    assert.deepEqual(settledUsage(second).jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 6, gpuSeconds: 120 } });

    // Cumulative: a third pass adds to what the second carried.
    const third = ledger({ nodes, nodeLeases: leases(at(90)), pods: [], jobs: new Set(["team-a/mnist"]), previous: second }, at(90));
    assert.deepEqual(third.namespaces["team-a"], { "nvidia.com/gpu": { allocated: 0, gpuSeconds: 120 } });
    assert.deepEqual(third.jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 0, gpuSeconds: 120 } }, "holding nothing: no since");
    // The job gone and holding nothing: its row goes; the namespace keeps the seconds.
    const fourth = ledger({ nodes, nodeLeases: leases(at(95)), pods: [], jobs: new Set(), previous: third }, at(95));
    assert.deepEqual(fourth.jobs, {});
    assert.equal(fourth.namespaces["team-a"]!["nvidia.com/gpu"]!.gpuSeconds, 120);
  });

  it("a steady job keeps its stored entry (and its shard's bytes) pass after pass; its GPU-seconds still accrue", () => {
    const pods = [
      gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 }, job: "mnist" }),
      gpuPod("p2", { node: "a", gpus: { "nvidia.com/gpu": 1 }, job: "mnist" }),
    ];
    const jobs = new Set(["team-a/mnist"]);
    const one = ledger({ nodes, nodeLeases: leases(T0), pods, jobs }, T0);
    const two = ledger({ nodes, nodeLeases: leases(at(60)), pods, jobs, previous: one }, at(60));
    const three = ledger({ nodes, nodeLeases: leases(at(90)), pods, jobs, previous: two }, at(90));
    // Accrual is kept lazily from the first pass on: the entries of the second and third are the first's, byte for byte.
    assert.deepEqual(two.jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 3, gpuSeconds: 0, since: T0.toISOString() } });
    assert.deepEqual(two.jobs, one.jobs);
    assert.deepEqual(three.jobs, two.jobs);
    const shardTexts = (l: Ledger) => shardLedger(l, 16384).shards.map((x) => x.text);
    assert.deepEqual(shardTexts(three), shardTexts(two), "no shard to rewrite");
    // What a reader sees: the same GPU-seconds the eager sum gives (3 GPUs × 90 s), and the namespace's agree.
    assert.equal(gpuSecondsAt(three.jobs["team-a/mnist"]!["nvidia.com/gpu"]!, three.generatedAt), 270);
    assert.equal(three.namespaces["team-a"]!["nvidia.com/gpu"]!.gpuSeconds, 270);
    assert.deepEqual(settledUsage(three).jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 3, gpuSeconds: 270 } });
    // A holder more: settled into a plain entry again, its total carried (270 + 3 × 30), the newcomer accruing nothing.
    const more = [...pods, gpuPod("p3", { node: "a", gpus: { "nvidia.com/gpu": 4 }, job: "mnist" })];
    const four = ledger({ nodes, nodeLeases: leases(at(120)), pods: more, jobs, previous: three }, at(120));
    assert.deepEqual(four.jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 7, gpuSeconds: 360, since: four.generatedAt } });
    // A pod gone: the same (allocated differs from the stored entry).
    const five = ledger({ nodes, nodeLeases: leases(at(150)), pods: more.slice(1), jobs, previous: four }, at(150));
    assert.deepEqual(five.jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 5, gpuSeconds: 360 + 5 * 30, since: five.generatedAt } });
    // A pod replaced by another of the same size (allocated equal, holder new): settled, the newcomer accruing nothing.
    const swapped = [more[1]!, gpuPod("p4", { node: "a", gpus: { "nvidia.com/gpu": 4 }, job: "mnist" })];
    const six = ledger({ nodes, nodeLeases: leases(at(180)), pods: swapped, jobs, previous: five }, at(180));
    assert.deepEqual(six.jobs["team-a/mnist"], { "nvidia.com/gpu": { allocated: 5, gpuSeconds: 510 + 1 * 30, since: six.generatedAt } });
  });

  it("a previous ledger from the future (clock skew) accrues nothing", () => {
    const back = ledger(
      { nodes, nodeLeases: leases(T0), pods: [gpuPod("p1", { node: "a", gpus: { "nvidia.com/gpu": 2 }, job: "mnist" })], previous: first },
      at(-30),
    );
    assert.equal(back.namespaces["team-a"]!["nvidia.com/gpu"]!.gpuSeconds, 0);
  });

  it("built with its keys in canonical order: JSON.stringify gives the canonical bytes (the shards rely on it)", () => {
    const l = ledger({
      nodes: [node("b", { "nvidia.com/gpu": "2", "amd.com/gpu": "1" }), node("a", { "nvidia.com/gpu": "4" })],
      nodeLeases: [fresh("a"), nodeLease("b", at(-100))],
      pods: [
        gpuPod("x", { node: "b", gpus: { "nvidia.com/gpu": 1, "amd.com/gpu": 1 }, job: "j" }),
        gpuPod("y", { node: "gone" }),
        gpuPod("z", { createdAt: at(-999), scheduled: { reason: "Unschedulable", message: "no" }, job: "j" }),
      ],
      previous: first,
      jobs: new Set(["team-a/mnist"]),
    });
    assert.equal(JSON.stringify(l), canonicalJson(l));
    const { index, shards } = shardLedger(l, 16384);
    for (const s of [index, ...shards]) assert.equal(s.text, canonicalJson(JSON.parse(s.text)), s.name);
  });

  it("the ledger does not depend on the order objects were listed in", () => {
    const pods = [gpuPod("x", { node: "b" }), gpuPod("y", { node: "a", namespace: "z" }), gpuPod("w", { node: "a", job: "j" })];
    const ns = [node("b", { "nvidia.com/gpu": "2" }), node("a", { "nvidia.com/gpu": "4", "amd.com/gpu": "1" })];
    const one = ledger({ nodes: ns, pods, nodeLeases: [fresh("a"), fresh("b")] });
    const two = ledger({ nodes: [...ns].reverse(), pods: [...pods].reverse(), nodeLeases: [fresh("b"), fresh("a")] });
    assert.equal(canonicalJson(one), canonicalJson(two));
  });
});

/** What the ConfigMaps would hold after writing `l`. */
function storedOf(l: Ledger, budget = 524288): Map<string, StoredConfigMap> {
  const { index, shards } = shardLedger(l, budget);
  return new Map(
    [index, ...shards].map((s, i) => [s.name, { name: s.name, uid: `uid-${s.name}`, resourceVersion: String(i + 1), text: s.text, sha256: s.sha256 }]),
  );
}

function bigLedger(nodes: number, podsPerNode: number): Ledger {
  const ns: KubeObject[] = [];
  const leases: KubeObject[] = [];
  const pods: KubeObject[] = [];
  for (let n = 0; n < nodes; n++) {
    const name = `gpu-node-${String(n).padStart(5, "0")}`;
    ns.push(node(name, { "nvidia.com/gpu": "8" }));
    leases.push(fresh(name));
    for (let p = 0; p < podsPerNode; p++)
      pods.push(
        gpuPod(`job-${n % 2000}-worker-${n}-${p}`, {
          node: name,
          namespace: `team-${n % 50}`,
          job: `job-${n % 2000}`,
          uid: `00000000-0000-0000-${String(n).padStart(4, "0")}-${String(p).padStart(12, "0")}`,
        }),
      );
  }
  return ledger({ nodes: ns, nodeLeases: leases, pods, jobs: new Set() });
}

describe("ledger shards", () => {
  const small = ledger({
    nodes: [node("a", { "nvidia.com/gpu": "8" })],
    nodeLeases: [fresh("a")],
    pods: [gpuPod("p", { node: "a", job: "mnist" }), gpuPod("q", { createdAt: at(-900) })],
  });

  it("round trip: index + shards → the same ledger", () => {
    const got = readStored(storedOf(small));
    assert.deepEqual(got.corrupt, []);
    assert.equal(canonicalJson(got.ledger), canonicalJson(small));
  });

  it("at 5,000 nodes and 100,000 pods every shard stays under the budget (and far from 1 MiB), the count a power of two", () => {
    const big = bigLedger(5000, 20);
    const budget = 524288;
    const { index, shards } = shardLedger(big, budget);
    assert.ok(shards.length >= 2 && (shards.length & (shards.length - 1)) === 0, `${shards.length} shards`);
    for (const s of [index, ...shards]) assert.ok(s.text.length <= budget, `${s.name}: ${s.text.length} bytes`);
    const back = readStored(new Map([index, ...shards].map((s) => [s.name, { name: s.name, uid: "u", resourceVersion: "1", text: s.text, sha256: s.sha256 }])));
    assert.equal(back.ledger!.nodes.length, 5000);
    assert.equal(
      back.ledger!.nodes.reduce((n, x) => n + x.pods.length, 0),
      100_000,
    );
  });

  it("a node added moves no other node: only its shard and the index are rewritten", () => {
    const before = bigLedger(200, 2);
    const stored = storedOf(before, 16384);
    const after = structuredClone(before);
    after.nodes.push({ name: "zz-new", pods: [], resources: {}, stale: false });
    const writes = planLedgerWrites(shardLedger(after, 16384), stored);
    assert.deepEqual(
      writes.map((w) => w.verb),
      ["replace", "replace"],
    );
    assert.equal(writes[1]!.name, LEDGER_INDEX_NAME);
    assert.deepEqual(writes[0]!.verb === "replace" && writes[0]!.changed, ["node/zz-new"], "the shard's rewrite names what moved");
  });

  it("a rewritten shard names every entry that moved: added, removed, changed; none for the index", () => {
    const before = bigLedger(40, 2);
    const [first, second] = [before.nodes[0]!, before.nodes[1]!];
    const cases: Array<{ name: string; edit: (l: typeof before) => void; want: string[] }> = [
      { name: "a node gone", edit: (l) => void l.nodes.splice(0, 1), want: [`node/${first.name}`] },
      { name: "a node goes stale", edit: (l) => Object.assign(l.nodes[1]!, { stale: true, staleReason: "no Lease" }), want: [`node/${second.name}`] },
      {
        name: "a job's GPU-seconds",
        edit: (l) => void (l.jobs["team/x"] = { "nvidia.com/gpu": { allocated: 1, gpuSeconds: 5, since: "2026-01-01T00:00:00.000Z" } }),
        want: ["job/team/x"],
      },
    ];
    for (const c of cases) {
      const after = structuredClone(before);
      c.edit(after);
      const writes = planLedgerWrites(shardLedger(after, 16384), storedOf(before, 16384));
      const changed = writes.flatMap((w) => (w.verb === "replace" && w.name !== LEDGER_INDEX_NAME ? (w.changed ?? []) : []));
      assert.deepEqual(changed, c.want, c.name);
      const index = writes.find((w) => w.name === LEDGER_INDEX_NAME);
      assert.ok(index && index.verb === "replace" && index.changed === undefined, `${c.name}: the index carries no entries`);
    }
  });

  it("shardChanges: a stored text that is no shard is named unreadable; equal texts change nothing", () => {
    const { shards } = shardLedger(small, 524288);
    assert.deepEqual(shardChanges("{not json", shards[0]!.text), ["(unreadable)"]);
    assert.deepEqual(shardChanges(shards[0]!.text, shards[0]!.text), []);
  });

  const tamper = (mutate: (m: Map<string, StoredConfigMap>) => void) => {
    const m = storedOf(small);
    mutate(m);
    return m;
  };
  /** Rewrites one stored text (parsed, changed by `edit`, or replaced by what it returns), its checksum, and the index's record of it. */
  const reshape = (name: string, edit: (x: any) => unknown) =>
    tamper((m) => {
      const cm = m.get(name)!;
      const parsed = JSON.parse(cm.text!);
      const out = edit(parsed);
      cm.text = typeof out === "string" ? out : JSON.stringify(out === undefined ? parsed : out);
      cm.sha256 = sha256(cm.text);
      if (name !== LEDGER_INDEX_NAME) {
        const idx = m.get(LEDGER_INDEX_NAME)!;
        const index = JSON.parse(idx.text!);
        index.shards.find((x: { name: string }) => x.name === name).sha256 = cm.sha256;
        idx.text = JSON.stringify(index);
        idx.sha256 = sha256(idx.text);
      }
    });
  const corruption: Array<[string, Map<string, StoredConfigMap>, string[], RegExp]> = [
    [
      "a shard edited by hand (checksum mismatch)",
      tamper((m) => void (m.get(shardName(0))!.text = m.get(shardName(0))!.text!.replace('"allocated":1', '"allocated":7'))),
      [shardName(0)],
      /quartermaster-ledger-0 is checksum mismatch: rebuilt/,
    ],
    ["a shard missing", tamper((m) => void m.delete(shardName(0))), [shardName(0)], /quartermaster-ledger-0 is missing/],
    [
      "a shard valid in itself but not the one the index recorded (a pass killed between writes)",
      tamper((m) => {
        const s = m.get(shardName(0))!;
        s.text = s.text!.replace('"of":1', '"of":1 ');
        s.sha256 = sha256(s.text);
      }),
      [shardName(0)],
      /not the shard the index recorded/,
    ],
    ["the index edited by hand", tamper((m) => void (m.get(LEDGER_INDEX_NAME)!.text += " ")), [LEDGER_INDEX_NAME], /index quartermaster-ledger is corrupt/],
    // Checksums right (shard and index agree), shape wrong: treated exactly like corruption.
    [
      "a well-checksummed shard whose nodes is not an array",
      reshape(shardName(0), (x) => void (x.nodes = "nodes")),
      [shardName(0)],
      /quartermaster-ledger-0 is of the wrong shape \(nodes: must be array\): rebuilt/,
    ],
    [
      "a well-checksummed shard whose node has no pods",
      reshape(shardName(0), (x) => void delete x.nodes[0].pods),
      [shardName(0)],
      /quartermaster-ledger-0 is of the wrong shape/,
    ],
    [
      "a well-checksummed shard whose node's allocatable is a string",
      reshape(shardName(0), (x) => void (x.nodes[0].resources["nvidia.com/gpu"].allocatable = "8")),
      [shardName(0)],
      /wrong shape \(nodes\[0\]\.resources\[nvidia\.com\/gpu\]\.allocatable: must be number\)/,
    ],
    ["a well-checksummed shard of another version", reshape(shardName(0), (x) => void (x.version = 2)), [shardName(0)], /wrong shape/],
    [
      "a well-checksummed shard that is not JSON",
      reshape(shardName(0), () => "{not json"),
      [shardName(0)],
      /quartermaster-ledger-0 is of the wrong shape \(not JSON\)/,
    ],
    ["a well-checksummed shard that is an array", reshape(shardName(0), () => []), [shardName(0)], /wrong shape/],
    [
      "a well-checksummed index whose totals is a string",
      reshape(LEDGER_INDEX_NAME, (x) => void (x.totals = "12")),
      [LEDGER_INDEX_NAME],
      /index quartermaster-ledger is corrupt \(wrong shape: totals: must be object\)/,
    ],
    [
      "a well-checksummed index naming a ConfigMap that is not a ledger shard",
      reshape(LEDGER_INDEX_NAME, (x) => void (x.shards[0].name = "kube-root-ca.crt")),
      [LEDGER_INDEX_NAME],
      /wrong shape: shards\[0\]\.name: must match pattern/,
    ],
    ["a well-checksummed index that is null", reshape(LEDGER_INDEX_NAME, () => null), [LEDGER_INDEX_NAME], /wrong shape/],
  ];
  for (const [name, stored, corrupt, problem] of corruption) {
    it(`${name} → reported corrupt, and the next write rebuilds it`, () => {
      const got = readStored(stored);
      assert.deepEqual(got.corrupt, corrupt);
      assert.match(got.problems.join("\n"), problem);
      const writes = planLedgerWrites(shardLedger(small, 524288), stored);
      for (const c of corrupt)
        assert.ok(
          writes.some((w) => w.name === c && w.verb !== "delete"),
          `${c} rewritten: ${JSON.stringify(writes.map((w) => w.name))}`,
        );
    });
  }

  it("nothing stored → no ledger, no corruption; everything created", () => {
    const got = assembleLedger(undefined, new Map());
    assert.equal(got.ledger, undefined);
    assert.deepEqual(got.corrupt, []);
    assert.deepEqual(
      planLedgerWrites(shardLedger(small, 524288), new Map()).map((w) => `${w.verb} ${w.name}`),
      [`create ${shardName(0)}`, `create ${LEDGER_INDEX_NAME}`],
    );
  });

  it("unchanged ledger (a later pass, same holdings) → only the index is replaced, with the resourceVersion read", () => {
    const stored = storedOf(small);
    const later = { ...small, generatedAt: at(300).toISOString() };
    const writes = planLedgerWrites(shardLedger(later, 524288), stored);
    assert.deepEqual(
      writes.map((w) => `${w.verb} ${w.name}`),
      [`replace ${LEDGER_INDEX_NAME}`],
    );
    assert.equal((writes[0] as { resourceVersion?: string }).resourceVersion, stored.get(LEDGER_INDEX_NAME)!.resourceVersion);
  });

  it("the ledger deletes only its own names: other ConfigMaps carrying its label are left alone", () => {
    const stored = storedOf(small);
    for (const name of [
      "quartermaster-ledger-7",
      `quartermaster-ledger-${MAX_LEDGER_SHARDS - 1}`,
      `quartermaster-ledger-${MAX_LEDGER_SHARDS}`,
      "quartermaster-ledger-07",
      "quartermaster-ledger-x",
      "quartermaster-ledger-1-backup",
      "team-notes",
    ]) {
      stored.set(name, { name, uid: `uid-${name}`, resourceVersion: "1", text: "{}", sha256: sha256("{}") });
    }
    const deletes = planLedgerWrites(shardLedger(small, 524288), stored)
      .filter((w) => w.verb === "delete")
      .map((w) => w.name);
    assert.deepEqual(deletes, [`quartermaster-ledger-${MAX_LEDGER_SHARDS - 1}`, "quartermaster-ledger-7"]);
  });

  it("fewer shards than before → the surplus is deleted after the index, by uid", () => {
    const stored = storedOf(bigLedger(200, 2), 16384);
    const writes = planLedgerWrites(shardLedger(small, 16384), stored);
    const names = writes.map((w) => `${w.verb} ${w.name}`);
    const indexAt = names.indexOf(`replace ${LEDGER_INDEX_NAME}`);
    const deletes = writes.filter((w) => w.verb === "delete");
    assert.ok(deletes.length > 0 && writes.indexOf(deletes[0]!) > indexAt);
    assert.ok(deletes.every((d) => d.verb === "delete" && d.uid === `uid-${d.name}`));
  });
});

describe("doctor's view of a stored ledger (ledgerState)", () => {
  const l = ledger({ nodes: [node("a", { "nvidia.com/gpu": "8" })], nodeLeases: [fresh("a")], pods: [gpuPod("p", { node: "a" })] });
  const cases: Array<[string, Map<string, StoredConfigMap>, unknown]> = [
    ["nothing stored → absent", new Map(), "absent"],
    ["a good ledger → its time and shard count, nothing corrupt", storedOf(l), { generatedAt: T0, shards: 1, corrupt: [] }],
    [
      "a shard edited → named corrupt",
      (() => {
        const m = storedOf(l);
        m.get(shardName(0))!.text += " ";
        return m;
      })(),
      { generatedAt: T0, shards: 1, corrupt: [shardName(0)] },
    ],
    [
      "the index edited → corrupt, no time",
      (() => {
        const m = storedOf(l);
        m.get(LEDGER_INDEX_NAME)!.text += " ";
        return m;
      })(),
      { shards: 0, corrupt: [LEDGER_INDEX_NAME] },
    ],
  ];
  for (const [name, stored, want] of cases) it(name, () => assert.deepEqual(ledgerState(readStored(stored)), want));
});

describe("the validating webhook's capacity from the ledger index (capacityOfIndex)", () => {
  const l = ledger({ nodes: [node("a", { "nvidia.com/gpu": "8" }), node("b", { "nvidia.com/gpu": "4", "amd.com/gpu": "2" })], nodeLeases: [fresh("a")] });
  const { index } = shardLedger(l, 524288);
  const cases: Array<[string, Record<string, string> | undefined, Record<string, number | undefined> | undefined]> = [
    [
      "a good index → allocatable over all nodes, stale ones included",
      { "index.json": index.text, sha256: index.sha256 },
      { "nvidia.com/gpu": 12, "amd.com/gpu": 2, "nvidia.com/mig-1g.5gb": undefined },
    ],
    [
      "an index edited by hand → no capacity (the check is skipped with a warning)",
      { "index.json": index.text.replace('"allocatable":12', '"allocatable":99'), sha256: index.sha256 },
      undefined,
    ],
    ["no checksum → no capacity", { "index.json": index.text }, undefined],
    ["a well-checksummed index of the wrong shape → no capacity", { "index.json": '{"totals":3}', sha256: sha256('{"totals":3}') }, undefined],
    ["a well-checksummed index that is not JSON → no capacity (no throw)", { "index.json": "{", sha256: sha256("{") }, undefined],
    ["no ConfigMap → no capacity", undefined, undefined],
  ];
  for (const [name, data, want] of cases) {
    it(name, () => {
      const c = capacityOfIndex(data);
      if (want === undefined) return assert.equal(c, undefined);
      for (const [r, n] of Object.entries(want)) assert.equal(c!.total(r), n, r);
    });
  }
});

/**
 * The metrics added for the GPU ledger, job lookups and the resident reconciler: gauges from a ledger index
 * fixture (and the namespace cap), the lookup histogram by result through the real lookup code, and the
 * reconciler's pass metrics through the real loop.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { Registry } from "prom-client";
import { capacityOf, indexOfData } from "../../../src/run/ledger-index.js";
import { cachedJobReader } from "../../../src/kube/jobs.js";
import { readPool } from "../../../src/admission/read-pool.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import { CHECKSUM_KEY, INDEX_KEY, sha256, shardLedger, type LedgerIndex } from "../../../src/ledger/shards.js";
import type { Ledger } from "../../../src/ledger/compute.js";
import { startLoop } from "../../../src/reconcile/loop.js";
import { createAdmissionMetrics, type JobLookupResult } from "../../../src/server/metrics.js";
import { actionType, capNamespaces, createReconcilerMetrics, NAMESPACE_LABEL_CAP } from "../../../src/reconcile/metrics.js";
import { silentLogger } from "../../../src/log.js";
import { lookupTopology, readJob } from "../../../src/membership/lookup.js";
import type { JobReader } from "../../../src/membership/types.js";
import { job, kindOf } from "../../fixtures/jobs.js";

/** `name{labels} value` lines of one metric family (labels sorted as prom-client writes them). */
async function series(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values) {
    const labels = Object.entries(v.labels)
      .map(([k, x]) => `${k}=${x}`)
      .join(",");
    out[`${(v as { metricName?: string }).metricName ?? name}{${labels}}`] = v.value;
  }
  return out;
}

const ledger: Ledger = {
  generatedAt: "2026-11-25T12:00:00.000Z",
  jobs: { "team-a/mnist": { "nvidia.com/gpu": { allocated: 4, gpuSeconds: 7200 } } },
  namespaces: {
    "team-a": { "nvidia.com/gpu": { allocated: 4, gpuSeconds: 7200 } },
    "team-b": { "amd.com/gpu": { allocated: 1, gpuSeconds: 60 }, "nvidia.com/gpu": { allocated: 0, gpuSeconds: 30 } },
  },
  nodes: [
    {
      name: "n1",
      pods: [{ name: "p1", namespace: "team-a", resources: { "nvidia.com/gpu": 4 }, uid: "u1" }],
      resources: { "nvidia.com/gpu": { allocatable: 8, allocated: 4, capacity: 8, free: 4, inactive: false, overCommitted: false } },
      stale: false,
    },
    {
      name: "n2",
      pods: [],
      resources: { "nvidia.com/gpu": { allocatable: 8, allocated: 0, capacity: 8, free: 0, inactive: false, overCommitted: false } },
      stale: true,
      staleReason: "no Lease",
    },
    {
      name: "n3",
      pods: [{ name: "p3", namespace: "team-b", resources: { "amd.com/gpu": 1 }, uid: "u3" }],
      resources: { "amd.com/gpu": { allocatable: 2, allocated: 1, capacity: 2, free: 1, inactive: false, overCommitted: false } },
      stale: false,
    },
    {
      name: "n4",
      pods: [],
      resources: { "nvidia.com/gpu": { allocatable: 0, allocated: 0, capacity: 8, free: 0, inactive: true, overCommitted: false } },
      stale: false,
    },
  ],
  pending: [{ name: "waiting", namespace: "team-c", reason: "Unschedulable", resources: { "nvidia.com/gpu": 2 }, since: "2026-11-25T11:00:00.000Z" }],
  totals: {
    "amd.com/gpu": { allocatable: 2, allocated: 1, capacity: 2, free: 1, unavailable: 0 },
    "nvidia.com/gpu": { allocatable: 16, allocated: 4, capacity: 16, free: 4, unavailable: 8 },
  },
  version: 1,
} as unknown as Ledger;

/** The index ConfigMap data the reconciler writes for `ledger`, read back as the webhook reads it. */
function indexFixture(): LedgerIndex {
  const { index } = shardLedger(ledger, 900_000);
  const read = indexOfData({ [INDEX_KEY]: index.text, [CHECKSUM_KEY]: index.sha256 });
  assert.ok(read, "the fixture's index reads back");
  return read;
}

describe("metrics: the device ledger's gauges", () => {
  it("GPUs by resource and state, node counts, pending pods, per-namespace allocation and GPU-seconds, timestamps", async () => {
    const index = indexFixture();
    const m = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => ({ index, readAt: Date.parse("2026-11-25T12:00:30Z") }) });
    assert.deepEqual(await series(m.registry, "quartermaster_ledger_gpus"), {
      "quartermaster_ledger_gpus{resource=amd.com/gpu,state=capacity}": 2,
      "quartermaster_ledger_gpus{resource=amd.com/gpu,state=allocatable}": 2,
      "quartermaster_ledger_gpus{resource=amd.com/gpu,state=allocated}": 1,
      "quartermaster_ledger_gpus{resource=amd.com/gpu,state=free}": 1,
      "quartermaster_ledger_gpus{resource=amd.com/gpu,state=unavailable}": 0,
      "quartermaster_ledger_gpus{resource=nvidia.com/gpu,state=capacity}": 16,
      "quartermaster_ledger_gpus{resource=nvidia.com/gpu,state=allocatable}": 16,
      "quartermaster_ledger_gpus{resource=nvidia.com/gpu,state=allocated}": 4,
      "quartermaster_ledger_gpus{resource=nvidia.com/gpu,state=free}": 4,
      "quartermaster_ledger_gpus{resource=nvidia.com/gpu,state=unavailable}": 8,
    });
    const one = async (name: string) => Object.values(await series(m.registry, name));
    assert.deepEqual(await one("quartermaster_ledger_nodes"), [4]);
    assert.deepEqual(await one("quartermaster_ledger_stale_nodes"), [1]);
    assert.deepEqual(await one("quartermaster_ledger_inactive_nodes"), [1]);
    assert.deepEqual(await one("quartermaster_ledger_pending_gpu_pods"), [1]);
    assert.deepEqual(await one("quartermaster_ledger_pods_holding_devices"), [2]);
    assert.deepEqual(await one("quartermaster_ledger_jobs"), [1]);
    assert.deepEqual(await one("quartermaster_ledger_generated_timestamp_seconds"), [Date.parse("2026-11-25T12:00:00Z") / 1000]);
    assert.deepEqual(await one("quartermaster_ledger_read_timestamp_seconds"), [Date.parse("2026-11-25T12:00:30Z") / 1000]);
    assert.deepEqual(await series(m.registry, "quartermaster_ledger_namespace_gpus_allocated"), {
      "quartermaster_ledger_namespace_gpus_allocated{namespace=team-a,resource=nvidia.com/gpu}": 4,
      "quartermaster_ledger_namespace_gpus_allocated{namespace=team-b,resource=amd.com/gpu}": 1,
      "quartermaster_ledger_namespace_gpus_allocated{namespace=team-b,resource=nvidia.com/gpu}": 0,
    });
    assert.deepEqual(await series(m.registry, "quartermaster_ledger_namespace_gpu_seconds_total"), {
      "quartermaster_ledger_namespace_gpu_seconds_total{namespace=team-a,resource=nvidia.com/gpu}": 7200,
      "quartermaster_ledger_namespace_gpu_seconds_total{namespace=team-b,resource=amd.com/gpu}": 60,
      "quartermaster_ledger_namespace_gpu_seconds_total{namespace=team-b,resource=nvidia.com/gpu}": 30,
    });
    const text = await m.registry.metrics();
    assert.match(text, /# TYPE quartermaster_ledger_namespace_gpu_seconds_total counter\n/);
    // The capacity check reads the same index.
    assert.equal(capacityOf(index).total("nvidia.com/gpu"), 16);
  });

  it("no ledger read yet (or none any more) → present 0, no labelled series, the unlabelled ones 0", async () => {
    let reading: { index: LedgerIndex; readAt: number } | undefined = { index: indexFixture(), readAt: 0 };
    const m = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => reading });
    let text = await m.registry.metrics();
    assert.match(text, /\nquartermaster_ledger_nodes 4\n/);
    assert.match(text, /\nquartermaster_ledger_present 1\n/);
    reading = undefined;
    text = await m.registry.metrics();
    assert.match(text, /\nquartermaster_ledger_present 0\n/);
    assert.doesNotMatch(text, /^quartermaster_ledger_\w+\{/m);
    assert.deepEqual(
      text.match(/^quartermaster_ledger_(?!present)\w+ .*$/gm)?.map((l) => l.split(" ")[1]),
      ["0", "0", "0", "0", "0", "0", "0", "0"],
    );
  });

  it("a refresh that reads a new index changes the per-namespace series at the next scrape", async () => {
    const first = indexFixture();
    let reading = { index: first, readAt: 0 };
    const m = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => reading });
    assert.equal(Object.keys(await series(m.registry, "quartermaster_ledger_namespace_gpus_allocated")).length, 3);
    reading = { index: { ...first, namespaces: { "team-z": { "nvidia.com/gpu": { allocated: 7, gpuSeconds: 1 } } } }, readAt: 1 };
    assert.deepEqual(await series(m.registry, "quartermaster_ledger_namespace_gpus_allocated"), {
      "quartermaster_ledger_namespace_gpus_allocated{namespace=team-z,resource=nvidia.com/gpu}": 7,
    });
  });

  it("without a ledger source the gauges are not registered (the dev server, --ledger-refresh-seconds 0)", async () => {
    const m = createAdmissionMetrics({ timeoutSeconds: 5 });
    assert.equal(m.registry.getSingleMetric("quartermaster_ledger_gpus"), undefined);
  });

  it("an index written before inactiveNodes existed (a reconciler not yet upgraded) is read; the gauge shows 0", async () => {
    const { index } = shardLedger(ledger, 900_000);
    const older = index.text.replace('"inactiveNodes":1,', "");
    assert.notEqual(older, index.text);
    const read = indexOfData({ [INDEX_KEY]: older, [CHECKSUM_KEY]: sha256(older) });
    assert.ok(read, "the older index reads");
    const m = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => ({ index: read, readAt: 0 }) });
    assert.match(await m.registry.metrics(), /\nquartermaster_ledger_inactive_nodes 0\n/);
  });

  it("a damaged index gives no reading (the checksum is checked)", () => {
    const { index } = shardLedger(ledger, 900_000);
    assert.equal(indexOfData({ [INDEX_KEY]: index.text.replace('"nodes":4', '"nodes":5'), [CHECKSUM_KEY]: index.sha256 }), undefined);
  });
});

describe("metrics: namespace label cap", () => {
  const usage = (allocated: number, gpuSeconds = 0) => ({ "nvidia.com/gpu": { allocated, gpuSeconds } });
  it(`keeps the ${NAMESPACE_LABEL_CAP} by allocation then GPU-seconds then name, sums the rest as other`, () => {
    const rows = capNamespaces({ a: usage(1), b: usage(5), c: usage(0, 100), d: usage(0, 100), e: usage(2, 3) }, 2);
    assert.deepEqual(
      rows.map((r) => [r.namespace, r.allocated, r.gpuSeconds]),
      [
        ["b", 5, 0],
        ["e", 2, 3],
        ["other", 1, 200],
      ],
    );
  });
  it("a cluster of 5000 namespaces exports cap + 1 namespace values, totals unchanged", () => {
    const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`ns-${i}`, usage(i % 3, i)]));
    const rows = capNamespaces(many, NAMESPACE_LABEL_CAP);
    assert.equal(new Set(rows.map((r) => r.namespace)).size, NAMESPACE_LABEL_CAP + 1);
    const sum = (f: (r: { allocated: number; gpuSeconds: number }) => number, xs: Array<{ allocated: number; gpuSeconds: number }>) =>
      xs.reduce((n, r) => n + f(r), 0);
    const all = Object.values(many).map((u) => u["nvidia.com/gpu"]);
    assert.equal(
      sum((r) => r.allocated, rows),
      sum((r) => r.allocated, all),
    );
    assert.equal(
      sum((r) => r.gpuSeconds, rows),
      sum((r) => r.gpuSeconds, all),
    );
  });
  it("under the cap nothing is aggregated", () => {
    assert.ok(capNamespaces({ a: usage(1), b: usage(2) }, NAMESPACE_LABEL_CAP).every((r) => r.namespace !== "other"));
  });
});

describe("metrics: job lookups on the admission path", () => {
  const policy = defaultPolicy();
  const mnist = job("TFJob", "mnist", "team-a", { Chief: 1, Worker: 2, PS: 1 });
  const owner = { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true };
  const pod = { metadata: { name: "mnist-worker-1", namespace: "team-a", ownerReferences: [owner] }, spec: { containers: [] } } as unknown as V1Pod;

  /** A reader whose lookups land in a fresh metrics registry; its clock advances 2 ms per reading. */
  function measured(get: JobReader["get"], opts: { cached?: boolean } = {}) {
    const metrics = createAdmissionMetrics({ timeoutSeconds: 5 });
    let t = 0;
    const reader = cachedJobReader(async () => get, { ttlMs: 60_000, observe: (r, s) => metrics.jobLookup(r, s) });
    const clocked: JobReader = Object.assign(reader, { clock: () => (t += 0.002) });
    return { metrics, reader: clocked, warm: opts.cached };
  }
  const counts = async (metrics: ReturnType<typeof createAdmissionMetrics>): Promise<Partial<Record<JobLookupResult, number>>> => {
    const out: Partial<Record<JobLookupResult, number>> = {};
    for (const v of (await metrics.registry.getSingleMetric("quartermaster_job_lookup_duration_seconds")!.get()).values) {
      if ((v as { metricName?: string }).metricName === "quartermaster_job_lookup_duration_seconds_count" && v.value > 0)
        out[v.labels.result as JobLookupResult] = v.value;
    }
    return out;
  };

  const cases: Array<[string, JobReader["get"], Partial<Record<JobLookupResult, number>>, number?]> = [
    ["read from the apiserver, then answered from the cache → fetched, then hit", async () => mnist, { fetched: 1, hit: 1 }],
    // The pod's controller has a uid: a cached absence of its job is read again (the job may have been made since).
    ["the apiserver says 404 → not_found, then the cached absence read again → not_found", async () => undefined, { not_found: 2 }],
    ["the apiserver fails → error, twice (failures are not cached)", async () => Promise.reject(new Error("ECONNREFUSED")), { error: 2 }],
    ["the apiserver never answers → timeout, twice", () => new Promise(() => undefined), { timeout: 2 }, 50],
  ];
  for (const [name, get, want, timeoutMs] of cases) {
    it(`lookupTopology: ${name}`, async () => {
      const { metrics, reader } = measured(get);
      const p = timeoutMs ? checkPolicy({ clusterSpec: { jobLookupTimeoutMs: timeoutMs } }, "t") : policy;
      await lookupTopology(pod, "team-a", p, reader);
      await lookupTopology(pod, "team-a", p, reader);
      assert.deepEqual(await counts(metrics), want);
    });
  }

  it("a pod of no job is no lookup", async () => {
    const { metrics, reader } = measured(async () => mnist);
    await lookupTopology({ metadata: { name: "x" }, spec: { containers: [] } } as unknown as V1Pod, "team-a", policy, reader);
    assert.deepEqual(await counts(metrics), {});
  });

  it("durations come from the reader's clock (2 ms per reading here) into the histogram", async () => {
    const { metrics, reader } = measured(async () => mnist);
    await lookupTopology(pod, "team-a", policy, reader);
    const sum = (await metrics.registry.getSingleMetric("quartermaster_job_lookup_duration_seconds")!.get()).values.find((v) =>
      (v as { metricName?: string }).metricName?.endsWith("_sum"),
    );
    assert.ok(sum && Math.abs(sum.value - 0.002) < 1e-9, `sum ${sum?.value}`);
  });

  it("readJob (the job validation's old object): fetched, hit, not_found, error", async () => {
    const { metrics, reader } = measured(async (_k, _ns, name) => (name === "mnist" ? mnist : name === "boom" ? Promise.reject(new Error("x")) : undefined));
    await readJob({ kind: kindOf("TFJob"), namespace: "team-a", name: "mnist", jobs: reader, timeoutMs: 1000 });
    await readJob({ kind: kindOf("TFJob"), namespace: "team-a", name: "mnist", jobs: reader, timeoutMs: 1000 });
    await readJob({ kind: kindOf("TFJob"), namespace: "team-a", name: "gone", jobs: reader, timeoutMs: 1000 });
    await readJob({ kind: kindOf("TFJob"), namespace: "team-a", name: "boom", jobs: reader, timeoutMs: 1000 });
    assert.deepEqual(await counts(metrics), { fetched: 1, hit: 1, not_found: 1, error: 1 });
  });

  it("refresh-ahead: a lookup answered from a copy being re-read in the background is hit_refreshing; once re-read, hit", async () => {
    const metrics = createAdmissionMetrics({ timeoutSeconds: 5 });
    let now = 0;
    let answer: (job: typeof mnist) => void = () => undefined;
    let gets = 0;
    const get = () => (++gets === 1 ? Promise.resolve(mnist) : new Promise<typeof mnist>((r) => (answer = r)));
    const cached = cachedJobReader(async () => get, { ttlMs: 1000, now: () => now, observe: (r, s) => metrics.jobLookup(r, s) });
    // Through a review's reads, as the webhooks read: the pool must pass `refreshing` on with `peek`.
    const reader = readPool(cached).review(1000);
    const read = () => readJob({ kind: kindOf("TFJob"), namespace: "team-a", name: "mnist", jobs: reader, timeoutMs: 1000 });
    await lookupTopology(pod, "team-a", policy, reader); // fetched
    await lookupTopology(pod, "team-a", policy, reader); // hit: before the refresh point
    now = 600;
    await lookupTopology(pod, "team-a", policy, reader); // hit_refreshing: the copy, its re-read begun
    await read(); // hit_refreshing, through readJob
    answer(mnist);
    await new Promise((r) => setImmediate(r));
    await lookupTopology(pod, "team-a", policy, reader); // hit: the new copy
    reader.release();
    assert.deepEqual({ gets, counts: await counts(metrics) }, { gets: 2, counts: { fetched: 1, hit: 2, hit_refreshing: 2 } });
  });

  it("a reader without an observer measures nothing and answers as before", async () => {
    const reader = cachedJobReader(async () => async () => mnist, { ttlMs: 1000 });
    assert.equal(reader.observeLookup, undefined);
    assert.equal((await lookupTopology(pod, "team-a", policy, reader)).kind, "found");
  });
});

describe("metrics: the resident reconciler's passes", () => {
  it("action types are verb and kind, never object names", () => {
    assert.equal(actionType("delete Pod team-a/mnist-worker-0"), "delete Pod");
    assert.equal(actionType("write ConfigMap quartermaster/quartermaster-ledger-3"), "write ConfigMap");
  });

  it("duration by result, actions by type and result, last success, skipped ticks", async () => {
    let wall = Date.parse("2026-11-25T12:00:00Z");
    const metrics = createReconcilerMetrics({ now: () => wall });
    const ticks: Array<() => void> = [];
    let t = 0;
    const outcomes: Array<() => Promise<unknown>> = [
      async () => ({
        actions: {
          applied: ["delete Pod team-a/p-0", "delete Pod team-a/p-1", "create Service team-a/s"],
          skipped: [{ action: "delete Pod team-a/p-2" }],
          failed: [],
        },
      }),
      async () => ({ actions: { applied: [], skipped: [], failed: [{ action: "patch Pod team-b/q" }] } }),
      async () => ({ leaseBusy: true }),
      async () => Promise.reject(new Error("apiserver down")),
    ];
    let release: () => void = () => undefined;
    let i = 0;
    const loop = startLoop({
      expression: "*/5 * * * *",
      schedule: (_e, tick) => {
        ticks.push(tick);
        return { stop: () => undefined };
      },
      pass: async () => {
        t += 3; // each pass takes 3 s on the loop's clock
        if (i === 0) await new Promise<void>((r) => (release = r));
        return (await outcomes[i++]!()) as never;
      },
      log: silentLogger(),
      metrics,
      clock: () => t,
    });
    ticks[0]!();
    ticks[0]!(); // still running: skipped
    release();
    await new Promise((r) => setTimeout(r, 5));
    wall += 300_000;
    for (let k = 1; k < outcomes.length; k++) {
      ticks[0]!();
      await new Promise((r) => setTimeout(r, 5));
    }
    await loop.stop();
    const s = await series(metrics.registry, "quartermaster_reconcile_actions_total");
    assert.deepEqual(s, {
      "quartermaster_reconcile_actions_total{type=delete Pod,result=applied}": 2,
      "quartermaster_reconcile_actions_total{type=create Service,result=applied}": 1,
      "quartermaster_reconcile_actions_total{type=delete Pod,result=skipped}": 1,
      "quartermaster_reconcile_actions_total{type=patch Pod,result=failed}": 1,
    });
    const d = await series(metrics.registry, "quartermaster_reconcile_pass_duration_seconds");
    for (const result of ["ok", "failed", "lease_busy", "error"]) {
      assert.equal(d[`quartermaster_reconcile_pass_duration_seconds_count{result=${result}}`], 1, result);
      assert.equal(d[`quartermaster_reconcile_pass_duration_seconds_sum{result=${result}}`], 3, result);
    }
    // Only the first pass succeeded: the timestamp is that pass's end, not the later ones'.
    assert.deepEqual(Object.values(await series(metrics.registry, "quartermaster_reconcile_last_success_timestamp_seconds")), [
      Date.parse("2026-11-25T12:00:00Z") / 1000,
    ]);
    assert.deepEqual(Object.values(await series(metrics.registry, "quartermaster_reconcile_ticks_skipped_total")), [1]);
  });
});

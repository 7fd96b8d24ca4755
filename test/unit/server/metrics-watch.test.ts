/**
 * The resident job controller's metrics (`createWatchMetrics`, fed by src/run/watch.ts): queue depth and
 * Lease read at scrape time, syncs by result and their duration, full passes, objects written by verb and
 * kind; and its metrics port's readiness (ready once the caches have synced). Each case fails when the series
 * it names is missing or miscounted.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Registry } from "prom-client";
import { silentLogger } from "../../../src/log.js";
import { createWatchMetrics, objectWrite } from "../../../src/reconcile/metrics.js";
import { startMetricsServer } from "../../../src/server/serve.js";
import { plain } from "../../fixtures/https.js";

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

describe("metrics: reconcile --watch", () => {
  it("objectWrite: creates and deletes of pods, Services and jobs, nothing else", () => {
    const cases: Array<[string, ReturnType<typeof objectWrite>]> = [
      ["create Pod team-a/team-a-ex-worker-0", { verb: "create", kind: "Pod" }],
      ["delete Service team-a/team-a-ex-worker-0", { verb: "delete", kind: "Service" }],
      ["delete Job team-a/ex", { verb: "delete", kind: "Job" }],
      ["patch Caffe2Job/status team-a/ex", undefined],
      ["adopt Pod team-a/p", undefined],
      ["write ConfigMap quartermaster/quartermaster-ledger-0", undefined],
    ];
    for (const [action, want] of cases) assert.deepEqual(objectWrite(action), want, action);
  });

  it("queue depth and Lease read at scrape time; 0 before the controller runs", async () => {
    const m = createWatchMetrics();
    assert.deepEqual(await series(m.registry, "quartermaster_watch_queue_depth"), { "quartermaster_watch_queue_depth{}": 0 });
    assert.deepEqual(await series(m.registry, "quartermaster_watch_lease_held"), { "quartermaster_watch_lease_held{}": 0 });
    let depth = 7;
    let leading = true;
    m.source({ queueDepth: () => depth, leading: () => leading });
    assert.deepEqual(await series(m.registry, "quartermaster_watch_queue_depth"), { "quartermaster_watch_queue_depth{}": 7 });
    assert.deepEqual(await series(m.registry, "quartermaster_watch_lease_held"), { "quartermaster_watch_lease_held{}": 1 });
    depth = 0;
    leading = false;
    assert.deepEqual(await series(m.registry, "quartermaster_watch_queue_depth"), { "quartermaster_watch_queue_depth{}": 0 });
    assert.deepEqual(await series(m.registry, "quartermaster_watch_lease_held"), { "quartermaster_watch_lease_held{}": 0 }, "a standby says so");
  });

  it("syncs by result (every result present from the start), their duration, passes, objects by verb and kind", async () => {
    const m = createWatchMetrics();
    assert.deepEqual(await series(m.registry, "quartermaster_watch_reconciles_total"), {
      "quartermaster_watch_reconciles_total{result=ok}": 0,
      "quartermaster_watch_reconciles_total{result=requeued}": 0,
      "quartermaster_watch_reconciles_total{result=error}": 0,
    });
    m.sync("ok", 0.004);
    m.sync("ok", 0.02);
    m.sync("requeued", 0.3);
    m.sync("error", 2);
    m.pass("ok", 1.5);
    m.pass("failed", 3);
    for (const a of [
      "create Pod team-a/a-0",
      "create Pod team-a/a-1",
      "create Service team-a/a-0",
      "delete Pod team-a/a-2",
      "patch Caffe2Job/status team-a/a",
    ]) {
      const w = objectWrite(a);
      if (w) m.object(w.verb, w.kind);
    }
    assert.deepEqual(await series(m.registry, "quartermaster_watch_reconciles_total"), {
      "quartermaster_watch_reconciles_total{result=ok}": 2,
      "quartermaster_watch_reconciles_total{result=requeued}": 1,
      "quartermaster_watch_reconciles_total{result=error}": 1,
    });
    const d = await series(m.registry, "quartermaster_watch_reconcile_duration_seconds");
    assert.equal(d["quartermaster_watch_reconcile_duration_seconds_count{}"], 4);
    assert.ok(Math.abs(d["quartermaster_watch_reconcile_duration_seconds_sum{}"]! - 2.324) < 1e-9);
    assert.equal(d["quartermaster_watch_reconcile_duration_seconds_bucket{le=0.005}"], 1);
    assert.equal(d["quartermaster_watch_reconcile_duration_seconds_bucket{le=0.5}"], 3);
    const p = await series(m.registry, "quartermaster_watch_pass_duration_seconds");
    assert.equal(p["quartermaster_watch_pass_duration_seconds_count{result=ok}"], 1);
    assert.equal(p["quartermaster_watch_pass_duration_seconds_count{result=failed}"], 1);
    assert.deepEqual(await series(m.registry, "quartermaster_watch_objects_total"), {
      "quartermaster_watch_objects_total{verb=create,kind=Pod}": 2,
      "quartermaster_watch_objects_total{verb=create,kind=Service}": 1,
      "quartermaster_watch_objects_total{verb=delete,kind=Pod}": 1,
    });
  });

  it("two controllers in one process do not share series (no global registry)", async () => {
    const a = createWatchMetrics();
    const b = createWatchMetrics();
    a.sync("ok", 0.01);
    assert.equal((await series(b.registry, "quartermaster_watch_reconciles_total"))["quartermaster_watch_reconciles_total{result=ok}"], 0);
  });

  it("the metrics port: /healthz at once, /readyz only once the caches have synced", async () => {
    const m = createWatchMetrics({ processMetrics: true });
    let synced = false;
    const served = await startMetricsServer({ host: "127.0.0.1", port: 0, registry: m.registry, log: silentLogger(), ready: () => synced });
    try {
      assert.equal((await plain(served.port, "/healthz")).status, 200);
      assert.equal((await plain(served.port, "/readyz")).status, 503);
      synced = true;
      assert.equal((await plain(served.port, "/readyz")).status, 200);
      const r = await plain(served.port, "/metrics");
      assert.equal(r.status, 200);
      assert.match(r.text, /\nquartermaster_watch_lease_held 0\n/);
      assert.match(r.text, /\nprocess_resident_memory_bytes \d+/);
    } finally {
      await served.close();
    }
  });
});

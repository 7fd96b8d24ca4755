/**
 * Scraping the metrics ports over real sockets: the webhook's (ledger gauges from an index read as the
 * capacity check reads it, the job-lookup histogram fed by real admission requests) and the resident
 * reconciler's own listener (pass metrics after a pass of the real loop; probes; closed on stop).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { indexOfData } from "../../src/run/ledger-index.js";
import { cachedJobReader } from "../../src/kube/jobs.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { CHECKSUM_KEY, INDEX_KEY, shardLedger } from "../../src/ledger/shards.js";
import { startLoop } from "../../src/reconcile/loop.js";
import { createAdmissionMetrics } from "../../src/server/metrics.js";
import { createReconcilerMetrics } from "../../src/reconcile/metrics.js";
import { startMetricsServer, startServer, type RunningServer } from "../../src/server/serve.js";
import { silentLogger } from "../../src/log.js";
import { createWebhooks } from "../../webhooks/index.js";
import { makeCerts, plain, postJson } from "../fixtures/https.js";
import { job } from "../fixtures/jobs.js";
import { oneNodeLedger } from "../fixtures/ledgers.js";
import { pod, review } from "../fixtures/reviews.js";

const ledger = oneNodeLedger({ allocated: 2, generatedAt: "2026-11-25T12:00:00.000Z" });

describe("the webhook's metrics port: ledger gauges and job lookups", () => {
  let server: RunningServer;
  let ca: string;
  before(async () => {
    const files = await makeCerts();
    ca = files.certs.ca.certPem;
    const { index } = shardLedger(ledger, 900_000);
    const read = indexOfData({ [INDEX_KEY]: index.text, [CHECKSUM_KEY]: index.sha256 })!;
    const metrics = createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => ({ index: read, readAt: Date.parse("2026-11-25T12:00:10Z") }) });
    const mnist = job("TFJob", "mnist", "team-a", { Worker: 2 });
    const jobs = cachedJobReader(async () => async (_k, _ns, name) => (name === "mnist" ? mnist : undefined), {
      ttlMs: 60_000,
      observe: (r, s) => metrics.jobLookup(r, s),
    });
    const log = silentLogger();
    server = await startServer({
      host: "127.0.0.1",
      port: 0,
      metricsPort: 0,
      certFile: files.certFile,
      keyFile: files.keyFile,
      webhooks: createWebhooks({ policy: defaultPolicy(), log, jobs, now: () => new Date() }),
      metrics,
      log,
    });
  });
  after(() => server.close());

  it("serves the ledger's gauges and a lookup histogram by result after admissions", async () => {
    const labels = (name: string) => ({ "training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "tfjob-controller" });
    for (const [uid, name] of [
      ["a", "mnist"],
      ["b", "mnist"],
      ["c", "gone"],
    ] as const) {
      const r = await postJson(server.port, "/mutate/pods", review({ uid, object: pod({ name: `${name}-worker-0`, labels: labels(name) }) }), ca);
      assert.equal(r.status, 200);
    }
    const r = await plain(server.metricsPort!, "/metrics");
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    assert.match(r.text, /\nquartermaster_ledger_gpus\{resource="nvidia.com\/gpu",state="free"\} 6\n/);
    assert.match(r.text, /\nquartermaster_ledger_present 1\n/);
    assert.match(r.text, /\nquartermaster_ledger_namespace_gpu_seconds_total\{namespace="team-a",resource="nvidia.com\/gpu"\} 3600\n/);
    assert.match(r.text, /\nquartermaster_ledger_generated_timestamp_seconds 1795608000\n/);
    assert.match(r.text, /\nquartermaster_job_lookup_duration_seconds_count\{result="fetched"\} 1\n/);
    assert.match(r.text, /\nquartermaster_job_lookup_duration_seconds_count\{result="hit"\} 1\n/);
    assert.match(r.text, /\nquartermaster_job_lookup_duration_seconds_count\{result="not_found"\} 1\n/);
  });
});

describe("the resident reconciler's metrics port", () => {
  it("serves pass metrics, health and readiness; closes on stop", async () => {
    const metrics = createReconcilerMetrics({ processMetrics: true });
    const served = await startMetricsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, log: silentLogger() });
    let tick: () => void = () => undefined;
    let passed: () => void = () => undefined;
    const done = new Promise<void>((r) => (passed = r));
    const loop = startLoop({
      expression: "*/5 * * * *",
      schedule: (_e, t) => ((tick = t), { stop: () => undefined }),
      pass: async () => {
        setImmediate(passed);
        return { actions: { applied: ["delete Pod team-a/p-0"], skipped: [], failed: [{ action: "delete Service team-a/s", error: "conflict" }] } };
      },
      log: silentLogger(),
      metrics,
    });
    tick();
    await done;
    await loop.stop();
    const r = await plain(served.port, "/metrics");
    assert.equal(r.status, 200);
    assert.match(r.text, /\nquartermaster_reconcile_pass_duration_seconds_count\{result="failed"\} 1\n/);
    assert.match(r.text, /\nquartermaster_reconcile_actions_total\{type="delete Pod",result="applied"\} 1\n/);
    assert.match(r.text, /\nquartermaster_reconcile_actions_total\{type="delete Service",result="failed"\} 1\n/);
    assert.match(r.text, /\nprocess_resident_memory_bytes \d+/);
    assert.equal((await plain(served.port, "/healthz")).status, 200);
    assert.equal((await plain(served.port, "/readyz")).status, 200);
    assert.equal((await plain(served.port, "/nope")).status, 404);
    assert.equal((await plain(served.port, "/metrics", "POST")).status, 405);
    await served.close();
    await assert.rejects(plain(served.port, "/healthz"));
  });
});

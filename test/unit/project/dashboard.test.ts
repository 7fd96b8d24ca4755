/**
 * The Grafana dashboard of the monitoring overlay against the code: every query (panel targets and template
 * variables) parses as PromQL with the Prometheus project's own grammar (@prometheus-io/lezer-promql;
 * test/fixtures/dashboard.ts), and
 * every metric it names is one the code registers (collected from the registries src/server/metrics.ts and src/reconcile/metrics.ts
 * builds). The ConfigMap that carries it has the label Grafana's dashboard sidecar looks for.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { check, queries, type Dashboard } from "../../fixtures/dashboard.js";
import { registeredMetricNames } from "../../fixtures/metric-names.js";

const OVERLAY = join(resolve(import.meta.dirname, "../../.."), "manifests/overlays/monitoring");
const FILE = "quartermaster-dashboard.json";

const dashboard = JSON.parse(readFileSync(join(OVERLAY, FILE), "utf8")) as Dashboard;

/** What is wrong with a dashboard's queries against `registered`. */
function problems(d: Dashboard, registered: Set<string>): string[] {
  const found: string[] = [];
  for (const { where, expr } of queries(d)) {
    const { errors, metrics } = check(expr);
    for (const e of errors) found.push(`${where}: PromQL syntax error ${e}`);
    if (metrics.length === 0) found.push(`${where}: reads no metric`);
    for (const name of metrics) if (!registered.has(name)) found.push(`${where}: ${name} is not registered by the code`);
  }
  return found;
}

describe("monitoring overlay: Grafana dashboard", () => {
  it("every query parses as PromQL and names only metrics the code registers", async () => {
    const all = queries(dashboard);
    assert.ok(all.length >= 20, `${all.length} queries`);
    assert.deepEqual(problems(dashboard, await registeredMetricNames()), []);
  });

  it("shows the ledger, the job lookups, the reconciler's passes and the jobs blocked by reason", () => {
    const read = new Set(queries(dashboard).flatMap((q) => check(q.expr).metrics));
    for (const want of [
      "quartermaster_ledger_gpus",
      "quartermaster_ledger_stale_nodes",
      "quartermaster_ledger_pending_gpu_pods",
      "quartermaster_ledger_namespace_gpus_allocated",
      "quartermaster_ledger_namespace_gpu_seconds_total",
      "quartermaster_job_lookup_duration_seconds_count",
      "quartermaster_reconcile_pass_duration_seconds_bucket",
      "quartermaster_reconcile_actions_total",
      "quartermaster_reconcile_last_success_timestamp_seconds",
      "quartermaster_jobs_blocked",
      "quartermaster_blocked_gpu_minutes_total",
    ])
      assert.ok(read.has(want), want);
  });

  // The check can fail: each of these is caught.
  const broken: Array<[string, string, RegExp]> = [
    ["a metric the code does not register", "sum(quartermaster_ledger_gpu_total)", /quartermaster_ledger_gpu_total is not registered/],
    [
      "a histogram's base name (only _bucket/_sum/_count exist)",
      "rate(quartermaster_job_lookup_duration_seconds[5m])",
      /quartermaster_job_lookup_duration_seconds is not registered/,
    ],
    ["a syntax error", "sum by (le (rate(quartermaster_ledger_gpus[5m]))", /syntax error/],
  ];
  for (const [name, expr, want] of broken) {
    it(`a dashboard with ${name} fails`, async () => {
      const bad: Dashboard = { ...dashboard, panels: [{ title: "bad", type: "timeseries", targets: [{ refId: "A", expr }] }], templating: { list: [] } };
      const found = problems(bad, await registeredMetricNames());
      assert.ok(
        found.some((p) => want.test(p)),
        found.join("\n"),
      );
    });
  }

  it('the overlay ships it as a ConfigMap labelled grafana_dashboard: "1", without a name hash', () => {
    const k = parse(readFileSync(join(OVERLAY, "kustomization.yaml"), "utf8")) as {
      configMapGenerator: Array<{ name: string; files: string[]; options: { labels: Record<string, string>; disableNameSuffixHash: boolean } }>;
    };
    const gen = k.configMapGenerator.find((g) => g.files.includes(FILE));
    assert.ok(gen, `no configMapGenerator carries ${FILE}`);
    assert.equal(gen.options.labels.grafana_dashboard, "1");
    assert.equal(gen.options.disableNameSuffixHash, true);
    assert.equal(dashboard.uid, "quartermaster");
  });
});

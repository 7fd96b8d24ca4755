/**
 * The monitoring overlay against the code it watches: every alert expression is PromQL (the Prometheus
 * project's own grammar), every quartermaster_* series it reads is one the server exports, the certificate
 * thresholds are the doctor's, and the ServiceMonitor scrapes the port, name and Secret of the base.
 * Also the days-to-expiry gauge: computed at scrape time from the injected clock.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { parser } from "@prometheus-io/lezer-promql";
import { parse, parseAllDocuments } from "yaml";
import { EXPIRY_CRITICAL_DAYS, EXPIRY_WARNING_DAYS } from "../../../src/doctor/certs.js";
import { createAdmissionMetrics } from "../../../src/server/metrics.js";
import { registeredMetricNames } from "../../fixtures/metric-names.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const OVERLAY = join(ROOT, "manifests/overlays/monitoring");

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; description: string };
}

const ruleDoc = parse(readFileSync(join(OVERLAY, "prometheusrule.yaml"), "utf8")) as {
  kind: string;
  metadata: { namespace: string };
  spec: { groups: Array<{ name: string; rules: Rule[] }> };
};
const rules = ruleDoc.spec.groups.flatMap((g) => g.rules);

/** PromQL syntax errors in `expr`, and the metric names its selectors read. */
function promql(expr: string): { errors: string[]; metrics: string[] } {
  const errors: string[] = [];
  const metrics: string[] = [];
  parser.parse(expr).iterate({
    enter(node) {
      if (node.type.isError) errors.push(`at ${node.from}: ${JSON.stringify(expr.slice(Math.max(0, node.from - 10), node.to + 10))}`);
      if (node.name === "Identifier" && node.node.parent?.name === "VectorSelector") metrics.push(expr.slice(node.from, node.to));
    },
  });
  return { errors, metrics };
}

const exported = registeredMetricNames;

describe("monitoring overlay: PrometheusRule", () => {
  it("the rule is a PrometheusRule in quartermaster with alerts on certificates, latency and the reconciler", () => {
    assert.equal(ruleDoc.kind, "PrometheusRule");
    assert.equal(ruleDoc.metadata.namespace, "quartermaster");
    const names = rules.map((r) => r.alert);
    for (const want of [
      "QuartermasterCertificateExpiresSoon",
      "QuartermasterCertificateExpiryCritical",
      "QuartermasterWebhookLatencyHigh",
      "QuartermasterReconcilerPassFailed",
    ])
      assert.ok(names.includes(want), want);
  });

  for (const rule of rules) {
    it(`${rule.alert}: parses as PromQL, reads only series that exist, has a severity and a summary`, async () => {
      const { errors, metrics } = promql(rule.expr);
      assert.deepEqual(errors, []);
      assert.ok(metrics.length > 0, "reads no series");
      const ours = await exported();
      for (const name of metrics.filter((n) => n.startsWith("quartermaster_"))) assert.ok(ours.has(name), `${name} is not exported by src/server/metrics.ts`);
      assert.ok(["warning", "critical"].includes(rule.labels.severity), rule.labels.severity);
      assert.ok(rule.annotations.summary && rule.annotations.description);
    });
  }

  it("a broken expression is caught (the check can fail)", () => {
    assert.notDeepEqual(promql("sum by (le (rate(x[5m]))").errors, []);
  });

  it("the certificate alerts use the doctor's thresholds (warning under 30 days, critical under 7)", () => {
    const threshold = (alert: string): number => Number(/<\s*(\d+)\s*$/.exec(rules.find((r) => r.alert === alert)!.expr)![1]);
    assert.equal(threshold("QuartermasterCertificateExpiresSoon"), EXPIRY_WARNING_DAYS);
    assert.equal(threshold("QuartermasterCertificateExpiryCritical"), EXPIRY_CRITICAL_DAYS);
  });

  it("the CronJob reconciler's alerts read kube-state-metrics (its passes expose no metrics of their own)", () => {
    const reads = rules.filter((r) => r.alert.startsWith("QuartermasterReconciler")).flatMap((r) => promql(r.expr).metrics);
    assert.deepEqual([...new Set(reads)].sort(), ["kube_cronjob_status_last_successful_time", "kube_job_created", "kube_job_status_failed"]);
  });

  it("the resident reconciler's alerts read its own pass metrics, the ledger alerts the webhook's ledger gauges", () => {
    const reads = (prefix: string) => [...new Set(rules.filter((r) => r.alert.startsWith(prefix)).flatMap((r) => promql(r.expr).metrics))].sort();
    assert.deepEqual(reads("QuartermasterResidentReconciler"), [
      "quartermaster_reconcile_last_success_timestamp_seconds",
      "quartermaster_reconcile_pass_duration_seconds_count",
    ]);
    assert.deepEqual(reads("QuartermasterLedger"), ["quartermaster_ledger_generated_timestamp_seconds", "quartermaster_ledger_present"]);
  });
});

describe("monitoring overlay: ServiceMonitor", () => {
  const monitor = parse(readFileSync(join(OVERLAY, "servicemonitor.yaml"), "utf8")) as Record<string, any>;
  const base = (file: string): Array<Record<string, any>> =>
    parseAllDocuments(readFileSync(join(ROOT, "manifests/base", file), "utf8")).map((d) => d.toJS() as Record<string, any>);
  const service = base("webhook-service.yaml")[0]!;
  const deployment = base("webhook-deployment.yaml").find((o) => o.kind === "Deployment")!;

  it("scrapes the Service's metrics port by name over plain HTTP: the port the server's --metrics-port serves", () => {
    const [endpoint] = monitor.spec.endpoints;
    const port = service.spec.ports.find((p: { name: string }) => p.name === endpoint.port);
    assert.ok(port, `the Service has no port named ${endpoint.port}`);
    assert.equal(endpoint.scheme, "http");
    assert.equal(endpoint.path, "/metrics");
    assert.equal(endpoint.tlsConfig, undefined);
    const container = deployment.spec.template.spec.containers[0];
    const target = container.ports.find((p: { name: string }) => p.name === port.targetPort).containerPort;
    assert.ok(container.args.includes(`--metrics-port=${target}`));
  });
});

describe("metrics: days to certificate expiry", () => {
  it("is computed at scrape time from the serving certificate's notAfter and the injected clock", async () => {
    let now = Date.parse("2026-06-01T00:00:00Z");
    const m = createAdmissionMetrics({ timeoutSeconds: 5, now: () => now });
    const days = async (): Promise<number | undefined> =>
      (await m.registry.getSingleMetric("quartermaster_tls_certificate_expiry_days")!.get()).values[0]?.value;
    m.certificateLoaded(new Date("2026-07-01T00:00:00Z"));
    assert.equal(await days(), 30);
    now = Date.parse("2026-06-29T12:00:00Z");
    assert.equal(await days(), 1.5);
    now = Date.parse("2026-07-02T00:00:00Z");
    assert.equal(await days(), -1);
    assert.match(await m.registry.metrics(), /\nquartermaster_tls_certificate_expiry_days -1\n/);
    assert.match(await m.registry.metrics(), /\nquartermaster_tls_certificate_expiry_timestamp_seconds 1782864000\n/);
  });
});

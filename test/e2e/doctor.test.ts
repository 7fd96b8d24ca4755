/**
 * End to end: `quartermaster doctor` against a real kube-apiserver with Quartermaster installed from
 * manifests/base, then broken on purpose, one fault at a time (an expired serving certificate, a wrong
 * caBundle, the webhook scaled to zero under failurePolicy Fail, selectors that admit kube-system), each
 * reported with its severity and exit code, then repaired.
 *
 * The install: the validating webhooks call the Service (whose EndpointSlice is kept by hand, as there is no
 * kubelet; its address is a documentation address nobody dials: the apiserver refuses loopback endpoints),
 * and the doctor checks their caBundle against the serving Secret the Deployment mounts; the mutating
 * webhook calls the webhook process by URL, and the doctor shakes hands with it.
 */
import assert from "node:assert/strict";
import { writeFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createCertificateAuthority, generateCertificates } from "../../src/certs/generate.js";
import { runCli } from "../../src/cli/commands.js";
import type { DoctorReport } from "../../src/doctor/index.js";
import type { DoctorFinding as Finding } from "../../src/doctor/types.js";
import { freePort, startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { cli, renderBase, renderWebhookConfigurations, applyOwnManifests, webhookProcess, type WebhookProcess } from "./harness/webhook.js";

const NS = "quartermaster";
const SLICE = `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/quartermaster-webhook-manual`;
const VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/quartermaster";
const MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/quartermaster";
const JSON_PATCH = { "content-type": "application/json-patch+json" };
const MERGE_PATCH = { "content-type": "application/merge-patch+json" };
const b64 = (s: string): string => Buffer.from(s).toString("base64");

describe("doctor against a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wp: WebhookProcess;
  let tls: { cert: string; key: string };

  /** `doctor -o json` in this process (the client loads once); the report and the exit code. */
  const doctor = async (kubeconfig = cp.kubeconfig): Promise<{ code: number; report: DoctorReport; stderr: string }> => {
    let stdout = "";
    let stderr = "";
    const code = await runCli(["doctor", "-o", "json", "--kubeconfig", kubeconfig], {
      stdout: (l) => (stdout += `${l}\n`),
      stderr: (l) => (stderr += `${l}\n`),
      cwd: process.cwd(),
      shutdown: new Promise(() => {}),
    });
    return { code, report: JSON.parse(stdout) as DoctorReport, stderr };
  };
  const loud = (r: DoctorReport): string[] =>
    r.findings.filter((f) => f.severity === "warning" || f.severity === "critical").map((f) => `${f.severity} ${f.check} ${f.subject}: ${f.message}`);
  const find = (r: DoctorReport, check: Finding["check"], subject: string | RegExp): Finding[] =>
    r.findings.filter((f) => f.check === check && (typeof subject === "string" ? f.subject === subject : subject.test(f.subject)));
  const ok = async (method: string, path: string, body: unknown, headers?: Record<string, string>): Promise<void> => {
    const r = await cp.api(method, path, body, headers);
    assert.ok(r.status >= 200 && r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  };

  /** Writes a key pair where the webhook process reads it and waits until it serves the new one. */
  const serve = async (pair: { cert: string; key: string }): Promise<void> => {
    const reloads = wp.lines.filter((l) => l.msg === "tls: serving key pair reloaded").length;
    writeFileSync(join(wp.certDir, "tls.key"), pair.key);
    writeFileSync(join(wp.certDir, "tls.crt"), pair.cert);
    const deadline = Date.now() + 15_000;
    while (wp.lines.filter((l) => l.msg === "tls: serving key pair reloaded").length === reloads) {
      assert.ok(Date.now() < deadline, "the webhook server did not reload its key pair");
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const putSecret = (pair: { cert: string; key: string }): Promise<void> =>
    ok("PUT", `/api/v1/namespaces/${NS}/secrets/quartermaster-webhook-tls`, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "quartermaster-webhook-tls", namespace: NS },
      type: "kubernetes.io/tls",
      data: { "tls.crt": b64(pair.cert), "tls.key": b64(pair.key) },
    });

  before(async () => {
    cp = await startControlPlane();
    await applyOwnManifests(cp);
    wp = await webhookProcess();
    await wp.start();
    tls = { cert: readFileSync(join(wp.certDir, "tls.crt"), "utf8"), key: readFileSync(join(wp.certDir, "tls.key"), "utf8") };
    await ok("POST", `/api/v1/namespaces/${NS}/secrets`, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "quartermaster-webhook-tls" },
      type: "kubernetes.io/tls",
      data: { "tls.crt": b64(tls.cert), "tls.key": b64(tls.key) },
    });
    await ok("POST", `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: "quartermaster-webhook-manual",
        labels: { "kubernetes.io/service-name": "quartermaster-webhook", "endpointslice.kubernetes.io/managed-by": "e2e.quartermaster.dev" },
      },
      addressType: "IPv4",
      endpoints: [
        { addresses: ["192.0.2.10"], conditions: { ready: true } },
        { addresses: ["192.0.2.11"], conditions: { ready: true } },
      ],
      ports: [{ name: "https", port: 8443, protocol: "TCP" }],
    });
    // The mutating webhook by URL (the harness's form); the validating ones through the Service, as shipped.
    const byUrl = await renderWebhookConfigurations(cp, wp.port, wp.caPem);
    const asShipped = (await renderBase(cp)).filter((o) => o.kind === "ValidatingWebhookConfiguration");
    for (const hook of asShipped[0]!.webhooks) hook.clientConfig.caBundle = b64(wp.caPem);
    const configs = [byUrl.find((c) => c.kind === "MutatingWebhookConfiguration")!, asShipped[0]!];
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
    const passed = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    await ok(
      "PATCH",
      `/apis/batch/v1/namespaces/${NS}/cronjobs/quartermaster-reconciler/status`,
      { status: { lastScheduleTime: passed, lastSuccessfulTime: passed } },
      MERGE_PATCH,
    );
    // A real pass, as the CronJob's ServiceAccount, writes the device ledger a healthy install has.
    const reconciler = await cp.serviceAccount(NS, "quartermaster-reconciler");
    const pass = await cli(["reconcile", "--once", "--namespace", NS, "--kubeconfig", reconciler.kubeconfig]);
    assert.equal(pass.code, 0, pass.stderr + pass.stdout);
  });

  after(async () => {
    await wp?.stop();
    await cp?.stop();
  });

  it("a healthy install reports clean: exit 0, every check ok, through the real CLI", async () => {
    const r = await cli(["doctor", "-o", "json", "--kubeconfig", cp.kubeconfig]);
    const report = JSON.parse(r.stdout) as DoctorReport;
    assert.deepEqual(loud(report), []);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(report.status, "healthy");
    const subjects = (check: Finding["check"]): string[] =>
      report.findings
        .filter((f) => f.check === check && f.severity === "ok")
        .map((f) => f.subject)
        .sort();
    const hooks = [
      "claims.validate.quartermaster.dev",
      "jobs.mutate.quartermaster.dev",
      "jobs.validate.quartermaster.dev",
      "pods.mutate.quartermaster.dev",
      "pods.validate.quartermaster.dev",
    ];
    for (const check of ["webhook-configuration", "webhook-render", "endpoints", "ca-bundle", "namespace-selector", "side-effects", "timeout"] as const)
      assert.deepEqual(subjects(check), hooks, check);
    assert.match(find(report, "endpoints", "pods.validate.quartermaster.dev")[0]!.message, /quartermaster\/quartermaster-webhook: 2 ready endpoints/);
    assert.match(find(report, "endpoints", "pods.mutate.quartermaster.dev")[0]!.message, new RegExp(`answers at https://127.0.0.1:${wp.port}/mutate/pods`));
    assert.match(
      find(report, "ca-bundle", "pods.validate.quartermaster.dev")[0]!.message,
      /in Secret quartermaster\/quartermaster-webhook-tls .*names quartermaster-webhook\.quartermaster\.svc/,
    );
    assert.match(find(report, "ca-bundle", "pods.mutate.quartermaster.dev")[0]!.message, new RegExp(`served at 127.0.0.1:${wp.port} .*names 127.0.0.1`));
    assert.deepEqual(subjects("rbac"), ["ServiceAccount quartermaster/quartermaster-reconciler", "ServiceAccount quartermaster/quartermaster-webhook"]);
    assert.match(find(report, "reconciler", /CronJob/)[0]!.message, /^last successful pass \d+s ago \(schedule \*\/5 \* \* \* \*\)$/);
    assert.match(find(report, "ledger", `ledger in ${NS}`)[0]!.message, /^1 shard, checksums valid, written \d+s ago$/);
    assert.equal(find(report, "certificate-expiry", /.*/).length, 2, "the CA and the serving certificate (served and in the Secret: the same one)");
    assert.match(find(report, "confinement", "ValidatingAdmissionPolicy quartermaster-reconciler-scope")[0]!.message, /^bound and current/);

    const table = await cli(["doctor", "--kubeconfig", cp.kubeconfig]);
    assert.equal(table.code, 0);
    assert.match(table.stdout, /^SEVERITY\s+CHECK\s+SUBJECT\s+FINDING\n/);
    assert.match(table.stdout, /\n\nhealthy \(exit 0\): critical 0, warning 0, info 0, ok \d+\n$/);
  });

  it("an expired serving certificate (served and in the Secret) → critical, exit 2; renewed → clean", async () => {
    const ca = { certPem: wp.caPem, keyPem: readFileSync(join(wp.certDir, "ca.key"), "utf8") };
    // The server refuses to load a pair that has expired already, so it is given one that expires while served.
    const validFor = 4_000;
    const old = await generateCertificates({
      service: "quartermaster-webhook",
      namespace: NS,
      ips: ["127.0.0.1"],
      ca,
      days: 1,
      now: new Date(Date.now() - 86_400_000 + validFor),
    });
    const expired = { cert: old.certPem, key: old.keyPem };
    await serve(expired);
    await putSecret(expired);
    await new Promise((r) => setTimeout(r, validFor + 500));
    try {
      const { code, report } = await doctor();
      assert.equal(code, 2);
      const expiry = find(report, "certificate-expiry", /^serving certificate/);
      assert.equal(expiry.length, 1, JSON.stringify(expiry));
      assert.equal(expiry[0]!.severity, "critical");
      assert.match(expiry[0]!.message, /^expired today .*served at 127\.0\.0\.1:\d+, in Secret quartermaster\/quartermaster-webhook-tls/);
      assert.match(expiry[0]!.fix, /certs ensure/);
      // Nothing else is wrong: the caBundle still verifies the (expired) certificate.
      assert.deepEqual(
        loud(report).filter((l) => !l.includes("certificate-expiry")),
        [],
      );
    } finally {
      await serve(tls);
      await putSecret(tls);
    }
    assert.equal((await doctor()).code, 0);
  });

  it("a caBundle that does not verify the serving certificate on the Fail webhooks → critical, exit 2", async () => {
    const other = await createCertificateAuthority("someone-elses-ca", 30);
    const patch = [0, 1].map((i) => ({ op: "replace", path: `/webhooks/${i}/clientConfig/caBundle`, value: b64(other.certPem) }));
    await ok("PATCH", VALIDATING, patch, JSON_PATCH);
    try {
      const { code, report } = await doctor();
      assert.equal(code, 2);
      for (const hook of ["pods.validate.quartermaster.dev", "jobs.validate.quartermaster.dev"]) {
        const [f] = find(report, "ca-bundle", hook);
        assert.equal(f?.severity, "critical", JSON.stringify(f));
        assert.match(
          f!.message,
          /caBundle does not verify the certificate in Secret quartermaster\/quartermaster-webhook-tls: signed by .*quartermaster-ca.*not in the caBundle \("someone-elses-ca-.*"\).*every request it matches is refused \(failurePolicy Fail\)/,
        );
      }
      assert.equal(find(report, "ca-bundle", "pods.mutate.quartermaster.dev")[0]!.severity, "ok");
      // The foreign CA expires in 30 days: reported too, as a warning.
      assert.equal(find(report, "certificate-expiry", /someone-elses-ca/)[0]!.severity, "warning");
    } finally {
      await ok(
        "PATCH",
        VALIDATING,
        patch.map((p) => ({ ...p, value: b64(wp.caPem) })),
        JSON_PATCH,
      );
    }
  });

  it("the webhook scaled to zero with failurePolicy Fail → critical for the validating webhooks, exit 2", async () => {
    assert.equal((await cp.kubectl(["-n", NS, "scale", "deployment/quartermaster-webhook", "--replicas=0"])).code, 0);
    const original = (await cp.api("GET", SLICE)).body.endpoints;
    await ok("PATCH", SLICE, { endpoints: [] }, MERGE_PATCH);
    try {
      const { code, report } = await doctor();
      assert.equal(code, 2);
      for (const hook of ["pods.validate.quartermaster.dev", "jobs.validate.quartermaster.dev"]) {
        const [f] = find(report, "endpoints", hook);
        assert.equal(f?.severity, "critical");
        assert.match(f!.message, /^Service quartermaster\/quartermaster-webhook has no ready endpoint: every request it matches is refused/);
      }
      assert.equal(find(report, "endpoints", "pods.mutate.quartermaster.dev")[0]!.severity, "ok", "the URL webhook still answers");
      // The caBundle check does not need endpoints: it reads the serving Secret.
      assert.equal(find(report, "ca-bundle", "pods.validate.quartermaster.dev")[0]!.severity, "ok");

      // Pods that exist but are not ready count as none.
      await ok("PATCH", SLICE, { endpoints: [{ addresses: ["192.0.2.10"], conditions: { ready: false } }] }, MERGE_PATCH);
      const notReady = await doctor();
      assert.equal(notReady.code, 2);
      assert.match(find(notReady.report, "endpoints", "pods.validate.quartermaster.dev")[0]!.message, /no ready endpoint \(1 not ready\)/);
    } finally {
      await ok("PATCH", SLICE, { endpoints: original }, MERGE_PATCH);
      assert.equal((await cp.kubectl(["-n", NS, "scale", "deployment/quartermaster-webhook", "--replicas=2"])).code, 0);
    }
    assert.equal((await doctor()).code, 0);
  });

  it("a Fail webhook whose namespaceSelector admits kube-system → critical, exit 2", async () => {
    await ok("PATCH", VALIDATING, [{ op: "replace", path: "/webhooks/0/namespaceSelector", value: {} }], JSON_PATCH);
    try {
      const { code, report } = await doctor();
      assert.equal(code, 2);
      const [f] = find(report, "namespace-selector", "pods.validate.quartermaster.dev");
      assert.equal(f?.severity, "critical");
      assert.match(
        f!.message,
        /namespaceSelector \{\} \(every namespace\) matches kube-system, kube-public, kube-node-lease, quartermaster: system pods wait on Quartermaster and are refused when it is down/,
      );
      assert.match(f!.fix, /kubernetes\.io\/metadata\.name, operator: NotIn/);
      assert.equal(find(report, "namespace-selector", "jobs.validate.quartermaster.dev")[0]!.severity, "ok");
    } finally {
      const shipped = (await renderBase(cp)).find((o) => o.kind === "ValidatingWebhookConfiguration")!;
      await ok("PATCH", VALIDATING, [{ op: "replace", path: "/webhooks/0/namespaceSelector", value: shipped.webhooks[0].namespaceSelector }], JSON_PATCH);
    }
  });

  it("an Ignore webhook that admits a kube-system labelled in → warning, exit 1", async () => {
    const optInOnly = { matchExpressions: [{ key: "quartermaster.dev/enabled", operator: "In", values: ["true"] }] };
    await ok("PATCH", MUTATING, [{ op: "replace", path: "/webhooks/0/namespaceSelector", value: optInOnly }], JSON_PATCH);
    try {
      // Excluded today only because kube-system lacks the opt-in label: already a warning.
      const before = await doctor();
      assert.equal(before.code, 1);
      assert.match(
        find(before.report, "namespace-selector", "pods.mutate.quartermaster.dev")[0]!.message,
        /^kube-system, kube-public, kube-node-lease, quartermaster are excluded only by labels/,
      );
      await ok("PATCH", "/api/v1/namespaces/kube-system", { metadata: { labels: { "quartermaster.dev/enabled": "true" } } }, MERGE_PATCH);
      const { code, report } = await doctor();
      assert.equal(code, 1);
      const [f] = find(report, "namespace-selector", "pods.mutate.quartermaster.dev");
      assert.equal(f?.severity, "warning");
      assert.match(f!.message, /matches kube-system: system pods wait on Quartermaster up to its timeout when it is down/);
      // And the selector is no longer the scope's the policy renders.
      assert.deepEqual(
        loud(report)
          .map((x) => x.split(":")[0])
          .sort(),
        ["warning namespace-selector pods.mutate.quartermaster.dev", "warning webhook-render pods.mutate.quartermaster.dev"],
        loud(report).join("\n"),
      );
    } finally {
      await ok("PATCH", "/api/v1/namespaces/kube-system", { metadata: { labels: { "quartermaster.dev/enabled": null } } }, MERGE_PATCH);
      const shipped = (await renderBase(cp)).find((o) => o.kind === "MutatingWebhookConfiguration")!;
      await ok("PATCH", MUTATING, [{ op: "replace", path: "/webhooks/0/namespaceSelector", value: shipped.webhooks[0].namespaceSelector }], JSON_PATCH);
    }
    assert.equal((await doctor()).code, 0);
  });

  it("an apiserver that does not answer → one critical finding, exit 2", async () => {
    const port = await freePort();
    const file = join(cp.dir, "kubeconfig-nowhere");
    writeFileSync(file, readFileSync(cp.kubeconfig, "utf8").replace(/server: https:\/\/127\.0\.0\.1:\d+/, `server: https://127.0.0.1:${port}`));
    const { code, report } = await doctor(file);
    assert.equal(code, 2);
    assert.deepEqual(
      report.findings.map((f) => `${f.severity} ${f.check}`),
      ["critical cluster"],
    );
    assert.match(report.findings[0]!.message, /cannot read the cluster: .*ECONNREFUSED/);
  });
});

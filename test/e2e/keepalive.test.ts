/**
 * Issue 52: the apiserver's webhook client (Go's net/http Transport, as client-go sets it up: keep-alive,
 * 25 idle connections per host, dropped after 90 s idle) must never get EOF from the webhook. It reuses
 * idle connections LIFO and dials spares when all are busy, some of which then sit unused; a server that
 * closes a connection the client may still pick (a spare cut after 20 s, an idle one evicted) races a POST
 * written into it, and Go retries no POST: the call fails, and a fail-closed webhook refuses the pod.
 *
 * Bursts of random width with pauses around the server's timers, then the apiserver's own counts: every
 * call answered (`apiserver_admission_webhook_request_total` has no `code="0"`, no
 * `calling_webhook_error` rejection). QM_KEEPALIVE_SECONDS sets how long the traffic runs (default 50).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, webhookProcess, type WebhookProcess } from "./harness/webhook.js";
import { webhookCalls } from "./harness/webhook-calls.js";
import { manyViolationsPod, VAP_POLICY_YAML, widePod } from "../fixtures/vap-pods.js";

type Obj = Record<string, any>;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const SECONDS = Number(process.env.QM_KEEPALIVE_SECONDS ?? 50);

/** Sums the samples of `metric` whose labels contain every one of `labels`. */
describe("the apiserver's keep-alive connections to the webhook (issue 52)", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  before(async () => {
    cp = await startControlPlane();
    for (const ns of ["team-a", "team-b"]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    const policyFile = join(cp.dir, "policy.yaml");
    writeFileSync(policyFile, VAP_POLICY_YAML);
    wh = await webhookProcess({ kubeconfig: cp.kubeconfig, policy: policyFile, logLevel: "warn" });
    await wh.start();
    const r = await cli(["manifests", "webhooks", "--policy", policyFile]);
    assert.equal(r.code, 0, r.stderr);
    const validating = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Obj)
      .find((c) => c.kind === "ValidatingWebhookConfiguration")!;
    validating.webhooks = validating.webhooks.filter((h: Obj) => h.name === "pods.validate.quartermaster.dev");
    for (const h of validating.webhooks)
      h.clientConfig = { url: `https://127.0.0.1:${wh.port}${h.clientConfig.service.path}`, caBundle: Buffer.from(wh.caPem).toString("base64") };
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(validating));
    assert.equal(applied.code, 0, applied.stderr);
    for (let i = 0; ; i++) {
      const probe = await cp.api("POST", "/api/v1/namespaces/team-a/pods?dryRun=All", manyViolationsPod(`settle-${i}`, 1));
      if (String((probe.body as Obj)?.message ?? "").includes("denied the request")) break;
      assert.ok(i < 150, "the webhook did not take effect");
      await sleep(200);
    }
  });
  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("bursts of every width, with pauses around the server's timers: every call answered", async () => {
    let seq = 0;
    let sent = 0;
    const statuses = new Map<number, number>();
    const send = async (): Promise<void> => {
      const n = ++seq;
      const pod = n % 3 === 0 ? manyViolationsPod(`ka-${n}`, 8) : widePod(`ka-${n}`, 1 + (n % 5));
      const r = await cp.api("POST", `/api/v1/namespaces/${n % 2 ? "team-a" : "team-b"}/pods?dryRun=All`, pod);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 500) process.stderr.write(`500 at ${new Date().toISOString()}: ${String((r.body as Obj)?.message ?? "").slice(0, 240)}\n`);
      sent++;
    };
    // Pauses: none, short, a Node check interval, and around the 20 s headers timeout of a spare connection.
    const pauses = [0, 0, 20, 300, 2_100, 19_000, 20_500, 21_500];
    const end = performance.now() + SECONDS * 1000;
    let round = 0;
    while (performance.now() < end) {
      const width = [1, 2, 6, 12, 20][round % 5]!;
      await Promise.all(Array.from({ length: width }, send));
      // A steady trickle keeps the newest connection in use while the spares sit idle.
      const pause = pauses[(round * 7) % pauses.length]!;
      const until = performance.now() + pause;
      while (performance.now() < until) {
        await send();
        await sleep(Math.min(400, Math.max(0, until - performance.now())));
      }
      round++;
    }
    const counts = webhookCalls(String((await cp.api("GET", "/metrics")).body));
    const name = "pods.validate.quartermaster.dev";
    const [unanswered, callErrors, calls] = [counts.unanswered[name] ?? 0, counts.callErrors[name] ?? 0, counts.calls];
    const ours = await fetch(`http://127.0.0.1:${wh.metricsPort()}/metrics`).then((r) => r.text());
    const shed = ours
      .split("\n")
      .filter((l) => l.startsWith("quartermaster_connections_shed_total{") || l.startsWith("quartermaster_tls_connections_total{"))
      .join("; ");
    process.stderr.write(
      `keepalive: ${sent} creates, ${calls} webhook calls, ${unanswered} unanswered (code 0), ${callErrors} calling_webhook_error; statuses ${JSON.stringify([...statuses])}; ${shed}\n`,
    );
    assert.equal(unanswered, 0, `${unanswered} of ${calls} webhook calls got no answer`);
    assert.equal(callErrors, 0);
    assert.equal(statuses.get(500) ?? 0, 0);
  });
});

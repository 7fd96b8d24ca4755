/**
 * End to end: `serve --client-ca` behind a real kube-apiserver given the AdmissionConfiguration and
 * kubeconfig docs/operations.md describes. The apiserver presents its client certificate and its calls
 * are answered; a client without one is refused in the handshake.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createCertificateAuthority, issueCertificate } from "../../src/certs/generate.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { createNamespace, renderWebhookConfigurations, webhookProcess, type WebhookProcess } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function gpuPod(name: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
  };
}

describe("--client-ca with the apiserver's AdmissionConfiguration", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;

  before(async () => {
    const { mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "qm-e2e-client-ca-"));
    const now = new Date();
    const clientCa = await createCertificateAuthority("qm-e2e-admission-client-ca", 2, now);
    const client = await issueCertificate({ ca: clientCa, commonName: "kube-apiserver-admission", usage: "client", days: 1, now });
    writeFileSync(join(dir, "client-ca.crt"), clientCa.certPem);
    writeFileSync(join(dir, "client.crt"), client.certPem);
    writeFileSync(join(dir, "client.key"), client.keyPem);
    wh = await webhookProcess({ args: ["--client-ca", join(dir, "client-ca.crt")] });
    // For a webhook called by URL the kubeconfig's user is named after the URL's host and port.
    writeFileSync(
      join(dir, "webhook-kubeconfig.yaml"),
      [
        "apiVersion: v1",
        "kind: Config",
        "users:",
        `  - name: "127.0.0.1:${wh.port}"`,
        "    user:",
        `      client-certificate: ${join(dir, "client.crt")}`,
        `      client-key: ${join(dir, "client.key")}`,
        "",
      ].join("\n"),
    );
    const plugin = (name: string): string[] => [
      `  - name: ${name}`,
      "    configuration:",
      "      apiVersion: apiserver.config.k8s.io/v1",
      "      kind: WebhookAdmissionConfiguration",
      `      kubeConfigFile: ${join(dir, "webhook-kubeconfig.yaml")}`,
    ];
    writeFileSync(
      join(dir, "admission.yaml"),
      [
        "apiVersion: apiserver.config.k8s.io/v1",
        "kind: AdmissionConfiguration",
        "plugins:",
        ...plugin("ValidatingAdmissionWebhook"),
        ...plugin("MutatingAdmissionWebhook"),
        "",
      ].join("\n"),
    );
    cp = await startControlPlane({ apiserverArgs: [`--admission-control-config-file=${join(dir, "admission.yaml")}`] });
    await wh.start();
    await createNamespace(cp, "team-a", { "quartermaster.dev/enabled": "true" });
    const configs = await renderWebhookConfigurations(cp, wh.port, wh.caPem);
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("the apiserver's calls carry its client certificate and are answered (mutated and validated)", async () => {
    const deadline = performance.now() + 30_000;
    let seen = new Set<unknown>();
    let n = 0;
    while (performance.now() < deadline) {
      const name = `probe-${++n}`;
      const r = await cp.api("POST", "/api/v1/namespaces/team-a/pods?dryRun=All", gpuPod(name));
      assert.ok(r.status === 201 || r.status === 200, `pod create: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      seen = new Set((await wh.awaitAdmissions(name, 2, 1000)).map((l) => l.webhook));
      if (seen.has("mutate-pods") && seen.has("validate-pods")) break;
      await sleep(200);
    }
    assert.deepEqual([...seen].sort(), ["mutate-pods", "validate-pods"]);
  });

  it("a client without a certificate is refused in the handshake", async () => {
    const attempt = new Promise<number>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: wh.port, path: "/readyz", ca: wh.caPem, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    await assert.rejects(attempt, /certificate|alert|ECONNRESET|socket hang up/);
  });
});

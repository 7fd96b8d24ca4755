import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { writeFileSync } from "node:fs";
import { describe, it } from "node:test";
import { generateCertificates } from "../../src/certs/generate.js";
import { validatingWebhook } from "../../src/admission/handler.js";
import { call, plain, postJson, startTestServer, writeCerts } from "../fixtures/https.js";
import { review } from "../fixtures/reviews.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;
const webhooks = {
  "/validate/pods": validatingWebhook({ name: "v", guard: () => undefined, validate: () => ({ violations: [], warnings: [] }) }),
};

async function waitFor(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    if (await cond()) return true;
    await sleep(25);
  }
  return false;
}

describe("serving key pair reload", () => {
  it("a new pair in the files is picked up without a restart; no request fails during the swap", async (ctx) => {
    const t = await startTestServer(webhooks, { tlsPollMs: 60_000 /* the directory watch alone must do it */ });
    ctx.after(() => t.server.close());
    const oldCa = t.files.certs.ca.certPem;
    const next = await generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"] }); // a new CA too
    const cas = [oldCa, next.ca.certPem];
    const oldPrint = fingerprint(t.files.certs.certPem);
    const newPrint = fingerprint(next.certPem);

    // Load: 8 workers, each a fresh TLS connection per request, until the swap is observed and then some.
    let stop = false;
    let failures = 0;
    let ok = 0;
    const seen = new Set<string>();
    const worker = async (): Promise<void> => {
      while (!stop) {
        try {
          const r = await postJson(t.port, "/validate/pods", review(), cas);
          if (r.status === 200 && r.json().response.allowed === true) ok++;
          else failures++;
          if (r.fingerprint) seen.add(r.fingerprint);
        } catch {
          failures++;
        }
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    await sleep(200);
    writeCerts(t.files.dir, next);
    const swapped = await waitFor(async () => (await call(t.port, { method: "GET", path: "/healthz", ca: cas })).fingerprint === newPrint, 5000);
    await sleep(200);
    stop = true;
    await Promise.all(workers);
    await t.server.close();

    assert.ok(swapped, "new connections get the new certificate");
    assert.equal(failures, 0, `${failures} failed requests during the swap`);
    assert.ok(ok > 20, `only ${ok} requests completed`);
    assert.ok(seen.has(oldPrint) && seen.has(newPrint), "load ran across the swap");
  });

  it("a half-written update (new certificate, old key) keeps the old pair until the key arrives", async (ctx) => {
    const t = await startTestServer(webhooks, { tlsPollMs: 60_000 });
    ctx.after(() => t.server.close());
    const next = await generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"], ca: t.files.certs.ca });
    const ca = t.files.certs.ca.certPem;
    writeFileSync(t.files.certFile, next.certPem);
    await t.server.reloadTls();
    const mid = await call(t.port, { method: "GET", path: "/healthz", ca });
    assert.equal(mid.status, 200);
    assert.equal(mid.fingerprint, fingerprint(t.files.certs.certPem), "still the old certificate");
    writeFileSync(t.files.keyFile, next.keyPem);
    await t.server.reloadTls();
    const done = await call(t.port, { method: "GET", path: "/healthz", ca });
    assert.equal(done.fingerprint, fingerprint(next.certPem));
    const metrics = await plain(t.metricsPort, "/metrics");
    assert.match(metrics.text, /quartermaster_tls_reloads_total\{result="mismatch"\} [1-9]/);
    assert.match(metrics.text, /quartermaster_tls_reloads_total\{result="ok"\} 2/);
    await t.server.close();
  });

  it("a Secret-style update (the ..data symlink swapped) is picked up by the poll", async (ctx) => {
    const { mkdtempSync, mkdirSync, symlinkSync, renameSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const vol = mkdtempSync(join(tmpdir(), "qm-secret-"));
    const first = await generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"] });
    const second = await generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"], ca: first.ca });
    const stage = (name: string, c: typeof first): void => {
      mkdirSync(join(vol, name));
      writeCerts(join(vol, name), c);
    };
    stage("..v1", first);
    symlinkSync("..v1", join(vol, "..data"));
    for (const f of ["tls.crt", "tls.key", "ca.crt"]) symlinkSync(join("..data", f), join(vol, f));
    const files = { dir: vol, certFile: join(vol, "tls.crt"), keyFile: join(vol, "tls.key"), caFile: join(vol, "ca.crt"), certs: first };
    const t = await startTestServer(webhooks, { files, tlsPollMs: 100 });
    ctx.after(() => t.server.close());
    stage("..v2", second);
    symlinkSync("..v2", join(vol, "..data_tmp"));
    renameSync(join(vol, "..data_tmp"), join(vol, "..data")); // atomic, as the kubelet does
    const swapped = await waitFor(
      async () => (await call(t.port, { method: "GET", path: "/healthz", ca: first.ca.certPem })).fingerprint === fingerprint(second.certPem),
      3000,
    );
    await t.server.close();
    assert.ok(swapped);
  });

  // Each pair below would replace a good one; every one is refused, the old pair served on, the refusal
  // logged and counted by its reason.
  const DAY = 86_400_000;
  const refusals: Array<{ name: string; make: (ca: { certPem: string; keyPem: string }) => Promise<{ certPem: string; keyPem: string }>; result: string }> = [
    {
      name: "an expired certificate",
      make: (ca) => generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"], ca, now: new Date(Date.now() - 10 * DAY), days: 2 }),
      result: "expired",
    },
    {
      name: "a certificate not valid yet",
      make: (ca) => generateCertificates({ service: "qm", namespace: "test", ips: ["127.0.0.1"], ca, now: new Date(Date.now() + 2 * DAY), days: 30 }),
      result: "not_yet_valid",
    },
    {
      name: "a key that does not match the certificate",
      make: async (ca) => ({
        certPem: (await generateCertificates({ service: "qm", namespace: "test", ca })).certPem,
        keyPem: (await generateCertificates({ service: "qm", namespace: "test", ca })).keyPem,
      }),
      result: "mismatch",
    },
  ];
  for (const r of refusals) {
    it(`${r.name} is refused: the old pair is served on, logged, counted as result="${r.result}"`, async (ctx) => {
      const t = await startTestServer(webhooks, { tlsPollMs: 60_000 });
      ctx.after(() => t.server.close());
      const ca = t.files.certs.ca.certPem;
      const next = await r.make(t.files.certs.ca);
      writeFileSync(t.files.keyFile, next.keyPem);
      writeFileSync(t.files.certFile, next.certPem);
      await t.server.reloadTls();
      const after = await call(t.port, { method: "GET", path: "/readyz", ca });
      assert.equal(after.status, 200);
      assert.equal(after.fingerprint, fingerprint(t.files.certs.certPem), "still the old certificate");
      const metrics = await plain(t.metricsPort, "/metrics");
      assert.match(metrics.text, new RegExp(`quartermaster_tls_reloads_total\\{result="${r.result}"\\} [1-9]`));
      assert.match(metrics.text, /quartermaster_tls_reloads_total\{result="ok"\} 1\n/, "only the initial load");
      const line = t.lines.find((l) => l.msg === "tls: key pair not reloaded; still serving the previous one");
      assert.equal(line?.reason, r.result);
      await t.server.close();
    });
  }

  it("a not-yet-valid pair is taken once it becomes valid (checked again on the next poll)", async (ctx) => {
    let clock = Date.now();
    const t = await startTestServer(webhooks, { tlsPollMs: 60_000, now: () => new Date(clock) });
    ctx.after(() => t.server.close());
    const next = await generateCertificates({
      service: "qm",
      namespace: "test",
      ips: ["127.0.0.1"],
      ca: t.files.certs.ca,
      now: new Date(Date.now() + 2 * DAY),
      days: 30,
    });
    writeCerts(t.files.dir, next);
    await t.server.reloadTls();
    const ca = t.files.certs.ca.certPem;
    // This client's clock is the real one, so it would refuse the new certificate: it only reads its fingerprint.
    const agent = new (await import("node:https")).Agent({ rejectUnauthorized: false });
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca, agent })).fingerprint, fingerprint(t.files.certs.certPem));
    clock += 2 * DAY;
    await t.server.reloadTls();
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca, agent })).fingerprint, fingerprint(next.certPem));
  });

  it("/readyz is 503 on both ports once the served certificate has expired", async (ctx) => {
    let clock = Date.now();
    const t = await startTestServer(webhooks, { tlsPollMs: 60_000, now: () => new Date(clock) });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    assert.equal((await plain(t.metricsPort, "/readyz")).status, 200);
    clock = new Date(new X509Certificate(t.files.certs.certPem).validTo).getTime() + 1000;
    const metricsPort = await plain(t.metricsPort, "/readyz");
    assert.equal(metricsPort.status, 503);
    assert.equal(metricsPort.text, "serving certificate expired");
    // A client that ignores the expiry (as a probe with insecureSkipVerify does) is told so on the webhook port too.
    const webhookPort = await call(t.port, {
      method: "GET",
      path: "/readyz",
      ca,
      agent: new (await import("node:https")).Agent({ rejectUnauthorized: false }),
    });
    assert.equal(webhookPort.status, 503);
    assert.equal((await plain(t.metricsPort, "/healthz")).status, 200, "liveness is unaffected");
  });
});

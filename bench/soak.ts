/**
 * bench/soak: steady admissions for a long time, with the serving certificate rotated every two
 * minutes, watching the server's memory.
 *
 *   npm run bench:soak [-- --minutes 10 --rotate-every 2 --connections 16 --json FILE]
 *
 * The server runs from the built package (`dist/`, as in production) in its own process, logging at
 * info (one line per admission, to /dev/null), reading the pods' PyTorchJob from a stand-in apiserver
 * (cached, as in a cluster). First its maximum rate is measured (autocannon, keep-alive TLS, 10 s after
 * a 3 s warm-up) with the same mix as the soak: the ~8 KB training-pod review to /mutate/pods and to
 * /validate/pods in turn, as the apiserver sends one pod to both. Then the soak runs at half that rate
 * for --minutes, connections reconnecting every 1,000 requests so new TLS handshakes meet the rotated
 * certificates, and a fresh connection every second checks which certificate is served. Every answer is
 * checked (200, the request's uid, allowed, a patch from the mutating webhook). RSS is read from /proc
 * every second.
 *
 * Pass: 0 failed admissions, every rotation served within seconds, and RSS at the end (median of the
 * last 10 % of the run) within 10 % of where it settled (median of 20–30 % into the run).
 */
import autocannon from "autocannon";
import { spawn, type ChildProcess } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TLSSocket } from "node:tls";
import { parseArgs } from "node:util";
import { generateCertificates, type GeneratedCertificates } from "../src/certs/generate.js";
import { startJobApi } from "./lib/job-api.js";
import { podReview } from "./lib/pod-review.js";
import { percentile, table } from "./lib/stats.js";

const ROOT = resolve(import.meta.dirname, "..");
const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    "rotate-every": { type: "string", default: "2" },
    connections: { type: "string", default: "16" },
    json: { type: "string" },
  },
});
const minutes = Number(values.minutes);
const rotateEveryMs = Number(values["rotate-every"]) * 60_000;
const connections = Number(values.connections);
if (!existsSync(join(ROOT, "dist/src/cli/main.js"))) throw new Error("dist/ is missing: run `npm run build` (npm run bench:soak does)");

const dir = mkdtempSync(join(tmpdir(), "qm-soak-"));
const certFile = join(dir, "tls.crt");
const keyFile = join(dir, "tls.key");
let certs: GeneratedCertificates = await generateCertificates({ service: "qm", namespace: "soak", ips: ["127.0.0.1"] });
const ca = certs.ca;
/** Key first, then certificate, as `quartermaster certs generate` writes them. */
function writePair(c: GeneratedCertificates): void {
  writeFileSync(keyFile, c.keyPem, { mode: 0o600 });
  writeFileSync(certFile, c.certPem);
}
writePair(certs);
const fingerprintOf = (pem: string): string => new X509Certificate(pem).fingerprint256;

// The stand-in apiserver serving the pods' PyTorchJob (real, cached job lookups), counting reads.
const jobApi = await startJobApi(join(dir, "kubeconfig"));

const freePort = (): Promise<number> =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
const port = await freePort();
const metricsPort = await freePort();
const devNull = openSync("/dev/null", "w");
const stderrLog = join(dir, "server.stderr");
const server: ChildProcess = spawn(
  process.execPath,
  [
    join(ROOT, "bin/quartermaster.js"),
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--metrics-port",
    String(metricsPort),
    "--tls-cert",
    certFile,
    "--tls-key",
    keyFile,
    "--kubeconfig",
    join(dir, "kubeconfig"),
    "--log-level",
    "info",
  ],
  { cwd: ROOT, stdio: ["ignore", devNull, openSync(stderrLog, "w")] },
);

interface Probe {
  status: number;
  text: string;
  fingerprint?: string;
}

/** One request on a fresh TLS connection. */
function probe(method: string, path: string, body?: string): Promise<Probe> {
  return new Promise((res, rej) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        ca: ca.certPem,
        agent: false,
        headers: body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {},
      },
      (r) => {
        const fingerprint = (r.socket as TLSSocket).getPeerX509Certificate?.()?.fingerprint256;
        let text = "";
        r.on("data", (c: Buffer) => (text += c.toString()));
        r.on("end", () => res({ status: r.statusCode ?? 0, text, fingerprint }));
      },
    );
    req.on("error", rej);
    req.end(body);
  });
}

function rssMiB(): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** A metric's value summed over its series, from the metrics port (plain HTTP). */
async function metric(name: string): Promise<number> {
  const r = { text: await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text() };
  return [...r.text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce((a, m) => a + Number(m[1]), 0);
}

for (const deadline = performance.now() + 15_000; ;) {
  if (server.exitCode !== null) throw new Error(`server exited: ${readFileSync(stderrLog, "utf8")}`);
  if ((await probe("GET", "/readyz").catch(() => ({ status: 0 }))).status === 200) break;
  if (performance.now() > deadline) throw new Error("server not ready after 15 s");
  await new Promise((r) => setTimeout(r, 20));
}

// Every answer checked: 200, the uid back, allowed, and a patch from the mutating webhook.
const mutateUid = "3e2a1f60-9c1d-4a8e-9a61-7b0c2f1d5e44";
const validateUid = "7c1b9e20-4d3a-4f6e-8b2c-1a0d9e8f7b6a";
let bad = 0;
const badSamples: string[] = [];
const check =
  (uid: string, patch: boolean) =>
  (status: number, body: string): void => {
    let ok = status === 200;
    if (ok) {
      try {
        const r = JSON.parse(body).response;
        ok = r.uid === uid && r.allowed === true && (r.patch !== undefined) === patch;
      } catch {
        ok = false;
      }
    }
    if (!ok) {
      bad++;
      if (badSamples.length < 5) badSamples.push(`${status} ${body.slice(0, 200)}`);
    }
  };
const requests = [
  {
    method: "POST" as const,
    path: "/mutate/pods?timeout=5s",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(podReview(mutateUid)),
    onResponse: check(mutateUid, true),
  },
  {
    method: "POST" as const,
    path: "/validate/pods?timeout=5s",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(podReview(validateUid)),
    onResponse: check(validateUid, false),
  },
];
const load = (opts: { seconds: number; rate?: number; reconnectRate?: number }): Promise<autocannon.Result> =>
  autocannon({
    url: `https://127.0.0.1:${port}`,
    connections,
    duration: opts.seconds,
    requests,
    tlsOptions: { ca: ca.certPem },
    ...(opts.rate ? { overallRate: opts.rate } : {}),
    ...(opts.reconnectRate ? { reconnectRate: opts.reconnectRate } : {}),
  } as autocannon.Options);

try {
  // 1. Maximum rate, same mix.
  await load({ seconds: 3 });
  const max = await load({ seconds: 10 });
  const maxRate = max.requests.average;
  const rate = Math.max(1, Math.floor(maxRate / 2));
  const badBefore = bad;
  console.error(`maximum ${maxRate.toFixed(0)} admissions/s (p50 ${max.latency.p50} ms, p99 ${max.latency.p99} ms); soaking at ${rate}/s for ${minutes} min`);

  // 2. The soak: load, RSS every second, rotations, a fresh-connection probe every second.
  const rss: Array<{ t: number; mib: number }> = [];
  const rotations: Array<{ at: number; fingerprint: string; servedAfterMs?: number }> = [];
  let probeFailures = 0;
  const started = performance.now();
  const soakMs = minutes * 60_000;
  const soak = load({ seconds: Math.round(soakMs / 1000), rate, reconnectRate: 1000 });
  const heapStart = await metric("nodejs_heap_size_used_bytes");
  let lastRotation = started;
  const ticker = (async () => {
    while (performance.now() - started < soakMs) {
      await new Promise((r) => setTimeout(r, 1000));
      const t = (performance.now() - started) / 1000;
      rss.push({ t, mib: rssMiB() });
      if (performance.now() - lastRotation >= rotateEveryMs && performance.now() - started < soakMs - 10_000) {
        lastRotation = performance.now();
        certs = await generateCertificates({ service: "qm", namespace: "soak", ips: ["127.0.0.1"], ca });
        writePair(certs);
        rotations.push({ at: t, fingerprint: fingerprintOf(certs.certPem) });
        console.error(`${t.toFixed(0)} s: rotated the serving certificate`);
      }
      const p = await probe("POST", "/validate/pods", requests[1]!.body).catch((err: Error) => ({ status: 0, text: err.message, fingerprint: undefined }));
      if (p.status !== 200) probeFailures++;
      const pending = rotations.at(-1);
      if (pending && pending.servedAfterMs === undefined && p.fingerprint === pending.fingerprint) pending.servedAfterMs = (t - pending.at) * 1000;
    }
  })();
  const [result] = await Promise.all([soak, ticker]);
  const heapEnd = await metric("nodejs_heap_size_used_bytes");
  // Loads of the key pair, less the one at start.
  const reloads = (await metric('quartermaster_tls_reloads_total\\{result="ok"\\}')) - 1;

  // 3. Figures.
  const failed = result.errors + result.timeouts + result.non2xx + (bad - badBefore) + probeFailures;
  const n = rss.length;
  const median = (xs: number[]): number =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const settled = median(rss.slice(Math.floor(n * 0.2), Math.max(Math.floor(n * 0.3), Math.floor(n * 0.2) + 1)).map((s) => s.mib));
  const end = median(rss.slice(Math.floor(n * 0.9)).map((s) => s.mib));
  const drift = (end - settled) / settled;
  const perMinute = Array.from({ length: Math.ceil(minutes) }, (_, m) => {
    const xs = rss.filter((s) => s.t > m * 60 && s.t <= (m + 1) * 60).map((s) => s.mib);
    return xs.length ? [m + 1, Math.min(...xs), median(xs), Math.max(...xs)] : [m + 1, NaN, NaN, NaN];
  });
  console.log(
    `\nbench/soak: ${minutes} min at ${rate} admissions/s (half the measured maximum of ${maxRate.toFixed(0)}/s), ${connections} keep-alive TLS connections reconnecting every 1,000 requests, node ${process.version}`,
  );
  console.log(
    `admissions: ${result.requests.total} (${result.requests.average.toFixed(0)}/s achieved), latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, max ${result.latency.max} ms`,
  );
  console.log(
    `failed admissions: ${failed} (errors ${result.errors}, timeouts ${result.timeouts}, non-2xx ${result.non2xx}, wrong answers ${bad - badBefore}, fresh-connection probes ${probeFailures}/${n})${badSamples.length ? `; e.g. ${badSamples.join(" | ")}` : ""}`,
  );
  console.log(
    `certificate rotations: ${rotations.length}, reloads counted by the server ${reloads}; new certificate served on a fresh connection after ` +
      rotations.map((r) => (r.servedAfterMs === undefined ? "NEVER" : `${(r.servedAfterMs / 1000).toFixed(0)} s`)).join(", "),
  );
  console.log(`job reads by the webhook: ${jobApi.reads} (cached)`);
  console.log(`\nRSS (MiB, sampled every second) by minute:\n`);
  console.log(table(["minute", "min", "median", "max"], perMinute));
  console.log(
    `\nRSS settled at ${settled.toFixed(1)} MiB (median 20–30 % into the run), ended at ${end.toFixed(1)} MiB (median of the last 10 %): ` +
      `${(drift * 100).toFixed(1)} % ${Math.abs(drift) <= 0.1 ? "(within 10 %: met)" : "(NOT within 10 %)"}; peak ${Math.max(...rss.map((s) => s.mib)).toFixed(1)} MiB; ` +
      `heap used ${(heapStart / 2 ** 20).toFixed(1)} → ${(heapEnd / 2 ** 20).toFixed(1)} MiB`,
  );
  const pass = failed === 0 && Math.abs(drift) <= 0.1 && rotations.every((r) => r.servedAfterMs !== undefined);
  console.log(`result: ${pass ? "PASS" : "FAIL"}`);
  const out = {
    bench: "soak",
    minutes,
    maxRate,
    rate,
    admissions: result.requests.total,
    failed,
    latency: result.latency,
    rotations,
    reloads,
    rss,
    settled,
    end,
    drift,
    heapStart,
    heapEnd,
    jobReads: jobApi.reads,
    pass,
  };
  if (values.json) writeFileSync(values.json, JSON.stringify(out, null, 2));
  console.log(JSON.stringify({ ...out, rss: undefined }));
} finally {
  server.kill("SIGTERM");
  await new Promise((r) => (server.exitCode !== null ? r(undefined) : server.once("exit", r)));
  jobApi.close();
  rmSync(dir, { recursive: true, force: true });
}

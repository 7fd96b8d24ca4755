/**
 * bench/cold-start: from spawning the process to its first answered `/mutate/pods`, Quartermaster's `serve` against
 * a bare `node:https` server (bench/lib/floor.mjs: parses the body, answers a constant), in pairs (issue 51: a
 * serverless-style start, where the first review waits for the process).
 *
 *   npm run bench:cold-start [-- --pairs 10] [--node-flags "--max-semi-space-size=32"] [--node BIN] [--compile-cache DIR]
 *
 * Each pair starts the floor, then Quartermaster (the built package, `bin/quartermaster.js serve` as the image runs
 * it, with a kubeconfig for a stand-in apiserver so its job lookups have somewhere to go), each on a fresh port,
 * each measured alone: POSTs of the operator-made training pod's review every 2 ms from the spawn until one is
 * answered 200. Prints each pair, the medians and the ratio of medians (the target: ≤ 1.3×). Bounded: 127.0.0.1
 * only, at most 50 pairs, 15 s per start; stops only the processes it started, by their PIDs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { generateCertificates } from "../src/certs/generate.js";
import { startJobApi } from "./lib/job-api.js";
import { podReview } from "./lib/pod-review.js";
import { summarize } from "./lib/stats.js";

const ROOT = resolve(import.meta.dirname, "..");
const { values } = parseArgs({
  options: {
    pairs: { type: "string", default: "10" },
    "node-flags": { type: "string", default: "" },
    /** The node binary both servers run on (the image's Node 24, say); default this one. */
    node: { type: "string" },
    /** A V8 compile cache directory for Quartermaster (NODE_COMPILE_CACHE, Node 22.1 and later), filled by a first start. */
    "compile-cache": { type: "string" },
  },
});
const pairs = Math.min(50, Math.max(1, Number(values.pairs) || 10));

const dir = mkdtempSync(join(tmpdir(), "qm-cold-"));
const certs = await generateCertificates({ service: "qm", namespace: "bench", ips: ["127.0.0.1"] });
const tlsDir = join(dir, "tls");
mkdirSync(tlsDir);
const certFile = join(tlsDir, "tls.crt");
const keyFile = join(tlsDir, "tls.key");
writeFileSync(certFile, certs.certPem);
writeFileSync(keyFile, certs.keyPem);
const body = JSON.stringify(podReview());
const jobApi = await startJobApi(join(dir, "kubeconfig"));

function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** One POST of the review: its status, or 0 when nothing answers yet. */
function post(port: number): Promise<number> {
  return new Promise((res) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/mutate/pods", method: "POST", ca: certs.ca.certPem, agent: false, headers: { "content-type": "application/json" } },
      (r) => {
        r.resume();
        r.on("end", () => res(r.statusCode ?? 0));
      },
    );
    req.on("error", () => res(0));
    req.end(body);
  });
}

/** Milliseconds from spawning `args` to its first 200 on `/mutate/pods`. */
async function coldStart(name: string, args: (port: number) => string[]): Promise<number> {
  const port = await freePort();
  const log = join(dir, `${name}.log`);
  const out = openSync(log, "w");
  const t0 = performance.now();
  const env =
    name.startsWith("quartermaster") && values["compile-cache"] ? { ...process.env, NODE_COMPILE_CACHE: resolve(values["compile-cache"]) } : process.env;
  const child: ChildProcess = spawn(values.node ?? process.execPath, args(port), { cwd: ROOT, stdio: ["ignore", out, out], env });
  try {
    for (;;) {
      if (performance.now() - t0 > 15_000) throw new Error(`${name} did not answer within 15 s: ${readFileSync(log, "utf8")}`);
      if (child.exitCode !== null) throw new Error(`${name} exited: ${readFileSync(log, "utf8")}`);
      if ((await post(port)) === 200) return performance.now() - t0;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    child.kill("SIGKILL");
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once("exit", r)));
  }
}

const floorArgs = (port: number): string[] => [join(ROOT, "bench/lib/floor.mjs"), certFile, keyFile, String(port)];
const qmArgs = (port: number): string[] => [
  ...values["node-flags"].split(" ").filter(Boolean),
  join(ROOT, "bin/quartermaster.js"),
  "serve",
  "--host",
  "127.0.0.1",
  "--port",
  String(port),
  "--tls-cert",
  certFile,
  "--tls-key",
  keyFile,
  "--metrics-port",
  "0",
  "--kubeconfig",
  join(dir, "kubeconfig"),
];

if (values["compile-cache"]) await coldStart("quartermaster-fills-the-cache", qmArgs);
const floor: number[] = [];
const qm: number[] = [];
console.log(`cold start to the first answered /mutate/pods, ${pairs} pairs (floor, then Quartermaster)`);
for (let i = 0; i < pairs; i++) {
  floor.push(await coldStart(`floor-${i}`, floorArgs));
  qm.push(await coldStart(`quartermaster-${i}`, qmArgs));
  console.log(`  pair ${i + 1}: floor ${floor[i]!.toFixed(0)} ms, quartermaster ${qm[i]!.toFixed(0)} ms (${(qm[i]! / floor[i]!).toFixed(2)}×)`);
}
const f = summarize(floor);
const q = summarize(qm);
console.log(`floor:         median ${f.p50.toFixed(0)} ms (min ${f.min.toFixed(0)}, max ${f.max.toFixed(0)})`);
console.log(`quartermaster: median ${q.p50.toFixed(0)} ms (min ${q.min.toFixed(0)}, max ${q.max.toFixed(0)})`);
console.log(`ratio of medians: ${(q.p50 / f.p50).toFixed(2)}× (target ≤ 1.3×); logs in ${dir}`);
jobApi.close();

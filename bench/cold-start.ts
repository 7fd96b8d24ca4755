/**
 * bench/cold-start: from spawning the process to its first answered `/mutate/pods`, Quartermaster's `serve` against
 * a bare `node:https` server (bench/lib/floor.mjs: parses the body, answers a constant), in pairs (issue 51: a
 * serverless-style start, where the first review waits for the process).
 *
 *   npm run bench:cold-start [-- --pairs 10] [--node-flags "--max-semi-space-size=32"] [--node BIN] [--compile-cache DIR] [--baseline DIR] [--policy FILE|none]
 *
 * Each pair starts the floor, then Quartermaster (the built package, `bin/quartermaster.js serve` as the image runs
 * it, with a kubeconfig for a stand-in apiserver so its job lookups have somewhere to go), each on a fresh port,
 * each measured alone: POSTs of the operator-made training pod's review every 2 ms from the spawn until one is
 * answered 200. Prints each pair, the medians (with two stages: spawn to the "serving" line on stdout, and from
 * there to the first answer) and the ratio of medians (the target: ≤ 1.3×). `--baseline DIR` measures another
 * built checkout (main, say) in the same run, between the floor and this one. Bounded: 127.0.0.1
 * only, at most 50 pairs, 15 s per start; stops only the processes it started, by their PIDs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { generateCertificates } from "../src/certs/generate.js";
import { startJobApi } from "./lib/job-api.js";
import { podReview } from "./lib/pod-review.js";
import { nodeFlagList, serveArgs } from "./lib/serve-args.js";
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
    /** Another built checkout of Quartermaster (main, say) measured in the same pairs, between the floor and this one. */
    baseline: { type: "string" },
    /**
     * The policy file `serve` reads (`--policy`), as the shipped Deployment and the Knative overlay run it
     * (manifests/base/policy.yaml mounted from a ConfigMap); `none` for the built-in policy.
     */
    policy: { type: "string", default: "manifests/base/policy.yaml" },
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

/** One start: milliseconds from the spawn to the process's "serving" line on stdout, and to its first 200. */
interface Start {
  listening: number;
  answered: number;
}

/** With `--node-flags "--cpu-prof ..."`: each start is stopped with SIGTERM, so node writes its profile. */
const profiling = values["node-flags"].includes("--cpu-prof");

/** Milliseconds from spawning `args` to its "serving" line (it listens) and to its first 200 on `/mutate/pods`. */
async function coldStart(name: string, args: (port: number) => string[]): Promise<Start> {
  const port = await freePort();
  const log = join(dir, `${name}.log`);
  const out = openSync(log, "w");
  const t0 = performance.now();
  const env =
    name.startsWith("quartermaster") && values["compile-cache"] ? { ...process.env, NODE_COMPILE_CACHE: resolve(values["compile-cache"]) } : process.env;
  const child: ChildProcess = spawn(values.node ?? process.execPath, args(port), { cwd: ROOT, stdio: ["ignore", "pipe", out], env });
  let listening: number | undefined;
  child.stdout!.on("data", (chunk: Buffer) => {
    listening ??= chunk.toString().includes("serving ") ? performance.now() - t0 : undefined;
    writeSync(out, chunk);
  });
  try {
    for (;;) {
      if (performance.now() - t0 > 15_000) throw new Error(`${name} did not answer within 15 s: ${readFileSync(log, "utf8")}`);
      if (child.exitCode !== null) throw new Error(`${name} exited: ${readFileSync(log, "utf8")}`);
      if ((await post(port)) === 200) {
        const answered = performance.now() - t0;
        return { answered, listening: listening ?? answered };
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    // A profiled start, and the one filling the compile cache, are stopped as a Pod is, so node writes its --cpu-prof
    // or its NODE_COMPILE_CACHE on the way out (a killed process writes neither).
    child.kill(profiling || name.endsWith("fills-the-cache") ? "SIGTERM" : "SIGKILL");
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once("exit", r)));
  }
}

const floorArgs = (port: number): string[] => [join(ROOT, "bench/lib/floor.mjs"), certFile, keyFile, String(port)];
const qmArgs =
  (root: string) =>
  (port: number): string[] =>
    serveArgs({
      root,
      port,
      certFile,
      keyFile,
      kubeconfig: join(dir, "kubeconfig"),
      nodeFlags: nodeFlagList(values["node-flags"]),
      serveFlags: values.policy === "none" ? [] : ["--policy", resolve(ROOT, values.policy)],
    });

const baseline = values.baseline ? resolve(values.baseline) : undefined;
if (values["compile-cache"]) await coldStart("quartermaster-fills-the-cache", qmArgs(ROOT));
const floor: Start[] = [];
const before: Start[] = [];
const qm: Start[] = [];
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;
console.log(
  `cold start to the first answered /mutate/pods, ${pairs} ${baseline ? "triples (floor, baseline, Quartermaster)" : "pairs (floor, then Quartermaster)"}, node ${values.node ?? process.version}`,
);
for (let i = 0; i < pairs; i++) {
  floor.push(await coldStart(`floor-${i}`, floorArgs));
  if (baseline) before.push(await coldStart(`baseline-${i}`, qmArgs(baseline)));
  qm.push(await coldStart(`quartermaster-${i}`, qmArgs(ROOT)));
  const b = baseline ? `, baseline ${before[i]!.answered.toFixed(0)} ms (${ratio(before[i]!.answered, floor[i]!.answered)})` : "";
  console.log(
    `  ${i + 1}: floor ${floor[i]!.answered.toFixed(0)} ms${b}, quartermaster ${qm[i]!.answered.toFixed(0)} ms (${ratio(qm[i]!.answered, floor[i]!.answered)})`,
  );
}
const f = summarize(floor.map((s) => s.answered));
/** The medians of a server's starts, with its two stages: spawn to listening, listening to the first answer. */
const line = (name: string, starts: Start[]): string => {
  const s = summarize(starts.map((x) => x.answered));
  const listen = summarize(starts.map((x) => x.listening)).p50;
  const first = summarize(starts.map((x) => x.answered - x.listening)).p50;
  return `${name.padEnd(15)}median ${s.p50.toFixed(0)} ms (min ${s.min.toFixed(0)}, max ${s.max.toFixed(0)}; spawn to listening ${listen.toFixed(0)}, listening to the first answer ${first.toFixed(0)}): ${ratio(s.p50, f.p50)}`;
};
console.log(line("floor:", floor));
if (baseline) console.log(`${line("baseline:", before)} (${baseline})`);
console.log(line("quartermaster:", qm));
console.log(`ratio of medians: ${ratio(summarize(qm.map((s) => s.answered)).p50, f.p50)} (target ≤ 1.3×); logs in ${dir}`);
jobApi.close();

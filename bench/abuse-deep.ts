/**
 * bench/abuse --only-deep: deeply nested bodies against the admission server (issue 29, item 5).
 *
 *   npm run bench:abuse -- --only-deep [--deep-seconds 15] [--deep-senders 4] [--baseline-seconds 5] [--small-clients 2]
 *
 * The server is the current one (`bench/abuse.ts --serve after`: default bounds, bodies of 256 KiB and more
 * parsed in a worker), in a child process of its own, which reports its longest event-loop stall.
 *
 * 1. Answer time of one deep body at a time (a single client, nothing else in flight): a 6.7 MiB review
 *    of 3.5M nested arrays (the body: to the worker), a review one level past MAX_NESTING (1,001)
 *    both large (1 MiB: the worker) and small (2 KB: scanned in-thread), and the same two at exactly 1,000
 *    levels (answered 200, the bound is exact). Each must get its status; prints p50 and max.
 * 2. The stall deep bodies cause on other reviews: `--small-clients` clients post small valid reviews
 *    (alternately /mutate/pods and /validate/pods, each client on its own keep-alive connection, the next
 *    5 ms after the answer), first alone for `--baseline-seconds`, then for `--deep-seconds` while
 *    `--deep-senders` senders (another process: bench/lib/deep-senders.mjs) post the 6.7 MiB body back to
 *    back. Prints the small reviews' p50/p99/max alone and under the deep senders with the ratio, the
 *    server's longest stall in each phase, and the deep bodies' answer times and status counts.
 *
 * Bounded: 127.0.0.1 only; seconds capped at 120 per phase, deep senders at 16 (each at most 10,000 bodies);
 * stops only the two children it started, by their PIDs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Agent } from "node:https";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { MAX_NESTING, nestedDeeperThan, OFFLOAD_BYTES } from "../src/server/parse.js";
import { reviewOf } from "../test/fixtures/array-work.js";
import { postReview } from "./lib/post.js";
import { summarize, table } from "./lib/stats.js";

export interface DeepOptions {
  /** bench/abuse.ts (started again with `--serve after`). */
  script: string;
  cert: string;
  key: string;
  ca: string;
  /** A directory for the CA and the deep body, read by the senders' process. */
  dir: string;
  baselineSeconds: number;
  deepSeconds: number;
  deepSenders: number;
  smallClients: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const clamp = (v: number, lo: number, hi: number): number => (Number.isFinite(v) ? Math.min(hi, Math.max(lo, v)) : lo);
const fmt = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const mib = (n: number): string => (n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`);

const SMALL_POD = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "small", namespace: "team-a" },
  spec: { containers: [{ name: "a", image: "nginx", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] },
};
const small = JSON.stringify(reviewOf(SMALL_POD, { uid: "small" }));

/** A pod review with `arrays` nested arrays in one field (`pad` bytes of annotation): the review, its request and the pod add 3 levels. */
function nested(arrays: number, pad: number, uid: string): string {
  const pod = { ...SMALL_POD, metadata: { ...SMALL_POD.metadata, annotations: { "example.com/pad": "x".repeat(pad) } }, deep: "DEEP" };
  return JSON.stringify(reviewOf(pod, { uid })).replace('"DEEP"', `${"[".repeat(arrays)}${"]".repeat(arrays)}`);
}

interface Server {
  proc: ChildProcess;
  port: number;
  ask(line: string): Promise<Record<string, number>>;
}

async function startServerChild(o: DeepOptions): Promise<Server> {
  const proc = spawn(process.execPath, ["--import", "tsx", o.script, "--serve", "after", "--cert", o.cert, "--key", o.key], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, number>> => JSON.parse(String((await lines.next()).value)) as Record<string, number>;
  const { port } = await next();
  return { proc, port: port!, ask: (line) => (proc.stdin!.write(`${line}\n`), next()) };
}

const tally = (statuses: readonly string[]): string => {
  const m = new Map<string, number>();
  for (const s of statuses) m.set(s, (m.get(s) ?? 0) + 1);
  return [...m].map(([k, v]) => `${k}: ${v}`).join(", ");
};

/** Small reviews from `clients` keep-alive clients until `stop()` resolves. */
async function smallStream(port: number, ca: string, clients: number, stop: Promise<unknown>): Promise<{ ms: number[]; statuses: string[] }> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  const ms: number[] = [];
  const statuses: string[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; !stopped; i++) {
        const r = await postReview(port, ca, (i + c) % 2 === 0 ? "/validate/pods" : "/mutate/pods", small, agent);
        ms.push(r.ms);
        statuses.push(r.status);
        await sleep(5);
      }
      agent.destroy();
    }),
  );
  return { ms, statuses };
}

export async function deep(o: DeepOptions): Promise<void> {
  const baselineSeconds = clamp(o.baselineSeconds, 1, 120);
  const deepSeconds = clamp(o.deepSeconds, 1, 120);
  const senders = Math.round(clamp(o.deepSenders, 1, 16));
  const clients = Math.round(clamp(o.smallClients, 1, 16));

  const huge = nested(3_500_000, 1, "huge");
  // The bodies one past the bound and at it, checked with the server's own scan.
  const over = (pad: number, uid: string): string => nested(MAX_NESTING - 2, pad, uid);
  const at = (pad: number, uid: string): string => nested(MAX_NESTING - 3, pad, uid);
  const bodies = [
    { name: "3.5M nested arrays (worker)", body: huge, want: "400", reps: 5 },
    { name: "1,001 levels, large (worker)", body: over(2 ** 20, "w1001"), want: "400", reps: 10 },
    { name: "1,001 levels, small (in-thread)", body: over(1, "s1001"), want: "400", reps: 50 },
    { name: "1,000 levels, large (worker)", body: at(2 ** 20, "w1000"), want: "200", reps: 10 },
    { name: "1,000 levels, small (in-thread)", body: at(1, "s1000"), want: "200", reps: 50 },
  ];
  for (const b of bodies) {
    const bytes = Buffer.from(b.body);
    if (nestedDeeperThan(bytes, MAX_NESTING) !== (b.want === "400")) throw new Error(`bench body "${b.name}" is not nested as named`);
    if (b.name.includes("worker") !== bytes.length >= OFFLOAD_BYTES) throw new Error(`bench body "${b.name}" does not go where named`);
  }
  const caFile = join(o.dir, "ca.crt");
  const bodyFile = join(o.dir, "deep.json");
  writeFileSync(caFile, o.ca);
  writeFileSync(bodyFile, huge);

  const server = await startServerChild(o);
  let senders_: ChildProcess | undefined;
  try {
    const one = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 10; i++) await postReview(server.port, o.ca, "/validate/pods", small, one); // warm: TLS, JIT
    await postReview(server.port, o.ca, "/validate/pods", bodies[1]!.body, one); // the worker is started at listen; this warms its JIT

    // 1. One deep body at a time.
    const rows: Array<Array<string | number>> = [];
    let wrong = 0;
    for (const b of bodies) {
      await server.ask("reset");
      const ms: number[] = [];
      const statuses: string[] = [];
      for (let i = 0; i < b.reps; i++) {
        const r = await postReview(server.port, o.ca, i % 2 === 0 ? "/validate/pods" : "/mutate/pods", b.body, one);
        ms.push(r.ms);
        statuses.push(r.status);
        if (r.status !== b.want) wrong++;
      }
      const { stallMs } = await server.ask("stall");
      const s = summarize(ms);
      rows.push([b.name, mib(Buffer.byteLength(b.body)), `${tally(statuses)} (want ${b.want})`, fmt(s.p50), fmt(s.max), fmt(stallMs!)]);
    }
    one.destroy();
    console.log(`1. deep bodies one at a time (MAX_NESTING ${MAX_NESTING}; to the worker from ${mib(OFFLOAD_BYTES)}):`);
    console.log(table(["body", "size", "statuses", "p50", "max", "longest server stall"], rows));

    // 2. Small reviews alone, then beside the deep senders.
    await server.ask("reset");
    const alone = await smallStream(server.port, o.ca, clients, sleep(baselineSeconds * 1000));
    const stallAlone = (await server.ask("stall")).stallMs!;

    await server.ask("reset");
    const cfg = { port: server.port, caFile, bodyFile, senders, seconds: deepSeconds, maxPerSender: 10_000 };
    const child = spawn(process.execPath, [join(import.meta.dirname, "lib", "deep-senders.mjs"), JSON.stringify(cfg)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    senders_ = child;
    const out = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    if ((await out.next()).value !== "ready") throw new Error("deep senders did not start");
    const done = out.next().then((l) => JSON.parse(String(l.value)) as { ms: number[]; statuses: Record<string, number> });
    const under = await smallStream(server.port, o.ca, clients, done);
    const deepResult = await done;
    const stallUnder = (await server.ask("stall")).stallMs!;

    const a = summarize(alone.ms);
    const u = summarize(under.ms);
    const d = summarize(deepResult.ms);
    console.log(
      `\n2. small reviews from ${clients} clients, alone ${baselineSeconds} s, then ${deepSeconds} s beside ${senders} senders of the ${mib(huge.length)} body:`,
    );
    console.log(
      table(
        ["phase", "small reviews", "statuses", "p50", "p99", "max", "longest server stall"],
        [
          ["alone", a.count, tally(alone.statuses), fmt(a.p50), fmt(a.p99), fmt(a.max), fmt(stallAlone)],
          [`beside ${senders} deep senders`, u.count, tally(under.statuses), fmt(u.p50), fmt(u.p99), fmt(u.max), fmt(stallUnder)],
          ["ratio", "", "", `${(u.p50 / a.p50).toFixed(2)}×`, `${(u.p99 / a.p99).toFixed(2)}×`, `${(u.max / a.max).toFixed(2)}×`, ""],
        ],
      ),
    );
    const deepStatuses = Object.entries(deepResult.statuses)
      .map(([k, v]) => `${k}: ${v}`)
      .join(", ");
    console.log(`deep bodies: ${d.count} answered (${deepStatuses}); answer time p50 ${fmt(d.p50)}, p99 ${fmt(d.p99)}, max ${fmt(d.max)}`);
    const smallBad = [...alone.statuses, ...under.statuses].filter((s) => s !== "200").length;
    const deepBad = d.count - (deepResult.statuses["400"] ?? 0);
    if (wrong > 0 || smallBad > 0 || deepBad > 0) {
      console.log(`NOT AS EXPECTED: ${wrong} single deep bodies with another status, ${smallBad} small reviews not 200, ${deepBad} deep bodies not 400`);
      process.exitCode = 1;
    }
  } finally {
    if (senders_ && senders_.exitCode === null) process.kill(senders_.pid!);
    server.proc.stdin!.end();
    if (server.proc.exitCode === null) process.kill(server.proc.pid!);
  }
}

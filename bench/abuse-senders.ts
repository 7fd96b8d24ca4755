/**
 * bench/abuse --only-senders: a hostile tenant's work and reads against the admission server (issue 46).
 *
 *   npm run bench:abuse -- --only-senders [--senders-seconds 5] [--senders 4] [--baseline-seconds 5] [--small-clients 2]
 *
 * The server is the current one with default bounds (`bench/abuse.ts --serve senders`), in a child process of its
 * own, reading through the real cached reader (src/kube/jobs.ts) from a stand-in apiserver in that process: each
 * GET answers after 1 ms, at most 16 at once (the rest wait in order), and parses the stored JSON as a client would;
 * a GET for the metadata alone (a fresh read with a copy at hand) answers the object's metadata, as the apiserver does.
 * It has the upstream torch-distributed ClusterTrainingRuntime, a "wide" one of 20,000 containers, a PyTorchJob
 * team-a/bert (uid uid-bert), and a one-NIC ResourceClaim under any name. Events are counted, not written.
 *
 * The senders, each a review one tenant can send:
 * - TrainJobs with 16 runtime patches (Trainer's CRD limit), 17, and 5,000 (/validate/jobs);
 * - a TrainJob on the wide runtime (/validate/jobs), and queued (/mutate/jobs);
 * - a pod naming 20,000 ResourceClaims (/validate/pods, /mutate/pods);
 * - Event spoofing: Kueue's admission of a PyTorchJob, refused (its flavor's accelerator is not allowed), for a job
 *   that does not exist and for team-a/bert under another uid: no Event may be written.
 * 1. Each sender alone, a few times: its answer (allowed / refused at which field), p50 and max against 50 ms, the
 *    GETs it made and the Events written.
 * 2. Other tenants' small reviews (`--small-clients` clients in turn: a pod to /validate/pods, to /mutate/pods, and a
 *    pod naming one claim of a new name each time, one GET) alone for `--baseline-seconds`, then for
 *    `--senders-seconds` beside `--senders` senders (another process: bench/lib/abuse-senders.mjs) posting all the
 *    bodies in turn: p50/p99/max in each phase and the ratio (p99 within 1.5× is the target), and the senders'
 *    answer times by body.
 *
 * Bounded: 127.0.0.1 only; seconds capped at 120 per phase, senders at 16 (each at most 10,000 bodies); stops only
 * the two children it started, by their PIDs.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Agent } from "node:https";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { KUEUE_QUEUE_NAME } from "../src/kueue/admission.js";
import type { KubeObject, ObjectKind } from "../src/core/kube.js";
import { cachedJobReader, jobPath, type GetObject } from "../src/kube/jobs.js";
import { silentLogger } from "../src/log.js";
import { checkPolicy } from "../src/policy/load.js";
import { createAdmissionMetrics } from "../src/server/metrics.js";
import { startServer } from "../src/server/serve.js";
import { MAX_RUNTIME_PATCHES } from "../src/kinds/trainjob-runtime.js";
import { createWebhooks } from "../webhooks/index.js";
import { reviewOf } from "../test/fixtures/array-work.js";
import { perNode, trainJob, upstream } from "../test/fixtures/trainer-v2.js";
import { postReview } from "./lib/post.js";
import { summarize, table } from "./lib/stats.js";

export interface SendersOptions {
  /** bench/abuse.ts (started again with `--serve senders`). */
  script: string;
  cert: string;
  key: string;
  ca: string;
  /** A directory for the CA and the bodies, read by the senders' process. */
  dir: string;
  baselineSeconds: number;
  sendersSeconds: number;
  senders: number;
  smallClients: number;
  /** Write a CPU profile of the server child (`node --cpu-prof`) into this directory; it is then let exit on its own. */
  serverCpuProf?: string;
  /**
   * Keep the load generator off the server's CPU (`--pin`, Linux with taskset and two or more CPUs): the server child
   * (main thread, parse worker and the stand-in apiserver) on CPU 0 alone; this driver (the small clients, whose times
   * are measured) on CPU 1; the senders on CPU 1 at nice 10 (a tenth of the driver's share when both are runnable), so their TLS and JSON work neither takes the server's CPU
   * nor delays the measuring client. Both phases run so. What is left beside the senders is what their reviews cost
   * the server itself: the tenant's share of admission, which is what the target is about.
   */
  pin?: boolean;
}

/** The command that starts `argv` on `cpu` (and at `nice`), or `argv` unchanged without pinning. */
const pinned = (pin: boolean | undefined, cpu: number, argv: string[], nice = 0): [string, string[]] => {
  if (!pin) return [argv[0]!, argv.slice(1)];
  const niced = nice ? ["nice", "-n", String(nice)] : [];
  return ["taskset", ["-c", String(cpu), ...niced, ...argv]];
};

const NS = "team-a";
/** The target: each sender answered within this. */
const ANSWER_MS = 50;
/** The target: other tenants' p99 within this factor of a quiet run's. */
const P99_RATIO = 1.5;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const clamp = (v: number, lo: number, hi: number): number => (Number.isFinite(v) ? Math.min(hi, Math.max(lo, v)) : lo);
const fmt = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const size = (n: number): string => (n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`);

// ---- what the stand-in apiserver has, and the policy ------------------------------------------------------------

const policy = checkPolicy({ limits: { allowedAccelerators: ["A100-SXM4-80GB"], pod: { gpus: 8 }, job: { gpus: 64 } } }, "bench-senders");

type Obj = Record<string, unknown>;
type RuntimeShape = { metadata: Obj; spec: { template: { spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: Obj } } } }> } } } };

function wideRuntime(containers: number): KubeObject {
  const r = structuredClone(upstream("torch_distributed.yaml")) as unknown as RuntimeShape;
  r.metadata.name = "wide";
  r.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec.containers = Array.from({ length: containers }, (_, i) => ({
    name: `c${i}`,
    image: "busybox",
    resources: { limits: { "nvidia.com/gpu": "1" } },
  }));
  return r as unknown as KubeObject;
}

const nicClaim = (name: string): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaim",
  metadata: { name, namespace: NS },
  spec: { devices: { requests: [{ name: "nic", exactly: { deviceClassName: "nic.example.com", count: 1 } }] } },
});

/** A queued, suspended PyTorchJob (Master and one Worker, 8 GPUs each), as in test/unit/kueue/kueue-event.test.ts. */
function queuedPyTorchJob(name: string, uid: string): Obj {
  const template = (): Obj => ({
    spec: { containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/gpu": "8" }, requests: { "nvidia.com/gpu": "8" } } }] },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name, namespace: NS, uid, resourceVersion: "10", labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } },
    spec: {
      runPolicy: { suspend: true },
      pytorchReplicaSpecs: { Master: { replicas: 1, template: template() }, Worker: { replicas: 1, template: template() } },
    },
  };
}

/** `job` as Kueue's admission leaves it: unsuspended, an H100 flavor's node labels in its templates (not allowed here). */
function admittedOnH100(job: Obj): Obj {
  const j = structuredClone(job) as { metadata: Obj; spec: { runPolicy: Obj; pytorchReplicaSpecs: Record<string, { template: { spec: Obj } }> } };
  j.spec.runPolicy.suspend = false;
  for (const r of Object.values(j.spec.pytorchReplicaSpecs)) r.template.spec.nodeSelector = { "nvidia.com/gpu.product": "H100-SXM5-80GB" };
  j.metadata.resourceVersion = "11";
  return j;
}

/**
 * The stand-in apiserver: stored objects by API path, as JSON; GETs after 1 ms, at most 16 at once, in order. As a
 * real apiserver, it answers a GET for the metadata alone (`Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`,
 * `getMetadata` in src/kube/rest.ts) with a PartialObjectMetadata: the object's metadata, read without its body.
 */
function standInApiserver() {
  const stored = new Map<string, { text: string; meta: string }>();
  let version = 0;
  const put = (kind: ObjectKind, namespace: string, o: KubeObject): void => {
    const m = o.metadata as Obj;
    const metadata = { ...m, uid: m.uid ?? `uid-${String(m.name)}`, resourceVersion: m.resourceVersion ?? String(++version) };
    const meta = JSON.stringify({ apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata });
    stored.set(jobPath(kind, namespace, String(m.name)), { text: JSON.stringify({ ...o, metadata }), meta });
  };
  const runtimeKind: ObjectKind = { kind: "ClusterTrainingRuntime", group: "trainer.kubeflow.org", version: "v1alpha1", plural: "clustertrainingruntimes" };
  put(runtimeKind, "", upstream("torch_distributed.yaml"));
  put(runtimeKind, "", wideRuntime(20_000));
  put({ kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs" }, NS, queuedPyTorchJob("bert", "uid-bert") as KubeObject);
  const counts = { gets: 0, metadataGets: 0, inFlight: 0, maxInFlight: 0 };
  const waiting: Array<() => void> = [];
  let running = 0;
  const next = (): void => {
    while (running < 16 && waiting.length > 0) {
      running++;
      const go = waiting.shift()!;
      setTimeout(() => (running--, go(), next()), 1);
    }
  };
  const read = (kind: ObjectKind, namespace: string, name: string, metadataOnly: boolean): Promise<KubeObject | undefined> => {
    if (metadataOnly) counts.metadataGets++;
    else counts.gets++;
    counts.maxInFlight = Math.max(counts.maxInFlight, ++counts.inFlight);
    return new Promise((resolve) => {
      waiting.push(() => {
        counts.inFlight--;
        const claim = kind.plural === "resourceclaims" ? JSON.stringify(nicClaim(name)) : undefined;
        const found = stored.get(jobPath(kind, namespace, name));
        const text = claim ?? (metadataOnly ? found?.meta : found?.text);
        // Parsed as the client would (src/kube/rest.ts parses the answer's text).
        resolve(text === undefined ? undefined : (JSON.parse(text) as KubeObject));
      });
      next();
    });
  };
  const get: GetObject = Object.assign((kind: ObjectKind, namespace: string, name: string) => read(kind, namespace, name, false), {
    metadata: (kind: ObjectKind, namespace: string, name: string) => read(kind, namespace, name, true),
  });
  return { get, counts };
}

/** The server of the senders bench (a child process: `bench/abuse.ts --serve senders`). */
export async function serveSenders(certFile: string, keyFile: string): Promise<void> {
  const api = standInApiserver();
  const jobs = cachedJobReader(() => Promise.resolve(api.get), { ttlMs: policy.clusterSpec.jobCacheTtlMs });
  let events = 0;
  let parsedAgain = 0;
  const webhooks = createWebhooks({ policy, log: silentLogger(), jobs, events: { write: () => void events++ }, now: () => new Date() });
  const metrics = createAdmissionMetrics({ timeoutSeconds: 10 });
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    certFile,
    keyFile,
    webhooks,
    // Bodies parsed in the worker and then again on the event loop (a stand-in document did not decide them).
    metrics: { ...metrics, parsedAgain: (webhook) => (parsedAgain++, metrics.parsedAgain(webhook)) },
    log: silentLogger(),
  });
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  // Other tenants' small reviews timed inside the server, from the request's headers read to its answer's last byte:
  // the time the server itself spent on them, whatever the machine did to the clients.
  let smallMs: number[] = [];
  server.server.on("request", (req: { headers: Record<string, unknown> }, res: { once(e: "finish", f: () => void): void }) => {
    if (req.headers[SMALL_HEADER] === undefined) return;
    const started = performance.now();
    res.once("finish", () => smallMs.push(performance.now() - started));
  });
  process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === "reset") {
      loop.reset();
      api.counts.gets = 0;
      api.counts.metadataGets = 0;
      api.counts.maxInFlight = api.counts.inFlight;
      events = 0;
      parsedAgain = 0;
      smallMs = [];
      process.stdout.write("{}\n");
    }
    if (line === "stall") {
      const inServer = summarize(smallMs);
      const answer = { stallMs: loop.max / 1e6, ...api.counts, events, parsedAgain, smallP50: inServer.p50, smallP99: inServer.p99 };
      process.stdout.write(`${JSON.stringify(answer)}\n`);
    }
  }
  await server.close();
  // Exits even with a handle left (a --cpu-prof profile is written at exit).
  process.exit(0);
}

// ---- the bodies ---------------------------------------------------------------------------------------------------

const patch = (i: number): Obj => ({
  manager: `example.io/m${i}`,
  trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name: "node", template: { spec: { template: { spec: { nodeSelector: { a: "b" } } } } } }] } } },
});
const TRAINJOB = { kind: { group: "trainer.kubeflow.org", version: "v1alpha1", kind: "TrainJob" }, resource: "trainjobs" };
const withPatches = (n: number): string =>
  JSON.stringify(
    reviewOf(trainJob(`p${n}`, { numNodes: 1, resourcesPerNode: perNode(1) }, { spec: { runtimePatches: Array.from({ length: n }, (_, i) => patch(i)) } }), {
      ...TRAINJOB,
      uid: `p${n}`,
    }),
  );
const onWide = (queued: boolean): string =>
  JSON.stringify(
    reviewOf(
      trainJob(
        queued ? "wide-q" : "wide",
        { numNodes: 1 },
        {
          spec: { runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: "ClusterTrainingRuntime", name: "wide" } },
          ...(queued ? { metadata: { labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } } } : {}),
        },
      ),
      { ...TRAINJOB, uid: queued ? "wide-q" : "wide" },
    ),
  );
const podNaming = (name: string, claims: readonly string[]): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS },
  spec: {
    resourceClaims: claims.map((c, i) => ({ name: `c${i}`, resourceClaimName: c })),
    containers: [{ name: "c", image: "x", resources: { claims: [{ name: "c0" }] } }],
  },
});
const claims20k = JSON.stringify(
  reviewOf(
    podNaming(
      "claims-20k",
      Array.from({ length: 20_000 }, (_, i) => `claim-${i}`),
    ),
    { uid: "claims-20k" },
  ),
);
const spoof = (name: string, uid: string): string => {
  const old = queuedPyTorchJob(name, uid);
  const body = reviewOf(admittedOnH100(old) as KubeObject, {
    kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
    resource: "pytorchjobs",
    operation: "UPDATE",
    oldObject: old as KubeObject,
    uid: `spoof-${name}`,
  });
  (body.request as Obj).name = name;
  (body.request as Obj).namespace = NS;
  return JSON.stringify(body);
};

interface Sender {
  name: string;
  path: string;
  body: string;
  reps: number;
}

function sendersList(): Sender[] {
  return [
    { name: `TrainJob, ${MAX_RUNTIME_PATCHES} runtime patches (the CRD's limit)`, path: "/validate/jobs", body: withPatches(MAX_RUNTIME_PATCHES), reps: 10 },
    { name: `TrainJob, ${MAX_RUNTIME_PATCHES + 1} runtime patches`, path: "/validate/jobs", body: withPatches(MAX_RUNTIME_PATCHES + 1), reps: 10 },
    { name: "TrainJob, 5,000 runtime patches", path: "/validate/jobs", body: withPatches(5000), reps: 5 },
    { name: "TrainJob on a 20,000-container runtime", path: "/validate/jobs", body: onWide(false), reps: 5 },
    { name: "queued TrainJob on the 20,000-container runtime", path: "/mutate/jobs", body: onWide(true), reps: 5 },
    { name: "pod naming 20,000 claims", path: "/validate/pods", body: claims20k, reps: 5 },
    { name: "pod naming 20,000 claims (mutate)", path: "/mutate/pods", body: claims20k, reps: 5 },
    { name: "Event spoof: refused admission of a job that does not exist", path: "/validate/jobs", body: spoof("ghost", "uid-ghost"), reps: 10 },
    { name: "Event spoof: refused admission of team-a/bert, another uid", path: "/validate/jobs", body: spoof("bert", "uid-spoof"), reps: 10 },
  ];
}

// ---- the driver ---------------------------------------------------------------------------------------------------

interface Server {
  proc: ChildProcess;
  port: number;
  ask(line: string): Promise<Record<string, number>>;
}

async function startServerChild(o: SendersOptions): Promise<Server> {
  const prof = o.serverCpuProf ? ["--cpu-prof", "--cpu-prof-dir", o.serverCpuProf] : [];
  const [cmd, args] = pinned(o.pin, 0, [process.execPath, ...prof, "--import", "tsx", o.script, "--serve", "senders", "--cert", o.cert, "--key", o.key]);
  const proc = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, number>> => JSON.parse(String((await lines.next()).value)) as Record<string, number>;
  const { port } = await next();
  return { proc, port: port!, ask: (line) => (proc.stdin!.write(`${line}\n`), next()) };
}

interface Answer {
  ms: number;
  status: string;
  /** "allowed", "allowed, warned", or "refused at <field>: <rule>". */
  answer: string;
}

/** One review, and what it was answered: "allowed", "allowed, N warnings", or "refused at <field> (<reason>)". */
/** The header that marks other tenants' small reviews, so the server child times them apart from the senders'. */
const SMALL_HEADER = "x-bench-small";

async function post(port: number, ca: string, path: string, body: string, agent: Agent, headers: Record<string, string> = {}): Promise<Answer> {
  const p = await postReview(port, ca, path, body, agent, true, headers);
  if (p.body === undefined) return { ms: p.ms, status: p.status, answer: "" };
  let answer = "?";
  try {
    const r = (
      JSON.parse(p.body.toString()) as {
        response?: { allowed?: boolean; warnings?: string[]; status?: { details?: { causes?: Array<{ field?: string; reason?: string }> } } };
      }
    ).response;
    const cause = r?.status?.details?.causes?.[0];
    answer = r?.allowed
      ? `allowed${r.warnings?.length ? `, ${r.warnings.length} warning${r.warnings.length > 1 ? "s" : ""}` : ""}`
      : `refused at ${cause?.field ?? "?"} (${cause?.reason ?? "?"})`;
  } catch {
    answer = "not JSON";
  }
  return { ms: p.ms, status: p.status, answer };
}

const small = (path: string, pod: KubeObject, uid: string): { path: string; body: string } => ({ path, body: JSON.stringify(reviewOf(pod, { uid })) });
const SMALL_POD: KubeObject = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "small", namespace: "team-b" },
  spec: { containers: [{ name: "a", image: "nginx", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] },
};

/** Other tenants' small reviews from `clients` keep-alive clients, in turn, until `stop` resolves. */
async function smallStream(port: number, ca: string, clients: number, stop: Promise<unknown>, tag: string): Promise<{ ms: number[]; statuses: string[] }> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  const ms: number[] = [];
  const statuses: string[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; !stopped; i++) {
        const kind = (i + c) % 3;
        // The third: a pod naming one claim never read before (one GET through the read pool).
        const r =
          kind === 0
            ? small("/validate/pods", SMALL_POD, `s${c}-${i}`)
            : kind === 1
              ? small("/mutate/pods", SMALL_POD, `s${c}-${i}`)
              : small("/validate/pods", { ...podNaming("one-claim", [`${tag}-${c}-${i}`]), metadata: { name: "one-claim", namespace: NS } }, `s${c}-${i}`);
        const a = await post(port, ca, r.path, r.body, agent, { [SMALL_HEADER]: "1" });
        ms.push(a.ms);
        statuses.push(a.answer.startsWith("allowed") ? a.status : `${a.status} ${a.answer}`);
        await sleep(5);
      }
      agent.destroy();
    }),
  );
  return { ms, statuses };
}

const tally = (statuses: readonly string[]): string => {
  const m = new Map<string, number>();
  for (const s of statuses) m.set(s, (m.get(s) ?? 0) + 1);
  return [...m].map(([k, v]) => `${k}: ${v}`).join(", ");
};

export async function abuseSenders(o: SendersOptions): Promise<void> {
  const baselineSeconds = clamp(o.baselineSeconds, 1, 120);
  const sendersSeconds = clamp(o.sendersSeconds, 1, 120);
  const senderCount = Math.round(clamp(o.senders, 1, 16));
  const clients = Math.round(clamp(o.smallClients, 1, 16));
  const list = sendersList();
  const caFile = join(o.dir, "ca.crt");
  writeFileSync(caFile, o.ca);
  const files = list.map((s, i) => {
    const file = join(o.dir, `sender-${i}.json`);
    writeFileSync(file, s.body);
    return { name: s.name, path: s.path, file };
  });

  // taskset execs its command, so each child's PID is the process stopped below.
  if (o.pin) execFileSync("taskset", ["-p", "-c", "1", String(process.pid)], { stdio: "ignore" });
  const server = await startServerChild(o);
  console.log(o.pin ? "pinned: server CPU 0; this driver CPU 1; senders CPU 1 at nice 10" : "not pinned: the three processes share every CPU");
  let sendersProc: ChildProcess | undefined;
  let failed = 0;
  try {
    const one = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 20; i++) await post(server.port, o.ca, "/validate/pods", small("/validate/pods", SMALL_POD, `w${i}`).body, one); // warm: TLS, JIT
    for (const s of list) await post(server.port, o.ca, s.path, s.body, one); // warm: each path once (the wide runtime read and cached)

    // 1. Each sender alone.
    const rows: Array<Array<string | number>> = [];
    for (const s of list) {
      await server.ask("reset");
      const ms: number[] = [];
      const answers: string[] = [];
      for (let i = 0; i < s.reps; i++) {
        const a = await post(server.port, o.ca, s.path, s.body, one);
        ms.push(a.ms);
        answers.push(a.status === "200" ? a.answer : `HTTP ${a.status}`);
      }
      const after = await server.ask("stall");
      const sum = summarize(ms);
      const ok = sum.p50 <= ANSWER_MS;
      if (!ok || after.events! > 0) failed++;
      rows.push([
        s.name,
        s.path,
        size(Buffer.byteLength(s.body)),
        tally(answers),
        fmt(sum.p50),
        fmt(sum.max),
        ok ? "yes" : "NO",
        `${after.gets!} (${after.metadataGets!})`,
        after.parsedAgain!,
        after.events!,
        fmt(after.stallMs!),
      ]);
    }
    one.destroy();
    console.log(`1. each sender alone (after one warm-up send; the ${ANSWER_MS} ms target on p50):`);
    console.log(
      table(["sender", "path", "body", "answers", "p50", "max", `≤ ${ANSWER_MS} ms`, "GETs", "parsed again", "Events", "longest server stall"], rows),
    );

    // 2. Other tenants' small reviews alone, then beside the senders.
    await server.ask("reset");
    const alone = await smallStream(server.port, o.ca, clients, sleep(baselineSeconds * 1000), "quiet");
    const quiet = await server.ask("stall");

    await server.ask("reset");
    const cfg = { port: server.port, caFile, bodies: files, senders: senderCount, seconds: sendersSeconds, maxPerSender: 10_000 };
    const [cmd, args] = pinned(o.pin, 1, [process.execPath, join(import.meta.dirname, "lib", "abuse-senders.mjs"), JSON.stringify(cfg)], 10);
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
    sendersProc = child;
    const out = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    if ((await out.next()).value !== "ready") throw new Error("senders did not start");
    const done = out.next().then((l) => JSON.parse(String(l.value)) as { byName: Record<string, { ms: number[]; statuses: Record<string, number> }> });
    const under = await smallStream(server.port, o.ca, clients, done, "busy");
    const sent = await done;
    const busy = await server.ask("stall");

    const a = summarize(alone.ms);
    const u = summarize(under.ms);
    const ratio = u.p99 / a.p99;
    if (ratio > P99_RATIO) failed++;
    console.log(
      `\n2. other tenants' small reviews (${clients} clients; a pod to /validate/pods, to /mutate/pods, a pod naming a new claim), ` +
        `alone ${baselineSeconds} s, then ${sendersSeconds} s beside ${senderCount} senders posting every body above in turn:`,
    );
    console.log(
      table(
        ["phase", "small reviews", "statuses", "p50", "p99", "max", "GETs (metadata only)", "Events", "longest server stall"],
        [
          [
            "quiet",
            a.count,
            tally(alone.statuses),
            fmt(a.p50),
            fmt(a.p99),
            fmt(a.max),
            `${quiet.gets!} (${quiet.metadataGets!})`,
            quiet.events!,
            fmt(quiet.stallMs!),
          ],
          [
            `beside ${senderCount} senders`,
            u.count,
            tally(under.statuses),
            fmt(u.p50),
            fmt(u.p99),
            fmt(u.max),
            `${busy.gets!} (${busy.metadataGets!})`,
            busy.events!,
            fmt(busy.stallMs!),
          ],
          ["ratio", "", "", `${(u.p50 / a.p50).toFixed(2)}×`, `${ratio.toFixed(2)}× (target ≤ ${P99_RATIO}×)`, `${(u.max / a.max).toFixed(2)}×`, "", "", ""],
        ],
      ),
    );
    console.log(
      `inside the server (headers read → last byte written): p50 ${fmt(quiet.smallP50!)} → ${fmt(busy.smallP50!)}, ` +
        `p99 ${fmt(quiet.smallP99!)} → ${fmt(busy.smallP99!)} (${(busy.smallP99! / quiet.smallP99!).toFixed(2)}×)`,
    );
    const senderRows = Object.entries(sent.byName).map(([name, r]) => {
      const s = summarize(r.ms);
      return [
        name,
        s.count,
        Object.entries(r.statuses)
          .map(([k, v]) => `${k}: ${v}`)
          .join(", "),
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.max),
      ];
    });
    console.log("\nthe senders' answers meanwhile:");
    console.log(table(["sender", "sent", "statuses", "p50", "p99", "max"], senderRows));
    if (busy.events! > 0) failed++;
    if (failed > 0) {
      console.log(`NOT AS EXPECTED: ${failed} of the targets missed (above)`);
      process.exitCode = 1;
    }
  } finally {
    if (sendersProc && sendersProc.exitCode === null) process.kill(sendersProc.pid!);
    server.proc.stdin!.end();
    // With a profile to write, the server is given 10 s to exit on its own.
    if (o.serverCpuProf && server.proc.exitCode === null) await Promise.race([new Promise((r) => server.proc.once("exit", r)), sleep(10_000)]);
    if (server.proc.exitCode === null) process.kill(server.proc.pid!);
  }
}

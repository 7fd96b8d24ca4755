/**
 * bench/e2e: pod-create latency through a real kube-apiserver, without and then with Quartermaster's
 * webhooks registered, in the same run, in the format of Kyverno's published load tests.
 *
 *   npm run bench:e2e [-- --pods 1000,10000 --clients 10,50 --warmup 100 --keep-alive --json FILE]
 *
 * Needs QM_K8S_BIN_DIR (test/e2e/controlplane/build.sh). Starts etcd and kube-apiserver on loopback
 * (test/e2e/harness), Quartermaster's webhook server as its own process with its ServiceAccount's token,
 * and a PyTorchJob; then, for every (pods, clients) pair, creates that many training pods (the job's
 * workers: job-name and replica labels, owner reference, 8 GPUs) in an opted-in namespace from that many
 * concurrent clients, like k6 `--vus C --iterations N --no-connection-reuse`: each create on a new TLS
 * connection unless --keep-alive. First with no webhook configuration (baseline), then with the ones
 * from manifests/ pointed at the server. Every response is checked: 201, and outfitted by Quartermaster
 * exactly when its webhooks are registered. Prints avg/p50/p95/p99/max, failures and pods/s for both,
 * the overhead (with minus without), and the webhook's own server-side time from its metrics.
 *
 * Variants (--variants, comma-separated; all measured in the same run against the same baseline): each is
 * a way of serving the webhooks, from its own webhook process running the built package as the image does:
 * `rsa-http1` (an RSA-2048 key, HTTP/1.1 and the longer match condition: how Quartermaster served before
 * issue 21), `rsa-http1-compact` (the same with today's condition), `ecdsa-http1` (ECDSA
 * P-256, HTTP/1.1: the default), `ecdsa-h2` (ECDSA P-256, HTTP/2 offered: `serve --http2`), `rsa-h2`,
 * `ecdsa-http1-sgc` (the default under `node --single-threaded-gc`) and `ecdsa-http1-semi16` (under
 * `--min-semi-space-size=16`); `before` is ecdsa-http1 served by an older build (`--before DIR`, a
 * checkout built there), for a refactor's before/after in one run. Two floors, bare node:https processes registered with the same configurations
 * (`lib/floor-webhook.mjs`): `floor` answers every review allowed and nothing else, what any webhook costs;
 * `floor-same-answer` answers Quartermaster's very answers (learnt from a Quartermaster process during the
 * warm-up, then sent from templates), so the apiserver does the same work as with Quartermaster while the
 * webhook does none: the difference is what Quartermaster's own work costs.
 * `--pprof DIR` writes kube-apiserver's CPU profile of each measured run. Per variant and run: CPU per pod by
 * process, the webhook's bytes read and written per pod, the TLS connections it accepted (how often
 * the apiserver reconnects) and its V8 garbage collections. Another variant (a ValidatingAdmissionPolicy, say) is one more entry in
 * `variants` below: its configurations, whether pods come back outfitted, and its webhook process if any.
 * --rounds R splits each run into R rounds that run every variant in turn, the order rotated by one each
 * round, so a machine whose speed drifts favours none of them.
 *
 * No kubelet or scheduler: pods stay Pending. Pods are deleted between runs so every run starts from
 * the same etcd size. A warm-up of --warmup pods precedes each measured run and is not counted.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { Agent } from "node:https";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { freePort, startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import {
  applyOwnManifests,
  createNamespace,
  installKubeflowCrds,
  renderWebhookConfigurations,
  ROOT,
  webhookProcess,
  type WebhookProcess,
} from "../test/e2e/harness/webhook.js";
import { apiserverProfile, childPid, cpuSeconds, createPod as createApiPod } from "./lib/apiserver.js";
import { summarize, table, type Summary } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "1000,10000" },
    clients: { type: "string", default: "10,50" },
    warmup: { type: "string", default: "100" },
    "keep-alive": { type: "boolean", default: false },
    variants: { type: "string", default: "rsa-http1,ecdsa-http1,ecdsa-h2" },
    rounds: { type: "string", default: "1" },
    /** Write a V8 CPU profile of each webhook process into this directory (at its exit). */
    profile: { type: "string" },
    /**
     * Write a CPU profile of kube-apiserver (Go pprof) over the first --pprof-seconds of each measured run
     * into this directory, named by variant and clients, for `go tool pprof -top`.
     */
    pprof: { type: "string" },
    "pprof-seconds": { type: "string", default: "5" },
    /** Extra node flags for each webhook process, e.g. "--max-semi-space-size=16". */
    "node-flags": { type: "string", default: "" },
    /**
     * A checkout of an older Quartermaster, built (`npm ci && npm run build` there): the `before` variant
     * runs its package as ecdsa-http1 runs today's, so a refactor is measured before/after in one run.
     */
    before: { type: "string" },
    json: { type: "string" },
  },
});
const podCounts = values.pods.split(",").map(Number);
const clientCounts = values.clients.split(",").map(Number);
const warmup = Number(values.warmup);
const variantNames = values.variants.split(",").filter(Boolean);
const rounds = Number(values.rounds);
const NS = "bench";
const JOB = "llm-pretrain";
const WORKERS = 7;

type Obj = Record<string, any>;

function trainingPod(jobUid: string, i: number): Obj {
  const index = i % WORKERS;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: `${JOB}-worker-${index}-`,
      labels: {
        "training.kubeflow.org/job-name": JOB,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": String(index),
        team: "nlp",
      },
      annotations: { "quartermaster.dev/accelerator": "A100-SXM4-80GB", "quartermaster.dev/interruptible": "true" },
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: JOB, uid: jobUid, controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      restartPolicy: "OnFailure",
      containers: [
        {
          name: "pytorch",
          image: "registry.example.com/ml/llm-train:2026.11.3-cuda12.4",
          command: ["torchrun"],
          args: ["--nnodes=8", "--nproc-per-node=8", "/workspace/train.py", "--bf16"],
          env: [
            { name: "NCCL_DEBUG", value: "INFO" },
            { name: "PYTHONUNBUFFERED", value: "1" },
            { name: "CHECKPOINT_DIR", value: "/checkpoints/llm-pretrain" },
          ],
          ports: [{ name: "pytorchjob-port", containerPort: 23456, protocol: "TCP" }],
          resources: { requests: { cpu: "48", memory: "480Gi" }, limits: { cpu: "64", memory: "512Gi", "nvidia.com/gpu": "8" } },
          volumeMounts: [{ name: "dshm", mountPath: "/dev/shm" }],
        },
      ],
      volumes: [{ name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "64Gi" } }],
    },
  };
}

interface Outcome {
  ok: boolean;
  ms: number;
  outfitted: boolean;
  error?: string;
}

/** One pod create as the admin client: was it admitted, and outfitted by the mutating webhook? */
async function createPod(cp: ControlPlane, body: string, agent: Agent | false, dryRun = false): Promise<Outcome> {
  const r = await createApiPod(cp, NS, body, agent, dryRun);
  if (r.status !== 201) return { ok: false, ms: r.ms, outfitted: false, error: r.error ?? `${r.status} ${r.text.slice(0, 200)}` };
  const pod = JSON.parse(r.text) as Obj;
  return { ok: true, ms: r.ms, outfitted: pod.metadata?.annotations?.["quartermaster.dev/mutations"] !== undefined };
}

/** k6 shared-iterations: `total` creates pulled by `clients` concurrent loops. */
async function run(cp: ControlPlane, jobUid: string, total: number, clients: number): Promise<{ outcomes: Outcome[]; seconds: number }> {
  const agent = values["keep-alive"] ? new Agent({ keepAlive: true, maxSockets: clients }) : false;
  const outcomes: Outcome[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        const i = next++;
        outcomes.push(await createPod(cp, JSON.stringify(trainingPod(jobUid, i)), agent));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  if (agent) agent.destroy();
  return { outcomes, seconds };
}

/** Server-side admission time from the webhook's histogram: count, mean and the p99 bucket bound, per webhook. */
interface ServerSide {
  count: number;
  sum: number;
  buckets: Map<number, number>;
}

/** A webhook server process the bench measures: Quartermaster's, or the floor (`lib/floor-webhook.mjs`). */
interface Served {
  pid(): number | undefined;
  metricsPort(): number | undefined;
  stop(): Promise<void>;
}

/** The server's Prometheus text. */
function scrape(wh: Served): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: wh.metricsPort(), path: "/metrics", method: "GET", agent: false }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve(text));
    });
    req.on("error", reject);
    req.end();
  });
}

/** What the bench reads from a webhook server's metrics, from one scrape. */
interface Reading {
  server: Map<string, ServerSide>;
  connections: Record<string, number>;
  gc: Record<string, number>;
}

/** Nothing for a variant without a webhook process (the baseline). */
async function read(wh: Served | undefined): Promise<Reading> {
  if (!wh) return { server: new Map(), connections: {}, gc: {} };
  const text = await scrape(wh);
  return { server: serverSide(text), connections: connectionsOf(text), gc: gcOf(text) };
}

/** Server-side admission time by webhook (`quartermaster_admission_duration_seconds`). */
function serverSide(text: string): Map<string, ServerSide> {
  const out = new Map<string, ServerSide>();
  const get = (w: string): ServerSide => {
    let s = out.get(w);
    if (!s) out.set(w, (s = { count: 0, sum: 0, buckets: new Map() }));
    return s;
  };
  for (const line of text.split("\n")) {
    const m = /^quartermaster_admission_duration_seconds_(bucket|sum|count)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const s = get(labels.webhook!);
    const v = Number(m[3]);
    if (m[1] === "sum") s.sum += v;
    else if (m[1] === "count") s.count += v;
    else {
      const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
      s.buckets.set(le, (s.buckets.get(le) ?? 0) + v);
    }
  }
  return out;
}

async function fetchMetrics(wh: Served): Promise<Map<string, ServerSide>> {
  return serverSide(await scrape(wh));
}

function serverDelta(
  before: Map<string, ServerSide>,
  after: Map<string, ServerSide>,
): Array<{ webhook: string; count: number; meanMs: number; p99UpToMs: number }> {
  return [...after].map(([webhook, a]) => {
    const b = before.get(webhook) ?? { count: 0, sum: 0, buckets: new Map<number, number>() };
    const count = a.count - b.count;
    const les = [...a.buckets.keys()].sort((x, y) => x - y);
    const p99 = les.find((le) => a.buckets.get(le)! - (b.buckets.get(le) ?? 0) >= 0.99 * count) ?? Infinity;
    return { webhook, count, meanMs: count ? ((a.sum - b.sum) / count) * 1000 : NaN, p99UpToMs: p99 * 1000 };
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** CPU seconds of the load generator, etcd, kube-apiserver and the webhook server (0 without one). */
function cpuNow(pids: { etcd: number; apiserver: number; webhook?: number }): Record<string, number> {
  const self = process.cpuUsage();
  return {
    client: (self.user + self.system) / 1e6,
    etcd: cpuSeconds(pids.etcd),
    apiserver: cpuSeconds(pids.apiserver),
    webhook: pids.webhook === undefined ? 0 : cpuSeconds(pids.webhook),
  };
}

/** Bytes a process has read and written through system calls (TLS records included), from /proc. */
function ioBytes(pid: number | undefined): { read: number; written: number } {
  if (pid === undefined) return { read: 0, written: 0 };
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  const field = (name: string): number => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? NaN);
  return { read: field("rchar"), written: field("wchar") };
}

/** TLS connections the webhook server accepted, by protocol (`quartermaster_tls_connections_total`). */
function connectionsOf(text: string): Record<string, number> {
  return Object.fromEntries([...text.matchAll(/^quartermaster_tls_connections_total\{protocol="([^"]+)"\} (\S+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/** V8's garbage collections so far by kind (minor, major, ...): count and seconds (prom-client's nodejs_gc_duration_seconds; none for the floor). */
function gcOf(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^nodejs_gc_duration_seconds_(count|sum)\{kind="([^"]+)"\} (\S+)$/gm)) out[`${m[2]} ${m[1]}`] = Number(m[3]);
  return out;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function deleteAllPods(cp: ControlPlane): Promise<void> {
  const r = await cp.api("DELETE", `/api/v1/namespaces/${NS}/pods`);
  if (r.status !== 200) throw new Error(`deleting pods: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  await until("the pods to be gone", async () => (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?limit=1`)).body.items.length === 0);
}

// ---------------------------------------------------------------------------------------------------

/**
 * One way of admitting the pods that a run measures. The baseline registers nothing; the others register
 * `configs` (replacing what the previous variant registered) and, when they call a webhook process,
 * name it so its CPU, I/O, connections and server-side time are read.
 */
interface Variant {
  name: string;
  description: string;
  /** Admission configurations (webhook configurations, policies and bindings); none: the baseline. */
  configs: Obj[];
  /** Whether a created pod comes back outfitted by Quartermaster. */
  outfitted: boolean;
  /** The webhook process the configurations call, if any. */
  webhook?: Served;
}

/**
 * The pod webhooks' training-pods-only condition as issue 21 found it (manifests/base before the compact form):
 * each GPU pattern tested four times, six comprehensions, all of which kube-apiserver plans for every request.
 * The `rsa-http1` variant, "as before issue 21", registers it.
 */
const CONDITION_BEFORE_ISSUE_21 = `(has(object.metadata.labels) && ('training.kubeflow.org/job-name' in object.metadata.labels || ('caffe2_job_key' in object.metadata.labels && 'group_name' in object.metadata.labels))) ||
object.spec.containers.exists(c, has(c.resources) &&
    ((has(c.resources.limits) && c.resources.limits.exists(r, r == 'gpu' || r == 'nvidia.com/gpu' || r.startsWith('nvidia.com/mig-') || r == 'amd.com/gpu')) ||
     (has(c.resources.requests) && c.resources.requests.exists(r, r == 'gpu' || r == 'nvidia.com/gpu' || r.startsWith('nvidia.com/mig-') || r == 'amd.com/gpu')))) ||
(has(object.spec.initContainers) && object.spec.initContainers.exists(c, has(c.resources) &&
    ((has(c.resources.limits) && c.resources.limits.exists(r, r == 'gpu' || r == 'nvidia.com/gpu' || r.startsWith('nvidia.com/mig-') || r == 'amd.com/gpu')) ||
     (has(c.resources.requests) && c.resources.requests.exists(r, r == 'gpu' || r == 'nvidia.com/gpu' || r.startsWith('nvidia.com/mig-') || r == 'amd.com/gpu')))))`;

/** The configurations with the pod webhooks' training-pods-only condition replaced by `expression`. */
function withTrainingCondition(configs: Obj[], expression: string): Obj[] {
  const copy = structuredClone(configs);
  for (const c of copy)
    for (const h of c.webhooks as Obj[]) for (const m of (h.matchConditions ?? []) as Obj[]) if (m.name === "training-pods-only") m.expression = expression;
  return copy;
}

/** The webhook-serving variants --variants picks from: the serving key and the protocols offered. */
const WEBHOOK_VARIANTS: Record<
  string,
  {
    description: string;
    keyType: "rsa" | "ecdsa";
    args: string[];
    nodeArgs?: string[];
    condition?: string;
    floor?: "allow" | "same-answer";
    /** Run the built package of this checkout rather than today's. */
    builtRoot?: string;
  }
> = {
  "rsa-http1": {
    description: "RSA-2048 key, HTTP/1.1, the long training-pods-only condition (as before issue 21)",
    keyType: "rsa",
    args: [],
    condition: CONDITION_BEFORE_ISSUE_21,
  },
  "rsa-http1-compact": { description: "RSA-2048 key, HTTP/1.1, today's compact condition", keyType: "rsa", args: [] },
  "ecdsa-http1": { description: "ECDSA P-256 key, HTTP/1.1 (the default)", keyType: "ecdsa", args: [] },
  before: {
    description: `ecdsa-http1 served by the build in --before (${values.before ?? "unset"}): the same configurations, an older server`,
    keyType: "ecdsa",
    args: [],
    builtRoot: values.before,
  },
  "ecdsa-h2": { description: "ECDSA P-256 key, HTTP/2 and HTTP/1.1 offered (--http2)", keyType: "ecdsa", args: ["--http2"] },
  "rsa-h2": { description: "RSA-2048 key, HTTP/2 and HTTP/1.1 offered (--http2)", keyType: "rsa", args: ["--http2"] },
  "ecdsa-http1-sgc": {
    description: "ecdsa-http1 with node --single-threaded-gc (no V8 GC helper threads)",
    keyType: "ecdsa",
    args: [],
    nodeArgs: ["--single-threaded-gc"],
  },
  "ecdsa-http1-semi16": {
    description: "ecdsa-http1 with node --min-semi-space-size=16 (V8's young generation starts at its usual maximum: fewer, not longer, scavenges)",
    keyType: "ecdsa",
    args: [],
    nodeArgs: ["--min-semi-space-size=16"],
  },
  floor: {
    description: "bare node:https (ECDSA, HTTP/1.1) answering every review allowed, nothing else: the floor of any webhook",
    keyType: "ecdsa",
    args: [],
    floor: "allow",
  },
  "floor-same-answer": {
    description: "bare node:https (ECDSA, HTTP/1.1) answering Quartermaster's very answers (patch, warnings) from templates, doing none of its work",
    keyType: "ecdsa",
    args: [],
    floor: "same-answer",
  },
};
for (const name of variantNames)
  if (!WEBHOOK_VARIANTS[name]) throw new Error(`--variants: unknown ${name}; known: ${Object.keys(WEBHOOK_VARIANTS).join(", ")}`);
if (variantNames.includes("before") && !values.before) throw new Error("--variants before needs --before DIR (an older checkout, built)");

/**
 * The floor webhook (`lib/floor-webhook.mjs`) serving `certs`' pair, as its own process; with `upstream`, a
 * Quartermaster server it learns its answers from.
 */
async function floorProcess(certs: WebhookProcess, upstream?: WebhookProcess): Promise<Served & { port: number }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      join(ROOT, "bench/lib/floor-webhook.mjs"),
      join(certs.certDir, "tls.crt"),
      join(certs.certDir, "tls.key"),
      String(port),
      "0",
      ...(upstream ? [String(upstream.port), join(upstream.certDir, "ca.crt")] : []),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  process.on("exit", () => child.kill("SIGKILL")); // never outlive a bench that failed
  const metricsPort = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /metrics http:\/\/[^ ]*:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`floor webhook exited ${code}`)));
  });
  return {
    port,
    pid: () => (child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    metricsPort: () => metricsPort,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

const cp = await startControlPlane();
const processes: Served[] = [];
/** Quartermaster servers the floor learns answers from: started, not measured. */
const upstreams: Served[] = [];
try {
  await installKubeflowCrds(cp);
  await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
  await applyOwnManifests(cp);
  const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
  const job = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`, {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: JOB },
    spec: {
      nprocPerNode: "8",
      pytorchReplicaSpecs: {
        Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", image: "x" }] } } },
        Worker: { replicas: WORKERS, template: { spec: { containers: [{ name: "pytorch", image: "x" }] } } },
      },
    },
  });
  if (job.status !== 201) throw new Error(`PyTorchJob: ${job.status} ${JSON.stringify(job.body)}`);
  const jobUid = job.body.metadata.uid as string;

  const variants: Variant[] = [{ name: "baseline", description: "no admission webhooks", configs: [], outfitted: false }];
  for (const name of variantNames) {
    const spec = WEBHOOK_VARIANTS[name]!;
    if (spec.floor) {
      const certs = await webhookProcess({ kubeconfig: sa.kubeconfig, logLevel: "warn", keyType: spec.keyType, built: true });
      if (spec.floor === "same-answer") {
        await certs.start();
        upstreams.push(certs);
      }
      const floor = await floorProcess(certs, spec.floor === "same-answer" ? certs : undefined);
      processes.push(floor);
      const configs = await renderWebhookConfigurations(cp, floor.port, certs.caPem);
      variants.push({ name, description: spec.description, configs, outfitted: spec.floor === "same-answer", webhook: floor });
      continue;
    }
    // warn: no line per admission (a production server logs at info; see the README's Benchmarks note).
    const nodeArgs = values.profile ? ["--cpu-prof", `--cpu-prof-dir=${values.profile}`, `--cpu-prof-name=${name}-\${pid}.cpuprofile`] : [];
    nodeArgs.push(...values["node-flags"].split(" ").filter(Boolean));
    // The built package, as the image runs it.
    const wh = await webhookProcess({
      kubeconfig: sa.kubeconfig,
      logLevel: "warn",
      keyType: spec.keyType,
      args: spec.args,
      nodeArgs: [...(spec.nodeArgs ?? []), ...nodeArgs],
      built: true,
      builtRoot: spec.builtRoot,
    });
    await wh.start();
    processes.push(wh);
    const configs = await renderWebhookConfigurations(cp, wh.port, wh.caPem);
    variants.push({
      name,
      description: spec.description,
      configs: spec.condition ? withTrainingCondition(configs, spec.condition) : configs,
      outfitted: true,
      webhook: wh,
    });
  }

  const probeBody = JSON.stringify(trainingPod(jobUid, 0));
  const validated = async (wh: Served): Promise<number> => (await fetchMetrics(wh)).get("validate-pods")?.count ?? 0;
  /** The apiserver's view of the configurations settled: a dry-run probe is outfitted or not as `v` says, validated by its webhook process alone. */
  const settled = async (v: Variant): Promise<boolean> => {
    const before = await Promise.all(processes.map(validated));
    const probe = await createPod(cp, probeBody, false, true);
    const after = await Promise.all(processes.map(validated));
    return probe.ok && probe.outfitted === v.outfitted && processes.every((wh, i) => after[i]! > before[i]! === (wh === v.webhook));
  };
  const register = async (v: Variant): Promise<void> => {
    const r =
      v.configs.length > 0
        ? await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: v.configs }))
        : await cp.kubectl(["delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "quartermaster", "--ignore-not-found"]);
    if (r.code !== 0) throw new Error(r.stderr);
    // Three settled probes in a row, so a lagging apiserver informer cannot flip back.
    let streak = 0;
    await until(`${v.name} registered`, async () => ((streak = (await settled(v)) ? streak + 1 : 0), streak >= 3));
  };

  interface Row {
    scenario: string;
    clients: number;
    pods: number;
    latency: Summary;
    failures: number;
    outfitted: number;
    podsPerSecond: number;
    errors: string[];
    server?: ReturnType<typeof serverDelta>;
    /** CPU milliseconds per pod create, by process. */
    cpuMsPerPod: Record<string, number>;
    /** The variant's webhook process: bytes read and written per pod, TLS connections accepted by protocol. */
    webhookIo?: { readPerPod: number; writtenPerPod: number; connections: Record<string, number>; warmConnections: Record<string, number> };
    /** The webhook process's V8 garbage collections in the measured runs, by kind: count and seconds ("minor count", "minor sum"). */
    webhookGc?: Record<string, number>;
  }
  const base = { etcd: childPid("etcd"), apiserver: childPid("kube-apiserver") };
  const rows: Row[] = [];
  /** What one variant's runs of a (pods, clients) pair add up to over the rounds. */
  interface Tally {
    outcomes: Outcome[];
    seconds: number;
    cpu: Record<string, number>;
    io: { read: number; written: number };
    connections: Record<string, number>;
    /** Connections opened from registering the variant to the end of its warm-up (not counted above). */
    warmConnections: Record<string, number>;
    server: Map<string, ServerSide>;
    gc: Record<string, number>;
  }
  const addTo = (into: Record<string, number>, from: Record<string, number>, minus: Record<string, number> = {}, scale = 1): void => {
    for (const k of Object.keys(from)) into[k] = (into[k] ?? 0) + (from[k]! - (minus[k] ?? 0)) * scale;
  };
  const addServer = (into: Map<string, ServerSide>, before: Map<string, ServerSide>, after: Map<string, ServerSide>): void => {
    for (const [w, a] of after) {
      const b = before.get(w);
      const t = into.get(w) ?? { count: 0, sum: 0, buckets: new Map<number, number>() };
      t.count += a.count - (b?.count ?? 0);
      t.sum += a.sum - (b?.sum ?? 0);
      for (const [le, n] of a.buckets) t.buckets.set(le, (t.buckets.get(le) ?? 0) + n - (b?.buckets.get(le) ?? 0));
      into.set(w, t);
    }
  };
  const podsPerRun = (pods: number): number => Math.ceil(pods / rounds);
  for (const pods of podCounts) {
    for (const clients of clientCounts) {
      const tallies = new Map<string, Tally>(
        variants.map((v) => [
          v.name,
          { outcomes: [], seconds: 0, cpu: {}, io: { read: 0, written: 0 }, connections: {}, warmConnections: {}, server: new Map(), gc: {} },
        ]),
      );
      // Each round runs every variant, the order rotated by one each round: on a shared machine whose speed
      // drifts, no variant always runs first or last.
      for (let round = 0; round < rounds; round++) {
        for (let k = 0; k < variants.length; k++) {
          const v = variants[(k + round) % variants.length]!;
          const tally = tallies.get(v.name)!;
          const atRegister = (await read(v.webhook)).connections;
          await register(v);
          if (warmup > 0) await run(cp, jobUid, warmup, clients);
          const pids = { ...base, webhook: v.webhook?.pid() };
          const before = await read(v.webhook);
          addTo(tally.warmConnections, before.connections, atRegister);
          const ioBefore = ioBytes(pids.webhook);
          const cpuBefore = cpuNow(pids);
          const profiled = values.pprof
            ? apiserverProfile(cp, Number(values["pprof-seconds"]), join(values.pprof, `apiserver-${v.name}-${clients}c-r${round + 1}.pprof`))
            : undefined;
          const { outcomes, seconds } = await run(cp, jobUid, podsPerRun(pods), clients);
          const cpuAfter = cpuNow(pids);
          await profiled;
          const ioAfter = ioBytes(pids.webhook);
          const after = await read(v.webhook);
          addServer(tally.server, before.server, after.server);
          addTo(tally.connections, after.connections, before.connections);
          addTo(tally.gc, after.gc, before.gc);
          tally.outcomes.push(...outcomes);
          tally.seconds += seconds;
          addTo(tally.cpu, cpuAfter, cpuBefore);
          tally.io.read += ioAfter.read - ioBefore.read;
          tally.io.written += ioAfter.written - ioBefore.written;
          console.error(
            `round ${round + 1}/${rounds} ${v.name} ${clients} clients ${outcomes.length} pods: p50 ${summarize(outcomes.map((o) => o.ms)).p50.toFixed(1)} ms`,
          );
          await deleteAllPods(cp);
        }
      }
      for (const v of variants) {
        const t = tallies.get(v.name)!;
        const n = t.outcomes.length;
        const failed = t.outcomes.filter((o) => !o.ok);
        const row: Row = {
          scenario: v.name,
          clients,
          pods: n,
          latency: summarize(t.outcomes.map((o) => o.ms)),
          failures: failed.length,
          outfitted: t.outcomes.filter((o) => o.outfitted).length,
          podsPerSecond: n / t.seconds,
          errors: [...new Set(failed.map((o) => o.error ?? ""))].slice(0, 3),
          ...(v.webhook ? { server: serverDelta(new Map(), t.server) } : {}),
          cpuMsPerPod: Object.fromEntries(Object.keys(t.cpu).map((k) => [k, (t.cpu[k]! * 1000) / n])),
          ...(v.webhook
            ? {
                webhookIo: { readPerPod: t.io.read / n, writtenPerPod: t.io.written / n, connections: t.connections, warmConnections: t.warmConnections },
                webhookGc: t.gc,
              }
            : {}),
        };
        rows.push(row);
        console.error(
          `${v.name} ${clients} clients ${n} pods: p50 ${row.latency.p50.toFixed(1)} p99 ${row.latency.p99.toFixed(1)} ms, ${row.failures} failed, ` +
            `${row.outfitted} outfitted, ${row.podsPerSecond.toFixed(0)} pods/s${row.errors.length ? `; errors: ${row.errors.join(" | ")}` : ""}`,
        );
      }
    }
  }
  await register(variants[0]!);

  const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
  console.log(
    `\nbench/e2e: pod creates through kube-apiserver v1.33.13 + etcd 3.5.21 on loopback, node ${process.version}, ` +
      `${(await import("node:os")).availableParallelism()} CPUs (${cpuModel}), load generator, apiserver, etcd and webhook on the same machine; ` +
      `${values["keep-alive"] ? "connections kept alive" : "a new TLS connection per create (k6 --no-connection-reuse)"}; ${warmup} warm-up pods per run not counted; ${rounds} round(s) per variant, the order rotated each round\n`,
  );
  console.log(variants.map((v) => `- ${v.name}: ${v.description}`).join("\n") + "\n");
  console.log(
    table(
      ["scenario", "clients", "pods", "avg ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "fail %", "outfitted", "pods/s"],
      rows.map((r) => [
        r.scenario,
        r.clients,
        r.pods,
        r.latency.avg,
        r.latency.p50,
        r.latency.p95,
        r.latency.p99,
        r.latency.max,
        (100 * r.failures) / r.pods,
        r.outfitted,
        r.podsPerSecond,
      ]),
    ),
  );
  // Rows count the pods measured: --pods rounded up to a whole number per round.
  const overhead = podCounts
    .map((requested) => podsPerRun(requested) * rounds)
    .flatMap((pods) =>
      clientCounts.flatMap((clients) => {
        const b = rows.find((r) => r.scenario === "baseline" && r.pods === pods && r.clients === clients)!;
        return rows
          .filter((q) => q.scenario !== "baseline" && q.pods === pods && q.clients === clients)
          .map((q) => ({
            scenario: q.scenario,
            pods,
            clients,
            avg: q.latency.avg - b.latency.avg,
            p50: q.latency.p50 - b.latency.p50,
            p95: q.latency.p95 - b.latency.p95,
            p99: q.latency.p99 - b.latency.p99,
            failures: q.failures + b.failures,
            server: q.server ?? [],
            apiserverAddedCpuMs: q.cpuMsPerPod.apiserver! - b.cpuMsPerPod.apiserver!,
            webhookCpuMsPerAdmission: q.cpuMsPerPod.webhook! / Math.max(1, (q.server ?? []).filter((s) => s.count > 0).length),
          }));
      }),
    );
  console.log("\nOverhead of Quartermaster's webhooks (with minus without, same run):\n");
  console.log(
    table(
      [
        "scenario",
        "clients",
        "pods",
        "Δavg ms",
        "Δp50 ms",
        "Δp95 ms",
        "Δp99 ms",
        "failures",
        "webhook mean ms (mutate/validate)",
        "webhook p99 ≤ ms (mutate/validate)",
      ],
      overhead.map((o) => {
        const m = o.server.find((s) => s.webhook === "mutate-pods");
        const v = o.server.find((s) => s.webhook === "validate-pods");
        return [
          o.scenario,
          o.clients,
          o.pods,
          o.avg,
          o.p50,
          o.p95,
          o.p99,
          o.failures,
          `${m?.meanMs.toFixed(2)} / ${v?.meanMs.toFixed(2)}`,
          `${m?.p99UpToMs} / ${v?.p99UpToMs}`,
        ];
      }),
    ),
  );
  console.log("\nCPU milliseconds per pod create, by process (from /proc; 10 ms ticks, averaged over the run):\n");
  console.log(
    table(
      ["scenario", "clients", "pods", "load generator", "etcd", "kube-apiserver", "webhook", "total", "apiserver added", "webhook per admission"],
      rows.map((r) => {
        const c = r.cpuMsPerPod;
        const o = overhead.find((x) => x.scenario === r.scenario && x.pods === r.pods && x.clients === r.clients);
        return [
          r.scenario,
          r.clients,
          r.pods,
          c.client!,
          c.etcd!,
          c.apiserver!,
          c.webhook!,
          c.client! + c.etcd! + c.apiserver! + c.webhook!,
          o?.apiserverAddedCpuMs ?? "",
          o?.webhookCpuMsPerAdmission ?? "",
        ];
      }),
    ),
  );
  console.log("\nThe webhook process's I/O per pod create (system-call bytes, TLS records included) and the TLS connections it accepted:\n");
  console.log(
    table(
      ["scenario", "clients", "pods", "read B/pod", "written B/pod", "new connections (h2 / http/1.1)", "opened in warm-ups (h2 / http/1.1)"],
      rows
        .filter((r) => r.webhookIo)
        .map((r) => {
          const c = r.webhookIo!.connections;
          const w = r.webhookIo!.warmConnections;
          return [
            r.scenario,
            r.clients,
            r.pods,
            r.webhookIo!.readPerPod,
            r.webhookIo!.writtenPerPod,
            `${c.h2 ?? 0} / ${c["http/1.1"] ?? 0}`,
            `${w.h2 ?? 0} / ${w["http/1.1"] ?? 0}`,
          ];
        }),
    ),
  );
  console.log("\nThe webhook process's V8 garbage collections in the measured runs (prom-client's nodejs_gc_duration_seconds; the floor has none):\n");
  console.log(
    table(
      ["scenario", "clients", "pods", "minor GCs", "pods per minor GC", "minor ms each", "major GCs", "major ms each", "GC ms per pod"],
      rows
        .filter((r) => r.webhookGc && Object.keys(r.webhookGc).length > 0)
        .map((r) => {
          const g = r.webhookGc!;
          const n = (k: string): number => g[k] ?? 0;
          const totalSeconds = Object.keys(g)
            .filter((k) => k.endsWith(" sum"))
            .reduce((a, k) => a + g[k]!, 0);
          return [
            r.scenario,
            r.clients,
            r.pods,
            n("minor count"),
            r.pods / Math.max(1, n("minor count")),
            (1000 * n("minor sum")) / Math.max(1, n("minor count")),
            n("major count"),
            (1000 * n("major sum")) / Math.max(1, n("major count")),
            (1000 * totalSeconds) / r.pods,
          ];
        }),
    ),
  );
  // Issue 21's targets, for each variant against the first one (how Quartermaster served before).
  const before = variantNames[0];
  for (const o of overhead) {
    const ref = overhead.find((x) => x.scenario === before && x.pods === o.pods && x.clients === o.clients);
    const means = o.server.map((s) => s.meanMs);
    const cut = ref && ref.apiserverAddedCpuMs > 0 ? 1 - o.apiserverAddedCpuMs / ref.apiserverAddedCpuMs : NaN;
    const checks = [
      `webhook CPU/admission ${o.webhookCpuMsPerAdmission.toFixed(2)} ms ${o.webhookCpuMsPerAdmission <= 0.4 ? "(<= 0.4 met)" : "(> 0.4)"}`,
      `mean server time ${Math.max(...means).toFixed(2)} ms ${Math.max(...means) <= 0.3 ? "(<= 0.3 met)" : "(> 0.3)"}`,
      ...(o.clients === 1 ? [`p99 overhead ${o.p99.toFixed(1)} ms ${o.p99 <= 5 ? "(<= 5 met)" : "(> 5)"}`] : []),
      ...(o.scenario !== before
        ? [
            `apiserver added CPU ${o.apiserverAddedCpuMs.toFixed(2)} ms/pod, ${Number.isNaN(cut) ? "?" : `${(100 * cut).toFixed(0)}%`} below ${before} ${cut >= 1 / 3 ? "(>= 1/3 met)" : "(< 1/3)"}`,
          ]
        : []),
    ];
    console.log(`target ${o.scenario} ${o.clients} clients: ${checks.join("; ")}`);
  }
  const outfittedRight = rows.every((r) => r.outfitted === (variants.find((v) => v.name === r.scenario)!.outfitted ? r.pods - r.failures : 0));
  console.log(`every pod outfitted exactly when the webhooks were registered: ${outfittedRight ? "yes" : "NO"}`);
  const result = {
    bench: "e2e",
    keepAlive: values["keep-alive"],
    warmup,
    variants: variants.map((v) => ({ name: v.name, description: v.description })),
    rows,
    overhead,
  };
  if (values.json) (await import("node:fs")).writeFileSync(values.json, JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result));
} finally {
  for (const wh of [...processes, ...upstreams]) await wh.stop();
  await cp.stop();
}

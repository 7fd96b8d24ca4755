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
 * `full` is ecdsa-http1 under the name issue 35 compares against: the pods webhook in its full mode
 * (`webhook.podMutation: full`, the default). Two variants put the apiserver to work instead (Kubernetes >= 1.36):
 * `map-reduced`, the MutatingAdmissionPolicy and binding `quartermaster policy export-map` prints with the pods
 * webhook in its reduced mode (`webhook.podMutation: reduced`: its process runs that policy, and its configuration
 * gains the reduced-mode match condition, the one difference from manifests/base), as
 * manifests/overlays/mutating-admission-policy installs them; and `map-only`, the policy alone with no webhook
 * configuration, for GPU pods of no job (measured with `gpu` pods only: without the webhook a job's pod gets no
 * cluster spec). `map-only-before` and `map-reduced-before` are map-only and map-reduced with the policy the checkout
 * in `--before DIR` exports (its dependencies installed; no build needed; today's webhook), for a change to the exported
 * policy measured before/after in one run.
 * `--pprof DIR` writes kube-apiserver's CPU profile of each measured run (bench/pprof-admission.ts splits one by
 * admission stage). Per variant and run: CPU per pod by
 * process, the webhook's bytes read and written per pod, the TLS connections it accepted (how often
 * the apiserver reconnects), its V8 garbage collections, and the reviews every webhook process of the bench
 * received (`/mutate/pods`, `/validate/pods`, from their metrics), so a variant that must not call a webhook is seen
 * not to. Another variant (a ValidatingAdmissionPolicy, say) is one more entry in `variants` below: its
 * configurations, what pods of each kind come back with, and its webhook process if any.
 * --rounds R splits each run into R rounds that run every variant in turn, the order rotated by one each
 * round, so a machine whose speed drifts favours none of them.
 *
 * Pod kinds (--pod-kinds, comma-separated, each measured against its own baseline in the same rotation):
 * `training` (the default), the job's workers described above; `gpu`, the same container and annotations with no
 * job labels and no owner (a notebook or an inference server), which needs no lookup. Every response is checked
 * against what the variant promises for the kind: outfitted (the `quartermaster.dev/mutations` record and the GPU
 * toleration) or not, and the cluster spec (MASTER_ADDR) or not.
 *
 * No kubelet or scheduler: pods stay Pending. Pods are deleted between runs so every run starts from
 * the same etcd size. A warm-up of --warmup pods precedes each measured run and is not counted.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { Agent } from "node:https";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { MAP_NAME } from "../src/manifests/map.js";
import { binDir, startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { applyOwnManifests, createNamespace, installKubeflowCrds, renderWebhookConfigurations, webhookProcess } from "../test/e2e/harness/webhook.js";
import { apiserverProfile, childPid, cpuSeconds, createPod as createApiPod } from "./lib/apiserver.js";
import { floorProcess } from "./lib/floor-process.js";
import { exportedMap, exportedMapFrom, withPodMutationConditions } from "./lib/map-route.js";
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
    /** The kinds of pod created (see the module comment): training, gpu, or both. */
    "pod-kinds": { type: "string", default: "training" },
    json: { type: "string" },
  },
});
const podCounts = values.pods.split(",").map(Number);
const clientCounts = values.clients.split(",").map(Number);
const warmup = Number(values.warmup);
const variantNames = values.variants.split(",").filter(Boolean);
const rounds = Number(values.rounds);
const POD_KINDS = ["training", "gpu"] as const;
type PodKind = (typeof POD_KINDS)[number];
const podKinds = values["pod-kinds"].split(",").filter(Boolean) as PodKind[];
for (const k of podKinds) if (!POD_KINDS.includes(k)) throw new Error(`--pod-kinds: unknown ${k}; known: ${POD_KINDS.join(", ")}`);
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

/**
 * A GPU pod of no job (a notebook, an inference server): the training pod's container, annotations and team
 * label, without the job's labels and owner, so it needs no lookup and the exported policy outfits it alone.
 */
function gpuPod(i: number): Obj {
  const pod = trainingPod("", i);
  return { ...pod, metadata: { generateName: `llm-eval-${i % WORKERS}-`, labels: { team: "nlp" }, annotations: pod.metadata.annotations } };
}

const podOf = (kind: PodKind, jobUid: string, i: number): Obj => (kind === "training" ? trainingPod(jobUid, i) : gpuPod(i));

/** What a created pod came back with; the variants say what it should (see `Expected`). */
interface Outfit {
  /** Quartermaster's record (`quartermaster.dev/mutations`) and the GPU toleration (`nvidia.com/gpu` Exists). */
  outfitted: boolean;
  /** The job's cluster spec (MASTER_ADDR in the container). */
  clusterSpec: boolean;
}

interface Outcome extends Outfit {
  ok: boolean;
  ms: number;
  /** Only one of outfitted's two marks: a half-outfitted pod, never as expected. */
  partial: boolean;
  error?: string;
}

/** One pod create as the admin client: was it admitted, and what did it come back with? */
async function createPod(cp: ControlPlane, body: string, agent: Agent | false, dryRun = false): Promise<Outcome> {
  const r = await createApiPod(cp, NS, body, agent, dryRun);
  if (r.status !== 201)
    return { ok: false, ms: r.ms, outfitted: false, clusterSpec: false, partial: false, error: r.error ?? `${r.status} ${r.text.slice(0, 200)}` };
  const pod = JSON.parse(r.text) as Obj;
  const recorded = pod.metadata?.annotations?.["quartermaster.dev/mutations"] !== undefined;
  const tolerated = ((pod.spec?.tolerations ?? []) as Obj[]).some((t) => t.key === "nvidia.com/gpu" && t.operator === "Exists");
  const clusterSpec = ((pod.spec?.containers ?? []) as Obj[]).some((c) => ((c.env ?? []) as Obj[]).some((e) => e.name === "MASTER_ADDR"));
  return { ok: true, ms: r.ms, outfitted: recorded && tolerated, clusterSpec, partial: recorded !== tolerated };
}

/** k6 shared-iterations: `total` creates of `kind` pulled by `clients` concurrent loops. */
async function run(cp: ControlPlane, jobUid: string, total: number, clients: number, kind: PodKind): Promise<{ outcomes: Outcome[]; seconds: number }> {
  const agent = values["keep-alive"] ? new Agent({ keepAlive: true, maxSockets: clients }) : false;
  const outcomes: Outcome[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        const i = next++;
        outcomes.push(await createPod(cp, JSON.stringify(podOf(kind, jobUid, i)), agent));
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

/** `kube-apiserver --version` of QM_K8S_BIN_DIR ("Kubernetes v1.37.2"). */
function apiserverVersion(): string {
  return `kube-apiserver ${execFileSync(join(binDir(), "kube-apiserver"), ["--version"], { encoding: "utf8" })
    .trim()
    .replace(/^Kubernetes /, "")}`;
}

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

/** What a pod of one kind comes back with under a variant, and whether it reaches the variant's `/mutate/pods`. */
interface Expected extends Outfit {
  reachesMutate: boolean;
}

/**
 * One way of admitting the pods that a run measures. The baseline registers nothing; the others register
 * `configs` (replacing what the previous variant registered, and removing the kinds it does not register) and,
 * when they call a webhook process, name it so its CPU, I/O, connections and server-side time are read.
 */
interface Variant {
  name: string;
  description: string;
  /** Admission configurations (webhook configurations, policies and bindings); none: the baseline. */
  configs: Obj[];
  /** What a created pod of each kind comes back with (checked on every response, and on the probes that settle it). */
  expect: Record<PodKind, Expected>;
  /** The pod kinds it is measured with, of --pod-kinds (default all). */
  kinds?: readonly PodKind[];
  /** The webhook process the configurations call, if any (it validates every pod of either kind). */
  webhook?: Served;
}

/** Nothing outfits the pods; `reached`: a webhook is called all the same (the floor answering "allowed"). */
const untouched = (reached: boolean): Record<PodKind, Expected> => ({
  training: { outfitted: false, clusterSpec: false, reachesMutate: reached },
  gpu: { outfitted: false, clusterSpec: false, reachesMutate: reached },
});
/** Outfitted, the job's pods with their cluster spec when `clusterSpec`; `reached`: by kind, whether `/mutate/pods` is called. */
const outfittedBy = (clusterSpec: boolean, reached: Record<PodKind, boolean>): Record<PodKind, Expected> => ({
  training: { outfitted: true, clusterSpec, reachesMutate: reached.training },
  gpu: { outfitted: true, clusterSpec: false, reachesMutate: reached.gpu },
});
const asExpected = (o: Outcome, e: Expected): boolean => o.ok && !o.partial && o.outfitted === e.outfitted && o.clusterSpec === e.clusterSpec;

/** Everything a variant may register, by kind and name: what the next variant does not register, it removes. */
const REGISTERED = [
  ["MutatingWebhookConfiguration", "quartermaster"],
  ["ValidatingWebhookConfiguration", "quartermaster"],
  ["MutatingAdmissionPolicy", MAP_NAME],
  ["MutatingAdmissionPolicyBinding", MAP_NAME],
] as const;

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
    /**
     * The exported MutatingAdmissionPolicy: with the pods webhook in its reduced mode (`reduced`), or alone with no
     * webhook configuration and no process (`only`).
     */
    map?: "reduced" | "only";
    /** With `map`: the policy the checkout in --before exports instead of today's. */
    mapBefore?: boolean;
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
  full: { description: "ecdsa-http1: the default webhooks, the pods webhook in its full mode (webhook.podMutation: full)", keyType: "ecdsa", args: [] },
  "map-reduced": {
    description:
      "the exported MutatingAdmissionPolicy and binding (policy export-map) with the webhooks of ecdsa-http1, the pods webhook in its reduced mode (webhook.podMutation: reduced)",
    keyType: "ecdsa",
    args: [],
    map: "reduced",
  },
  "map-only": {
    description: "the exported MutatingAdmissionPolicy and binding alone, no webhook (GPU pods of no job)",
    keyType: "ecdsa",
    args: [],
    map: "only",
  },
  "map-reduced-before": {
    description: `map-reduced with the policy the checkout in --before (${values.before ?? "unset"}) exports (today's webhook)`,
    keyType: "ecdsa",
    args: [],
    map: "reduced",
    mapBefore: true,
  },
  "map-only-before": {
    description: `map-only with the policy the checkout in --before (${values.before ?? "unset"}) exports: a change to the policy before/after in one run`,
    keyType: "ecdsa",
    args: [],
    map: "only",
    mapBefore: true,
  },
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
for (const v of ["map-only-before", "map-reduced-before"])
  if (variantNames.includes(v) && !values.before) throw new Error(`--variants ${v} needs --before DIR (an older checkout)`);

/** Reviews received by a process's pods webhooks. */
interface Calls {
  mutate: number;
  validate: number;
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

  const variants: Variant[] = [{ name: "baseline", description: "no admission webhooks", configs: [], expect: untouched(false) }];
  const map = variantNames.some((n) => WEBHOOK_VARIANTS[n]!.map) ? await exportedMap(cp.dir) : undefined;
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
      const expect = spec.floor === "same-answer" ? outfittedBy(true, { training: true, gpu: true }) : untouched(true);
      variants.push({ name, description: spec.description, configs, expect, webhook: floor });
      continue;
    }
    if (spec.map === "only") {
      variants.push({
        name,
        description: spec.description,
        configs: spec.mapBefore ? exportedMapFrom(values.before!, map!.policyFile) : map!.objects,
        expect: outfittedBy(false, { training: false, gpu: false }),
        kinds: ["gpu"],
      });
      continue;
    }
    // warn: no line per admission (a production server logs at info; see docs/benchmarks.md).
    const nodeArgs = values.profile ? ["--cpu-prof", `--cpu-prof-dir=${values.profile}`, `--cpu-prof-name=${name}-\${pid}.cpuprofile`] : [];
    nodeArgs.push(...values["node-flags"].split(" ").filter(Boolean));
    // The built package, as the image runs it.
    const wh = await webhookProcess({
      kubeconfig: sa.kubeconfig,
      ...(spec.map === "reduced" ? { policy: map!.policyFile } : {}),
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
    if (spec.map === "reduced") {
      variants.push({
        name,
        description: spec.description,
        configs: [
          ...withPodMutationConditions(configs, map!.reducedConditions),
          ...(spec.mapBefore ? exportedMapFrom(values.before!, map!.policyFile) : map!.objects),
        ],
        expect: outfittedBy(true, { training: true, gpu: false }),
        webhook: wh,
      });
      continue;
    }
    variants.push({
      name,
      description: spec.description,
      configs: spec.condition ? withTrainingCondition(configs, spec.condition) : configs,
      expect: outfittedBy(true, { training: true, gpu: true }),
      webhook: wh,
    });
  }
  /** The (variant, pod kind) pairs measured, in the order the first round runs them. */
  const scenarios = variants.flatMap((v) => podKinds.filter((k) => (v.kinds ?? POD_KINDS).includes(k)).map((kind) => ({ v, kind })));
  for (const v of variants)
    if (!scenarios.some((s) => s.v === v)) throw new Error(`--variants ${v.name} is measured with ${v.kinds?.join(", ")} pods only: add them to --pod-kinds`);

  /** Reviews of the pods webhooks each process received so far (every process, whichever variant is registered). */
  const reviews = async (wh: Served): Promise<Calls> => {
    const m = await fetchMetrics(wh);
    return { mutate: m.get("mutate-pods")?.count ?? 0, validate: m.get("validate-pods")?.count ?? 0 };
  };
  const allReviews = async (): Promise<Calls[]> => Promise.all(processes.map(reviews));
  /**
   * The apiserver's view of the configurations settled: a dry-run probe of each kind comes back as `v` says, validated
   * by its webhook process alone, and reaching `/mutate/pods` of that process alone exactly when `v` says it does.
   */
  const settled = async (v: Variant): Promise<boolean> => {
    for (const kind of ["gpu", "training"] as const) {
      const e = v.expect[kind];
      const before = await allReviews();
      const probe = await createPod(cp, JSON.stringify(podOf(kind, jobUid, 0)), false, true);
      const after = await allReviews();
      if (!asExpected(probe, e)) return false;
      const called = processes.every(
        (wh, i) =>
          after[i]!.validate > before[i]!.validate === (wh === v.webhook) && after[i]!.mutate > before[i]!.mutate === (wh === v.webhook && e.reachesMutate),
      );
      if (!called) return false;
    }
    return true;
  };
  const register = async (v: Variant): Promise<void> => {
    if (v.configs.length > 0) {
      const r = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: v.configs }));
      if (r.code !== 0) throw new Error(r.stderr);
    }
    const kept = new Set(v.configs.map((c) => `${c.kind}/${c.metadata.name}`));
    const removed = REGISTERED.filter(([kind, name]) => !kept.has(`${kind}/${name}`)).map(([kind, name]) => `${kind.toLowerCase()}/${name}`);
    if (removed.length > 0) {
      const r = await cp.kubectl(["delete", ...removed, "--ignore-not-found"]);
      if (r.code !== 0) throw new Error(r.stderr);
    }
    // Three settled probes in a row, so a lagging apiserver informer cannot flip back.
    let streak = 0;
    await until(`${v.name} registered`, async () => ((streak = (await settled(v)) ? streak + 1 : 0), streak >= 3));
  };

  interface Row {
    scenario: string;
    kind: PodKind;
    clients: number;
    pods: number;
    latency: Summary;
    failures: number;
    outfitted: number;
    /** Pods that came back as the variant says pods of their kind do (outfitted or not, cluster spec or not). */
    asExpected: number;
    podsPerSecond: number;
    errors: string[];
    /** Reviews of the pods webhooks per pod create, summed over every webhook process of the bench. */
    callsPerPod: Calls;
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
    calls: Calls;
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
      const key = (s: { v: Variant; kind: PodKind }): string => `${s.v.name}/${s.kind}`;
      const tallies = new Map<string, Tally>(
        scenarios.map((s) => [
          key(s),
          {
            outcomes: [],
            seconds: 0,
            cpu: {},
            io: { read: 0, written: 0 },
            connections: {},
            warmConnections: {},
            server: new Map(),
            gc: {},
            calls: { mutate: 0, validate: 0 },
          },
        ]),
      );
      // Each round runs every variant with every kind of pod, the order rotated by one each round: on a shared
      // machine whose speed drifts, no scenario always runs first or last.
      let registered: Variant | undefined;
      for (let round = 0; round < rounds; round++) {
        for (let k = 0; k < scenarios.length; k++) {
          const { v, kind } = scenarios[(k + round) % scenarios.length]!;
          const tally = tallies.get(key({ v, kind }))!;
          const atRegister = (await read(v.webhook)).connections;
          if (registered !== v) await register(v);
          registered = v;
          if (warmup > 0) await run(cp, jobUid, warmup, clients, kind);
          const pids = { ...base, webhook: v.webhook?.pid() };
          const before = await read(v.webhook);
          const callsBefore = await allReviews();
          addTo(tally.warmConnections, before.connections, atRegister);
          const ioBefore = ioBytes(pids.webhook);
          const cpuBefore = cpuNow(pids);
          const profiled = values.pprof
            ? apiserverProfile(cp, Number(values["pprof-seconds"]), join(values.pprof, `apiserver-${v.name}-${kind}-${clients}c-r${round + 1}.pprof`))
            : undefined;
          const { outcomes, seconds } = await run(cp, jobUid, podsPerRun(pods), clients, kind);
          const cpuAfter = cpuNow(pids);
          await profiled;
          const ioAfter = ioBytes(pids.webhook);
          const after = await read(v.webhook);
          const callsAfter = await allReviews();
          callsAfter.forEach((c, i) => {
            tally.calls.mutate += c.mutate - callsBefore[i]!.mutate;
            tally.calls.validate += c.validate - callsBefore[i]!.validate;
          });
          addServer(tally.server, before.server, after.server);
          addTo(tally.connections, after.connections, before.connections);
          addTo(tally.gc, after.gc, before.gc);
          tally.outcomes.push(...outcomes);
          tally.seconds += seconds;
          addTo(tally.cpu, cpuAfter, cpuBefore);
          tally.io.read += ioAfter.read - ioBefore.read;
          tally.io.written += ioAfter.written - ioBefore.written;
          console.error(
            `round ${round + 1}/${rounds} ${v.name} ${kind} ${clients} clients ${outcomes.length} pods: p50 ${summarize(outcomes.map((o) => o.ms)).p50.toFixed(1)} ms`,
          );
          await deleteAllPods(cp);
        }
      }
      for (const { v, kind } of scenarios) {
        const t = tallies.get(key({ v, kind }))!;
        const n = t.outcomes.length;
        const failed = t.outcomes.filter((o) => !o.ok);
        const row: Row = {
          scenario: v.name,
          kind,
          clients,
          pods: n,
          latency: summarize(t.outcomes.map((o) => o.ms)),
          failures: failed.length,
          outfitted: t.outcomes.filter((o) => o.outfitted).length,
          asExpected: t.outcomes.filter((o) => asExpected(o, v.expect[kind])).length,
          podsPerSecond: n / t.seconds,
          errors: [...new Set(failed.map((o) => o.error ?? ""))].slice(0, 3),
          callsPerPod: { mutate: t.calls.mutate / n, validate: t.calls.validate / n },
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
          `${v.name} ${kind} ${clients} clients ${n} pods: p50 ${row.latency.p50.toFixed(1)} p99 ${row.latency.p99.toFixed(1)} ms, ${row.failures} failed, ` +
            `${row.outfitted} outfitted, ${row.asExpected} as expected, ${row.podsPerSecond.toFixed(0)} pods/s${row.errors.length ? `; errors: ${row.errors.join(" | ")}` : ""}`,
        );
      }
    }
  }
  await register(variants[0]!);

  const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
  console.log(
    `\nbench/e2e: pod creates through ${apiserverVersion()} + etcd on loopback, node ${process.version}, ` +
      `${(await import("node:os")).availableParallelism()} CPUs (${cpuModel}), load generator, apiserver, etcd and webhook on the same machine; ` +
      `${values["keep-alive"] ? "connections kept alive" : "a new TLS connection per create (k6 --no-connection-reuse)"}; ${warmup} warm-up pods per run not counted; ${rounds} round(s) per variant and pod kind (${podKinds.join(", ")}), the order rotated each round\n`,
  );
  console.log(variants.map((v) => `- ${v.name}: ${v.description}`).join("\n") + "\n");
  console.log(
    table(
      ["scenario", "kind", "clients", "pods", "avg ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "fail %", "outfitted", "pods/s"],
      rows.map((r) => [
        r.scenario,
        r.kind,
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
      clientCounts.flatMap((clients) =>
        podKinds.flatMap((kind) => {
          const b = rows.find((r) => r.scenario === "baseline" && r.kind === kind && r.pods === pods && r.clients === clients)!;
          return rows
            .filter((q) => q.scenario !== "baseline" && q.kind === kind && q.pods === pods && q.clients === clients)
            .map((q) => ({
              scenario: q.scenario,
              kind,
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
      ),
    );
  console.log("\nOverhead of Quartermaster's webhooks (with minus without, same run):\n");
  console.log(
    table(
      [
        "scenario",
        "kind",
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
          o.kind,
          o.clients,
          o.pods,
          o.avg,
          o.p50,
          o.p95,
          o.p99,
          o.failures,
          `${m?.count ? m.meanMs.toFixed(2) : "–"} / ${v?.count ? v.meanMs.toFixed(2) : "–"}`,
          `${m?.count ? m.p99UpToMs : "–"} / ${v?.count ? v.p99UpToMs : "–"}`,
        ];
      }),
    ),
  );
  console.log("\nCPU milliseconds per pod create, by process (from /proc; 10 ms ticks, averaged over the run):\n");
  console.log(
    table(
      ["scenario", "kind", "clients", "pods", "load generator", "etcd", "kube-apiserver", "webhook", "total", "apiserver added", "webhook per admission"],
      rows.map((r) => {
        const c = r.cpuMsPerPod;
        const o = overhead.find((x) => x.scenario === r.scenario && x.kind === r.kind && x.pods === r.pods && x.clients === r.clients);
        return [
          r.scenario,
          r.kind,
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
      ["scenario", "kind", "clients", "pods", "read B/pod", "written B/pod", "new connections (h2 / http/1.1)", "opened in warm-ups (h2 / http/1.1)"],
      rows
        .filter((r) => r.webhookIo)
        .map((r) => {
          const c = r.webhookIo!.connections;
          const w = r.webhookIo!.warmConnections;
          return [
            r.scenario,
            r.kind,
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
      ["scenario", "kind", "clients", "pods", "minor GCs", "pods per minor GC", "minor ms each", "major GCs", "major ms each", "GC ms per pod"],
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
            r.kind,
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
  console.log(
    "\nPer variant and pod kind: kube-apiserver CPU per pod create and what it adds over the baseline of the same kind, " +
      "the reviews every webhook process of the bench received per pod (from their metrics), latency, and the pods that came back as the variant says:\n",
  );
  console.log(
    table(
      [
        "scenario",
        "kind",
        "clients",
        "pods",
        "apiserver ms/pod",
        "added ms/pod",
        "mutate-pods calls/pod",
        "validate-pods calls/pod",
        "p50 ms",
        "p99 ms",
        "as expected",
      ],
      rows.map((r) => {
        const o = overhead.find((x) => x.scenario === r.scenario && x.kind === r.kind && x.pods === r.pods && x.clients === r.clients);
        return [
          r.scenario,
          r.kind,
          r.clients,
          r.pods,
          r.cpuMsPerPod.apiserver!,
          o?.apiserverAddedCpuMs ?? "",
          r.callsPerPod.mutate,
          r.callsPerPod.validate,
          r.latency.p50,
          r.latency.p99,
          `${r.asExpected}/${r.pods}`,
        ];
      }),
    ),
  );
  /** A cut (1 - this / reference) in words: "30% below", "12% above". */
  const relative = (cut: number): string =>
    Number.isNaN(cut) ? "? against" : cut >= 0 ? `${(100 * cut).toFixed(0)}% below` : `${(-100 * cut).toFixed(0)}% above`;
  // Issue 35's done-when: the apiserver CPU the exported policy with the reduced webhook adds per training pod, a
  // quarter below the full webhook's; GPU pods of no job outfitted with no call to /mutate/pods (map-reduced: the
  // pods still reach /validate/pods), and with no webhook call at all under map-only.
  for (const o of overhead.filter((x) => x.scenario.startsWith("map-reduced") && x.kind === "training")) {
    const full = overhead.find((x) => x.scenario === "full" && x.kind === "training" && x.pods === o.pods && x.clients === o.clients);
    if (!full) continue;
    const cut = full.apiserverAddedCpuMs > 0 ? 1 - o.apiserverAddedCpuMs / full.apiserverAddedCpuMs : NaN;
    console.log(
      `target ${o.scenario} training pods ${o.clients} clients: apiserver added CPU ${o.apiserverAddedCpuMs.toFixed(2)} ms/pod against full's ` +
        `${full.apiserverAddedCpuMs.toFixed(2)}, ${relative(cut)} ${cut >= 0.25 ? "(>= 25% below: met)" : "(not 25% below)"}`,
    );
  }
  for (const r of rows.filter((x) => x.kind === "gpu" && (x.scenario.startsWith("map-reduced") || x.scenario.startsWith("map-only")))) {
    const calls = r.callsPerPod.mutate * r.pods;
    const all = calls + r.callsPerPod.validate * r.pods;
    const none = r.scenario.startsWith("map-only") ? all === 0 : calls === 0;
    console.log(
      `target ${r.scenario} GPU pods of no job ${r.clients} clients: ${r.asExpected} of ${r.pods} outfitted as expected with ${calls} /mutate/pods reviews` +
        `${r.scenario.startsWith("map-only") ? ` and ${all} webhook reviews in all` : ` (${all - calls} /validate/pods)`} ${none ? "(none: met)" : "(NOT met)"}`,
    );
  }
  // Issue 51's done-when: the policy alone adds at most 0.6x the apiserver CPU per GPU pod of no job the full webhook adds.
  for (const o of overhead.filter((x) => x.scenario.startsWith("map-only") && x.kind === "gpu")) {
    const full = overhead.find((x) => x.scenario === "full" && x.kind === "gpu" && x.pods === o.pods && x.clients === o.clients);
    if (!full) continue;
    const ratio = full.apiserverAddedCpuMs > 0 ? o.apiserverAddedCpuMs / full.apiserverAddedCpuMs : NaN;
    console.log(
      `target ${o.scenario} GPU pods of no job ${o.clients} clients: apiserver added CPU ${o.apiserverAddedCpuMs.toFixed(2)} ms/pod against full's ` +
        `${full.apiserverAddedCpuMs.toFixed(2)}, ${ratio.toFixed(2)}x ${ratio <= 0.6 ? "(<= 0.6x: met)" : "(> 0.6x)"}`,
    );
  }
  // Issue 21's targets, for each variant with a webhook against the first one (how Quartermaster served before).
  const before = variantNames[0];
  for (const o of overhead.filter((x) => x.server.some((s) => s.count > 0))) {
    const ref = overhead.find((x) => x.scenario === before && x.kind === o.kind && x.pods === o.pods && x.clients === o.clients);
    const means = o.server.filter((s) => s.count > 0).map((s) => s.meanMs);
    const cut = ref && ref.apiserverAddedCpuMs > 0 ? 1 - o.apiserverAddedCpuMs / ref.apiserverAddedCpuMs : NaN;
    const checks = [
      `webhook CPU/admission ${o.webhookCpuMsPerAdmission.toFixed(2)} ms ${o.webhookCpuMsPerAdmission <= 0.4 ? "(<= 0.4 met)" : "(> 0.4)"}`,
      `mean server time ${Math.max(...means).toFixed(2)} ms ${Math.max(...means) <= 0.3 ? "(<= 0.3 met)" : "(> 0.3)"}`,
      ...(o.clients === 1 ? [`p99 overhead ${o.p99.toFixed(1)} ms ${o.p99 <= 5 ? "(<= 5 met)" : "(> 5)"}`] : []),
      ...(o.scenario !== before
        ? [`apiserver added CPU ${o.apiserverAddedCpuMs.toFixed(2)} ms/pod, ${relative(cut)} ${before} ${cut >= 1 / 3 ? "(>= 1/3 met)" : "(< 1/3)"}`]
        : []),
    ];
    console.log(`target ${o.scenario} ${o.kind} ${o.clients} clients: ${checks.join("; ")}`);
  }
  const right = rows.every((r) => r.asExpected === r.pods);
  console.log(
    `every pod admitted and outfitted as its variant says (the record and the GPU toleration, the cluster spec for a job's pods): ${right ? "yes" : "NO"}`,
  );
  const result = {
    bench: "e2e",
    keepAlive: values["keep-alive"],
    warmup,
    podKinds,
    variants: variants.map((v) => ({ name: v.name, description: v.description, expect: v.expect })),
    rows,
    overhead,
  };
  if (values.json) (await import("node:fs")).writeFileSync(values.json, JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result));
} finally {
  for (const wh of [...processes, ...upstreams]) await wh.stop();
  await cp.stop();
}

/**
 * bench/scale: the reconciler at the size of the clusters it is for, on real phases. A real kube-apiserver,
 * etcd, kube-scheduler and kube-controller-manager (garbage collector) with kwok (sigs.k8s.io/kwok) keeping
 * `--nodes` GPU nodes Ready and moving pods through their phases, Quartermaster's webhooks registered, and
 * `--pods` pods of PyTorchJobs (a stand-in operator: the benchmark creates each job's pods as
 * training-operator does, owned by the job, and marks the job Succeeded once kwok has finished all of them).
 *
 *   npm run bench:scale -- --nodes 1000 --pods 20000 [--churn-seconds 120] [--cron-seconds 60] [--ttl 10]
 *                          [--json FILE] [--check]
 *
 * Needs QM_K8S_BIN_DIR (test/e2e/controlplane/build.sh) and QM_KWOK_BIN (test/e2e/kwok/build.sh). In one run:
 *
 * 1. Fill: the nodes, then `--pods` long-running pods (30 % asking for a GPU, up to 70 % of the GPUs), created through
 *    the webhooks from 32 clients; every one bound by kube-scheduler and Running under kwok.
 * 2. Passes (`quartermaster reconcile --once` as it ships, as the reconciler's ServiceAccount): the first
 *    (which writes the ledger), then five converged ones (nothing changed since) each paired with a bare
 *    paginated LIST of the same objects (`lib/bare-list.mjs`, same identity and page size; the order alternating),
 *    each with its time, CPU, peak RSS, the requests it sent and the writes it made: the median of the pairs'
 *    ratios is the pass's overhead over reading.
 * 3. The ledger's allocated GPUs per node against the scheduler's ground truth (the bound, unfinished pods'
 *    GPU requests, from a LIST taken while nothing changes): `ledgerMismatchGpus` sums the differences.
 * 4. Churn with `reconcile --watch` resident: `--rate` jobs a second arrive (4 pods, kwok finishes them after
 *    `--run-seconds`), each with `ttlSecondsAfterFinished: --ttl`; TTL lateness = when the job was seen gone
 *    minus (completionTime + ttl), polled every 250 ms. Then the same churn with `reconcile --once` every
 *    `--cron-seconds` (the CronJob) instead. The webhooks' admission p99 over both, from the apiserver's own
 *    histogram (`apiserver_admission_webhook_admission_duration_seconds`, so a bucket's upper bound).
 * 5. The ledger again once the churn has drained.
 *
 * `--check` (the reduced run in .ci/run) fails on a ledger mismatch, a TTL missed (a job not deleted within 10 s
 * of its TTL under --watch, or within a period and a pass under the CronJob) or a pass that failed.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { KWOK_NODE_ANNOTATION, kwokBin, podOutcome, startKwok } from "../test/e2e/harness/kwok.js";
import { applyOwnManifests, createNamespace, installKubeflowCrds, renderWebhookConfigurations, ROOT, webhookProcess } from "../test/e2e/harness/webhook.js";
import { summarize } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    nodes: { type: "string", default: "1000" },
    pods: { type: "string", default: "20000" },
    "pods-per-job": { type: "string", default: "10" },
    namespaces: { type: "string", default: "20" },
    "churn-seconds": { type: "string", default: "120" },
    "cron-seconds": { type: "string", default: "60" },
    rate: { type: "string", default: "2" },
    "run-seconds": { type: "string", default: "20" },
    ttl: { type: "string", default: "10" },
    json: { type: "string" },
    check: { type: "boolean", default: false },
  },
});
/** Converged passes measured, each paired with a bare LIST. */
const PAIRS = 5;
const N_NODES = Number(values.nodes);
const N_PODS = Number(values.pods);
const PODS_PER_JOB = Number(values["pods-per-job"]);
const N_NS = Number(values.namespaces);
const CHURN_S = Number(values["churn-seconds"]);
const CRON_S = Number(values["cron-seconds"]);
const RATE = Number(values.rate);
const RUN_S = Number(values["run-seconds"]);
const TTL_S = Number(values.ttl);
const GPUS_PER_NODE = 8;
const CHURN_PODS = 4;

type Obj = Record<string, any>;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (msg: string): void => void process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const ns = (i: number): string => `team-${String(i % N_NS).padStart(2, "0")}`;

/** Admin calls over keep-alive connections (the harness's `cp.api` opens one per call). */
function keepAliveApi(
  cp: ControlPlane,
): (method: string, path: string, body?: unknown, contentType?: string) => Promise<{ status: number; body: any; text: string }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  return (method, path, body, contentType = "application/json") =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        {
          host: "127.0.0.1",
          port: cp.apiPort,
          method,
          path,
          ca: cp.tls.ca,
          cert: cp.tls.cert,
          key: cp.tls.key,
          agent,
          headers: { accept: "application/json", ...(data ? { "content-type": contentType, "content-length": Buffer.byteLength(data) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString();
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed, text });
          });
        },
      );
      req.on("error", reject);
      req.end(data);
    });
}
type Api = ReturnType<typeof keepAliveApi>;

/** Every item of a LIST, page by page. */
async function listAll(api: Api, path: string): Promise<Obj[]> {
  const out: Obj[] = [];
  let cont: string | undefined;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const r = await api("GET", `${path}${sep}limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ""}`);
    if (r.status !== 200) throw new Error(`LIST ${path}: ${r.status} ${r.text.slice(0, 300)}`);
    out.push(...(r.body.items as Obj[]));
    cont = r.body.metadata?.continue;
  } while (cont);
  return out;
}

/** Runs `fn` over 0..n-1 from `width` workers. */
async function inParallel(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, width) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

// --- The cluster's shape.

const PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"];
/** Nine GPU nodes in ten (A100 and H100 in turn, the GPU taint), the tenth a CPU node. */
function nodeObject(i: number): Obj {
  const gpu = i % 10 !== 9;
  const name = `${gpu ? "gpu" : "cpu"}-${String(i).padStart(5, "0")}`;
  // GPU nodes as a DGX (96 cores, 8 GPUs, 110 pods); CPU nodes large enough for the pods that ask for no GPU
  // (they do not tolerate the GPU taint): a tenth of the nodes, 500 pods each.
  const resources: Record<string, string> = gpu
    ? { cpu: "96", memory: "2Ti", pods: "110", "ephemeral-storage": "10Ti", "nvidia.com/gpu": String(GPUS_PER_NODE) }
    : { cpu: "512", memory: "4Ti", pods: "500", "ephemeral-storage": "10Ti" };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: { [KWOK_NODE_ANNOTATION]: "fake" },
      labels: {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        type: "kwok",
        ...(gpu ? { "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": PRODUCTS[i % 2]!, "nvidia.com/gpu.count": String(GPUS_PER_NODE) } : {}),
      },
    },
    spec: gpu ? { taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }] } : {},
    status: { capacity: resources, allocatable: resources },
  };
}

function jobObject(name: string, replicas: number, extra: { ttl?: number; labels?: Record<string, string> } = {}): Obj {
  const template = { spec: { containers: [{ name: "pytorch", image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime" }] } };
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: {
      runPolicy: { cleanPodPolicy: "None", ...(extra.ttl !== undefined ? { ttlSecondsAfterFinished: extra.ttl } : {}) },
      pytorchReplicaSpecs: {
        Master: { replicas: 1, restartPolicy: "OnFailure", template },
        ...(replicas > 1 ? { Worker: { replicas: replicas - 1, restartPolicy: "OnFailure", template } } : {}),
      },
    },
  };
}

/** A pod of the job as training-operator v1 makes it (labels, controller reference), `gpus` GPUs, kwok's fate. */
function podObject(job: Obj, index: number, gpus: number, fate: Record<string, string>, labels: Record<string, string> = {}): Obj {
  const type = index === 0 ? "master" : "worker";
  const replicaIndex = index === 0 ? 0 : index - 1;
  const name = `${job.metadata.name}-${type}-${replicaIndex}`;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: {
        "training.kubeflow.org/job-name": job.metadata.name,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": type,
        "training.kubeflow.org/replica-index": String(replicaIndex),
        ...(index === 0 ? { "training.kubeflow.org/job-role": "master" } : {}),
        ...labels,
      },
      annotations: fate,
      ownerReferences: [
        { apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: job.metadata.name, uid: job.metadata.uid, controller: true, blockOwnerDeletion: true },
      ],
    },
    spec: {
      restartPolicy: "OnFailure",
      containers: [
        {
          name: "pytorch",
          image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
          ports: [{ name: "pytorchjob-port", containerPort: 23456 }],
          resources:
            gpus > 0 ? { requests: { cpu: "8", memory: "64Gi" }, limits: { "nvidia.com/gpu": String(gpus) } } : { requests: { cpu: "500m", memory: "2Gi" } },
        },
      ],
    },
  };
}

// --- Measuring.

interface PassRun {
  durationMs: number;
  apiCalls: number;
  writes: number;
  writesByKind: Record<string, number>;
  /** The process's CPU, its start (loading the CLI and client-node) included. */
  cpuMs: number;
  /** The CPU of the pass itself (the pass summary's `cpuMs`). */
  passCpuMs: number;
  peakRssMiB: number;
  failed: number;
  /** The ledger entries that moved in the shards the pass rewrote (the pass summary's count and first few). */
  ledgerChanged?: { entries: number; sample: string[] };
}

/** `quartermaster reconcile` as it ships (bin/quartermaster.js), with its own resource usage at exit. */
function runReconciler(args: string[], kubeconfig: string): { done: Promise<{ lines: Obj[]; rusage: Obj; code: number }>; stop: () => void; log: string } {
  const dir = mkdtempSync(join(tmpdir(), "qm-scale-"));
  const rusageFile = join(dir, "rusage.json");
  // The deletion budget (`reconciler.maxDeletionsPerPass`: 100 a pass or, resident, a --resync-seconds window)
  // sized for the churn, as a platform deleting a few jobs a second would set it: the default holds TTLs back.
  const policy = join(dir, "policy.yaml");
  writeFileSync(policy, "reconciler:\n  maxDeletionsPerPass: 5000\n");
  const child = spawn(
    process.execPath,
    [
      "--import",
      join(ROOT, "bench/lib/rusage-at-exit.mjs"),
      join(ROOT, "bin/quartermaster.js"),
      "reconcile",
      ...args,
      "--policy",
      policy,
      "--kubeconfig",
      kubeconfig,
      "--namespace",
      "quartermaster",
      "--log-level",
      "info",
    ],
    { env: { ...process.env, QM_RUSAGE_FILE: rusageFile }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  const done = new Promise<{ lines: Obj[]; rusage: Obj; code: number }>((resolve) =>
    child.on("exit", (code) => {
      writeFileSync(join(dir, "reconciler.log"), out + err);
      const lines = out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Obj);
      let rusage: Obj = {};
      try {
        rusage = JSON.parse(readFileSync(rusageFile, "utf8")) as Obj;
      } catch {
        log(`reconciler left no resource usage (exit ${code}): ${err.slice(-500)}`);
      }
      resolve({ lines, rusage, code: code ?? -1 });
    }),
  );
  return { done, stop: () => void child.kill("SIGTERM"), log: join(dir, "reconciler.log") };
}

async function reconcileOnce(kubeconfig: string): Promise<PassRun> {
  const { lines, rusage, code } = await runReconciler(["--once"], kubeconfig).done;
  const summary = lines.find((l) => l.msg === "reconcile pass");
  if (!summary) throw new Error(`reconcile --once (exit ${code}) logged no pass: ${JSON.stringify(lines.slice(-5))}`);
  const applied = summary.applied as Record<string, number>;
  const writesByKind: Record<string, number> = {
    ...applied,
    "ledger shards": summary.ledger.shardsWritten,
    events: summary.events,
    "lease (take, release)": 2,
  };
  const writes = Object.entries(writesByKind)
    .filter(([k]) => !k.startsWith("lease"))
    .reduce((n, [, v]) => n + v, 0);
  return {
    durationMs: summary.durationMs,
    apiCalls: summary.apiCalls,
    writes,
    writesByKind,
    cpuMs: Math.round(rusage.userCpuMs + rusage.systemCpuMs),
    passCpuMs: summary.cpuMs,
    peakRssMiB: Math.round(rusage.maxRssKiB / 1024),
    failed: Object.values(summary.failed as Record<string, number>).reduce((a, b) => a + b, 0),
    ...(summary.ledger.changedEntries ? { ledgerChanged: { entries: summary.ledger.changedEntries, sample: summary.ledger.changedSample } } : {}),
  };
}

/** The bare LIST baseline, as the reconciler's ServiceAccount, of the objects a pass reads, in its order. */
async function bareList(cp: ControlPlane, token: string): Promise<{ ms: number; objects: number; bytes: number; requests: number; cpuMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), "qm-scale-"));
  writeFileSync(join(dir, "ca.crt"), cp.tls.ca);
  writeFileSync(join(dir, "token"), token);
  const rusageFile = join(dir, "rusage.json");
  const kinds = ["tfjobs", "pytorchjobs", "mxjobs", "xgboostjobs", "paddlejobs", "jaxjobs"].map((p) => `/apis/kubeflow.org/v1/${p}`);
  const paths = [
    ...kinds.flatMap((k) => [k, "||"]),
    "/apis/kubeflow.org/v1alpha1/caffe2jobs",
    "||",
    "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
    "||",
    "/api/v1/namespaces",
    "/api/v1/pods",
    "/api/v1/services",
    "/api/v1/nodes",
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    "/api/v1/namespaces/quartermaster/configmaps?labelSelector=app.kubernetes.io%2Fcomponent%3Dledger",
    "/apis/resource.k8s.io/v1/resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims",
  ];
  const child = spawn(
    process.execPath,
    [
      "--import",
      join(ROOT, "bench/lib/rusage-at-exit.mjs"),
      join(ROOT, "bench/lib/bare-list.mjs"),
      cp.apiUrl,
      join(dir, "ca.crt"),
      join(dir, "token"),
      "500",
      ...paths,
    ],
    {
      env: { ...process.env, QM_RUSAGE_FILE: rusageFile },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  await new Promise((r) => child.on("exit", r));
  const rusage = JSON.parse(readFileSync(rusageFile, "utf8")) as Obj;
  return { ...(JSON.parse(out) as { ms: number; objects: number; bytes: number; requests: number }), cpuMs: Math.round(rusage.userCpuMs + rusage.systemCpuMs) };
}

/** Allocated GPUs per node: the ledger's against the scheduler's (bound, unfinished pods' requests), from LISTs taken now. */
async function ledgerMismatch(api: Api, kubeconfig: string): Promise<{ mismatchGpus: number; ledgerGpus: number; scheduledGpus: number; nodes: number }> {
  await reconcileOnce(kubeconfig);
  const cm = await listAll(api, "/api/v1/namespaces/quartermaster/configmaps");
  const ledgerText = await new Promise<string>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin/quartermaster.js"), "ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", kubeconfig],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`quartermaster ledger exited ${code} (${cm.length} ConfigMaps)`))));
  });
  const ledger = JSON.parse(ledgerText) as { nodes: Array<{ name: string; resources: Record<string, { allocated: number }> }> };
  const byLedger = new Map(ledger.nodes.map((n) => [n.name, n.resources["nvidia.com/gpu"]?.allocated ?? 0]));
  const byScheduler = new Map<string, number>();
  for (const p of await listAll(api, "/api/v1/pods")) {
    if (!p.spec.nodeName || p.status?.phase === "Succeeded" || p.status?.phase === "Failed") continue;
    const gpus = (p.spec.containers as Obj[]).reduce(
      (n, c) => n + Number(c.resources?.limits?.["nvidia.com/gpu"] ?? c.resources?.requests?.["nvidia.com/gpu"] ?? 0),
      0,
    );
    byScheduler.set(p.spec.nodeName, (byScheduler.get(p.spec.nodeName) ?? 0) + gpus);
  }
  let mismatchGpus = 0;
  for (const node of new Set([...byLedger.keys(), ...byScheduler.keys()])) mismatchGpus += Math.abs((byLedger.get(node) ?? 0) - (byScheduler.get(node) ?? 0));
  const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
  return { mismatchGpus, ledgerGpus: sum(byLedger), scheduledGpus: sum(byScheduler), nodes: byLedger.size };
}

/** The apiserver's histogram of webhook admission time, summed over its series, by bucket bound. */
async function admissionBuckets(api: Api): Promise<Map<number, number>> {
  const r = await api("GET", "/metrics");
  const out = new Map<number, number>();
  for (const line of r.text.split("\n")) {
    if (!line.startsWith("apiserver_admission_webhook_admission_duration_seconds_bucket{")) continue;
    const le = /le="([^"]+)"/.exec(line)?.[1];
    if (!le) continue;
    const bound = le === "+Inf" ? Infinity : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}
/** The upper bound of the bucket holding the p-th percentile of the observations between two scrapes. */
function bucketPercentile(before: Map<number, number>, after: Map<number, number>, p: number): { count: number; atMostMs: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  for (const b of bounds) if ((after.get(b) ?? 0) - (before.get(b) ?? 0) >= (p / 100) * total) return { count: total, atMostMs: b * 1000 };
  return { count: total, atMostMs: NaN };
}

// --- The run.

async function main(): Promise<void> {
  const started = performance.now();
  // Upstream's client QPS limits would be the benchmark's bottleneck (kube-scheduler's 50 binds ~50 pods a second).
  const qps = ["--kube-api-qps=500", "--kube-api-burst=1000"];
  const cp = await startControlPlane({ controllerManager: true, controllerManagerArgs: qps, scheduler: true, schedulerArgs: qps });
  const api = keepAliveApi(cp);
  let kwok: Awaited<ReturnType<typeof startKwok>> | undefined;
  let watcher: ReturnType<typeof runReconciler> | undefined;
  await installKubeflowCrds(cp);
  await applyOwnManifests(cp);
  const whSa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
  const wh = await webhookProcess({ kubeconfig: whSa.kubeconfig, logLevel: "warn", built: true });
  try {
    const sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    const token = /token: (\S+)/.exec(readFileSync(sa.kubeconfig, "utf8"))?.[1];
    if (!token) throw new Error("no token in the reconciler's kubeconfig");
    for (let i = 0; i < N_NS; i++) await createNamespace(cp, ns(i), { "quartermaster.dev/enabled": "true" });
    await wh.start();
    for (const config of await renderWebhookConfigurations(cp, wh.port, wh.caPem)) {
      const r = await cp.api(
        "POST",
        `/apis/admissionregistration.k8s.io/v1/${config.kind === "MutatingWebhookConfiguration" ? "mutating" : "validating"}webhookconfigurations`,
        config,
      );
      if (r.status !== 201) throw new Error(`registering ${config.metadata.name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    const bin = kwokBin();
    if ("skip" in bin) throw new Error(`bench:scale needs kwok: ${bin.skip}`);
    kwok = await startKwok(cp, bin.bin, { podParallelism: 32, leaseParallelism: 16 }); // Leases renewed on time at 1,000 nodes

    // 1. Fill.
    let t = performance.now();
    await inParallel(N_NODES, 32, async (i) => {
      const r = await api("POST", "/api/v1/nodes", nodeObject(i));
      if (r.status !== 201) throw new Error(`node ${i}: ${r.status} ${r.text.slice(0, 300)}`);
    });
    for (;;) {
      const ready = (await listAll(api, "/api/v1/nodes")).filter((n) =>
        (n.status?.conditions as Obj[] | undefined)?.some((c) => c.type === "Ready" && c.status === "True"),
      ).length;
      if (ready === N_NODES) break;
      await sleep(1000);
    }
    const nodesReadyS = (performance.now() - t) / 1000;
    log(`${N_NODES} nodes Ready in ${nodesReadyS.toFixed(1)} s`);

    const gpuNodes = Math.ceil((N_NODES * 9) / 10);
    // Room left for the churn's GPUs: the fill takes at most 70 % of them.
    const gpuPods = Math.min(Math.floor(N_PODS * 0.3), Math.floor(gpuNodes * GPUS_PER_NODE * 0.7));
    const nJobs = Math.ceil(N_PODS / PODS_PER_JOB);
    const stay = {}; // no outcome: kwok keeps a pod that no batch Job owns running
    t = performance.now();
    let podsMade = 0;
    let gpuMade = 0;
    await inParallel(nJobs, 32, async (j) => {
      const replicas = Math.min(PODS_PER_JOB, N_PODS - j * PODS_PER_JOB);
      const r = await api("POST", `/apis/kubeflow.org/v1/namespaces/${ns(j)}/pytorchjobs`, jobObject(`fill-${j}`, replicas));
      if (r.status !== 201) throw new Error(`job fill-${j}: ${r.status} ${r.text.slice(0, 500)}`);
      for (let k = 0; k < replicas; k++) {
        const gpus = gpuMade < gpuPods && (j * PODS_PER_JOB + k) % 10 < 3 ? 1 : 0;
        gpuMade += gpus;
        const p = await api("POST", `/api/v1/namespaces/${ns(j)}/pods`, podObject(r.body, k, gpus, stay));
        if (p.status !== 201) throw new Error(`pod of fill-${j}: ${p.status} ${p.text.slice(0, 500)}`);
        podsMade++;
      }
    });
    const createdS = (performance.now() - t) / 1000;
    log(`${podsMade} pods (${gpuMade} with a GPU) of ${nJobs} jobs created in ${createdS.toFixed(1)} s`);
    for (;;) {
      const pods = await listAll(api, "/api/v1/pods");
      const running = pods.filter((p) => p.status?.phase === "Running").length;
      if (running === podsMade) break;
      log(`  ${running}/${podsMade} Running`);
      await sleep(5000);
    }
    const runningS = (performance.now() - t) / 1000;
    log(`all Running ${runningS.toFixed(1)} s after the first create`);

    // 2. Passes and the bare LIST.
    const first = await reconcileOnce(sa.kubeconfig);
    log(`first pass ${first.durationMs} ms, ${first.apiCalls} calls, ${first.writes} writes, ${first.peakRssMiB} MiB`);
    // Converged passes and bare LISTs in pairs, five, the order alternating within a pair: after the fill the
    // apiserver and etcd settle for minutes, so each pair's ratio is taken and the median of those reported.
    const convergedRuns: PassRun[] = [];
    const bareRuns: Array<Awaited<ReturnType<typeof bareList>>> = [];
    for (let i = 0; i < PAIRS; i++) {
      if (i % 2 === 0) bareRuns.push(await bareList(cp, token));
      convergedRuns.push(await reconcileOnce(sa.kubeconfig));
      if (i % 2 === 1) bareRuns.push(await bareList(cp, token));
    }
    const median = <T>(xs: T[], by: (x: T) => number): T => [...xs].sort((a, b) => by(a) - by(b))[Math.floor(xs.length / 2)]!;
    const converged = median(convergedRuns, (r) => r.durationMs);
    const bare = median(bareRuns, (r) => r.ms);
    const pairRatio = (of: (pass: PassRun, list: (typeof bareRuns)[number]) => number): number =>
      Number(
        median(
          convergedRuns.map((r, i) => of(r, bareRuns[i]!)),
          (x) => x,
        ).toFixed(2),
      );
    log(
      `converged passes ${convergedRuns.map((r) => r.durationMs).join("/")} ms (${JSON.stringify(converged.writesByKind)}` +
        `${convergedRuns.map((r) => (r.ledgerChanged ? `; ledger moved: ${JSON.stringify(r.ledgerChanged)}` : "")).join("")}); ` +
        `bare LISTs ${bareRuns.map((r) => r.ms).join("/")} ms, ${bare.objects} objects`,
    );

    // 3. The ledger while nothing changes.
    const ledgerFilled = await ledgerMismatch(api, sa.kubeconfig);
    log(`ledger after the fill: ${JSON.stringify(ledgerFilled)}`);

    // 4. Churn.
    const admissionBefore = await admissionBuckets(api);
    const churn = async (phase: "watch" | "cron", onTick?: (s: number) => Promise<void>): Promise<{ latenessMs: number[]; missed: string[] }> => {
      const expiry = new Map<string, number>(); // namespace/name → completionTime + ttl (ms)
      const gone = new Map<string, number>();
      const finishedJobs = new Set<string>();
      const created: string[] = [];
      const label = `bench.quartermaster.dev/churn=${phase}`;
      const fate = podOutcome({ exitCode: 0, afterMs: RUN_S * 1000 });
      let arriving = true;
      let n = 0;
      const arrivals = (async () => {
        const t0 = performance.now();
        while (performance.now() - t0 < CHURN_S * 1000) {
          for (let k = 0; k < RATE; k++) {
            const name = `${phase}-${n}`;
            const namespace = ns(n++);
            const r = await api(
              "POST",
              `/apis/kubeflow.org/v1/namespaces/${namespace}/pytorchjobs`,
              jobObject(name, CHURN_PODS, { ttl: TTL_S, labels: { "bench.quartermaster.dev/churn": phase } }),
            );
            if (r.status !== 201) throw new Error(`job ${name}: ${r.status} ${r.text.slice(0, 300)}`);
            for (let i = 0; i < CHURN_PODS; i++) {
              const p = await api(
                "POST",
                `/api/v1/namespaces/${namespace}/pods`,
                podObject(r.body, i, i === 0 ? 0 : 1, fate, { "bench.quartermaster.dev/churn": phase }),
              );
              if (p.status !== 201) throw new Error(`pod of ${name}: ${p.status} ${p.text.slice(0, 300)}`);
            }
            created.push(`${namespace}/${name}`);
          }
          await sleep(1000);
        }
        arriving = false;
      })();
      // The stand-in operator: a job whose pods all Succeeded is marked Succeeded (completionTime now, to the second).
      const operator = (async () => {
        while (arriving || finishedJobs.size < created.length) {
          const pods = await listAll(api, `/api/v1/pods?labelSelector=${encodeURIComponent(label)}`);
          const byJob = new Map<string, Obj[]>();
          for (const p of pods) {
            const key = `${p.metadata.namespace}/${p.metadata.labels["training.kubeflow.org/job-name"]}`;
            byJob.set(key, [...(byJob.get(key) ?? []), p]);
          }
          for (const [key, ps] of byJob) {
            if (finishedJobs.has(key) || ps.length < CHURN_PODS || !ps.every((p) => p.status?.phase === "Succeeded")) continue;
            const [namespace, name] = key.split("/") as [string, string];
            const at = new Date(Math.floor(Date.now() / 1000) * 1000);
            const iso = at.toISOString().replace(/\.\d{3}Z$/, "Z");
            const r = await api(
              "PATCH",
              `/apis/kubeflow.org/v1/namespaces/${namespace}/pytorchjobs/${name}/status`,
              {
                status: {
                  conditions: [
                    { type: "Succeeded", status: "True", reason: "PyTorchJobSucceeded", message: "done", lastUpdateTime: iso, lastTransitionTime: iso },
                  ],
                  startTime: iso,
                  completionTime: iso,
                },
              },
              "application/merge-patch+json",
            );
            if (r.status !== 200) throw new Error(`finishing ${key}: ${r.status} ${r.text.slice(0, 300)}`);
            finishedJobs.add(key);
            expiry.set(key, at.getTime() + TTL_S * 1000);
          }
          await sleep(500);
        }
      })();
      // Deletions, seen every 250 ms.
      const grace = phase === "watch" ? 10_000 : CRON_S * 1000 + 60_000;
      const watcherLoop = (async () => {
        let tick = 0;
        for (;;) {
          // Only the jobs created before the listing began can be missing from it: one created while the LIST ran
          // is not gone (under load a LIST takes seconds, and such a job was counted deleted before its TTL).
          const listed = created.length;
          const present = new Set(
            (await listAll(api, `/apis/kubeflow.org/v1/pytorchjobs?labelSelector=${encodeURIComponent(label)}`)).map(
              (j) => `${j.metadata.namespace}/${j.metadata.name}`,
            ),
          );
          const now = Date.now();
          for (const key of created.slice(0, listed)) if (!present.has(key) && !gone.has(key)) gone.set(key, now);
          if (!arriving && created.every((k) => gone.has(k) || (expiry.has(k) && now > expiry.get(k)! + grace))) return;
          if (onTick && tick++ % 4 === 0) await onTick(now);
          await sleep(250);
        }
      })();
      await Promise.all([arrivals, operator, watcherLoop]);
      const latenessMs: number[] = [];
      const missed: string[] = [];
      for (const key of created) {
        const e = expiry.get(key);
        const g = gone.get(key);
        if (e === undefined) missed.push(`${key}: never finished`);
        else if (g === undefined || g - e > grace) missed.push(`${key}: not deleted within ${grace} ms of its TTL`);
        else latenessMs.push(g - e);
        if (g !== undefined && e !== undefined && g < e) missed.push(`${key}: deleted ${e - g} ms before its TTL ran out`);
      }
      return { latenessMs, missed };
    };

    watcher = runReconciler(["--watch", "--metrics-port", "0", "--resync-seconds", "300"], sa.kubeconfig);
    await sleep(3000);
    const watched = await churn("watch");
    watcher.stop();
    const watchRun = await watcher.done;
    log(`the resident reconciler's log: ${watcher.log}`);
    watcher = undefined;
    const watchRssMiB = Math.round((watchRun.rusage.maxRssKiB ?? NaN) / 1024);
    log(
      `watch churn: ${watched.latenessMs.length} TTLs, p50 ${summarize(watched.latenessMs).p50} ms, p99 ${summarize(watched.latenessMs).p99} ms; missed ${watched.missed.length}; peak RSS ${watchRssMiB} MiB`,
    );

    let lastPass = 0;
    const cronPasses: PassRun[] = [];
    let passing: Promise<void> | undefined;
    const cron = await churn("cron", async (now) => {
      if (passing || now - lastPass < CRON_S * 1000) return;
      lastPass = now;
      passing = reconcileOnce(sa.kubeconfig).then(
        (r) => void cronPasses.push(r),
        (e: unknown) => log(`cron pass failed: ${String(e)}`),
      );
      void passing.finally(() => (passing = undefined));
    });
    await passing;
    log(
      `cron churn: ${cron.latenessMs.length} TTLs, p50 ${summarize(cron.latenessMs).p50} ms, p99 ${summarize(cron.latenessMs).p99} ms; missed ${cron.missed.length}`,
    );
    const admission = bucketPercentile(admissionBefore, await admissionBuckets(api), 99);

    // 5. The ledger once the churn's pods are gone (the garbage collector deletes them after their jobs).
    for (let i = 0; i < 120; i++) {
      if ((await listAll(api, "/api/v1/pods?labelSelector=bench.quartermaster.dev%2Fchurn")).length === 0) break;
      await sleep(1000);
    }
    const ledgerDrained = await ledgerMismatch(api, sa.kubeconfig);

    const pct = (xs: number[]): { p50: number; p99: number; count: number } => {
      const s = summarize(xs);
      return { p50: Math.round(s.p50), p99: Math.round(s.p99), count: s.count };
    };
    const result = {
      nodes: N_NODES,
      pods: podsMade,
      gpuPods: gpuMade,
      jobs: nJobs,
      nodesReadySeconds: Math.round(nodesReadyS),
      podsCreatedSeconds: Math.round(createdS),
      podsRunningSeconds: Math.round(runningS),
      passes: {
        first,
        converged,
        convergedRuns: convergedRuns.map((r) => r.durationMs),
        convergedWrites: convergedRuns.map((r) => r.writes),
        cron: cronPasses,
      },
      bareList: { ...bare, runs: bareRuns.map((r) => r.ms) },
      // The median of the pairs' ratios, in time and in CPU (the pass's own, the CLI's start apart: bare-list.mjs
      // loads no library, against the LIST's process).
      convergedPassOverBareList: pairRatio((r, b) => r.durationMs / b.ms),
      convergedPassCpuOverBareList: pairRatio((r, b) => r.passCpuMs / b.cpuMs),
      // The most any converged pass wrote (each pass's own in passes.convergedWrites).
      writesInConvergedPass: Math.max(...convergedRuns.map((r) => r.writes)),
      reconcilerPeakRssMiB: Math.max(first.peakRssMiB, converged.peakRssMiB, watchRssMiB, ...cronPasses.map((p) => p.peakRssMiB)),
      watchPeakRssMiB: watchRssMiB,
      ledger: { filled: ledgerFilled, drained: ledgerDrained },
      ledgerMismatchGpus: ledgerFilled.mismatchGpus + ledgerDrained.mismatchGpus,
      ttlLatenessMs: { watch: pct(watched.latenessMs), cron: pct(cron.latenessMs) },
      ttlMissed: { watch: watched.missed, cron: cron.missed },
      admissionP99AtMostMs: admission.atMostMs,
      admissionReviews: admission.count,
      cronSeconds: CRON_S,
      seconds: Math.round((performance.now() - started) / 1000),
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (values.json) writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`);
    if (values.check) {
      const problems = [
        ...(result.ledgerMismatchGpus !== 0 ? [`ledger differs from the scheduler by ${result.ledgerMismatchGpus} GPUs`] : []),
        ...watched.missed.map((m) => `watch: ${m}`),
        ...cron.missed.map((m) => `cron: ${m}`),
        ...(first.failed + converged.failed > 0 ? [`${first.failed + converged.failed} failed actions in the passes`] : []),
        ...(watched.latenessMs.length === 0 || cron.latenessMs.length === 0 ? ["no TTL measured"] : []),
      ];
      if (problems.length > 0) {
        process.stderr.write(`bench:scale --check failed:\n  ${problems.join("\n  ")}\n`);
        process.exitCode = 1;
      }
    }
  } finally {
    watcher?.stop();
    await wh.stop();
    await kwok?.stop();
    await cp.stop();
  }
}

// Stopped by a signal: exit through the normal path, so the harness stops what it started (by PID).
for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => process.exit(130));
await main();

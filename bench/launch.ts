/**
 * bench/launch: how long a big job takes to get all its pods, with and without Quartermaster (issue 51). What a
 * user feels is not one admission's latency but the launch: the controllers create a job's pods as fast as they
 * can, each CREATE goes through the admission chain, and the job runs once the last pod is bound.
 *
 *   npm run bench:launch -- [--pods 1000] [--reps 2] [--kinds trainjob,pytorchjob,jobset]
 *                           [--variants none,webhooks,map-reduced] [--json FILE] [--webhook-cpu-prof DIR]
 *
 * Needs QM_K8S_BIN_DIR, QM_KWOK_BIN, QM_TRAINER_BIN, QM_JOBSET_BIN and QM_OPERATOR_BIN (the builds under
 * test/e2e/). One control plane (kube-apiserver, etcd, kube-controller-manager's job-controller and garbage
 * collector, kube-scheduler) with kwok keeping ceil(pods / 8) × 1.1 untainted 8-GPU H100 nodes Ready, and the real
 * controllers: JobSet v0.12.0, Trainer v2.3.0 with its default runtimes, the training operator v1.9.4. kube-
 * controller-manager and kube-scheduler run with `--kube-api-qps 500 --kube-api-burst 1000` (their defaults, 20 and
 * 50, would make the launch a measure of client throttling); the operators keep their own defaults.
 *
 * Workloads of `--pods` pods, one GPU each: a TrainJob (torch-distributed, numNodes = pods), a PyTorchJob
 * (1 Master + pods − 1 Workers) and a JobSet (one replicated Job of parallelism = completions = pods). Variants:
 * `none` (no Quartermaster webhook configuration), `webhooks` (manifests/base's, the server as its ServiceAccount),
 * `webhooks-h2` (the same from a server run with `--http2`: the apiserver multiplexes its calls over one HTTP/2
 * connection instead of opening an HTTP/1.1 connection per concurrent call), `map-reduced` (the exported
 * MutatingAdmissionPolicy with the pods webhook in its reduced mode, Kubernetes >= 1.36), `floor` (bare node:https,
 * lib/floor-webhook.mjs, registered as Quartermaster's webhooks and answering every review allowed: what any
 * webhook with these configurations costs a launch, the bound of what Quartermaster can reach). The webhook servers run
 * the built package (`npm run bench:launch` builds first), as the image does. Each rep runs every kind under every variant, the variants' order rotated by one each rep so that drift favours
 * none. For each run: from the workload's CREATE to all its pods created (a watch sees them) and to all bound
 * (`spec.nodeName`); the apiserver's admission time over the run (the p99 bucket of its
 * `apiserver_admission_step_admission_duration_seconds`, mutating and validating, over every CREATE of the run, and of
 * `apiserver_admission_webhook_admission_duration_seconds` for the two pods webhooks); kube-apiserver's and the
 * webhook's CPU per pod (and the full server's under every variant: what it spends with no call), and the TLS
 * connections the webhook accepted. The workload is then deleted, and its pods with a grace period of 0 once no
 * controller is left to replace them, so every run starts from the same cluster.
 *
 * Prints one table per kind (median over reps of each variant, and its ratio to `none` in the same run).
 */
import type { ClientRequest } from "node:http";
import { request } from "node:https";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { kwokBin, kwokNodes, startKwok } from "../test/e2e/harness/kwok.js";
import { installOperatorCrds, operatorBin, startOperator } from "../test/e2e/harness/operator.js";
import {
  JOB_CONTROLLER,
  installDefaultRuntimes,
  installTrainerCrds,
  startJobSet,
  startTrainer,
  trainerBins,
  type Controller,
} from "../test/e2e/harness/trainer.js";
import { applyOwnManifests, createNamespace, renderWebhookConfigurations, webhookProcess, type WebhookProcess } from "../test/e2e/harness/webhook.js";
import { clusterNode, H100_NO_MIG } from "../test/fixtures/nodes.js";
import { childPid, cpuSeconds } from "./lib/apiserver.js";
import { floorProcess } from "./lib/floor-process.js";
import { exportedMap, withPodMutationConditions } from "./lib/map-route.js";
import { table } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "1000" },
    reps: { type: "string", default: "2" },
    kinds: { type: "string", default: "trainjob,pytorchjob,jobset" },
    variants: { type: "string", default: "none,webhooks,map-reduced" },
    json: { type: "string" },
    /** Write the `webhooks` variant's server CPU profile (`node --cpu-prof`) into this directory. */
    "webhook-cpu-prof": { type: "string" },
  },
});
const PODS = Number(values.pods);
const REPS = Number(values.reps);
const KIND_NAMES = values.kinds.split(",");
const VARIANT_NAMES = values.variants.split(",") as Variant[];
const NS = "launch";
const GPUS_PER_NODE = 8;
const RUN_TIMEOUT_MS = 20 * 60_000;

type Obj = Record<string, any>;
type Variant = "none" | "webhooks" | "webhooks-h2" | "map-reduced" | "floor";
const log = (msg: string): void => void process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A workload kind: its object for a run, where it is created, and the label that selects its pods. */
interface LaunchKind {
  name: string;
  plural: string;
  apiPath: string;
  body(name: string): Obj;
  selector(name: string): string;
}

const gpuLimits = { limits: { "nvidia.com/gpu": "1", cpu: "1", memory: "1Gi" } };

const KINDS: Record<string, LaunchKind> = {
  trainjob: {
    name: "TrainJob",
    plural: "trainjobs",
    apiPath: `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${NS}/trainjobs`,
    body: (name) => ({
      apiVersion: "trainer.kubeflow.org/v1alpha1",
      kind: "TrainJob",
      metadata: { name },
      spec: { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: PODS, resourcesPerNode: gpuLimits } },
    }),
    selector: (name) => `jobset.sigs.k8s.io/jobset-name=${name}`,
  },
  pytorchjob: {
    name: "PyTorchJob",
    plural: "pytorchjobs",
    apiPath: `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`,
    body: (name) => {
      const template = { spec: { containers: [{ name: "pytorch", image: "registry.invalid/train:1", resources: gpuLimits }] } };
      return {
        apiVersion: "kubeflow.org/v1",
        kind: "PyTorchJob",
        metadata: { name },
        spec: {
          pytorchReplicaSpecs: {
            Master: { replicas: 1, restartPolicy: "Never", template },
            Worker: { replicas: PODS - 1, restartPolicy: "Never", template },
          },
        },
      };
    },
    selector: (name) => `training.kubeflow.org/job-name=${name}`,
  },
  jobset: {
    name: "JobSet",
    plural: "jobsets",
    apiPath: `/apis/jobset.x-k8s.io/v1alpha2/namespaces/${NS}/jobsets`,
    body: (name) => ({
      apiVersion: "jobset.x-k8s.io/v1alpha2",
      kind: "JobSet",
      metadata: { name },
      spec: {
        replicatedJobs: [
          {
            name: "w",
            replicas: 1,
            template: {
              spec: {
                parallelism: PODS,
                completions: PODS,
                backoffLimit: 0,
                template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "registry.invalid/train:1", resources: gpuLimits }] } },
              },
            },
          },
        ],
      },
    }),
    selector: (name) => `jobset.sigs.k8s.io/jobset-name=${name}`,
  },
};

/**
 * Watches the pods `selector` selects in {@link NS}, from a LIST's resourceVersion (so that no pod created before the
 * watch's response came back is missed; resolves once the watch is established): `done` resolves with when the
 * `count`-th was first seen and when the `count`-th was first seen bound, in ms since `t0()` (performance.now(),
 * taken at the CREATE). A watch the apiserver ends is resumed from the last resourceVersion seen.
 */
async function watchLaunch(
  cp: ControlPlane,
  selector: string,
  count: number,
  t0: () => number,
): Promise<{ done: Promise<{ createdMs: number; boundMs: number }>; stop(): void }> {
  const listed = await cp.api("GET", `/api/v1/namespaces/${NS}/pods?limit=1&labelSelector=${encodeURIComponent(selector)}`);
  let rv = String(listed.body?.metadata?.resourceVersion ?? "");
  if (listed.status !== 200 || !rv) throw new Error(`pod list: ${listed.status} ${JSON.stringify(listed.body).slice(0, 300)}`);
  const seen = new Set<string>();
  const bound = new Set<string>();
  let createdMs = NaN;
  let finished = false;
  let req: ClientRequest | undefined;
  let resolveReady!: () => void;
  const ready = new Promise<void>((r) => (resolveReady = r));
  let settle!: { resolve(v: { createdMs: number; boundMs: number }): void; reject(e: Error): void };
  const done = new Promise<{ createdMs: number; boundMs: number }>((resolve, reject) => (settle = { resolve, reject }));
  const finish = (err?: Error): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    req?.destroy();
    resolveReady();
    if (err) settle.reject(err);
    else settle.resolve({ createdMs, boundMs: performance.now() - t0() });
  };
  const timer = setTimeout(
    () => finish(new Error(`${selector}: ${seen.size} created, ${bound.size} bound of ${count} after ${RUN_TIMEOUT_MS / 1000} s`)),
    RUN_TIMEOUT_MS,
  );
  let reconnects = 0;
  const connect = (): void => {
    const url = new URL(
      `${cp.apiUrl}/api/v1/namespaces/${NS}/pods?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent(selector)}`,
    );
    let ended = false;
    const again = (): void => {
      if (finished || ended) return;
      ended = true;
      if (++reconnects > 20) return finish(new Error(`pod watch: ended ${reconnects} times`));
      log(`pod watch ended (${seen.size} created, ${bound.size} bound): resumed from ${rv}`);
      setTimeout(connect, 100);
    };
    req = request(url, { ca: cp.tls.ca, cert: cp.tls.cert, key: cp.tls.key, method: "GET" }, (res) => {
      resolveReady();
      let buf = "";
      res.setEncoding("utf8");
      if (res.statusCode !== 200) {
        res.on("data", (chunk: string) => (buf += chunk));
        res.on("end", () => finish(new Error(`pod watch: ${res.statusCode} ${buf.slice(0, 300)}`)));
        return;
      }
      res.on("data", (chunk: string) => {
        buf += chunk;
        for (let nl = buf.indexOf("\n"); nl >= 0 && !finished; nl = buf.indexOf("\n")) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line) as { type: string; object: Obj };
          if (ev.type === "ERROR") return finish(new Error(`pod watch: ${line.slice(0, 300)}`));
          rv = String(ev.object.metadata?.resourceVersion ?? rv);
          if (ev.type === "BOOKMARK" || ev.type === "DELETED") continue;
          const name = ev.object.metadata?.name as string;
          seen.add(name);
          if (seen.size === count && Number.isNaN(createdMs)) createdMs = performance.now() - t0();
          if (ev.object.spec?.nodeName) bound.add(name);
          if (bound.size === count) return finish();
        }
      });
      res.on("end", again);
      res.on("error", again);
    });
    req.on("error", again);
    req.end();
  };
  connect();
  await ready;
  return {
    done,
    stop: () => {
      done.catch(() => undefined);
      finish(new Error("stopped"));
    },
  };
}

/**
 * The apiserver's admission histograms for CREATEs (not rejected): bucket counts (cumulative) by upper bound, keyed
 * `step:admit` / `step:validate` (`apiserver_admission_step_admission_duration_seconds`: every CREATE of the run,
 * pods, Jobs, Services, Events alike, since the metric has no resource label) and `webhook:NAME` (
 * `apiserver_admission_webhook_admission_duration_seconds`: one webhook's calls, the pods' webhooks being called
 * for pods only).
 */
type Histograms = Map<string, Map<number, number>>;

const HISTOGRAMS: Array<[prefix: string, key: (labels: Record<string, string>) => string]> = [
  ["apiserver_admission_step_admission_duration_seconds_bucket{", (l) => `step:${l.type}`],
  ["apiserver_admission_webhook_admission_duration_seconds_bucket{", (l) => `webhook:${l.name}`],
];

async function admissionHistograms(cp: ControlPlane): Promise<Histograms> {
  const r = await cp.api("GET", "/metrics");
  const text = typeof r.body === "string" ? r.body : JSON.stringify(r.body);
  const out: Histograms = new Map();
  // apiserver_admission_step_admission_duration_seconds_bucket{le="0.005",operation="CREATE",rejected="false",type="admit"} 12
  for (const line of text.split("\n")) {
    const h = HISTOGRAMS.find(([prefix]) => line.startsWith(prefix));
    if (!h) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (labels.operation !== "CREATE" || labels.rejected !== "false") continue;
    const le = labels.le === "+Inf" ? Infinity : Number(labels.le);
    const key = h[1](labels);
    const m = out.get(key) ?? new Map<number, number>();
    m.set(le, (m.get(le) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
    out.set(key, m);
  }
  return out;
}

/** What happened between two readings: each histogram's bucket counts (not cumulative), by upper bound ("+Inf" last). */
type Delta = Record<string, Record<string, number>>;

function histogramDelta(before: Histograms, after: Histograms): Delta {
  const out: Delta = {};
  for (const [key, buckets] of after) {
    const was = before.get(key) ?? new Map<number, number>();
    let below = 0;
    const counts: Record<string, number> = {};
    for (const le of [...buckets.keys()].sort((x, y) => x - y)) {
      const cumulative = buckets.get(le)! - (was.get(le) ?? 0);
      counts[le === Infinity ? "+Inf" : String(le)] = cumulative - below;
      below = cumulative;
    }
    if (below > 0) out[key] = counts;
  }
  return out;
}

/** Count and p99 bucket of one histogram over several runs' deltas. */
function p99Of(deltas: Delta[], key: string): { count: number; p99: string } {
  const sum = new Map<string, number>();
  for (const d of deltas) for (const [le, n] of Object.entries(d[key] ?? {})) sum.set(le, (sum.get(le) ?? 0) + n);
  const les = [...sum.keys()].sort((x, y) => (x === "+Inf" ? Infinity : Number(x)) - (y === "+Inf" ? Infinity : Number(y)));
  const count = [...sum.values()].reduce((x, y) => x + y, 0);
  if (count === 0) return { count, p99: "-" };
  let seen = 0;
  for (const le of les) {
    seen += sum.get(le)!;
    if (seen >= count * 0.99) return { count, p99: le === "+Inf" ? "+Inf" : `≤${Number(le) * 1000} ms` };
  }
  return { count, p99: "-" };
}

const POD_MUTATE = "webhook:pods.mutate.quartermaster.dev";
const POD_VALIDATE = "webhook:pods.validate.quartermaster.dev";

/** TLS connections a webhook process has accepted (`quartermaster_tls_connections_total`, all protocols). */
async function tlsConnections(wh: Served["wh"]): Promise<number> {
  return sumOf(await metricsText(wh), "quartermaster_tls_connections_total");
}

/** A webhook process's Prometheus text ("" with none). */
async function metricsText(wh: Served["wh"]): Promise<string> {
  const port = wh?.metricsPort();
  return port ? fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()) : "";
}

/** The sum of a counter's series in Prometheus text. */
const sumOf = (text: string, name: string): number =>
  [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce((n, m) => n + Number(m[1]), 0);

/** Reviews a webhook process has answered (its admission histogram's count). */
const admissions = (text: string): number => sumOf(text, "quartermaster_admission_duration_seconds_count");

interface Served {
  configs: Obj[];
  wh?: Pick<WebhookProcess, "pid" | "metricsPort">;
}

/** Applies a variant's configurations (and removes the others'); waits until a probe pod shows it in force. */
async function applyVariant(cp: ControlPlane, variant: Variant, served: Record<Variant, Served>, all: Obj[]): Promise<void> {
  const mine = new Set(served[variant].configs.map((c) => `${c.kind}/${c.metadata.name}`));
  for (const c of all) {
    if (mine.has(`${c.kind}/${c.metadata.name}`)) continue;
    await cp.kubectl(["delete", "--ignore-not-found", `${c.kind}.${String(c.apiVersion).split("/")[0]}`, c.metadata.name]);
  }
  if (served[variant].configs.length > 0) {
    const applied = await cp.kubectl(
      ["apply", "--server-side", "--force-conflicts", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: served[variant].configs }),
    );
    if (applied.code !== 0) throw new Error(`apply ${variant}: ${applied.stderr}`);
  }
  // A configuration takes effect a moment later: dry-run GPU pods until they come back outfitted or not (the floor,
  // which outfits nothing: until it has answered one).
  const outfitted = variant !== "none" && variant !== "floor";
  const floorAnswers = async (): Promise<number> => (variant === "floor" ? admissions(await metricsText(served.floor.wh)) : 0);
  const answered0 = await floorAnswers();
  let probes = 0;
  await cp.until(`variant ${variant} in force`, async () => {
    const r = await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `probe-${variant}-${++probes}` },
      spec: { containers: [{ name: "c", image: "registry.invalid/probe:1", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
    });
    if (variant === "floor") return (await floorAnswers()) > answered0;
    return (r.body?.metadata?.annotations?.["quartermaster.dev/mutations"] !== undefined) === outfitted;
  });
  await sleep(2_000);
}

/**
 * Deletes the workload and waits until its pods are gone. The pods' own graceful deletion would wait out their 30 s
 * (kwok's pod-delete stage deletes a pod at its deletionTimestamp), so once the workload and its Jobs are gone (no
 * controller left to replace a pod) the pods are deleted with a grace period of 0.
 */
async function waitGone(cp: ControlPlane, kind: LaunchKind, name: string): Promise<void> {
  await cp.api("DELETE", `${kind.apiPath}/${name}`, { kind: "DeleteOptions", apiVersion: "v1", propagationPolicy: "Background" });
  await cp.until(
    `${kind.name} ${name}'s pods gone`,
    async () => {
      if ((await cp.api("GET", `${kind.apiPath}/${name}`)).status !== 404) return false;
      if (((await cp.api("GET", `/apis/batch/v1/namespaces/${NS}/jobs?limit=1`)).body?.items ?? []).length > 0) return false;
      const r = await cp.api("GET", `/api/v1/namespaces/${NS}/pods?limit=1`);
      if ((r.body?.items ?? []).length === 0) return true;
      await cp.api("DELETE", `/api/v1/namespaces/${NS}/pods`, { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 0 });
      return false;
    },
    10 * 60_000,
    500,
  );
}

interface Run {
  kind: string;
  variant: Variant;
  rep: number;
  createdS: number;
  boundS: number;
  apiserverCpuMsPerPod: number;
  webhookCpuMsPerPod: number;
  /** The full server's CPU whatever the variant: under `none` and `map-reduced`, what it spends with no call. */
  fullServerCpuMsPerPod: number;
  /** TLS connections the variant's webhook process accepted during the run. */
  webhookConnections: number;
  admission: Delta;
}

async function main(): Promise<void> {
  const kwok = kwokBin();
  const trainer = trainerBins();
  const operator = operatorBin();
  if ("skip" in kwok || "skip" in trainer || !operator)
    throw new Error("bench:launch needs QM_KWOK_BIN, QM_TRAINER_BIN, QM_JOBSET_BIN and QM_OPERATOR_BIN (test/e2e/*/build.sh)");
  const qps = ["--kube-api-qps=500", "--kube-api-burst=1000"];
  const cp = await startControlPlane({ controllers: [JOB_CONTROLLER], controllerManagerArgs: qps, scheduler: true, schedulerArgs: qps });
  const started: Array<{ stop(): Promise<void> }> = [];
  try {
    started.push(await startKwok(cp, kwok.bin, { podParallelism: 16, nodeParallelism: 8 }));
    const nodeCount = Math.ceil((PODS / GPUS_PER_NODE) * 1.1);
    const nodes = Array.from({ length: nodeCount }, (_, i) =>
      clusterNode(H100_NO_MIG, { name: `gpu-${String(i).padStart(4, "0")}`, zone: `zone-${i % 3}`, taints: [], cpu: 192, memoryGi: 2048 }),
    );
    const ready = await kwokNodes(cp, nodes, { concurrency: 16 });
    log(`${nodeCount} kwok nodes Ready in ${(ready.readyMs / 1000).toFixed(1)} s`);
    await installTrainerCrds(cp);
    await installOperatorCrds(cp);
    const ctl: Controller[] = [await startJobSet(cp, trainer.jobset), await startTrainer(cp, trainer.trainer), await startOperator(cp, operator)];
    started.push(...ctl);
    await installDefaultRuntimes(cp);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });

    // Quartermaster: the full server, and (map-reduced) a second one in the reduced mode beside the exported policy.
    await applyOwnManifests(cp);
    const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
    const policyFile = join(cp.dir, "policy.yaml");
    writeFileSync(policyFile, "{}\n");
    const cpuProf = values["webhook-cpu-prof"];
    const full = await webhookProcess({
      kubeconfig: sa.kubeconfig,
      policy: policyFile,
      built: true,
      ...(cpuProf ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${resolve(cpuProf)}`] } : {}),
    });
    await full.start();
    started.push({ stop: () => full.stop() });
    const fullConfigs = await renderWebhookConfigurations(cp, full.port, full.caPem);
    const served: Record<Variant, Served> = {
      none: { configs: [] },
      webhooks: { configs: fullConfigs, wh: full },
      "webhooks-h2": { configs: [] },
      "map-reduced": { configs: [] },
      floor: { configs: [] },
    };
    if (VARIANT_NAMES.includes("floor")) {
      // The floor of any webhook: bare node:https answering every review allowed, registered as Quartermaster's.
      const floor = await floorProcess(full);
      started.push({ stop: () => floor.stop() });
      served.floor = { configs: await renderWebhookConfigurations(cp, floor.port, full.caPem), wh: floor };
    }
    if (VARIANT_NAMES.includes("webhooks-h2")) {
      const h2 = await webhookProcess({ kubeconfig: sa.kubeconfig, policy: policyFile, built: true, args: ["--http2"] });
      await h2.start();
      started.push({ stop: () => h2.stop() });
      served["webhooks-h2"] = { configs: await renderWebhookConfigurations(cp, h2.port, h2.caPem), wh: h2 };
    }
    if (VARIANT_NAMES.includes("map-reduced")) {
      const map = await exportedMap(cp.dir);
      const reduced = await webhookProcess({ kubeconfig: sa.kubeconfig, policy: map.policyFile, built: true });
      await reduced.start();
      started.push({ stop: () => reduced.stop() });
      const configs = await renderWebhookConfigurations(cp, reduced.port, reduced.caPem);
      served["map-reduced"] = { configs: [...withPodMutationConditions(configs, map.reducedConditions), ...map.objects], wh: reduced };
    }
    const all = Object.values(served).flatMap((s) => s.configs);
    const apiserverPid = childPid("kube-apiserver");

    const runs: Run[] = [];
    let serial = 0;
    for (let rep = 0; rep < REPS; rep++) {
      for (const kindName of KIND_NAMES) {
        const kind = KINDS[kindName];
        if (!kind) throw new Error(`unknown kind ${kindName} (${Object.keys(KINDS).join(", ")})`);
        const order = VARIANT_NAMES.map((_, i) => VARIANT_NAMES[(i + rep) % VARIANT_NAMES.length]!);
        for (const variant of order) {
          const tv = performance.now();
          await applyVariant(cp, variant, served, all);
          log(`variant ${variant} in force in ${((performance.now() - tv) / 1000).toFixed(1)} s`);
          const name = `${kindName}-${++serial}`;
          const whPid = served[variant].wh?.pid();
          const fullPid = full.pid()!;
          const cpu0 = { api: cpuSeconds(apiserverPid), wh: whPid ? cpuSeconds(whPid) : 0, full: cpuSeconds(fullPid) };
          const h0 = await admissionHistograms(cp);
          const conn0 = await tlsConnections(served[variant].wh);
          let t0 = NaN;
          const watch = await watchLaunch(cp, kind.selector(name), PODS, () => t0);
          t0 = performance.now();
          const created = await cp.api("POST", kind.apiPath, kind.body(name));
          if (created.status !== 201) {
            watch.stop();
            throw new Error(`${kind.name} ${name} (${variant}): ${created.status} ${JSON.stringify(created.body).slice(0, 500)}`);
          }
          const { createdMs, boundMs } = await watch.done;
          const run: Run = {
            kind: kind.name,
            variant,
            rep,
            createdS: createdMs / 1000,
            boundS: boundMs / 1000,
            apiserverCpuMsPerPod: ((cpuSeconds(apiserverPid) - cpu0.api) * 1000) / PODS,
            webhookCpuMsPerPod: whPid ? ((cpuSeconds(whPid) - cpu0.wh) * 1000) / PODS : 0,
            fullServerCpuMsPerPod: ((cpuSeconds(fullPid) - cpu0.full) * 1000) / PODS,
            webhookConnections: (await tlsConnections(served[variant].wh)) - conn0,
            admission: histogramDelta(h0, await admissionHistograms(cp)),
          };
          runs.push(run);
          log(
            `${kind.name} × ${PODS} (${variant}, rep ${rep + 1}): all created ${run.createdS.toFixed(1)} s, all bound ${run.boundS.toFixed(1)} s; ` +
              `apiserver ${run.apiserverCpuMsPerPod.toFixed(2)} ms/pod, webhook ${run.webhookCpuMsPerPod.toFixed(2)} ms/pod (full server ${run.fullServerCpuMsPerPod.toFixed(2)}), ${run.webhookConnections} new TLS connections; ` +
              `p99 admit step ${p99Of([run.admission], "step:admit").p99}, validate step ${p99Of([run.admission], "step:validate").p99}, ` +
              `pods webhooks mutate ${p99Of([run.admission], POD_MUTATE).p99} (${p99Of([run.admission], POD_MUTATE).count} calls), ` +
              `validate ${p99Of([run.admission], POD_VALIDATE).p99} (${p99Of([run.admission], POD_VALIDATE).count} calls)`,
          );
          const tg = performance.now();
          await waitGone(cp, kind, name);
          log(`${kind.name} ${name} and its pods gone in ${((performance.now() - tg) / 1000).toFixed(1)} s`);
        }
      }
    }
    report(runs);
    if (values.json) writeFileSync(values.json, JSON.stringify({ pods: PODS, reps: REPS, runs }, null, 2));
  } finally {
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    await cp.stop();
  }
}

/** The median, the mean of the middle two for an even count (two reps: their mean, not the lower one). */
function middle(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function report(runs: Run[]): void {
  for (const kindName of KIND_NAMES) {
    const kind = KINDS[kindName]!.name;
    const median = (variant: Variant, f: (r: Run) => number): number => middle(runs.filter((r) => r.kind === kind && r.variant === variant).map(f));
    const baseCreated = median("none", (r) => r.createdS);
    const baseBound = median("none", (r) => r.boundS);
    const rows = VARIANT_NAMES.map((v) => {
      const created = median(v, (r) => r.createdS);
      const bound = median(v, (r) => r.boundS);
      const deltas = runs.filter((r) => r.kind === kind && r.variant === v).map((r) => r.admission);
      return [
        v,
        created.toFixed(1),
        VARIANT_NAMES.includes("none") ? `${(created / baseCreated).toFixed(2)}×` : "-",
        bound.toFixed(1),
        VARIANT_NAMES.includes("none") ? `${(bound / baseBound).toFixed(2)}×` : "-",
        median(v, (r) => r.apiserverCpuMsPerPod).toFixed(2),
        median(v, (r) => r.webhookCpuMsPerPod).toFixed(2),
        String(median(v, (r) => r.webhookConnections)),
        p99Of(deltas, "step:admit").p99,
        p99Of(deltas, "step:validate").p99,
        p99Of(deltas, POD_MUTATE).p99,
        p99Of(deltas, POD_VALIDATE).p99,
      ];
    });
    console.log(`\n${kind} of ${PODS} pods, median of ${REPS} rep(s):`);
    console.log(
      table(
        [
          "variant",
          "all created s",
          "vs none",
          "all bound s",
          "vs none",
          "apiserver ms/pod",
          "webhook ms/pod",
          "new TLS conns",
          "admit step p99",
          "validate step p99",
          "pods mutate webhook p99",
          "pods validate webhook p99",
        ],
        rows,
      ),
    );
  }
}

await main();

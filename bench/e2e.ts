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
 * No kubelet or scheduler: pods stay Pending. Pods are deleted between runs so every run starts from
 * the same etcd size. A warm-up of --warmup pods precedes each measured run and is not counted.
 */
import { readdirSync, readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { Agent, request } from "node:https";
import { parseArgs } from "node:util";
import { startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { applyOwnManifests, createNamespace, installKubeflowCrds, renderWebhookConfigurations, webhookProcess, type WebhookProcess } from "../test/e2e/harness/webhook.js";
import { summarize, table, type Summary } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "1000,10000" },
    clients: { type: "string", default: "10,50" },
    warmup: { type: "string", default: "100" },
    "keep-alive": { type: "boolean", default: false },
    json: { type: "string" },
  },
});
const podCounts = values.pods.split(",").map(Number);
const clientCounts = values.clients.split(",").map(Number);
const warmup = Number(values.warmup);
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

/** One pod create as the admin client; a new TLS connection each time unless `agent` keeps them. */
function createPod(cp: ControlPlane, body: string, agent: Agent | false, dryRun = false): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: cp.apiPort,
        method: "POST",
        path: `/api/v1/namespaces/${NS}/pods${dryRun ? "?dryRun=All" : ""}`,
        ca: cp.tls.ca,
        cert: cp.tls.cert,
        key: cp.tls.key,
        agent,
        headers: { "content-type": "application/json", accept: "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const ms = performance.now() - started;
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 201) return resolve({ ok: false, ms, outfitted: false, error: `${res.statusCode} ${text.slice(0, 200)}` });
          const pod = JSON.parse(text) as Obj;
          resolve({ ok: true, ms, outfitted: pod.metadata?.annotations?.["quartermaster.dev/mutations"] !== undefined });
        });
        res.on("error", (err) => resolve({ ok: false, ms: performance.now() - started, outfitted: false, error: err.message }));
      },
    );
    req.on("error", (err) => resolve({ ok: false, ms: performance.now() - started, outfitted: false, error: err.message }));
    req.end(body);
  });
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

function fetchMetrics(wh: WebhookProcess): Promise<Map<string, ServerSide>> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: wh.metricsPort(), path: "/metrics", method: "GET", agent: false }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => {
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
        resolve(out);
      });
    });
    req.on("error", reject);
    req.end();
  });
}

function serverDelta(before: Map<string, ServerSide>, after: Map<string, ServerSide>): Array<{ webhook: string; count: number; meanMs: number; p99UpToMs: number }> {
  return [...after].map(([webhook, a]) => {
    const b = before.get(webhook) ?? { count: 0, sum: 0, buckets: new Map<number, number>() };
    const count = a.count - b.count;
    const les = [...a.buckets.keys()].sort((x, y) => x - y);
    const p99 = les.find((le) => a.buckets.get(le)! - (b.buckets.get(le) ?? 0) >= 0.99 * count) ?? Infinity;
    return { webhook, count, meanMs: count ? ((a.sum - b.sum) / count) * 1000 : NaN, p99UpToMs: p99 * 1000 };
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) a process has used, from /proc (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** This process's children by command name (the harness spawned etcd and kube-apiserver here). */
function childPid(name: string): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && comm === name.slice(0, 15)) return Number(entry);
    } catch {
      /* gone meanwhile */
    }
  }
  throw new Error(`no child process ${name}`);
}

/** CPU seconds of the load generator, etcd, kube-apiserver and the webhook server. */
function cpuNow(pids: { etcd: number; apiserver: number; webhook: number }): Record<string, number> {
  const self = process.cpuUsage();
  return {
    client: (self.user + self.system) / 1e6,
    etcd: cpuSeconds(pids.etcd),
    apiserver: cpuSeconds(pids.apiserver),
    webhook: cpuSeconds(pids.webhook),
  };
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

const cp = await startControlPlane();
let wh: WebhookProcess | undefined;
try {
  await installKubeflowCrds(cp);
  await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
  await applyOwnManifests(cp);
  const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
  // warn: no line per admission (a production server logs at info; see the README's Benchmarks note).
  wh = await webhookProcess({ kubeconfig: sa.kubeconfig, logLevel: "warn" });
  await wh.start();
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
  const configs = await renderWebhookConfigurations(cp, wh.port, wh.caPem);
  const probeBody = JSON.stringify(trainingPod(jobUid, 0));
  const validated = async (): Promise<number> => (await fetchMetrics(wh!)).get("validate-pods")?.count ?? 0;
  /** The apiserver's view of the configurations settled: a dry-run probe is (not) mutated and (not) validated. */
  const settled = async (registered: boolean): Promise<boolean> => {
    const before = await validated();
    const probe = await createPod(cp, probeBody, false, true);
    return probe.ok && probe.outfitted === registered && (await validated()) > before === registered;
  };
  const register = async (on: boolean): Promise<void> => {
    const r = on
      ? await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }))
      : await cp.kubectl(["delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "quartermaster", "--ignore-not-found"]);
    if (r.code !== 0) throw new Error(r.stderr);
    // Three settled probes in a row, so a lagging apiserver informer cannot flip back.
    let streak = 0;
    await until(`webhooks ${on ? "registered" : "removed"}`, async () => ((streak = (await settled(on)) ? streak + 1 : 0), streak >= 3));
  };

  interface Row {
    scenario: "baseline" | "quartermaster";
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
  }
  const pids = { etcd: childPid("etcd"), apiserver: childPid("kube-apiserver"), webhook: wh.pid()! };
  const rows: Row[] = [];
  for (const pods of podCounts) {
    for (const clients of clientCounts) {
      for (const scenario of ["baseline", "quartermaster"] as const) {
        await register(scenario === "quartermaster");
        if (warmup > 0) await run(cp, jobUid, warmup, clients);
        const before = await fetchMetrics(wh);
        const cpuBefore = cpuNow(pids);
        const { outcomes, seconds } = await run(cp, jobUid, pods, clients);
        const cpuAfter = cpuNow(pids);
        const after = await fetchMetrics(wh);
        const failed = outcomes.filter((o) => !o.ok);
        const row: Row = {
          scenario,
          clients,
          pods,
          latency: summarize(outcomes.map((o) => o.ms)),
          failures: failed.length,
          outfitted: outcomes.filter((o) => o.outfitted).length,
          podsPerSecond: pods / seconds,
          errors: [...new Set(failed.map((o) => o.error ?? ""))].slice(0, 3),
          ...(scenario === "quartermaster" ? { server: serverDelta(before, after) } : {}),
          cpuMsPerPod: Object.fromEntries(Object.keys(cpuAfter).map((k) => [k, ((cpuAfter[k]! - cpuBefore[k]!) * 1000) / pods])),
        };
        rows.push(row);
        console.error(
          `${scenario} ${clients} clients ${pods} pods: p50 ${row.latency.p50.toFixed(1)} p99 ${row.latency.p99.toFixed(1)} ms, ${row.failures} failed, ` +
            `${row.outfitted} outfitted, ${row.podsPerSecond.toFixed(0)} pods/s${row.errors.length ? `; errors: ${row.errors.join(" | ")}` : ""}`,
        );
        await deleteAllPods(cp);
      }
    }
  }
  await register(false);

  const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
  console.log(
    `\nbench/e2e: pod creates through kube-apiserver v1.33.13 + etcd 3.5.21 on loopback, node ${process.version}, ` +
      `${(await import("node:os")).availableParallelism()} CPUs (${cpuModel}), load generator, apiserver, etcd and webhook on the same machine; ` +
      `${values["keep-alive"] ? "connections kept alive" : "a new TLS connection per create (k6 --no-connection-reuse)"}; ${warmup} warm-up pods per run not counted\n`,
  );
  console.log(
    table(
      ["scenario", "clients", "pods", "avg ms", "p50 ms", "p95 ms", "p99 ms", "max ms", "fail %", "outfitted", "pods/s"],
      rows.map((r) => [r.scenario, r.clients, r.pods, r.latency.avg, r.latency.p50, r.latency.p95, r.latency.p99, r.latency.max, (100 * r.failures) / r.pods, r.outfitted, r.podsPerSecond]),
    ),
  );
  const overhead = podCounts.flatMap((pods) =>
    clientCounts.map((clients) => {
      const b = rows.find((r) => r.scenario === "baseline" && r.pods === pods && r.clients === clients)!;
      const q = rows.find((r) => r.scenario === "quartermaster" && r.pods === pods && r.clients === clients)!;
      return { pods, clients, avg: q.latency.avg - b.latency.avg, p50: q.latency.p50 - b.latency.p50, p95: q.latency.p95 - b.latency.p95, p99: q.latency.p99 - b.latency.p99, failures: q.failures + b.failures, server: q.server! };
    }),
  );
  console.log("\nOverhead of Quartermaster's webhooks (with minus without, same run):\n");
  console.log(
    table(
      ["clients", "pods", "Δavg ms", "Δp50 ms", "Δp95 ms", "Δp99 ms", "failures", "webhook mean ms (mutate/validate)", "webhook p99 ≤ ms (mutate/validate)"],
      overhead.map((o) => {
        const m = o.server.find((s) => s.webhook === "mutate-pods");
        const v = o.server.find((s) => s.webhook === "validate-pods");
        return [o.clients, o.pods, o.avg, o.p50, o.p95, o.p99, o.failures, `${m?.meanMs.toFixed(2)} / ${v?.meanMs.toFixed(2)}`, `${m?.p99UpToMs} / ${v?.p99UpToMs}`];
      }),
    ),
  );
  console.log("\nCPU milliseconds per pod create, by process (from /proc; 10 ms ticks, averaged over the run):\n");
  console.log(
    table(
      ["scenario", "clients", "pods", "load generator", "etcd", "kube-apiserver", "webhook", "total"],
      rows.map((r) => {
        const c = r.cpuMsPerPod;
        return [r.scenario, r.clients, r.pods, c.client!, c.etcd!, c.apiserver!, c.webhook!, c.client! + c.etcd! + c.apiserver! + c.webhook!];
      }),
    ),
  );
  const at50 = overhead.filter((o) => o.clients === 50);
  if (at50.length) {
    const worst = Math.max(...at50.map((o) => o.p99));
    const fails = rows.reduce((a, r) => a + r.failures, 0);
    console.log(`\ntarget: p99 overhead <= 10 ms at 50 clients: worst ${worst.toFixed(1)} ms ${worst <= 10 ? "(met)" : "(NOT met)"}; failures: ${fails} ${fails === 0 ? "(met)" : "(NOT met)"}`);
  }
  const outfittedRight = rows.every((r) => r.outfitted === (r.scenario === "quartermaster" ? r.pods - r.failures : 0));
  console.log(`every pod outfitted exactly when the webhooks were registered: ${outfittedRight ? "yes" : "NO"}`);
  const result = { bench: "e2e", keepAlive: values["keep-alive"], warmup, rows, overhead };
  if (values.json) (await import("node:fs")).writeFileSync(values.json, JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result));
} finally {
  await wh?.stop();
  await cp.stop();
}

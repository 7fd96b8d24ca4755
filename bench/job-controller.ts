/**
 * bench/job-controller: how soon after a Caffe2Job is created its pods and Services exist, with Quartermaster's
 * resident job controller (`reconcile --watch`, in process, as the reconciler's ServiceAccount) against a real
 * kube-apiserver; the target is p99 under 2 s.
 *
 *   npm run bench:job-controller [-- --jobs 50 --replicas 2 --rate 10]
 *
 * Needs QM_K8S_BIN_DIR (test/e2e/controlplane/build.sh). Jobs are created at --rate per second; a watch on
 * pods and Services (ADDED events) timestamps when each appears; a job's latency is from just before its
 * POST to the last of its 2 × replicas objects seen. The baseline, measured in the same run through the same
 * watch: the bench itself POSTs the same pods and Services (in parallel) right after creating a job that no
 * controller runs (a kind marked `operator`) — the apiserver-and-watch floor the controller adds to. Prints
 * both summaries and their ratio.
 */
import { parseArgs } from "node:util";
import { pino } from "pino";
import { startWatch } from "../src/run/watch.js";
import { defaultPolicy } from "../src/policy/load.js";
import type { ControlPlane } from "../test/e2e/harness/controlplane.js";
import { reconcilerCluster } from "../test/e2e/harness/webhook.js";
import { summarize, table, type Summary } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "50" },
    replicas: { type: "string", default: "2" },
    rate: { type: "string", default: "10" },
  },
});
const JOBS = Number(values.jobs);
const REPLICAS = Number(values.replicas);
const RATE = Number(values.rate);
const NS = "bench-jc";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Obj = Record<string, any>;

/** First-seen times (performance.now()) of pods and Services by name, from a watch. */
async function watchSeen(cp: ControlPlane): Promise<{ seen: Map<string, number>; stop(): void }> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  const watch = new k8s.Watch(kc);
  const seen = new Map<string, number>();
  const reqs = await Promise.all(
    ["pods", "services"].map((r) =>
      watch.watch(
        `/api/v1/namespaces/${NS}/${r}`,
        {},
        (type: string, o: Obj) => {
          if (type === "ADDED" && !seen.has(`${r}/${o.metadata.name}`)) seen.set(`${r}/${o.metadata.name}`, performance.now());
        },
        () => undefined,
      ),
    ),
  );
  return { seen, stop: () => reqs.forEach((r) => r.abort()) };
}

const body = (name: string, apiVersion: string, kind: string): Obj => ({
  apiVersion,
  kind,
  metadata: { name },
  spec: { RuntimeID: "r", replicaSpecs: { replicas: REPLICAS, template: { spec: { containers: [{ name: "caffe2", image: "caffe2:1" }] } } } },
});

async function main(): Promise<void> {
  const { cp, sa } = await reconcilerCluster(NS);
  const { seen, stop } = await watchSeen(cp);
  const log = pino({ level: "warn" });
  const watcher = await startWatch({
    kubeconfig: sa.kubeconfig,
    policy: defaultPolicy(),
    log,
    namespace: "quartermaster",
    holder: "bench",
    leaseSeconds: 15,
    resyncSeconds: 300,
  });
  const wait = async (names: string[], from: number): Promise<number> => {
    const deadline = performance.now() + 30_000;
    while (names.some((n) => !seen.has(n))) {
      if (performance.now() > deadline) throw new Error(`not all of ${names.join(", ")} appeared within 30 s`);
      await sleep(5);
    }
    return Math.max(...names.map((n) => seen.get(n)!)) - from;
  };
  const objects = (prefix: string): string[] =>
    Array.from({ length: REPLICAS }, (_, i) => [`pods/${prefix}-worker-${i}`, `services/${prefix}-worker-${i}`]).flat();

  try {
    // Baseline: a TFJob-shaped stand-in nobody controls (the TFJob kind is the operator's), objects POSTed by the bench.
    const baseline: Promise<number>[] = [];
    for (let i = 0; i < JOBS; i++) {
      const name = `base-${i}`;
      const t0 = performance.now();
      const job = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs`, {
        apiVersion: "kubeflow.org/v1",
        kind: "TFJob",
        metadata: { name },
        spec: { tfReplicaSpecs: {} },
      });
      if (job.status !== 201) throw new Error(JSON.stringify(job.body));
      const owner = [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name, uid: job.body.metadata.uid, controller: true, blockOwnerDeletion: true }];
      await Promise.all(
        Array.from({ length: REPLICAS }, (_, r) => [
          cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: `${NS}-${name}-worker-${r}`, ownerReferences: owner, labels: { b: name } },
            spec: { containers: [{ name: "c", image: "i" }] },
          }),
          cp.api("POST", `/api/v1/namespaces/${NS}/services`, {
            apiVersion: "v1",
            kind: "Service",
            metadata: { name: `${NS}-${name}-worker-${r}`, ownerReferences: owner },
            spec: { clusterIP: "None", selector: { b: name }, ports: [{ port: 2222 }] },
          }),
        ]).flat(),
      );
      baseline.push(wait(objects(`${NS}-${name}`), t0));
      await sleep(1000 / RATE);
    }
    const base = summarize(await Promise.all(baseline));

    const measured: Promise<number>[] = [];
    for (let i = 0; i < JOBS; i++) {
      const name = `job-${i}`;
      const t0 = performance.now();
      const job = await cp.api("POST", `/apis/kubeflow.org/v1alpha1/namespaces/${NS}/caffe2jobs`, body(name, "kubeflow.org/v1alpha1", "Caffe2Job"));
      if (job.status !== 201) throw new Error(JSON.stringify(job.body));
      measured.push(wait(objects(`${NS}-${name}`), t0));
      await sleep(1000 / RATE);
    }
    const ctl = summarize(await Promise.all(measured));

    const row = (label: string, s: Summary) => [label, s.count, s.avg.toFixed(0), s.p50.toFixed(0), s.p95.toFixed(0), s.p99.toFixed(0), s.max.toFixed(0)];
    console.log(`\nCaffe2Job → its ${REPLICAS} pods and ${REPLICAS} Services exist (ms), ${JOBS} jobs at ${RATE}/s\n`);
    console.log(
      table(
        ["", "jobs", "avg", "p50", "p95", "p99", "max"],
        [row("baseline: the client POSTs them itself", base), row("Quartermaster job controller (--watch)", ctl)],
      ),
    );
    console.log(`\nratio p99 controller / baseline: ${(ctl.p99 / base.p99).toFixed(2)}; target p99 < 2000 ms: ${ctl.p99 < 2000 ? "met" : "NOT met"}`);
    console.log(`controller: ${watcher.stats.syncs} syncs, ${watcher.stats.retries} retries, ${watcher.stats.passes} full passes`);
  } finally {
    stop();
    await watcher.stop();
    await cp.stop();
  }
}

await main();

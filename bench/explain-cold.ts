/**
 * `quartermaster explain` cold from the API (issue 49: ≤ 5 s): a real kube-apiserver holding `nodes` GPU Node
 * objects and `pods` pods, of which one PyTorchJob's `jobPods` are pending (no scheduler: nothing binds them);
 * `explain pytorchjob/<job> -o json` timed as a new process (`node --import tsx src/cli/main.ts`, what a user waits
 * for, start-up included) and through the CLI's entry in this process (the reads and the verdict alone), each the
 * median of 5. The baseline is `quartermaster version` as a new process, measured in the same run: the start-up
 * every command pays.
 *
 *   QM_K8S_BIN_DIR=... node --import tsx bench/explain-cold.ts [--nodes 1000] [--pods 10000] [--job-pods 1000]
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runCli } from "../src/cli/commands.js";
import { startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { installKubeflowCrds, ROOT } from "../test/e2e/harness/webhook.js";

const { values } = parseArgs({
  options: { nodes: { type: "string", default: "1000" }, pods: { type: "string", default: "10000" }, "job-pods": { type: "string", default: "1000" } },
});
const NODES = Number(values.nodes);
const PODS = Number(values.pods);
const JOB_PODS = Number(values["job-pods"]);
const NS = "bench-explain";
const GPU = "nvidia.com/gpu";

async function parallel(n: number, width: number, f: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await f(next++);
    }),
  );
}

async function must(cp: ControlPlane, method: string, path: string, body?: unknown): Promise<any> {
  const r = await cp.api(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return r.body;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const cp = await startControlPlane({});
try {
  await installKubeflowCrds(cp);
  await must(cp, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
  const t0 = performance.now();
  await parallel(NODES, 16, async (i) => {
    const name = `gpu-${i}`;
    await must(cp, "POST", "/api/v1/nodes", {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name, labels: { "kubernetes.io/hostname": name, "nvidia.com/gpu.product": i % 2 ? "A100-SXM4-80GB" : "H100-SXM5-80GB" } },
    });
    await cp.api(
      "PATCH",
      `/api/v1/nodes/${name}/status`,
      { status: { allocatable: { [GPU]: "8", cpu: "96", pods: "110" }, capacity: { [GPU]: "8", cpu: "96", pods: "110" } } },
      { "content-type": "application/merge-patch+json" },
    );
  });
  const job = await must(cp, "POST", `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`, {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llm" },
    spec: {
      pytorchReplicaSpecs: {
        Worker: {
          replicas: JOB_PODS,
          template: { spec: { containers: [{ name: "pytorch", image: "registry.invalid/train:1", resources: { limits: { [GPU]: "16" } } }] } },
        },
      },
    },
  });
  await parallel(PODS, 16, async (i) => {
    const mine = i < JOB_PODS;
    const jobName = mine ? "llm" : `other-${Math.floor(i / 8)}`;
    await must(cp, "POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `${jobName}-worker-${i}`,
        labels: { "training.kubeflow.org/job-name": jobName, "training.kubeflow.org/replica-type": "worker" },
        ...(mine ? { ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "llm", uid: job.metadata.uid, controller: true }] } : {}),
      },
      spec: { containers: [{ name: "pytorch", image: "registry.invalid/train:1", resources: { limits: { [GPU]: mine ? "16" : "1" } } }] },
    });
  });
  console.log(`explain-cold: ${NODES} nodes and ${PODS} pods (${JOB_PODS} of the job) created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const args = ["explain", "pytorchjob/llm", "-n", NS, "-o", "json", "--kubeconfig", cp.kubeconfig];
  const cliMain = join(ROOT, "src/cli/main.ts");
  const proc = (a: string[]): { ms: number; out: string } => {
    const t = performance.now();
    const r = spawnSync(process.execPath, ["--import", "tsx", cliMain, ...a], { cwd: ROOT, encoding: "utf8" });
    return { ms: performance.now() - t, out: r.stdout };
  };
  const base: number[] = [];
  const cold: number[] = [];
  const inProc: number[] = [];
  let reason = "";
  for (let i = 0; i < 5; i++) {
    base.push(proc(["version"]).ms);
    const r = proc(args);
    cold.push(r.ms);
    reason = (JSON.parse(r.out) as { reason: string }).reason;
    const out: string[] = [];
    const t = performance.now();
    await runCli(args, { stdout: (l) => out.push(l), stderr: () => undefined, cwd: ROOT, shutdown: new Promise<string>(() => undefined) });
    inProc.push(performance.now() - t);
  }
  const b = median(base);
  console.log(`baseline: quartermaster version, new process          ${b.toFixed(0).padStart(6)} ms`);
  console.log(
    `explain cold, new process (${reason})             ${median(cold).toFixed(0).padStart(6)} ms  ×${(median(cold) / b).toFixed(1)} baseline  (min ${Math.min(...cold).toFixed(0)}, max ${Math.max(...cold).toFixed(0)})`,
  );
  console.log(
    `explain, reads + verdict in process                ${median(inProc).toFixed(0).padStart(6)} ms  ×${(median(inProc) / b).toFixed(1)} baseline  (min ${Math.min(...inProc).toFixed(0)}, max ${Math.max(...inProc).toFixed(0)})`,
  );
  console.log(`issue 49: explain cold ≤ 5,000 ms at ${PODS} pods: ${median(cold) <= 5000 ? "yes" : "NO"}`);
} finally {
  await cp.stop();
}

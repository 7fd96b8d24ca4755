/**
 * `explain`'s verdict (src/explain/verdict.ts), the computing part, at three sizes, each the median of 7 runs:
 *
 * - baseline: one job of 1,000 pending pods of 8 GPUs against a first page of 500 nodes with 4 free each, as the
 *   CLI reads it (every pod judged through every scheduler filter);
 * - caches, one job: the resident reconciler's caches holding `pods` pods (jobs of 8 pods, every second job's pods
 *   bound and Running, the others pending) on `nodes` nodes; one job's verdict as the reconciler would answer it:
 *   each node's free GPUs counted from every cached pod (src/explain/cached.ts nodeEntriesFromCaches), the job's
 *   evidence, its verdict. Issue 49 asks ≤ 2 s at 50,000 pods;
 * - caches, a tick: every job's verdict over the same caches with one shared memo (src/run/blocked.ts's tick);
 * - one job of `pods` pending pods against `nodes` nodes (the largest job `explain` could be asked about).
 *
 * Each is printed with its ratio to the baseline measured in the same run.
 *
 *   node --import tsx bench/explain.ts [pods (50000)] [nodes (1000)]
 */
import { cachedEvidence, nodeEntriesFromCaches } from "../src/explain/cached.js";
import { knownKinds } from "../src/explain/kinds.js";
import { verdictMemo } from "../src/explain/pods.js";
import { explainJob } from "../src/explain/verdict.js";
import type { KubeObject } from "../src/core/kube.js";
import { defaultPolicy } from "../src/policy/load.js";
import { ago, evidence, ledgerNode, node, NOW, pod } from "../test/fixtures/explain.js";

const PODS = Number(process.argv[2] ?? 50_000);
const NODES = Number(process.argv[3] ?? 1000);
const PER_JOB = 8;

function median(f: () => string): { ms: number; min: number; max: number; reason: string } {
  const times: number[] = [];
  let reason = "";
  for (let i = 0; i < 7; i++) {
    const t = process.hrtime.bigint();
    reason = f();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { ms: times[3]!, min: times[0]!, max: times[6]!, reason };
}

// Baseline: 1,000 pending pods × 500 nodes, as before.
const baseNodes = Array.from({ length: 500 }, (_, i) => node(`gpu-${i}`));
const base = evidence({
  nodes: baseNodes,
  pods: Array.from({ length: 1000 }, (_, i) => pod({ name: `llm-worker-${i}`, phase: "Pending" })),
  ledger: { generatedAt: ago(30), nodes: baseNodes.map((_, i) => ledgerNode(`gpu-${i}`, 4)) },
});
const baseline = median(() => explainJob(base, NOW).reason);

// The caches: PODS pods in jobs of PER_JOB; every second job Running (one GPU a pod, round-robin over the nodes).
const policy = defaultPolicy();
const kind = knownKinds(policy).find((k) => k.kind === "PyTorchJob")!;
const settings = { gpu: policy.gpu, acceleratorLabel: policy.accelerator.nodeLabel, graceSeconds: 120 };
const nodes = Array.from({ length: NODES }, (_, i) => node(`gpu-${i}`));
const jobs: Array<{ job: KubeObject; pods: KubeObject[] }> = [];
const allPods: KubeObject[] = [];
for (let j = 0; j * PER_JOB < PODS; j++) {
  const name = `job-${j}`;
  const running = j % 2 === 0;
  const pods = Array.from({ length: Math.min(PER_JOB, PODS - j * PER_JOB) }, (_, i) => {
    const p = pod({ name: `${name}-worker-${i}`, gpus: 1, ...(running ? { node: `gpu-${(j * PER_JOB + i) % NODES}` } : { phase: "Pending" }) });
    (p.metadata as { labels: Record<string, string> }).labels["training.kubeflow.org/job-name"] = name;
    return p;
  });
  const job: KubeObject = {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name, namespace: "team-a", uid: `uid-${name}`, creationTimestamp: ago(600) },
    spec: {
      pytorchReplicaSpecs: {
        Worker: {
          replicas: pods.length,
          template: { spec: { containers: [{ name: "pytorch", image: "trainer:1", resources: { limits: { "nvidia.com/gpu": "1" } } }] } },
        },
      },
    },
    status: { conditions: [{ type: "Created", status: "True", lastTransitionTime: ago(590) }] },
  };
  jobs.push({ job, pods });
  allPods.push(...pods);
}
const asked = jobs[1] ?? jobs[0]!;
const oneJob = median(() => {
  const ledger = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, allPods, policy.gpu) };
  return explainJob(cachedEvidence({ kind, ...asked }, nodes, ledger, settings), NOW).reason;
});
const tick = median(() => {
  const ledger = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, allPods, policy.gpu) };
  const memo = verdictMemo();
  let blocked = 0;
  for (const j of jobs) if (explainJob(cachedEvidence({ kind, ...j }, nodes, ledger, settings), NOW, memo).reason !== "running") blocked++;
  return `${blocked} of ${jobs.length} jobs held back`;
});

// One job of PODS pending pods against NODES nodes with 4 free each.
const big = evidence({
  nodes,
  pods: Array.from({ length: PODS }, (_, i) => pod({ name: `llm-worker-${i}`, phase: "Pending" })),
  ledger: { generatedAt: ago(30), nodes: nodes.map((_, i) => ledgerNode(`gpu-${i}`, 4)) },
});
const largest = median(() => explainJob(big, NOW).reason);

const row = (what: string, r: ReturnType<typeof median>): string =>
  `${what.padEnd(60)} ${r.ms.toFixed(1).padStart(8)} ms (min ${r.min.toFixed(1)}, max ${r.max.toFixed(1)})  ×${(r.ms / baseline.ms).toFixed(1)} baseline  → ${r.reason}`;
console.log(row("baseline: 1 job, 1,000 pending pods × 500 nodes", baseline));
console.log(row(`caches of ${PODS} pods / ${jobs.length} jobs × ${NODES} nodes: one job's verdict`, oneJob));
console.log(row(`caches of ${PODS} pods / ${jobs.length} jobs × ${NODES} nodes: every job (a tick)`, tick));
console.log(row(`1 job, ${PODS} pending pods × ${NODES} nodes`, largest));
console.log(`issue 49: one verdict from the caches at ${PODS} pods ≤ 2,000 ms: ${oneJob.ms <= 2000 ? "yes" : "NO"} (${oneJob.ms.toFixed(1)} ms)`);

/**
 * bench/reconcile: the reconciler at scale.
 *
 * 1. Planner: `planPass` (claims, services, cleanup, the device ledger, its shards and checksums) over a
 *    synthetic snapshot of 100,000 pods, 5,000 nodes (8 GPUs each, with Leases) and 2,000 jobs (a tenth
 *    finished, some orphans to adopt, a stored ledger from the previous pass), CPU time per plan (target < 1 s),
 *    against a baseline measured in the same run: one JSON.stringify of the same snapshot (touching every
 *    object once).
 * 2. Pass (`--pass`, needs QM_K8S_BIN_DIR): a real kube-apiserver on loopback with 10,000 pods (and 200 jobs,
 *    500 nodes); wall time and API calls of one `runPass`, then of a second (converged) pass, against a bare
 *    paged LIST of all pods through the same client as the baseline.
 *
 *   npm run bench:reconcile [-- --runs 5] [-- --pass [--pods 10000]]
 */
import { parseArgs } from "node:util";
import type { KubeObject } from "../src/core/kube.js";
import { connectCluster } from "../src/kube/cluster.js";
import { runPass } from "../src/run/pass.js";
import { silentLogger } from "../src/log.js";
import { defaultPolicy } from "../src/policy/load.js";
import { planPass } from "../src/reconcile/plan.js";
import { SYNTHETIC_NOW, SYNTHETIC_SCOPE, syntheticSnapshot } from "./lib/synthetic-cluster.js";

const { values } = parseArgs({
  options: { runs: { type: "string", default: "5" }, pass: { type: "boolean", default: false }, pods: { type: "string", default: "10000" } },
});
const policy = defaultPolicy();
const NOW = SYNTHETIC_NOW;

function cpuMs(fn: () => void): number {
  const start = process.cpuUsage();
  fn();
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function plannerBench(): void {
  const runs = Number(values.runs);
  const t0 = performance.now();
  const snap = syntheticSnapshot(100_000, 5_000, 2_000, policy);
  console.log(
    `bench/reconcile planner: ${snap.pods.length} pods, ${snap.services.length} services, ${snap.nodes.length} nodes, ${snap.jobs.length} jobs (built in ${((performance.now() - t0) / 1000).toFixed(1)} s), node ${process.version}`,
  );
  let plan = planPass(snap, NOW, policy, SYNTHETIC_SCOPE); // warm-up
  const ours: number[] = [];
  const base: number[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(cpuMs(() => (plan = planPass(snap, NOW, policy, SYNTHETIC_SCOPE))));
    base.push(cpuMs(() => void JSON.stringify([snap.jobs, snap.pods, snap.services, snap.nodes, snap.nodeLeases])));
  }
  const writes = plan.ledgerWrites.filter((w) => w.verb !== "delete");
  const biggest = Math.max(...writes.map((w) => ("text" in w ? w.text.length : 0)));
  console.log(
    `plan: ${plan.claims.length} claims, ${plan.creates.length} services to create, ${plan.actions.length} deletions (+${plan.deferred.length} deferred), ledger ${plan.ledger.nodes.length} nodes in ${plan.ledgerWrites.length} writes, biggest shard ${(biggest / 1024).toFixed(0)} KiB`,
  );
  console.log(`planPass CPU          median ${median(ours).toFixed(0)} ms  (runs: ${ours.map((x) => x.toFixed(0)).join(", ")})   target < 1000 ms`);
  console.log(`baseline JSON.stringify median ${median(base).toFixed(0)} ms`);
  console.log(`ratio planPass / baseline: ${(median(ours) / median(base)).toFixed(2)}`);
  console.log(`heap used ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB, RSS ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
}

async function passBench(): Promise<void> {
  const { startControlPlane } = await import("../test/e2e/harness/controlplane.js");
  const pods = Number(values.pods);
  const jobs = Math.max(1, Math.floor(pods / 50));
  const nodes = Math.max(1, Math.floor(pods / 20));
  const cp = await startControlPlane({});
  try {
    const { createNamespace, installKubeflowCrds } = await import("../test/e2e/harness/webhook.js");
    await installKubeflowCrds(cp);
    await createNamespace(cp, "quartermaster");
    const snap = syntheticSnapshot(pods, nodes, jobs, policy);
    const t0 = performance.now();
    const namespaces = new Set(snap.jobs.map((j) => String((j.job.metadata as { namespace: string }).namespace)));
    for (const ns of namespaces) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    // Create with a few concurrent writers; uids come from the server, so ownerReferences point at real jobs.
    const jobUid = new Map<string, string>();
    await pool(snap.jobs, 16, async ({ job }) => {
      const m = job.metadata as { name: string; namespace: string };
      const { status, ...body } = job as KubeObject & { status?: unknown };
      const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${m.namespace}/tfjobs`, { ...body, metadata: { name: m.name } });
      jobUid.set(`${m.namespace}/${m.name}`, r.body.metadata.uid);
      if (status)
        await cp.api(
          "PATCH",
          `/apis/kubeflow.org/v1/namespaces/${m.namespace}/tfjobs/${m.name}/status`,
          { status },
          { "content-type": "application/merge-patch+json" },
        );
    });
    await pool(snap.nodes, 16, async (n) => {
      const name = String((n.metadata as { name: string }).name);
      await cp.api("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name } });
      await cp.api("PATCH", `/api/v1/nodes/${name}/status`, { status: n.status }, { "content-type": "application/merge-patch+json" });
      await cp.api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name },
        spec: { holderIdentity: name, renewTime: new Date(Date.now() + 3_600_000).toISOString().replace("Z", "000Z") },
      });
    });
    await pool(snap.pods, 32, async (p) => {
      const m = p.metadata as { name: string; namespace: string; labels: Record<string, string>; ownerReferences?: Array<{ name: string; uid: string }> };
      const owners = m.ownerReferences?.map((o) => ({ ...o, uid: jobUid.get(`${m.namespace}/${o.name}`) }));
      await cp.api("POST", `/api/v1/namespaces/${m.namespace}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: m.name, labels: m.labels, ...(owners ? { ownerReferences: owners } : {}) },
        spec: { ...(p.spec as object), containers: [{ name: "tensorflow", image: "tf", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
      });
    });
    console.log(`bench/reconcile pass: ${pods} pods, ${jobs} jobs, ${nodes} nodes created in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

    const cluster = async () => connectCluster(cp.kubeconfig);
    const base = await cluster();
    const b0 = performance.now();
    const listed = await base.listPods();
    const baseMs = performance.now() - b0;
    const results: string[] = [];
    // Passes until one plans nothing: the first adopts, creates Services and starts the cleanup; the cleanup
    // continues reconciler.maxDeletionsPerPass at a time; the last is the converged steady state.
    for (let n = 1; n <= 40; n++) {
      const c = await cluster();
      const t = performance.now();
      const report = await runPass({ cluster: c, policy, log: silentLogger(), now: () => new Date(), dryRun: false, namespace: "quartermaster" });
      const ms = performance.now() - t;
      const planned = report.plan.claims.length + report.plan.creates.length + report.plan.actions.length;
      const label =
        n === 1 ? "pass 1 (adopt, services, cleanup, ledger)" : planned === 0 ? `pass ${n} (converged: ledger only)` : `pass ${n} (cleanup continues)`;
      if (n <= 2 || planned === 0)
        results.push(
          `${label.padEnd(44)} wall ${(ms / 1000).toFixed(2)} s   API calls ${String(report.apiCalls).padStart(5)}   applied ${String(report.applied.length).padStart(5)}   failed ${report.failed.length}   ledger writes ${report.ledger?.written.length ?? 0}   ratio vs LIST ${(ms / baseMs).toFixed(1)}`,
        );
      if (planned === 0) break;
    }
    console.log(`baseline: paged LIST of ${listed.length} pods                  wall ${(baseMs / 1000).toFixed(2)} s   API calls ${base.calls}`);
    for (const r of results) console.log(r);
  } finally {
    await cp.stop();
  }
}

async function pool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

if (values.pass) await passBench();
else plannerBench();

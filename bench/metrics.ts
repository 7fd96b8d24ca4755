/**
 * bench/metrics: the cost of the device ledger's series on a webhook scrape (issue 20, Metrics).
 *
 *   node --import tsx bench/metrics.ts [--namespaces 100,1000,5000,20000] [--scrapes 50]
 *
 * For ledgers of n namespaces (two GPU resources each), prints the `/metrics` text size and the time to
 * collect it (median of --scrapes) with the namespace label cap (500, the code's) and without it, and the
 * ratio to the baseline measured in the same run: the admission metrics alone, no ledger.
 */
import { parseArgs } from "node:util";
import type { LedgerIndex } from "../src/ledger/shards.js";
import { createAdmissionMetrics } from "../src/server/metrics.js";
import { NAMESPACE_LABEL_CAP, registerLedgerMetrics } from "../src/reconcile/metrics.js";

const { values } = parseArgs({ options: { namespaces: { type: "string" }, scrapes: { type: "string" } } });
const sizes = (values.namespaces ?? "100,1000,5000,20000").split(",").map(Number);
const scrapes = Number(values.scrapes ?? 50);

function index(n: number): LedgerIndex {
  const namespaces: LedgerIndex["namespaces"] = {};
  for (let i = 0; i < n; i++)
    namespaces[`team-${i}`] = { "amd.com/gpu": { allocated: i % 3, gpuSeconds: i * 10 }, "nvidia.com/gpu": { allocated: i % 5, gpuSeconds: i * 100 } };
  const totals = { allocatable: 1000, allocated: 500, capacity: 1000, free: 500, unavailable: 0 };
  return {
    counts: { jobs: n, nodes: 100, pendingGpuPods: 3, podsHoldingDevices: n, staleNodes: 1 },
    generatedAt: new Date().toISOString(),
    namespaces,
    shards: [],
    totals: { "amd.com/gpu": totals, "nvidia.com/gpu": totals },
    version: 1,
  };
}

async function measure(build: () => { metrics(): Promise<string> }): Promise<{ bytes: number; ms: number }> {
  const r = build();
  let bytes = 0;
  const times: number[] = [];
  for (let i = 0; i < scrapes; i++) {
    const t = performance.now();
    bytes = (await r.metrics()).length;
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { bytes, ms: times[Math.floor(times.length / 2)]! };
}

const base = await measure(() => createAdmissionMetrics({ timeoutSeconds: 5 }).registry);
console.log(`baseline (admission metrics, no ledger): ${base.bytes} B, ${base.ms.toFixed(3)} ms per scrape (median of ${scrapes})`);
console.log("namespaces  cap  bytes      ms      x baseline time");
for (const n of sizes) {
  const idx = index(n);
  for (const cap of [NAMESPACE_LABEL_CAP, Infinity]) {
    const m = await measure(() => {
      const a = createAdmissionMetrics({ timeoutSeconds: 5 });
      registerLedgerMetrics(a.registry, () => ({ index: idx, readAt: Date.now() }), { namespaceCap: cap });
      return a.registry;
    });
    console.log(
      `${String(n).padStart(10)}  ${String(cap === Infinity ? "none" : cap).padStart(4)}  ${String(m.bytes).padStart(9)}  ${m.ms.toFixed(3).padStart(7)}  ${(m.ms / base.ms).toFixed(1)}`,
    );
  }
}

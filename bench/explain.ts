/**
 * `explain`'s verdict (src/explain/verdict.ts) on a large job, as the CLI reads it: 1,000 pending pods of 8 GPUs
 * against a first page of 500 nodes with 4 free each (every pod judged through every scheduler filter). Prints the
 * median of 7 runs; issue 49 asks ≤ 5 s cold from the API for the whole command, of which this is the computing part.
 *
 *   node --import tsx bench/explain.ts [pods] [nodes]
 */
import { explainJob } from "../src/explain/verdict.js";
import { ago, evidence, ledgerNode, node, NOW, pod } from "../test/fixtures/explain.js";

const pods = Number(process.argv[2] ?? 1000);
const nodes = Number(process.argv[3] ?? 500);
const nodeList = Array.from({ length: nodes }, (_, i) => node(`gpu-${i}`));
const ev = evidence({
  nodes: nodeList,
  pods: Array.from({ length: pods }, (_, i) => pod({ name: `llm-worker-${i}`, phase: "Pending" })),
  ledger: { generatedAt: ago(30), nodes: nodeList.map((_, i) => ledgerNode(`gpu-${i}`, 4)) },
});
const times: number[] = [];
let reason = "";
for (let i = 0; i < 7; i++) {
  const t = process.hrtime.bigint();
  reason = explainJob(ev, NOW).reason;
  times.push(Number(process.hrtime.bigint() - t) / 1e6);
}
times.sort((a, b) => a - b);
console.log(
  `explain verdict: ${pods} pods × ${nodes} nodes → ${reason}; median ${times[3]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[6]!.toFixed(1)})`,
);

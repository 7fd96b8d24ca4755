/**
 * bench/mutate: the pure mutation pipeline plus the patch diff on a realistic ~8 KB training pod (a
 * PyTorchJob worker with its job known), per pod, against a naive baseline measured in the same run:
 * deep-copy the pod and diff the copy (what a clone-then-mutate pipeline pays before mutating anything).
 *
 *   npm run bench:mutate [-- --iterations 20000]
 */
import { parseArgs } from "node:util";
import { createPatch, diff } from "../src/admission/patch.js";
import type { KubeObject } from "../src/core/kube.js";
import { mutatePod, type Pod } from "../src/mutate/index.js";
import { defaultPolicy } from "../src/policy/load.js";
import { DEFAULT_JOB_KINDS } from "../src/policy/schema.js";
import type { JobKind } from "../src/policy/types.js";
import { podReview } from "./lib/pod-review.js";

const { values } = parseArgs({ options: { iterations: { type: "string", default: "20000" } } });
const iterations = Number(values.iterations);
const policy = defaultPolicy();
const review = podReview() as { request: { object: KubeObject } };
const pod = review.request.object as Pod;
const job: KubeObject = {
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llm-pretrain", namespace: "team-nlp" },
  spec: {
    nprocPerNode: "8",
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", ports: [{ name: "pytorchjob-port", containerPort: 23456 }] }] } } },
      Worker: { replicas: 7, template: { spec: { containers: [{ name: "pytorch", ports: [{ name: "pytorchjob-port", containerPort: 23456 }] }] } } },
    },
  },
};
const kind = (DEFAULT_JOB_KINDS as JobKind[]).find((k) => k.kind === "PyTorchJob")!;
const ctx = { policy, namespace: "team-nlp", topology: { job, kind, replicaType: "Worker", index: 3 } };

function run(name: string, fn: () => number): { name: string; p50: number; p99: number; mean: number } {
  for (let i = 0; i < Math.min(2000, iterations); i++) fn(); // warm-up
  const samples = new Float64Array(iterations);
  let sink = 0;
  for (let i = 0; i < iterations; i++) {
    const t = process.hrtime.bigint();
    sink += fn();
    samples[i] = Number(process.hrtime.bigint() - t) / 1e6;
  }
  if (sink < 0) console.log(sink);
  samples.sort();
  const mean = samples.reduce((a, b) => a + b, 0) / iterations;
  return { name, p50: samples[Math.floor(iterations * 0.5)]!, p99: samples[Math.floor(iterations * 0.99)]!, mean };
}

const ours = run("quartermaster: mutatePod + diff", () => {
  const out = mutatePod(pod, ctx);
  return diff(pod, out.pod).ops;
});
const baseline = run("baseline: structuredClone + diff", () => diff(pod, structuredClone(pod)).ops);

const ops = createPatch(pod, mutatePod(pod, ctx).pod);
console.log(
  `\nbench/mutate: ${(JSON.stringify(pod).length / 1024).toFixed(1)} KB pod, ${iterations} iterations, ${ops.length} patch operations, node ${process.version}`,
);
for (const r of [ours, baseline]) console.log(`${r.name.padEnd(36)} p50 ${r.p50.toFixed(4)} ms   p99 ${r.p99.toFixed(4)} ms   mean ${r.mean.toFixed(4)} ms`);
console.log(
  `ratio quartermaster/baseline p50: ${(ours.p50 / baseline.p50).toFixed(3)} (below 1: cheaper than merely copying and diffing the pod); target p50 <= 0.1 ms`,
);
console.log(JSON.stringify({ bench: "mutate", ours, baseline, patchOps: ops.length }));

/**
 * bench/replicas: what a pod of a large job costs the pod mutation webhook (issue 29, item 3), end to end
 * through the webhook (job read from a cached reader, mutation pipeline, JSON Patch, the AdmissionReview
 * answer):
 * 1. a pod of a 4-replica TFJob: answer bytes and ms;
 * 2. pods of a TFJob at the ceiling (10,000 replicas): one webhook instance, whose cluster-spec memo the pods
 *    share, against a baseline measured in the same run, the same pods each built without the memo
 *    (what every pod paid before: its own N-entry cluster list and its JSON);
 * 3. a pod of a 2^31−1-replica TFJob (over the ceiling): answer bytes and ms (before: heap OOM).
 *
 *   npm run bench:replicas [-- --pods 200]
 */
import { parseArgs } from "node:util";
import type { KubeObject, ObjectKind } from "../src/core/kube.js";
import { silentLogger } from "../src/log.js";
import { mutatePod, type Pod } from "../src/mutate/index.js";
import { ClusterSpecMemo } from "../src/mutate/frameworks.js";
import { createPatch } from "../src/admission/patch.js";
import { defaultPolicy } from "../src/policy/load.js";
import { DEFAULT_JOB_KINDS } from "../src/policy/schema.js";
import type { JobKind } from "../src/policy/types.js";
import { MAX_JOB_REPLICAS } from "../src/membership/ceiling.js";
import type { JobReader } from "../src/membership/types.js";
import { mutatePods } from "../webhooks/mutate-pods.js";
import { review } from "../test/fixtures/reviews.js";

const { values } = parseArgs({ options: { pods: { type: "string", default: "200" } } });
const pods = Number(values.pods);
const policy = defaultPolicy();
const kind = (DEFAULT_JOB_KINDS as JobKind[]).find((k) => k.kind === "TFJob")!;

function tfjob(name: string, replicas: Record<string, number>): KubeObject {
  const specs = Object.fromEntries(
    Object.entries(replicas).map(([t, n]) => [
      t,
      { replicas: n, template: { spec: { containers: [{ name: "tensorflow", image: "tensorflow/tensorflow:2.16.1-gpu" }] } } },
    ]),
  );
  return Object.freeze({
    apiVersion: "kubeflow.org/v1",
    kind: "TFJob",
    metadata: { name, namespace: "team-a", uid: `uid-${name}` },
    spec: { tfReplicaSpecs: specs },
  });
}

/** A cached reader: every pod of a job gets the same job object, as `src/kube/jobs.ts` answers within its TTL. */
function reader(jobs: KubeObject[]): JobReader {
  const find = (_k: ObjectKind, ns: string, name: string) => jobs.find((j) => (j.metadata as { name: string }).name === name && ns === "team-a");
  return { get: async (k, ns, name) => find(k, ns, name), peek: (k, ns, name) => find(k, ns, name) };
}

function pod(job: string, type: string, index: number): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `${job}-${type.toLowerCase()}-${index}`,
      namespace: "team-a",
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: job, uid: `uid-${job}`, controller: true }],
    },
    spec: {
      containers: [{ name: "tensorflow", image: "tensorflow/tensorflow:2.16.1-gpu", resources: { limits: { "nvidia.com/gpu": "1" } } }],
      restartPolicy: "Never",
    },
  };
}

const small = tfjob("small", { PS: 1, Worker: 3 });
const atCeiling = tfjob("ceiling", { Chief: 1, Worker: MAX_JOB_REPLICAS - 1 });
const huge = tfjob("huge", { Worker: 2 ** 31 - 1 });
const webhook = mutatePods({ policy, log: silentLogger(), jobs: reader([small, atCeiling, huge]), now: () => new Date() });

/** One admission through the webhook: answer bytes (the AdmissionReview as sent), ms. */
async function admit(p: Pod): Promise<{ bytes: number; ms: number; warnings: string[] }> {
  const t = performance.now();
  const res = await webhook.admit(review({ object: p as KubeObject }));
  const bytes = Buffer.byteLength(JSON.stringify(res.review));
  return { bytes, ms: performance.now() - t, warnings: res.review.response?.warnings ?? [] };
}

async function series(name: string, make: (i: number) => Pod, n: number): Promise<{ name: string; bytes: number; p50: number; mean: number; first: number }> {
  const ms: number[] = [];
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const r = await admit(make(i));
    ms.push(r.ms);
    bytes = r.bytes;
  }
  const first = ms[0]!;
  const sorted = [...ms].sort((a, b) => a - b);
  return { name, bytes, first, p50: sorted[Math.floor(n / 2)]!, mean: ms.reduce((a, b) => a + b, 0) / n };
}

const fmt = (r: { name: string; bytes: number; p50: number; mean: number; first: number }): string =>
  `${r.name.padEnd(58)} answer ${String(r.bytes).padStart(8)} B   first ${r.first.toFixed(3)} ms   p50 ${r.p50.toFixed(3)} ms   mean ${r.mean.toFixed(3)} ms`;

for (let i = 0; i < 200; i++) await admit(pod("small", "Worker", i % 3)); // warm-up
const one = await series("4-replica TFJob pod (webhook)", (i) => pod("small", "Worker", i % 3), Math.max(pods, 1000));

// At the ceiling: the webhook (its memo shared by the pods) against the same pipeline without a memo.
const withMemo = await series(`TFJob at the ceiling (${MAX_JOB_REPLICAS}), webhook, memo shared`, (i) => pod("ceiling", "Worker", i), pods);
function pipeline(memo: ClusterSpecMemo | undefined, n: number): { name: string; bytes: number; p50: number; mean: number; first: number } {
  const ms: number[] = [];
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const p = pod("ceiling", "Worker", i);
    const t = performance.now();
    const out = mutatePod(p, {
      policy,
      namespace: "team-a",
      ...(memo ? { clusterSpecs: memo } : {}),
      topology: { job: atCeiling, kind, replicaType: "Worker", index: i },
    });
    bytes = Buffer.byteLength(JSON.stringify(createPatch(p, out.pod)));
    ms.push(performance.now() - t);
  }
  const sorted = [...ms].sort((a, b) => a - b);
  return {
    name: memo ? "  pipeline + patch, memo shared" : "  baseline: pipeline + patch, no memo (every pod builds)",
    bytes,
    first: ms[0]!,
    p50: sorted[Math.floor(n / 2)]!,
    mean: ms.reduce((a, b) => a + b, 0) / n,
  };
}
const pipeMemo = pipeline(new ClusterSpecMemo(), pods);
const pipeBaseline = pipeline(undefined, pods);

const over = await series("2^31−1-replica TFJob pod (webhook; over the ceiling)", (i) => pod("huge", "Worker", i), 100);
const overWarning = (await admit(pod("huge", "Worker", 5))).warnings.find((w) => w.includes("ceiling"));

console.log(`\nbench/replicas: node ${process.version}, ${pods} pods at the ceiling; answer = the AdmissionReview JSON, patch = the JSON Patch JSON`);
for (const r of [one, withMemo, pipeMemo, pipeBaseline, over]) console.log(fmt(r));
console.log(`at the ceiling, p50 memo/no memo: ${(pipeMemo.p50 / pipeBaseline.p50).toFixed(3)}; mean ${(pipeMemo.mean / pipeBaseline.mean).toFixed(3)}`);
console.log(`over the ceiling, warning: ${overWarning}`);
console.log(
  JSON.stringify({ bench: "replicas", one, withMemo, pipeMemo, pipeBaseline, over, heapUsedMiB: Math.round(process.memoryUsage().heapUsed / 2 ** 20) }),
);

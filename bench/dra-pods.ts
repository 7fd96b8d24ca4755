/**
 * bench/dra-pods: what `/validate/pods` pays for a DRA pod of a job judged with its job (src/validate/pod-job.ts, the
 * claim-template swap fix), in process, through the real webhooks, read pool and cached reader (src/kube/jobs.ts)
 * over a stand-in apiserver whose every GET answers after `--get-ms`. A launch's worth of pods of one PyTorchJob
 * (`--pods` Workers, one 1-GPU ResourceClaimTemplate), admitted `--concurrency` at a time, under two policies measured
 * in the same run: the baseline caps a pod (`pod.gpus: 8`: the pod's claims through the cache, as before), the other
 * a job too (`job.gpus`: the job read, the claims read past the cache, the job judged). Prints per policy the reviews'
 * p50 and p99 latency, the CPU per review and the GETs per review (whole objects and metadata alone), and the
 * ratios to the baseline.
 *
 *   npm run bench:dra-pods [-- --pods 512 --concurrency 32 --get-ms 1 --reps 3]
 */
import { parseArgs } from "node:util";
import type { KubeObject, ObjectKind } from "../src/core/kube.js";
import { cachedJobReader, type GetObject } from "../src/kube/jobs.js";
import { silentLogger } from "../src/log.js";
import { checkPolicy } from "../src/policy/load.js";
import type { Policy } from "../src/policy/types.js";
import { createWebhooks } from "../webhooks/index.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "512" },
    concurrency: { type: "string", default: "32" },
    "get-ms": { type: "string", default: "1" },
    reps: { type: "string", default: "3" },
  },
});
const PODS = Number(values.pods);
const CONCURRENCY = Number(values.concurrency);
const GET_MS = Number(values["get-ms"]);
const REPS = Number(values.reps);
const NS = "team-a";

const template: KubeObject = {
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name: "gpu", namespace: NS, uid: "t-1", resourceVersion: "7" },
  spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count: 1 } }] } } },
};
const workerSpec = {
  resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "gpu" }],
  containers: [{ name: "pytorch", image: "trainer:1", resources: { claims: [{ name: "gpu" }], limits: { cpu: "8", memory: "64Gi" } } }],
};
const job: KubeObject = {
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llm", namespace: NS, uid: "j-1", resourceVersion: "9" },
  spec: { pytorchReplicaSpecs: { Worker: { replicas: PODS, template: { spec: workerSpec } } } },
};
const OBJECTS = new Map<string, KubeObject>([
  ["pytorchjobs/llm", job],
  ["resourceclaimtemplates/gpu", template],
]);

/** The stand-in apiserver: each GET answers after GET_MS, counted by kind of read. */
function apiserver() {
  const counts = { whole: 0, metadata: 0 };
  const answer = <T>(v: T): Promise<T> => new Promise((r) => setTimeout(() => r(v), GET_MS));
  const get = ((kind: ObjectKind, _ns: string, name: string) => {
    counts.whole++;
    return answer(OBJECTS.get(`${kind.plural}/${name}`));
  }) as GetObject;
  get.metadata = (kind, _ns, name) => {
    counts.metadata++;
    const o = OBJECTS.get(`${kind.plural}/${name}`);
    return answer(o && { metadata: o.metadata });
  };
  return { get, counts };
}

const podReview = (i: number) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: `u-${i}`,
    kind: { group: "", version: "v1", kind: "Pod" },
    resource: { group: "", version: "v1", resource: "pods" },
    operation: "CREATE",
    namespace: NS,
    userInfo: { username: "system:serviceaccount:kubeflow:training-operator" },
    object: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `llm-worker-${i}`,
        namespace: NS,
        labels: { "training.kubeflow.org/job-name": "llm", "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": String(i) },
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "llm", uid: "j-1", controller: true }],
      },
      spec: workerSpec,
    },
  },
});

interface Run {
  p50: number;
  p99: number;
  cpuUs: number;
  gets: number;
  metadata: number;
  refused: number;
}

async function launch(policy: Policy): Promise<Run> {
  const server = apiserver();
  const jobs = cachedJobReader(() => Promise.resolve(server.get), { ttlMs: 5000 });
  const hook = createWebhooks({ policy, log: silentLogger(), jobs, now: () => new Date() })["/validate/pods"]!;
  const latencies: number[] = [];
  let refused = 0;
  let next = 0;
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < PODS; i = next++) {
        const t = performance.now();
        const res = await hook.admit(podReview(i) as never);
        latencies.push(performance.now() - t);
        if (!res.review.response?.allowed) refused++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  return {
    p50: latencies[Math.floor(PODS * 0.5)]!,
    p99: latencies[Math.floor(PODS * 0.99)]!,
    cpuUs: (used.user + used.system) / PODS,
    gets: server.counts.whole / PODS,
    metadata: server.counts.metadata / PODS,
    refused,
  };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const policies: Array<[string, Policy]> = [
  ["pod cap (baseline)", checkPolicy({ limits: { pod: { gpus: 8 } } }, "baseline")],
  ["pod and job caps", checkPolicy({ limits: { pod: { gpus: 8 }, job: { gpus: PODS } } }, "job-cap")],
];
await launch(policies[0]![1]); // warm-up
const results = new Map<string, Run[]>();
for (let rep = 0; rep < REPS; rep++) for (const [name, policy] of policies) results.set(name, [...(results.get(name) ?? []), await launch(policy)]);
const base = results.get(policies[0]![0])!;
console.log(`bench:dra-pods: ${PODS} DRA pods of one PyTorchJob, ${CONCURRENCY} at a time, GET ${GET_MS} ms, median of ${REPS}`);
console.log("policy                p50 ms   p99 ms   CPU µs/review   whole GETs/review   metadata GETs/review   refused");
for (const [name, runs] of results) {
  const m = (f: (r: Run) => number) => median(runs.map(f));
  const ratio = (f: (r: Run) => number) => (name === policies[0]![0] ? "" : ` (${(m(f) / median(base.map(f))).toFixed(2)}×)`);
  console.log(
    `${name.padEnd(20)}  ${m((r) => r.p50).toFixed(2)}${ratio((r) => r.p50)}  ${m((r) => r.p99).toFixed(2)}${ratio((r) => r.p99)}  ${m((r) => r.cpuUs).toFixed(0)}${ratio((r) => r.cpuUs)}  ${m((r) => r.gets).toFixed(3)}  ${m((r) => r.metadata).toFixed(3)}  ${m((r) => r.refused)}`,
  );
}

/**
 * End to end (issue 49, "the same verdict where users look"): `reconcile --watch`, as the reconciler's
 * ServiceAccount of manifests/base (its node informer needs `watch nodes`), judges every job it caches with
 * `explain`'s verdict and says so on the job and in its metrics. On a real kube-apiserver with kube-scheduler and
 * kwok nodes (QM_KWOK_BIN; the test plays the training operator, creating each job's pod itself):
 *
 * 1. a PyTorchJob whose pod does not tolerate the only GPU node's taint gets a Warning `QuartermasterBlocked`
 *    naming `untolerated-taint` and the toleration to add, within 30 s, and `quartermaster_jobs_blocked` counts it;
 *    one whose pod asks more GPUs than any node has gets `no-gpu-shape` alike;
 * 2. the taint removed, kube-scheduler binds the first job's pod and kwok runs it: a Normal `QuartermasterRunning`
 *    and its series gone; a 16-GPU node added, the second runs too; both jobs' GPU-minutes blocked were counted
 *    under their reasons; no job got a second Warning for the same reason.
 *
 * Skips, saying why, without QM_KWOK_BIN or QM_K8S_BIN_DIR.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { startWatch, type Watcher } from "../../src/run/watch.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { createWatchMetrics } from "../../src/reconcile/metrics.js";
import type { ClusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { kwokBin, kwokNodes, startKwok, type Controller } from "./harness/kwok.js";
import { applyOwnManifests, createNamespace, installKubeflowCrds } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kwokBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-blocked";
const TAINT = { key: "dedicated", value: "research", effect: "NoSchedule" as const };
const gpuNode = (name: string, gpus: number, taints: Array<typeof TAINT> = []): ClusterNode =>
  ({
    name,
    labels: { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": "A100-SXM4-80GB" },
    allocatable: { "nvidia.com/gpu": gpus },
    taints,
    cpu: 64,
    memoryGi: 256,
    pods: 110,
  }) as unknown as ClusterNode;

describe("reconcile --watch: the verdict on each job as Events and metrics", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let kwok: Controller | undefined;
  let watcher: Watcher | undefined;
  const metrics = createWatchMetrics();
  const lines: Obj[] = [];

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane({ scheduler: true });
    await installKubeflowCrds(cp);
    await applyOwnManifests(cp);
    const sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    kwok = await startKwok(cp, bins.bin);
    await kwokNodes(cp, [gpuNode("gpu-a", 8, [TAINT])]);
    watcher = await startWatch({
      kubeconfig: sa.kubeconfig,
      policy: defaultPolicy(),
      log: pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) }),
      namespace: "quartermaster",
      holder: "blocked-1",
      leaseSeconds: 15,
      resyncSeconds: 3600,
      metrics,
      blocked: { tickSeconds: 1, bounds: { settleMs: 2000, perJobMs: 3000 } },
    });
    await cp.until("the reconciler takes the Lease", () => watcher!.leading(), 10_000, 100);
  });
  after(async () => {
    if (process.env.QM_DEBUG) for (const l of lines) console.error(JSON.stringify(l));
    await watcher?.stop();
    await kwok?.stop();
    await cp?.stop();
  });

  /** A PyTorchJob of one worker asking `gpus`, and its pod as training-operator makes it. */
  const createJob = async (name: string, gpus: number, tolerations: Obj[] = []): Promise<void> => {
    const container = { name: "pytorch", image: "registry.invalid/train:1", resources: { limits: { "nvidia.com/gpu": String(gpus) } } };
    const job = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`, {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name },
      spec: { pytorchReplicaSpecs: { Worker: { replicas: 1, template: { spec: { tolerations, containers: [container] } } } } },
    });
    assert.equal(job.status, 201, JSON.stringify(job.body));
    const pod = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `${name}-worker-0`,
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name, uid: job.body.metadata.uid, controller: true }],
        labels: {
          "training.kubeflow.org/job-name": name,
          "training.kubeflow.org/operator-name": "pytorchjob-controller",
          "training.kubeflow.org/replica-type": "worker",
          "training.kubeflow.org/replica-index": "0",
        },
      },
      spec: { tolerations, containers: [container] },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
  };
  const events = async (job: string): Promise<Obj[]> => {
    const r = await cp.api("GET", `/api/v1/namespaces/${NS}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${job}`)}`);
    return ((r.body.items ?? []) as Obj[]).filter((e) => String(e.reason).startsWith("Quartermaster"));
  };
  const waitEvent = async (job: string, reason: string, message: RegExp, ms = 30_000): Promise<Obj> => {
    let found: Obj | undefined;
    await cp.until(
      `${job}: Event ${reason} ${message}; reconciler log tail:\n${lines
        .slice(-10)
        .map((l) => JSON.stringify(l))
        .join("\n")}`,
      async () => !!(found = (await events(job)).find((e) => e.reason === reason && message.test(e.message))),
      ms,
      250,
    );
    return found!;
  };
  const series = async (name: string): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const v of (await metrics.registry.getSingleMetric(name)!.get()).values)
      out[
        Object.entries(v.labels)
          .map(([k, x]) => `${k}=${x}`)
          .join(",")
      ] = v.value;
    return out;
  };
  const blockedKey = (reason: string): string => `namespace=${NS},kind=PyTorchJob,reason=${reason}`;

  it("a job whose pod tolerates no node gets QuartermasterBlocked untolerated-taint within 30 s, and is counted", async () => {
    const started = Date.now();
    await createJob("tainted", 4);
    const e = await waitEvent("tainted", "QuartermasterBlocked", /^untolerated-taint: /);
    assert.equal(e.type, "Warning");
    assert.equal(e.source.component, "quartermaster-reconciler");
    assert.equal(e.involvedObject.kind, "PyTorchJob");
    assert.match(e.message, /Next: add a toleration for dedicated=research:NoSchedule/);
    assert.match(e.message, /quartermaster explain pytorchjob\/tainted -n team-blocked/);
    assert.ok(Date.now() - started < 30_000, `${Date.now() - started} ms`);
    assert.equal((await series("quartermaster_jobs_blocked"))[blockedKey("untolerated-taint")], 1);
  });

  it("a job asking more GPUs than any node has gets QuartermasterBlocked no-gpu-shape, and is counted", async () => {
    await createJob("big", 16, [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }]);
    const e = await waitEvent("big", "QuartermasterBlocked", /^no-gpu-shape: /);
    assert.match(e.message, /asks 16 nvidia\.com\/gpu per pod/);
    assert.match(e.message, /Next: ask at most 8 nvidia\.com\/gpu per pod/);
    await cp.until("big counted", async () => (await series("quartermaster_jobs_blocked"))[blockedKey("no-gpu-shape")] === 1, 10_000, 250);
  });

  it("the causes removed: each job runs, gets QuartermasterRunning, leaves the gauge; GPU-minutes were counted; no Warning twice", async () => {
    const untaint = await cp.api("PATCH", "/api/v1/nodes/gpu-a", { spec: { taints: null } }, { "content-type": "application/merge-patch+json" });
    assert.equal(untaint.status, 200, JSON.stringify(untaint.body));
    const ran = await waitEvent("tainted", "QuartermasterRunning", /^running: 1 pod\(s\); blocked before \(untolerated-taint/, 60_000);
    assert.equal(ran.type, "Normal");
    await cp.until(
      "untolerated-taint gone from the gauge",
      async () => (await series("quartermaster_jobs_blocked"))[blockedKey("untolerated-taint")] === undefined,
      10_000,
      250,
    );
    assert.equal((await series("quartermaster_jobs_blocked"))[blockedKey("no-gpu-shape")], 1, "big still waits for a node");

    await kwokNodes(cp, [gpuNode("gpu-b", 16)]);
    await waitEvent("big", "QuartermasterRunning", /blocked before \(no-gpu-shape/, 60_000);
    await cp.until("nothing blocked", async () => Object.keys(await series("quartermaster_jobs_blocked")).length === 0, 10_000, 250);

    const minutes = await series("quartermaster_blocked_gpu_minutes_total");
    assert.ok(minutes["reason=untolerated-taint,resource=nvidia.com/gpu"]! > 0, JSON.stringify(minutes));
    assert.ok(minutes["reason=no-gpu-shape,resource=nvidia.com/gpu"]! > 0, JSON.stringify(minutes));
    for (const job of ["tainted", "big"]) {
      const warnings = (await events(job)).filter((e) => e.reason === "QuartermasterBlocked");
      assert.equal(warnings.length, 1, `${job}: ${JSON.stringify(warnings.map((e) => e.message))}`);
    }
  });
});

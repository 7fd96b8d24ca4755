/**
 * Issue 33, a queued Kubeflow Trainer v2 TrainJob through the real Kueue v0.19.2, Trainer v2.3.0, JobSet v0.12.0,
 * kube-scheduler and kube-controller-manager's job-controller, with Quartermaster's webhooks registered as its
 * manifests install them. Two GPU flavors, `a100` (tried first) and `h100`, both with the GPU taint as
 * `nodeTaints`; a TrainJob on torch-distributed, 2 nodes × a bare `gpu: 4`, its pods annotated for H100 placement
 * in a runtime patch of its author's.
 *
 * What it shows: at CREATE `/mutate/jobs` writes the renamed, defaulted resources into `resourcesPerNode` and the
 * GPU and accelerator tolerations and the H100 affinity into Quartermaster's runtime patch, so Kueue (which sizes
 * and places a TrainJob from the JobSet Trainer would build) admits it into `h100`, not `a100` and not never; its
 * runtime patch and unsuspend UPDATEs pass `/validate/jobs`; its pods are bound on the H100 node; Kueue's
 * reservation equals the pods' GPU requests; the pods carry the outfitting unchanged by `/mutate/pods`.
 *
 * Skips, saying why, when QM_KUEUE_BIN, QM_TRAINER_BIN or QM_JOBSET_BIN is unset. Every wait is bounded.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ANNOTATION_ACCELERATOR } from "../../src/core/keys.js";
import { QM_RUNTIME_PATCH_MANAGER } from "../../src/mutate/trainjob-outfit.js";
import { A100_MIG_DISABLED, H100_NO_MIG, NVIDIA_GPU_TAINT, clusterNode, type ClusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { createQueues, type Flavor, hasCondition, installKueueCrds, KUEUE_API, kueueBin, QUEUE_LABEL, startKueue } from "../e2e/harness/kueue.js";
import { startVirtualNodes, type VirtualNodes } from "../e2e/harness/nodes.js";
import { JOB_CONTROLLER, installDefaultRuntimes, installTrainerCrds, startJobSet, startTrainer, trainerBins, type Controller } from "../e2e/harness/trainer.js";
import { createNamespace, registerOwnWebhook, type WebhookProcess } from "../e2e/harness/webhook.js";

type Obj = Record<string, any>;
const kueue = kueueBin();
const trainerB = trainerBins();
const SKIP = "skip" in kueue ? kueue.skip : "skip" in trainerB ? trainerB.skip : false;

const NS = "team-trainjob";
const CLUSTER_QUEUE = "gpu-cluster-queue";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const GPU = "nvidia.com/gpu";
const GPU_TAINT = { key: NVIDIA_GPU_TAINT.key, value: NVIDIA_GPU_TAINT.value, effect: NVIDIA_GPU_TAINT.effect };
const H100 = H100_NO_MIG.labels[PRODUCT]!;
const A100 = A100_MIG_DISABLED.labels[PRODUCT]!;
const TJ_API = "/apis/trainer.kubeflow.org/v1alpha1";

const CLUSTER: readonly ClusterNode[] = [
  clusterNode(A100_MIG_DISABLED, { name: "a100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  clusterNode(H100_NO_MIG, { name: "h100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 128, memoryGi: 1024 }),
];
/** `a100` first: a TrainJob Kueue could place anywhere would be charged there. */
const FLAVORS: Flavor[] = [
  { name: "a100", nodeLabels: { [PRODUCT]: A100 }, nodeTaints: [GPU_TAINT] },
  { name: "h100", nodeLabels: { [PRODUCT]: H100 }, nodeTaints: [GPU_TAINT] },
];
const QUOTA = { cpu: 64, memory: "512Gi", [GPU]: 8 };

const POLICY = `resources:
  defaultRequests: {cpu: "2", memory: 8Gi}
`;

const trainJob = (name: string): Obj => ({
  apiVersion: "trainer.kubeflow.org/v1alpha1",
  kind: "TrainJob",
  metadata: { name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
  spec: {
    runtimeRef: { name: "torch-distributed" },
    trainer: { numNodes: 2, resourcesPerNode: { limits: { gpu: "4" } } },
    runtimePatches: [
      {
        manager: "example.com/author",
        trainingRuntimeSpec: {
          template: {
            spec: { replicatedJobs: [{ name: "node", template: { spec: { template: { metadata: { annotations: { [ANNOTATION_ACCELERATOR]: H100 } } } } } }] },
          },
        },
      },
    ],
  },
});

describe("Kueue v0.19.2 and Trainer v2.3.0 with Quartermaster's webhooks: a queued TrainJob", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  const ctl: Controller[] = [];
  let wh: WebhookProcess | undefined;
  const started = performance.now();
  let stored: Obj | undefined;

  before(async () => {
    if ("skip" in kueue || "skip" in trainerB) return;
    cp = await startControlPlane({ scheduler: true, controllers: [JOB_CONTROLLER] });
    nodes = await startVirtualNodes(cp, CLUSTER);
    await installTrainerCrds(cp);
    ctl.push(await startJobSet(cp, trainerB.jobset));
    ctl.push(await startTrainer(cp, trainerB.trainer));
    const runtimes = await installDefaultRuntimes(cp);
    assert.ok(runtimes.includes("torch-distributed"), `default runtimes: ${runtimes.join(", ")}`);
    await installKueueCrds(cp);
    ctl.push(await startKueue(cp, kueue.bin));
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    wh = await registerOwnWebhook(cp, POLICY);
    await createQueues(cp, { namespace: NS, flavors: FLAVORS, clusterQueue: CLUSTER_QUEUE, localQueue: LOCAL_QUEUE, quota: () => QUOTA });
    let probe = 0;
    await cp.until("Quartermaster's jobs.mutate to outfit a queued TrainJob", async () => {
      const r = await cp.api("POST", `${TJ_API}/namespaces/${NS}/trainjobs?dryRun=All`, trainJob(`probe-${++probe}`));
      return r.status === 201 && (r.body.spec.runtimePatches ?? []).some((p: Obj) => p.manager === QM_RUNTIME_PATCH_MANAGER);
    });
  });
  after(async () => {
    await wh?.stop();
    nodes?.stop();
    for (const c of ctl.reverse()) await c.stop();
    await cp?.stop();
    console.log(`kueue trainjob suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const logs = (): string => ctl.map((c) => c.logs(15)).join("\n---\n");

  it("CREATE: suspended by Kueue, resources in resourcesPerNode, placement in Quartermaster's runtime patch", async () => {
    const res = await cp.api("POST", `${TJ_API}/namespaces/${NS}/trainjobs`, trainJob("llm"));
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const tj = res.body as Obj;
    assert.equal(tj.spec.suspend, true);
    assert.deepEqual(tj.spec.trainer.resourcesPerNode, { limits: { [GPU]: "4" }, requests: { [GPU]: "4", cpu: "2", memory: "8Gi" } });
    const own = (tj.spec.runtimePatches as Obj[]).find((p) => p.manager === QM_RUNTIME_PATCH_MANAGER);
    assert.ok(own, JSON.stringify(tj.spec.runtimePatches));
    const pod = own.trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template;
    assert.ok(
      (pod.spec.tolerations as Obj[]).some((t) => t.key === GPU),
      JSON.stringify(pod.spec),
    );
    assert.deepEqual(pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
      { matchExpressions: [{ key: PRODUCT, operator: "In", values: [H100] }] },
    ]);
    stored = tj;
  });

  it("admitted into h100, pods bound on the H100 node, Kueue's reservation equal to the pods' GPU requests", async () => {
    assert.ok(stored, "the TrainJob of the first test");
    let wl: Obj | undefined;
    await cp
      .until(
        "the TrainJob's Workload admitted",
        async () => {
          const r = await cp.api("GET", `${KUEUE_API}/namespaces/${NS}/workloads`);
          wl = (r.body.items as Obj[] | undefined)?.find((w) => (w.metadata.ownerReferences ?? []).some((o: Obj) => o.kind === "TrainJob" && o.name === "llm"));
          return hasCondition(wl, "Admitted");
        },
        120_000,
        250,
      )
      .catch((err: Error) => assert.fail(`${err.message}: ${JSON.stringify(wl?.status)}\n${logs()}`));
    const flavors = (wl!.status.admission.podSetAssignments as Obj[]).flatMap((a) => Object.values(a.flavors as Record<string, string>));
    assert.deepEqual([...new Set(flavors)], ["h100"]);
    let pods: Obj[] = [];
    await cp
      .until(
        "2 pods of the TrainJob bound",
        async () => {
          const r = await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=jobset.sigs.k8s.io/jobset-name=llm`);
          pods = r.body.items as Obj[];
          return pods.length === 2 && pods.every((p) => p.spec.nodeName);
        },
        120_000,
        250,
      )
      .catch((err: Error) => assert.fail(`${err.message}: ${JSON.stringify(pods.map((p) => p.status))}\n${logs()}`));
    const tj = (await cp.api("GET", `${TJ_API}/namespaces/${NS}/trainjobs/llm`)).body as Obj;
    const ownPod = (tj.spec.runtimePatches as Obj[]).find((p) => p.manager === QM_RUNTIME_PATCH_MANAGER)!.trainingRuntimeSpec.template.spec.replicatedJobs[0]
      .template.spec.template;
    let gpus = 0;
    for (const p of pods) {
      assert.equal(p.spec.nodeName, "h100");
      const node = p.spec.containers.find((c: Obj) => c.name === "node");
      assert.deepEqual(node.resources, tj.spec.trainer.resourcesPerNode, `${p.metadata.name}: resources as resourcesPerNode`);
      gpus += Number(node.resources.requests[GPU]);
      // What Kueue read is what the pods have: /mutate/pods changed none of it.
      assert.deepEqual(p.spec.affinity, ownPod.spec.affinity, `${p.metadata.name}: affinity`);
      for (const t of ownPod.spec.tolerations as Obj[])
        assert.ok(
          (p.spec.tolerations as Obj[]).some((x) => ["key", "operator", "value", "effect"].every((f) => x[f] === t[f])),
          `${p.metadata.name}: toleration ${JSON.stringify(t)}`,
        );
    }
    assert.equal(gpus, 8);
    let last = "";
    await cp
      .until(
        "Kueue's reservation in h100 equal to the pods' GPU requests",
        async () => {
          const cq = (await cp.api("GET", `${KUEUE_API}/clusterqueues/${CLUSTER_QUEUE}`)).body;
          const res = (cq.status?.flavorsReservation ?? []) as Obj[];
          const total = (f: string): number => Number((res.find((x) => x.name === f)?.resources ?? []).find((x: Obj) => x.name === GPU)?.total ?? 0);
          last = `h100 ${total("h100")}, a100 ${total("a100")}`;
          return total("h100") === gpus && total("a100") === 0;
        },
        30_000,
        250,
      )
      .catch((err: Error) => assert.fail(`${err.message}: ${last}`));
    console.log(`kueue trainjob: admitted into h100, ${pods.length} pods on h100, reservation ${last}`);
  });
});

/**
 * Issue 33 with the Kubeflow v1 kinds: the real training operator v1.9.4 (QM_OPERATOR_BIN), the real Kueue
 * v0.19.2 (QM_KUEUE_BIN), kube-scheduler, and Quartermaster's webhooks registered as its manifests install them
 * (`jobs.validate` with `failurePolicy: Fail` included, so Kueue's unsuspend UPDATE goes through it).
 *
 * One job of each framework the operator serves (TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob), queued with
 * `kueue.x-k8s.io/queue-name`, written with a bare `gpu` and placed by Quartermaster's accelerator annotation
 * only, over two flavors whose `nodeTaints` are the GPU taint and whose quota holds two such jobs each:
 * - each comes back from CREATE suspended, its replica templates outfitted (`nvidia.com/gpu`, GPU toleration,
 *   the accelerator's required affinity);
 * - Kueue admits each into the flavor its annotation asks for, the third A100 job only once quota frees; the
 *   unsuspend UPDATE is admitted by Quartermaster (no job stranded); the operator makes the pods, kube-scheduler
 *   binds them on the flavor's node, with the framework's distributed env and the template's outfitting unchanged;
 * - Kueue's reservation per flavor equals the pods' GPU requests;
 * - when the first wave's pods succeed (written as a kubelet would), the operator finishes the jobs and the held
 *   one is admitted and placed.
 *
 * Skips, saying why, without QM_OPERATOR_BIN or QM_KUEUE_BIN.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ANNOTATION_ACCELERATOR } from "../../src/core/keys.js";
import { A100_MIG_DISABLED, CPU_NODE, H100_NO_MIG, NVIDIA_GPU_TAINT, clusterNode, type ClusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import {
  type Controller,
  createQueues,
  type Flavor,
  hasCondition,
  installKueueCrds,
  KUEUE_API,
  kueueBin,
  QUEUE_LABEL,
  startKueue,
  succeedPods,
  workloadFor,
} from "../e2e/harness/kueue.js";
import { startVirtualNodes, type VirtualNodes } from "../e2e/harness/nodes.js";
import { installOperatorCrds, operatorBin, startOperator, type Operator } from "../e2e/harness/operator.js";
import { createNamespace, registerOwnWebhook, type WebhookProcess } from "../e2e/harness/webhook.js";
import { FRAMEWORK_CASES, type Obj } from "./operator-jobs.js";

const kueueBins = kueueBin();
const operator = operatorBin();
const SKIP = "skip" in kueueBins ? kueueBins.skip : operator ? false : "QM_OPERATOR_BIN not set: this suite needs the real training operator";

const NS = "kueue-v1";
const CLUSTER_QUEUE = "v1-cluster-queue";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const GPU = "nvidia.com/gpu";
const GPU_TAINT = { key: NVIDIA_GPU_TAINT.key, value: NVIDIA_GPU_TAINT.value, effect: NVIDIA_GPU_TAINT.effect };
const A100 = A100_MIG_DISABLED.labels[PRODUCT]!;
const H100 = H100_NO_MIG.labels[PRODUCT]!;
const CLUSTER: readonly ClusterNode[] = [
  clusterNode(A100_MIG_DISABLED, { name: "a100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  // The H100 node is larger: least-allocated scoring would prefer it for any pod allowed there.
  clusterNode(H100_NO_MIG, { name: "h100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 256, memoryGi: 2048 }),
  clusterNode(CPU_NODE, { name: "cpu", zone: "zone-a", cpu: 64, memoryGi: 512 }),
];
const FLAVORS: Flavor[] = [
  { name: "a100", nodeLabels: { [PRODUCT]: A100 }, nodeTaints: [GPU_TAINT] },
  { name: "h100", nodeLabels: { [PRODUCT]: H100 }, nodeTaints: [GPU_TAINT] },
];
const NODE_OF: Record<string, string> = { a100: "a100", h100: "h100" };
const QUOTA = { cpu: 64, memory: "512Gi", [GPU]: 8 };
const GPUS_PER_POD = 2;
const POLICY = `resources:\n  defaultRequests: {cpu: "2", memory: 8Gi}\n`;

/** The job of each framework: two replicas of two GPUs, and the flavor its accelerator annotation asks for (in creation order). */
const SHAPES: Record<string, Record<string, number>> = {
  TFJob: { Worker: 2 },
  PyTorchJob: { Master: 1, Worker: 1 },
  JAXJob: { Worker: 2 },
  XGBoostJob: { Master: 1, Worker: 1 },
  PaddleJob: { Master: 1, Worker: 1 },
};
const FLAVOR_OF: Record<string, string> = { TFJob: "h100", PyTorchJob: "a100", JAXJob: "h100", XGBoostJob: "a100", PaddleJob: "a100" };
/** The distributed env each framework's operator writes (training-operator `pkg/controller.v1/*`). */
const ENV_OF: Record<string, string> = {
  TFJob: "TF_CONFIG",
  PyTorchJob: "MASTER_ADDR",
  JAXJob: "COORDINATOR_ADDRESS",
  XGBoostJob: "MASTER_ADDR",
  PaddleJob: "PADDLE_MASTER",
};

const FRAMEWORKS = FRAMEWORK_CASES.filter((f) => Object.hasOwn(SHAPES, f.kind));
const nameOf = (kind: string): string => `queued-${kind.toLowerCase()}`;

function job(kind: string): Obj {
  const f = FRAMEWORKS.find((x) => x.kind === kind)!;
  const specs: Obj = {};
  for (const [type, replicas] of Object.entries(SHAPES[kind]!))
    specs[type] = {
      replicas,
      restartPolicy: "Never",
      template: {
        metadata: { annotations: { [ANNOTATION_ACCELERATOR]: FLAVOR_OF[kind] === "a100" ? A100 : H100 } },
        spec: { containers: [{ name: f.container, image: "registry.invalid/train:1", resources: { limits: { gpu: String(GPUS_PER_POD) } } }] },
      },
    };
  return {
    apiVersion: "kubeflow.org/v1",
    kind,
    metadata: { name: nameOf(kind), labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
    spec: { [f.specsField]: specs },
  };
}

describe("Kueue v0.19.2 queues the training operator's v1 jobs, Quartermaster outfits and admits them", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let kueue: Controller | undefined;
  let v1: Operator | undefined;
  let wh: WebhookProcess | undefined;
  const started = performance.now();

  before(async () => {
    if ("skip" in kueueBins || !operator) return;
    cp = await startControlPlane({ scheduler: true });
    nodes = await startVirtualNodes(cp, CLUSTER);
    await installOperatorCrds(cp);
    await installKueueCrds(cp);
    v1 = await startOperator(cp, operator);
    kueue = await startKueue(cp, kueueBins.bin);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    wh = await registerOwnWebhook(cp, POLICY);
    await createQueues(cp, { namespace: NS, flavors: FLAVORS, clusterQueue: CLUSTER_QUEUE, localQueue: LOCAL_QUEUE, quota: () => QUOTA });
    let probe = 0;
    await cp.until("Quartermaster's jobs.mutate to outfit a queued job", async () => {
      const j = job("TFJob");
      const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs?dryRun=All`, {
        ...j,
        metadata: { ...j.metadata, name: `probe-${++probe}` },
      });
      return r.status === 201 && (r.body.spec.tfReplicaSpecs.Worker.template.spec.tolerations ?? []).length > 0;
    });
  });
  after(async () => {
    await wh?.stop();
    await v1?.stop();
    await kueue?.stop();
    nodes?.stop();
    await cp?.stop();
    console.log(`kueue v1 suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const failMsg = (what: string): string => `${what}\n--- kueue\n${kueue?.logs(20) ?? ""}\n--- operator\n${v1?.logs(20) ?? ""}`;
  const path = (kind: string): string => `/apis/kubeflow.org/v1/namespaces/${NS}/${FRAMEWORKS.find((f) => f.kind === kind)!.plural}`;
  const podsOf = async (kind: string): Promise<Obj[]> =>
    (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=training.kubeflow.org/job-name=${nameOf(kind)}`)).body.items as Obj[];
  const admitted = async (kind: string): Promise<boolean> => hasCondition(await workloadFor(cp, NS, kind, nameOf(kind)), "Admitted");
  const reserved = async (): Promise<Record<string, number>> => {
    const cq = (await cp.api("GET", `${KUEUE_API}/clusterqueues/${CLUSTER_QUEUE}`)).body;
    const out: Record<string, number> = {};
    for (const f of FLAVORS) {
      const r = (cq.status?.flavorsReservation ?? []).find((x: Obj) => x.name === f.name);
      out[f.name] = Number((r?.resources ?? []).find((x: Obj) => x.name === GPU)?.total ?? 0);
    }
    return out;
  };
  const stored = new Map<string, Obj>();

  /** The job's pods bound on its flavor's node, with the template's outfitting and the framework's env; returns them. */
  const placed = async (kind: string): Promise<Obj[]> => {
    const want = Object.values(SHAPES[kind]!).reduce((a, b) => a + b, 0);
    let pods: Obj[] = [];
    await cp
      .until(`${want} pods of ${kind} bound`, async () => (pods = await podsOf(kind)).length === want && pods.every((p) => p.spec.nodeName), 120_000, 250)
      .catch((err: Error) => assert.fail(failMsg(err.message)));
    const f = FRAMEWORKS.find((x) => x.kind === kind)!;
    for (const p of pods) {
      assert.equal(p.spec.nodeName, NODE_OF[FLAVOR_OF[kind]!], `${p.metadata.name} on ${p.spec.nodeName}`);
      const type = Object.keys(SHAPES[kind]!).find((t) => t.toLowerCase() === p.metadata.labels["training.kubeflow.org/replica-type"])!;
      const template = stored.get(kind)!.spec[f.specsField][type].template.spec;
      const c = p.spec.containers.find((x: Obj) => x.name === f.container);
      assert.deepEqual(c.resources, template.containers[0].resources, `${p.metadata.name}: resources`);
      assert.deepEqual(p.spec.affinity, template.affinity, `${p.metadata.name}: affinity`);
      assert.ok(
        (c.env ?? []).some((e: Obj) => e.name === ENV_OF[kind]),
        `${p.metadata.name}: no ${ENV_OF[kind]} in ${JSON.stringify(c.env)}`,
      );
    }
    return pods;
  };

  it("each framework's job: suspended at CREATE, templates outfitted", async () => {
    for (const f of FRAMEWORKS) {
      const r = await cp.api("POST", path(f.kind), job(f.kind));
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(r.body.spec.runPolicy?.suspend, true, `${f.kind}: not suspended at CREATE`);
      for (const [type, spec] of Object.entries(r.body.spec[f.specsField] as Record<string, Obj>)) {
        const t = spec.template.spec;
        assert.equal(t.containers[0].resources.requests?.[GPU], String(GPUS_PER_POD), `${f.kind} ${type}: ${JSON.stringify(t.containers[0].resources)}`);
        assert.ok(
          (t.tolerations ?? []).some((x: Obj) => x.key === GPU_TAINT.key),
          `${f.kind} ${type}: tolerations ${JSON.stringify(t.tolerations)}`,
        );
        assert.ok(
          JSON.stringify(t.affinity ?? {}).includes(FLAVOR_OF[f.kind] === "a100" ? A100 : H100),
          `${f.kind} ${type}: affinity ${JSON.stringify(t.affinity)}`,
        );
      }
      stored.set(f.kind, r.body);
      // A second apart: Kueue orders Workloads by creation time (1 s resolution).
      await new Promise((res) => setTimeout(res, 1100));
    }
  });

  it("admitted into the flavor the annotation asks for, within quota; pods placed with the outfitting; reservation = pods' GPU requests", async () => {
    assert.equal(stored.size, FRAMEWORKS.length, "the jobs of the first test");
    const first = FRAMEWORKS.map((f) => f.kind).filter((k) => k !== "PaddleJob");
    await cp
      .until(`${first.join(", ")} admitted`, async () => (await Promise.all(first.map(admitted))).every(Boolean), 120_000, 250)
      .catch((err: Error) => assert.fail(failMsg(err.message)));
    assert.equal(await admitted("PaddleJob"), false, "the third A100 job is over the flavor's quota");
    const gpus: Record<string, number> = { a100: 0, h100: 0 };
    for (const kind of first) {
      const wl = (await workloadFor(cp, NS, kind, nameOf(kind)))!;
      const flavors = new Set((wl.status.admission.podSetAssignments as Obj[]).flatMap((a) => Object.values(a.flavors as Record<string, string>)));
      assert.deepEqual([...flavors], [FLAVOR_OF[kind]], `${kind} admitted into ${[...flavors].join(", ")}`);
      for (const p of await placed(kind)) gpus[FLAVOR_OF[kind]!]! += Number(p.spec.containers[0].resources.requests[GPU]);
    }
    await cp
      .until(`Kueue's reservation ${JSON.stringify(gpus)}`, async () => JSON.stringify(await reserved()) === JSON.stringify(gpus), 30_000, 250)
      .catch((err: Error) => assert.fail(failMsg(`${err.message}: ${JSON.stringify(gpus)}`)));
  });

  it("when the first wave succeeds, the held job is admitted and placed", async () => {
    for (const kind of FRAMEWORKS.map((f) => f.kind).filter((k) => k !== "PaddleJob")) {
      await succeedPods(cp, await podsOf(kind));
      await cp
        .until(`${kind} to succeed`, async () => hasCondition((await cp.api("GET", `${path(kind)}/${nameOf(kind)}`)).body, "Succeeded"), 120_000, 250)
        .catch((err: Error) => assert.fail(failMsg(err.message)));
    }
    await cp.until("PaddleJob admitted", () => admitted("PaddleJob"), 120_000, 250).catch((err: Error) => assert.fail(failMsg(err.message)));
    const pods = await placed("PaddleJob");
    assert.equal(pods.length, 2);
  });
});

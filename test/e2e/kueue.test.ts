/**
 * The real Kueue v0.19.2 (QM_KUEUE_BIN, `test/e2e/kueue/build.sh`; issue 33) on the e2e control plane with
 * kube-scheduler and kube-controller-manager's job-controller, over virtual GPU nodes (`./harness/nodes.ts`:
 * an A100 and an H100 node with GPU feature discovery's labels and the GPU taint, and a CPU node; no kubelet,
 * so bound pods stay Pending unless the test writes their status). Kueue runs with its own webhooks served
 * and registered by URL (`./harness/kueue.ts`), as in a real install. Quartermaster is not involved here:
 * this is the ground the Kueue work of issue 33 stands on, shown to behave as upstream documents.
 *
 * Two ResourceFlavors, `a100` and `h100`, whose `nodeLabels` are the GFD product label of their nodes and
 * whose `tolerations` tolerate the GPU taint; a ClusterQueue with 8 GPUs (and cpu, memory) per flavor, tried
 * in that order; a LocalQueue in the test namespace. Then, with batch Jobs of 2 pods × 4 GPUs each, labelled
 * `kueue.x-k8s.io/queue-name`:
 * 1. the first Job comes back from CREATE suspended (Kueue's mutating webhook; the test never sets suspend),
 *    its Workload is admitted into `a100`, the Job is unsuspended with the flavor's nodeLabels as its pod
 *    template's nodeSelector and its toleration added, the job-controller makes its pods and kube-scheduler
 *    binds them onto the A100 node (the H100 node is larger, so the scheduler's least-allocated scoring would
 *    prefer it for an unselected pod);
 * 2. the second goes to `h100` (`a100` is full) and onto the H100 node, and Kueue's ClusterQueue reservation
 *    is 8 GPUs in each flavor: the sum of the pods' GPU requests;
 * 3. the third is over the remaining quota: its Workload is left without quota reservation (Kueue says the
 *    quota is insufficient), the Job stays suspended and has no pods; when the first Job completes (its pods'
 *    status written Succeeded, as a kubelet would), the held quota goes to the third, which is admitted into
 *    `a100` and bound there. So the hold was the quota, not anything else about the third Job.
 *
 * Every wait is bounded (cp.until); nothing asserts on elapsed time. The suite's run time is printed.
 * Skips, saying why, when QM_KUEUE_BIN is unset: a fresh clone's `npm run test:e2e` does not need it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import {
  type Controller,
  createQueues,
  type Flavor,
  gpuFlavorCluster,
  hasCondition,
  installKueueCrds,
  KUEUE_API,
  kueueBin,
  QUEUE_LABEL,
  startKueue,
  succeedPods,
  workloadFor,
} from "./harness/kueue.js";
import { startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { JOB_CONTROLLER } from "./harness/trainer.js";
import { createNamespace } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kueueBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-kueue";
const CLUSTER_QUEUE = "gpu-cluster-queue";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const GPU = "nvidia.com/gpu";
const { a100: A100_NODE, h100: H100_NODE, nodes: CLUSTER, toleration: GPU_TOLERATION, flavors: FLAVORS } = gpuFlavorCluster();
const NODE_OF: Record<string, string> = { a100: A100_NODE.name, h100: H100_NODE.name };
const QUOTA = { [GPU]: 8, cpu: 64, memory: "512Gi" };
const PODS = 2;
const GPUS_PER_POD = 4;

/** A batch Job of PODS pods × GPUS_PER_POD GPUs in the LocalQueue; never sets `suspend`. */
const queuedJob = (name: string): Obj => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
  spec: {
    parallelism: PODS,
    completions: PODS,
    completionMode: "Indexed",
    backoffLimit: 0,
    template: {
      spec: {
        restartPolicy: "Never",
        containers: [
          {
            name: "train",
            image: "registry.invalid/train:1",
            resources: { requests: { cpu: "4", memory: "32Gi", [GPU]: String(GPUS_PER_POD) }, limits: { [GPU]: String(GPUS_PER_POD) } },
          },
        ],
      },
    },
  },
});

describe("Kueue v0.19.2 admits queued batch Jobs into flavors, kube-scheduler places them", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let kueue: Controller | undefined;
  const started = performance.now();

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane({ scheduler: true, controllers: [JOB_CONTROLLER] });
    nodes = await startVirtualNodes(cp, CLUSTER);
    await installKueueCrds(cp);
    kueue = await startKueue(cp, bins.bin);
    await createNamespace(cp, NS);
    await createQueues(cp, { namespace: NS, flavors: FLAVORS, clusterQueue: CLUSTER_QUEUE, localQueue: LOCAL_QUEUE, quota: () => QUOTA });
  });
  after(async () => {
    nodes?.stop();
    await kueue?.stop();
    await cp?.stop();
    console.log(`kueue suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const failMsg = (what: string): string => `${what}\n--- kueue\n${kueue?.logs(30) ?? ""}`;
  const getJob = async (name: string): Promise<Obj> => (await cp.api("GET", `/apis/batch/v1/namespaces/${NS}/jobs/${name}`)).body;
  const podsOf = async (job: string): Promise<Obj[]> =>
    (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=batch.kubernetes.io/job-name=${job}`)).body.items as Obj[];

  /** Creates the Job and shows Kueue's webhook suspended it at CREATE (the reply is the object as stored). */
  const createQueued = async (name: string): Promise<Obj> => {
    const r = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, queuedJob(name));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.spec.suspend, true, `${name}: created without suspend, stored ${JSON.stringify(r.body.spec.suspend)}: Kueue's job webhook did not run`);
    return r.body;
  };

  /** Waits for the Job's Workload to be admitted; returns it. */
  const admitted = async (job: string): Promise<Obj> => {
    let wl: Obj | undefined;
    await cp.until(
      `the Workload of Job ${job} to be admitted`,
      async () => {
        wl = await workloadFor(cp, NS, "Job", job);
        return hasCondition(wl, "Admitted");
      },
      120_000,
      250,
    );
    return wl!;
  };

  /** The admitted Job is unsuspended with `flavor`'s placement; its pods are bound onto `flavor`'s node. */
  const runsOn = async (job: string, flavor: Flavor): Promise<void> => {
    let j: Obj = {};
    await cp.until(`Job ${job} to be unsuspended`, async () => (j = await getJob(job)).spec.suspend === false, 120_000, 250);
    const tmpl = j.spec.template.spec;
    for (const [k, v] of Object.entries(flavor.nodeLabels))
      assert.equal(tmpl.nodeSelector?.[k], v, failMsg(`${job}: template nodeSelector ${JSON.stringify(tmpl.nodeSelector)}`));
    assert.ok(
      (tmpl.tolerations ?? []).some((t: Obj) => t.key === GPU_TOLERATION.key && t.operator === "Exists" && t.effect === GPU_TOLERATION.effect),
      `${job}: flavor toleration missing from ${JSON.stringify(tmpl.tolerations)}`,
    );
    let pods: Obj[] = [];
    await cp.until(
      `${PODS} pods of Job ${job} bound by kube-scheduler`,
      async () => (pods = await podsOf(job)).length === PODS && pods.every((p) => p.spec.nodeName),
      120_000,
      250,
    );
    for (const p of pods) {
      assert.equal(p.spec.nodeName, NODE_OF[flavor.name], `${p.metadata.name} bound to ${p.spec.nodeName}, flavor ${flavor.name}`);
      assert.equal(p.spec.nodeSelector?.[PRODUCT], flavor.nodeLabels[PRODUCT]);
    }
  };

  const flavorOf = (wl: Obj): Record<string, string> => {
    const psa = wl.status?.admission?.podSetAssignments as Obj[];
    assert.equal(psa?.length, 1, JSON.stringify(wl.status?.admission));
    assert.equal(psa[0]!.count, PODS);
    return psa[0]!.flavors;
  };

  /** GPUs Kueue has reserved in `flavor` of the ClusterQueue. */
  const reservedGpus = async (flavor: string): Promise<string | undefined> => {
    const cq = (await cp.api("GET", `${KUEUE_API}/clusterqueues/${CLUSTER_QUEUE}`)).body;
    const f = (cq.status?.flavorsReservation ?? []).find((x: Obj) => x.name === flavor);
    return f?.resources?.find((r: Obj) => r.name === GPU)?.total;
  };

  it("a queued Job is suspended at CREATE, admitted into the first flavor, unsuspended with its nodeSelector and bound onto its node", async () => {
    await createQueued("train-a");
    const wl = await admitted("train-a");
    assert.deepEqual(flavorOf(wl), { [GPU]: "a100", cpu: "a100", memory: "a100" });
    await runsOn("train-a", FLAVORS[0]!);
  });

  it("the next goes to the second flavor once the first is full; Kueue reserves the pods' GPUs in each", async () => {
    await createQueued("train-b");
    const wl = await admitted("train-b");
    assert.deepEqual(flavorOf(wl), { [GPU]: "h100", cpu: "h100", memory: "h100" });
    await runsOn("train-b", FLAVORS[1]!);
    const want = String(PODS * GPUS_PER_POD);
    await cp.until(
      `ClusterQueue reservation of ${want} GPUs per flavor`,
      async () => (await reservedGpus("a100")) === want && (await reservedGpus("h100")) === want,
      120_000,
    );
  });

  it("a Job over the remaining quota stays suspended until quota is freed, then is admitted and placed", async () => {
    await createQueued("train-c");
    let wl: Obj | undefined;
    await cp.until(
      "the Workload of Job train-c to be found short of quota",
      async () => {
        wl = await workloadFor(cp, NS, "Job", "train-c");
        const reserved = (wl?.status?.conditions ?? []).find((c: Obj) => c.type === "QuotaReserved");
        return reserved?.status === "False" && /insufficient (unused )?quota/i.test(String(reserved.message));
      },
      120_000,
      250,
    );
    assert.ok(!hasCondition(wl, "Admitted"), JSON.stringify(wl?.status));
    assert.equal((await getJob("train-c")).spec.suspend, true);
    assert.deepEqual(await podsOf("train-c"), []);

    // train-a completes: its pods' status written as a kubelet would; the job-controller completes it.
    await succeedPods(cp, await podsOf("train-a"));
    await cp.until("Job train-a to complete", async () => hasCondition(await getJob("train-a"), "Complete"), 120_000, 250);
    const admittedC = await admitted("train-c");
    assert.deepEqual(flavorOf(admittedC), { [GPU]: "a100", cpu: "a100", memory: "a100" });
    await runsOn("train-c", FLAVORS[0]!);
  });
});

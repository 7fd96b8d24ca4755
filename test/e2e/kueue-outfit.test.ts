/**
 * Issue 33's acceptance through the real Kueue v0.19.2, the real kube-scheduler and kube-controller-manager's
 * job-controller, with Quartermaster's webhooks registered as its manifests install them: a mix of 42 queued
 * batch Jobs, written as users write them (a bare `gpu`, no cpu/memory requests, placement by Quartermaster's
 * annotations only), over five ResourceFlavors (whole A100, A100 MIG 1g.5gb, on-demand H100, spot H100, CPU).
 *
 * What it shows:
 * - every Job comes back from CREATE suspended by Kueue and with its pod template outfitted by Quartermaster
 *   (`/mutate/jobs`: resources renamed and defaulted, GPU tolerations, accelerator/partition/interruptible
 *   affinity), so Kueue picks each Job's flavor from what its pods will ask for: the flavor's taints are only
 *   tolerated through Quartermaster's tolerations, and only the flavor the affinity allows is compatible;
 * - Jobs are admitted in quota order: the ClusterQueue is StrictFIFO, and at every moment the admitted Jobs are
 *   exactly the longest run of the oldest unfinished Jobs that fits the quotas, the first that does not fit
 *   blocking the rest (the Jobs are created a second apart: Kueue orders by creation time, at 1 s resolution);
 * - every admitted Job's pods are bound by kube-scheduler onto a node its flavor's nodeLabels select, and carry
 *   Quartermaster's outfitting unchanged from the template (nothing Kueue read was changed at pod CREATE); none is
 *   left admitted with unbound pods, none stranded by a refused UPDATE (every Job ends Complete);
 * - Kueue's quota reservation per flavor equals the sum of the GPU requests of the admitted Jobs' pods.
 *
 * The nodes carry Karpenter's capacity-type label with both values (`on-demand`, `spot`), the flavors name it,
 * and the policy's interruptible placement uses it: a flavor can only tell spot nodes from the others by a label
 * both carry (a ResourceFlavor's nodeLabels cannot say NotIn), see docs/admission.md, "With Kueue: queued jobs".
 *
 * Every wait is bounded (cp.until); nothing asserts on elapsed time. Skips, saying why, when QM_KUEUE_BIN is unset.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION, ANNOTATION_INTERRUPTIBLE } from "../../src/core/keys.js";
import {
  A100_MIG_DISABLED,
  A100_MIXED,
  CPU_NODE,
  H100_NO_MIG,
  NVIDIA_GPU_TAINT,
  clusterNode,
  withLabels,
  type ClusterNode,
  type Taint,
} from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
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
} from "./harness/kueue.js";
import { startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { JOB_CONTROLLER } from "./harness/trainer.js";
import { createNamespace, registerOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kueueBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-queued";
const CLUSTER_QUEUE = "gpu-cluster-queue";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const GPU = "nvidia.com/gpu";
const MIG = "nvidia.com/mig-1g.5gb";
const CAPACITY = "karpenter.sh/capacity-type";
const SPOT_TAINT: Taint = { key: CAPACITY, value: "spot", effect: "NoSchedule" };
const GPU_TAINT = { key: NVIDIA_GPU_TAINT.key, value: NVIDIA_GPU_TAINT.value, effect: NVIDIA_GPU_TAINT.effect };
const H100 = H100_NO_MIG.labels[PRODUCT]!;
const A100 = A100_MIG_DISABLED.labels[PRODUCT]!;

const onDemand = { [CAPACITY]: "on-demand" };
const CLUSTER: readonly ClusterNode[] = [
  clusterNode(withLabels(A100_MIG_DISABLED, onDemand, "a100"), { zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  clusterNode(withLabels(A100_MIXED, onDemand, "a100-mig"), { zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  clusterNode(withLabels(H100_NO_MIG, onDemand, "h100"), { zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 128, memoryGi: 1024 }),
  // The spot node is the largest: the scheduler's least-allocated scoring would prefer it for any pod allowed there.
  clusterNode(withLabels(H100_NO_MIG, { [CAPACITY]: "spot" }, "h100-spot"), {
    zone: "zone-b",
    taints: [NVIDIA_GPU_TAINT, SPOT_TAINT],
    cpu: 256,
    memoryGi: 2048,
  }),
  clusterNode(withLabels(CPU_NODE, onDemand, "cpu"), { zone: "zone-a", cpu: 64, memoryGi: 512 }),
];

/** The flavors, tried in this order; each names its nodes' labels and taints as an administrator would. */
const FLAVORS: Flavor[] = [
  { name: "a100", nodeLabels: { [PRODUCT]: A100, "nvidia.com/mig.config": "all-disabled", ...onDemand }, nodeTaints: [GPU_TAINT] },
  {
    name: "a100-mig",
    nodeLabels: { [PRODUCT]: A100, "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": A100_MIXED.labels["nvidia.com/mig.config"]! },
    nodeTaints: [GPU_TAINT],
  },
  { name: "h100", nodeLabels: { [PRODUCT]: H100, ...onDemand }, nodeTaints: [GPU_TAINT] },
  { name: "spot", nodeLabels: { [PRODUCT]: H100, [CAPACITY]: "spot" }, nodeTaints: [GPU_TAINT, SPOT_TAINT] },
  { name: "cpu", nodeLabels: { "node.kubernetes.io/instance-type": CPU_NODE.labels["node.kubernetes.io/instance-type"]!, ...onDemand } },
];
/** Nominal quota per flavor: two GPU Jobs at a time in each GPU flavor, two CPU Jobs in `cpu`. */
const QUOTA: Record<string, Record<string, number | string>> = {
  a100: { cpu: 64, memory: "512Gi", [GPU]: 8, [MIG]: 0 },
  "a100-mig": { cpu: 64, memory: "512Gi", [GPU]: 0, [MIG]: 4 },
  h100: { cpu: 64, memory: "512Gi", [GPU]: 8, [MIG]: 0 },
  spot: { cpu: 64, memory: "512Gi", [GPU]: 8, [MIG]: 0 },
  cpu: { cpu: 4, memory: "64Gi", [GPU]: 0, [MIG]: 0 },
};

const POLICY = `# Defaults as documented, interruptible placement on Karpenter's capacity-type label.
resources:
  defaultRequests: {cpu: "2", memory: 8Gi}
interruptible:
  tolerations: [{key: ${CAPACITY}, operator: Equal, value: spot, effect: NoSchedule}]
  nodeRequirement: {key: ${CAPACITY}, operator: In, values: [spot]}
  nonInterruptibleNodeRequirement: {key: ${CAPACITY}, operator: NotIn, values: [spot]}
`;

/** A job of the mix: the flavor it must end in, the pods, and how its author wrote its template. */
interface MixJob {
  name: string;
  flavor: string;
  pods: number;
  annotations: Record<string, string>;
  resources: Obj;
  /** The GPU resource (after Quartermaster's renaming) and per-pod count the pods must request. */
  gpu?: { resource: string; count: number };
}

/** Round r of the mix: one Job per flavor, written differently from round to round (held-out forms). */
function round(r: number): MixJob[] {
  const bare = r % 2 === 0;
  return [
    // Whole A100s, by the accelerator annotation; every other one with a bare `gpu` and no requests at all.
    {
      name: `a100-${r}`,
      flavor: "a100",
      pods: 1,
      annotations: { [ANNOTATION_ACCELERATOR]: A100 },
      resources: bare ? { limits: { gpu: "4" } } : { limits: { [GPU]: "4" }, requests: { cpu: "8", memory: "64Gi" } },
      gpu: { resource: GPU, count: 4 },
    },
    // On-demand H100s: two pods of two GPUs.
    {
      name: `h100-${r}`,
      flavor: "h100",
      pods: 2,
      annotations: { [ANNOTATION_ACCELERATOR]: H100 },
      resources: bare ? { limits: { gpu: "2" } } : { requests: { [GPU]: "2" }, limits: { [GPU]: "2" } },
      gpu: { resource: GPU, count: 2 },
    },
    // Spot H100s: interruptible.
    {
      name: `spot-${r}`,
      flavor: "spot",
      pods: 1,
      annotations: { [ANNOTATION_INTERRUPTIBLE]: "true", [ANNOTATION_ACCELERATOR]: H100 },
      resources: { limits: { [bare ? "gpu" : GPU]: "4" } },
      gpu: { resource: GPU, count: 4 },
    },
    ...(r < 3
      ? [
          // MIG slices by the partition annotation.
          {
            name: `mig-${r}`,
            flavor: "a100-mig",
            pods: 1,
            annotations: { [ANNOTATION_GPU_PARTITION]: "1g.5gb" },
            resources: { limits: { [MIG]: "2" } },
            gpu: { resource: MIG, count: 2 },
          },
          // CPU only: the cpu/memory defaults are what Kueue charges.
          { name: `cpu-${r}`, flavor: "cpu", pods: 1, annotations: {}, resources: {} },
        ]
      : []),
  ];
}
const ROUNDS = 12;
const MIX: MixJob[] = Array.from({ length: ROUNDS }, (_, r) => round(r)).flat();

const batchJob = (j: MixJob): Obj => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: j.name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
  spec: {
    parallelism: j.pods,
    completions: j.pods,
    completionMode: "Indexed",
    backoffLimit: 0,
    template: {
      metadata: { annotations: j.annotations },
      spec: { restartPolicy: "Never", containers: [{ name: "train", image: "registry.invalid/train:1", resources: j.resources }] },
    },
  },
});

/** How many of `flavor`'s Jobs its quota holds at once (every Job of a flavor asks for the same). */
function slots(flavor: string): number {
  const j = MIX.find((m) => m.flavor === flavor)!;
  if (j.gpu) return Math.floor(Number(QUOTA[flavor]![j.gpu.resource]) / (j.gpu.count * j.pods));
  return Math.floor(Number(QUOTA[flavor]!.cpu) / 2); // the cpu default, 2 per pod
}

describe("Kueue v0.19.2 with Quartermaster's webhooks: a queued mix over five flavors", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let kueue: Controller | undefined;
  let wh: WebhookProcess | undefined;
  const started = performance.now();
  const stored = new Map<string, Obj>(); // Job name → the Job as CREATE stored it

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane({ scheduler: true, controllers: [JOB_CONTROLLER] });
    nodes = await startVirtualNodes(cp, CLUSTER);
    await installKueueCrds(cp);
    kueue = await startKueue(cp, bins.bin);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    wh = await registerOwnWebhook(cp, POLICY);
    await createQueues(cp, {
      namespace: NS,
      flavors: FLAVORS,
      clusterQueue: CLUSTER_QUEUE,
      localQueue: LOCAL_QUEUE,
      quota: (f) => QUOTA[f.name]!,
      queueingStrategy: "StrictFIFO",
    });
    // Quartermaster's jobs.mutate in effect for queued batch Jobs (its configuration was just applied).
    let probe = 0;
    await cp.until("Quartermaster's jobs.mutate to outfit a queued batch Job", async () => {
      const r = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs?dryRun=All`, {
        ...batchJob(MIX[0]!),
        metadata: { ...batchJob(MIX[0]!).metadata, name: `probe-${++probe}` },
      });
      return r.status === 201 && (r.body.spec.template.spec.tolerations ?? []).length > 0;
    });
  });
  after(async () => {
    await wh?.stop();
    nodes?.stop();
    await kueue?.stop();
    await cp?.stop();
    console.log(`kueue mix suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const failMsg = (what: string): string => `${what}\n--- kueue\n${kueue?.logs(30) ?? ""}`;
  const getJob = async (name: string): Promise<Obj> => (await cp.api("GET", `/apis/batch/v1/namespaces/${NS}/jobs/${name}`)).body;
  const podsOf = async (job: string): Promise<Obj[]> =>
    (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=batch.kubernetes.io/job-name=${job}`)).body.items as Obj[];
  const workloads = async (): Promise<Obj[]> => {
    const r = await cp.api("GET", `${KUEUE_API}/namespaces/${NS}/workloads`);
    return r.status === 200 ? (r.body.items as Obj[]) : [];
  };
  const jobOf = (wl: Obj): string | undefined => (wl.metadata.ownerReferences ?? []).find((o: Obj) => o.controller && o.kind === "Job")?.name;

  it(`${MIX.length} Jobs are created suspended, their templates outfitted by Quartermaster`, async () => {
    for (const j of MIX) {
      const t0 = Date.now();
      const res = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, batchJob(j));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const job = res.body as Obj;
      assert.equal(job.spec.suspend, true, `${j.name}: not suspended at CREATE`);
      const tmpl = job.spec.template.spec;
      const res0 = tmpl.containers[0].resources;
      if (j.gpu) {
        assert.equal(res0.requests?.[j.gpu.resource], String(j.gpu.count), `${j.name}: ${JSON.stringify(res0)}`);
        assert.equal(res0.limits?.gpu, undefined, `${j.name}: bare gpu left in ${JSON.stringify(res0)}`);
        assert.ok(
          (tmpl.tolerations ?? []).some((t: Obj) => t.key === GPU_TAINT.key),
          `${j.name}: no GPU toleration in ${JSON.stringify(tmpl.tolerations)}`,
        );
      }
      assert.ok(res0.requests?.cpu && res0.requests?.memory, `${j.name}: no cpu/memory requests: ${JSON.stringify(res0)}`);
      assert.ok(job.spec.template.metadata?.annotations?.["quartermaster.dev/mutations"], `${j.name}: template not outfitted`);
      stored.set(j.name, job);
      // The next one second later: Kueue orders Workloads by their creation time (1 s resolution).
      await new Promise((r) => setTimeout(r, Math.max(0, 1050 - (Date.now() - t0))));
    }
    assert.equal(stored.size, MIX.length);
  });

  it("admitted in quota order (StrictFIFO), placed on the flavor's nodes, quota usage equal to the pods' GPU requests; every Job completes", async () => {
    assert.equal(stored.size, MIX.length, "the Jobs of the first test");
    const flavorOfJob = new Map(MIX.map((j) => [j.name, j.flavor]));
    const finished = new Set<string>();
    const nodeByName = new Map(CLUSTER.map((n) => [n.name, n]));
    let waves = 0;
    while (finished.size < MIX.length) {
      waves++;
      assert.ok(waves <= MIX.length, "a wave admitted nothing");
      // StrictFIFO: the oldest unfinished Jobs, in creation order, as long as each fits its flavor's quota; the
      // first that does not blocks the rest. Exactly these must be admitted, and no other.
      const expected = new Set<string>();
      const held = new Map<string, number>();
      for (const j of MIX.filter((m) => !finished.has(m.name))) {
        if ((held.get(j.flavor) ?? 0) >= slots(j.flavor)) break;
        held.set(j.flavor, (held.get(j.flavor) ?? 0) + 1);
        expected.add(j.name);
      }
      let admitted = new Map<string, Obj>();
      await cp.until(
        `wave ${waves}: the Workloads of ${[...expected].join(", ")} admitted`,
        async () => {
          admitted = new Map();
          for (const wl of await workloads()) {
            const job = jobOf(wl);
            if (!job || finished.has(job) || !hasCondition(wl, "Admitted")) continue;
            admitted.set(job, wl);
          }
          const early = [...admitted.keys()].filter((n) => !expected.has(n));
          if (early.length > 0) {
            const order = (await workloads())
              .map((w) => `${jobOf(w)} created ${w.metadata.creationTimestamp}${hasCondition(w, "Admitted") ? " admitted" : ""}`)
              .join("\n");
            assert.fail(failMsg(`wave ${waves}: ${early.join(", ")} admitted before their turn; expected only ${[...expected].join(", ")}\n${order}`));
          }
          return admitted.size === expected.size;
        },
        120_000,
        250,
      );
      const reservedByFlavor = new Map<string, Map<string, number>>();
      for (const [name, wl] of admitted) {
        const want = flavorOfJob.get(name)!;
        const flavors = (wl.status.admission.podSetAssignments as Obj[]).map((a) => Object.values(a.flavors as Record<string, string>));
        assert.deepEqual([...new Set(flavors.flat())], [want], failMsg(`${name}: admitted into ${JSON.stringify(flavors)}, not ${want}`));
        const flavor = FLAVORS.find((f) => f.name === want)!;
        const mix = MIX.find((j) => j.name === name)!;
        let pods: Obj[] = [];
        await cp.until(
          `${mix.pods} pods of ${name} bound`,
          async () => (pods = await podsOf(name)).length === mix.pods && pods.every((p) => p.spec.nodeName),
          120_000,
          250,
        );
        const template = stored.get(name)!.spec.template.spec;
        for (const p of pods) {
          const node = nodeByName.get(p.spec.nodeName)!;
          for (const [k, v] of Object.entries(flavor.nodeLabels))
            assert.equal(node.labels[k], v, `${p.metadata.name} on ${node.name}, not a node of flavor ${want}`);
          // Quartermaster's outfitting, as CREATE wrote it into the template: unchanged at pod CREATE.
          assert.deepEqual(p.spec.containers[0].resources, template.containers[0].resources, `${p.metadata.name}: resources`);
          assert.deepEqual(p.spec.affinity, template.affinity, `${p.metadata.name}: affinity`);
          for (const t of template.tolerations ?? [])
            assert.ok(
              p.spec.tolerations.some((x: Obj) => JSON.stringify(x) === JSON.stringify(t)),
              `${p.metadata.name}: toleration ${JSON.stringify(t)}`,
            );
          const gpus = reservedByFlavor.get(want) ?? new Map<string, number>();
          for (const [r, q] of Object.entries(p.spec.containers[0].resources.requests as Record<string, string>))
            if (r === GPU || r === MIG) gpus.set(r, (gpus.get(r) ?? 0) + Number(q));
          reservedByFlavor.set(want, gpus);
        }
      }
      // Kueue's reservation per flavor and GPU resource: the sum of the admitted Jobs' pods' GPU requests (its
      // ClusterQueue status is written a moment after the admissions).
      let last = "";
      await cp
        .until(
          `wave ${waves}: Kueue's reservation per flavor equal to the pods' GPU requests`,
          async () => {
            const cq = (await cp.api("GET", `${KUEUE_API}/clusterqueues/${CLUSTER_QUEUE}`)).body;
            const diffs: string[] = [];
            for (const f of FLAVORS) {
              const reserved = (cq.status?.flavorsReservation ?? []).find((x: Obj) => x.name === f.name);
              for (const r of [GPU, MIG]) {
                const kueueSays = Number((reserved?.resources ?? []).find((x: Obj) => x.name === r)?.total ?? 0);
                const pods = reservedByFlavor.get(f.name)?.get(r) ?? 0;
                if (kueueSays !== pods) diffs.push(`${f.name} ${r}: Kueue ${kueueSays}, pods ${pods}`);
              }
            }
            last = diffs.join("; ");
            return diffs.length === 0;
          },
          30_000,
          250,
        )
        .catch((err: Error) => assert.fail(failMsg(`${err.message}: ${last}`)));
      // Finish this wave as a kubelet would; the job-controller completes the Jobs and Kueue frees their quota.
      for (const name of admitted.keys()) await succeedPods(cp, await podsOf(name));
      for (const name of admitted.keys()) {
        await cp.until(`Job ${name} to complete`, async () => hasCondition(await getJob(name), "Complete"), 120_000, 250);
        finished.add(name);
      }
    }
    // None stranded: every Job completed, none left suspended or refused.
    for (const j of MIX) assert.ok(hasCondition(await getJob(j.name), "Complete"), `${j.name} did not complete`);
    console.log(`kueue mix: ${MIX.length} Jobs over ${FLAVORS.length} flavors admitted and completed in ${waves} waves`);
  });

  it("plain pods queued by label: outfitted at CREATE, gated by Kueue, admitted into the flavor their annotation asks for, placed there", async () => {
    const names = ["pod-h100-0", "pod-h100-1"];
    for (const name of names) {
      const r = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE }, annotations: { [ANNOTATION_ACCELERATOR]: H100 } },
        spec: { restartPolicy: "Never", containers: [{ name: "train", image: "registry.invalid/train:1", resources: { limits: { gpu: "4" } } }] },
      });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      const spec = r.body.spec;
      assert.ok(
        (spec.schedulingGates ?? []).some((g: Obj) => g.name === "kueue.x-k8s.io/admission"),
        `${name}: not gated by Kueue: ${JSON.stringify(spec.schedulingGates)}`,
      );
      assert.equal(spec.containers[0].resources.requests?.[GPU], "4", `${name}: ${JSON.stringify(spec.containers[0].resources)}`);
      assert.ok(
        (spec.tolerations ?? []).some((t: Obj) => t.key === GPU_TAINT.key),
        `${name}: tolerations ${JSON.stringify(spec.tolerations)}`,
      );
      assert.ok(JSON.stringify(spec.affinity ?? {}).includes(H100), `${name}: affinity ${JSON.stringify(spec.affinity)}`);
    }
    const node = CLUSTER.find((n) => n.name === "h100")!;
    for (const name of names) {
      let pod: Obj = {};
      await cp
        .until(
          `pod ${name} admitted by Kueue and bound`,
          async () => (pod = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods/${name}`)).body).spec.nodeName !== undefined,
          120_000,
          250,
        )
        .catch((err: Error) => assert.fail(failMsg(`${err.message}: ${JSON.stringify(pod.status)}`)));
      assert.equal(pod.spec.nodeName, node.name, `${name} bound to ${pod.spec.nodeName}`);
      assert.equal(pod.spec.nodeSelector?.[PRODUCT], H100, `${name}: Kueue's nodeSelector ${JSON.stringify(pod.spec.nodeSelector)}`);
    }
    let last = "";
    await cp
      .until(
        "Kueue's reservation of the two pods' 8 GPUs in flavor h100",
        async () => {
          const cq = (await cp.api("GET", `${KUEUE_API}/clusterqueues/${CLUSTER_QUEUE}`)).body;
          const h100 = (cq.status?.flavorsReservation ?? []).find((x: Obj) => x.name === "h100");
          last = JSON.stringify(h100?.resources);
          return (h100?.resources ?? []).find((x: Obj) => x.name === GPU)?.total === "8";
        },
        30_000,
        250,
      )
      .catch((err: Error) => assert.fail(`${err.message}: ${last}`));
  });
});

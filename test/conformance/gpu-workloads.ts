/**
 * @module
 * The workloads of the GPU differential conformance suite (`gpu-differential.test.ts`, issue 45): a seeded,
 * pure generator of training workloads of every kind whose GPUs Quartermaster predicts at CREATE, each with
 * what its controller is expected to make of it (how many pods) so the suite knows when to stop waiting. The
 * GPU counts are not computed here: the suite compares Quartermaster's prediction (its job webhook's audit
 * line) with the pods the real controllers create, and this module only says how many pods to wait for.
 *
 * Variety is by table, not noise: each kind walks a fixed list of pod-template layouts (main container only,
 * a second GPU container, a GPU init container larger than the rest, a native sidecar with GPUs, both) times
 * the resource names a GPU is asked for by (`nvidia.com/gpu`, a bare `gpu`, a DeviceClass's
 * extended-resource name `deviceclass.resource.kubernetes.io/gpu.nvidia.com`, a MIG slice, requests only,
 * cpu only); the seeded generator ({@link rng}) picks the counts (GPUs per container, replicas) so a seed
 * reproduces the whole set.
 *
 * Kinds: the training operator v1.9.4's PyTorchJob, TFJob, XGBoostJob, JAXJob, PaddleJob; Trainer v2's TrainJob
 * over runtimes the suite installs ({@link RUNTIMES}); JobSet v1alpha2; batch/v1 Job (NonIndexed and Indexed,
 * parallelism against completions); and DRA: Jobs and PyTorchJobs whose pods ask for GPUs through
 * ResourceClaimTemplates (exact counts, `firstAvailable`, `allocationMode: All`, two requests in one claim).
 */

export type Obj = Record<string, any>;

/** mulberry32: a small seeded PRNG, so a seed reproduces the set (printed by the suite). */
export function rng(seed: number): { int(lo: number, hi: number): number; pick<T>(xs: readonly T[]): T } {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
  };
}

export const IMAGE = "registry.invalid/train:1";
export const GPU = "nvidia.com/gpu";
export const BARE_GPU = "gpu";
export const DEVICE_CLASS = "gpu.nvidia.com";
export const DC_RESOURCE = `deviceclass.resource.kubernetes.io/${DEVICE_CLASS}`;
export const MIG = "nvidia.com/mig-1g.5gb";

/** How a container asks for its GPUs. */
export type Ask = "limits" | "both" | "bare" | "deviceclass" | "mig" | "cpu";
const ASKS_ALL: readonly Ask[] = ["limits", "both", "bare", "deviceclass", "mig", "cpu"];
/** Without a bare `gpu`, which the apiserver refuses in a batch Job's template (it is renamed only in pods and in TrainJobs). */
const ASKS_BATCH: readonly Ask[] = ["limits", "both", "deviceclass", "mig", "cpu"];

/** A container's resources asking for `n` GPUs the `ask` way. */
export function resources(ask: Ask, n: number): Obj {
  const q = String(n);
  switch (ask) {
    case "limits":
      return { limits: { [GPU]: q } };
    case "both":
      return { requests: { [GPU]: q, cpu: "100m" }, limits: { [GPU]: q } };
    case "bare":
      return { limits: { [BARE_GPU]: q } };
    case "deviceclass":
      return { limits: { [DC_RESOURCE]: q } };
    case "mig":
      return { limits: { [MIG]: q } };
    case "cpu":
      return { limits: { cpu: "1" } };
  }
}

/** A pod template's container layout: who carries GPUs. */
export type Layout = "main" | "two" | "init" | "sidecar" | "init+sidecar";
const LAYOUTS: readonly Layout[] = ["main", "two", "init", "sidecar", "init+sidecar"];

/** A pod spec of `layout` whose main container is `main`, GPUs `n` (and `m` for the second GPU container). */
export function podSpec(main: string, layout: Layout, ask: Ask, n: number, m: number, extra: Obj = {}): Obj {
  const c = (name: string, k: number): Obj => ({ name, image: IMAGE, resources: resources(ask, k) });
  const spec: Obj = { containers: [c(main, n)], ...extra };
  if (layout === "two") spec.containers.push(c("helper", m));
  // A regular init container larger than the rest: the pod's effective request is its (Kubernetes' rule).
  if (layout === "init" || layout === "init+sidecar") spec.initContainers = [c("warmup", n + m)];
  // A native sidecar (init container, restartPolicy Always): counted beside the regular containers.
  if (layout === "sidecar" || layout === "init+sidecar") (spec.initContainers ??= []).unshift({ ...c("agent", m), restartPolicy: "Always" });
  return spec;
}

export interface Workload {
  kind: string;
  name: string;
  /** REST path of the collection to POST to (namespace filled in by the suite). */
  plural: string;
  group: string;
  body: Obj;
  /** Pods its controllers make (all at once, none finishing): the suite waits for this many. */
  pods: number;
  /** One line: what the row of the table is (layout, ask, shape). */
  shape: string;
  /** The label its pods carry with its name. */
  podLabel: string;
}

/** The objects to create before the workloads (runtimes, claim templates), in order. */
export interface Prerequisite {
  plural: string;
  group: string;
  /** Cluster-scoped (ClusterTrainingRuntime). */
  cluster?: boolean;
  body: Obj;
}

const V1 = "kubeflow.org/v1";
const TRAINER = "trainer.kubeflow.org/v1alpha1";
const JOBSET = "jobset.x-k8s.io/v1alpha2";
export const JOB_NAME_V1 = "training.kubeflow.org/job-name";
export const JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name";
export const BATCH_JOB_NAME = "batch.kubernetes.io/job-name";

interface V1Kind {
  kind: string;
  plural: string;
  specs: string;
  container: string;
  /** Replica shapes: type → replicas (undefined: left out, 1). */
  shapes: Array<Record<string, number | undefined>>;
}

const V1_KINDS: V1Kind[] = [
  {
    kind: "PyTorchJob",
    plural: "pytorchjobs",
    specs: "pytorchReplicaSpecs",
    container: "pytorch",
    shapes: [{ Master: 1, Worker: 2 }, { Worker: 2 }, { Master: 1 }, { Master: 1, Worker: 3 }, { Master: undefined, Worker: 1 }],
  },
  {
    kind: "TFJob",
    plural: "tfjobs",
    specs: "tfReplicaSpecs",
    container: "tensorflow",
    shapes: [{ Chief: 1, Worker: 2 }, { PS: 1, Worker: 2 }, { Worker: 3 }, { Chief: 1, PS: 1, Worker: 1, Evaluator: 1 }, { Worker: undefined }],
  },
  {
    kind: "XGBoostJob",
    plural: "xgboostjobs",
    specs: "xgbReplicaSpecs",
    container: "xgboost",
    shapes: [{ Master: 1, Worker: 2 }, { Master: 1 }, { Master: 1, Worker: 1 }],
  },
  { kind: "JAXJob", plural: "jaxjobs", specs: "jaxReplicaSpecs", container: "jax", shapes: [{ Worker: 2 }, { Worker: 1 }, { Worker: 3 }] },
  {
    kind: "PaddleJob",
    plural: "paddlejobs",
    specs: "paddleReplicaSpecs",
    container: "paddle",
    shapes: [{ Master: 1, Worker: 2 }, { Worker: 2 }, { Master: 1, Worker: 1 }],
  },
];

/** `per` v1 jobs of each of the five kinds: layouts × asks, replica shapes in turn, GPU counts seeded. */
function v1Workloads(r: ReturnType<typeof rng>, per: number): Workload[] {
  const out: Workload[] = [];
  for (const k of V1_KINDS) {
    for (let i = 0; i < per; i++) {
      const layout = LAYOUTS[i % LAYOUTS.length]!;
      const ask = ASKS_ALL[Math.floor(i / LAYOUTS.length) % ASKS_ALL.length]!;
      const shape = k.shapes[i % k.shapes.length]!;
      const specs: Obj = {};
      let pods = 0;
      // Each replica type its own counts: a Master of 1 GPU beside Workers of 4 is what models get wrong.
      for (const [type, replicas] of Object.entries(shape)) {
        pods += replicas ?? 1;
        specs[type] = {
          ...(replicas === undefined ? {} : { replicas }),
          restartPolicy: "Never",
          template: { spec: podSpec(k.container, layout, ask, r.int(1, 4), r.int(1, 2)) },
        };
      }
      const name = `${k.kind.toLowerCase().replace(/job$/, "")}-${String(i).padStart(3, "0")}`;
      out.push({
        kind: k.kind,
        name,
        plural: k.plural,
        group: V1,
        pods,
        podLabel: JOB_NAME_V1,
        shape: `${layout}/${ask} ${JSON.stringify(shape)}`,
        body: { apiVersion: V1, kind: k.kind, metadata: { name }, spec: { runPolicy: { cleanPodPolicy: "None" }, [k.specs]: specs } },
      });
    }
  }
  return out;
}

/**
 * The runtimes the TrainJobs run on. Each a (Cluster)TrainingRuntime; `trainerJob` the replicated Job that runs
 * the training nodes (found by Trainer by its `trainer.kubeflow.org/trainjob-ancestor-step: trainer` label, not by
 * its name); `nodeGpus` the GPUs its `node` container asks for itself; `others` the pods of its other replicated
 * Jobs (each `replicas` × `parallelism`) and their GPUs per pod.
 */
export interface Runtime {
  name: string;
  cluster: boolean;
  trainerJob: string;
  numNodes: number;
  nodeGpus: number;
  /** The node pod's init container / native sidecar with GPUs, if any. */
  nodeLayout: Layout;
  others: Array<{ name: string; replicas: number; parallelism: number; gpus: number }>;
  spec: Obj;
  /** Installed with upstream's default runtimes: not created by the suite. */
  preinstalled?: boolean;
}

const ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step";

function runtime(o: Omit<Runtime, "spec" | "preinstalled">): Runtime {
  const trainerJob = {
    name: o.trainerJob,
    template: {
      metadata: { labels: { [ANCESTOR]: "trainer" } },
      spec: {
        template: {
          spec: podSpec("node", o.nodeLayout, o.nodeGpus > 0 ? "limits" : "cpu", o.nodeGpus, 1, { restartPolicy: "Never" }),
        },
      },
    },
  };
  const others = o.others.map((x) => ({
    name: x.name,
    replicas: x.replicas,
    template: {
      spec: {
        parallelism: x.parallelism,
        completions: x.parallelism,
        template: {
          spec: { restartPolicy: "Never", containers: [{ name: x.name, image: IMAGE, resources: resources(x.gpus > 0 ? "limits" : "cpu", x.gpus) }] },
        },
      },
    },
  }));
  return {
    ...o,
    spec: {
      mlPolicy: { numNodes: o.numNodes, torch: {} },
      template: { spec: { replicatedJobs: [...others, trainerJob] } },
    },
  };
}

export const RUNTIMES: Runtime[] = [
  // Upstream's own (installed with the default runtimes, not by the suite): 1 node, no resources.
  {
    ...runtime({ name: "torch-distributed", cluster: true, trainerJob: "node", numNodes: 1, nodeGpus: 0, nodeLayout: "main", others: [] }),
    preinstalled: true,
  },
  runtime({ name: "qm-torch-cpu", cluster: true, trainerJob: "node", numNodes: 1, nodeGpus: 0, nodeLayout: "main", others: [] }),
  runtime({ name: "qm-torch-2gpu", cluster: true, trainerJob: "node", numNodes: 2, nodeGpus: 2, nodeLayout: "main", others: [] }),
  runtime({ name: "qm-torch-sidecar", cluster: false, trainerJob: "node", numNodes: 1, nodeGpus: 1, nodeLayout: "sidecar", others: [] }),
  // The trainer Job is not named `node`: Trainer finds it by its label, and so must the model.
  runtime({ name: "qm-torch-renamed", cluster: true, trainerJob: "trainer", numNodes: 2, nodeGpus: 1, nodeLayout: "main", others: [] }),
  // A second replicated Job beside the trainer (no dependsOn: its pods are made at once too).
  runtime({
    name: "qm-torch-launcher",
    cluster: false,
    trainerJob: "workers",
    numNodes: 1,
    nodeGpus: 2,
    nodeLayout: "init",
    others: [{ name: "launcher", replicas: 1, parallelism: 1, gpus: 1 }],
  }),
];

/** A TrainJob's `spec.trainer.resourcesPerNode` variant: what it sets of the runtime's `node` container. */
type PerNode = "none" | "gpu-limits" | "gpu-requests" | "cpu-only" | "bare" | "deviceclass" | "both";
const PER_NODE: readonly PerNode[] = ["none", "gpu-limits", "gpu-requests", "cpu-only", "bare", "deviceclass", "both"];

function perNode(p: PerNode, n: number): Obj | undefined {
  const q = String(n);
  switch (p) {
    case "none":
      return undefined;
    case "gpu-limits":
      return { limits: { [GPU]: q } };
    case "gpu-requests":
      return { requests: { [GPU]: q } };
    case "cpu-only":
      return { limits: { cpu: "2" } };
    case "bare":
      return { limits: { [BARE_GPU]: q } };
    case "deviceclass":
      return { limits: { [DC_RESOURCE]: q } };
    case "both":
      return { requests: { [GPU]: q, cpu: "1" }, limits: { [GPU]: q } };
  }
}

/**
 * A runtime patch variant: what `spec.runtimePatches` changes in the trainer Job's pod template. Trainer v2.3's
 * CRD lets a patch set a container's env, volume mounts and security context, not its resources: `node-gpus`
 * writes resources all the same, which the apiserver prunes (the patch then changes nothing; a model reading the
 * patch's resources would over-count).
 */
type Patch = "none" | "annotations" | "node-gpus" | "node-selector";
const PATCHES: readonly Patch[] = ["none", "annotations", "node-gpus", "node-selector"];

function runtimePatch(p: Patch, rt: Runtime, n: number): Obj[] | undefined {
  if (p === "none") return undefined;
  const podTemplate: Obj =
    p === "annotations"
      ? { metadata: { annotations: { "example.com/note": "patched" } } }
      : p === "node-gpus"
        ? { spec: { containers: [{ name: "node", resources: { limits: { [GPU]: String(n) } } }] } }
        : { spec: { nodeSelector: { "kubernetes.io/os": "linux" } } };
  return [
    {
      manager: "qm-conformance.example.com/differential",
      trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name: rt.trainerJob, template: { spec: { template: podTemplate } } }] } } },
    },
  ];
}

function trainJobs(r: ReturnType<typeof rng>, count: number): Workload[] {
  const out: Workload[] = [];
  for (let i = 0; i < count; i++) {
    const rt = RUNTIMES[i % RUNTIMES.length]!;
    const pn = PER_NODE[Math.floor(i / RUNTIMES.length) % PER_NODE.length]!;
    const patch = PATCHES[i % PATCHES.length]!;
    // numNodes set on every other pass over the runtimes, from the runtime's mlPolicy on the others: each
    // runtime gets both.
    const numNodes = Math.floor(i / RUNTIMES.length) % 2 === 1 ? r.int(1, 3) : undefined;
    const resourcesPerNode = perNode(pn, r.int(1, 4));
    const patches = runtimePatch(patch, rt, r.int(1, 3));
    const name = `tj-${String(i).padStart(3, "0")}`;
    const nodes = numNodes ?? rt.numNodes;
    out.push({
      kind: "TrainJob",
      name,
      plural: "trainjobs",
      group: TRAINER,
      pods: nodes + rt.others.reduce((s, x) => s + x.replicas * x.parallelism, 0),
      podLabel: JOBSET_NAME,
      shape: `${rt.name} numNodes=${numNodes ?? `(${rt.numNodes})`} resourcesPerNode=${pn} patch=${patch}`,
      body: {
        apiVersion: TRAINER,
        kind: "TrainJob",
        metadata: { name },
        spec: {
          runtimeRef: { name: rt.name, kind: rt.cluster ? "ClusterTrainingRuntime" : "TrainingRuntime", apiGroup: "trainer.kubeflow.org" },
          ...(numNodes !== undefined || resourcesPerNode
            ? { trainer: { ...(numNodes !== undefined ? { numNodes } : {}), ...(resourcesPerNode ? { resourcesPerNode } : {}) } }
            : {}),
          ...(patches ? { runtimePatches: patches } : {}),
        },
      },
    });
  }
  return out;
}

/** A batch/v1 Job's spec of `parallelism`/`completions` (either unset), Indexed or not, around `pod`. */
function jobSpec(pod: Obj, parallelism: number | undefined, completions: number | undefined, indexed: boolean): Obj {
  return {
    ...(parallelism !== undefined ? { parallelism } : {}),
    ...(completions !== undefined ? { completions } : {}),
    ...(indexed ? { completionMode: "Indexed" } : {}),
    backoffLimit: 0,
    template: { spec: { restartPolicy: "Never", ...pod } },
  };
}

/** Pods a Job's controller makes at once, none finishing: min(parallelism, completions), parallelism defaulting to 1, completions to parallelism. */
export function jobPods(parallelism: number | undefined, completions: number | undefined): number {
  const p = parallelism ?? 1;
  return completions === undefined ? p : Math.min(p, completions);
}

/** Parallelism against completions: (parallelism, completions, indexed). */
const JOB_SHAPES: Array<[number | undefined, number | undefined, boolean]> = [
  [undefined, undefined, false],
  [3, undefined, false],
  [2, 4, false],
  [4, 2, false],
  [3, 3, true],
  [2, 5, true],
  [undefined, 2, true],
  [3, 1, false],
];

function batchJobs(r: ReturnType<typeof rng>, count: number): Workload[] {
  const out: Workload[] = [];
  for (let i = 0; i < count; i++) {
    const layout = LAYOUTS[i % LAYOUTS.length]!;
    const ask = ASKS_BATCH[Math.floor(i / LAYOUTS.length) % ASKS_BATCH.length]!;
    const [parallelism, completions, indexed] = JOB_SHAPES[i % JOB_SHAPES.length]!;
    const name = `bj-${String(i).padStart(3, "0")}`;
    out.push({
      kind: "Job",
      name,
      plural: "jobs",
      group: "batch/v1",
      pods: jobPods(parallelism, completions),
      podLabel: BATCH_JOB_NAME,
      shape: `${layout}/${ask} parallelism=${parallelism ?? "-"} completions=${completions ?? "-"}${indexed ? " Indexed" : ""}`,
      body: {
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: { name },
        spec: jobSpec(podSpec("main", layout, ask, r.int(1, 4), r.int(1, 2)), parallelism, completions, indexed),
      },
    });
  }
  return out;
}

function jobSets(r: ReturnType<typeof rng>, count: number): Workload[] {
  const out: Workload[] = [];
  for (let i = 0; i < count; i++) {
    const ask = ASKS_BATCH[i % ASKS_BATCH.length]!;
    const nJobs = 1 + (i % 3);
    const replicatedJobs: Obj[] = [];
    let pods = 0;
    const shape: string[] = [];
    for (let j = 0; j < nJobs; j++) {
      const layout = LAYOUTS[(i + j) % LAYOUTS.length]!;
      // JobSet makes its Jobs Indexed, which needs completions: left out, they are the parallelism.
      const [parallelism, given, indexed] = JOB_SHAPES[(i * 3 + j) % JOB_SHAPES.length]!;
      const completions = given ?? parallelism ?? 1;
      const replicas = r.int(1, 2);
      pods += replicas * jobPods(parallelism, completions);
      shape.push(`rj${j}: ${replicas}× ${layout} p=${parallelism ?? "-"} c=${completions ?? "-"}`);
      replicatedJobs.push({
        name: `rj${j}`,
        replicas,
        template: { spec: jobSpec(podSpec("main", layout, ask, r.int(1, 3), 1), parallelism, completions, indexed) },
      });
    }
    const name = `js-${String(i).padStart(3, "0")}`;
    out.push({
      kind: "JobSet",
      name,
      plural: "jobsets",
      group: JOBSET,
      pods,
      podLabel: JOBSET_NAME,
      shape: `${ask} ${shape.join("; ")}`,
      body: { apiVersion: JOBSET, kind: "JobSet", metadata: { name }, spec: { replicatedJobs } },
    });
  }
  return out;
}

/** A ResourceClaimTemplate's device requests: what a DRA row asks for. */
export type ClaimShape = { exact: number } | { firstAvailable: number[] } | { all: true } | { two: [number, number] };
const CLAIM_SHAPES: readonly ClaimShape[] = [
  { exact: 1 },
  { exact: 2 },
  { firstAvailable: [2, 1] },
  { firstAvailable: [1, 3] },
  { two: [1, 2] },
  { all: true },
];

function claimSpec(c: ClaimShape): Obj {
  const exactly = (count: number | "All") => ({ deviceClassName: DEVICE_CLASS, ...(count === "All" ? { allocationMode: "All" } : { count }) });
  const requests =
    "exact" in c
      ? [{ name: "gpu", exactly: exactly(c.exact) }]
      : "all" in c
        ? [{ name: "gpu", exactly: exactly("All") }]
        : "two" in c
          ? c.two.map((n, k) => ({ name: `gpu${k}`, exactly: exactly(n) }))
          : [{ name: "gpu", firstAvailable: c.firstAvailable.map((n, k) => ({ name: `alt${k}`, ...exactly(n) })) }];
  return { devices: { requests } };
}

const claimLabel = (c: ClaimShape): string =>
  "exact" in c ? `exact ${c.exact}` : "all" in c ? "All" : "two" in c ? `two ${c.two.join("+")}` : `firstAvailable ${c.firstAvailable.join(",")}`;

/**
 * Where a pod whose claim takes every device of a node (`allocationMode: All`) goes: nodes kept for such pods
 * (the suite taints and labels them), so no other pod's devices are ever on them and every All claim finds a
 * whole node.
 */
export const WHOLE_NODE = "qm-diff.example.com/whole-node";
const WHOLE_NODE_PLACEMENT: Obj = {
  nodeSelector: { [WHOLE_NODE]: "true" },
  tolerations: [{ key: WHOLE_NODE, operator: "Exists", effect: "NoSchedule" }],
};

/** DRA rows: a claim template each, a batch Job or a PyTorchJob whose pods use it (with a container GPU too on some). */
function draWorkloads(count: number): { workloads: Workload[]; templates: Prerequisite[] } {
  const workloads: Workload[] = [];
  const templates: Prerequisite[] = [];
  for (let i = 0; i < count; i++) {
    const c = CLAIM_SHAPES[i % CLAIM_SHAPES.length]!;
    const asPyTorch = Math.floor(i / CLAIM_SHAPES.length) % 2 === 1;
    const withContainerGpu = Math.floor(i / (CLAIM_SHAPES.length * 2)) % 2 === 1;
    const name = `dra-${String(i).padStart(3, "0")}`;
    templates.push({
      plural: "resourceclaimtemplates",
      group: "resource.k8s.io/v1",
      body: { apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", metadata: { name }, spec: { spec: claimSpec(c) } },
    });
    // All takes a whole node's devices: one pod only; the others two.
    const replicas = "all" in c ? 1 : 2;
    const pod = (main: string): Obj => ({
      ...("all" in c ? WHOLE_NODE_PLACEMENT : {}),
      containers: [{ name: main, image: IMAGE, resources: { claims: [{ name: "gpus" }], ...(withContainerGpu ? { limits: { [GPU]: "1" } } : {}) } }],
      resourceClaims: [{ name: "gpus", resourceClaimTemplateName: name }],
    });
    const shape = `${claimLabel(c)}${withContainerGpu ? " + 1 nvidia.com/gpu" : ""}, ${replicas} pods`;
    if (asPyTorch) {
      const specs: Obj = { Master: { replicas: 1, restartPolicy: "Never", template: { spec: pod("pytorch") } } };
      if (replicas > 1) specs.Worker = { replicas: replicas - 1, restartPolicy: "Never", template: { spec: pod("pytorch") } };
      workloads.push({
        kind: "PyTorchJob (DRA)",
        name,
        plural: "pytorchjobs",
        group: V1,
        pods: replicas,
        podLabel: JOB_NAME_V1,
        shape,
        body: { apiVersion: V1, kind: "PyTorchJob", metadata: { name }, spec: { runPolicy: { cleanPodPolicy: "None" }, pytorchReplicaSpecs: specs } },
      });
    } else {
      workloads.push({
        kind: "Job (DRA)",
        name,
        plural: "jobs",
        group: "batch/v1",
        pods: replicas,
        podLabel: BATCH_JOB_NAME,
        shape,
        body: { apiVersion: "batch/v1", kind: "Job", metadata: { name }, spec: jobSpec(pod("main"), replicas, replicas, true) },
      });
    }
  }
  return { workloads, templates };
}

/** The runtimes as objects to create: ClusterTrainingRuntimes cluster-wide, TrainingRuntimes in the namespace. */
export function runtimeObjects(): Prerequisite[] {
  return RUNTIMES.filter((rt) => !rt.preinstalled).map((rt) => ({
    plural: rt.cluster ? "clustertrainingruntimes" : "trainingruntimes",
    group: TRAINER,
    ...(rt.cluster ? { cluster: true } : {}),
    body: {
      apiVersion: TRAINER,
      kind: rt.cluster ? "ClusterTrainingRuntime" : "TrainingRuntime",
      metadata: { name: rt.name, labels: { "trainer.kubeflow.org/framework": "torch" } },
      spec: rt.spec,
    },
  }));
}

export interface GeneratedSet {
  seed: number;
  workloads: Workload[];
  prerequisites: Prerequisite[];
}

/** Sizes per kind (v1: per each of the five kinds). */
export interface Sizes {
  v1PerKind: number;
  trainJobs: number;
  jobSets: number;
  batchJobs: number;
  dra: number;
}

export const DEFAULT_SIZES: Sizes = { v1PerKind: 26, trainJobs: 70, jobSets: 40, batchJobs: 45, dra: 30 };

/** The whole set for `seed`: pure, the same seed giving the same objects. */
export function generate(seed: number, sizes: Sizes = DEFAULT_SIZES): GeneratedSet {
  const r = rng(seed);
  const dra = draWorkloads(sizes.dra);
  const workloads = [
    ...v1Workloads(r, sizes.v1PerKind),
    ...trainJobs(r, sizes.trainJobs),
    ...jobSets(r, sizes.jobSets),
    ...batchJobs(r, sizes.batchJobs),
    ...dra.workloads,
  ];
  const names = new Set(workloads.map((w) => w.name));
  if (names.size !== workloads.length) throw new Error("generated workload names are not unique");
  return { seed, workloads, prerequisites: [...runtimeObjects(), ...dra.templates] };
}

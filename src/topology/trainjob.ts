/**
 * @module
 * A Kubeflow Trainer v2 TrainJob's replicas, resolved against its runtime (pure): what the Trainer's JobSet
 * builder would make of `runtime.spec.template.spec.replicatedJobs` for this TrainJob (kubeflow/trainer v2.3.0
 * `pkg/runtime/framework/plugins/jobset/builder.go`, `pkg/runtime/runtime.go`, `plugins/mpi/mpi.go`), as far as
 * Quartermaster's rules read it: how many pods each replicated Job runs, and their pod template.
 *
 * - One replica type per replicated Job, named as it is (`node`, `launcher`, `dataset-initializer`, ...).
 * - Pods of a replicated Job: `replicas` (default 1) × the Job's `parallelism` (default 1); for the trainer nodes
 *   (the Job named `node`) the TrainJob's `spec.trainer.numNodes`, else the runtime's `mlPolicy.numNodes`, else
 *   that product. With MPI `runLauncherAsNode` the launcher is one of the nodes: `node` runs numNodes − 1 (at
 *   least 1), as upstream's MPI plugin sets it.
 * - Pod template: the runtime's, with `spec.trainer.resourcesPerNode` as the resources of the container named
 *   `node` in the trainer Jobs (named `node` or labelled `trainjob-ancestor-step: trainer`), and each
 *   `spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]` entry laid over the Job of its
 *   name: pod labels and annotations merged, nodeSelector merged, affinity, serviceAccountName, securityContext
 *   and schedulingGates replaced, tolerations, volumes and imagePullSecrets appended, and per named container
 *   its securityContext (runtimePatches carry no resources: v2.3.0's ContainerPatch has none).
 * - Without the runtime (not found, not read): the TrainJob alone, one `node` Job of numNodes (default 1) pods
 *   whose one container `node` has resourcesPerNode.
 *
 * Field paths: the node count is `spec.trainer.numNodes`, the trainer container's resources
 * `spec.trainer.resourcesPerNode` when the TrainJob sets them; what comes from the runtime is addressed in it,
 * prefixed with the runtime (`(ClusterTrainingRuntime torch-distributed).spec.template.spec.replicatedJobs[0]...`).
 */
import type { V1Container, V1PodTemplateSpec } from "@kubernetes/client-node";
import { TRAINER } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const objOr = (v: unknown): Obj => (isObj(v) ? v : {});

/** One replicated Job of a TrainJob, resolved. */
export interface TrainJobReplica {
  /** The replicated Job's name (the pods' `jobset.sigs.k8s.io/replicatedjob-name`). */
  type: string;
  /** Its pods in all; a number as the TrainJob or runtime has it (checked by the rules), else the default. */
  replicas: unknown;
  template: V1PodTemplateSpec;
  /** Field path of the count. */
  replicasField: string;
  /** Field path of the pod template. */
  templateField: string;
  /** Whether the TrainJob's trainer fields (numNodes, resourcesPerNode) apply to this Job. */
  trainer: boolean;
  /** Maps a finding's field under `templateField` to where the value came from (resourcesPerNode). */
  mapField: (field: string) => string;
}

/** Where a TrainJob's runtime is: `spec.runtimeRef`, defaults as the CRD's (ClusterTrainingRuntime, trainer.kubeflow.org). */
export function runtimeRefOf(job: KubeObject): { kind: string; name: string; apiGroup: string } | undefined {
  const ref = objOr(objOr(job.spec).runtimeRef);
  if (typeof ref.name !== "string" || ref.name === "") return undefined;
  return {
    name: ref.name,
    kind: typeof ref.kind === "string" && ref.kind !== "" ? ref.kind : "ClusterTrainingRuntime",
    apiGroup: typeof ref.apiGroup === "string" && ref.apiGroup !== "" ? ref.apiGroup : TRAINER.group,
  };
}

const trainerOf = (job: KubeObject): Obj => objOr(objOr(job.spec).trainer);

function isTrainerJob(rjob: Obj): boolean {
  const labels = objOr(objOr(objOr(rjob.template).metadata).labels);
  return rjob.name === TRAINER.node || labels[TRAINER.ancestorLabel] === TRAINER.ancestorTrainer;
}

function patchesFor(job: KubeObject, name: string): Obj[] {
  const patches = objOr(job.spec).runtimePatches;
  if (!Array.isArray(patches)) return [];
  const out: Obj[] = [];
  for (const p of patches) {
    const rjobs = objOr(objOr(objOr(objOr(p).trainingRuntimeSpec).template).spec).replicatedJobs;
    if (!Array.isArray(rjobs)) continue;
    for (const r of rjobs) if (isObj(r) && r.name === name) out.push(objOr(objOr(objOr(r.template).spec).template));
  }
  return out;
}

/** A pod template with `patch` (a runtime patch's PodTemplatePatch) laid over it; both already copies or fresh. */

function applyPatch(template: Obj, patch: Obj): void {
  const pm = objOr(patch.metadata);
  const meta = (template.metadata = objOr(template.metadata));
  for (const f of ["labels", "annotations"]) if (isObj(pm[f])) meta[f] = { ...objOr(meta[f]), ...pm[f] };
  const ps = objOr(patch.spec);
  const spec = (template.spec = objOr(template.spec));
  if (isObj(ps.nodeSelector)) spec.nodeSelector = { ...objOr(spec.nodeSelector), ...ps.nodeSelector };
  for (const f of ["affinity", "serviceAccountName", "securityContext", "schedulingGates", "terminationGracePeriodSeconds"])
    if (ps[f] !== undefined) spec[f] = structuredClone(ps[f]);
  for (const f of ["tolerations", "volumes", "imagePullSecrets"])
    if (Array.isArray(ps[f])) spec[f] = [...(Array.isArray(spec[f]) ? (spec[f] as unknown[]) : []), ...structuredClone(ps[f] as unknown[])];
  for (const list of ["containers", "initContainers"]) {
    if (!Array.isArray(ps[list]) || !Array.isArray(spec[list])) continue;
    for (const cp of ps[list] as unknown[]) {
      const c = (spec[list] as unknown[]).find((x) => isObj(x) && isObj(cp) && x.name === cp.name);
      if (isObj(c) && isObj(cp) && cp.securityContext !== undefined) c.securityContext = structuredClone(cp.securityContext);
    }
  }
}

function runLauncherAsNode(runtime: KubeObject): boolean {
  return objOr(objOr(objOr(runtime.spec).mlPolicy).mpi).runLauncherAsNode === true;
}

function podCount(rjob: Obj): unknown {
  const replicas = rjob.replicas ?? 1;
  const parallelism = objOr(objOr(rjob.template).spec).parallelism ?? 1;
  return typeof replicas === "number" && typeof parallelism === "number" ? replicas * parallelism : typeof replicas === "number" ? parallelism : replicas;
}

interface Resolve {
  job: KubeObject;
  runtime: KubeObject;
  rjob: Obj;
  at: string;
}

function nodeCount(r: Resolve): { replicas: unknown; field: string } {
  const own = trainerOf(r.job).numNodes;
  const fromRuntime = objOr(objOr(r.runtime.spec).mlPolicy).numNodes;
  const n = own ?? fromRuntime;
  if (n === undefined) return { replicas: podCount(r.rjob), field: `${r.at}.replicas` };
  const field = own !== undefined ? "spec.trainer.numNodes" : `${runtimeName(r.runtime)}.spec.mlPolicy.numNodes`;
  if (r.rjob.name === TRAINER.node && runLauncherAsNode(r.runtime) && typeof n === "number") return { replicas: Math.max(n - 1, 1), field };
  return { replicas: n, field };
}

function runtimeName(runtime: KubeObject): string {
  const m = objOr(runtime.metadata);
  return `(${typeof runtime.kind === "string" ? runtime.kind : "ClusterTrainingRuntime"} ${String(m.name ?? "")})`;
}

/** `field` under `templateField` at the trainer container's resources, moved to `spec.trainer.resourcesPerNode`. */
function resourcesMapper(templateField: string, containerIndex: number | undefined): (field: string) => string {
  if (containerIndex === undefined) return (f) => f;
  const prefix = `${templateField}.spec.containers[${containerIndex}].resources`;
  return (f) => (f === prefix || f.startsWith(`${prefix}.`) ? `spec.trainer.resourcesPerNode${f.slice(prefix.length)}` : f);
}

function resolveOne(r: Resolve, index: number): TrainJobReplica {
  const type = typeof r.rjob.name === "string" ? r.rjob.name : `replicatedJobs[${index}]`;
  const template = structuredClone(objOr(objOr(objOr(r.rjob.template).spec).template));
  const trainer = isTrainerJob(r.rjob);
  const templateField = `${r.at}.template.spec.template`;
  let resourcesAt: number | undefined;
  const perNode = trainerOf(r.job).resourcesPerNode;
  const containers = objOr(template.spec).containers;
  if (trainer && perNode !== undefined && Array.isArray(containers)) {
    const i = containers.findIndex((c) => isObj(c) && c.name === TRAINER.node);
    if (i >= 0) {
      (containers[i] as V1Container).resources = structuredClone(perNode) as V1Container["resources"];
      resourcesAt = i;
    }
  }
  for (const patch of patchesFor(r.job, type)) applyPatch(template, patch);
  const count = type === TRAINER.node ? nodeCount(r) : { replicas: podCount(r.rjob), field: `${r.at}.replicas` };
  return {
    type,
    replicas: count.replicas,
    template,
    replicasField: count.field,
    templateField,
    trainer,
    mapField: resourcesMapper(templateField, resourcesAt),
  };
}

/** The TrainJob alone (its runtime unknown): one `node` Job of numNodes pods with resourcesPerNode. */
function withoutRuntime(job: KubeObject): TrainJobReplica[] {
  const t = trainerOf(job);
  const container: V1Container = { name: TRAINER.node };
  if (t.resourcesPerNode !== undefined) container.resources = structuredClone(t.resourcesPerNode) as V1Container["resources"];
  if (typeof t.image === "string") container.image = t.image;
  const templateField = "spec.trainer";
  return [
    {
      type: TRAINER.node,
      replicas: t.numNodes ?? 1,
      template: { spec: { containers: [container] } },
      replicasField: "spec.trainer.numNodes",
      templateField,
      trainer: true,
      mapField: resourcesMapper(templateField, 0),
    },
  ];
}

/** The TrainJob's replicated Jobs, resolved against `runtime` (see the module's comment). */
export function trainJobReplicas(job: KubeObject, runtime: KubeObject | undefined): TrainJobReplica[] {
  if (!runtime) return withoutRuntime(job);
  const rjobs = objOr(objOr(objOr(runtime.spec).template).spec).replicatedJobs;
  if (!Array.isArray(rjobs)) return [];
  const name = runtimeName(runtime);
  return rjobs.map((rjob, j) => resolveOne({ job, runtime, rjob: objOr(rjob), at: `${name}.spec.template.spec.replicatedJobs[${j}]` }, j));
}

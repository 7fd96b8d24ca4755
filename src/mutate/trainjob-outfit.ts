/**
 * @module
 * A queued Kubeflow Trainer v2 TrainJob outfitted at CREATE (issue 33), by `/mutate/jobs`, as a queued v1 job's
 * templates are (`./job-templates.ts`). Kueue v0.19.2 computes a TrainJob's pod sets from the JobSet Trainer
 * would build for it (kueue `pkg/controller/jobs/trainjob/trainjob_controller.go` getChildJobSet → Trainer's
 * RuntimeInfo), and Trainer v2.3.0 builds it from the runtime's template, every `spec.runtimePatches` entry (any
 * manager) laid over it in order by strategic merge patch, and `spec.trainer.resourcesPerNode` merged into the
 * `node` container's resources (kubeflow/trainer `pkg/runtime/core/trainingruntime.go` newRuntimeInfo,
 * mergeRuntimePatches; `pkg/util/trainingruntime` MergeResourceRequirements). So what `/mutate/pods` would give the
 * pods, and Kueue reads, must be written there:
 *
 * - {@link trainerNodeTemplate}: the trainer Job's pod template as the pods will have it, taken from the one model
 *   of what Trainer builds (`trainJobModel`, src/kinds/trainjob-runtime.ts, which the caps and Kueue's pod sets read
 *   too, so the outfit and the caps cannot disagree; issue 45): the `node` container's resources, tolerations,
 *   affinity, nodeSelector and the template's labels and annotations (where a TrainJob's placement annotations
 *   live: a runtime patch's pod metadata, or the runtime's template);
 * - {@link outfitQueuedTrainJob}: that template run through {@link KUEUE_READ_MUTATIONS} (the very objects of
 *   `POD_MUTATIONS`, by `mutatePod`), and what changed written back: tolerations, affinity, nodeSelector and the
 *   `quartermaster.dev/mutations` record into Quartermaster's own runtime patch (manager
 *   {@link QM_RUNTIME_PATCH_MANAGER}); the node container's resources into `spec.trainer.resourcesPerNode`
 *   (a runtime patch cannot carry resources: v2.3.0's ContainerPatch has none), only when they differ from what
 *   the pods would get anyway.
 *
 * Strategic merge patch over a PodSpec: maps (nodeSelector, labels, annotations) merge key by key, `affinity`
 * merges field by field with its lists replaced, and `tolerations` (no patchMergeKey in PodSpec) is replaced
 * whole. Quartermaster's patch therefore carries the full tolerations list the template should have. A patch
 * written after ours that carries tolerations replaces them: Kueue's own, at admission, when the chosen
 * ResourceFlavor has `spec.tolerations` (its `nodeTaints` alone write none); see docs/operations.md.
 *
 * Pure and copy-on-write: a TrainJob with nothing to change comes back as the very same reference; mutating the
 * result again changes nothing (Quartermaster's patch is set aside when the template is built, so it is
 * recomputed to the same value; its `time`, which Trainer's defaulting webhook sets, is ignored).
 */
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import { queueNameOf } from "../kueue/admission.js";
import type { KnownClaims } from "../core/dra.js";
import { TRAINER } from "../core/job-shapes.js";
import { ANNOTATION_MUTATIONS } from "../core/keys.js";
import type { KubeObject, Pod } from "../core/kube.js";
import type { JobKind, Policy } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";
import { MAX_RUNTIME_PATCHES, runtimePatchCount, trainJobModel } from "../kinds/trainjob-runtime.js";
import { mutatePod } from "./index.js";
import { KUEUE_READ_MUTATIONS, type TemplatesResult } from "./job-templates.js";
import { isObject, objectOr } from "../core/object.js";

/** The manager of Quartermaster's runtime patch (Trainer's webhook wants a domain-prefixed path). */
export const QM_RUNTIME_PATCH_MANAGER = "quartermaster.dev/webhook";

type Obj = Record<string, unknown>;

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

type Patch = Obj;
const patchesOf = (job: KubeObject): Patch[] => {
  const p = objectOr(job.spec).runtimePatches;
  return Array.isArray(p) ? (p as Patch[]) : [];
};

/** A runtime patch's pod template for the replicated Job `name`. */
function podPatchOf(patch: Patch, name: string): Obj | undefined {
  const rjobs = objectOr(objectOr(objectOr(patch.trainingRuntimeSpec).template).spec).replicatedJobs;
  if (!Array.isArray(rjobs)) return undefined;
  const r: unknown = (rjobs as unknown[]).find((x) => isObject(x) && x.name === name);
  return r === undefined ? undefined : objectOr(objectOr(objectOr(objectOr(r).template).spec).template);
}

export interface TrainerNode {
  /** The replicated Job's name (what runtime patches address). */
  name: string;
  template: V1PodTemplateSpec;
  /** Index of the `node` container in the template, when there is one. */
  container: number | undefined;
}

/**
 * The TrainJob's trainer Job pod template as Trainer v2.3.0 makes its pods: THE model's (`trainJobModel`,
 * src/kinds/trainjob-runtime.ts, which the caps and Kueue's pod sets read too), every runtime patch except those of
 * `skipManager` laid over it in order, resourcesPerNode merged into the `node` container. The trainer Job is the
 * first one labelled `trainjob-ancestor-step: trainer`, else the one named `node`. Undefined when the runtime
 * has neither, or when the TrainJob carries more runtime patches than Trainer's CRD admits (refused by
 * `/validate/jobs` before any merge).
 */
export function trainerNodeTemplate(job: KubeObject, runtime: KubeObject, skipManager?: string): TrainerNode | undefined {
  if (runtimePatchCount(job) > MAX_RUNTIME_PATCHES) return undefined;
  const { replicas } = trainJobModel(job, runtime, skipManager);
  const rjob = replicas.find((r) => r.trainer) ?? replicas.find((r) => r.type === TRAINER.node);
  if (!rjob || !isObject(rjob.template.spec)) return undefined;
  const containers = rjob.template.spec.containers;
  const i = Array.isArray(containers) ? containers.findIndex((c) => isObject(c) && c.name === TRAINER.node) : -1;
  return { name: rjob.type, template: rjob.template, container: i >= 0 ? i : undefined };
}

type Ctx = { policy: Policy; namespace: string; claims?: KnownClaims };

/** Quartermaster's runtime patch for the trainer Job `name`: the pod fields of `after` that differ from `before`. */
function qmPatch(name: string, before: V1PodTemplateSpec, after: V1PodTemplateSpec): Patch | undefined {
  const spec: Obj = {};
  const [bs, as] = [objectOr(before.spec), objectOr(after.spec)];
  for (const f of ["tolerations", "affinity", "nodeSelector"]) if (!deepEqual(bs[f], as[f]) && as[f] !== undefined) spec[f] = as[f];
  const [ba, aa] = [objectOr(objectOr(before.metadata).annotations), objectOr(objectOr(after.metadata).annotations)];
  const annotations = Object.fromEntries(Object.entries(aa).filter(([k, v]) => ba[k] !== v));
  if (Object.keys(spec).length === 0 && Object.keys(annotations).length === 0) return undefined;
  const pod: Obj = {};
  if (Object.keys(annotations).length > 0) pod.metadata = { annotations };
  if (Object.keys(spec).length > 0) pod.spec = spec;
  return {
    manager: QM_RUNTIME_PATCH_MANAGER,
    trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name, template: { spec: { template: pod } } }] } } },
  };
}

const withoutTime = (p: unknown): unknown => {
  if (!isObject(p)) return p;
  const { time: _time, ...rest } = p;
  return rest;
};

/**
 * The template's metadata with the mutations record Quartermaster's patch already carries, so that a second pass
 * records the same (the patch itself is set aside when the template is built).
 */
function withOwnRecord(job: KubeObject, node: TrainerNode): V1PodTemplateSpec["metadata"] {
  const own = patchesOf(job).find((p) => isObject(p) && p.manager === QM_RUNTIME_PATCH_MANAGER);
  const record = objectOr(objectOr((own && podPatchOf(own, node.name))?.metadata).annotations)[ANNOTATION_MUTATIONS];
  const meta = node.template.metadata;
  return typeof record === "string" ? { ...meta, annotations: { ...meta?.annotations, [ANNOTATION_MUTATIONS]: record } } : meta;
}

/** The node container's resources after the mutations, when they differ from before; and what resourcesPerNode cannot remove. */
function resourcesChange(node: TrainerNode, after: V1PodTemplateSpec): { now: unknown; warnings: string[] } | undefined {
  if (node.container === undefined) return undefined;
  const before = node.template.spec!.containers[node.container]!.resources;
  const now = after.spec!.containers[node.container]!.resources;
  if (deepEqual(before, now)) return undefined;
  const dropped = (f: "limits" | "requests"): string[] =>
    Object.keys(objectOr(objectOr(before)[f])).filter((k) => !Object.hasOwn(objectOr(objectOr(now)[f]), k));
  const gone = [...dropped("limits"), ...dropped("requests")];
  const warnings =
    gone.length === 0
      ? []
      : [
          `quartermaster: ${gone.join(", ")} of the runtime's ${TRAINER.node} container cannot be removed through resourcesPerNode (Trainer merges it into the runtime's): fix the runtime`,
        ];
  return { now, warnings };
}

/**
 * A queued TrainJob (`kind`'s shape `trainjob`, a queue name) outfitted against its `runtime` (see the module
 * comment); any other job, or one with nothing to change, comes back as the very same reference.
 */
export function outfitQueuedTrainJob(job: KubeObject, kind: JobKind, runtime: KubeObject, ctx: Ctx): TemplatesResult {
  const unchanged: TemplatesResult = { job, applied: [], warnings: [] };
  if (queueNameOf(job) === undefined || jobShape(kind).name !== "trainjob" || !isObject(job.spec)) return unchanged;
  const node = trainerNodeTemplate(job, runtime, QM_RUNTIME_PATCH_MANAGER);
  if (!node) return unchanged;
  const meta = withOwnRecord(job, node);
  const pod: Pod = { ...(meta ? { metadata: meta } : {}), spec: node.template.spec! };
  const out = mutatePod(pod, { policy: ctx.policy, namespace: ctx.namespace, ...(ctx.claims ? { claims: ctx.claims } : {}) }, KUEUE_READ_MUTATIONS);
  if (out.pod === pod) return unchanged;
  const after: V1PodTemplateSpec = { metadata: out.pod.metadata ?? {}, spec: out.pod.spec! };
  const spec: Obj = { ...job.spec };
  const applied: TemplatesResult["applied"] = [];
  const warnings = out.warnings.map((w) => `${w} (queued TrainJob: its ${node.name} pods)`);

  // Resources: the node container's, into resourcesPerNode, when they are not what the pods would get anyway.
  const resources = resourcesChange(node, after);
  if (resources) {
    spec.trainer = { ...objectOr(spec.trainer), resourcesPerNode: resources.now };
    applied.push({ templateField: "spec.trainer.resourcesPerNode", mutations: out.applied.filter((m) => m === "resources") });
    warnings.push(...resources.warnings);
  }

  // Placement and the record: Quartermaster's runtime patch, in place when there is one, else appended.
  const patch = qmPatch(node.name, node.template, after);
  const patches = patchesOf(job);
  const at = patches.findIndex((p) => isObject(p) && p.manager === QM_RUNTIME_PATCH_MANAGER);
  if (patch && !deepEqual(withoutTime(patches[at]), patch)) {
    const next = [...patches];
    if (at >= 0) next[at] = { ...patch, ...(isObject(patches[at]) && patches[at].time !== undefined ? { time: patches[at].time } : {}) };
    else next.push(patch);
    spec.runtimePatches = next;
    applied.push({
      templateField: `spec.runtimePatches[${at >= 0 ? at : patches.length}]`,
      mutations: out.applied.filter((m) => m !== "resources" || !resources),
    });
  }
  if (applied.length === 0) return unchanged;
  return { job: { ...job, spec }, applied, warnings };
}

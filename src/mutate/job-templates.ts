/**
 * @module
 * A queued job's pod templates outfitted at CREATE (issue 33), by `/mutate/jobs`: Kueue (sigs.k8s.io/kueue
 * v0.19.2) decides a job's flavor and charges its quota from the job's pod templates (kueue
 * `pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go` PodSets), never from its pods. What
 * `/mutate/pods` would give each pod later and Kueue reads is therefore given to the templates first:
 * {@link KUEUE_READ_MUTATIONS}, the very `Mutation` objects of `POD_MUTATIONS` (resource renames and defaults,
 * GPU tolerations, accelerator/partition placement, interruptible placement), run by the same `mutatePod`
 * over each template as if it were a pod. The pod the operator makes from such a template then gets no further
 * change to its resources, affinity, nodeSelector or tolerations from `/mutate/pods` (each of those mutations
 * returns the very pod when it has nothing to do); it still gets the cluster-spec env and Kubeflow labels,
 * which depend on the pod's index and Kueue does not read.
 *
 * Which jobs: only those carrying a queue name (`src/kueue/admission.ts` queueNameOf). DECIDE: a job without one
 * is left byte-identical to what its author wrote (beyond `jobDefaults`), and its pods are outfitted at CREATE
 * as before: nothing reads its templates for a decision, and `kubectl get -o yaml`, GitOps diffs and the
 * training operator's own validation then see the job as written. A queued job's templates must say what its
 * pods will ask for, or Kueue places it by requests and placement that are not the pods' (issue 33: a job
 * admitted into an H100 flavor whose pods Quartermaster then pins to A100 nodes).
 *
 * Which kinds: the replica templates of the Kubeflow v1 kinds (and Caffe2Job's one pool, though Kueue has no
 * integration for it), and the templates of a queued batch Job or JobSet (`QUEUED_WORKLOAD_KINDS`,
 * src/core/job-shapes.ts; {@link outfitQueuedWorkloadTemplates}), whose pods `/mutate/pods` outfits like any GPU
 * pod's and which Kueue admits from their templates all the same. Not a TrainJob's: its pod templates are its
 * runtime's (an administrator's object); a queued TrainJob is outfitted through `resourcesPerNode` and a runtime
 * patch of Quartermaster's instead (`./trainjob-outfit.ts`).
 *
 * Pure and copy-on-write: a job with nothing to change comes back as the very same reference, and running it
 * again on its own output changes nothing (each mutation is idempotent).
 */
import type { V1PodSpec, V1PodTemplateSpec } from "@kubernetes/client-node";
import { queueNameOf } from "../kueue/admission.js";
import { withKey } from "../core/copy.js";
import type { KnownClaims } from "../core/dra.js";
import { getIn, type QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject, Pod } from "../core/kube.js";
import type { JobKind, Policy } from "../policy/types.js";
import { jobShape, replicaSpecsField } from "../kinds/index.js";
import { mutatePod, POD_MUTATIONS } from "./index.js";
import type { Mutation } from "./types.js";
import { isObject } from "../core/object.js";

/** The pod mutations whose result Kueue reads (requests, node selection, tolerations), by name in `POD_MUTATIONS`. */
export const KUEUE_READ_MUTATION_NAMES: readonly string[] = ["resources", "gpu-tolerations", "accelerator", "interruptible"];

/** The very `POD_MUTATIONS` entries named in {@link KUEUE_READ_MUTATION_NAMES}, in the pipeline's order. */
export const KUEUE_READ_MUTATIONS: readonly Mutation[] = POD_MUTATIONS.filter((m) => KUEUE_READ_MUTATION_NAMES.includes(m.name));

export interface TemplatesResult {
  /** The job with its templates outfitted, or the very same reference. */
  job: KubeObject;
  /** Per template changed: its path and the mutations applied. */
  applied: Array<{ templateField: string; mutations: string[] }>;
  warnings: string[];
}

type Ctx = { policy: Policy; namespace: string; claims?: KnownClaims };

/**
 * One pod template outfitted with {@link KUEUE_READ_MUTATIONS} as if it were a pod: the new template and the
 * mutations applied, or undefined when it is not an object with a spec (the CRD's or the apiserver's to refuse)
 * or nothing changed.
 */
function outfitTemplate(template: unknown, ctx: Ctx): { template: V1PodTemplateSpec; mutations: string[]; warnings: string[] } | undefined {
  if (!isObject(template) || !isObject(template.spec)) return undefined;
  const t = template as V1PodTemplateSpec;
  const spec = t.spec as V1PodSpec;
  const pod: Pod = { ...(t.metadata ? { metadata: t.metadata } : {}), spec };
  const out = mutatePod(pod, { policy: ctx.policy, namespace: ctx.namespace, ...(ctx.claims ? { claims: ctx.claims } : {}) }, KUEUE_READ_MUTATIONS);
  if (out.pod === pod) return undefined;
  let next: V1PodTemplateSpec = withKey(t, "spec", out.pod.spec);
  if (out.pod.metadata !== t.metadata) next = withKey(next, "metadata", out.pod.metadata);
  return { template: next, mutations: out.applied, warnings: out.warnings };
}

/** The pod templates of a queued `job` of `kind` outfitted with {@link KUEUE_READ_MUTATIONS}; see the module comment. */
export function outfitQueuedJobTemplates(job: KubeObject, kind: JobKind, ctx: Ctx): TemplatesResult {
  const unchanged: TemplatesResult = { job, applied: [], warnings: [] };
  const shape = jobShape(kind);
  if (queueNameOf(job) === undefined || shape.layout === "runtime" || !isObject(job.spec)) return unchanged;
  const field = replicaSpecsField(kind);
  const specs = job.spec[field];
  if (!isObject(specs)) return unchanged;
  let nextSpecs = specs;
  const applied: TemplatesResult["applied"] = [];
  const warnings: string[] = [];
  for (const r of shape.replicas(job, kind)) {
    const out = outfitTemplate(r.spec.template, ctx);
    if (!out) continue;
    nextSpecs =
      shape.layout === "single" ? withKey(nextSpecs, "template", out.template) : withKey(nextSpecs, r.type, withKey(r.spec, "template", out.template));
    applied.push({ templateField: r.templateField, mutations: out.mutations });
    warnings.push(...out.warnings.map((w) => `${w} (queued job: ${r.templateField})`));
  }
  if (applied.length === 0) return unchanged;
  return { job: withKey(job, "spec", withKey(job.spec, field, nextSpecs)), applied, warnings };
}

/** `path` as a field path: `spec.replicatedJobs[0].template.spec.template`. */
const fieldOf = (path: ReadonlyArray<string | number>): string => path.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? k : `.${k}`)).join("");

/** `root` with the value at `path` replaced by `value`, copying only the objects and arrays on the path. */
function setIn(root: unknown, path: ReadonlyArray<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const [key, ...rest] = path as [string | number, ...Array<string | number>];
  if (typeof key === "number") {
    const arr = Array.isArray(root) ? [...(root as unknown[])] : [];
    arr[key] = setIn(arr[key], rest, value);
    return arr;
  }
  const obj = isObject(root) ? root : {};
  return withKey(obj, key, setIn(obj[key], rest, value));
}

/**
 * The pod templates of a queued batch Job or JobSet (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts) outfitted
 * with {@link KUEUE_READ_MUTATIONS}, as a queued training job's are; an object without a queue name is returned
 * as is.
 */
export function outfitQueuedWorkloadTemplates(obj: KubeObject, kind: QueuedWorkloadKind, ctx: Ctx): TemplatesResult {
  const unchanged: TemplatesResult = { job: obj, applied: [], warnings: [] };
  if (queueNameOf(obj) === undefined) return unchanged;
  let next: unknown = obj;
  const applied: TemplatesResult["applied"] = [];
  const warnings: string[] = [];
  for (const path of kind.templatePaths(obj)) {
    const out = outfitTemplate(getIn(obj, path), ctx);
    if (!out) continue;
    next = setIn(next, path, out.template);
    const field = fieldOf(path);
    applied.push({ templateField: field, mutations: out.mutations });
    warnings.push(...out.warnings.map((w) => `${w} (queued ${kind.kind}: ${field})`));
  }
  return applied.length === 0 ? unchanged : { job: next as KubeObject, applied, warnings };
}

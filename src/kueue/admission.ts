/**
 * @module
 * Kueue (sigs.k8s.io/kueue v0.19.2) as the admission webhooks meet it, pure:
 * - {@link queueNameOf}: whether a job is queued: the label `kueue.x-k8s.io/queue-name` (kueue
 *   `pkg/controller/constants/constants.go` QueueLabel), or the older annotation of the same key;
 * - {@link kueueAdmissionOnly}: whether a job UPDATE carries Kueue's admission and nothing else.
 *
 * What Kueue's admission UPDATE does (kueue `pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go`
 * RunWithPodSetsInfo, `pkg/podset/podset.go` Merge and FromAssignment): it sets the run policy's `suspend` to
 * false and merges into each replica template, without changing anything already there (Merge refuses a
 * conflicting key), the chosen ResourceFlavors' `nodeLabels` into `spec.nodeSelector`, their `tolerations` (and
 * an admission check's PodSetUpdates) appended to `spec.tolerations`, labels and annotations into the template's
 * metadata, and (topology-aware scheduling) scheduling gates appended to `spec.schedulingGates`. A TrainJob is
 * admitted in two UPDATEs (kueue `pkg/controller/jobs/trainjob/trainjob_controller.go`): first the runtime patch
 * of manager `kueue.x-k8s.io/manager` in `spec.runtimePatches` is written while the job is still suspended, then
 * `spec.suspend` is set to false.
 *
 * The flavor's name is in the Workload (`status.admission.podSetAssignments[].flavors`), not in the job: the
 * job only carries the node labels Kueue wrote, which is what {@link KueueAdmission} reports.
 */
import { isObject } from "../core/object.js";
import type { QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";

/** The label (and older annotation) naming a job's LocalQueue (kueue `pkg/controller/constants/constants.go`). */
export const KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name";
/** The manager of the runtime patch Kueue writes into a TrainJob (kueue `pkg/controller/jobs/trainjob`). */
export const KUEUE_RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager";

type Obj = Record<string, unknown>;
const objOr = (v: unknown): Obj => (isObject(v) ? v : {});

/** The job's queue name (label first, then the older annotation), or undefined when it carries none. */
export function queueNameOf(job: KubeObject): string | undefined {
  const meta = objOr(job.metadata);
  for (const where of [meta.labels, meta.annotations]) {
    const v = objOr(where)[KUEUE_QUEUE_NAME];
    if (typeof v === "string" && v !== "") return v;
  }
  return undefined;
}

/** The LocalQueue a job waits in: its Workload's `spec.queueName` once Kueue made one, else the job's own {@link queueNameOf}. */
export function waitingQueueOf(job: KubeObject | undefined, workload: KubeObject | undefined): string | undefined {
  const named = objOr(workload?.spec).queueName;
  if (typeof named === "string" && named !== "") return named;
  return job ? queueNameOf(job) : undefined;
}

/** What a Kueue admission wrote into one pod template. */
export interface TemplateAdmission {
  /** The template's path, e.g. `spec.pytorchReplicaSpecs.Worker.template` (a TrainJob's: its runtime patch's). */
  templateField: string;
  /** nodeSelector entries added (the flavors' nodeLabels). */
  nodeSelector: Record<string, string>;
  /** Number of tolerations appended. */
  tolerations: number;
}

export interface KueueAdmission {
  /** `suspend` went from true to false in this UPDATE. */
  unsuspended: boolean;
  templates: TemplateAdmission[];
}

/** Metadata the apiserver manages: it differs between the old and new object of any UPDATE. */
const SERVER_METADATA = ["resourceVersion", "generation", "managedFields"] as const;

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

/** `now` minus the keys it added to `before` (undefined when a key of `before` is gone or changed). */
function addedEntries(before: unknown, now: unknown): { rest: unknown; added: Obj } | undefined {
  if (now === undefined) return before === undefined ? { rest: undefined, added: {} } : undefined;
  if (!isObject(now) || (before !== undefined && !isObject(before))) return deepEqual(before, now) ? { rest: now, added: {} } : undefined;
  const old = objOr(before);
  const added: Obj = {};
  for (const [k, v] of Object.entries(old)) if (!Object.hasOwn(now, k) || !deepEqual(now[k], v)) return undefined;
  for (const [k, v] of Object.entries(now)) if (!Object.hasOwn(old, k)) added[k] = v;
  return { rest: before, added };
}

/** `now` is `before` with entries appended: the number appended, or undefined. */
function appended(before: unknown, now: unknown): number | undefined {
  if (now === undefined) return before === undefined ? 0 : undefined;
  if (!Array.isArray(now)) return deepEqual(before, now) ? 0 : undefined;
  const old = before === undefined ? [] : before;
  if (!Array.isArray(old) || old.length > now.length) return undefined;
  return old.every((x, i) => deepEqual(x, now[i])) ? now.length - old.length : undefined;
}

/**
 * One template as Kueue's Merge may leave it: `now` is `before` with labels, annotations and nodeSelector
 * entries added and tolerations and scheduling gates appended. The additions, or undefined when anything else
 * differs.
 */
function templateAdmission(before: unknown, now: unknown, templateField: string): TemplateAdmission | undefined {
  if (before === undefined && now === undefined) return { templateField, nodeSelector: {}, tolerations: 0 };
  if (!isObject(before) || !isObject(now)) return undefined;
  const [bm, nm, bs, ns] = [before.metadata, now.metadata, before.spec, now.spec];
  if ((bm !== undefined && !isObject(bm)) || (nm !== undefined && !isObject(nm)) || !isObject(bs) || !isObject(ns)) return undefined;
  for (const f of ["labels", "annotations"]) if (!addedEntries(objOr(bm)[f], objOr(nm)[f])) return undefined;
  const nodeSelector = addedEntries(bs.nodeSelector, ns.nodeSelector);
  const tolerations = appended(bs.tolerations, ns.tolerations);
  if (!nodeSelector || tolerations === undefined || appended(bs.schedulingGates, ns.schedulingGates) === undefined) return undefined;
  const rest = (o: unknown, fields: readonly string[]): Obj => Object.fromEntries(Object.entries(objOr(o)).filter(([k]) => !fields.includes(k)));
  if (!deepEqual(rest(bm, ["labels", "annotations"]), rest(nm, ["labels", "annotations"]))) return undefined;
  if (!deepEqual(rest(bs, ["nodeSelector", "tolerations", "schedulingGates"]), rest(ns, ["nodeSelector", "tolerations", "schedulingGates"]))) return undefined;
  if (Object.keys(objOr(before)).some((k) => k !== "metadata" && k !== "spec" && !deepEqual(before[k], now[k]))) return undefined;
  if (Object.keys(now).some((k) => k !== "metadata" && !Object.hasOwn(before, k))) return undefined;
  const selector = Object.fromEntries(Object.entries(nodeSelector.added).filter((e): e is [string, string] => typeof e[1] === "string"));
  return { templateField, nodeSelector: selector, tolerations };
}

/** The object without the apiserver's metadata and its status (the main resource's UPDATE cannot change it). */
function withoutServerFields(o: KubeObject): Obj {
  const { status: _status, metadata, ...rest } = o;
  const meta = Object.fromEntries(Object.entries(objOr(metadata)).filter(([k]) => !(SERVER_METADATA as readonly string[]).includes(k)));
  return { ...rest, metadata: meta };
}

/** A copy of `o` with `value` at `path` (keys of objects, indices of arrays); `o` is not changed. */
function setAt(o: Obj, path: ReadonlyArray<string | number>, value: unknown): Obj {
  return setIn(o, path, value) as Obj;
}

function setIn(o: unknown, path: ReadonlyArray<string | number>, value: unknown): unknown {
  const [head, ...tail] = path;
  if (head === undefined) return value;
  if (typeof head === "number") {
    // An index into an array (a JobSet's replicatedJobs); not an array there: the path is not in `o`, left as it is.
    if (!Array.isArray(o)) return o;
    const copy = [...(o as unknown[])];
    copy[head] = setIn(copy[head], tail, value);
    return copy;
  }
  const obj = objOr(o);
  return { ...obj, [head]: setIn(obj[head], tail, value) };
}

/** Where a kind keeps `suspend` and its pod templates, as {@link admissionOnly} compares them. */
interface AdmissionLayout {
  /** The path of `suspend` (dot-separated); none: the kind cannot be suspended. */
  suspendField: string | undefined;
  /** A TrainJob: its templates are its runtime's, Kueue's additions are in its runtime patch. */
  trainJob: boolean;
  /** The object's pod templates, each with a name that is the same in the old and new object. */
  templates(obj: KubeObject): Array<{ type: string; templateField: string; path: Array<string | number>; template: unknown }>;
}

const valueAt = (o: unknown, path: readonly string[]): unknown => path.reduce<unknown>((v, k) => objOr(v)[k], o);

/**
 * Whether the UPDATE `old` → `now` of a job of `kind` carries Kueue's admission and nothing else: `suspend`
 * true → false and, in the pod templates, only what Kueue's Merge adds (see the module comment); for a TrainJob,
 * also the first of its two UPDATEs (only Kueue's runtime patch changed, still suspended). Returns what was
 * added, or undefined for any other UPDATE (a user's edit, a resume by hand with other changes, a suspend).
 */
export function kueueAdmissionOnly(old: KubeObject, now: KubeObject, kind: JobKind): KueueAdmission | undefined {
  const shape = jobShape(kind);
  return admissionOnly(old, now, {
    suspendField: shape.runPolicy(now).at("suspend"),
    trainJob: shape.layout === "runtime",
    templates: (obj) =>
      shape.replicas(obj, kind).map((r) => ({ type: r.type, templateField: r.templateField, path: r.templateField.split("."), template: r.spec.template })),
  });
}

/**
 * The same for a batch Job or a JobSet (kueue `pkg/controller/jobs/job`, `pkg/controller/jobs/jobset`
 * RunWithPodSetsInfo: `spec.suspend` set to false, each pod template merged as for a training job), or the JobSet
 * controller's resume of the Jobs it made, which carries the same additions from the JobSet's templates
 * (kubernetes-sigs/jobset `pkg/controllers/jobset_controller.go` resumeJob). The kind's pod templates are where
 * its `templatePaths` say.
 */
export function kueueWorkloadAdmissionOnly(old: KubeObject, now: KubeObject, kind: QueuedWorkloadKind): KueueAdmission | undefined {
  const fieldOf = (path: ReadonlyArray<string | number>): string => path.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? k : `.${k}`)).join("");
  return admissionOnly(old, now, {
    suspendField: "spec.suspend",
    trainJob: false,
    templates: (obj) =>
      kind.templatePaths(obj).map((path) => ({
        type: fieldOf(path),
        templateField: fieldOf(path),
        path,
        template: path.reduce<unknown>((v, k) => (typeof k === "number" ? (Array.isArray(v) ? v[k] : undefined) : objOr(v)[k]), obj),
      })),
  });
}

function admissionOnly(old: KubeObject, now: KubeObject, layout: AdmissionLayout): KueueAdmission | undefined {
  const suspendField = layout.suspendField;
  if (suspendField === undefined) return undefined;
  const path = suspendField.split(".");
  const [before, after] = [valueAt(old, path), valueAt(now, path)];
  const unsuspended = before === true && after === false;
  const trainJob = layout.trainJob;
  // Not suspended before: no admission to carry (Kueue's later UPDATEs, e.g. a stop, set suspend true).
  if (!unsuspended && !(trainJob && before === true && after === true)) return undefined;
  // Both objects with suspend as it was before: what is left to differ must be the templates' additions.
  let a = setAt(withoutServerFields(old), path, before);
  let b = setAt(withoutServerFields(now), path, before);
  const templates: TemplateAdmission[] = [];
  if (trainJob) {
    const patches = kueuePatch(a, b);
    if (!patches) return undefined;
    templates.push(...patches.templates);
    a = patches.old;
    b = patches.now;
  } else {
    const olds = layout.templates(old);
    for (const r of layout.templates(now)) {
      const oldReplica = olds.find((o) => o.type === r.type);
      if (!oldReplica) return undefined;
      const t = templateAdmission(oldReplica.template, r.template, r.templateField);
      if (!t) return undefined;
      templates.push(t);
      a = setAt(a, r.path, null);
      b = setAt(b, r.path, null);
    }
  }
  if (!deepEqual(a, b)) return undefined;
  if (!unsuspended && templates.length === 0) return undefined;
  return { unsuspended, templates };
}

/**
 * A TrainJob's runtime patches, old and new, with Kueue's own set aside: what Kueue's patch adds to each
 * replicated Job's pod template (it is written whole: compared to none, or to the patch before), and both
 * objects without it; undefined when a patch of another manager changed.
 */
function kueuePatch(old: Obj, now: Obj): { templates: TemplateAdmission[]; old: Obj; now: Obj } | undefined {
  const split = (o: Obj): { kueue: unknown; others: unknown[]; index: number } => {
    const patches = objOr(o.spec).runtimePatches;
    const list: unknown[] = Array.isArray(patches) ? patches : [];
    const index = list.findIndex((p) => objOr(p).manager === KUEUE_RUNTIME_PATCH_MANAGER);
    return { kueue: list[index], others: list.filter((_, i) => i !== index), index };
  };
  const [a, b] = [split(old), split(now)];
  if (b.kueue !== undefined && !isObject(b.kueue)) return undefined;
  const rjobs = (p: unknown): unknown[] => {
    const r = objOr(objOr(objOr(objOr(p).trainingRuntimeSpec).template).spec).replicatedJobs;
    return Array.isArray(r) ? r : [];
  };
  const templates: TemplateAdmission[] = [];
  const at = b.index < 0 ? 0 : b.index;
  rjobs(b.kueue).forEach((r, i) => {
    const name = objOr(r).name;
    const prior = rjobs(a.kueue).find((x) => objOr(x).name === name);
    const podOf = (x: unknown): Obj => objOr(objOr(objOr(objOr(x).template).spec).template);
    const [po, pn] = [podOf(prior), podOf(r)];
    const nodeSelector = addedEntries(objOr(po.spec).nodeSelector, objOr(pn.spec).nodeSelector);
    const selector = Object.fromEntries(Object.entries(nodeSelector?.added ?? {}).filter((e): e is [string, string] => typeof e[1] === "string"));
    const tolerations = appended(objOr(po.spec).tolerations, objOr(pn.spec).tolerations) ?? 0;
    templates.push({
      templateField: `spec.runtimePatches[${at}].trainingRuntimeSpec.template.spec.replicatedJobs[${i}].template.spec.template`,
      nodeSelector: selector,
      tolerations,
    });
  });
  if (!deepEqual(a.kueue, b.kueue) && !isKueueOnlyPatch(b.kueue)) return undefined;
  const strip = (o: Obj, others: unknown[]): Obj => setAt(o, ["spec", "runtimePatches"], others.length === 0 ? null : others);
  return { templates, old: strip(old, a.others), now: strip(now, b.others) };
}

/** Kueue's runtime patch sets pod metadata and nodeSelector, tolerations and scheduling gates only. */
function isKueueOnlyPatch(p: unknown): boolean {
  const keys = (o: unknown): string[] => Object.keys(objOr(o));
  const spec = objOr(objOr(objOr(p).trainingRuntimeSpec).template).spec;
  const rjobs = objOr(spec).replicatedJobs;
  if (!Array.isArray(rjobs)) return false;
  return rjobs.every((r) => {
    const pod = objOr(objOr(objOr(objOr(r).template).spec).template);
    return (
      keys(pod).every((k) => k === "metadata" || k === "spec") &&
      keys(pod.metadata).every((k) => k === "labels" || k === "annotations") &&
      keys(pod.spec).every((k) => ["nodeSelector", "tolerations", "schedulingGates"].includes(k))
    );
  });
}

/**
 * @module
 * THE model of what Kubeflow Trainer v2.3.0 makes of a TrainJob and its runtime (pure): the pod template and the
 * pod count of every replicated Job of the JobSet it will create. The caps (`trainjob.ts` → `src/validate/job.ts`),
 * Kueue's pod sets (`jobPodSets`, `src/validate/queue-capacity.ts`) and the Kueue outfitter
 * (`src/mutate/trainjob-outfit.ts` trainerNodeTemplate) all read it, so they cannot disagree (issue 45).
 *
 * Upstream's rules, from kubeflow/trainer v2.3.0 (Go module `github.com/kubeflow/trainer/v2@v2.3.0`):
 *
 * 1. Runtime patches (`pkg/runtime/core/trainingruntime.go` mergeRuntimePatches): every `spec.runtimePatches`
 *    entry whose `trainingRuntimeSpec.template.spec` is set, in order, laid over the runtime's whole JobSet spec by
 *    strategic merge patch (`strategicpatch.StrategicMergePatch(source, patch, jobsetv1alpha2.JobSetSpec{})`):
 *    `replicatedJobs` merge by `name` (sigs.k8s.io/jobset v0.12.0 `api/jobset/v1alpha2/jobset_types.go`), then, in
 *    each Job's template, maps merge key by key and lists merge by their k8s.io/api patch merge keys (containers,
 *    initContainers, volumes, imagePullSecrets, schedulingGates by `name`; a container's env by `name`, its
 *    volumeMounts by `mountPath`), other lists (tolerations) and scalars replaced. The patch is Trainer's typed
 *    `RuntimePatch` marshalled again (`pkg/apis/trainer/v1alpha1/trainjob_types.go`), so it carries no `$patch`
 *    directives and no nulls, only what the v2.3.0 types have: a Job's metadata (labels, annotations) and, of its
 *    pod template, metadata and a `PodSpecPatch` (serviceAccountName, volumes, initContainers, containers,
 *    imagePullSecrets, securityContext, nodeSelector, affinity, tolerations, schedulingGates,
 *    terminationGracePeriodSeconds), whose `ContainerPatch` has name, env, volumeMounts and securityContext: no
 *    resources, no parallelism, no replicas. A patch naming a Job or container the runtime does not have is
 *    refused by Trainer's own webhook (`pkg/runtime/framework/plugins/jobset/jobset.go` Validate), so it adds
 *    nothing here.
 * 2. Which Job is the trainer (`newRuntimeInfo`): the one whose Job template, after the patches, is LABELLED
 *    `trainer.kubeflow.org/trainjob-ancestor-step: trainer` (a patch may set or change that label), never the one
 *    merely NAMED `node`. Its pod count starts at the runtime's `mlPolicy.numNodes` (default 1) when the runtime
 *    has an mlPolicy; every other Job's at its `parallelism` (default 1); at least 1 (`runtime.WithPodSet`).
 * 3. `spec.trainer.resourcesPerNode` (`newRuntimeInfo`, `pkg/util/trainingruntime` MergeResourceRequirements):
 *    MERGED into the resources of the first container named `node` (strategic merge patch: `limits` and
 *    `requests` key by key, the TrainJob's value winning; a key it does not name keeps the runtime's), in every
 *    trainer-labelled Job when the runtime has an mlPolicy, and in the Job named `node` when
 *    `mlPolicy.mpi.runLauncherAsNode` is true; after the patches.
 * 4. `spec.trainer.numNodes` (the EnforceMLPolicy plugins, `pkg/runtime/framework/plugins/`): with torch, JAX,
 *    XGBoost or no MPI policy (plainml) the FIRST trainer-labelled Job's count becomes numNodes
 *    (`info.FindPodSetByAncestor`); with MPI (`mpi/mpi.go`) the Job NAMED `node`'s count becomes numNodes, or
 *    max(numNodes − 1, 1) when `runLauncherAsNode` (the launcher is a node). numProcPerNode changes no pod count.
 * 5. Counts into the JobSet (`jobset/jobset.go` SyncParallelCount, `jobset/builder.go` Trainer): each Job's
 *    `parallelism` and `completions` become its count; a trainer-labelled Job's `replicas` becomes 1, another keeps
 *    the runtime's (default 1). Pods of a Job: replicas × count.
 *
 * What the model cannot know is reported ({@link TrainJobModel.unknowns}), never counted as nothing: a patch of a
 * shape Trainer's types cannot hold (its CRD would refuse it, or a Trainer other than v2.3.0 accepts it), and a
 * patch field that would change GPUs or pod counts which v2.3.0's patch types do not have (`resources`,
 * `resourceClaims`, `parallelism`, `replicas`: a v2.3.0 CRD prunes them, so seeing one means another Trainer).
 * Under a GPU cap the caps refuse such a TrainJob (rule `gpu-unknown`, `src/validate/job.ts`).
 *
 * The merge is linear in the runtime plus the patches: the runtime's Jobs are copied once, each patch is merged
 * into the copy in place, and a keyed list keeps an index of its keys (issue 46: a hand-made merge re-copying the
 * template per patch held the event loop 26 s on 5,000 patches). The count of patches is bounded before this runs
 * (`MAX_RUNTIME_PATCHES`, the CRD's own limit, refused by `/validate/jobs`).
 *
 * Field paths: the node count is `spec.trainer.numNodes` when it applies, the runtime's `mlPolicy.numNodes` or the
 * Job's `parallelism`/`replicas` otherwise; a finding at a key of the trainer container's `limits` or `requests`
 * that resourcesPerNode set is moved to `spec.trainer.resourcesPerNode`; everything else is addressed in the
 * runtime, prefixed with it (`(ClusterTrainingRuntime torch-distributed).spec.template.spec.replicatedJobs[0]...`).
 * Without the runtime (not found, not read): the TrainJob alone, one `node` Job of numNodes (default 1) pods whose
 * one container `node` has resourcesPerNode.
 */
import type { V1Container, V1PodTemplateSpec } from "@kubernetes/client-node";
import { TRAINER } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";

type Obj = Record<string, unknown>;

/**
 * The most `spec.runtimePatches` entries Trainer v2.3.0's CRD admits (`trainjob_types.go`:
 * `+kubebuilder:validation:MaxItems=16`). `/validate/jobs` refuses more before any merge.
 */
export const MAX_RUNTIME_PATCHES = 16;

/** One replicated Job of a TrainJob, resolved. */
export interface TrainJobReplica {
  /** The replicated Job's name (the pods' `jobset.sigs.k8s.io/replicatedjob-name`). */
  type: string;
  /** Its pods in all (replicas × count); a value as the TrainJob or runtime has it when not a number (the rules refuse it). */
  replicas: unknown;
  template: V1PodTemplateSpec;
  /** Field path of the count. */
  replicasField: string;
  /** Field path of the pod template. */
  templateField: string;
  /** Whether the Job is labelled `trainjob-ancestor-step: trainer` (after the patches). */
  trainer: boolean;
  /** Index of the container resourcesPerNode was merged into, when it was. */
  perNodeContainer: number | undefined;
  /** Maps a finding's field under `templateField` to where the value came from (resourcesPerNode). */
  mapField: (field: string) => string;
}

/** What the model cannot know, at the field that makes it so, with the fix. */
export interface TrainJobUnknown {
  field: string;
  message: string;
  /** The value the model could not read (the caps look in it for GPU resources and claims). */
  value?: unknown;
}

export interface TrainJobModel {
  replicas: TrainJobReplica[];
  unknowns: TrainJobUnknown[];
}

/** Where a TrainJob's runtime is: `spec.runtimeRef`, defaults as the CRD's (ClusterTrainingRuntime, trainer.kubeflow.org). */
export function runtimeRefOf(job: KubeObject): { kind: string; name: string; apiGroup: string } | undefined {
  const ref = objectOr(objectOr(job.spec).runtimeRef);
  if (typeof ref.name !== "string" || ref.name === "") return undefined;
  return {
    name: ref.name,
    kind: typeof ref.kind === "string" && ref.kind !== "" ? ref.kind : "ClusterTrainingRuntime",
    apiGroup: typeof ref.apiGroup === "string" && ref.apiGroup !== "" ? ref.apiGroup : TRAINER.group,
  };
}

const trainerOf = (job: KubeObject): Obj => objectOr(objectOr(job.spec).trainer);

// ---- strategic merge patch, in place and linear ----------------------------------------------------------------

/** Where a strategic merge patch merges lists by key, below one object (k8s.io/api patchMergeKey tags). */
interface Schema {
  fields?: Record<string, Schema>;
  lists?: Record<string, string>;
  items?: Record<string, Schema>;
}
const CONTAINER: Schema = { lists: { env: "name", volumeMounts: "mountPath", ports: "containerPort", volumeDevices: "devicePath" } };
const POD_SPEC: Schema = {
  lists: {
    containers: "name",
    initContainers: "name",
    ephemeralContainers: "name",
    volumes: "name",
    imagePullSecrets: "name",
    schedulingGates: "name",
    resourceClaims: "name",
    hostAliases: "ip",
    topologySpreadConstraints: "topologyKey",
  },
  items: { containers: CONTAINER, initContainers: CONTAINER, ephemeralContainers: CONTAINER },
};
const JOB_TEMPLATE: Schema = { fields: { spec: { fields: { template: { fields: { spec: POD_SPEC } } } } } };

/** The index of a keyed list by key, built once per list (so a list that grows is never scanned again). */
type Indexes = WeakMap<unknown[], Map<unknown, number>>;

function indexOf(list: unknown[], key: string, indexes: Indexes): Map<unknown, number> {
  let index = indexes.get(list);
  if (!index) {
    index = new Map();
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      if (isObject(item) && item[key] !== undefined && !index.has(item[key])) index.set(item[key], i);
    }
    indexes.set(list, index);
  }
  return index;
}

/**
 * Keys a merge never walks into: JSON.parse makes an own `"__proto__"` key of a review's text, and `target[k]` of it
 * would be Object.prototype itself, which the merge would then write into for the whole process (a TrainJob is the
 * caller's text: without `--client-ca`, anyone who reaches the port). No Kubernetes field has these names.
 */
const UNSAFE_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/** `patch` merged into `target` (a private copy), in place. Nulls are no-ops: a typed patch has none. */
function mergeInto(target: Obj, patch: Obj, schema: Schema, indexes: Indexes): void {
  for (const k of Object.keys(patch)) {
    if (UNSAFE_KEYS.has(k)) continue;
    const v = patch[k];
    if (v === null || v === undefined) continue;
    const key = schema.lists?.[k];
    if (key !== undefined && Array.isArray(v)) {
      if (!Array.isArray(target[k])) target[k] = [];
      mergeList(target[k] as unknown[], v, key, schema.items?.[k] ?? {}, indexes);
    } else if (isObject(v)) {
      if (!isObject(target[k])) target[k] = {};
      mergeInto(target[k] as Obj, v, schema.fields?.[k] ?? {}, indexes);
    } else target[k] = Array.isArray(v) ? structuredClone(v) : v;
  }
}

/** A keyed list's patch merged into `list` in place: an item of a known key merged into it, any other appended. */
function mergeList(list: unknown[], items: unknown[], key: string, schema: Schema, indexes: Indexes): void {
  const index = indexOf(list, key, indexes);
  for (const item of items) {
    if (!isObject(item)) {
      list.push(structuredClone(item));
      continue;
    }
    const at = index.get(item[key]);
    if (at !== undefined && isObject(list[at])) {
      mergeInto(list[at], item, schema, indexes);
      continue;
    }
    const fresh: Obj = {};
    mergeInto(fresh, item, schema, indexes);
    if (item[key] !== undefined && !index.has(item[key])) index.set(item[key], list.length);
    list.push(fresh);
  }
}

/** resourcesPerNode merged into a container's resources (MergeResourceRequirements: limits and requests key by key). */
export function mergeResources(base: unknown, perNode: unknown): V1Container["resources"] {
  const out: Obj = structuredClone(objectOr(base));
  for (const [k, v] of Object.entries(objectOr(perNode))) {
    if (v === null || v === undefined) continue;
    if ((k === "limits" || k === "requests") && isObject(v)) out[k] = { ...objectOr(out[k]), ...v };
    else if (k === "claims" && Array.isArray(v)) {
      // Claims merge by name (resourceRequirementsPatchMeta). Upstream then writes only limits and requests into
      // the JobSet; the runtime's claims are kept here, so a claim's GPUs are counted rather than dropped.
      const claims = Array.isArray(out.claims) ? [...(out.claims as unknown[])] : [];
      for (const c of v) if (!claims.some((x) => isObject(x) && isObject(c) && x.name === c.name)) claims.push(structuredClone(c));
      out.claims = claims;
    }
  }
  return out;
}

// ---- the patches, read --------------------------------------------------------------------------------------

/** Patch fields that would change GPUs or pod counts, which Trainer v2.3.0's patch types do not have. */
const NOT_IN_V230: ReadonlyArray<{ at: "job" | "jobSpec" | "podSpec" | "container"; field: string }> = [
  { at: "job", field: "replicas" },
  { at: "jobSpec", field: "parallelism" },
  { at: "jobSpec", field: "completions" },
  { at: "podSpec", field: "resourceClaims" },
  { at: "podSpec", field: "overhead" },
  { at: "podSpec", field: "ephemeralContainers" },
  { at: "container", field: "resources" },
];

const FIX_SHAPE = "write it as Trainer v2.3.0's RuntimePatch (trainingRuntimeSpec.template.spec.replicatedJobs[].template...)";
const FIX_FIELD = "remove it and set the trainer's resources in spec.trainer.resourcesPerNode (or in the runtime)";

interface JobPatch {
  name: string;
  patch: Obj;
}

/** The patches' per-Job entries, in order, and what of them the model cannot read. */
function readPatches(job: KubeObject, skipManager: string | undefined): { entries: JobPatch[]; unknowns: TrainJobUnknown[] } {
  const entries: JobPatch[] = [];
  const unknowns: TrainJobUnknown[] = [];
  const raw = objectOr(job.spec).runtimePatches;
  if (raw === undefined || raw === null) return { entries, unknowns };
  if (!Array.isArray(raw))
    return { entries, unknowns: [{ field: "spec.runtimePatches", message: `is not a list: cannot tell what it does to the pods; ${FIX_SHAPE}` }] };
  const odd = (field: string, what: string): void => void unknowns.push({ field, message: `${what}: cannot tell what it does to the pods; ${FIX_SHAPE}` });
  raw.forEach((p, i) => {
    const at = `spec.runtimePatches[${i}]`;
    if (!isObject(p)) return odd(at, "is not an object");
    if (skipManager !== undefined && p.manager === skipManager) return;
    const spec = objectOr(objectOr(p.trainingRuntimeSpec).template).spec;
    if (spec === undefined || spec === null) return;
    if (!isObject(spec)) return odd(`${at}.trainingRuntimeSpec.template.spec`, "is not an object");
    const rjobs = spec.replicatedJobs;
    if (rjobs === undefined || rjobs === null) return;
    if (!Array.isArray(rjobs)) return odd(`${at}.trainingRuntimeSpec.template.spec.replicatedJobs`, "is not a list");
    rjobs.forEach((r, j) => {
      const rat = `${at}.trainingRuntimeSpec.template.spec.replicatedJobs[${j}]`;
      if (!isObject(r) || typeof r.name !== "string") return odd(rat, "is not a replicated Job patch with a name");
      const jobSpec = objectOr(objectOr(r.template).spec);
      const podSpec = objectOr(objectOr(jobSpec.template).spec);
      const where = { job: [r, `${rat}`], jobSpec: [jobSpec, `${rat}.template.spec`], podSpec: [podSpec, `${rat}.template.spec.template.spec`] } as const;
      for (const { at: level, field } of NOT_IN_V230) {
        if (level === "container") {
          for (const list of ["containers", "initContainers"])
            (Array.isArray(podSpec[list]) ? (podSpec[list] as unknown[]) : []).forEach((c, k) => {
              if (isObject(c) && c[field] !== undefined && c[field] !== null)
                unknowns.push({
                  field: `${rat}.template.spec.template.spec.${list}[${k}].${field}`,
                  message: `Trainer v2.3.0's runtime patches carry no ${field} (its CRD prunes it): cannot tell what this Trainer does with it; ${FIX_FIELD}`,
                  value: c[field],
                });
            });
          continue;
        }
        const [obj, path] = where[level];
        if (obj[field] !== undefined && obj[field] !== null)
          unknowns.push({
            field: `${path}.${field}`,
            message: `Trainer v2.3.0's runtime patches carry no ${field} (its CRD prunes it): cannot tell what this Trainer does with it; ${FIX_FIELD}`,
            value: field === "resourceClaims" ? obj[field] : undefined,
          });
      }
      for (const list of ["containers", "initContainers", "volumes", "tolerations", "imagePullSecrets", "schedulingGates"])
        if (podSpec[list] !== undefined && podSpec[list] !== null && !Array.isArray(podSpec[list]))
          odd(`${rat}.template.spec.template.spec.${list}`, "is not a list");
      entries.push({ name: r.name, patch: withoutUnknownFields(objectOr(r.template)) });
    });
  });
  return { entries, unknowns };
}

/**
 * A replicated Job's template patch without the fields v2.3.0's patch types lack ({@link NOT_IN_V230}): counted as
 * v2.3.0 would (its CRD prunes them), while the caps report them as unknown. Copies only what it changes.
 */
function withoutUnknownFields(template: Obj): Obj {
  const jobSpec = objectOr(template.spec);
  const podTemplate = objectOr(jobSpec.template);
  const podSpec = objectOr(podTemplate.spec);
  const jobDrop = ["parallelism", "completions"].filter((f) => jobSpec[f] !== undefined);
  const podDrop = ["resourceClaims", "overhead", "ephemeralContainers"].filter((f) => podSpec[f] !== undefined);
  const lists = ["containers", "initContainers"].filter(
    (l) => Array.isArray(podSpec[l]) && (podSpec[l] as unknown[]).some((c) => isObject(c) && c.resources !== undefined),
  );
  if (jobDrop.length === 0 && podDrop.length === 0 && lists.length === 0) return template;
  const spec: Obj = { ...podSpec };
  for (const f of podDrop) delete spec[f];
  for (const l of lists)
    spec[l] = (podSpec[l] as unknown[]).map((c) => {
      if (!isObject(c)) return c;
      const { resources: _resources, ...rest } = c;
      return rest;
    });
  const js: Obj = { ...jobSpec, template: { ...podTemplate, spec } };
  for (const f of jobDrop) delete js[f];
  return { ...template, spec: js };
}

// ---- the model ---------------------------------------------------------------------------------------------------

function runtimeName(runtime: KubeObject): string {
  const m = objectOr(runtime.metadata);
  return `(${typeof runtime.kind === "string" ? runtime.kind : "ClusterTrainingRuntime"} ${String(m.name ?? "")})`;
}

/** `field` under `templateField` at a key of the trainer container's limits or requests resourcesPerNode set, moved there. */
function resourcesMapper(templateField: string, containerIndex: number | undefined, perNode: unknown): (field: string) => string {
  if (containerIndex === undefined) return (f) => f;
  const prefix = `${templateField}.spec.containers[${containerIndex}].resources`;
  const own = objectOr(perNode);
  return (f) => {
    if (f === prefix) return "spec.trainer.resourcesPerNode";
    if (!f.startsWith(`${prefix}.`)) return f;
    const rest = f.slice(prefix.length);
    const m = /^\.(limits|requests)\[([^\]]+)\]/.exec(rest);
    if (m) return Object.hasOwn(objectOr(own[m[1]!]), m[2]!) ? `spec.trainer.resourcesPerNode${rest}` : f;
    const side = /^\.(limits|requests)$/.exec(rest);
    return side && own[side[1]!] !== undefined ? `spec.trainer.resourcesPerNode${rest}` : f;
  };
}

/** A count as upstream reads an int32 pointer: its value, or `fallback` when unset; `max(n, 1)` when `atLeastOne`. */
function countOf(v: unknown, fallback: number, atLeastOne: boolean): unknown {
  if (v === undefined || v === null) return fallback;
  return typeof v === "number" && atLeastOne ? Math.max(v, 1) : v;
}

const times = (a: unknown, b: unknown): unknown => (typeof a !== "number" ? a : typeof b !== "number" ? b : a * b);

/** The TrainJob alone (its runtime unknown): one `node` Job of numNodes pods with resourcesPerNode. */
function withoutRuntime(job: KubeObject): TrainJobModel {
  const t = trainerOf(job);
  const container: V1Container = { name: TRAINER.node };
  if (t.resourcesPerNode !== undefined) container.resources = structuredClone(t.resourcesPerNode) as V1Container["resources"];
  if (typeof t.image === "string") container.image = t.image;
  const templateField = "spec.trainer";
  return {
    replicas: [
      {
        type: TRAINER.node,
        replicas: t.numNodes ?? 1,
        template: { spec: { containers: [container] } },
        replicasField: "spec.trainer.numNodes",
        templateField,
        trainer: true,
        perNodeContainer: 0,
        mapField: resourcesMapper(templateField, 0, t.resourcesPerNode),
      },
    ],
    unknowns: [],
  };
}

/**
 * The pod templates and pod counts Trainer v2.3.0 makes of `job` on `runtime` (see the module comment).
 * `skipManager`: leave that manager's runtime patch out (the outfitter recomputes its own).
 */
export function trainJobModel(job: KubeObject, runtime: KubeObject | undefined, skipManager?: string): TrainJobModel {
  if (!runtime) return withoutRuntime(job);
  const raw = objectOr(objectOr(objectOr(runtime.spec).template).spec).replicatedJobs;
  if (!Array.isArray(raw)) return { replicas: [], unknowns: [] };
  const name = runtimeName(runtime);
  // 1. The runtime's Jobs copied once, every patch merged in, in order (mergeRuntimePatches).
  const rjobs: Obj[] = raw.map((r) => structuredClone(objectOr(r)));
  const byName = new Map<unknown, number>();
  rjobs.forEach((r, i) => {
    if (!byName.has(r.name)) byName.set(r.name, i);
  });
  const { entries, unknowns } = readPatches(job, skipManager);
  const indexes: Indexes = new WeakMap();
  for (const { name: target, patch } of entries) {
    const at = byName.get(target);
    if (at === undefined) continue; // Trainer's webhook refuses a patch of a Job the runtime has not.
    const r = rjobs[at]!;
    if (!isObject(r.template)) r.template = {};
    mergeInto(r.template as Obj, patch, JOB_TEMPLATE, indexes);
  }
  // 2.–5. Which Job is the trainer, resourcesPerNode, counts.
  const mlPolicy = objectOr(runtime.spec).mlPolicy;
  const policy = isObject(mlPolicy) ? mlPolicy : undefined;
  const mpi = policy && isObject(policy.mpi) ? policy.mpi : undefined;
  const launcherAsNode = mpi?.runLauncherAsNode === true;
  const byAncestor = !mpi || isObject(policy?.torch) || isObject(policy?.jax) || isObject(policy?.xgboost);
  const t = trainerOf(job);
  const perNode = t.resourcesPerNode;
  if (perNode !== undefined && perNode !== null && !isObject(perNode))
    unknowns.push({ field: "spec.trainer.resourcesPerNode", message: "is not an object: cannot tell the trainer's resources; write limits and requests maps" });
  const ctx: Policies = { name, policy, mpi, launcherAsNode, byAncestor, numNodes: t.numNodes, perNode, firstTrainer: true, firstNode: true };
  return { replicas: rjobs.map((r, i) => resolveJob(r, i, ctx)), unknowns };
}

/** What resolving one Job reads of the runtime and the TrainJob (and which Jobs came first). */
interface Policies {
  name: string;
  policy: Obj | undefined;
  mpi: Obj | undefined;
  launcherAsNode: boolean;
  byAncestor: boolean;
  numNodes: unknown;
  perNode: unknown;
  firstTrainer: boolean;
  firstNode: boolean;
}

/** One Job's pod count and field (rules 2, 4 and 5 of the module comment). */
function podsOf(r: Obj, at: string, type: string, trainer: boolean, ctx: Policies): { count: unknown; field: string } {
  const jobSpec = objectOr(objectOr(r.template).spec);
  let count: unknown;
  let field: string;
  if (trainer && ctx.policy) [count, field] = [countOf(ctx.policy.numNodes, 1, true), `${ctx.name}.spec.mlPolicy.numNodes`];
  else [count, field] = [countOf(jobSpec.parallelism, 1, true), jobSpec.parallelism !== undefined ? `${at}.template.spec.parallelism` : `${at}.replicas`];
  const n = ctx.numNodes;
  if (n !== undefined && n !== null) {
    // The first trainer-labelled Job (torch, JAX, XGBoost, plainml); with MPI the Job named `node`.
    if (ctx.byAncestor && trainer && ctx.firstTrainer) [count, field] = [n, "spec.trainer.numNodes"];
    if (ctx.mpi && type === TRAINER.node && ctx.firstNode)
      [count, field] = [ctx.launcherAsNode && typeof n === "number" ? Math.max(n - 1, 1) : n, "spec.trainer.numNodes"];
  }
  if (trainer) ctx.firstTrainer = false;
  if (type === TRAINER.node) ctx.firstNode = false;
  // A trainer-labelled Job's replicas become 1 (builder.go Trainer); another keeps the runtime's.
  const replicas = trainer ? 1 : countOf(r.replicas, 1, false);
  return { count: times(replicas, count), field: typeof replicas === "number" ? field : `${at}.replicas` };
}

/** resourcesPerNode merged into the first `node` container of `template` when it applies (rule 3); its index. */
function applyPerNode(template: V1PodTemplateSpec, type: string, trainer: boolean, ctx: Policies): number | undefined {
  const spec = objectOr(template.spec);
  if (!isObject(ctx.perNode) || !((trainer && ctx.policy) || (ctx.launcherAsNode && type === TRAINER.node)) || !Array.isArray(spec.containers))
    return undefined;
  const k = (spec.containers as unknown[]).findIndex((c) => isObject(c) && c.name === TRAINER.node);
  if (k < 0) return undefined;
  const c = spec.containers[k] as Obj;
  c.resources = mergeResources(c.resources, ctx.perNode);
  return k;
}

function resolveJob(r: Obj, i: number, ctx: Policies): TrainJobReplica {
  const at = `${ctx.name}.spec.template.spec.replicatedJobs[${i}]`;
  const type = typeof r.name === "string" ? r.name : `replicatedJobs[${i}]`;
  const jobTemplate = objectOr(r.template);
  const trainer = objectOr(objectOr(jobTemplate.metadata).labels)[TRAINER.ancestorLabel] === TRAINER.ancestorTrainer;
  const template = objectOr(objectOr(jobTemplate.spec).template) as V1PodTemplateSpec;
  const templateField = `${at}.template.spec.template`;
  const { count, field } = podsOf(r, at, type, trainer, ctx);
  const perNodeContainer = applyPerNode(template, type, trainer, ctx);
  return {
    type,
    replicas: count,
    template,
    replicasField: field,
    templateField,
    trainer,
    perNodeContainer,
    mapField: resourcesMapper(templateField, perNodeContainer, ctx.perNode),
  };
}

/** The TrainJob's replicated Jobs, resolved against `runtime` (see the module's comment). */
export function trainJobReplicas(job: KubeObject, runtime: KubeObject | undefined): TrainJobReplica[] {
  return trainJobModel(job, runtime).replicas;
}

/** The runtime's replicated Jobs' pod specs, with their field paths. */
export function runtimePodSpecs(runtime: KubeObject): Array<{ spec: unknown; field: string }> {
  const rjobs = objectOr(objectOr(objectOr(runtime.spec).template).spec).replicatedJobs;
  if (!Array.isArray(rjobs)) return [];
  return rjobs.map((r, i) => ({
    spec: objectOr(objectOr(objectOr(objectOr(r).template).spec).template).spec,
    field: `spec.template.spec.replicatedJobs[${i}].template.spec.template.spec`,
  }));
}

/** How many runtime patches the TrainJob carries (a list's length; 0 when it has none or it is no list). */
export function runtimePatchCount(job: KubeObject): number {
  const p = objectOr(job.spec).runtimePatches;
  return Array.isArray(p) ? p.length : 0;
}

/**
 * The pod specs a TrainJob's review prices for its runtime patches (`src/core/cost.ts`): each patch's per-Job
 * pod spec patches, of at most {@link MAX_RUNTIME_PATCHES} patches (more are refused before anything reads them).
 * The runtime's own Jobs are priced once it has been read (`webhooks/validate-jobs.ts`).
 */
export function trainJobPricedSpecs(job: KubeObject): unknown[] {
  const out: unknown[] = [];
  const patches = objectOr(job.spec).runtimePatches;
  if (!Array.isArray(patches)) return out;
  for (const p of patches.slice(0, MAX_RUNTIME_PATCHES)) {
    const rjobs = objectOr(objectOr(objectOr(objectOr(p).trainingRuntimeSpec).template).spec).replicatedJobs;
    if (Array.isArray(rjobs)) for (const r of rjobs) out.push(objectOr(objectOr(objectOr(objectOr(r).template).spec).template).spec);
  }
  // Past the CRD's limit each patch is one item, never looked into: its length alone (a stand-in array's too,
  // `src/core/stand-in.ts`) can pass the bound, and a TrainJob of thousands of patches is answered at once.
  for (let i = MAX_RUNTIME_PATCHES; i < patches.length; i++) out.push(undefined);
  return out;
}

/**
 * @module
 * `/validate/jobs`: rules on a training job of any configured kind.
 * - job-name: a DNS-1035 label (the training operator's rule), and every replica's name as its controller
 *   names it (`replicaObjectName`: `<job>-<type>-<index>`, Caffe2 `<namespace>-<job>-worker-<index>`) a
 *   DNS-1035 label too (it is a hostname and a Service name: at most 63 characters, starting with a letter);
 * - job-shape: every replica template has containers and one named as the framework expects; replica types
 *   of PyTorch, XGBoost and Paddle jobs are `Master` or `Worker`, of JAX jobs `Worker`, spelled so; TF has at
 *   most one Chief or Master replica type and replica in all; PyTorch's and XGBoost's Master, when present,
 *   sets `replicas: 1`, PyTorch's other replica types at least 1 when set; an elastic PyTorchJob has a
 *   `Worker`; an XGBoostJob has a Master; `spec.runPolicy.managedBy`, when set on a TF, PyTorch, XGBoost or
 *   Paddle job, names the training operator or MultiKueue (the training operator v1.9.4's validating
 *   webhooks, `pkg/webhooks/`, `pkg/common/util/webhooks.go`);
 * - job-replicas: replicas per replica type at most the policy's cap;
 * - job-gpus: replicas × the pod's effective GPU request, summed over replica types, at most the per-job limit;
 * - run-policy: ttlSecondsAfterFinished required and capped, activeDeadlineSeconds and backoffLimit caps,
 *   cleanPodPolicy and restartPolicy values allowed (a Caffe2Job's template restartPolicy when its replica spec
 *   sets none: the one its pods get); for kinds Quartermaster runs (Caffe2Job), whose CRD checks nothing,
 *   also the runPolicy and restartPolicy values its job controller could not read;
 * - and the pod-spec rules, accelerator-allowed (`accelerator.ts`) and the DRA claim rules (`claims.ts`) on every
 *   replica template.
 * Deprecated fields are warnings, not denials.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import type { DraCapacity } from "../core/dra.js";
import type { KubeObject } from "../core/kube.js";
import { frameworkInfo } from "../kinds/frameworks.js";
import { quartermasterControls, type CleanPodPolicy, type JobKind, type RunPolicyLimits } from "../policy/types.js";
import { replicasOf } from "../membership/resolve.js";
import { jobShape, type JobReplica, type JobShape, type KindShape, type ReplicaSpec, type RunPolicyField, type RunPolicyView } from "../kinds/index.js";
import { MAX_JOB_REPLICAS, jobReplicaTotal } from "../membership/ceiling.js";
import { trainJobModel } from "../kinds/trainjob-runtime.js";
import { isGpuResource } from "../core/gpu.js";
import { formatNano, nanoOfUnits, nanoToNumber } from "../core/quantity.js";
import { validateAccelerators } from "./accelerator.js";
import { validatePodClaims } from "./claims.js";
import { gpuCapApplies, nearLimit, podGpuDemand, podGpuNanos, validatePodSpec } from "./pod-spec.js";
import { merge, type Finding, type Findings, type ValidationContext } from "./types.js";

const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Upstream's int32 fields (replicas, backoffLimit, ttlSecondsAfterFinished); activeDeadlineSeconds is int64. */
const INT32_MAX = 2 ** 31 - 1;

/**
 * Why a count field (`replicas`, a run-policy field) is not a whole number in range, or undefined when it is.
 * A string (`replicas: "3"`), a fraction, NaN or Infinity is not: the caps compare numbers, and a value they
 * cannot compare must not pass them.
 */
export function countProblem(v: unknown, max = INT32_MAX): string | undefined {
  if (typeof v !== "number") return `${JSON.stringify(v)?.slice(0, 64) ?? String(v)} must be an integer, not ${v === null ? "null" : typeof v}`;
  if (!Number.isInteger(v) || v < 0 || v > max) return `${String(v)} must be a whole number from 0 to ${max}`;
  return undefined;
}

type Spec = Record<string, unknown>;

/**
 * The replica types upstream's webhook allows, spelled exactly so (training-operator v1.9.4
 * `pkg/webhooks/{pytorch,xgboost,paddlepaddle,jax}/*_webhook.go`: `field.NotSupported`). The operator's
 * defaulting would camel-case `worker`, but its webhook refuses the job first. TF (and MXNet, gone from the
 * operator since v1.9) accept any name there; Caffe2 has no webhook.
 */
export const REPLICA_TYPES: Readonly<Partial<Record<string, readonly string[]>>> = {
  pytorch: ["Master", "Worker"],
  xgboost: ["Master", "Worker"],
  paddle: ["Master", "Worker"],
  jax: ["Worker"],
};

/**
 * The controllers `spec.runPolicy.managedBy` may name (training-operator v1.9.4 `pkg/common/util/webhooks.go`
 * `ValidateRunPolicy`, called by the TF, PyTorch, XGBoost and Paddle webhooks; the JAX webhook does not). A
 * v1.8.1 CRD has no such field: the apiserver prunes it before any webhook sees the job.
 */
export const MANAGED_BY: readonly string[] = ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"];
const MANAGED_BY_CHECKED: readonly string[] = ["tensorflow", "pytorch", "xgboost", "paddle"];

/** The job's replicas with their field paths (its shape's, `src/kinds/`); `runtime`: a TrainJob's. */
function replicasOf_(job: KubeObject, kind: JobKind, runtime: KubeObject | undefined, shapes: readonly KindShape[] | undefined): JobReplica[] {
  return jobShape(kind, shapes).replicas(job, kind, runtime);
}

function names(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime: KubeObject | undefined): Findings {
  const violations: Finding[] = [];
  const m = (job.metadata ?? {}) as { name?: string; namespace?: string };
  const name = String(m.name ?? "");
  if (!DNS_1035.test(name) || name.length > 63) {
    violations.push({
      rule: "job-name",
      field: "metadata.name",
      message: `${JSON.stringify(name)} must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, at most 63 characters`,
    });
    return { violations, warnings: [] };
  }
  const ns = m.namespace || ctx.namespace;
  const described = jobShape(kind, ctx.policy.kindShapes);
  const hints = described.nameHints;
  for (const { type, spec } of replicasOf_(job, kind, runtime, ctx.policy.kindShapes)) {
    const n = replicasOf(spec);
    if (n === 0) continue;
    // The longest name is the last index's; all differ only in the index, so its form stands for all.
    // replicaObjectName (src/mutate/frameworks.ts), asked of the shape in the policy's registry.
    const longest = described.objectName(ns, name, type, n - 1);
    if (longest.length > 63) {
      violations.push({
        rule: "job-name",
        field: "metadata.name",
        message: `pod name ${longest} would be ${longest.length} characters, over 63: ${hints.shorten}`,
      });
    } else if (!DNS_1035.test(longest)) {
      violations.push({
        rule: "job-name",
        field: "metadata.name",
        message: `Service name ${JSON.stringify(longest)} would not be a DNS-1035 label (lower-case letters, digits and '-', starting with a letter)${hints.service(ns)}`,
      });
    }
  }
  return { violations, warnings: [] };
}

/** What the job-shape checks read: the job, its kind, its replica specs and where each is. */
interface ShapeInput {
  job: KubeObject;
  kind: JobKind;
  described: JobShape;
  specs: ReadonlyArray<readonly [string, ReplicaSpec]>;
  /** A replica type's path, set or not. */
  pathOf: (type: string) => string;
  /** Where the kind keeps its replica specs. */
  field: string;
  /** Through the `/scale` subresource. */
  viaScale: boolean;
}

function shape(job: KubeObject, kind: JobKind, runtime: KubeObject | undefined, viaScale: boolean, shapes: readonly KindShape[] | undefined): Findings {
  const described = jobShape(kind, shapes);
  const replicas = replicasOf_(job, kind, runtime, shapes);
  const field = described.specsField(kind);
  const input: ShapeInput = {
    job,
    kind,
    described,
    specs: replicas.map((r) => [r.type, r.spec] as const),
    pathOf: (type) => replicas.find((r) => r.type === type)?.path ?? `${field}.${type}`,
    field,
    viaScale,
  };
  const violations: Finding[] = [];
  if (input.specs.length === 0) violations.push({ rule: "job-shape", field, message: "at least one replica spec is required" });
  // A TrainJob's templates are its runtime's, which the Trainer's own webhook checks (image, container names).
  if (!described.v1Shape) return { violations, warnings: [] };
  const nproc = pytorchNprocShape(input);
  violations.push(
    ...containerShape(input),
    ...replicaTypeShape(input),
    ...tensorflowChiefShape(input),
    ...masterReplicaShape(input),
    ...pytorchReplicasShape(input),
    ...managedByShape(input),
    ...xgboostMasterShape(input),
    ...nproc.violations,
  );
  return { violations, warnings: nproc.warnings };
}

/** Every replica template has containers, each with an image, and one named as the framework expects. */
function containerShape({ kind, described, specs, pathOf }: ShapeInput): Finding[] {
  const violations: Finding[] = [];
  const container = frameworkInfo(kind.framework).container;
  const namedContainer = described.namedContainer;
  for (const [type, spec] of specs) {
    const path = pathOf(type);
    const containers = (spec.template?.spec?.containers ?? []) as Array<{ name?: string; image?: string }>;
    if (containers.length === 0) {
      violations.push({ rule: "job-shape", field: `${path}.template.spec.containers`, message: "at least one container is required" });
    } else if (namedContainer && !containers.some((c) => c.name === container)) {
      violations.push({ rule: "job-shape", field: `${path}.template.spec.containers`, message: `one container must be named ${container}` });
    }
    containers.forEach((c, i) => {
      if (!c.image) violations.push({ rule: "job-shape", field: `${path}.template.spec.containers[${i}].image`, message: "an image is required" });
    });
  }
  return violations;
}

/** The kind's replica types, spelled so, where it has a fixed set. */
function replicaTypeShape({ kind, specs, pathOf }: ShapeInput): Finding[] {
  const allowed = REPLICA_TYPES[kind.framework];
  if (!allowed) return [];
  return specs
    .filter(([type]) => !allowed.includes(type))
    .map(([type]) => ({
      rule: "job-shape",
      field: pathOf(type),
      message: `${JSON.stringify(type)}: ${kind.kind} replica types are ${allowed.join(" and ")}, spelled so`,
    }));
}

/** Replicas summed over the replica types spelled `t` in any case. */
function countOf(specs: ShapeInput["specs"], t: string): number {
  return specs.filter(([k]) => k.toLowerCase() === t).reduce((n, [, s]) => n + replicasOf(s), 0);
}

/** A TFJob has at most one Chief or Master, as replica type and as replica. */
function tensorflowChiefShape({ kind, specs, field }: ShapeInput): Finding[] {
  if (kind.framework !== "tensorflow") return [];
  // Upstream counts replica types (a `Chief` with 0 replicas still counts); one type with 2 replicas is
  // Quartermaster's own refusal (TensorFlow has one chief).
  const types = specs.filter(([k]) => ["chief", "master"].includes(k.toLowerCase())).map(([k]) => k);
  const replicas = countOf(specs, "chief") + countOf(specs, "master");
  if (replicas > 1) return [{ rule: "job-shape", field, message: `at most one Chief or Master replica in all, got ${replicas}` }];
  if (types.length > 1) return [{ rule: "job-shape", field, message: `at most one Chief or Master replica type, got ${types.join(" and ")}` }];
  return [];
}

/** A PyTorchJob's or XGBoostJob's Master, when present, sets `replicas: 1`. */
function masterReplicaShape({ kind, specs, pathOf }: ShapeInput): Finding[] {
  if (kind.framework !== "pytorch" && kind.framework !== "xgboost") return [];
  // Upstream refuses a Master whose `replicas` is unset too (its webhook sees the job before any defaulting).
  const master = specs.find(([k]) => k.toLowerCase() === "master");
  if (!master || master[1].replicas === 1) return [];
  const got = master[1].replicas === undefined ? "replicas is not set" : `got ${JSON.stringify(master[1].replicas)}`;
  return [{ rule: "job-shape", field: `${pathOf(master[0])}.replicas`, message: `the Master replica type must have exactly 1 replica, ${got}` }];
}

/** A PyTorchJob's other replica types have at least 1 replica when set; an elastic one has a Worker. */
function pytorchReplicasShape({ job, kind, specs, pathOf, viaScale }: ShapeInput): Finding[] {
  if (kind.framework !== "pytorch") return [];
  const violations: Finding[] = [];
  // v1.9.4: a replica type other than Master, when its `replicas` is set, has at least 1 (a negative count is
  // job-replicas' refusal). Not through `/scale`: upstream's webhook is not called for the subresource.
  for (const [type, spec] of specs) {
    if (!viaScale && type !== "Master" && spec.replicas === 0)
      violations.push({ rule: "job-shape", field: `${pathOf(type)}.replicas`, message: `must be at least 1, got ${spec.replicas}` });
  }
  if ((job.spec as Spec | undefined)?.elasticPolicy && !specs.some(([k]) => k === "Worker"))
    violations.push({ rule: "job-shape", field: pathOf("Worker"), message: "is required when spec.elasticPolicy is set" });
  return violations;
}

/** `spec.runPolicy.managedBy`, where upstream checks it, names the training operator or MultiKueue. */
function managedByShape({ job, kind }: ShapeInput): Finding[] {
  const managedBy = ((job.spec as Spec | undefined)?.runPolicy as Spec | undefined)?.managedBy;
  if (!MANAGED_BY_CHECKED.includes(kind.framework) || managedBy === undefined || MANAGED_BY.includes(managedBy as string)) return [];
  return [
    {
      rule: "run-policy",
      field: "spec.runPolicy.managedBy",
      message: `${JSON.stringify(managedBy)?.slice(0, 64)} is not supported: ${MANAGED_BY.join(" or ")}`,
    },
  ];
}

/** An XGBoostJob has a Master. */
function xgboostMasterShape({ kind, specs, pathOf }: ShapeInput): Finding[] {
  if (kind.framework !== "xgboost" || specs.some(([k]) => k === "Master")) return [];
  return [{ rule: "job-shape", field: pathOf("Master"), message: "is required: an XGBoostJob has one Master" }];
}

/** A PyTorchJob's deprecated `elasticPolicy.nProcPerNode`: a warning, a violation together with `nprocPerNode`. */
function pytorchNprocShape({ job, kind }: ShapeInput): Findings {
  if (kind.framework !== "pytorch") return { violations: [], warnings: [] };
  const spec = (job.spec ?? {}) as Spec;
  if ((spec.elasticPolicy as Spec | undefined)?.nProcPerNode === undefined) return { violations: [], warnings: [] };
  if (spec.nprocPerNode !== undefined)
    return {
      violations: [{ rule: "job-shape", field: "spec.elasticPolicy.nProcPerNode", message: "must not be set together with spec.nprocPerNode" }],
      warnings: [],
    };
  return { violations: [], warnings: ["quartermaster: spec.elasticPolicy.nProcPerNode is deprecated; use spec.nprocPerNode"] };
}

function capacity(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime: KubeObject | undefined): Findings {
  const violations: Finding[] = [];
  const warnings: string[] = [];
  const caps = ctx.limits.job.replicas ?? {};
  let gpus = 0n;
  for (const { type, spec, replicasField } of replicasOf_(job, kind, runtime, ctx.policy.kindShapes)) {
    // `replicas: "3"` would count as the default 1 and slip under every cap: refused instead.
    const problem = spec?.replicas === undefined ? undefined : countProblem(spec.replicas);
    if (problem) {
      violations.push({ rule: "job-replicas", field: replicasField, message: problem });
      continue;
    }
    const n = replicasOf(spec);
    const cap = caps[type] ?? Object.entries(caps).find(([t]) => t.toLowerCase() === type.toLowerCase())?.[1];
    if (cap !== undefined && n > cap) {
      violations.push({
        rule: "job-replicas",
        field: replicasField,
        message: `${n} exceeds the limit of ${cap} ${type} replicas`,
        value: n,
      });
    }
    gpus += BigInt(n) * podGpuNanos((spec.template?.spec ?? {}) as V1PodSpec, ctx);
  }
  violations.push(...unknownGpus(job, kind, ctx, runtime, gpus));
  const max = ctx.limits.job.gpus;
  if (max !== undefined) {
    const shown = formatNano(gpus);
    if (gpus > nanoOfUnits(max))
      violations.push({
        rule: "job-gpus",
        field: jobShape(kind, ctx.policy.kindShapes).jobGpusField(job),
        message: `the job requests ${shown} GPUs in all, over the per-job limit of ${max}`,
        value: nanoToNumber(gpus),
      });
    else if (nearLimit(gpus, nanoOfUnits(max))) warnings.push(`quartermaster: the job requests ${shown} of the ${max} GPUs allowed per job`);
  }
  return { violations, warnings };
}

/** Whether a value the model could not read names a GPU resource (in a limits or requests map) or DRA claims. */
function namesGpus(v: unknown, ctx: ValidationContext): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  if (Array.isArray(o.claims) && o.claims.length > 0) return true;
  return [o.limits, o.requests].some(
    (side) => typeof side === "object" && side !== null && Object.keys(side).some((r) => isGpuResource(r, ctx.policy.gpu.resources)),
  );
}

/**
 * gpu-unknown for a TrainJob: what the Trainer v2.3.0 model (`src/kinds/trainjob-runtime.ts`) cannot read is not
 * counted as nothing. Under a GPU cap, refused at its field when the job asks for GPUs as counted or the unread
 * value itself names GPUs; never for a TrainJob that asks for none.
 */
function unknownGpus(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime: KubeObject | undefined, counted: bigint): Finding[] {
  if (jobShape(kind, ctx.policy.kindShapes).layout !== "runtime" || !gpuCapApplies(ctx)) return [];
  return trainJobModel(job, runtime)
    .unknowns.filter((u) => counted > 0n || namesGpus(u.value, ctx))
    .map((u) => ({ rule: "gpu-unknown", field: u.field, message: `${u.message} (under the namespace's GPU caps what cannot be counted is refused)` }));
}

/**
 * job-replica-ceiling: replicas summed over the replica types at most {@link MAX_JOB_REPLICAS}, whatever the
 * policy says (not configurable; always denies). One violation per replica spec, at its `replicas` field.
 */
function ceiling(job: KubeObject, kind: JobKind, runtime: KubeObject | undefined, shapes: readonly KindShape[] | undefined): Findings {
  const replicas = replicasOf_(job, kind, runtime, shapes);
  const total = runtime ? replicas.reduce((n, r) => n + replicasOf(r.spec), 0) : jobReplicaTotal(job, kind, shapes);
  if (total <= MAX_JOB_REPLICAS) return { violations: [], warnings: [] };
  const violations: Finding[] = replicas.map(({ spec, replicasField }) => ({
    rule: "job-replica-ceiling",
    field: replicasField,
    message: `${replicasOf(spec)} of the job's ${total} replicas; at most ${MAX_JOB_REPLICAS} replicas per job in all (Quartermaster's ceiling)`,
    value: total,
  }));
  return { violations, warnings: [] };
}

const RESTART_POLICIES: readonly string[] = ["Always", "OnFailure", "Never", "ExitCode"];

/** What the run-policy checks read. */
interface RunPolicyInput {
  /** The kind is one Quartermaster runs: what its job controller cannot read is refused. */
  controls: boolean;
  view: RunPolicyView;
  lim: RunPolicyLimits;
  /** The registry the kind is looked up in (the policy's). */
  shapes: readonly KindShape[] | undefined;
}

/** A count field's bounds: at most `max` (`what` it counts), in `range`, at least `min` for a kind Quartermaster runs. */
interface CountBounds {
  field: RunPolicyField;
  max: number | undefined;
  what: string;
  required?: boolean | undefined;
  range?: number;
  min?: number;
}

function runPolicy(job: KubeObject, kind: JobKind, ctx: ValidationContext): Findings {
  // A kind Quartermaster runs (Caffe2Job by default) has no CRD schema checking these fields (its CRD keeps
  // unknown fields): what its job controller cannot read is refused here, or the job would sit undone with
  // a log line only (src/reconcile/job-controller.ts readRunPolicy, readReplicas). DECIDE: stricter than
  // caffe2-operator, which read none of them.
  const shapes = ctx.policy.kindShapes;
  const controls = quartermasterControls(kind, shapes);
  // The run policy where the kind's shape keeps it (v1: `spec.runPolicy`; TrainJob: `spec.activeDeadlineSeconds`
  // and Quartermaster's TTL annotation, `src/kinds/`).
  const view = jobShape(kind, shapes).runPolicy(job);
  const lim = ctx.limits.runPolicy;
  const input: RunPolicyInput = { controls, view, lim, shapes };
  const violations = [
    ...runPolicyObject(input),
    ...ttlRequired(input),
    ...countWithin(input, {
      field: "ttlSecondsAfterFinished",
      max: lim.maxTtlSecondsAfterFinished,
      what: "seconds",
      required: lim.requireTtlSecondsAfterFinished,
    }),
    ...countWithin(input, { field: "activeDeadlineSeconds", max: lim.maxActiveDeadlineSeconds, what: "seconds", range: Number.MAX_SAFE_INTEGER, min: 1 }),
    ...countWithin(input, { field: "backoffLimit", max: lim.maxBackoffLimit, what: "retries" }),
    ...suspendIsBoolean(input),
    ...cleanPodPolicyAllowed(input),
    ...restartPoliciesAllowed(job, kind, input),
  ];
  return { violations, warnings: [] };
}

/** For a kind Quartermaster runs, the run-policy object, where set, is an object. */
function runPolicyObject({ controls, view }: RunPolicyInput): Finding[] {
  const raw = view.object?.value;
  if (!controls || !view.object || (raw !== null && typeof raw === "object" && !Array.isArray(raw))) return [];
  return [{ rule: "run-policy", field: view.object.field, message: `${JSON.stringify(raw)?.slice(0, 64)} must be an object` }];
}

/** ttlSecondsAfterFinished, when the policy requires it and the shape has the field. */
function ttlRequired({ view, lim }: RunPolicyInput): Finding[] {
  const ttlAt = view.at("ttlSecondsAfterFinished");
  if (!lim.requireTtlSecondsAfterFinished || ttlAt === undefined || view.fields.ttlSecondsAfterFinished?.value !== undefined) return [];
  return [{ rule: "run-policy", field: ttlAt, message: "is required: finished jobs must be cleaned up" }];
}

/**
 * Where a cap (or the TTL requirement) applies, the field must be a whole number: a string such as "x" or
 * "99999" is no number to compare, and passing it would pass the cap. For a kind Quartermaster runs, always.
 */
function countWithin({ controls, view }: RunPolicyInput, bounds: CountBounds): Finding[] {
  const { max, what, required = false, range = INT32_MAX, min = 0 } = bounds;
  const v = view.fields[bounds.field]?.value;
  const field = view.at(bounds.field);
  if (v === undefined || field === undefined || (max === undefined && !required && !controls)) return [];
  const problem = countProblem(v, range);
  if (problem) return [{ rule: "run-policy", field, message: problem }];
  if (controls && (v as number) < min) return [{ rule: "run-policy", field, message: `${v} must be at least ${min}` }];
  if (max !== undefined && (v as number) > max) return [{ rule: "run-policy", field, message: `${v} exceeds the limit of ${max} ${what}`, value: v as number }];
  return [];
}

/** For a kind Quartermaster runs, `suspend`, where set, is a boolean. */
function suspendIsBoolean({ controls, view }: RunPolicyInput): Finding[] {
  const suspend = view.fields.suspend?.value;
  if (!controls || suspend === undefined || typeof suspend === "boolean") return [];
  return [{ rule: "run-policy", field: view.at("suspend")!, message: `${JSON.stringify(suspend)?.slice(0, 64)} must be a boolean` }];
}

/** cleanPodPolicy, where set, is one the policy allows. */
function cleanPodPolicyAllowed({ view, lim }: RunPolicyInput): Finding[] {
  const cleanPodPolicy = view.fields.cleanPodPolicy?.value;
  if (!lim.allowedCleanPodPolicies || cleanPodPolicy === undefined || lim.allowedCleanPodPolicies.includes(cleanPodPolicy as CleanPodPolicy)) return [];
  return [
    {
      rule: "run-policy",
      field: view.at("cleanPodPolicy")!,
      message: `${String(cleanPodPolicy)} is not allowed; allowed: ${lim.allowedCleanPodPolicies.join(", ")}`,
    },
  ];
}

/** Each replica's restartPolicy is one the policy allows (and, for a kind Quartermaster runs, one it can read). */
function restartPoliciesAllowed(job: KubeObject, kind: JobKind, { controls, lim, shapes }: RunPolicyInput): Finding[] {
  const violations: Finding[] = [];
  const described = jobShape(kind, shapes);
  const fromTemplates = described.restartPolicyFromTemplate;
  // A TrainJob has no replica restartPolicy of its own (its Jobs' pods restart as the runtime's template says,
  // which the Trainer's webhook checks): only the replica specs of the v1 shapes are read.
  for (const { spec: s, path } of described.v1Shape ? replicasOf_(job, kind, undefined, shapes) : []) {
    // Caffe2's pods restart as the template says unless the replica spec says otherwise (caffe2-operator
    // used the template as is; Quartermaster's job controller reads it the same way): that one is checked.
    const own = s.restartPolicy !== undefined;
    const fromTemplate = !own && fromTemplates ? s.template?.spec?.restartPolicy : undefined;
    const v = own ? s.restartPolicy : fromTemplate;
    if (v === undefined) continue;
    const field = `${path}${own ? "" : ".template.spec"}.restartPolicy`;
    if (own && controls && !(RESTART_POLICIES as readonly unknown[]).includes(v)) {
      violations.push({ rule: "run-policy", field, message: `${JSON.stringify(v)?.slice(0, 64)} is not one of ${RESTART_POLICIES.join(", ")}` });
    } else if (lim.allowedRestartPolicies && !(lim.allowedRestartPolicies as readonly unknown[]).includes(v)) {
      violations.push({ rule: "run-policy", field, message: `${String(v)} is not allowed; allowed: ${lim.allowedRestartPolicies.join(", ")}` });
    }
  }
  return violations;
}

function templates(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime: KubeObject | undefined): Findings {
  return merge(
    ...replicasOf_(job, kind, runtime, ctx.policy.kindShapes).flatMap(({ spec, templateField: base, mapField }) => {
      const podSpec = spec.template?.spec;
      const found = merge(
        validatePodSpec(podSpec, `${base}.spec`, ctx),
        validateAccelerators(spec.template?.metadata, podSpec, ctx, { metadata: `${base}.metadata`, spec: `${base}.spec` }),
        validatePodClaims(podSpec, `${base}.spec`, ctx),
      );
      if (!mapField) return [found];
      return [{ violations: found.violations.map((v) => ({ ...v, field: mapField(v.field) })), warnings: found.warnings }];
    }),
  );
}

/** GPUs of each resource the whole job asks for, in nano-units (exact): replicas × the template's effective pod request. */

export function jobGpuNanosByResource(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime?: KubeObject): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const { spec } of replicasOf_(job, kind, runtime, ctx.policy.kindShapes)) {
    const n = BigInt(replicasOf(spec));
    for (const [name, per] of podGpuDemand((spec.template?.spec ?? {}) as V1PodSpec, ctx)) out.set(name, (out.get(name) ?? 0n) + n * per);
  }
  return out;
}

/** GPUs of each resource the whole job asks for, in units (display; the checks use {@link jobGpuNanosByResource}). */
export function jobGpusByResource(job: KubeObject, kind: JobKind, ctx: ValidationContext): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, nano] of jobGpuNanosByResource(job, kind, ctx)) out.set(name, nanoToNumber(nano));
  return out;
}

/** What the cluster has of a GPU resource (from the device ledger). */
/**
 * Where the rules' capacity comes from (implemented by src/run/capacity.ts from the device ledger's index): declared
 * here, by the rules that read it, not by the client that reads the ConfigMaps.
 */
export interface CapacitySource {
  /** The capacity as last read, or undefined while there is none. */
  current(): ClusterCapacity | undefined;
  /** The largest node's device count per DeviceClass (DRA), when known: bounds `allocationMode: All`. */
  draCapacity?(): DraCapacity | undefined;
}

export interface ClusterCapacity {
  /** In all, over every node. */
  total(resource: string): number | undefined;
  /** On the one node that has the most of it (0: no node has it); undefined while the ledger's node shapes are not known or stale. */
  largestNode?(resource: string): number | undefined;
}

/**
 * capacity: a job asking for more GPUs of one kind than the whole cluster has would pend forever, so it is
 * refused up front. Without a ledger the check is skipped, with a warning for jobs that ask for GPUs.
 */

export function validateCapacity(
  job: KubeObject,
  kind: JobKind,
  ctx: ValidationContext,
  capacity: ClusterCapacity | undefined,
  runtime?: KubeObject,
): Findings {
  const shapes = replicasOf_(job, kind, runtime, ctx.policy.kindShapes).map((r) => ({
    name: r.type,
    field: r.templateField,
    demand: podGpuDemand((r.spec.template?.spec ?? {}) as V1PodSpec, ctx),
  }));
  return merge(capacityFindings(jobGpuNanosByResource(job, kind, ctx, runtime), capacity), nodeShapeFindings(shapes, capacity));
}

/** One pod template of a job or workload: its name for messages, where it is written, and what one pod asks for per GPU resource (nano-units). */
export interface PodDemand {
  name: string;
  field: string;
  demand: ReadonlyMap<string, bigint>;
}

/**
 * no-node-shape: a pod that asks for more of a GPU resource than the one node with the most of it offers can never
 * be scheduled (8 GPUs per node, 16 per pod), whatever the queue or the cluster's total says. Judged on the device
 * ledger's largest healthy node per resource while the ledger is fresh; skipped (fail open) without one, as the
 * scheduler is the real judge and an old ledger may miss a node that joined since. `warn` by default.
 */
export function nodeShapeFindings(pods: readonly PodDemand[], capacity: ClusterCapacity | undefined): Findings {
  const violations: Finding[] = [];
  for (const pod of pods) {
    for (const [resource, n] of pod.demand) {
      const largest = capacity?.largestNode?.(resource);
      if (largest === undefined || n === 0n || n <= nanoOfUnits(BigInt(Math.max(0, Math.floor(largest))))) continue;
      violations.push({
        rule: "no-node-shape",
        field: pod.field,
        message:
          largest === 0
            ? `${formatNano(n)} ${resource} per ${pod.name} pod, and no node has ${resource}: it would never be scheduled`
            : `${formatNano(n)} ${resource} per ${pod.name} pod, over the largest node's ${largest}: it would never be scheduled (use more pods of at most ${largest})`,
        value: nanoToNumber(n),
      });
    }
  }
  return { violations, warnings: [] };
}

/**
 * capacity on GPUs already counted: `wanted`, each resource's GPUs in all (nano-units), against the cluster's
 * (`validateCapacity`; batch Jobs and JobSets, src/validate/workload.ts).
 */
export function capacityFindings(wanted: ReadonlyMap<string, bigint>, capacity: ClusterCapacity | undefined): Findings {
  if (wanted.size === 0) return { violations: [], warnings: [] };
  if (!capacity) return { violations: [], warnings: ["quartermaster: cluster capacity not checked: no GPU device ledger yet"] };
  const violations: Finding[] = [];
  for (const [resource, n] of wanted) {
    const total = capacity.total(resource) ?? 0;
    // The ledger's whole-device counts; anything not a finite count is no capacity.
    const have = Number.isFinite(total) && total > 0 ? BigInt(Math.floor(total)) : 0n;
    if (n > nanoOfUnits(have)) {
      violations.push({
        rule: "capacity",
        field: "spec",
        message: `the job asks for ${formatNano(n)} ${resource} but the whole cluster has ${have}; it would never be scheduled`,
        value: nanoToNumber(n),
      });
    }
  }
  return { violations, warnings: [] };
}

/**
 * Every job rule on `job`. `runtime`: a TrainJob's (Cluster)TrainingRuntime, whose replicated Jobs are the
 * TrainJob's replicas (`src/kinds/trainjob-runtime.ts`); without it a TrainJob is checked as its `node` Job alone.
 * `viaScale`: the job as a `/scale` UPDATE leaves it (the rules upstream's webhook applies to the whole job only
 * are left out).
 */
export function validateJob(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime?: KubeObject, viaScale = false): Findings {
  return merge(
    names(job, kind, ctx, runtime),
    shape(job, kind, runtime, viaScale, ctx.policy.kindShapes),
    ceiling(job, kind, runtime, ctx.policy.kindShapes),
    capacity(job, kind, ctx, runtime),
    runPolicy(job, kind, ctx),
    templates(job, kind, ctx, runtime),
  );
}

/**
 * For an UPDATE: only what the update makes worse. A violation the old object already had at the same
 * field, with a value at least as large, does not block the update, so a job over a limit that was lowered
 * later can still have its labels and status changed.
 */
export function newOrWorse(now: Findings, before: Findings): Findings {
  const violations = now.violations.filter(
    (v) =>
      !before.violations.some(
        (o) => o.rule === v.rule && o.field === v.field && (v.value === undefined ? o.message === v.message : (o.value ?? -Infinity) >= v.value),
      ),
  );
  return { violations, warnings: now.warnings };
}

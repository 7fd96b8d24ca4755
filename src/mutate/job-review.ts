/**
 * @module
 * The decisions of `POST /mutate/jobs` (webhooks/mutate-jobs.ts holds its wiring: which guard, which reads, which
 * answer): which templates a review outfits and prices, a training job's `jobDefaults` and bare `gpu` renamed, a
 * queued job's or batch workload's templates outfitted once the claims they name are read, and a queued TrainJob's
 * steps around the read of its runtime (refused by count before any merge, priced with its runtime's templates
 * before the merge: issue 46). Pure: the reads are the webhook's. Every step answers the job (changed or the same
 * reference) and the warnings a CREATE gets back.
 */
import type { V1PodSpec, V1PodTemplateSpec } from "@kubernetes/client-node";
import { describeCost, specsCost, type ReviewCost } from "../core/cost.js";
import type { KnownClaims } from "../core/dra.js";
import { workloadTemplateSpecs, type QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject } from "../core/object.js";
import { jobShape } from "../kinds/index.js";
import { MAX_RUNTIME_PATCHES, runtimePatchCount, runtimePodSpecs, trainJobPricedSpecs } from "../kinds/trainjob-runtime.js";
import { queueNameOf } from "../kueue/admission.js";
import type { JobReadResult } from "../membership/lookup.js";
import type { JobKind, Policy } from "../policy/types.js";
import { effectiveJobDefaults, fillJobDefaults } from "./job-defaults.js";
import { KUEUE_READ_MUTATIONS, outfitQueuedJobTemplates, outfitQueuedWorkloadTemplates } from "./job-templates.js";
import { outfitQueuedTrainJob, QM_RUNTIME_PATCH_MANAGER, trainerNodeTemplate } from "./trainjob-outfit.js";
import { renameTrainJobBareGpu } from "./trainjob-resources.js";

/** The job a step answers, and the warnings so far. */
export interface JobsMutation {
  object: KubeObject;
  warnings: string[];
}

/** What `/mutate/jobs` is reviewing: a training job of a configured kind, or a queued batch Job or JobSet. */
export type MutatedKind = { job: JobKind } | { workload: QueuedWorkloadKind };

const isPodSpec = (v: unknown): v is V1PodSpec => isObject(v);

/**
 * The pod templates outfitted for a queued job or workload, which the review prices and whose claims it reads: none
 * for an object without a queue name, and none of a TrainJob's (its runtime's, read later).
 */
export function queuedTemplateSpecs(obj: KubeObject, kind: MutatedKind): V1PodSpec[] {
  if (queueNameOf(obj) === undefined) return [];
  if ("workload" in kind) return workloadTemplateSpecs(obj, kind.workload);
  const shape = jobShape(kind.job);
  if (shape.layout === "runtime") return [];
  return shape.replicas(obj, kind.job).flatMap((r) => (isPodSpec(r.spec.template?.spec) ? [r.spec.template.spec] : []));
}

/** The review priced: a queued job's templates one pass per mutation, and a TrainJob's runtime patches (past Trainer's CRD limit of 16 by their count alone: issue 46). */
export function mutateJobsCost(obj: KubeObject, kind: MutatedKind, policy: Pick<Policy, "gpu">): ReviewCost {
  const patches = "job" in kind && jobShape(kind.job).layout === "runtime" ? trainJobPricedSpecs(obj) : [];
  return specsCost([...queuedTemplateSpecs(obj, kind), ...patches], KUEUE_READ_MUTATIONS.length, policy.gpu.resources);
}

/** Whether the review is of a queued TrainJob: its templates are its runtime's, read before anything is outfitted. */
export const isQueuedTrainJob = (obj: KubeObject, kind: MutatedKind): kind is { job: JobKind } =>
  "job" in kind && jobShape(kind.job).layout === "runtime" && queueNameOf(obj) !== undefined;

/** A training job's `jobDefaults` filled and a TrainJob's bare `gpu` renamed (`gpu.resourceName`). */
function withDefaults(obj: KubeObject, kind: JobKind, policy: Policy, namespace: string): JobsMutation {
  const out = fillJobDefaults(obj, kind, effectiveJobDefaults(policy, namespace));
  const renamed = renameTrainJobBareGpu(out.job, kind, policy.gpu.resourceName);
  return { object: renamed.job, warnings: [...out.warnings, ...renamed.warnings] };
}

/**
 * A job or workload (not a queued TrainJob) mutated with the claims its templates name read: a training job's
 * defaults, then its queued templates outfitted; a batch workload's templates outfitted. `unread` are the warnings
 * for the claims that could not be read.
 */
export function mutateJobWithClaims(
  obj: KubeObject,
  kind: MutatedKind,
  ctx: { policy: Policy; namespace: string; claims: KnownClaims },
  unread: string[],
): JobsMutation {
  const { policy, namespace } = ctx;
  if ("workload" in kind) {
    const outfitted = outfitQueuedWorkloadTemplates(obj, kind.workload, ctx);
    return { object: outfitted.job, warnings: [...unread, ...outfitted.warnings] };
  }
  const defaulted = withDefaults(obj, kind.job, policy, namespace);
  const outfitted = outfitQueuedJobTemplates(defaulted.object, kind.job, ctx);
  return { object: outfitted.job, warnings: [...defaulted.warnings, ...unread, ...outfitted.warnings] };
}

/** A queued TrainJob's first step: its defaults; `done` when it has more runtime patches than Trainer's CRD admits (it and /validate/jobs refuse it: nothing merged). */
export function queuedTrainJobStart(obj: KubeObject, kind: JobKind, policy: Policy, namespace: string): JobsMutation & { done: boolean } {
  const defaulted = withDefaults(obj, kind, policy, namespace);
  if (runtimePatchCount(defaulted.object) <= MAX_RUNTIME_PATCHES) return { ...defaulted, done: false };
  const why = `quartermaster: not outfitted for Kueue: more than ${MAX_RUNTIME_PATCHES} spec.runtimePatches (Trainer's CRD admits ${MAX_RUNTIME_PATCHES})`;
  return { object: defaulted.object, warnings: [...defaulted.warnings, why], done: true };
}

/**
 * A queued TrainJob with its runtime read: done, with a warning, when the runtime could not be read (the pods'
 * placement is then /mutate/pods') or when the TrainJob's patches with the runtime's templates are over the cost
 * bound (issue 46 finding 4, found again by bench:abuse's senders: a queued TrainJob on a 20,000-container runtime
 * held /mutate/jobs 230–560 ms; left to /validate/jobs, which refuses it); else the runtime, and the trainer nodes'
 * template whose claims are to be read.
 */
export function queuedTrainJobRuntime(
  start: JobsMutation,
  read: JobReadResult,
  policy: Pick<Policy, "gpu">,
): { done: JobsMutation } | { runtime: KubeObject; node: V1PodTemplateSpec | undefined } {
  const stop = (why: string) => ({ done: { object: start.object, warnings: [...start.warnings, `quartermaster: not outfitted for Kueue: ${why}`] } });
  if (read.kind !== "found") return stop(`the TrainJob's runtime could not be read (${read.reason})`);
  const cost = specsCost(
    [...trainJobPricedSpecs(start.object), ...runtimePodSpecs(read.job).map((r) => r.spec)],
    KUEUE_READ_MUTATIONS.length,
    policy.gpu.resources,
  );
  if (cost.over) return stop(`with its runtime's templates, ${describeCost(cost)}`);
  return { runtime: read.job, node: trainerNodeTemplate(start.object, read.job, QM_RUNTIME_PATCH_MANAGER)?.template };
}

/** A queued TrainJob's last step: its trainer nodes outfitted through a runtime patch of Quartermaster's (`./trainjob-outfit.ts`). */
export function outfitTrainJobWithClaims(
  start: JobsMutation,
  kind: JobKind,
  runtime: KubeObject,
  ctx: { policy: Policy; namespace: string; claims: KnownClaims },
  unread: string[],
): JobsMutation {
  const outfitted = outfitQueuedTrainJob(start.object, kind, runtime, ctx);
  return { object: outfitted.job, warnings: [...start.warnings, ...unread, ...outfitted.warnings] };
}

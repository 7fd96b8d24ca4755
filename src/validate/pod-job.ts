/**
 * @module
 * job-gpus at a DRA pod's CREATE (`/validate/pods`): the job the pod counts against (`src/membership/owner.ts`: its
 * training job, batch Job, or that Job's JobSet) judged again with the ResourceClaims and ResourceClaimTemplates its
 * templates name as they are now, read past the cache. A template is its own object: deleted and created again asking
 * more after its job was admitted, it would make every pod the job's controller creates from then on ask more, under
 * a job cap judged once with the old template (red team: 8 workers × 1 GPU admitted under `job.gpus: 8`, then 8 × 8
 * made, by an unsuspend or by deleting the running pods). The pod is where those GPUs are taken, so it is refused
 * there: rule `job-gpus` at the pod's `spec.resourceClaims`, the job's own finding in the message, with the fix.
 *
 * Only what a claim can change is judged here (`job-gpus`, and `gpu-unknown` for a claim the job names that is gone
 * or unreadable): the job's other rules were its own reviews'. Deliberately stricter than judging the job once: the
 * cap is the one in force at the pod's CREATE, so a DRA job over a `job.gpus` lowered since its admission gets no
 * new pods (an extended-resource job's pods are not judged against their job: nothing outside the job can change
 * what they ask).
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimReferences, podClaimGpuNanos, resolveClaims } from "../core/dra.js";
import type { KubeObject } from "../core/kube.js";
import { ownerTemplateSpecs, type CapOwnerKind } from "../membership/owner.js";
import type { Policy } from "../policy/types.js";
import { validateJob } from "./job.js";
import { none, type Finding, type Findings, type ValidationContext } from "./types.js";
import { validateWorkload } from "./workload.js";

/** The job a pod counts against, as read (`src/admission/pod-job.ts`): found, or why it could not be read. */
export type PodJob = { job: KubeObject; owner: CapOwnerKind; what: string } | { failed: string };

/** The rules a claim replaced after the job's admission can change. */
const CLAIM_DEPENDENT = new Set(["job-gpus", "gpu-unknown"]);

/** Where the pod's refusal is: the claims it names. */
export const POD_CLAIMS_FIELD = "spec.resourceClaims";

/** Whether the pod is given GPUs through its claims, as read (a claim not read is the pod rules' `gpu-unknown`). */
export function gpusThroughClaims(spec: V1PodSpec | undefined, ctx: ValidationContext): boolean {
  const byResource = podClaimGpuNanos(spec, resolveClaims(spec, ctx.claims), ctx.policy.gpu.deviceClasses, ctx.draCapacity);
  return [...byResource.values()].some((n) => n > 0n);
}

/**
 * The job's claim-dependent findings, at the pod's claims (`ctx.claims`: those of the pod and of the job's templates,
 * read as they are now). Nothing without a job cap, without a job, or for a pod its claims give no GPU. `kept`: the
 * job's findings kept across reviews ({@link KeptJobFindings}).
 */
export function podJobFindings(spec: V1PodSpec | undefined, job: PodJob | undefined, ctx: ValidationContext, kept?: KeptJobFindings): Findings {
  const max = ctx.limits.job.gpus;
  if (max === undefined || !job || !gpusThroughClaims(spec, ctx)) return none();
  if ("failed" in job)
    return {
      violations: [
        {
          rule: "gpu-unknown",
          field: "metadata.ownerReferences",
          message:
            `the job this pod belongs to could not be read (${job.failed}), so its GPUs cannot be counted against the per-job limit ` +
            `of ${max} with the claims as they are now: retry; if it persists, check that the webhook may get the job's kind (manifests/base/rbac.yaml)`,
        },
      ],
      warnings: [],
    };
  return { violations: jobFindings(job, ctx, kept), warnings: [] };
}

/** A job's claim-dependent findings (the job judged again with `ctx.claims`), at the pod's claims. */
function judgeJob(job: Extract<PodJob, { job: unknown }>, ctx: ValidationContext): Finding[] {
  const found = "training" in job.owner ? validateJob(job.job, job.owner.training, ctx) : validateWorkload(job.job, job.owner.workload, ctx);
  return found.violations
    .filter((v) => CLAIM_DEPENDENT.has(v.rule))
    .map((v): Finding => ({
      ...v,
      field: POD_CLAIMS_FIELD,
      message:
        `${job.what}: ${v.message}, with the claims its pod templates name as they are now (at ${v.field}). ` +
        `A claim or claim template it names was replaced since the job was admitted (or the limit lowered): ` +
        `restore it, or delete the job and submit it again to have it judged whole`,
    }));
}

/** What a job's findings were made with, and them. */
interface Kept {
  /** The job as the messages name it (a JobSet through one of its Jobs). */
  what: string;
  policy: Policy;
  namespace: string;
  capacity: ValidationContext["draCapacity"];
  claims: readonly unknown[];
  violations: Finding[];
}

/**
 * A job's claim-dependent findings kept per job object, with the policy, namespace, DRA capacity and claims (what was
 * read of each claim and template its templates name) they were made with. A launch's pods are judged with one cached
 * job and the same claim objects (a fresh read answers the copy it has when the object is unchanged), so the job is
 * judged once, not once a pod (bench:dra-pods); a job the reader's cache drops is dropped here (a WeakMap).
 */
export type KeptJobFindings = WeakMap<KubeObject, Kept>;

export const keptJobFindings = (): KeptJobFindings => new WeakMap();

/**
 * What the job's findings depend on of `ctx.claims`: for each claim and template its templates name, what was read;
 * for each unlisted DeviceClass read, its name and what was read of it, as values (each review reads them into new
 * objects, so their identity would judge the job again at every pod).
 */
function claimsNamed(job: Extract<PodJob, { job: unknown }>, ctx: ValidationContext): unknown[] {
  const known = ctx.claims;
  if (!known) return [];
  const out: unknown[] = [];
  // In name order: the reads are made at once and kept as they finish, so the map's order may differ review to review.
  for (const [name, read] of [...(known.deviceClasses ?? [])].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    out.push(name, read.kind, read.kind === "found" ? read.gpu : read.kind === "unreadable" ? read.reason : undefined);
  for (const spec of ownerTemplateSpecs(job.job, job.owner, ctx.policy))
    for (const ref of claimReferences(spec)) {
      const [map, failed, name] =
        ref.claim !== undefined ? [known.claims, known.unreadable?.claims, ref.claim] : [known.templates, known.unreadable?.templates, ref.template];
      if (name !== undefined) out.push(name, map.has(name), map.get(name), failed?.get(name));
    }
  return out;
}

function jobFindings(job: Extract<PodJob, { job: unknown }>, ctx: ValidationContext, kept: KeptJobFindings | undefined): Finding[] {
  if (!kept) return judgeJob(job, ctx);
  const claims = claimsNamed(job, ctx);
  const was = kept.get(job.job);
  if (
    was &&
    was.what === job.what &&
    was.policy === ctx.policy &&
    was.namespace === ctx.namespace &&
    was.capacity === ctx.draCapacity &&
    was.claims.length === claims.length &&
    was.claims.every((c, i) => c === claims[i])
  )
    return was.violations;
  const violations = judgeJob(job, ctx);
  kept.set(job.job, { what: job.what, policy: ctx.policy, namespace: ctx.namespace, capacity: ctx.draCapacity, claims, violations });
  return violations;
}

/**
 * @module
 * `/validate/jobs` on a batch Job or a JobSet (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts): the GPU rules
 * only, so a cap on a job's GPUs holds for the pods whichever kind makes them (issue 45, finding 8: a TrainJob
 * capped at 32 GPUs is not capped as the JobSet it becomes, nor a 16 × 8-GPU batch Job at all).
 * - the pod-spec rules (`pod-spec.ts`: container-limits, extended-resources, gpu-mig-mixing, pod-gpus, quantity),
 *   accelerator-allowed (`accelerator.ts`) and the DRA claim rules (`claims.ts`) on every pod template;
 * - job-gpus: the pods the object can run at once (src/membership/workload.ts, from upstream's controllers) × each
 *   template's effective GPU request (`podGpuNanos`), summed, at most `limits.job.gpus`; a count that cannot be
 *   read is `gpu-unknown` at its field, never counted as nothing;
 * - capacity: those GPUs, per resource, no more than the whole cluster has ({@link validateWorkloadCapacity}).
 *
 * Not the training-job rules (job-name, job-shape, job-replicas, run-policy): these kinds are not training jobs,
 * and controllers make them (CronJobs make Jobs, JobSet makes Jobs, Trainer makes JobSets). An object none of
 * whose templates asks for a GPU gets no finding at all but those of the claim rules on the GPU claims it names.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { sentAsGpu } from "../core/gpu.js";
import type { QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { formatNano, nanoOfUnits, nanoToNumber } from "../core/quantity.js";
import { workloadShape, type WorkloadPods } from "../membership/workload.js";
import { validateAccelerators } from "./accelerator.js";
import { validatePodClaims } from "./claims.js";
import { capacityFindings, nodeShapeFindings, type ClusterCapacity } from "./job.js";
import { nearLimit, podGpuDemand, podGpuNanos, validatePodSpec } from "./pod-spec.js";
import { merge, none, type Finding, type Findings, type ValidationContext } from "./types.js";
import { isObject } from "../core/object.js";

const podSpecOf = (p: WorkloadPods): V1PodSpec => (isObject(p.template?.spec) ? p.template.spec : {}) as V1PodSpec;

/** Whether a pod spec names one of the policy's GPU resources (any container, requests or limits) or is given GPUs through its claims. */
function asksForGpus(spec: V1PodSpec, ctx: ValidationContext): boolean {
  const named = (m: unknown): boolean => isObject(m) && Object.keys(m).some((r) => sentAsGpu(r, ctx.policy.gpu));
  const containers = [spec.initContainers, spec.containers].flatMap((l) => (Array.isArray(l) ? (l as unknown[]) : []));
  if (containers.some((c) => isObject(c) && isObject(c.resources) && (named(c.resources.requests) || named(c.resources.limits)))) return true;
  return [...podGpuDemand(spec, ctx).values()].some((n) => n > 0n);
}

/** The GPUs each resource the object runs at once, in nano-units: pods at once × the template's demand, summed. */
export function workloadGpuNanosByResource(obj: KubeObject, kind: QueuedWorkloadKind, ctx: ValidationContext): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const p of workloadShape(kind).pods(obj)) {
    if ("problem" in p.count) continue;
    for (const [name, per] of podGpuDemand(podSpecOf(p), ctx)) out.set(name, (out.get(name) ?? 0n) + p.count.pods * per);
  }
  return out;
}

/** job-gpus (and gpu-unknown for a count that cannot be read) over the object's templates. */
function jobGpus(obj: KubeObject, kind: QueuedWorkloadKind, pods: readonly WorkloadPods[], ctx: ValidationContext): Findings {
  const max = ctx.limits.job.gpus;
  if (max === undefined) return none();
  const violations: Finding[] = [];
  const parts: string[] = [];
  let gpus = 0n;
  for (const p of pods) {
    const per = podGpuNanos(podSpecOf(p), ctx);
    if ("problem" in p.count) {
      // Under the cap, a count that is not a whole number is no count: refused where it is, never taken as 0 or 1.
      if (per > 0n || asksForGpus(podSpecOf(p), ctx))
        violations.push({ rule: "gpu-unknown", field: p.count.field, message: `${p.count.problem}: the ${kind.kind}'s GPUs cannot be counted without it` });
      continue;
    }
    if (per === 0n) continue;
    gpus += p.count.pods * per;
    parts.push(`${kind.kind === "JobSet" ? `${p.name}: ` : ""}${p.count.pods} pods × ${formatNano(per)}`);
  }
  const shown = formatNano(gpus);
  const warnings: string[] = [];
  if (gpus > nanoOfUnits(max))
    violations.push({
      rule: "job-gpus",
      field: workloadShape(kind).jobGpusField(pods),
      message: `the ${kind.kind} runs ${shown} GPUs at once in all (${parts.join(" + ")}), over the per-job limit of ${max}`,
      value: nanoToNumber(gpus),
    });
  else if (nearLimit(gpus, nanoOfUnits(max))) warnings.push(`quartermaster: the ${kind.kind} runs ${shown} of the ${max} GPUs allowed per job at once`);
  return { violations, warnings };
}

/**
 * The GPU rules on a batch Job or JobSet (see the module comment). No finding at all for an object none of whose
 * templates asks for a GPU, but the claim rules' on the GPU claims its templates name.
 */
export function validateWorkload(obj: KubeObject, kind: QueuedWorkloadKind, ctx: ValidationContext): Findings {
  const pods = workloadShape(kind).pods(obj);
  const claimRules = (p: WorkloadPods): Findings => validatePodClaims(p.template?.spec, `${p.templateField}.spec`, ctx);
  if (!pods.some((p) => asksForGpus(podSpecOf(p), ctx))) return merge(...pods.map(claimRules));
  return merge(
    ...pods.map((p) =>
      merge(
        validatePodSpec(p.template?.spec, `${p.templateField}.spec`, ctx),
        validateAccelerators(p.template?.metadata, p.template?.spec, ctx, { metadata: `${p.templateField}.metadata`, spec: `${p.templateField}.spec` }),
        claimRules(p),
      ),
    ),
    jobGpus(obj, kind, pods, ctx),
  );
}

/** capacity: the GPUs the object runs at once, per resource, no more than the whole cluster has (`capacityFindings`). */
export function validateWorkloadCapacity(obj: KubeObject, kind: QueuedWorkloadKind, ctx: ValidationContext, capacity: ClusterCapacity | undefined): Findings {
  const wanted = new Map([...workloadGpuNanosByResource(obj, kind, ctx)].filter(([, n]) => n > 0n));
  const shapes = workloadShape(kind)
    .pods(obj)
    .map((p) => ({ name: p.name, field: p.templateField, demand: podGpuDemand(podSpecOf(p), ctx) }));
  return merge(capacityFindings(wanted, capacity), nodeShapeFindings(shapes, capacity));
}

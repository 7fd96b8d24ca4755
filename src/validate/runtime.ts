/**
 * @module
 * A Kubeflow Trainer v2 runtime (TrainingRuntime, ClusterTrainingRuntime) checked itself, at its CREATE and UPDATE
 * (`/validate/runtimes`, issue 45): the pod template of each of its replicated Jobs against the per-container and
 * per-pod caps (`validatePodSpec`: container-limits, pod-gpus, quantity, extended-resources, gpu-mig-mixing), so a
 * runtime whose trainer nodes ask for more GPUs per pod than any pod may have is refused before a TrainJob names
 * it. A TrainJob on it is still judged at its own CREATE and unsuspend, against the runtime read fresh
 * (`webhooks/validate-jobs.ts`): the per-job cap depends on each TrainJob's numNodes.
 *
 * Which limits: a ClusterTrainingRuntime is cluster-scoped and serves every namespace, so it is held to the
 * policy's top-level `limits` (a namespace override may loosen or tighten them for its own TrainJobs, which are
 * checked there); a TrainingRuntime serves its own namespace only, so it is held to that namespace's effective
 * limits, as its TrainJobs are.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import type { Policy } from "../policy/types.js";
import { effectiveLimits } from "./limits.js";
import { countedAs } from "../core/gpu.js";
import { looksLikeGpu } from "../vendors/index.js";
import { validatePodSpec } from "./pod-spec.js";
import { merge, type Findings, type ValidationContext } from "./types.js";
import { runtimePodSpecs } from "../kinds/trainjob-runtime.js";
import { specsCost, type ReviewCost } from "../core/cost.js";
import { enforce, type EnforcedFindings } from "./enforcement.js";
import { newOrWorse } from "./job.js";

/** The limits a runtime is held to: a ClusterTrainingRuntime (scope `Cluster`) the policy's own, a TrainingRuntime its namespace's. */
export function runtimeContext(policy: Policy, scope: "Cluster" | "Namespaced", namespace: string): ValidationContext {
  const ns = scope === "Cluster" ? "" : namespace;
  return { policy, namespace: ns, limits: scope === "Cluster" ? policy.limits : effectiveLimits(policy, ns) };
}

/** Rules about GPUs whatever their field; others (container-limits, quantity, extended-resources) only at a GPU's entry. */
const GPU_RULES: ReadonlySet<string> = new Set(["pod-gpus", "gpu-unknown", "gpu-mig-mixing"]);

/** The resource name a finding's field ends in (`...resources.limits[nvidia.com/gpu]`), if any. */
const entryName = (field: string): string | undefined => /\.resources\.(?:limits|requests)\[([^\]]+)\]$/.exec(field)?.[1];

/**
 * The GPU rules on every replicated Job's pod template of `runtime`, under `ctx`'s limits: a runtime is held to the
 * GPU limits only (its cpu and memory are its administrator's, and a cluster-scoped one meets no namespace's
 * override), and a template that asks for no GPU meets none of them, so a CPU-only runtime is never refused.
 */
export function validateRuntime(runtime: KubeObject, ctx: ValidationContext): Findings {
  const found = merge(
    { violations: [], warnings: [] },
    ...runtimePodSpecs(runtime).map(({ spec, field }) =>
      typeof spec === "object" && spec !== null ? validatePodSpec(spec as V1PodSpec, field, ctx) : { violations: [], warnings: [] },
    ),
  );
  const aboutGpus = (f: { rule: string; field: string }): boolean => {
    if (GPU_RULES.has(f.rule)) return true;
    const name = entryName(f.field);
    return name !== undefined && (countedAs(name, ctx.policy.gpu) !== undefined || looksLikeGpu(name));
  };
  return { violations: found.violations.filter(aboutGpus), warnings: found.warnings.filter((w) => !/\[(cpu|memory)\]/.test(w)) };
}

/** A runtime's review as these decisions read it (an AdmissionRequest is one). */
export interface ReviewedRuntime {
  operation: string;
  object: KubeObject;
  oldObject?: KubeObject | null;
  namespace?: string;
}

/** A runtime's review priced: its pod templates (and the old object's), `passes` rule passes each. */
export function runtimeReviewCost(review: ReviewedRuntime, passes: number, policy: Pick<Policy, "gpu">): ReviewCost {
  const specs = [review.object, ...(review.oldObject ? [review.oldObject] : [])].flatMap((o) => runtimePodSpecs(o).map((s) => s.spec));
  return specsCost(specs, passes, policy.gpu.resources);
}

/** A runtime's review decided: an UPDATE refused only for what it makes worse, as a job's is. */
export function validateRuntimeReview(review: ReviewedRuntime, scope: "Cluster" | "Namespaced", policy: Policy): EnforcedFindings {
  // A ClusterTrainingRuntime serves every namespace: the policy's own limits; a TrainingRuntime its namespace's.
  const ctx = runtimeContext(policy, scope, review.namespace ?? "");
  const now = validateRuntime(review.object, ctx);
  const found = review.operation === "UPDATE" && review.oldObject ? newOrWorse(now, validateRuntime(review.oldObject, ctx)) : now;
  return enforce(found, policy.enforcement, ctx.namespace);
}

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
import { objectOr } from "../core/object.js";

/** The limits a runtime is held to: a ClusterTrainingRuntime (scope `Cluster`) the policy's own, a TrainingRuntime its namespace's. */
export function runtimeContext(policy: Policy, scope: "Cluster" | "Namespaced", namespace: string): ValidationContext {
  const ns = scope === "Cluster" ? "" : namespace;
  return { policy, namespace: ns, limits: scope === "Cluster" ? policy.limits : effectiveLimits(policy, ns) };
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

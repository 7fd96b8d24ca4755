/**
 * @module
 * Accelerator and GPU partition placement (Flyte's ApplyGPUNodeSelectors). The pod annotations
 * `quartermaster.dev/accelerator` (e.g. `A100-SXM4-40GB`) and `quartermaster.dev/gpu-partition` (e.g.
 * `1g.5gb`, or `none` for an unpartitioned GPU) become required node-affinity expressions on the policy's
 * node labels, ANDed into every existing term, plus `Equal` tolerations for the chosen values when the
 * policy asks for them. Only pods whose regular containers have a GPU in their limits are placed.
 * A value that is not a valid label value is ignored with a warning instead of producing a pod the
 * apiserver would refuse.
 */
import type { V1NodeSelectorRequirement, V1Toleration } from "@kubernetes/client-node";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION } from "../keys.js";
import { annotation, hasGpuLimit, withRequiredNodeRequirements, withTolerations } from "./pod.js";
import type { Mutation, MutationContext, Pod } from "./types.js";

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export function isLabelValue(v: string): boolean {
  return v.length <= 63 && LABEL_VALUE.test(v);
}

interface Placement {
  requirements: V1NodeSelectorRequirement[];
  tolerations: V1Toleration[];
  invalid: string[];
}

export function acceleratorPlacement(pod: Pod, { policy }: MutationContext): Placement {
  const out: Placement = { requirements: [], tolerations: [], invalid: [] };
  if (!hasGpuLimit(pod, policy.gpu.resources)) return out;
  const { nodeLabel, partitionNodeLabel, addTolerations, unpartitionedRequirement } = policy.accelerator;
  const choose = (key: string, value: string): void => {
    out.requirements.push({ key, operator: "In", values: [value] });
    if (addTolerations) out.tolerations.push({ key, operator: "Equal", value, effect: "NoSchedule" });
  };
  const device = annotation(pod, ANNOTATION_ACCELERATOR)?.trim();
  if (device) {
    if (isLabelValue(device)) choose(nodeLabel, device);
    else out.invalid.push(`${ANNOTATION_ACCELERATOR}=${device}`);
  }
  const partition = annotation(pod, ANNOTATION_GPU_PARTITION)?.trim();
  if (partition === "none") {
    out.requirements.push(unpartitionedRequirement ?? { key: partitionNodeLabel, operator: "DoesNotExist" });
  } else if (partition) {
    if (isLabelValue(partition)) choose(partitionNodeLabel, partition);
    else out.invalid.push(`${ANNOTATION_GPU_PARTITION}=${partition}`);
  }
  return out;
}

function requested(pod: Pod): string[] {
  return [ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION].filter((k) => annotation(pod, k)?.trim());
}

export const placeOnAccelerator: Mutation = {
  name: "accelerator",
  mutate(pod, ctx) {
    const p = acceleratorPlacement(pod, ctx);
    return withTolerations(withRequiredNodeRequirements(pod, p.requirements), p.tolerations);
  },
  explain(_before, after, ctx) {
    const p = acceleratorPlacement(after, ctx);
    return `quartermaster: placed on nodes with ${p.requirements.map((r) => `${r.key} ${r.operator}${r.values ? ` ${r.values.join("|")}` : ""}`).join(" and ")}`;
  },
  advise(pod, ctx) {
    const asked = requested(pod);
    if (asked.length === 0) return [];
    if (!hasGpuLimit(pod, ctx.policy.gpu.resources)) return [`quartermaster: ${asked.join(", ")} ignored: no container has a GPU limit`];
    return acceleratorPlacement(pod, ctx).invalid.map((a) => `quartermaster: ${a} ignored: not a valid label value`);
  },
};

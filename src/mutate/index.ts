/**
 * @module
 * The pod mutation pipeline. Order matters and is fixed:
 * 1. training-labels and 2. cluster-spec: from the pod's place in its job (when it has one);
 * 3. resources: `gpu` is renamed before anything looks for GPU resources;
 * 4. gpu-tolerations: from the (renamed) requests and limits;
 * 5. accelerator: needs the GPU limits;
 * 6. interruptible.
 * Each mutation that changes the pod adds one warning and its name to `quartermaster.dev/mutations`
 * (a set, kept in the pipeline's order: running the pipeline again on its own output changes nothing).
 */
import { withKey } from "../core/copy.js";
import { ANNOTATION_MUTATIONS } from "../core/keys.js";
import type { Pod } from "../core/kube.js";
import { placeOnAccelerator } from "./accelerator.js";
import { injectClusterSpec } from "./cluster-spec.js";
import { injectJobSetTfConfig } from "./jobset-tf-config.js";
import { addTrainingLabels } from "./training-labels.js";
import { addGpuTolerations } from "./gpu-tolerations.js";
import { placeInterruptible } from "./interruptible.js";
import { defaultResources } from "./resources.js";
import type { Mutation, MutationContext } from "./types.js";

export type { Mutation, MutationContext } from "./types.js";
export type { Pod } from "../core/kube.js";

export const POD_MUTATIONS: readonly Mutation[] = [
  addTrainingLabels,
  injectClusterSpec,
  injectJobSetTfConfig,
  defaultResources,
  addGpuTolerations,
  placeOnAccelerator,
  placeInterruptible,
];

export interface PipelineResult {
  pod: Pod;
  applied: string[];
  warnings: string[];
}

function recorded(pod: Pod, names: readonly string[]): Pod {
  const current = pod.metadata?.annotations?.[ANNOTATION_MUTATIONS];
  let value: string;
  if (current === undefined) {
    value = names.join(","); // the usual case: a pod seen for the first time
  } else {
    const set = new Set(
      current
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    );
    const before = set.size;
    for (const n of names) set.add(n);
    if (set.size === before) return pod;
    // The pipeline's names in its order, then any others as they were: the same value whether the names came in
    // one run or from the exported MutatingAdmissionPolicy first and the webhook after (src/manifests/map.ts).
    const known = POD_MUTATIONS.map((m) => m.name);
    value = [...known.filter((k) => set.has(k)), ...[...set].filter((s) => !known.includes(s))].join(",");
  }
  const annotations = withKey(pod.metadata?.annotations, ANNOTATION_MUTATIONS, value);
  return withKey(pod, "metadata", withKey(pod.metadata, "annotations", annotations));
}

/** Runs `mutations` over `pod`; returns the same reference when nothing changed. */
export function mutatePod(pod: Pod, ctx: MutationContext, mutations: readonly Mutation[] = POD_MUTATIONS): PipelineResult {
  let current = pod;
  const applied: string[] = [];
  const warnings: string[] = [];
  for (const m of mutations) {
    const next = m.mutate(current, ctx);
    if (next !== current) {
      applied.push(m.name);
      warnings.push(m.explain(current, next, ctx));
      current = next;
    }
  }
  for (const m of mutations) if (m.advise) warnings.push(...m.advise(current, ctx));
  if (applied.length === 0) return { pod, applied, warnings };
  return { pod: recorded(current, applied), applied, warnings };
}

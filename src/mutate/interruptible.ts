/**
 * @module
 * Interruptible placement (Flyte's ApplyInterruptibleNodeAffinity, with its OR escape hatch closed):
 * `quartermaster.dev/interruptible: "true"` adds the policy's interruptible tolerations and node requirement;
 * any other pod gets the non-interruptible requirement, if the policy sets one. Requirements are ANDed into
 * every required term and never repeated; preferred terms and other affinity stay as they are.
 */
import { ANNOTATION_INTERRUPTIBLE } from "../core/keys.js";
import { annotation, isMalformedList, withRequiredNodeRequirements, withTolerations } from "./pod.js";
import type { Mutation } from "./types.js";
import type { Pod } from "../core/kube.js";

export function isInterruptible(pod: Pod): boolean {
  return annotation(pod, ANNOTATION_INTERRUPTIBLE)?.trim().toLowerCase() === "true";
}

export const placeInterruptible: Mutation = {
  name: "interruptible",
  mutate(pod, { policy }) {
    const { tolerations, nodeRequirement, nonInterruptibleNodeRequirement } = policy.interruptible;
    if (isInterruptible(pod)) {
      return withTolerations(withRequiredNodeRequirements(pod, nodeRequirement ? [nodeRequirement] : []), tolerations);
    }
    return withRequiredNodeRequirements(pod, nonInterruptibleNodeRequirement ? [nonInterruptibleNodeRequirement] : []);
  },
  explain(_before, after) {
    return isInterruptible(after) ? "quartermaster: interruptible pod: placed on interruptible nodes" : "quartermaster: kept off interruptible nodes";
  },
  advise(pod, { policy }) {
    // withTolerations leaves tolerations that are not a list as they came.
    if (!isInterruptible(pod) || policy.interruptible.tolerations.length === 0 || !isMalformedList(pod.spec?.tolerations)) return [];
    return ["quartermaster: no interruptible tolerations added: spec.tolerations is not a list (left untouched)"];
  },
};

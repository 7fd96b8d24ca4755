/**
 * @module
 * Accelerator and GPU partition placement (Flyte's ApplyGPUNodeSelectors). The pod annotations
 * `quartermaster.dev/accelerator` (e.g. `A100-SXM4-40GB`) and `quartermaster.dev/gpu-partition` (a MIG
 * profile such as `1g.5gb`, or `none` for an unpartitioned GPU) become required node affinity, plus
 * `Equal` tolerations for the chosen values when the policy asks for them. Only pods whose regular
 * containers have a GPU in their limits are placed. A value that is not a valid label value is ignored
 * with a warning instead of producing a pod the apiserver would refuse.
 *
 * Partitions match the labels NVIDIA's GPU feature discovery sets (NVIDIA/k8s-device-plugin,
 * `internal/lm/resource.go` and `internal/lm/mig-strategy.go`), one node-selector term per MIG strategy:
 * - mixed: every MIG profile present on the node gets `nvidia.com/mig-<profile>.count` (and `.product`,
 *   `.memory`, ...): the term is `nvidia.com/mig-<profile>.count Gt 0`;
 * - single: `nvidia.com/gpu.product` is `<product>-MIG-<profile>` and `nvidia.com/mig.strategy=single`;
 *   the products come from the accelerator annotation or the policy's `accelerator.migProducts` (no term
 *   when neither names one).
 * `none` is a node whose GPUs are not MIG-enabled: GFD labels MIG-enabled GPUs that are not partitioned
 * into `nvidia.com/gpu` (mixed strategy, or none) with `nvidia.com/gpu.replicas=0`, and the single
 * strategy's MIG devices with `nvidia.com/gpu.slices.gi`; so `nvidia.com/gpu.replicas NotIn [0]` and
 * `nvidia.com/gpu.slices.gi DoesNotExist`. (`nvidia.com/mig.capable` is true on MIG-disabled A100s too,
 * and `nvidia.com/mig.strategy` is set on every GPU node when the strategy is not `none`, so neither can
 * tell.) An explicit `accelerator.partitionNodeLabel` keeps the single-label behaviour:
 * `<label> In [<profile>]`, and `none` as `<label> DoesNotExist`.
 *
 * The alternatives are ORed terms; the pod's own required terms are ORed too, so the result is their
 * cross product: each existing term ANDed with each alternative. A term that already holds every
 * expression of some alternative implies it and is kept as it is, which makes a second run a no-op.
 */
import { GFD } from "../vendors/nvidia.js";
import type { V1NodeSelector, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Toleration } from "@kubernetes/client-node";
import { copyOf, withKey } from "../core/copy.js";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION } from "../core/keys.js";
import type { Policy } from "../policy/types.js";
import { annotation, hasGpuLimit, isEntry, isMalformedList, resourceNames, withTolerations } from "./pod.js";
import type { Mutation, MutationContext } from "./types.js";
import type { Pod } from "../core/kube.js";

const MIG_RESOURCE = "nvidia.com/mig-";
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export function isLabelValue(v: string): boolean {
  return v.length <= 63 && LABEL_VALUE.test(v);
}

/** A MIG profile usable in GFD's label keys: a label value that fits `mig-<profile>.count` in 63 characters. */
export function isPartitionProfile(p: string): boolean {
  return isLabelValue(p) && p.length > 0 && `mig-${p}.count`.length <= 63;
}

/** The requirement for `none` when the policy sets no `unpartitionedRequirement`. */
export function unpartitionedRequirements(policy: Policy): V1NodeSelectorRequirement[] {
  const { partitionNodeLabel, unpartitionedRequirement } = policy.accelerator;
  if (unpartitionedRequirement) return [unpartitionedRequirement];
  if (partitionNodeLabel) return [{ key: partitionNodeLabel, operator: "DoesNotExist" }];
  return [
    { key: GFD.replicas, operator: "NotIn", values: ["0"] },
    { key: GFD.slicesGi, operator: "DoesNotExist" },
  ];
}

const describe = (r: V1NodeSelectorRequirement): string => `${r.key} ${r.operator}${r.values ? ` ${r.values.join("|")}` : ""}`;

interface Placement {
  /** Alternatives (ORed), each a list of requirements (ANDed); empty when nothing is asked. */
  terms: V1NodeSelectorRequirement[][];
  tolerations: V1Toleration[];
  invalid: string[];
  /** What was placed, in words, for the admission warning (the terms themselves can be long). */
  summary: string[];
}

/** The annotation's value, trimmed, when it passes `valid`; otherwise undefined, and an invalid one noted. */
function annotated(pod: Pod, key: string, valid: (v: string) => boolean, out: Placement): string | undefined {
  const value = annotation(pod, key)?.trim();
  if (!value) return undefined;
  if (valid(value)) return value;
  out.invalid.push(`${key}=${value}`);
  return undefined;
}

/** The terms for a MIG profile read from NVIDIA GPU feature discovery's labels (mixed strategy, and single where it can). */
function gfdPartitionTerms(partition: string, device: string | undefined, onDevice: V1NodeSelectorRequirement[], policy: Policy, out: Placement): void {
  const { nodeLabel, migProducts } = policy.accelerator;
  out.terms.push([...onDevice, { key: GFD.migLabel(partition, "count"), operator: "Gt", values: ["0"] }]);
  // Under the single strategy the product label itself carries the profile, so an accelerator on that
  // label names the product to suffix instead of being required as it is (it never would match).
  const onProductLabel = device !== undefined && nodeLabel === GFD.product;
  const products = (onProductLabel ? [device] : migProducts).map((b) => GFD.migProduct(b, partition)).filter(isLabelValue);
  if (products.length > 0) {
    out.terms.push([
      ...(onProductLabel ? [] : onDevice),
      { key: GFD.migStrategy, operator: "In", values: ["single"] },
      { key: GFD.product, operator: "In", values: products },
    ]);
  }
  out.summary.push(`MIG ${partition} (${products.length > 0 ? "mixed or single strategy" : "mixed strategy"})`);
}

export function acceleratorPlacement(pod: Pod, { policy, claims }: MutationContext): Placement {
  const out: Placement = { terms: [], tolerations: [], invalid: [], summary: [] };
  if (!hasGpuLimit(pod, policy.gpu, claims)) return out;
  const { nodeLabel, partitionNodeLabel, addTolerations } = policy.accelerator;
  const tolerate = (key: string, value: string): void => {
    if (addTolerations) out.tolerations.push({ key, operator: "Equal", value, effect: "NoSchedule" });
  };

  const device = annotated(pod, ANNOTATION_ACCELERATOR, isLabelValue, out);
  const onDevice: V1NodeSelectorRequirement[] = device ? [{ key: nodeLabel, operator: "In", values: [device] }] : [];
  if (device) {
    tolerate(nodeLabel, device);
    out.summary.push(`${nodeLabel}=${device}`);
  }
  const partition = annotated(pod, ANNOTATION_GPU_PARTITION, (p) => p === "none" || (partitionNodeLabel ? isLabelValue(p) : isPartitionProfile(p)), out);

  if (!partition) {
    if (onDevice.length > 0) out.terms.push(onDevice);
  } else if (partition === "none") {
    out.terms.push([...onDevice, ...unpartitionedRequirements(policy)]);
    out.summary.push(
      policy.accelerator.unpartitionedRequirement || partitionNodeLabel ? unpartitionedRequirements(policy).map(describe).join(" and ") : "GPUs without MIG",
    );
  } else if (partitionNodeLabel) {
    out.terms.push([...onDevice, { key: partitionNodeLabel, operator: "In", values: [partition] }]);
    tolerate(partitionNodeLabel, partition);
    out.summary.push(`${partitionNodeLabel}=${partition}`);
  } else {
    gfdPartitionTerms(partition, device, onDevice, policy, out);
  }
  return out;
}

function sameRequirement(a: V1NodeSelectorRequirement, b: V1NodeSelectorRequirement): boolean {
  const av = a.values ?? [];
  const bv = b.values ?? [];
  return a.key === b.key && a.operator === b.operator && av.length === bv.length && av.every((v, i) => v === bv[i]);
}

function copyRequirement(r: V1NodeSelectorRequirement): V1NodeSelectorRequirement {
  return r.values ? withKey(r, "values", [...r.values]) : copyOf(r);
}

/**
 * ANDs the alternatives `alternatives` (ORed lists of ANDed requirements) into the pod's required node
 * affinity: each existing term becomes one term per alternative (the cross product), except a term that
 * already holds all of some alternative (it implies the disjunction, so it stays) and an empty term
 * (kube-scheduler's empty term matches no node; adding expressions would widen it). With no required
 * terms the alternatives become the terms. Returns `pod` itself when nothing changes. Preferred terms and
 * pod (anti-)affinity are untouched.
 */
export function withRequiredNodeAlternatives(pod: Pod, alternatives: readonly (readonly V1NodeSelectorRequirement[])[]): Pod {
  const alts = alternatives.filter((a) => a.length > 0);
  if (alts.length === 0) return pod;
  const affinity = pod.spec?.affinity ?? {};
  const nodeAffinity = affinity.nodeAffinity ?? {};
  const required = nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  // Terms that are not a list, or a term or its expressions that are not what they should be, are left as they came.
  if (isMalformedList(required?.nodeSelectorTerms)) return pod;
  const fresh = !required?.nodeSelectorTerms?.length;
  const terms: V1NodeSelectorTerm[] = fresh ? [{}] : required.nodeSelectorTerms;
  let changed = false;
  const next: V1NodeSelectorTerm[] = [];
  for (const term of terms) {
    const expanded = termTimesAlternatives(term, alts, fresh);
    if (expanded) changed = true;
    next.push(...(expanded ?? [term]));
  }
  if (!changed) return pod;
  const nextRequired: V1NodeSelector = withKey(required, "nodeSelectorTerms", next);
  const nextAffinity = withKey(affinity, "nodeAffinity", withKey(nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution", nextRequired));
  return withKey(pod, "spec", withKey(pod.spec, "affinity", nextAffinity));
}

/**
 * One required term ANDed with the alternatives: a term per alternative, or undefined when the term stays as it
 * is (malformed, empty in a pod that had terms, or already holding all of some alternative).
 */
function termTimesAlternatives(
  term: V1NodeSelectorTerm,
  alts: readonly (readonly V1NodeSelectorRequirement[])[],
  fresh: boolean,
): V1NodeSelectorTerm[] | undefined {
  if (!isEntry(term) || isMalformedList(term.matchExpressions) || (term.matchExpressions ?? []).some((e) => !isEntry(e))) return undefined;
  const exprs = term.matchExpressions ?? [];
  const empty = exprs.length === 0 && (term.matchFields ?? []).length === 0;
  if ((empty && !fresh) || alts.some((a) => a.every((r) => exprs.some((e) => sameRequirement(e, r))))) return undefined;
  return alts.map((alt) => {
    const missing = alt.filter((r) => !exprs.some((e) => sameRequirement(e, r)));
    return withKey(fresh ? {} : term, "matchExpressions", [...exprs, ...missing.map(copyRequirement)]);
  });
}

function requested(pod: Pod): string[] {
  return [ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION].filter((k) => annotation(pod, k)?.trim());
}

export const placeOnAccelerator: Mutation = {
  name: "accelerator",
  mutate(pod, ctx) {
    const p = acceleratorPlacement(pod, ctx);
    return withTolerations(withRequiredNodeAlternatives(pod, p.terms), p.tolerations);
  },
  explain(_before, after, ctx) {
    return `quartermaster: placed on nodes with ${acceleratorPlacement(after, ctx).summary.join(" and ")}`;
  },
  advise(pod, ctx) {
    const asked = requested(pod);
    if (asked.length === 0) return [];
    if (!hasGpuLimit(pod, ctx.policy.gpu, ctx.claims)) return [`quartermaster: ${asked.join(", ")} ignored: no container has a GPU limit`];
    const out = acceleratorPlacement(pod, ctx).invalid.map((a) =>
      a.startsWith(ANNOTATION_GPU_PARTITION) && !ctx.policy.accelerator.partitionNodeLabel
        ? `quartermaster: ${a} ignored: not a MIG profile usable in a node label (nvidia.com/mig-<profile>.count)`
        : `quartermaster: ${a} ignored: not a valid label value`,
    );
    // A MIG resource of another profile than the partition asked for: no node offers both.
    const partition = annotation(pod, ANNOTATION_GPU_PARTITION)?.trim();
    if (partition && !ctx.policy.accelerator.partitionNodeLabel) {
      const other = resourceNames(pod, ["containers"], ["limits"]).find((n) => n.startsWith(MIG_RESOURCE) && n !== `${MIG_RESOURCE}${partition}`);
      if (other) out.push(`quartermaster: ${other} does not match ${ANNOTATION_GPU_PARTITION}=${partition}; no node will fit`);
    }
    return out;
  },
};

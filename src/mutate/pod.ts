/**
 * @module
 * Read helpers and copy-on-write updates shared by the mutations. Updates copy only the path they change,
 * so the unchanged rest of the pod keeps its identity and the final diff skips it.
 */
import type { V1Container, V1NodeSelector, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Toleration } from "@kubernetes/client-node";
import { copyOf, withKey } from "../core/copy.js";
import { countedAs } from "../core/gpu.js";
import { podGpuClaims, resolveClaims, type KnownClaims } from "../core/dra.js";
import type { Policy } from "../policy/types.js";
import type { Pod } from "../core/kube.js";

export type ContainerList = "containers" | "initContainers";

/**
 * True when `v` is present but not a list (a string `env`, an object `tolerations`: JSON the apiserver
 * refuses after the webhooks ran). The mutations leave such a value exactly as it came and say so in a
 * warning: appending to it (String#concat, a spread of its characters) would change it again on every
 * reinvocation, and a replacement would hide the client's mistake.
 */
export function isMalformedList(v: unknown): boolean {
  return v != null && !Array.isArray(v);
}

/** True when `v` is an object a list entry can be compared as (not null, a string or a number). */
export function isEntry(v: unknown): v is object {
  return v !== null && typeof v === "object";
}

/** Resource names in the requests or limits of the given container lists, sorted. */
export function resourceNames(pod: Pod, lists: readonly ContainerList[], sides: ReadonlyArray<"requests" | "limits"> = ["requests", "limits"]): string[] {
  // A set, not `includes` on the list: a pod may carry thousands of distinct names (linear, not quadratic).
  const names = new Set<string>();
  for (const list of lists) {
    const containers = pod.spec?.[list];
    if (!containers) continue;
    for (const c of containers) {
      for (const side of sides) {
        const map = c?.resources?.[side];
        if (map) for (const name of Object.keys(map)) names.add(name);
      }
    }
  }
  return [...names].sort();
}

/**
 * True when some regular container has a GPU resource in its limits (Flyte's rule for GPU placement), or names a
 * claim whose devices are GPUs (DRA: a claim is a limit and a request at once).
 */
export function hasGpuLimit(pod: Pod, gpu: Policy["gpu"], claims?: KnownClaims): boolean {
  for (const c of pod.spec?.containers ?? []) {
    const limits = c?.resources?.limits;
    if (limits) for (const name of Object.keys(limits)) if (countedAs(name, gpu) !== undefined) return true;
  }
  if (!claims) return false;
  const gpuClaims = new Set(podGpuClaims(pod.spec, resolveClaims(pod.spec, claims), gpu.deviceClasses).map((c) => c.claim));
  if (gpuClaims.size === 0) return false;
  for (const c of pod.spec?.containers ?? []) {
    const named = c?.resources?.claims;
    if (Array.isArray(named) && named.some((n) => gpuClaims.has(n?.name))) return true;
  }
  return false;
}

/** The resource names the pod's GPU claims stand for (DRA), sorted: what its extended-resource twin would request. */
export function claimGpuResourceNames(pod: Pod, gpu: Policy["gpu"], claims?: KnownClaims): string[] {
  if (!claims) return [];
  return [...new Set(podGpuClaims(pod.spec, resolveClaims(pod.spec, claims), gpu.deviceClasses).map((c) => c.gpu.resourceName))].sort();
}

export function annotation(pod: Pod, key: string): string | undefined {
  return pod.metadata?.annotations?.[key];
}

function sameToleration(a: V1Toleration, b: V1Toleration): boolean {
  return (
    (a.key ?? "") === (b.key ?? "") &&
    (a.operator ?? "Equal") === (b.operator ?? "Equal") &&
    (a.value ?? "") === (b.value ?? "") &&
    (a.effect ?? "") === (b.effect ?? "") &&
    a.tolerationSeconds === b.tolerationSeconds
  );
}

/** A string equal for two tolerations exactly when {@link sameToleration} holds. */
function tolerationKey(t: V1Toleration): string {
  const seconds = t.tolerationSeconds === undefined ? "u" : JSON.stringify(t.tolerationSeconds);
  return JSON.stringify([t.key ?? "", t.operator ?? "Equal", t.value ?? "", t.effect ?? "", seconds]);
}

// Up to this many existing × wanted pairs are compared directly (the usual pod: a handful of each);
// beyond it the tolerations are indexed once, so a pod with thousands of them stays linear.
const PAIRWISE_TOLERATIONS = 64;

/** Appends the tolerations that have no equal one in the pod yet. */
export function withTolerations(pod: Pod, wanted: readonly V1Toleration[]): Pod {
  if (wanted.length === 0) return pod;
  if (isMalformedList(pod.spec?.tolerations)) return pod;
  const existing = pod.spec?.tolerations ?? [];
  const added: V1Toleration[] = [];
  if ((existing.length + wanted.length) * wanted.length <= PAIRWISE_TOLERATIONS) {
    for (const t of wanted) {
      if (!existing.some((e) => isEntry(e) && sameToleration(e, t)) && !added.some((e) => sameToleration(e, t))) added.push({ ...t });
    }
  } else {
    const seen = new Set<string>();
    for (const e of existing) if (isEntry(e)) seen.add(tolerationKey(e));
    for (const t of wanted) {
      const key = tolerationKey(t);
      if (seen.has(key)) continue;
      seen.add(key);
      added.push({ ...t });
    }
  }
  if (added.length === 0) return pod;
  return withKey(pod, "spec", withKey(pod.spec, "tolerations", [...existing, ...added]));
}

function sameRequirement(a: V1NodeSelectorRequirement, b: V1NodeSelectorRequirement): boolean {
  return a.key === b.key && a.operator === b.operator && JSON.stringify(a.values ?? []) === JSON.stringify(b.values ?? []);
}

/**
 * ANDs `requirements` into every required node-selector term (terms are ORed, so a requirement left out
 * of one term would be an escape hatch), creating one term when there are none. Expressions a term
 * already has are not repeated; an empty term (it matches no node) stays empty. Preferred terms and pod (anti-)affinity are untouched.
 */
export function withRequiredNodeRequirements(pod: Pod, requirements: readonly V1NodeSelectorRequirement[]): Pod {
  if (requirements.length === 0) return pod;
  const affinity = pod.spec?.affinity ?? {};
  const nodeAffinity = affinity.nodeAffinity ?? {};
  const required = nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  if (isMalformedList(required?.nodeSelectorTerms)) return pod;
  const fresh = !required?.nodeSelectorTerms?.length;
  const terms: V1NodeSelectorTerm[] = fresh ? [{}] : required.nodeSelectorTerms;
  let changed = false;
  const next = terms.map((term) => {
    // A term, or its expressions, that are not what they should be are left as they came.
    if (!isEntry(term) || isMalformedList(term.matchExpressions) || (term.matchExpressions ?? []).some((e) => !isEntry(e))) return term;
    const exprs = term.matchExpressions ?? [];
    // kube-scheduler's empty term matches no node: adding expressions would widen it.
    if (!fresh && exprs.length === 0 && (term.matchFields ?? []).length === 0) return term;
    const missing = requirements.filter((r) => !exprs.some((e) => sameRequirement(e, r)));
    if (missing.length === 0) return term;
    changed = true;
    return withKey(term, "matchExpressions", [...exprs, ...missing.map((r) => (r.values ? withKey(r, "values", [...r.values]) : copyOf(r)))]);
  });
  if (!changed) return pod;
  const nextRequired: V1NodeSelector = withKey(required, "nodeSelectorTerms", next);
  const nextAffinity = withKey(affinity, "nodeAffinity", withKey(nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution", nextRequired));
  return withKey(pod, "spec", withKey(pod.spec, "affinity", nextAffinity));
}

/**
 * `fn` applied to every container of `lists` that is an object, in order: each list is copied at most once, and only when
 * `fn` returned a different container for one of its entries; `pod` itself comes back when nothing changed.
 * Linear in the number of containers (replacing them one at a time copied the whole list each time, which
 * made a pod with n containers cost O(n²): 40,000 containers took 13 s, issue 16).
 */
export function mapContainers(pod: Pod, lists: readonly ContainerList[], fn: (c: V1Container, list: ContainerList, index: number) => V1Container): Pod {
  const original = pod.spec;
  let spec = original;
  for (const list of lists) {
    const items = original?.[list];
    if (!Array.isArray(items)) continue;
    let copy: V1Container[] | undefined;
    for (let i = 0; i < items.length; i++) {
      const c = items[i]!;
      // A container that is not an object (a string, null) is left as it came: turned into one by a
      // later mutation, it would gain what an earlier one skipped on the next run (fuzz seed 1).
      if (!isEntry(c)) continue;
      const d = fn(c, list, i);
      if (d !== c) (copy ??= items.slice())[i] = d;
    }
    if (copy) spec = withKey(spec, list, copy);
  }
  return spec === original ? pod : withKey(pod, "spec", spec);
}

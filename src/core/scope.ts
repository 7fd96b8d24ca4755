/**
 * @module
 * Where Quartermaster acts: the one definition of its namespace scope. The webhook configurations'
 * `namespaceSelector` is rendered from it, and the reconciler asks it before every write, so the two can
 * never drift apart. A namespace is in scope when it carries the opt-in label `quartermaster.dev/enabled:
 * "true"` and is none of the protected namespaces (`kube-system`, `kube-public`, `kube-node-lease` and
 * Quartermaster's own), whatever their labels say.
 *
 * `inScope` evaluates the rendered selector itself, as the apiserver does for a webhook (the apiserver gives
 * every namespace the immutable label `kubernetes.io/metadata.name` with its name since Kubernetes 1.21).
 */
import { NAMESPACE_NAME_LABEL, selectorMatches } from "./selector.js";
import type { LabelSelector } from "./selector.js";
import { LABEL_NAMESPACE_OPT_IN } from "./keys.js";

/** The namespaces of the control plane itself: never in scope. */
export const SYSTEM_NAMESPACES: readonly string[] = ["kube-system", "kube-public", "kube-node-lease"];

export interface NamespaceScope {
  /** The label a namespace sets to `"true"` to opt in. */
  optInLabel: string;
  /** Namespaces never in scope, by name: the system ones and Quartermaster's own. */
  excluded: readonly string[];
}

/** The scope of an installation whose own namespace is `ownNamespace`. */
export function namespaceScope(ownNamespace: string): NamespaceScope {
  return { optInLabel: LABEL_NAMESPACE_OPT_IN, excluded: [...new Set([...SYSTEM_NAMESPACES, ownNamespace])] };
}

/** The webhook configurations' `namespaceSelector` for the scope. */
export function namespaceSelector(scope: NamespaceScope): LabelSelector {
  return {
    matchExpressions: [
      { key: scope.optInLabel, operator: "In", values: ["true"] },
      { key: NAMESPACE_NAME_LABEL, operator: "NotIn", values: [...scope.excluded] },
    ],
  };
}

/** A namespace as the scope sees it: its name and labels. */
export interface NamespaceInfo {
  name: string;
  labels?: Readonly<Record<string, string>>;
}

export type ScopeVerdict = { inScope: true } | { inScope: false; why: string };

/** Whether Quartermaster may act in the namespace, and if not, why (for `--dry-run` and logs). */
export function inScope(scope: NamespaceScope, ns: NamespaceInfo): ScopeVerdict {
  const labels = { ...ns.labels, [NAMESPACE_NAME_LABEL]: ns.name };
  if (selectorMatches(namespaceSelector(scope), labels)) return { inScope: true };
  if (scope.excluded.includes(ns.name)) return { inScope: false, why: `namespace ${ns.name} is protected: Quartermaster never acts in it` };
  return { inScope: false, why: `namespace ${ns.name} has not opted in (label ${scope.optInLabel}="true")` };
}

/**
 * A per-pass lookup over the namespaces listed: a namespace the pass did not see (deleted meanwhile, or
 * unreadable) is out of scope.
 */
export function scopeIndex(scope: NamespaceScope, namespaces: readonly NamespaceInfo[]): (namespace: string) => ScopeVerdict {
  const verdicts = new Map<string, ScopeVerdict>();
  for (const ns of namespaces) verdicts.set(ns.name, inScope(scope, ns));
  return (name) => verdicts.get(name) ?? { inScope: false, why: `namespace ${name} was not found` };
}

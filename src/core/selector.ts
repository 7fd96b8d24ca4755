/**
 * @module
 * Label selectors as the apiserver evaluates a webhook's namespaceSelector (metav1.LabelSelector:
 * matchLabels and matchExpressions ANDed; an empty or missing selector matches everything).
 */

/** The label every namespace carries with its own name (set by the apiserver since 1.21, immutable). */
/** A key's requirement in a Kubernetes label selector (meta/v1 LabelSelectorRequirement). */
export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** A Kubernetes label selector (meta/v1 LabelSelector). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

export function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const req of selector?.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, req.key);
    const values = req.values ?? [];
    switch (req.operator) {
      case "In":
        if (!has || !values.includes(labels[req.key]!)) return false;
        break;
      case "NotIn":
        if (has && values.includes(labels[req.key]!)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
      default:
        return false; // the apiserver refuses unknown operators; treat as no match
    }
  }
  return true;
}

/**
 * True when the selector can never match the namespace called `name`, whatever other labels it is
 * given: some requirement on `kubernetes.io/metadata.name` rules the name out. A namespace excluded
 * only because it lacks an opt-in label is one `kubectl label` away from being matched.
 */
export function excludesByName(selector: LabelSelector | undefined, name: string): boolean {
  const wanted = selector?.matchLabels?.[NAMESPACE_NAME_LABEL];
  if (wanted !== undefined && wanted !== name) return true;
  return (selector?.matchExpressions ?? []).some((req) => {
    if (req.key !== NAMESPACE_NAME_LABEL) return false;
    const values = req.values ?? [];
    return (req.operator === "NotIn" && values.includes(name)) || (req.operator === "In" && !values.includes(name)) || req.operator === "DoesNotExist";
  });
}

/** A short text form of a selector for messages: `{}` for match-all. */
export function describeSelector(selector: LabelSelector | undefined): string {
  const parts = [
    ...Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(selector?.matchExpressions ?? []).map((r) => `${r.key} ${r.operator}${r.values ? ` (${r.values.join(",")})` : ""}`),
  ];
  return parts.length === 0 ? "{} (every namespace)" : parts.join(", ");
}

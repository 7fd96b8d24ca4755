/**
 * @module
 * Guards: the first thing each webhook runs. Each returns why a request is not its business (logged as
 * the skip reason), or undefined. The webhook configurations already scope what the apiserver sends;
 * these make the handlers safe even under a broader configuration.
 */
import type { Guard } from "./handler.js";
import type { Operation } from "./types.js";

/** Pods (not their subresources) in one of `operations`. */
export function podGuard(operations: readonly Operation[]): Guard {
  return (req) => {
    if (req.resource.group !== "" || req.resource.resource !== "pods") return `resource ${req.resource.resource} is not pods`;
    if (req.subResource) return `subresource ${req.subResource} is not handled`;
    if (!operations.includes(req.operation)) return `operation ${req.operation} is not handled`;
    return undefined;
  };
}

/** The configured training-job kinds (by group and kind), main resource only, in one of `operations`. */
export function jobGuard(kinds: ReadonlyArray<{ group: string; kind: string }>, operations: readonly Operation[]): Guard {
  const known = new Set(kinds.map((k) => `${k.group}/${k.kind}`));
  return (req) => {
    if (!known.has(`${req.kind.group}/${req.kind.kind}`)) return `kind ${req.kind.group}/${req.kind.kind} is not a configured job kind`;
    if (req.subResource) return `subresource ${req.subResource} is not handled`;
    if (!operations.includes(req.operation)) return `operation ${req.operation} is not handled`;
    return undefined;
  };
}

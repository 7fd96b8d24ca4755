/**
 * @module
 * Guards: the first thing each webhook runs. Each returns why a request is not its business (logged as
 * the skip reason), or undefined. The webhook configurations already scope what the apiserver sends;
 * these make the handlers safe even under a broader configuration.
 */
import type { Guard } from "./handler.js";
import type { AdmissionRequest, Operation } from "./types.js";

/** The subresources a webhook handles, with the operations it handles on each (e.g. `{ resize: ["UPDATE"] }`). */
export type SubresourceOperations = Readonly<Record<string, readonly Operation[]>>;

const hasOwn = Object.prototype.hasOwnProperty;

function operationSkip(req: AdmissionRequest, operations: readonly Operation[], subresources: SubresourceOperations): string | undefined {
  if (req.subResource) {
    const ops = hasOwn.call(subresources, req.subResource) ? subresources[req.subResource] : undefined;
    if (!ops) return `subresource ${req.subResource} is not handled`;
    if (!ops.includes(req.operation)) return `operation ${req.operation} on subresource ${req.subResource} is not handled`;
    return undefined;
  }
  if (!operations.includes(req.operation)) return `operation ${req.operation} is not handled`;
  return undefined;
}

/** Pods in one of `operations`, and the given subresources of pods in theirs. */
export function podGuard(operations: readonly Operation[], subresources: SubresourceOperations = {}): Guard {
  return (req) => {
    if (req.resource.group !== "" || req.resource.resource !== "pods") return `resource ${req.resource.resource} is not pods`;
    return operationSkip(req, operations, subresources);
  };
}

interface KindRef {
  group: string;
  kind: string;
  /** The resource name; subresource requests are matched by it (their `kind` is the subresource's, e.g. Scale). */
  plural?: string;
}

/**
 * The configured job kind a request is about: by `kind` for the job itself, by `resource` for a
 * subresource (a `/scale` request's kind is `autoscaling/v1 Scale`).
 */
export function jobKindOf<K extends KindRef>(req: AdmissionRequest, kinds: readonly K[]): K | undefined {
  const byResource = req.subResource ? kinds.find((k) => k.group === req.resource.group && k.plural !== undefined && k.plural === req.resource.resource) : undefined;
  return byResource ?? kinds.find((k) => k.group === req.kind.group && k.kind === req.kind.kind);
}

/** The configured training-job kinds in one of `operations`, and the given subresources of them in theirs. */
export function jobGuard(kinds: readonly KindRef[], operations: readonly Operation[], subresources: SubresourceOperations = {}): Guard {
  return (req) => {
    if (!jobKindOf(req, kinds)) return `kind ${req.kind.group}/${req.kind.kind} is not a configured job kind`;
    return operationSkip(req, operations, subresources);
  };
}

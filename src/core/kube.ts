/**
 * @module
 * Kubernetes objects as Quartermaster handles them: the bottom of the house, imported by every layer.
 */
import type { V1Pod } from "@kubernetes/client-node";

/** A pod, with client-node's typing (every field optional, as on the wire). */
export type Pod = V1Pod;

/** Group/version/kind as the apiserver sends it in `request.kind`. */
export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** Group/version/resource as the apiserver sends it in `request.resource`. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** A Kubernetes object as it arrived: untyped JSON, so unknown fields survive to the diff. */
export type KubeObject = Record<string, unknown>;

/** What names a namespaced resource for a GET: its kind (for messages), group, version and plural. */
export interface ObjectKind {
  readonly kind: string;
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

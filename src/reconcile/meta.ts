/**
 * @module
 * The object metadata the reconcile planners read, typed once.
 */
import type { KubeObject } from "../core/kube.js";

export interface Meta {
  name?: string;
  namespace?: string;
  uid?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  ownerReferences?: Array<{ uid?: string; controller?: boolean }>;
}

export const meta = (o: KubeObject): Meta => o.metadata ?? {};

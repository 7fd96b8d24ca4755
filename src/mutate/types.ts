/**
 * @module
 * The shape of a pod mutation: a pure function `(pod, context) → pod` that never changes its input and
 * returns the very same reference when it has nothing to do. The pipeline (`index.ts`) runs them in
 * order, explains each change in a warning and records its name on the pod.
 */
import type { KnownClaims } from "../core/dra.js";
import type { KubeObject, Pod } from "../core/kube.js";
import type { Policy } from "../policy/types.js";
import type { Topology } from "../membership/types.js";
import type { ClusterSpecMemo } from "./frameworks.js";

export interface MutationContext {
  policy: Policy;
  namespace: string;
  /** The pod's place in its training job, when it has one and the job could be read. */
  topology?: Topology;
  /** The pod's JobSet, read when the pod is a TensorFlow TrainJob's (src/membership/jobset.ts tfJobSetRef). */
  jobSet?: KubeObject;
  /**
   * The per-job cluster-spec work, done once per job object (the pod webhook owns one per instance).
   * Absent, each pod's cluster spec is built from scratch.
   */
  clusterSpecs?: ClusterSpecMemo;
  /** The ResourceClaims and templates the pod names, as far as they could be read: GPUs asked for through DRA. */
  claims?: KnownClaims;
}

export interface Mutation {
  /** Recorded in the `quartermaster.dev/mutations` annotation. */
  readonly name: string;
  /** The new pod, or `pod` itself when nothing changes. */
  mutate(pod: Pod, ctx: MutationContext): Pod;
  /** One short sentence for the admission warning, given the pod before and after. */
  explain(before: Pod, after: Pod, ctx: MutationContext): string;
  /** Warnings about what the pod asked for but could not be given (a bad annotation value, say). */
  advise?(pod: Pod, ctx: MutationContext): string[];
}

/**
 * @module
 * Where a pod sits in its training job: the job object (as stored, unknown fields and all), its kind
 * from the policy, and the pod's replica type and index.
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import type { KindShape } from "../kinds/index.js";
import type { JobKind } from "../policy/types.js";

export interface Topology {
  job: KubeObject;
  kind: JobKind;
  /** The replica type as the job's spec spells it (`Worker`, `PS`, ...). */
  replicaType: string;
  index: number;
}

/** Reads a job; resolves undefined when it does not exist. Rejects on any other failure or a timeout. */
export interface JobReader {
  get(kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined>;
  /**
   * The answer already at hand, without waiting: the job, `undefined` for a known absence, or `null` when
   * it is not cached (then call `get`). Lets the common case skip timers and promises. A caching reader may
   * start a background re-read of a copy it answers here (refresh-ahead, src/kube/jobs.ts), never waited on.
   */
  peek?(kind: ObjectKind, namespace: string, name: string): KubeObject | undefined | null;
  /**
   * Whether the job's cached copy is being re-read in the background (refresh-ahead) while it is answered, so
   * the lookup histogram can tell such hits (`hit_refreshing`) from plain ones. Absent: never.
   */
  refreshing?(kind: ObjectKind, namespace: string, name: string): boolean;
  /**
   * The job as it is now: a read that bypasses any cache (its answer then refreshes the cache). A reader
   * that caches must have it; for one that does not, `get` is already fresh and this may be left out.
   * `/scale` admission reads through it (issue 29: a scale checked against a cached job).
   * `since` (the reader's {@link began} clock): a read of the object begun after that moment answers too, in flight or
   * done: begun after the caller's question, it sees the object at least as new as one begun for it (a launch's DRA
   * pods, each judged with its claim template as it is now, share the reads begun after they arrived).
   */
  fresh?(kind: ObjectKind, namespace: string, name: string, since?: number): Promise<KubeObject | undefined>;
  /** The reader's clock for `fresh`'s `since` (monotonic, milliseconds); absent: `since` is not understood. */
  began?(): number;
  /**
   * Told of every lookup `lookup.ts` makes through this reader: how it was answered and how long it took
   * (seconds). The server passes its metrics here; absent, nothing is measured.
   */
  observeLookup?: (result: "hit" | "hit_refreshing" | "fetched" | "not_found" | "error" | "timeout", seconds: number) => void;
  /** The clock lookups are timed with (seconds, monotonic); default `performance.now() / 1000`. */
  clock?: () => number;
}

/** A job the pod refers to. */
export interface JobRef {
  candidates: JobKind[];
  namespace: string;
  name: string;
  /** How the reference was found, for messages. */
  via: "ownerReference" | "label" | "jobset";
  /** The controller's uid, when the pod's ownerReference gives one: a job of its name with another uid is not the pod's. */
  uid?: string;
  /** The registry the candidates are looked up in (the policy's `kindShapes`); absent: the built-in one. */
  shapes?: readonly KindShape[];
}

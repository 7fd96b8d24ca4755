/**
 * @module
 * Finding a pod's topology through a {@link JobReader}, within a time bound well inside the webhook's
 * timeout. Every way it can fail becomes a reason string: the caller admits the pod without a cluster
 * spec and says why in a warning, or denies when the policy says so.
 */
import { errorMessage } from "../core/errors.js";
import type { Pod } from "../core/kube.js";
import type { Policy } from "../policy/types.js";
import { TRAINER } from "../core/job-shapes.js";
import { jobRef, replicaOf } from "./resolve.js";
import { otherUid } from "./owner.js";
import { jobShape } from "../kinds/index.js";
import type { KubeObject, ObjectKind } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import type { JobReader, JobRef, Topology } from "./types.js";

export type TopologyResult = { kind: "none" } | { kind: "found"; topology: Topology } | { kind: "failed"; reason: string };

/** A lookup that took longer than its bound (told apart from other failures for the lookup histogram). */
class LookupTimeout extends Error {}

type LookupResult = Parameters<NonNullable<JobReader["observeLookup"]>>[0];

/** Starts timing a lookup; the returned function reports its result to the reader's observer, if any. */
function timer(jobs: JobReader): (result: LookupResult) => void {
  const observe = jobs.observeLookup;
  if (!observe) return () => undefined;
  const clock = jobs.clock ?? ((): number => performance.now() / 1000);
  const start = clock();
  return (result) => observe(result, Math.max(0, clock() - start));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LookupTimeout(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * How a lookup answered from the cache is counted: `hit_refreshing` when a copy it used is being re-read in the
 * background (refresh-ahead, src/kube/jobs.ts), else `hit`. Asked only when someone is counting.
 */
function hitOf(jobs: JobReader, kinds: readonly ObjectKind[], namespace: string, name: string): LookupResult {
  if (!jobs.observeLookup || !jobs.refreshing) return "hit";
  return kinds.some((k) => jobs.refreshing!(k, namespace, name)) ? "hit_refreshing" : "hit";
}

type Found = { job: KubeObject; index: number } | undefined;

const NO_JOB: TopologyResult = Object.freeze({ kind: "none" });

/** The first candidate kind's job, when every candidate is in the reader's cache; null when one is not. */
function peekCandidates(ref: JobRef, jobs: JobReader): { found: Found } | null {
  if (!jobs.peek) return null;
  let found: Found;
  for (let i = 0; i < ref.candidates.length; i++) {
    const job = jobs.peek(ref.candidates[i]!, ref.namespace, ref.name);
    if (job === null) return null;
    if (job !== undefined && found === undefined) found = { job, index: i };
  }
  return { found };
}

/** How {@link readCandidates} reads: within how long, named how in errors, told whom, past the cache or through it. */
interface ReadHow {
  timeoutMs: number;
  what: string;
  done: (r: LookupResult) => void;
  fresh: boolean;
}

/** The first candidate kind's job that exists, read through the reader within `timeoutMs`. */
async function readCandidates(ref: JobRef, jobs: JobReader, { timeoutMs, what, done, fresh }: ReadHow): Promise<{ found: Found } | { error: string }> {
  const read = (k: ObjectKind) => (fresh && jobs.fresh ? jobs.fresh(k, ref.namespace, ref.name) : jobs.get(k, ref.namespace, ref.name));
  let results: Array<PromiseSettledResult<KubeObject | undefined>>;
  try {
    results = await withTimeout(Promise.allSettled(ref.candidates.map(read)), timeoutMs, what);
  } catch (err) {
    done(err instanceof LookupTimeout ? "timeout" : "error");
    return { error: errorMessage(err) };
  }
  const index = results.findIndex((r) => r.status === "fulfilled" && r.value);
  if (index >= 0) {
    done("fetched");
    return { found: { job: (results[index] as PromiseFulfilledResult<KubeObject>).value, index } };
  }
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  done(failure ? "error" : "not_found");
  return failure ? { error: `${what} failed: ${errorMessage(failure.reason)}` } : { found: undefined };
}

/** The uid of the job found when it is not the pod's controller's (another object of its name); else undefined. */
const otherJob = (ref: JobRef, found: Found): string | undefined => (found ? otherUid(found.job, ref.uid) : undefined);

/**
 * Whether a read through the cache is not to be believed for a pod whose controller has a uid: another object of the
 * name, or none (a copy of the name's absence read between the old job's deletion and the new one's creation).
 */
const notBelieved = (ref: JobRef, found: Found): boolean => ref.uid !== undefined && (found === undefined || otherJob(ref, found) !== undefined);

function topologyOf(pod: Pod, ref: JobRef, found: Found): TopologyResult {
  const other = otherJob(ref, found);
  if (other !== undefined) {
    const kind = ref.candidates[found!.index]!.kind;
    return {
      kind: "failed",
      reason: `${kind} ${ref.namespace}/${ref.name} is not the pod's controller (uid ${other}, the pod's ownerReference ${ref.uid}): that job is gone`,
    };
  }
  if (!found) {
    // A JobSet without a TrainJob of its name is no training job's (`jobsetRef` in resolve.ts).
    if (ref.via === "jobset") return NO_JOB;
    return { kind: "failed", reason: `job ${ref.namespace}/${ref.name} (${ref.candidates.map((k) => k.kind).join(" or ")}) not found` };
  }
  const kind = ref.candidates[found.index]!;
  const replica = replicaOf(pod, found.job, kind, ref.shapes);
  if ("problem" in replica) return { kind: "failed", reason: `${kind.kind} ${ref.name}: ${replica.problem}` };
  return { kind: "found", topology: { job: found.job, kind, ...replica } };
}

/**
 * The pod's topology. Answered at once (no promise, no timer) when the reader has every candidate job
 * in its cache, which is the common case at admission rate; read from the apiserver otherwise.
 */
export function lookupTopology(pod: Pod, namespace: string, policy: Policy, jobs: JobReader): TopologyResult | Promise<TopologyResult> {
  const ref = jobRef(pod, namespace, policy);
  if (!ref) return NO_JOB;
  const done = timer(jobs);
  const peeked = peekCandidates(ref, jobs);
  if (peeked && !notBelieved(ref, peeked.found)) {
    done(hitOf(jobs, ref.candidates, ref.namespace, ref.name));
    return topologyOf(pod, ref, peeked.found);
  }
  return readTopology(pod, ref, jobs, { timeoutMs: policy.clusterSpec.jobLookupTimeoutMs, done, fresh: peeked !== null });
}

/**
 * {@link lookupTopology} past a cache miss, or fresh (`fresh`) past a cached copy the pod's controller uid does not
 * believe: a job deleted and made again under its name is the old object (or its absence) in the cache for up to its
 * TTL, whose replicas the new job's pods would be given (a TF_CONFIG of the old job's workers). A read through the
 * cache (a miss: begun now, or joined to one in flight) that answers another uid is made again fresh once; one that
 * answers an absence is believed (its read is new, and a job whose pods exist was made before them).
 */
async function readTopology(pod: Pod, ref: JobRef, jobs: JobReader, how: Omit<ReadHow, "what">): Promise<TopologyResult> {
  const what = `reading job ${ref.namespace}/${ref.name}`;
  let read = await readCandidates(ref, jobs, { ...how, what });
  if (!how.fresh && !("error" in read) && otherJob(ref, read.found) !== undefined)
    read = await readCandidates(ref, jobs, { ...how, what, done: timer(jobs), fresh: true });
  return "error" in read ? { kind: "failed", reason: read.error } : topologyOf(pod, ref, read.found);
}

export type JobReadResult = { kind: "found"; job: KubeObject } | { kind: "missing"; reason: string } | { kind: "failed"; reason: string };

/** Which job {@link readJob} reads, through which reader, within how long. */
export interface ReadJobOptions {
  kind: ObjectKind;
  namespace: string;
  name: string;
  jobs: JobReader;
  timeoutMs: number;
  /** Bypass the cache: the job as it is now. */
  fresh?: boolean;
}

/**
 * One job by kind and name, through the same reader (and cache) as {@link lookupTopology}, within
 * `timeoutMs`: at once when the reader has it cached, else through a promise. Never rejects. With
 * `fresh`, the cache is bypassed: the job as it is now, through the reader's `fresh` (its `get` when it
 * has none, being uncached).
 */
export function readJob(opts: ReadJobOptions): JobReadResult | Promise<JobReadResult> {
  const { kind, namespace, name, jobs, timeoutMs } = opts;
  const what = `reading ${kind.kind} ${namespace}/${name}`;
  const answer = (job: KubeObject | undefined): JobReadResult =>
    job ? { kind: "found", job } : { kind: "missing", reason: `${kind.kind} ${namespace}/${name} not found` };
  const done = timer(jobs);
  const peeked = opts.fresh ? null : jobs.peek?.(kind, namespace, name);
  if (peeked !== null && peeked !== undefined) {
    done(hitOf(jobs, [kind], namespace, name));
    return answer(peeked);
  }
  let read: Promise<KubeObject | undefined>;
  try {
    read = opts.fresh && jobs.fresh ? jobs.fresh(kind, namespace, name) : jobs.get(kind, namespace, name);
  } catch (err) {
    done("error");
    return { kind: "failed", reason: `${what} failed: ${errorMessage(err)}` };
  }
  return withTimeout(read, timeoutMs, what).then(
    (job) => {
      done(job ? "fetched" : "not_found");
      return answer(job);
    },
    (err: unknown) => {
      done(err instanceof LookupTimeout ? "timeout" : "error");
      const message = errorMessage(err);
      return { kind: "failed", reason: message.startsWith(what) ? message : `${what} failed: ${message}` };
    },
  );
}

/** The API of a Trainer v2 runtime kind, as a JobKind for the reader (`framework` is the TrainJob's). */
export function runtimeKind(ref: { kind: string; apiGroup: string }): JobKind {
  return { kind: ref.kind, group: ref.apiGroup, version: TRAINER.version, plural: `${ref.kind.toLowerCase()}s`, framework: "trainer" };
}

/**
 * A TrainJob's runtime (`spec.runtimeRef`: a ClusterTrainingRuntime, cluster-scoped, read with namespace "", or
 * a TrainingRuntime in the TrainJob's namespace), through the same reader, cache and bound as the job lookups.
 * `missing` when the TrainJob names none, or a kind that is no Trainer runtime. With `fresh`, the cache is bypassed
 * (`/validate/jobs` on a TrainJob's CREATE and unsuspend: issue 45, a runtime edited within the cache's window).
 */
export function readRuntime(
  job: KubeObject,
  kind: JobKind,
  namespace: string,
  jobs: JobReader,
  bound: number | { timeoutMs: number; fresh: boolean },
): JobReadResult | Promise<JobReadResult> {
  const { timeoutMs, fresh } = typeof bound === "number" ? { timeoutMs: bound, fresh: false } : bound;
  const ref = jobShape(kind).runtimeRef?.(job);
  if (!ref) return { kind: "missing", reason: "spec.runtimeRef names no runtime" };
  if (ref.apiGroup !== TRAINER.group || !TRAINER.runtimeKinds.includes(ref.kind))
    return { kind: "missing", reason: `spec.runtimeRef: ${ref.apiGroup}/${ref.kind} is not a Trainer runtime kind (${TRAINER.runtimeKinds.join(", ")})` };
  return readJob({ kind: runtimeKind(ref), namespace: ref.kind === "ClusterTrainingRuntime" ? "" : namespace, name: ref.name, jobs, timeoutMs, fresh });
}

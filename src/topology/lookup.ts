/**
 * @module
 * Finding a pod's topology through a {@link JobReader}, within a time bound well inside the webhook's
 * timeout. Every way it can fail becomes a reason string: the caller admits the pod without a cluster
 * spec and says why in a warning, or denies when the policy says so.
 */
import { errorMessage } from "../errors.js";
import type { Pod } from "../mutate/types.js";
import type { Policy } from "../policy/types.js";
import { jobRef, replicaOf } from "./resolve.js";
import type { KubeObject } from "../admission/types.js";
import type { JobReader, JobRef, Topology } from "./types.js";

export type TopologyResult =
  | { kind: "none" }
  | { kind: "found"; topology: Topology }
  | { kind: "failed"; reason: string };

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

type Found = { job: KubeObject; index: number } | undefined;

/** The first candidate kind's job that exists: from the cache when every answer is at hand, else by reading. */
async function readCandidates(ref: JobRef, jobs: JobReader, timeoutMs: number, what: string): Promise<{ found: Found } | { error: string }> {
  // The common case: every candidate already cached, answered without a timer or a promise.
  const peeked = jobs.peek ? ref.candidates.map((k) => jobs.peek!(k, ref.namespace, ref.name)) : [];
  if (peeked.length > 0 && peeked.every((p) => p !== null)) {
    const index = peeked.findIndex((p) => p !== undefined);
    return { found: index >= 0 ? { job: peeked[index]!, index } : undefined };
  }
  let results: Array<PromiseSettledResult<KubeObject | undefined>>;
  try {
    results = await withTimeout(Promise.allSettled(ref.candidates.map((k) => jobs.get(k, ref.namespace, ref.name))), timeoutMs, what);
  } catch (err) {
    return { error: errorMessage(err) };
  }
  const index = results.findIndex((r) => r.status === "fulfilled" && r.value);
  if (index >= 0) return { found: { job: (results[index] as PromiseFulfilledResult<KubeObject>).value, index } };
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  return failure ? { error: `${what} failed: ${errorMessage(failure.reason)}` } : { found: undefined };
}

export async function lookupTopology(pod: Pod, namespace: string, policy: Policy, jobs: JobReader): Promise<TopologyResult> {
  const ref = jobRef(pod, namespace, policy);
  if (!ref) return { kind: "none" };
  const what = `reading job ${ref.namespace}/${ref.name}`;
  const read = await readCandidates(ref, jobs, policy.clusterSpec.jobLookupTimeoutMs, what);
  if ("error" in read) return { kind: "failed", reason: read.error };
  const found = read.found;
  if (!found) {
    return { kind: "failed", reason: `job ${ref.namespace}/${ref.name} (${ref.candidates.map((k) => k.kind).join(" or ")}) not found` };
  }
  const kind = ref.candidates[found.index]!;
  const replica = replicaOf(pod, found.job, kind);
  if ("problem" in replica) return { kind: "failed", reason: `${kind.kind} ${ref.name}: ${replica.problem}` };
  return { kind: "found", topology: { job: found.job, kind, ...replica } };
}

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
import type { JobReader, Topology } from "./types.js";

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

export async function lookupTopology(pod: Pod, namespace: string, policy: Policy, jobs: JobReader): Promise<TopologyResult> {
  const ref = jobRef(pod, namespace, policy);
  if (!ref) return { kind: "none" };
  const what = `reading job ${ref.namespace}/${ref.name}`;
  let found: { job: NonNullable<Awaited<ReturnType<JobReader["get"]>>>; index: number } | undefined;
  // The common case: every candidate already cached, answered without a timer or a promise.
  const peeked = jobs.peek ? ref.candidates.map((k) => jobs.peek!(k, ref.namespace, ref.name)) : [];
  if (peeked.length > 0 && peeked.every((p) => p !== null)) {
    const index = peeked.findIndex((p) => p !== undefined);
    if (index >= 0) found = { job: peeked[index]!, index };
  } else try {
    const results = await withTimeout(
      Promise.allSettled(ref.candidates.map((k) => jobs.get(k, ref.namespace, ref.name))),
      policy.clusterSpec.jobLookupTimeoutMs,
      what,
    );
    const errors: string[] = [];
    results.forEach((r, index) => {
      if (found) return;
      if (r.status === "fulfilled" && r.value) found = { job: r.value, index };
      else if (r.status === "rejected") errors.push(errorMessage(r.reason));
    });
    if (!found && errors.length > 0) return { kind: "failed", reason: `${what} failed: ${errors[0]}` };
  } catch (err) {
    return { kind: "failed", reason: errorMessage(err) };
  }
  if (!found) {
    return { kind: "failed", reason: `job ${ref.namespace}/${ref.name} (${ref.candidates.map((k) => k.kind).join(" or ")}) not found` };
  }
  const kind = ref.candidates[found.index]!;
  const replica = replicaOf(pod, found.job, kind);
  if ("problem" in replica) return { kind: "failed", reason: `${kind.kind} ${ref.name}: ${replica.problem}` };
  return { kind: "found", topology: { job: found.job, kind, ...replica } };
}

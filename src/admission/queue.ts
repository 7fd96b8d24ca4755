/**
 * @module
 * Reading what Kueue (sigs.k8s.io/kueue v0.19.2, API `kueue.x-k8s.io/v1beta2`) would admit a queued job into:
 * its LocalQueue (in the job's namespace), that queue's ClusterQueue, and the ResourceFlavors of the ClusterQueue's
 * resource groups that cover a GPU resource. Through the webhook's one cached, single-flight
 * reader (`readJob` in src/membership/lookup.ts, as TrainJob runtimes and DRA claims are read), all within one time
 * bound (`clusterSpec.jobLookupTimeoutMs`) for the whole chain, not one per read. A job without a queue name
 * costs nothing here (no promise, no read); the webhook does not ask for a job that asks for no GPU. The decision on what was read is
 * `src/validate/queue-capacity.ts`.
 */
import { errorMessage } from "../core/errors.js";
import type { KubeObject, ObjectKind } from "../core/kube.js";
import { objectOr } from "../core/object.js";
import { CLUSTER_QUEUE, LOCAL_QUEUE, NO_QUEUE, RESOURCE_FLAVOR, flavorNamesFor, type QueueRead } from "../kueue/queues.js";
import { readJob } from "../membership/lookup.js";
import type { JobReader } from "../membership/types.js";
import { queueNameOf } from "../kueue/admission.js";

export interface ReadQueueOptions {
  job: KubeObject;
  namespace: string;
  /** Which resources are GPUs: only the flavors of resource groups covering one are read. */
  isGpu: (resource: string) => boolean;
  reader: JobReader;
  /** The bound on the whole chain of reads. */
  timeoutMs: number;
  /** Monotonic milliseconds; default `performance.now()`. */
  clock?: () => number;
}

/** The job's LocalQueue, ClusterQueue and the flavors that matter, read within `timeoutMs` in all; never rejects. */
export function readQueue(opts: ReadQueueOptions): QueueRead | Promise<QueueRead> {
  const queue = queueNameOf(opts.job);
  if (queue === undefined) return NO_QUEUE;
  return readChain(queue, opts).catch((err: unknown) => ({ kind: "unavailable" as const, queue, reason: errorMessage(err) }));
}

async function readChain(queue: string, opts: ReadQueueOptions): Promise<QueueRead> {
  const clock = opts.clock ?? ((): number => performance.now());
  const deadline = clock() + opts.timeoutMs;
  const left = (): number => Math.max(1, Math.round(deadline - clock()));
  const read = (kind: ObjectKind, namespace: string, name: string) => readJob({ kind, namespace, name, jobs: opts.reader, timeoutMs: left() });
  const unavailable = (reason: string): QueueRead => ({ kind: "unavailable", queue, reason });

  const lq = await read(LOCAL_QUEUE, opts.namespace, queue);
  if (lq.kind !== "found") return unavailable(lq.kind === "missing" ? `LocalQueue ${opts.namespace}/${queue} not found` : lq.reason);
  const cqName = objectOr(lq.job.spec).clusterQueue;
  if (typeof cqName !== "string" || cqName === "") return unavailable(`LocalQueue ${opts.namespace}/${queue} names no ClusterQueue`);
  const cq = await read(CLUSTER_QUEUE, "", cqName);
  if (cq.kind !== "found")
    return unavailable(cq.kind === "missing" ? `ClusterQueue ${cqName} (of LocalQueue ${opts.namespace}/${queue}) not found` : cq.reason);

  const flavors = new Map<string, KubeObject | undefined>();
  const unread: string[] = [];
  await Promise.all(
    flavorNamesFor(cq.job, opts.isGpu).map(async (name) => {
      const f = await read(RESOURCE_FLAVOR, "", name);
      if (f.kind === "found") flavors.set(name, f.job);
      else if (f.kind === "missing") flavors.set(name, undefined);
      else unread.push(f.reason);
    }),
  );
  return { kind: "found", queue, clusterQueue: cq.job, flavors, unread };
}

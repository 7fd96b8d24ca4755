/**
 * @module
 * What the resident reconciler's caches keep of each object, in one place (`src/run/watch.ts` feeds its
 * informers through these; `src/kube/informer.ts` adds each object's resourceVersion back):
 *
 * | kind      | kept                                                                                   | size kept          |
 * | --------- | -------------------------------------------------------------------------------------- | ------------------ |
 * | job, in a namespace that opted in | `slimJob`: all but managedFields and kubectl's last-applied copy | the job's own      |
 * | job, in any other namespace       | `jobStub`: apiVersion, kind, name, namespace, uid              | < 512 bytes (test) |
 * | Pod       | `slimPod` (`./cluster.ts`): identity, owners, containers' resources and ports, phase... | ~1 KiB             |
 * | Service   | `slimService` (`./cluster.ts`): metadata                                               | ~0.3 KiB           |
 * | Namespace | `slimNamespace` (`./cluster.ts`): name and labels                                      | its labels         |
 *
 * Why a job out of scope keeps nothing but its name: the planners never read more of it. A pass lists it as
 * skipped and the ledger counts its `namespace/name` (`src/reconcile/plan.ts`: the scope is decided before
 * anything else of the job is read), and a sync returns before reading it (`src/run/watch.ts`). So a tenant
 * whose namespace never opted in cannot grow the reconciler with its jobs, whatever their size: 1,000 TFJobs
 * of 1 MiB each cost ~0.3 MiB of cache (test/unit/kube/projection.test.ts, test/e2e/reconcile-memory.test.ts).
 *
 * Namespaces opt in and out while the reconciler runs: a job cached as a stub whose namespace opts in is read
 * again (`TrimmedInformer.reread`, a LIST of that namespace), and one whose namespace opts out is trimmed to
 * its stub (`TrimmedInformer.retrim`); until the reread lands, `isJobStub` tells the readers it is not the job.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { slimJob } from "./informer.js";

/** Marks a job cached as its stub: a symbol, so it is never sent, logged or serialized. */
const STUB = Symbol("quartermaster.jobStub");

type Stub = KubernetesObject & { [STUB]: true };

/** A job reduced to its identity: what the planners read of a job outside their scope. */
export function jobStub(o: object): KubernetesObject {
  const { apiVersion, kind, metadata } = o as KubernetesObject;
  const m = metadata ?? {};
  const stub: Stub = {
    ...(apiVersion !== undefined ? { apiVersion } : {}),
    ...(kind !== undefined ? { kind } : {}),
    metadata: { name: m.name, namespace: m.namespace, uid: m.uid },
    [STUB]: true,
  };
  return stub;
}

/** Whether `o` is a job's stub (`jobStub`), not the job as the planners read it. */
export function isJobStub(o: object | undefined): boolean {
  return o !== undefined && (o as Partial<Stub>)[STUB] === true;
}

/**
 * The job as the cache keeps it: whole but for managedFields and kubectl's copy (`slimJob`) where
 * `inScope(namespace)` holds, else its stub. A stub stays a stub when trimmed again in scope (its fields are
 * gone): `isJobStub` says it must be read again.
 */
export function projectJob(o: object, inScope: (namespace: string) => boolean): KubernetesObject {
  if (isJobStub(o)) return o;
  const ns = (o as KubernetesObject).metadata?.namespace;
  return ns !== undefined && inScope(ns) ? slimJob(o) : jobStub(o);
}

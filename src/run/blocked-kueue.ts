/**
 * @module
 * Kueue's objects for the resident reconciler's verdicts (issue 49, "the same verdict where users look"): the
 * Workloads, LocalQueues and ClusterQueues from informers of their own, trimmed to what src/explain/kueue.ts and
 * src/explain/verdict.ts read, so the Event on a job Kueue holds names the reason `quartermaster explain` names
 * (`inadmissible`, `phantom-reservation`, `queued` with Kueue's own words), not only `queued`.
 *
 * Unknown is not "no queue": until all three caches hold a whole LIST (Kueue not installed, its API refused to the
 * reconciler, a relist after its CRDs went), and for a Workload cached while its namespace had not opted in, the
 * verdict judges without Kueue (`evidence.unread` keeps `kueue`: a job suspended for a queue is `queued`).
 *
 * Memory: a Workload of an opted-in namespace is kept as at most 8 pod sets (Kueue's CRD limit) of one count and
 * one synthetic container holding the pod's GPUs, its conditions (messages cut at 1 KiB), its admission (at most
 * 8 assignments of 32 resources) and requeue state: a few KiB at most, whatever its pods' templates hold. Elsewhere,
 * its name, uid and owner. Queues are cluster objects an administrator writes, kept whole but for their managed
 * fields.
 */
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { asV1PodSpec } from "../core/boundary.js";
import { errorMessage } from "../core/errors.js";
import { effectivePodGpus, type GpuCatalog } from "../core/gpu.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import { waitingQueueOf } from "../kueue/admission.js";
import { KUEUE_GROUP } from "../kueue/queues.js";
import type { kubeClient } from "../kube/client.js";
import { trimmedInformer, type ListPage, type TrimmedInformer } from "../kube/informer.js";
import { restartOnError } from "./informer-restart.js";

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** The version `quartermaster explain` reads (src/run/explain-read.ts), so both judge the same objects. */
const VERSION = "v1beta1";
const PAGE = 500;
const MAX_POD_SETS = 8;
const MAX_RESOURCES = 32;
const MAX_MESSAGE = 1024;

/** What Kueue holds of one job, as src/explain/types.ts ExplainEvidence takes it. */
export interface KueueView {
  kueueServed: true;
  workload?: KubeObject;
  localQueue?: KubeObject;
  clusterQueue?: KubeObject;
}

export interface KueueCaches {
  /** Kueue's objects for the job, or undefined when they are not known (the verdict then judges without them). */
  view(job: KubeObject): KueueView | undefined;
  stop(): Promise<void>;
}

export interface KueueCacheOptions {
  k8s: ClientModule;
  kc: KubeConfig;
  plainPage?: (path: string) => (cont: string | undefined) => Promise<ListPage>;
  log: Logger;
  gpu: GpuCatalog;
  inScope: (namespace: string) => boolean;
}

const cut = (v: unknown): unknown => (typeof v === "string" && v.length > MAX_MESSAGE ? `${v.slice(0, MAX_MESSAGE)}…` : v);

function slimMeta(m: Record<string, unknown>): Record<string, unknown> {
  const owners = Array.isArray(m.ownerReferences) ? (m.ownerReferences as unknown[]).filter((r) => isObject(r) && r.controller === true) : [];
  return {
    name: m.name,
    ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
    uid: m.uid,
    ...(m.creationTimestamp !== undefined ? { creationTimestamp: m.creationTimestamp } : {}),
    ...(owners.length > 0 ? { ownerReferences: owners } : {}),
  };
}

const firstOf = (v: unknown, n: number): Array<Record<string, unknown>> => (Array.isArray(v) ? v.filter(isObject).slice(0, n) : []);

const firstEntries = (v: unknown): Record<string, unknown> => Object.fromEntries(Object.entries(objectOr(v)).slice(0, MAX_RESOURCES));

/**
 * A Workload as the verdicts read it (see the module's note on its size); in a namespace out of scope, its stub
 * (no spec), which {@link KueueCaches.view} treats as unknown.
 */
export function slimWorkload(o: object, gpu: GpuCatalog, inScope: (namespace: string) => boolean): KubeObject {
  const w = o as { metadata?: Record<string, unknown>; spec?: Record<string, unknown>; status?: Record<string, unknown> };
  const meta = slimMeta(objectOr(w.metadata));
  const base = { apiVersion: `${KUEUE_GROUP}/${VERSION}`, kind: "Workload", metadata: meta };
  if (!inScope(String(meta.namespace ?? ""))) return base;
  const spec = objectOr(w.spec);
  const status = objectOr(w.status);
  const podSets = firstOf(spec.podSets, MAX_POD_SETS).map((ps) => {
    const requests = Object.fromEntries(effectivePodGpus(asV1PodSpec(objectOr(objectOr(ps.template).spec)), gpu));
    return {
      name: ps.name,
      ...(typeof ps.count === "number" ? { count: ps.count } : {}),
      template: { spec: { containers: [{ name: "gpus", resources: { requests } }] } },
    };
  });
  const admission = objectOr(status.admission);
  return {
    ...base,
    spec: {
      ...(spec.active !== undefined ? { active: spec.active } : {}),
      ...(spec.queueName !== undefined ? { queueName: spec.queueName } : {}),
      podSets,
    },
    status: {
      conditions: firstOf(status.conditions, 16).map((c) => ({ ...c, message: cut(c.message) })),
      ...(isObject(status.admission)
        ? {
            admission: {
              clusterQueue: admission.clusterQueue,
              podSetAssignments: firstOf(admission.podSetAssignments, MAX_POD_SETS).map((a) => ({
                name: a.name,
                flavors: firstEntries(a.flavors),
                resourceUsage: firstEntries(a.resourceUsage),
                ...(a.count !== undefined ? { count: a.count } : {}),
              })),
            },
          }
        : {}),
      ...(isObject(status.requeueState) ? { requeueState: status.requeueState } : {}),
    },
  };
}

/** A LocalQueue or ClusterQueue: whole but for its managed fields (an administrator's object, a few per team). */
export function slimQueue(o: object): KubeObject {
  const q = o as { metadata?: Record<string, unknown>; spec?: unknown; status?: unknown };
  return { metadata: slimMeta(objectOr(q.metadata)), spec: objectOr(q.spec), status: objectOr(q.status) };
}

const isStub = (o: KubernetesObject): boolean => !("spec" in o);

/** What the verdicts do while a cache they read is down, said in its informer's restart lines. */
export const JUDGED_WITHOUT = "verdicts judge without it meanwhile";

export function startKueueCaches(opts: KueueCacheOptions): KueueCaches {
  const { k8s, kc, log } = opts;
  let stopped = false;
  let customApi: InstanceType<ClientModule["CustomObjectsApi"]> | undefined;
  const custom = () => (customApi ??= kc.makeApiClient(k8s.CustomObjectsApi));
  const informer = (plural: string, trim: (o: object) => KubeObject, byController = false): TrimmedInformer<KubeObject> => {
    const path = `/apis/${KUEUE_GROUP}/${VERSION}/${plural}`;
    const inf = trimmedInformer<KubeObject>(k8s, kc, {
      path,
      page: opts.plainPage
        ? opts.plainPage(path)
        : async (cont) => (await custom().listClusterCustomObject({ group: KUEUE_GROUP, version: VERSION, plural, limit: PAGE, _continue: cont })) as ListPage,
      namespacePage: opts.plainPage
        ? async (namespace, cont) => opts.plainPage!(`/apis/${KUEUE_GROUP}/${VERSION}/namespaces/${namespace}/${plural}`)(cont)
        : async (namespace, cont) =>
            (await custom().listNamespacedCustomObject({ group: KUEUE_GROUP, version: VERSION, plural, namespace, limit: PAGE, _continue: cont })) as ListPage,
      trim,
      indexByController: byController,
    });
    restartOnError(inf, { log, prefix: "blocked", stopped: () => stopped, meanwhile: JUDGED_WITHOUT }).start();
    return inf;
  };
  const workloads = informer("workloads", (o) => slimWorkload(o, opts.gpu, opts.inScope), true);
  const localQueues = informer("localqueues", slimQueue);
  const clusterQueues = informer("clusterqueues", slimQueue);
  // Namespaces whose Workloads were cached as stubs, read again once each (a namespace that opted in since).
  const rereading = new Set<string>();
  const reread = (ns: string): void => {
    if (rereading.has(ns)) return;
    rereading.add(ns);
    workloads
      .reread(ns, isStub)
      .catch((err: unknown) => log.warn({ err: errorMessage(err), namespace: ns }, "blocked: cannot read the Workloads of a namespace again"))
      .finally(() => rereading.delete(ns));
  };

  return {
    view(job) {
      if (!workloads.synced() || !localQueues.synced() || !clusterQueues.synced()) return undefined;
      const meta = objectOr(job.metadata);
      const ns = String(meta.namespace ?? "");
      const workload = workloads.byController(String(meta.uid ?? ""))[0];
      if (workload && isStub(workload)) {
        reread(ns);
        return undefined;
      }
      const queue = waitingQueueOf(job, workload);
      const localQueue = queue ? localQueues.get(queue, ns) : undefined;
      const cq = String(objectOr(localQueue?.spec).clusterQueue ?? "");
      const clusterQueue = cq ? clusterQueues.get(cq) : undefined;
      return {
        kueueServed: true,
        ...(workload ? { workload } : {}),
        ...(localQueue ? { localQueue } : {}),
        ...(clusterQueue ? { clusterQueue } : {}),
      };
    },
    async stop() {
      stopped = true;
      await Promise.all([workloads, localQueues, clusterQueues].map((i) => i.stop().catch(() => undefined)));
    },
  };
}

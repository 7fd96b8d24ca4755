/**
 * @module
 * The reconciler's window on the cluster, through @kubernetes/client-node (imported on first use):
 * paged LISTs (500 a page, as Gatekeeper's audit does) and deletes with a uid precondition. Counts its API
 * calls for the pass summary. Errors keep their HTTP status in `code`.
 */
import type { KubeObject } from "../admission/types.js";
import type { JobKind } from "../policy/types.js";

export const PAGE_SIZE = 500;

export interface ClusterReader {
  /** Every object of a job kind in the cluster; undefined when the kind's CRD is not installed. */
  listJobs(kind: JobKind): Promise<KubeObject[] | undefined>;
  /** Pods and Services carrying `labelSelector`, across namespaces. */
  listPods(labelSelector: string): Promise<KubeObject[]>;
  listServices(labelSelector: string): Promise<KubeObject[]>;
}

export interface ClusterWriter {
  /** Deletes with a uid precondition and Background propagation. Resolves "deleted", "gone" (404) or "changed" (409). */
  delete(target: { kind: "Pod" | "Service" | "Job"; jobKind?: JobKind; namespace: string; name: string; uid: string }): Promise<"deleted" | "gone" | "changed">;
}

export interface ClusterCreator {
  /** Creates a Service; resolves "created", or "exists" (409 AlreadyExists counts as done). */
  createService(namespace: string, body: KubeObject): Promise<"created" | "exists">;
}

export interface Cluster extends ClusterReader, ClusterWriter, ClusterCreator {
  readonly calls: number;
}

type Page = { items?: unknown[]; metadata?: { _continue?: string; continue?: string } };

function code(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

export async function connectCluster(kubeconfig?: string): Promise<Cluster> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  let calls = 0;

  const paged = async (fetchPage: (cont: string | undefined) => Promise<Page>): Promise<KubeObject[]> => {
    const out: KubeObject[] = [];
    let cont: string | undefined;
    do {
      calls++;
      const page = await fetchPage(cont);
      out.push(...((page.items ?? []) as KubeObject[]));
      cont = page.metadata?._continue ?? page.metadata?.continue;
    } while (cont);
    return out;
  };
  // client-node returns typed objects with Date fields; the planner reads raw JSON, so round-trip to it.
  const raw = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

  const cluster: Cluster = {
    get calls() {
      return calls;
    },
    async listJobs(kind) {
      try {
        return await paged(async (cont) => (await custom.listClusterCustomObject({ group: kind.group, version: kind.version, plural: kind.plural, limit: PAGE_SIZE, _continue: cont })) as Page);
      } catch (err) {
        if (code(err) === 404) return undefined;
        throw err;
      }
    },
    async listPods(labelSelector) {
      return raw(await paged(async (cont) => (await core.listPodForAllNamespaces({ labelSelector, limit: PAGE_SIZE, _continue: cont })) as Page));
    },
    async listServices(labelSelector) {
      return raw(await paged(async (cont) => (await core.listServiceForAllNamespaces({ labelSelector, limit: PAGE_SIZE, _continue: cont })) as Page));
    },
    async createService(namespace, body) {
      calls++;
      try {
        await core.createNamespacedService({ namespace, body: body as never });
        return "created";
      } catch (err) {
        if (code(err) === 409) return "exists";
        throw err;
      }
    },
    async delete(t) {
      calls++;
      const body = { preconditions: { uid: t.uid }, propagationPolicy: "Background" };
      try {
        if (t.kind === "Pod") await core.deleteNamespacedPod({ name: t.name, namespace: t.namespace, body });
        else if (t.kind === "Service") await core.deleteNamespacedService({ name: t.name, namespace: t.namespace, body });
        else {
          const k = t.jobKind!;
          await custom.deleteNamespacedCustomObject({ group: k.group, version: k.version, plural: k.plural, namespace: t.namespace, name: t.name, body });
        }
        return "deleted";
      } catch (err) {
        if (code(err) === 404) return "gone";
        if (code(err) === 409) return "changed";
        throw err;
      }
    },
  };
  return cluster;
}

/**
 * @module
 * The evidence `quartermaster explain` judges a job on (src/explain/types.ts), read from the API with bounded
 * GETs through the plain client (../kube/rest.ts): the kind's API group (served or not) and its controller's Deployment,
 * the job, its pods by label, Events about the job and a few of its pods, Quartermaster's PolicyReport in the
 * namespace, Kueue's Workload of the job (by Kueue's `kueue.x-k8s.io/job-uid` label), its LocalQueue and
 * ClusterQueue and its position from Kueue's visibility API, the nodes, the device ledger's ConfigMaps, and the
 * pods' ResourceClaims and the ResourceSlices. A read the API refuses (RBAC, a missing API) leaves its part out
 * and is named in `problems`; the verdict is computed from what there is.
 */
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import type { KnownKind } from "../explain/kinds.js";
import type { ControllerState, ExplainEvidence, PendingPosition, PolicyResult } from "../explain/types.js";
import type { Policy } from "../policy/types.js";
import { waitingQueueOf } from "../kueue/admission.js";
import { isLedgerConfigMapName, readStored, type StoredConfigMap } from "../ledger/shards.js";
import { POLICY_REPORT_API_VERSION, POLICY_REPORT_NAME } from "../core/keys.js";
import { labelScheme } from "../kinds/index.js";
import { LEDGER_LABEL, toStored } from "../kube/ledger.js";
import type { RestClient } from "../kube/rest.js";

/** Most objects one list reads (a page): the verdict needs a sample, not every object of a large cluster. */
export const LIST_LIMIT = 500;
/** Pods whose own Events are read (the job's Events are read whole). */
const POD_EVENTS = 5;

export interface ExplainReadOptions {
  rest: RestClient;
  policy: Pick<Policy, "gpu" | "accelerator">;
  kind: KnownKind;
  namespace: string;
  name: string;
  /** Where the device ledger is (Quartermaster's namespace). */
  ledgerNamespace: string;
  graceSeconds?: number;
}

export interface ExplainRead {
  evidence: ExplainEvidence;
  /** Reads that failed, one line each. */
  problems: string[];
}

const enc = encodeURIComponent;
const itemsOf = (list: unknown): KubeObject[] => (Array.isArray(objectOr(list).items) ? (objectOr(list).items as unknown[]).filter(isObject) : []);
const apiBase = (group: string, version: string): string => (group === "" ? `/api/${version}` : `/apis/${group}/${version}`);

/** The label that names the job on its pods: the policy kind's label scheme, batch Job's and JobSet's own. */
function podSelector(kind: KnownKind, name: string, job: KubeObject): string {
  if (kind.jobKind && kind.jobKind.framework !== "trainer") {
    const key = labelScheme(kind.jobKind).key;
    return `${key.label}=${key.value(job)}`;
  }
  if (kind.group === "batch") return `batch.kubernetes.io/job-name=${name}`;
  // JobSet's pods, and a TrainJob's (Trainer names its JobSet after the TrainJob).
  return `jobset.sigs.k8s.io/jobset-name=${name}`;
}

export async function readExplainEvidence(o: ExplainReadOptions): Promise<ExplainRead> {
  const problems: string[] = [];
  const get = async (path: string): Promise<unknown> => {
    try {
      return await o.rest.get(path);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
      return undefined;
    }
  };
  const { kind, namespace: ns, name } = o;
  /** A list's items; a list cut at the limit is said so (the verdict then rests on the first page). */
  const page =
    (what: string) =>
    (list: unknown): KubeObject[] => {
      if (objectOr(objectOr(list).metadata).continue) problems.push(`${what}: only the first ${LIST_LIMIT} were read`);
      return itemsOf(list);
    };
  const ls = (sel: string): string => `labelSelector=${enc(sel)}&limit=${LIST_LIMIT}`;
  const [served, kueueServed, controller] = await Promise.all([
    get(apiBase(kind.group, kind.version)).then((r) => r !== undefined),
    get("/apis/kueue.x-k8s.io/v1beta1").then((r) => r !== undefined),
    readControllerState(kind, get),
  ]);
  const job = served
    ? ((await get(`${apiBase(kind.group, kind.version)}/namespaces/${enc(ns)}/${kind.plural}/${enc(name)}`)) as KubeObject | undefined)
    : undefined;
  const uid = String(objectOr(job?.metadata).uid ?? "");
  const [pods, jobEvents, report, workloads, nodes, ledgerMaps] = await Promise.all([
    job ? get(`/api/v1/namespaces/${enc(ns)}/pods?${ls(podSelector(kind, name, job))}`).then(page("pods")) : Promise.resolve([]),
    job
      ? get(`/api/v1/namespaces/${enc(ns)}/events?fieldSelector=${enc(`involvedObject.name=${name}`)}&limit=${LIST_LIMIT}`).then(itemsOf)
      : Promise.resolve([]),
    job ? get(`/apis/${POLICY_REPORT_API_VERSION}/namespaces/${enc(ns)}/policyreports/${POLICY_REPORT_NAME}`) : Promise.resolve(undefined),
    job && uid && kueueServed
      ? get(`/apis/kueue.x-k8s.io/v1beta1/namespaces/${enc(ns)}/workloads?${ls(`kueue.x-k8s.io/job-uid=${uid}`)}`).then(itemsOf)
      : Promise.resolve([]),
    job ? get(`/api/v1/nodes?limit=${LIST_LIMIT}`).then(page("nodes")) : Promise.resolve([]),
    job ? get(`/api/v1/namespaces/${enc(o.ledgerNamespace)}/configmaps?${ls(`${LEDGER_LABEL}=true`)}`).then(itemsOf) : Promise.resolve([]),
  ]);
  const notRunning = pods.filter((p) => objectOr(p.status).phase !== "Running").slice(0, POD_EVENTS);
  const podEvents = await Promise.all(
    notRunning.map((p) =>
      get(`/api/v1/namespaces/${enc(ns)}/events?fieldSelector=${enc(`involvedObject.name=${String(objectOr(p.metadata).name)}`)}&limit=50`).then(itemsOf),
    ),
  );
  const workload = workloads[0];
  const queues = await readQueues(get, ns, job, workload, kueueServed);
  const dra = await readDra(get, ns, pods);
  const evidence: ExplainEvidence = {
    ref: { namespace: ns, name },
    ...(job ? { job } : {}),
    kind: {
      kind: kind.kind,
      group: kind.group,
      version: kind.version,
      plural: kind.plural,
      finishedConditions: kind.finishedConditions,
      ...(kind.jobKind ? { jobKind: kind.jobKind } : {}),
      served,
      controller,
    },
    pods,
    events: [...jobEvents, ...podEvents.flat()],
    policyResults: policyResults(report, new Set([uid, ...pods.map((p) => String(objectOr(p.metadata).uid ?? ""))].filter(Boolean))),
    ...(workload ? { workload } : {}),
    ...queues,
    kueueServed,
    nodes,
    ...ledgerOf(ledgerMaps, problems),
    ...dra,
    settings: { gpu: o.policy.gpu, acceleratorLabel: o.policy.accelerator.nodeLabel, graceSeconds: o.graceSeconds ?? 120 },
  };
  return { evidence, problems };
}

/** A GET of `path`: its object, or undefined when there is none or the read failed. */
export type Get = (path: string) => Promise<unknown>;

/** The controller's Deployment, found by name in any namespace (one GET with a field selector); unknown when the read failed. */
export async function readControllerState(kind: KnownKind, get: Get): Promise<{ name: string; state: ControllerState; detail?: string }> {
  if (!kind.deployment) return { name: kind.controllerName, state: "unknown" };
  const list = await get(`/apis/apps/v1/deployments?fieldSelector=${enc(`metadata.name=${kind.deployment}`)}&limit=10`);
  if (list === undefined) return { name: kind.deployment, state: "unknown" };
  const found = itemsOf(list);
  if (found.length === 0)
    return { name: kind.deployment, state: "absent", detail: `no Deployment ${kind.deployment} in any namespace (${kind.controllerName})` };
  const d = found[0]!;
  const ready = Number(objectOr(d.status).readyReplicas ?? 0);
  const want = Number(objectOr(d.spec).replicas ?? 1);
  return {
    name: kind.deployment,
    state: ready > 0 ? "running" : "not-running",
    detail: `Deployment ${String(objectOr(d.metadata).namespace)}/${kind.deployment}: ${ready} of ${want} ready`,
  };
}

async function readQueues(
  get: Get,
  ns: string,
  job: KubeObject | undefined,
  workload: KubeObject | undefined,
  served: boolean,
): Promise<{ localQueue?: KubeObject; clusterQueue?: KubeObject; position?: PendingPosition }> {
  const queue = waitingQueueOf(job, workload);
  if (!served || !queue) return {};
  const localQueue = (await get(`/apis/kueue.x-k8s.io/v1beta1/namespaces/${enc(ns)}/localqueues/${enc(queue)}`)) as KubeObject | undefined;
  const cq = String(objectOr(localQueue?.spec).clusterQueue ?? "");
  const clusterQueue = cq ? ((await get(`/apis/kueue.x-k8s.io/v1beta1/clusterqueues/${enc(cq)}`)) as KubeObject | undefined) : undefined;
  let position: PendingPosition | undefined;
  if (workload && localQueue) {
    // Kueue's visibility API (on-demand, kueue `apis/visibility/v1beta1`): absent unless its APIService is served.
    const pending = await get(`/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/${enc(ns)}/localqueues/${enc(queue)}/pendingworkloads?limit=${LIST_LIMIT}`);
    const mine = itemsOf(pending).find((w) => objectOr(w.metadata).name === objectOr(workload.metadata).name);
    if (mine)
      position = {
        ...(typeof mine.positionInClusterQueue === "number" ? { inClusterQueue: mine.positionInClusterQueue } : {}),
        ...(typeof mine.positionInLocalQueue === "number" ? { inLocalQueue: mine.positionInLocalQueue } : {}),
      };
  }
  return { ...(localQueue ? { localQueue } : {}), ...(clusterQueue ? { clusterQueue } : {}), ...(position ? { position } : {}) };
}

/** The pods' ResourceClaims and the published ResourceSlices, read only when a pod names a claim. */
async function readDra(get: Get, ns: string, pods: KubeObject[]): Promise<{ claims: KubeObject[]; slices: KubeObject[] }> {
  const named = new Set<string>();
  for (const p of pods) {
    for (const c of Array.isArray(objectOr(p.spec).resourceClaims) ? (objectOr(p.spec).resourceClaims as unknown[]) : [])
      if (isObject(c) && typeof c.resourceClaimName === "string") named.add(c.resourceClaimName);
    for (const s of Array.isArray(objectOr(p.status).resourceClaimStatuses) ? (objectOr(p.status).resourceClaimStatuses as unknown[]) : [])
      if (isObject(s) && typeof s.resourceClaimName === "string") named.add(s.resourceClaimName);
  }
  if (named.size === 0) return { claims: [], slices: [] };
  const [claims, slices] = await Promise.all([
    get(`/apis/resource.k8s.io/v1/namespaces/${enc(ns)}/resourceclaims?limit=${LIST_LIMIT}`).then(itemsOf),
    get(`/apis/resource.k8s.io/v1/resourceslices?limit=${LIST_LIMIT}`).then(itemsOf),
  ]);
  return { claims: claims.filter((c) => named.has(String(objectOr(c.metadata).name))), slices };
}

/** The results of Quartermaster's PolicyReport about the objects of `uids`. */
function policyResults(report: unknown, uids: ReadonlySet<string>): PolicyResult[] {
  const results = objectOr(report).results;
  const out: PolicyResult[] = [];
  for (const r of Array.isArray(results) ? (results as unknown[]) : []) {
    if (!isObject(r) || r.result === "pass") continue;
    const res = (Array.isArray(r.resources) ? (r.resources as unknown[]) : []).filter(isObject).find((x) => uids.has(String(x.uid)));
    if (!res) continue;
    const props = objectOr(r.properties);
    out.push({
      rule: String(r.rule ?? ""),
      result: String(r.result ?? ""),
      message: String(r.message ?? ""),
      ...(typeof props.field === "string" ? { field: props.field } : {}),
      ...(typeof props.mode === "string" ? { mode: props.mode } : {}),
      object: `${String(res.kind)}/${String(res.name)}`,
      uid: String(res.uid),
    });
  }
  return out;
}

function ledgerOf(maps: KubeObject[], problems: string[]): Pick<ExplainEvidence, "ledger"> {
  const stored = new Map<string, StoredConfigMap>();
  for (const cm of maps) {
    const s = toStored(cm);
    if (isLedgerConfigMapName(s.name)) stored.set(s.name, s);
  }
  if (stored.size === 0) return {};
  const read = readStored(stored);
  problems.push(...read.problems.map((p) => `device ledger: ${p}`));
  return read.ledger ? { ledger: { generatedAt: read.ledger.generatedAt, nodes: read.ledger.nodes } } : {};
}

/**
 * @module
 * What `quartermaster doctor` reads from the cluster, as one plain snapshot for the pure checks in
 * src/doctor: Quartermaster's webhook configurations, the Services they name with their EndpointSlices,
 * the certificates each target presents (a TLS handshake with URL targets; the serving Secret mounted by
 * the Deployment behind a Service, which needs no port-forward), the protected namespaces' labels, the
 * reconciler's CronJob and Jobs, the DeviceClasses, and SubjectAccessReviews for what each ServiceAccount needs.
 * Everything is read-only. A part that cannot be read becomes a "not checked" finding; an apiserver
 * that cannot be reached at all throws ClusterUnreachableError.
 */
import { connect as tlsConnect, type DetailedPeerCertificate } from "node:tls";
import { errorMessage } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import { isKueueConfiguration } from "../doctor/kueue.js";
import { requiredAccess } from "../doctor/rbac.js";
import { slimNamespace } from "../kube/cluster.js";
import { KUEUE_GROUP, KUEUE_VERSION } from "../kueue/queues.js";
import { RECONCILER_NAME } from "../doctor/reconciler.js";
import { protectedNamespaceNames } from "../doctor/webhooks.js";
import {
  targetKey,
  type AccessCheck,
  type CertificateEvidence,
  type ConfinementState,
  type MutatingPolicyState,
  type CronJob,
  type DeviceClassesState,
  type RuntimesState,
  type KueueSnapshot,
  type DoctorSnapshot,
  type Job,
  type LedgerState,
  type ServiceState,
  type Unreadable,
  type WebhookConfiguration,
} from "../doctor/types.js";
import { CONFINEMENT_POLICY_NAME } from "../manifests/confinement.js";
import { TRAINER_RUNTIME_KINDS } from "../core/job-shapes.js";
import { MAP_NAME } from "../manifests/map.js";
import type { Policy } from "../policy/types.js";
import { kubeClient } from "../kube/client.js";

/** The Secret manifests/base mounts into the webhook pods; read when no Deployment names one. */
export const DEFAULT_SERVING_SECRET = "quartermaster-webhook-tls";

export class ClusterUnreachableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ClusterUnreachableError";
  }
}

export interface DoctorReadOptions {
  kubeconfig?: string;
  /** The deadline of each request in ms (--request-timeout); 0 for none. Default: ../kube/client.ts RESIDENT_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** Quartermaster's namespace. */
  namespace: string;
  policy: Pick<Policy, "jobKinds" | "clusterSpec" | "reconciler">;
  now: () => Date;
  /** Bound on each TLS handshake with a URL webhook (ms). */
  handshakeTimeoutMs?: number;
  /** Reads the device ledger. Without one the ledger is reported as not read. */
  readLedger?: () => Promise<LedgerState>;
}

function status(err: unknown): number | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" ? code : undefined;
}

/** "HTTP 403: <the apiserver's message>", or the error's message when there was no HTTP answer. */
export function describeError(err: unknown): string {
  const code = status(err);
  if (code === undefined) return errorMessage(err);
  let message: string | undefined;
  try {
    const body = (err as { body?: unknown }).body;
    message = (typeof body === "string" ? (JSON.parse(body) as { message?: string }) : (body as { message?: string } | undefined))?.message;
  } catch {
    /* not JSON */
  }
  return `HTTP ${code}${message ? `: ${message}` : ""}`;
}

/** client-node hands back typed objects (Dates, class instances); the checks read plain JSON. */
const raw = <T>(x: unknown): T => JSON.parse(JSON.stringify(x)) as T;

const unreadable = (err: unknown): Unreadable => ({ error: describeError(err) });

function isQuartermasters(config: { metadata?: { name?: string; labels?: Record<string, string> }; webhooks?: Array<{ name: string }> }): boolean {
  return (
    config.metadata?.name === "quartermaster" ||
    config.metadata?.labels?.["app.kubernetes.io/part-of"] === "quartermaster" ||
    (config.webhooks ?? []).some((w) => w.name.endsWith(".quartermaster.dev"))
  );
}

function toPem(der: Buffer): string {
  const b64 = der
    .toString("base64")
    .match(/.{1,64}/g)!
    .join("\n");
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** The chain a TLS server presents at `url` (leaf first), without trusting it: the checks judge it. */
export function handshake(url: string, timeoutMs: number): Promise<CertificateEvidence> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve({ source: "handshake", address: url, error: "not a URL" });
  }
  const host = target.hostname.replace(/^\[|\]$/g, "");
  const port = Number(target.port || 443);
  const address = `${target.hostname}:${port}`;
  const isIp = /^[\d.]+$/.test(host) || host.includes(":");
  return new Promise((resolve) => {
    const socket = tlsConnect({ host, port, servername: isIp ? undefined : host, rejectUnauthorized: false, timeout: timeoutMs });
    const done = (e: CertificateEvidence): void => {
      socket.destroy();
      resolve(e);
    };
    socket.once("secureConnect", () => {
      const chainPem: string[] = [];
      let cert: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
      const seen = new Set<string>();
      while (cert?.raw && !seen.has(cert.fingerprint256)) {
        seen.add(cert.fingerprint256);
        chainPem.push(toPem(cert.raw));
        cert = cert.issuerCertificate;
      }
      done(chainPem.length > 0 ? { source: "handshake", address, chainPem } : { source: "handshake", address, error: "the server presented no certificate" });
    });
    socket.once("timeout", () => done({ source: "handshake", address, error: `no TLS handshake within ${timeoutMs} ms` }));
    socket.once("error", (err) => done({ source: "handshake", address, error: errorMessage(err) }));
  });
}

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** The client-node APIs the doctor reads through. */
interface DoctorApis {
  admission: InstanceType<ClientModule["AdmissionregistrationV1Api"]>;
  core: InstanceType<ClientModule["CoreV1Api"]>;
  discovery: InstanceType<ClientModule["DiscoveryV1Api"]>;
  apps: InstanceType<ClientModule["AppsV1Api"]>;
  batch: InstanceType<ClientModule["BatchV1Api"]>;
  authz: InstanceType<ClientModule["AuthorizationV1Api"]>;
  custom: InstanceType<ClientModule["CustomObjectsApi"]>;
  apis: InstanceType<ClientModule["ApisApi"]>;
}

type Hook = NonNullable<WebhookConfiguration["webhooks"]>[number];

/** Reads everything the checks need. Throws ClusterUnreachableError when the apiserver does not answer. */
export async function readDoctorSnapshot(opts: DoctorReadOptions): Promise<DoctorSnapshot> {
  const { k8s, kc } = await kubeClient(opts.kubeconfig, opts);
  const api: DoctorApis = {
    admission: kc.makeApiClient(k8s.AdmissionregistrationV1Api),
    core: kc.makeApiClient(k8s.CoreV1Api),
    discovery: kc.makeApiClient(k8s.DiscoveryV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    authz: kc.makeApiClient(k8s.AuthorizationV1Api),
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    apis: kc.makeApiClient(k8s.ApisApi),
  };
  const { namespace } = opts;
  // Webhook configurations first: an apiserver that does not answer at all ends the run here.
  const { webhookConfigurations, kueueWebhooks } = await readWebhookConfigurations(api);
  const hooks = Array.isArray(webhookConfigurations) ? webhookConfigurations.flatMap((c) => c.webhooks ?? []) : [];
  const [sc, ns, rec, acc, led, conf, kq, map, dcs, rts] = await Promise.all([
    readServicesAndCertificates(api, hooks, opts.handshakeTimeoutMs ?? 3000),
    readProtectedNamespaces(api, namespace),
    readReconciler(api, namespace),
    readAccess(api, opts.policy, namespace),
    opts.readLedger
      ? opts.readLedger().catch((err: unknown): LedgerState => ({ unread: describeError(err) }))
      : Promise.resolve<LedgerState>({ unread: "this doctor has no ledger reader (run `quartermaster ledger` to see it)" }),
    readConfinement(api),
    readKueue(api, kueueWebhooks),
    readMutatingPolicy(api),
    readDeviceClasses(api),
    readRuntimes(api),
  ]);
  // Keys for every hook, so a target that was never read shows up as such.
  for (const h of hooks) {
    const key = targetKey(h);
    if (key && !sc.certificates[key]) sc.certificates[key] = [];
  }
  return {
    now: opts.now(),
    namespace,
    webhookConfigurations,
    services: sc.services,
    certificates: sc.certificates,
    protectedNamespaces: ns,
    reconciler: rec,
    ledger: led,
    access: acc,
    confinement: conf,
    kueue: kq,
    mutatingPolicy: map,
    deviceClasses: dcs,
    runtimes: rts,
  };
}

/** Quartermaster's webhook configurations, and Kueue's (for its checks); throws ClusterUnreachableError without an answer. */
async function readWebhookConfigurations(
  api: DoctorApis,
): Promise<{ webhookConfigurations: WebhookConfiguration[] | Unreadable; kueueWebhooks: WebhookConfiguration[] }> {
  try {
    const [mutating, validating] = await Promise.all([api.admission.listMutatingWebhookConfiguration(), api.admission.listValidatingWebhookConfiguration()]);
    const all = [
      ...raw<WebhookConfiguration[]>(mutating.items).map((c) => ({ ...c, kind: "MutatingWebhookConfiguration" as const })),
      ...raw<WebhookConfiguration[]>(validating.items).map((c) => ({ ...c, kind: "ValidatingWebhookConfiguration" as const })),
    ];
    return { webhookConfigurations: all.filter(isQuartermasters), kueueWebhooks: all.filter(isKueueConfiguration) };
  } catch (err) {
    if (status(err) === undefined) throw new ClusterUnreachableError(describeError(err), { cause: err });
    return { webhookConfigurations: unreadable(err), kueueWebhooks: [] };
  }
}

/** The webhooks' Services (with their EndpointSlices) and serving certificates, by Secret or by TLS handshake with a URL. */
async function readServicesAndCertificates(
  api: DoctorApis,
  hooks: readonly Hook[],
  timeoutMs: number,
): Promise<{ services: Record<string, ServiceState | Unreadable>; certificates: Record<string, CertificateEvidence[]> }> {
  const serviceRefs = new Map(
    hooks.flatMap((h) =>
      h.clientConfig.service ? [[`${h.clientConfig.service.namespace}/${h.clientConfig.service.name}`, h.clientConfig.service] as const] : [],
    ),
  );
  const urls = [...new Set(hooks.flatMap((h) => (h.clientConfig.url ? [h.clientConfig.url] : [])))];
  const services: Record<string, ServiceState | Unreadable> = {};
  const certificates: Record<string, CertificateEvidence[]> = {};
  await Promise.all([
    ...[...serviceRefs].map(async ([key, ref]) => {
      services[key] = await readService(api, ref.namespace, ref.name);
      certificates[`service:${key}`] = await servingSecrets(api, ref.namespace, services[key]);
    }),
    ...urls.map(async (url) => {
      certificates[`url:${url}`] = [await handshake(url, timeoutMs)];
    }),
  ]);
  return { services, certificates };
}

async function readService(api: DoctorApis, ns: string, name: string): Promise<ServiceState | Unreadable> {
  try {
    const [service, slices] = await Promise.all([
      api.core.readNamespacedService({ namespace: ns, name }).then(
        (s) => raw<ServiceState["service"]>(s),
        (err: unknown) => {
          if (status(err) === 404) return undefined;
          throw err;
        },
      ),
      api.discovery.listNamespacedEndpointSlice({ namespace: ns, labelSelector: `kubernetes.io/service-name=${name}` }),
    ]);
    return { service, endpointSlices: raw<ServiceState["endpointSlices"]>(slices.items) };
  } catch (err) {
    return unreadable(err);
  }
}

/** Names of the Secrets mounted by the Deployments whose pods `selector` selects; an evidence entry when they cannot be listed. */
async function mountedSecretNames(api: DoctorApis, ns: string, selector: Record<string, string>): Promise<Set<string> | CertificateEvidence> {
  const names = new Set<string>();
  try {
    const deployments = await api.apps.listNamespacedDeployment({ namespace: ns });
    for (const d of deployments.items) {
      const labels = d.spec?.template.metadata?.labels ?? {};
      if (!Object.entries(selector).every(([k, v]) => labels[k] === v)) continue;
      for (const v of d.spec?.template.spec?.volumes ?? []) {
        if (v.secret?.secretName) names.add(v.secret.secretName);
        for (const p of v.projected?.sources ?? []) if (p.secret?.name) names.add(p.secret.name);
      }
    }
    return names;
  } catch (err) {
    return { source: "secret", secret: `${ns}/(Deployments)`, error: `cannot list Deployments: ${describeError(err)}` };
  }
}

/** The serving certificate in Secret `ns/name`, undefined for a Secret without a tls.crt (mounted for another reason). */
async function servingSecret(api: DoctorApis, ns: string, name: string): Promise<CertificateEvidence | undefined> {
  const secret = `${ns}/${name}`;
  try {
    const s = await api.core.readNamespacedSecret({ namespace: ns, name });
    const crt = s.data?.["tls.crt"];
    if (!crt) return undefined;
    const key = s.data?.["tls.key"];
    return {
      source: "secret",
      secret,
      certPem: Buffer.from(crt, "base64").toString("utf8"),
      ...(key ? { keyPem: Buffer.from(key, "base64").toString("utf8") } : {}),
    };
  } catch (err) {
    return { source: "secret", secret, error: status(err) === 404 ? "the Secret does not exist" : describeError(err) };
  }
}

/** The serving Secrets of the Deployments whose pods the Service selects (else the default name). */
async function servingSecrets(api: DoctorApis, ns: string, state: ServiceState | Unreadable): Promise<CertificateEvidence[]> {
  const selector = "service" in state ? state.service?.spec?.selector : undefined;
  const mounted = selector && Object.keys(selector).length > 0 ? await mountedSecretNames(api, ns, selector) : new Set<string>();
  if (!(mounted instanceof Set)) return [mounted];
  const names = mounted.size > 0 ? mounted : new Set([DEFAULT_SERVING_SECRET]);
  const out: CertificateEvidence[] = [];
  for (const name of names) {
    const found = await servingSecret(api, ns, name);
    if (found) out.push(found);
  }
  if (out.length === 0) out.push({ source: "secret", secret: `${ns}/${[...names].join(",")}`, error: "no mounted Secret holds a tls.crt" });
  return out;
}

async function readProtectedNamespaces(api: DoctorApis, namespace: string): Promise<Record<string, Record<string, string>>> {
  const out: Record<string, Record<string, string>> = {};
  await Promise.all(
    protectedNamespaceNames(namespace).map(async (name) => {
      try {
        out[name] = (await api.core.readNamespace({ name })).metadata?.labels ?? {};
      } catch {
        // Absent (or unreadable): judge the selector against the label every namespace carries.
        out[name] = { "kubernetes.io/metadata.name": name };
      }
    }),
  );
  return out;
}

/** `p`'s answer, or undefined on 404. */
const absentOn404 = <T>(p: Promise<T>): Promise<T | undefined> =>
  p.catch((err: unknown) => {
    if (status(err) === 404) return undefined;
    throw err;
  });

async function readReconciler(api: DoctorApis, namespace: string): Promise<DoctorSnapshot["reconciler"]> {
  try {
    const cronJob = await absentOn404(api.batch.readNamespacedCronJob({ namespace, name: RECONCILER_NAME }).then((c) => raw<CronJob>(c)));
    const jobs = cronJob ? raw<Job[]>((await api.batch.listNamespacedJob({ namespace })).items) : [];
    if (cronJob) return { cronJob, jobs };
    // No CronJob: the resident-reconciler overlay runs passes in a Deployment of the same name.
    const resident = await absentOn404(
      api.apps
        .readNamespacedDeployment({ namespace, name: RECONCILER_NAME })
        .then((d) => ({ replicas: d.spec?.replicas ?? 1, readyReplicas: d.status?.readyReplicas ?? 0 })),
    );
    return { cronJob, jobs, ...(resident ? { resident } : {}) };
  } catch (err) {
    return unreadable(err);
  }
}

async function readAccess(api: DoctorApis, policy: DoctorReadOptions["policy"], namespace: string): Promise<AccessCheck[] | Unreadable> {
  try {
    return await Promise.all(
      requiredAccess(policy, namespace).map(async (req) => {
        const [saNamespace, saName] = req.serviceAccount.split("/") as [string, string];
        const review = await api.authz.createSubjectAccessReview({
          body: {
            apiVersion: "authorization.k8s.io/v1",
            kind: "SubjectAccessReview",
            spec: {
              user: `system:serviceaccount:${saNamespace}:${saName}`,
              groups: ["system:serviceaccounts", `system:serviceaccounts:${saNamespace}`, "system:authenticated"],
              // `tfjobs/finalizers` is resource tfjobs, subresource finalizers.
              resourceAttributes: {
                verb: req.verb,
                group: req.group,
                resource: req.resource.split("/")[0]!,
                ...(req.resource.includes("/") ? { subresource: req.resource.split("/")[1]! } : {}),
                namespace: req.namespace,
                ...(req.name ? { name: req.name } : {}),
              },
            },
          },
        });
        return { ...req, allowed: review.status?.allowed === true };
      }),
    );
  } catch (err) {
    return { error: `cannot create subjectaccessreviews: ${describeError(err)}` };
  }
}

/**
 * The reconciler's confinement (src/doctor/confinement.ts): a 404 of either object is "not installed"; a 404 of
 * the API itself (Kubernetes < 1.30) reads as the policy not being there, which is what it means.
 */
async function readConfinement(api: DoctorApis): Promise<ConfinementState | Unreadable> {
  try {
    const [policy, binding] = await Promise.all([
      absentOn404(api.admission.readValidatingAdmissionPolicy({ name: CONFINEMENT_POLICY_NAME })),
      absentOn404(api.admission.readValidatingAdmissionPolicyBinding({ name: CONFINEMENT_POLICY_NAME })),
    ]);
    return { ...(policy ? { policy: raw<KubeObject>(policy) } : {}), ...(binding ? { binding: raw<KubeObject>(binding) } : {}) };
  } catch (err) {
    return unreadable(err);
  }
}

/**
 * Kueue (src/doctor/kueue.ts): its flavors and queues, the nodes and namespaces they are judged against. Kueue's
 * group absent from discovery (or a 404 of its API) means it is not installed: nothing to check.
 */
async function readKueue(api: DoctorApis, kueueWebhooks: WebhookConfiguration[]): Promise<KueueSnapshot> {
  const { core, custom } = api;
  const list = async (plural: string): Promise<KubeObject[]> =>
    raw<{ items?: KubeObject[] }>(await custom.listClusterCustomObject({ group: KUEUE_GROUP, version: KUEUE_VERSION, plural })).items ?? [];
  try {
    // Discovery first (every authenticated user may read it): a user without Kueue's list rights on a cluster
    // without Kueue gets 403 from the list itself, and that must not read as "not checked".
    const groups = (await api.apis.getAPIVersions()).groups ?? [];
    if (!groups.some((g) => g.name === KUEUE_GROUP)) return "absent";
    const resourceFlavors = await list("resourceflavors");
    const [clusterQueues, localQueues, nodes, namespaces] = await Promise.all([
      list("clusterqueues"),
      list("localqueues"),
      core.listNode().then((l) => raw<KubeObject[]>(l.items)),
      core.listNamespace().then((l) => l.items.map(slimNamespace)),
    ]);
    return { resourceFlavors, clusterQueues, localQueues, nodes, namespaces, webhookConfigurations: kueueWebhooks };
  } catch (err) {
    if (status(err) === 404) return "absent";
    return unreadable(err);
  }
}

/**
 * The exported MutatingAdmissionPolicy (src/doctor/admission-policy.ts), read by path: this client has no typed
 * API for admissionregistration.k8s.io/v1 MutatingAdmissionPolicies. A 404 is "not installed".
 */
async function readMutatingPolicy(api: DoctorApis): Promise<MutatingPolicyState | Unreadable> {
  const read = (plural: string): Promise<KubeObject | undefined> =>
    absentOn404(api.custom.getClusterCustomObject({ group: "admissionregistration.k8s.io", version: "v1", plural, name: MAP_NAME }) as Promise<KubeObject>);
  try {
    const [policy, binding] = await Promise.all([read("mutatingadmissionpolicies"), read("mutatingadmissionpolicybindings")]);
    return { ...(policy ? { policy } : {}), ...(binding ? { binding } : {}) };
  } catch (err) {
    return unreadable(err);
  }
}

/**
 * The cluster's DeviceClasses (src/doctor/device-classes.ts), against the policy's gpu section. A 404 (no
 * resource.k8s.io/v1: before Kubernetes 1.34, or DRA off) is "absent": nothing to check.
 */
async function readDeviceClasses(api: DoctorApis): Promise<DeviceClassesState> {
  try {
    const list: unknown = await api.custom.listClusterCustomObject({ group: "resource.k8s.io", version: "v1", plural: "deviceclasses" });
    return raw<{ items?: KubeObject[] }>(list).items ?? [];
  } catch (err) {
    if (status(err) === 404) return "absent";
    return unreadable(err);
  }
}

/** The Trainer's runtimes (src/doctor/runtimes.ts), against the GPU caps. A 404 (no Trainer CRDs) is "absent". */
async function readRuntimes(api: DoctorApis): Promise<RuntimesState> {
  try {
    const lists = await Promise.all(
      TRAINER_RUNTIME_KINDS.map(async (k) => {
        const list: unknown = await api.custom.listClusterCustomObject({ group: k.group, version: k.version, plural: k.plural });
        return (raw<{ items?: KubeObject[] }>(list).items ?? []).map((o) => ({ ...o, kind: k.kind }));
      }),
    );
    return lists.flat();
  } catch (err) {
    if (status(err) === 404) return "absent";
    return unreadable(err);
  }
}

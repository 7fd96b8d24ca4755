/**
 * @module
 * What `quartermaster doctor` reads from the cluster (a plain snapshot, API objects as JSON) and what it
 * reports (findings). The checks in this folder are pure functions of a snapshot and the time; only
 * `src/run/doctor.ts` talks to the cluster.
 */

import type { KubeObject } from "../core/kube.js";
import type { LabelSelector } from "../core/selector.js";
import type { NamespaceInfo } from "../core/scope.js";
export type Severity = "ok" | "info" | "warning" | "critical";

/** Ordered by how loud they are; the exit code is the loudest finding's. */
export const SEVERITIES: readonly Severity[] = ["ok", "info", "warning", "critical"];

/** The loudest of `severities` ("ok" for none). */
export function worst(severities: Iterable<Severity>): Severity {
  let out: Severity = "ok";
  for (const s of severities) if (SEVERITIES.indexOf(s) > SEVERITIES.indexOf(out)) out = s;
  return out;
}

export type CheckName =
  | "cluster"
  | "webhook-configuration"
  | "webhook-render"
  | "endpoints"
  | "ca-bundle"
  | "certificate-expiry"
  | "namespace-selector"
  | "side-effects"
  | "timeout"
  | "reconciler"
  | "ledger"
  | "rbac"
  | "confinement"
  | "kueue-quota"
  | "kueue-webhooks"
  | "kueue-flavors"
  | "mutating-policy"
  | "device-classes"
  | "trainer-runtimes";

export interface DoctorFinding {
  check: CheckName;
  severity: Severity;
  /** What the finding is about: a webhook name, a certificate, a ServiceAccount. */
  subject: string;
  message: string;
  /** One line telling the operator what to do; empty when there is nothing to do. */
  fix: string;
}

/** A maker of `check`'s findings: `finding(severity, subject, message, fix)`. */
export function findingsOf(check: CheckName): (severity: Severity, subject: string, message: string, fix?: string) => DoctorFinding {
  return (severity, subject, message, fix = "") => ({ check, severity, subject, message, fix });
}

/** A part of the cluster that could not be read, with the reason (HTTP status and message). */
export interface Unreadable {
  error: string;
}

export function isUnreadable(x: unknown): x is Unreadable {
  return typeof x === "object" && x !== null && "error" in x && typeof (x as Unreadable).error === "string";
}

/** An entry of a webhook configuration (admissionregistration.k8s.io/v1 `Webhook`), the fields the doctor reads. */
export interface WebhookEntry {
  name: string;
  clientConfig: {
    url?: string;
    service?: { namespace: string; name: string; path?: string; port?: number };
    /** Base64 of a PEM bundle. */
    caBundle?: string;
  };
  failurePolicy?: string;
  sideEffects?: string;
  timeoutSeconds?: number;
  admissionReviewVersions?: string[];
  namespaceSelector?: LabelSelector;
  reinvocationPolicy?: string;
  matchPolicy?: string;
  rules?: Array<{ apiGroups?: string[]; apiVersions?: string[]; operations?: string[]; resources?: string[]; scope?: string }>;
  matchConditions?: Array<{ name: string; expression: string }>;
}

export interface WebhookConfiguration {
  kind: "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration";
  metadata: { name: string };
  webhooks?: WebhookEntry[];
}

export interface ServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
}

export interface Service {
  metadata: { name: string; namespace?: string };
  spec?: { type?: string; ports?: ServicePort[]; selector?: Record<string, string> };
}

export interface EndpointSlice {
  metadata: { name: string };
  endpoints?: Array<{ addresses: string[]; conditions?: { ready?: boolean | null; terminating?: boolean | null } }> | null;
  ports?: Array<{ name?: string | null; port?: number | null }> | null;
}

/** The Service behind a webhook and its EndpointSlices; `service` undefined when it does not exist. */
export interface ServiceState {
  service?: Service;
  endpointSlices: EndpointSlice[];
}

/**
 * A certificate a webhook server presents (or will present), with where it came from:
 * a TLS handshake with the server, or the serving Secret its pods mount.
 */
export type CertificateEvidence =
  | { source: "handshake"; address: string; chainPem: string[] }
  | { source: "secret"; secret: string; certPem: string; keyPem?: string }
  | { source: "handshake" | "secret"; address?: string; secret?: string; error: string };

export interface CronJob {
  metadata: { name: string; namespace?: string; uid?: string; creationTimestamp?: string };
  spec: {
    schedule: string;
    timeZone?: string;
    suspend?: boolean;
    startingDeadlineSeconds?: number;
    jobTemplate?: { spec?: { activeDeadlineSeconds?: number } };
  };
  status?: { lastScheduleTime?: string; lastSuccessfulTime?: string };
}

export interface Job {
  metadata: { name: string; creationTimestamp?: string; ownerReferences?: Array<{ uid: string; kind?: string }> };
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>; completionTime?: string };
}

/**
 * The device ledger as the doctor needs it: when it was written, how many shards it has and which of
 * them fail their checksum. "absent": there is none in the cluster; `{ unread }`: it was not read, and why.
 */
export type LedgerState = { generatedAt?: Date; shards: number; corrupt: string[] } | "absent" | { unread: string };

/** One permission a ServiceAccount needs, and whether RBAC grants it. */
export interface AccessCheck {
  serviceAccount: string;
  verb: string;
  group: string;
  resource: string;
  /** Empty: cluster-wide. */
  namespace: string;
  /** A single object (RBAC resourceNames), when the code reads only that one. */
  name?: string;
  /** How bad it is when the permission is missing (or, for a `mustNot` check, when it is granted). */
  ifDenied: Severity;
  /** A permission the ServiceAccount must NOT have (least privilege the code relies on), checked the same way. */
  mustNot?: true;
  /** What breaks without it, for the message. */
  why: string;
  allowed: boolean;
}

export interface DoctorSnapshot {
  now: Date;
  /** Quartermaster's namespace. */
  namespace: string;
  /** Quartermaster's webhook configurations (by name, label or webhook names under quartermaster.dev). */
  webhookConfigurations: WebhookConfiguration[] | Unreadable;
  /** By `namespace/name` of every Service a webhook's clientConfig names. */
  services: Record<string, ServiceState | Unreadable>;
  /**
   * The certificates each webhook target presents, by target key (`service:<ns>/<name>` or `url:<url>`):
   * handshakes with URL targets, and the serving Secrets mounted by the pods behind a Service.
   */
  certificates: Record<string, CertificateEvidence[]>;
  /** Labels of the namespaces no webhook may see (kube-system, kube-public, kube-node-lease, our own). */
  protectedNamespaces: Record<string, Record<string, string>>;
  /** The reconciler's CronJob and its Jobs; without a CronJob, the resident Deployment if there is one. */
  reconciler: { cronJob?: CronJob; jobs: Job[]; resident?: { replicas: number; readyReplicas: number } } | Unreadable;
  ledger: LedgerState;
  access: AccessCheck[] | Unreadable;
  /** The reconciler's ValidatingAdmissionPolicy and binding (src/doctor/confinement.ts); absent: not read. */
  confinement?: ConfinementState | Unreadable;
  /** Kueue's objects and webhooks (src/doctor/kueue.ts); absent: not read. */
  kueue?: KueueSnapshot;
  /** The exported MutatingAdmissionPolicy and binding (src/doctor/admission-policy.ts); absent: not read. */
  mutatingPolicy?: MutatingPolicyState | Unreadable;
  /** The cluster's DeviceClasses (src/doctor/device-classes.ts); absent: not read. */
  deviceClasses?: DeviceClassesState;
  /** The cluster's Trainer runtimes (src/doctor/runtimes.ts); absent: not read. */
  runtimes?: RuntimesState;
}

/** The cluster's DeviceClasses (`resource.k8s.io/v1`) as read; "absent" when the API is not served (404). */
export type DeviceClassesState = KubeObject[] | "absent" | Unreadable;

/** The cluster's ClusterTrainingRuntimes and TrainingRuntimes as read (absent: no Trainer CRDs). */
export type RuntimesState = KubeObject[] | "absent" | Unreadable;

/** The exported MutatingAdmissionPolicy and its binding as read (absent: not installed). */
export interface MutatingPolicyState {
  policy?: KubeObject;
  binding?: KubeObject;
}

/** What the doctor reads of Kueue: its objects, the nodes and namespaces, and its webhook configurations. */
export interface KueueState {
  resourceFlavors: KubeObject[];
  clusterQueues: KubeObject[];
  localQueues: KubeObject[];
  /** Every node (labels and status.allocatable are read). */
  nodes: KubeObject[];
  /** Every namespace: a LocalQueue's namespace is judged only when Quartermaster's webhooks serve it. */
  namespaces: NamespaceInfo[];
  /** Kueue's Mutating- and ValidatingWebhookConfigurations ({@link isKueueConfiguration}). */
  webhookConfigurations: WebhookConfiguration[];
}

/** "absent": Kueue's API is not served (404), nothing to check. */
export type KueueSnapshot = KueueState | "absent" | Unreadable;

/** The reconciler's confinement policy and binding as read (absent: not installed). */
export interface ConfinementState {
  policy?: KubeObject;
  binding?: KubeObject;
}

/** The key of a webhook's target in `services` / `certificates`. */
export function targetKey(hook: WebhookEntry): string | undefined {
  const { service, url } = hook.clientConfig;
  if (service) return `service:${service.namespace}/${service.name}`;
  if (url) return `url:${url}`;
  return undefined;
}

/**
 * @module
 * The audit's reads and the PolicyReports' writes, through @kubernetes/client-node (imported on first use):
 * full pods of each opted-in namespace (the reconciler's own pod list is trimmed to what its planner reads),
 * training jobs of every configured kind, and `wgpolicyk8s.io/v1alpha2` PolicyReports named `quartermaster`.
 * What to write is decided in src/reconcile/policy-reports.ts; what breaks which rule in src/reconcile/audit.ts.
 */
import type { Logger } from "pino";
import type { KubeObject } from "../core/kube.js";
import { POLICY_REPORT_NAME } from "../core/keys.js";
import { errorMessage } from "../core/errors.js";
import type { Policy } from "../policy/types.js";
import {
  fieldManagers,
  planPolicyReports,
  REPORT_FIELD_MANAGER,
  type ExistingReport,
  type PolicyReport,
  type ReportPlan,
} from "../reconcile/policy-reports.js";
import { namespaceScope, scopeIndex, type NamespaceInfo } from "../core/scope.js";
import { auditObjects, type AuditEntry, type AuditTarget } from "../reconcile/audit.js";
import { kubeClient, statusOf, type KubeClientOptions } from "../kube/client.js";
import { PAGE_SIZE, slimNamespace } from "../kube/cluster.js";

const GROUP = "wgpolicyk8s.io";
const VERSION = "v1alpha2";
const PLURAL = "policyreports";

export interface PolicyReportClient {
  listNamespaces(): Promise<NamespaceInfo[]>;
  /** Every pod of the namespace, whole. */
  listPods(namespace: string): Promise<KubeObject[]>;
  /** Every job of a kind in the cluster, whole; undefined when the kind's CRD is not installed. */
  listJobs(kind: Policy["jobKinds"][number]): Promise<KubeObject[] | undefined>;
  /** The PolicyReports named `quartermaster` in all namespaces (with their field managers); undefined when the PolicyReport CRD is not installed. */
  listReports(): Promise<ExistingReport[] | undefined>;
  /** Creates (no resourceVersion) or replaces a report, as field manager `quartermaster-reconciler`; "conflict" on 409. */
  putReport(report: PolicyReport, resourceVersion?: string): Promise<"written" | "conflict">;
  /** Deletes with a resourceVersion precondition; "gone" on 404, "changed" on 409. */
  deleteReport(namespace: string, name: string, resourceVersion?: string): Promise<"deleted" | "gone" | "changed">;
}

type Page = { items?: unknown[]; metadata?: { _continue?: string; continue?: string } };

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** The two client-node APIs the PolicyReport client calls. */
interface ReportApis {
  core: InstanceType<ClientModule["CoreV1Api"]>;
  custom: InstanceType<ClientModule["CustomObjectsApi"]>;
}

// client-node returns typed objects with Date fields; the audit reads raw JSON, so round-trip to it.
const raw = (x: unknown): KubeObject => JSON.parse(JSON.stringify(x)) as KubeObject;

/** Every page of a LIST, as plain JSON. */
async function paged(fetchPage: (cont: string | undefined) => Promise<Page>): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  let cont: string | undefined;
  do {
    const page = await fetchPage(cont);
    for (const item of page.items ?? []) out.push(raw(item));
    cont = page.metadata?._continue ?? page.metadata?.continue;
  } while (cont);
  return out;
}

/** `fn`'s answer, or undefined when the API is not served (404: its CRD is not installed). */
async function unlessNotServed<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (statusOf(err) === 404) return undefined;
    throw err;
  }
}

export async function connectPolicyReports(kubeconfig?: string, opts: KubeClientOptions = {}): Promise<PolicyReportClient> {
  const { k8s, kc } = await kubeClient(kubeconfig, opts);
  const apis: ReportApis = { core: kc.makeApiClient(k8s.CoreV1Api), custom: kc.makeApiClient(k8s.CustomObjectsApi) };
  return {
    async listNamespaces() {
      return (await paged(async (cont) => (await apis.core.listNamespace({ limit: PAGE_SIZE, _continue: cont })) as Page)).map(slimNamespace);
    },
    listPods(namespace) {
      return paged(async (cont) => await apis.core.listNamespacedPod({ namespace, limit: PAGE_SIZE, _continue: cont }));
    },
    listJobs: (kind) => listJobs(apis, kind),
    listReports: () => listReports(apis),
    putReport: (report, resourceVersion) => putReport(apis, report, resourceVersion),
    deleteReport: (namespace, name, resourceVersion) => deleteReport(apis, namespace, name, resourceVersion),
  };
}

function listJobs({ custom }: ReportApis, kind: Policy["jobKinds"][number]): Promise<KubeObject[] | undefined> {
  return unlessNotServed(() =>
    paged(
      async (cont) =>
        (await custom.listClusterCustomObject({
          group: kind.group,
          version: kind.version,
          plural: kind.plural,
          limit: PAGE_SIZE,
          _continue: cont,
        })) as Page,
    ),
  );
}

async function listReports({ custom }: ReportApis): Promise<ExistingReport[] | undefined> {
  const items = await unlessNotServed(() =>
    paged(
      async (cont) =>
        (await custom.listClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          fieldSelector: `metadata.name=${POLICY_REPORT_NAME}`,
          limit: PAGE_SIZE,
          _continue: cont,
        })) as Page,
    ),
  );
  return items?.map((r) => {
    const m = (r.metadata ?? {}) as {
      name?: string;
      namespace?: string;
      labels?: Record<string, string>;
      managedFields?: unknown;
      resourceVersion?: string;
    };
    return {
      namespace: String(m.namespace),
      name: String(m.name),
      labels: m.labels ?? {},
      managers: fieldManagers(m.managedFields),
      ...(m.resourceVersion ? { resourceVersion: m.resourceVersion } : {}),
    };
  });
}

async function putReport({ custom }: ReportApis, report: PolicyReport, resourceVersion?: string): Promise<"written" | "conflict"> {
  const { namespace, name } = report.metadata;
  try {
    // The field manager is how a report whose label a tenant removed is still known as Quartermaster's.
    const fieldManager = REPORT_FIELD_MANAGER;
    if (resourceVersion === undefined)
      await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, body: report, fieldManager });
    else
      await custom.replaceNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace,
        name,
        body: { ...report, metadata: { ...report.metadata, resourceVersion } },
        fieldManager,
      });
    return "written";
  } catch (err) {
    if (statusOf(err) === 409) return "conflict";
    throw err;
  }
}

async function deleteReport({ custom }: ReportApis, namespace: string, name: string, resourceVersion?: string): Promise<"deleted" | "gone" | "changed"> {
  try {
    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      namespace,
      name,
      body: resourceVersion ? { preconditions: { resourceVersion } } : {},
    });
    return "deleted";
  } catch (err) {
    if (statusOf(err) === 404) return "gone";
    if (statusOf(err) === 409) return "changed";
    throw err;
  }
}

export interface AuditOptions {
  client: Pick<PolicyReportClient, "listNamespaces" | "listPods" | "listJobs">;
  policy: Policy;
  /** Quartermaster's namespace (never in scope). */
  ownNamespace: string;
  log: Logger;
  /** Only this namespace (it must be in scope too). */
  only?: string;
}

/** The audit of every live pod and job in the opted-in namespaces (or in `only`), and the namespaces it covered. */
export async function auditCluster(opts: AuditOptions): Promise<{ entries: AuditEntry[]; namespaces: string[]; outOfScope?: string }> {
  const { client, policy, log } = opts;
  const listed = await client.listNamespaces();
  const verdict = scopeIndex(namespaceScope(opts.ownNamespace), listed);
  const all = listed.map((n) => n.name);
  if (opts.only !== undefined) {
    const v = verdict(opts.only);
    if (!v.inScope) return { entries: [], namespaces: [], outOfScope: v.why };
  }
  const namespaces = (opts.only !== undefined ? [opts.only] : all).filter((n) => verdict(n).inScope).sort();
  const targets: AuditTarget[] = [];
  for (const ns of namespaces) for (const object of await client.listPods(ns)) targets.push({ object });
  const wanted = new Set(namespaces);
  for (const kind of policy.jobKinds) {
    const jobs = await client.listJobs(kind);
    if (jobs === undefined) {
      log.debug({ kind: `${kind.group}/${kind.kind}` }, "audit: job kind not installed (no CRD); skipped");
      continue;
    }
    for (const object of jobs)
      if (wanted.has(String((object.metadata as { namespace?: string } | undefined)?.namespace))) targets.push({ object, jobKind: kind });
  }
  return { entries: auditObjects(policy, targets, (ns) => wanted.has(ns)), namespaces };
}

/** What a pass listed (src/run/pass.ts): its namespaces, its pods of the namespaces in scope whole, its jobs. */
export interface AuditListing {
  namespaces: readonly NamespaceInfo[];
  pods: readonly KubeObject[];
  jobs: ReadonlyArray<{ kind: Policy["jobKinds"][number]; job: KubeObject }>;
}

/** The audit of what a pass listed, over the same scope (Quartermaster's namespace never in it): no read of its own. */
export function auditListed(policy: Policy, ownNamespace: string, listed: AuditListing): AuditEntry[] {
  const verdict = scopeIndex(namespaceScope(ownNamespace), listed.namespaces);
  const targets: AuditTarget[] = [...listed.pods.map((object) => ({ object })), ...listed.jobs.map(({ kind, job }) => ({ object: job, jobKind: kind }))];
  return auditObjects(policy, targets, (ns) => verdict(ns).inScope);
}

export interface ReportSyncResult {
  /** False when the PolicyReport CRD is not installed (nothing read or written). */
  installed: boolean;
  plan?: ReportPlan;
  written: string[];
  deleted: string[];
  failed: Array<{ report: string; error: string }>;
}

/**
 * One pass's PolicyReports: the audit, then each report rewritten from it and Quartermaster's reports of
 * namespaces with nothing left deleted. Without the CRD: one log line, nothing else. A failure is filed in
 * the result and logged; it never stops the other reports. The audit here lists what it reads (`auditCluster`);
 * a reconcile pass audits its own snapshot instead (`writePolicyReports`, src/run/pass.ts).
 */
export async function syncPolicyReports(opts: AuditOptions & { client: PolicyReportClient; now: () => Date }): Promise<ReportSyncResult> {
  return writePolicyReports({ ...opts, audit: async () => (await auditCluster(opts)).entries });
}

export interface ReportWriteOptions {
  client: Pick<PolicyReportClient, "listReports" | "putReport" | "deleteReport">;
  log: Logger;
  now: () => Date;
  /** The audit the reports say (asked only when the PolicyReport CRD is installed). */
  audit: () => Promise<AuditEntry[]>;
}

/** The PolicyReports of `opts.audit`'s entries: `syncPolicyReports` over an audit made elsewhere. */
export async function writePolicyReports(opts: ReportWriteOptions): Promise<ReportSyncResult> {
  const { client, log } = opts;
  const result: ReportSyncResult = { installed: false, written: [], deleted: [], failed: [] };
  const existing = await client.listReports();
  if (existing === undefined) {
    log.info({ crd: `${PLURAL}.${GROUP}` }, "policy reports: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed; skipped");
    return result;
  }
  result.installed = true;
  const entries = await opts.audit();
  const plan = planPolicyReports(entries, existing, opts.now());
  result.plan = plan;
  for (const s of plan.skipped) log.warn({ namespace: s.namespace }, `policy reports: ${s.why}`);
  await putReports(client, plan, result);
  await deleteReports(client, plan, result);
  for (const f of result.failed) log.error({ report: f.report, error: f.error }, "policy reports: write failed");
  log.info(
    {
      written: result.written.length,
      deleted: result.deleted.length,
      failed: result.failed.length,
      objects: entries.length,
      violations: entries.reduce((n, e) => n + e.violations.length, 0),
    },
    "policy reports",
  );
  return result;
}

async function putReports(client: Pick<PolicyReportClient, "putReport">, plan: ReportPlan, result: ReportSyncResult): Promise<void> {
  for (const p of plan.put) {
    const id = `${p.report.metadata.namespace}/${p.report.metadata.name}`;
    try {
      const r = await client.putReport(p.report, p.resourceVersion);
      if (r === "conflict") result.failed.push({ report: id, error: "changed since it was read (409); rewritten at the next pass" });
      else result.written.push(id);
    } catch (err) {
      result.failed.push({ report: id, error: errorMessage(err) });
    }
  }
}

async function deleteReports(client: Pick<PolicyReportClient, "deleteReport">, plan: ReportPlan, result: ReportSyncResult): Promise<void> {
  for (const d of plan.delete) {
    const id = `${d.namespace}/${d.name}`;
    try {
      const r = await client.deleteReport(d.namespace, d.name, d.resourceVersion);
      if (r === "changed") result.failed.push({ report: id, error: "changed since it was read (409); deleted at the next pass" });
      else result.deleted.push(id);
    } catch (err) {
      result.failed.push({ report: id, error: errorMessage(err) });
    }
  }
}

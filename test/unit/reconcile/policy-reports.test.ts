/**
 * The audit of what already runs and the PolicyReports built from it (issue 19): which objects are audited,
 * each violation's mode, the report's results and summary, the plan against the reports there are (rewrite,
 * create, delete only Quartermaster's, leave others' alone), and the pass's sync with a fake cluster (the
 * CRD missing: one log line, nothing written; a fixed object cleared at the next pass).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { syncPolicyReports, type PolicyReportClient } from "../../../src/run/policy-reports.js";
import { checkPolicy } from "../../../src/policy/load.js";
import {
  buildPolicyReport,
  fieldManagers,
  MAX_RESULTS,
  planPolicyReports,
  reportOwned,
  type ExistingReport,
  type PolicyReport,
} from "../../../src/reconcile/policy-reports.js";
import type { NamespaceInfo } from "../../../src/core/scope.js";
import { auditObjects, auditTable, type AuditEntry } from "../../../src/reconcile/audit.js";
import { capturingLogger } from "../../fixtures/https.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const policy = checkPolicy(
  {
    limits: { container: { gpus: { "nvidia.com/gpu": 4 } }, job: { replicas: { Worker: 4 } } },
    enforcement: {
      namespaces: [
        { pattern: "team-w", mode: "warn" },
        { pattern: "team-a", rules: { "job-replicas": "audit" } },
      ],
    },
  },
  "t",
);
const NOW = new Date("2026-11-26T12:00:00.500Z");

const pod = (namespace: string, name: string, gpus: number, o: { phase?: string; deleting?: boolean } = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace, uid: `uid-${name}`, ...(o.deleting ? { deletionTimestamp: "2026-11-26T11:00:00Z" } : {}) },
  spec: { containers: [{ name: "c", image: "i", resources: { limits: { "nvidia.com/gpu": String(gpus) } } }] },
  status: { phase: o.phase ?? "Running" },
});
const pytorch = (namespace: string, name: string, workers: number, finished = false): KubeObject => {
  const j = structuredClone(job("PyTorchJob", name, namespace, { Master: 1, Worker: workers })) as any;
  j.metadata.uid = `uid-${name}`;
  if (finished) j.status = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: "2026-11-26T11:00:00Z" };
  return j;
};
const PT = kindOf("PyTorchJob");

describe("auditObjects", () => {
  const inScope = (ns: string) => ns !== "other";
  const cases: Array<{ name: string; targets: Array<{ object: KubeObject; jobKind?: typeof PT }>; want: string[] }> = [
    { name: "a compliant pod: audited, no violations", targets: [{ object: pod("team-x", "ok", 4) }], want: ["team-x Pod ok:"] },
    {
      name: "a pod over the cap in deny mode",
      targets: [{ object: pod("team-x", "big", 8) }],
      want: ["team-x Pod big: container-limits/deny@spec.containers[0].resources.limits[nvidia.com/gpu]"],
    },
    {
      name: "the same pod in a warn namespace",
      targets: [{ object: pod("team-w", "big", 8) }],
      want: ["team-w Pod big: container-limits/warn@spec.containers[0].resources.limits[nvidia.com/gpu]"],
    },
    {
      name: "a job over the replica cap, its rule in audit there",
      targets: [{ object: pytorch("team-a", "wide", 6), jobKind: PT }],
      want: ["team-a PyTorchJob wide: job-replicas/audit@spec.pytorchReplicaSpecs.Worker.replicas"],
    },
    { name: "out of scope: not audited", targets: [{ object: pod("other", "big", 8) }], want: [] },
    {
      name: "finished pods and jobs, objects being deleted: not audited",
      targets: [
        { object: pod("team-x", "done", 8, { phase: "Succeeded" }) },
        { object: pod("team-x", "failed", 8, { phase: "Failed" }) },
        { object: pod("team-x", "going", 8, { deleting: true }) },
        { object: pytorch("team-x", "old", 6, true), jobKind: PT },
      ],
      want: [],
    },
    {
      name: "sorted by namespace, kind, name",
      targets: [{ object: pod("team-x", "b", 1) }, { object: pod("team-w", "z", 1) }, { object: pod("team-x", "a", 1) }],
      want: ["team-w Pod z:", "team-x Pod a:", "team-x Pod b:"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = auditObjects(policy, c.targets, inScope).map(
        (e) => `${e.namespace} ${e.kind} ${e.name}:${e.violations.map((v) => ` ${v.rule}/${v.mode}@${v.field}`).join("")}`,
      );
      assert.deepEqual(got, c.want);
    });
  }
  it("table: one line per violation, and a count", () => {
    const entries = auditObjects(policy, [{ object: pod("team-x", "big", 8) }, { object: pod("team-x", "ok", 1) }], inScope);
    const lines = auditTable(entries).split("\n");
    assert.match(lines[0]!, /^NAMESPACE\s+KIND\s+NAME\s+RULE\s+MODE\s+FIELD\s+MESSAGE$/);
    assert.match(
      lines[1]!,
      /^team-x\s+Pod\s+big\s+container-limits\s+deny\s+spec\.containers\[0\]\.resources\.limits\[nvidia\.com\/gpu\]\s+8 exceeds the per-container limit of 4$/,
    );
    assert.equal(lines.at(-1), "2 objects audited, 1 with violations (1 violation)");
    assert.equal(auditTable([]), "0 objects audited, 0 with violations (0 violations)");
  });
});

const entry = (name: string, violations: AuditEntry["violations"], namespace = "team-x"): AuditEntry => ({
  policy: "validate-pods",
  apiVersion: "v1",
  kind: "Pod",
  namespace,
  name,
  uid: `uid-${name}`,
  violations,
});

describe("buildPolicyReport", () => {
  it("one result per violation (deny and audit: fail; warn: warn), one pass per clean object, the summary", () => {
    const r = buildPolicyReport(
      "team-x",
      [
        entry("big", [
          { rule: "container-limits", field: "spec.containers[0].resources.limits[nvidia.com/gpu]", message: "8 exceeds 4", mode: "deny" },
          { rule: "pod-gpus", field: "spec", message: "over", mode: "warn" },
          { rule: "quantity", field: "spec.x", message: "bad", mode: "audit" },
        ]),
        entry("ok", []),
      ],
      NOW,
    );
    assert.equal(r.apiVersion, "wgpolicyk8s.io/v1alpha2");
    assert.deepEqual(r.metadata, { name: "quartermaster", namespace: "team-x", labels: { "app.kubernetes.io/managed-by": "quartermaster" } });
    assert.deepEqual(r.summary, { pass: 1, fail: 2, warn: 1, error: 0, skip: 0 });
    assert.deepEqual(
      r.results.map((x) => [x.policy, x.rule, x.result, x.resources[0]!.name, x.properties?.field, x.properties?.mode]),
      [
        ["validate-pods", "container-limits", "fail", "big", "spec.containers[0].resources.limits[nvidia.com/gpu]", "deny"],
        ["validate-pods", "pod-gpus", "warn", "big", "spec", "warn"],
        ["validate-pods", "quantity", "fail", "big", "spec.x", "audit"],
        ["validate-pods", "all", "pass", "ok", undefined, undefined],
      ],
    );
    assert.deepEqual(r.results[0]!.resources[0], { apiVersion: "v1", kind: "Pod", namespace: "team-x", name: "big", uid: "uid-big" });
    assert.deepEqual(r.results[0]!.timestamp, { seconds: 1795694400, nanos: 0 });
    assert.equal(r.results[0]!.message, "8 exceeds 4");
  });
  it(`at most ${MAX_RESULTS} results, violations kept before passes; the summary counts all`, () => {
    const many = [
      ...Array.from({ length: MAX_RESULTS }, (_, i) => entry(`ok-${i}`, [])),
      entry("zz-bad", [{ rule: "pod-gpus", field: "spec", message: "m", mode: "deny" }]),
    ];
    const r = buildPolicyReport("team-x", many, NOW);
    assert.equal(r.results.length, MAX_RESULTS);
    assert.equal(r.results[0]!.resources[0]!.name, "zz-bad");
    assert.deepEqual(r.summary, { pass: MAX_RESULTS, fail: 1, warn: 0, error: 0, skip: 0 });
  });
});

describe("reportOwned: the ownership label OR Quartermaster's field manager in managedFields (issue 29)", () => {
  const label = { "app.kubernetes.io/managed-by": "quartermaster" };
  // managedFields as the apiserver lists them; fieldManagers reads the manager names out of them.
  const field = (manager: string) => ({
    manager,
    operation: "Update",
    apiVersion: "wgpolicyk8s.io/v1alpha2",
    time: "2026-01-01T00:00:00Z",
    fieldsType: "FieldsV1",
    fieldsV1: { "f:results": {} },
  });
  const cases: Array<{ name: string; labels: Record<string, string>; managedFields?: unknown; owned: boolean }> = [
    { name: "label only", labels: label, owned: true },
    { name: "manager only (a tenant removed the label)", labels: {}, managedFields: [field("kubectl-label"), field("quartermaster-reconciler")], owned: true },
    { name: "both", labels: label, managedFields: [field("quartermaster-reconciler")], owned: true },
    { name: "neither", labels: {}, owned: false },
    {
      name: "a different manager, no label",
      labels: { "app.kubernetes.io/managed-by": "kyverno" },
      managedFields: [field("kyverno"), field("kubectl-client-side-apply")],
      owned: false,
    },
    { name: "a manager that merely contains the name", labels: {}, managedFields: [field("quartermaster-reconciler-x"), field("quartermaster")], owned: false },
    { name: "malformed managedFields", labels: {}, managedFields: { manager: "quartermaster-reconciler" }, owned: false },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(reportOwned({ labels: c.labels, managers: fieldManagers(c.managedFields) }), c.owned);
    });
  }
});

describe("planPolicyReports", () => {
  const ours = (namespace: string, resourceVersion = "7"): ExistingReport => ({
    namespace,
    name: "quartermaster",
    labels: { "app.kubernetes.io/managed-by": "quartermaster" },
    resourceVersion,
  });
  const cases: Array<{ name: string; entries: AuditEntry[]; existing: ExistingReport[]; put: string[]; del: string[]; skipped: string[] }> = [
    { name: "nothing there: create", entries: [entry("a", [])], existing: [], put: ["team-x@new"], del: [], skipped: [] },
    { name: "ours there: replace with its resourceVersion", entries: [entry("a", [])], existing: [ours("team-x")], put: ["team-x@7"], del: [], skipped: [] },
    { name: "ours in a namespace with nothing left: delete", entries: [], existing: [ours("team-gone", "3")], put: [], del: ["team-gone@3"], skipped: [] },
    {
      name: "someone else's report of the same name: left alone, not deleted either",
      entries: [entry("a", [])],
      existing: [{ namespace: "team-x", name: "quartermaster", labels: {} }],
      put: [],
      del: [],
      skipped: ["team-x"],
    },
    {
      name: "someone else's in a namespace with nothing left: not deleted",
      entries: [],
      existing: [{ namespace: "team-y", name: "quartermaster", labels: { "app.kubernetes.io/managed-by": "kyverno" } }],
      put: [],
      del: [],
      skipped: [],
    },
    {
      name: "a labelled report of another name: not ours to delete",
      entries: [],
      existing: [{ ...ours("team-y"), name: "other" }],
      put: [],
      del: [],
      skipped: [],
    },
    {
      name: "ours with the label removed (our manager): replaced, not skipped",
      entries: [entry("a", [])],
      existing: [{ ...ours("team-x"), labels: {}, managers: ["kubectl-label", "quartermaster-reconciler"] }],
      put: ["team-x@7"],
      del: [],
      skipped: [],
    },
    {
      name: "ours with the label removed, nothing left: deleted",
      entries: [],
      existing: [{ ...ours("team-gone", "3"), labels: {}, managers: ["quartermaster-reconciler"] }],
      put: [],
      del: ["team-gone@3"],
      skipped: [],
    },
    {
      name: "unlabelled, another manager: left alone",
      entries: [entry("a", [])],
      existing: [{ ...ours("team-x"), labels: {}, managers: ["kubectl-create"] }],
      put: [],
      del: [],
      skipped: ["team-x"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const plan = planPolicyReports(c.entries, c.existing, NOW);
      assert.deepEqual(
        plan.put.map((p) => `${p.report.metadata.namespace}@${p.resourceVersion ?? "new"}`),
        c.put,
      );
      assert.deepEqual(
        plan.delete.map((d) => `${d.namespace}@${d.resourceVersion}`),
        c.del,
      );
      assert.deepEqual(
        plan.skipped.map((s) => s.namespace),
        c.skipped,
      );
      for (const p of plan.put)
        assert.equal(p.report.metadata.labels["app.kubernetes.io/managed-by"], "quartermaster", "every write carries the label (restored when removed)");
    });
  }
});

/** A cluster in memory: namespaces, pods, jobs and (when `crd`) PolicyReports. */
function fakeClient(o: {
  crd: boolean;
  pods: KubeObject[];
  jobs?: KubeObject[];
}): PolicyReportClient & { reports: Map<string, PolicyReport & { metadata: { resourceVersion?: string } }>; writes: number } {
  const reports = new Map<string, PolicyReport>();
  let rv = 0;
  const client = {
    reports,
    writes: 0,
    async listNamespaces(): Promise<NamespaceInfo[]> {
      return ["team-x", "team-w", "other", "quartermaster"].map((name): NamespaceInfo => ({
        name,
        labels: name.startsWith("team-") || name === "quartermaster" ? { "quartermaster.dev/enabled": "true" } : {},
      }));
    },
    async listPods(ns: string) {
      return o.pods.filter((p) => (p.metadata as { namespace: string }).namespace === ns);
    },
    async listJobs(kind: { kind: string }) {
      return kind.kind === "PyTorchJob" ? (o.jobs ?? []) : undefined;
    },
    async listReports() {
      if (!o.crd) return undefined;
      return [...reports.values()].map((r) => ({
        namespace: r.metadata.namespace,
        name: r.metadata.name,
        labels: r.metadata.labels,
        resourceVersion: r.metadata.resourceVersion!,
      }));
    },
    async putReport(report: PolicyReport, resourceVersion?: string) {
      const key = `${report.metadata.namespace}/${report.metadata.name}`;
      if ((reports.get(key)?.metadata.resourceVersion ?? undefined) !== resourceVersion) return "conflict" as const;
      client.writes++;
      reports.set(key, { ...report, metadata: { ...report.metadata, resourceVersion: String(++rv) } });
      return "written" as const;
    },
    async deleteReport(namespace: string, name: string) {
      client.writes++;
      return reports.delete(`${namespace}/${name}`) ? ("deleted" as const) : ("gone" as const);
    },
  };
  return client;
}

describe("syncPolicyReports", () => {
  it("without the CRD: one log line, nothing read or written", async () => {
    const { log, lines } = capturingLogger();
    const client = fakeClient({ crd: false, pods: [pod("team-x", "big", 8)] });
    const r = await syncPolicyReports({ client, policy, ownNamespace: "quartermaster", log, now: () => NOW });
    assert.equal(r.installed, false);
    assert.equal(client.writes, 0);
    assert.deepEqual(
      lines.map((l) => l.msg),
      ["policy reports: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed; skipped"],
    );
  });

  it("reports list the violating objects; a fixed object is cleared at the next pass; a namespace with nothing left loses its report", async () => {
    const pods = [pod("team-x", "big", 8), pod("team-x", "ok", 1), pod("team-w", "warned", 8), pod("other", "ignored", 8), pod("quartermaster", "own", 8)];
    const client = fakeClient({ crd: true, pods, jobs: [pytorch("team-x", "wide", 6)] });
    const sync = () => syncPolicyReports({ client, policy, ownNamespace: "quartermaster", log: capturingLogger().log, now: () => NOW });
    const first = await sync();
    assert.deepEqual(first.written, ["team-w/quartermaster", "team-x/quartermaster"]);
    const failing = (ns: string) =>
      client.reports
        .get(`${ns}/quartermaster`)
        ?.results.filter((x) => x.result !== "pass")
        .map((x) => `${x.resources[0]!.kind}/${x.resources[0]!.name}:${x.rule}:${x.result}`);
    assert.deepEqual(failing("team-x"), ["Pod/big:container-limits:fail", "PyTorchJob/wide:job-replicas:fail"]);
    assert.deepEqual(failing("team-w"), ["Pod/warned:container-limits:warn"]);
    assert.equal(client.reports.has("other/quartermaster"), false, "not opted in");
    assert.equal(client.reports.has("quartermaster/quartermaster"), false, "Quartermaster's own namespace is never in scope");

    // Fixed: the pod now asks for 4 GPUs; the warned pod is gone.
    pods[0] = pod("team-x", "big", 4);
    pods.splice(2, 1);
    const second = await sync();
    assert.deepEqual(second.written, ["team-x/quartermaster"]);
    assert.deepEqual(second.deleted, ["team-w/quartermaster"]);
    assert.deepEqual(failing("team-x"), ["PyTorchJob/wide:job-replicas:fail"]);
    assert.deepEqual(client.reports.get("team-x/quartermaster")!.summary, { pass: 2, fail: 1, warn: 0, error: 0, skip: 0 });
  });
});

/**
 * Issue 29 item 6: the job controller refuses pod templates the policy does not allow
 * (`reconciler.allowedTemplates`): privileged containers, host namespaces, ServiceAccounts other than
 * `default` and those listed. The pure check (`templateViolations`), the decision (`decideJob`: no pods or
 * Services, `TemplateRefused` and a Warning Event; cleared once fixed) and the pass (the policy reaches the
 * decision, the condition and Event reach the cluster). Tables of named cases, exact values.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { runPass } from "../../../src/run/pass.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { AllowedTemplates, JobKind, Policy } from "../../../src/policy/types.js";
import { decideJob, REASON_TEMPLATE_ALLOWED, REASON_TEMPLATE_REFUSED, REASON_TOO_MANY_REPLICAS } from "../../../src/reconcile/job-controller.js";
import { DEFAULT_ALLOWED_TEMPLATES, jobTemplateViolations, templateViolations, type Violation } from "../../../src/reconcile/template-guard.js";
import { MAX_JOB_REPLICAS } from "../../../src/membership/ceiling.js";
import { fakeCluster } from "../../fixtures/cluster.js";
import { caffe2JobObject } from "../../fixtures/jobs.js";

const CAFFE2: JobKind = { kind: "Caffe2Job", group: "kubeflow.org", version: "v1alpha1", plural: "caffe2jobs", framework: "caffe2" };
const PYTORCH: JobKind = { kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs", framework: "pytorch", controller: "quartermaster" };
const NOW = new Date("2026-11-29T07:00:00Z");
const LATER = new Date("2026-11-29T07:05:00Z");
const T = "spec.replicaSpecs.template";
const CAFFE2_CONTAINER = { name: "caffe2", image: "caffe2:1" };

const allow = (o: Partial<AllowedTemplates> = {}): AllowedTemplates => ({ ...DEFAULT_ALLOWED_TEMPLATES, ...o });

/** Caffe2Job team-a/ex with `podSpec` laid over its template's spec (one container `caffe2`). */
function caffe2Job(podSpec: Record<string, unknown> = {}, o: { replicas?: number; status?: Record<string, unknown>; suspend?: boolean } = {}): KubeObject {
  return caffe2JobObject({ ...o, podSpec });
}

const pod = (index: number, phase = "Running"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: `team-a-ex-worker-${index}`,
    namespace: "team-a",
    uid: `p-${index}`,
    labels: { caffe2_replica_type: "worker", caffe2_replica_index: String(index) },
  },
  status: { phase },
});

const privileged = (name = "caffe2") => ({ name, image: "x:1", securityContext: { privileged: true } });

const PRIV = 'privileged container "caffe2" (reconciler.allowedTemplates.privileged is false)';
const host = (ns: string) => `the node's ${ns} namespace (reconciler.allowedTemplates.hostNamespaces is false)`;
const sa = (name: string, allowed = '"default"') => `ServiceAccount "${name}" (reconciler.allowedTemplates.serviceAccounts allows ${allowed})`;

describe("DEFAULT_ALLOWED_TEMPLATES", () => {
  it("is the policy schema's defaults (what decideJob uses without a policy cannot drift from the loader's)", () => {
    assert.deepEqual(DEFAULT_ALLOWED_TEMPLATES, defaultPolicy().reconciler.allowedTemplates);
  });
});

describe("templateViolations: each kind, with its field path", () => {
  const cases: Array<{ name: string; spec: Record<string, unknown>; allowed?: Partial<AllowedTemplates>; namespace?: string; want: Violation[] }> = [
    { name: "a plain template → none", spec: { containers: [CAFFE2_CONTAINER] }, want: [] },
    {
      name: "privileged container",
      spec: { containers: [{ name: "side", image: "s:1" }, privileged()] },
      want: [{ path: "template.spec.containers[1].securityContext.privileged", what: PRIV }],
    },
    {
      name: "privileged init container",
      spec: { containers: [CAFFE2_CONTAINER], initContainers: [privileged("init")] },
      want: [
        {
          path: "template.spec.initContainers[0].securityContext.privileged",
          what: 'privileged container "init" (reconciler.allowedTemplates.privileged is false)',
        },
      ],
    },
    { name: "privileged: false → none", spec: { containers: [{ ...CAFFE2_CONTAINER, securityContext: { privileged: false } }] }, want: [] },
    {
      name: 'privileged as the string "true" → none (the apiserver refuses that pod)',
      spec: { containers: [{ ...CAFFE2_CONTAINER, securityContext: { privileged: "true" } }] },
      want: [],
    },
    { name: "privileged, allowed by the policy → none", spec: { containers: [privileged()] }, allowed: { privileged: true }, want: [] },
    { name: "hostNetwork", spec: { hostNetwork: true }, want: [{ path: "template.spec.hostNetwork", what: host("Network") }] },
    { name: "hostPID", spec: { hostPID: true }, want: [{ path: "template.spec.hostPID", what: host("PID") }] },
    { name: "hostIPC", spec: { hostIPC: true }, want: [{ path: "template.spec.hostIPC", what: host("IPC") }] },
    { name: "hostNetwork: false → none", spec: { hostNetwork: false, hostPID: false, hostIPC: false }, want: [] },
    {
      name: "host namespaces, allowed by the policy → none",
      spec: { hostNetwork: true, hostPID: true, hostIPC: true },
      allowed: { hostNamespaces: true },
      want: [],
    },
    { name: "serviceAccountName unset → none", spec: {}, want: [] },
    { name: "serviceAccountName default → none", spec: { serviceAccountName: "default" }, want: [] },
    { name: "serviceAccountName empty → none (the apiserver makes it default)", spec: { serviceAccountName: "" }, want: [] },
    { name: "another ServiceAccount", spec: { serviceAccountName: "admin" }, want: [{ path: "template.spec.serviceAccountName", what: sa("admin") }] },
    {
      name: "another ServiceAccount through the deprecated serviceAccount",
      spec: { serviceAccount: "admin" },
      want: [{ path: "template.spec.serviceAccount", what: sa("admin") }],
    },
    { name: "a listed ServiceAccount → none", spec: { serviceAccountName: "trainer" }, allowed: { serviceAccounts: ["trainer"] }, want: [] },
    {
      name: "a ServiceAccount listed for this namespace → none",
      spec: { serviceAccountName: "trainer" },
      allowed: { serviceAccounts: ["team-a/trainer"] },
      want: [],
    },
    {
      name: "a ServiceAccount listed for another namespace → refused, the list named",
      spec: { serviceAccountName: "trainer" },
      allowed: { serviceAccounts: ["team-b/trainer"] },
      want: [{ path: "template.spec.serviceAccountName", what: sa("trainer", '"default", "team-b/trainer"') }],
    },
    {
      name: "every kind at once → every violation, host namespaces, ServiceAccounts, then containers",
      spec: {
        hostNetwork: true,
        hostPID: true,
        hostIPC: true,
        serviceAccountName: "admin",
        serviceAccount: "root",
        containers: [privileged()],
        initContainers: [privileged("init")],
      },
      want: [
        { path: "template.spec.hostNetwork", what: host("Network") },
        { path: "template.spec.hostPID", what: host("PID") },
        { path: "template.spec.hostIPC", what: host("IPC") },
        { path: "template.spec.serviceAccountName", what: sa("admin") },
        { path: "template.spec.serviceAccount", what: sa("root") },
        { path: "template.spec.containers[0].securityContext.privileged", what: PRIV },
        {
          path: "template.spec.initContainers[0].securityContext.privileged",
          what: 'privileged container "init" (reconciler.allowedTemplates.privileged is false)',
        },
      ],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(templateViolations({ spec: c.spec }, c.namespace ?? "team-a", allow(c.allowed)), c.want);
    });
  }

  it("no template, or no spec → none (readReplicas reports a missing template)", () => {
    assert.deepEqual(templateViolations(undefined, "team-a", allow()), []);
    assert.deepEqual(templateViolations({ metadata: {} }, "team-a", allow()), []);
  });
});

describe("jobTemplateViolations: paths from the job's root", () => {
  it("Caffe2Job: spec.replicaSpecs.template…", () => {
    assert.deepEqual(jobTemplateViolations(caffe2Job({ hostNetwork: true }), CAFFE2, allow()), [{ path: `${T}.spec.hostNetwork`, what: host("Network") }]);
  });
  it("a Kubeflow kind the controller runs: spec.<field>.<Type>.template…, every replica type", () => {
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "pt", namespace: "team-a", uid: "u" },
      spec: {
        pytorchReplicaSpecs: {
          Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", image: "p:1" }], serviceAccountName: "admin" } } },
          Worker: { replicas: 2, template: { spec: { containers: [{ name: "pytorch", image: "p:1", securityContext: { privileged: true } }] } } },
        },
      },
    };
    assert.deepEqual(jobTemplateViolations(job, PYTORCH, allow()), [
      { path: "spec.pytorchReplicaSpecs.Master.template.spec.serviceAccountName", what: sa("admin") },
      {
        path: "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].securityContext.privileged",
        what: 'privileged container "pytorch" (reconciler.allowedTemplates.privileged is false)',
      },
    ]);
  });
});

type Cond = { type: string; status: string; reason: string; message: string; lastTransitionTime: string; lastUpdateTime: string };
const conditionsOf = (d: { status?: Record<string, unknown> }): Cond[] => (d.status?.conditions ?? []) as Cond[];
const refusal = (fields: string) =>
  `Caffe2Job team-a/ex: the policy (reconciler.allowedTemplates) does not allow its template; no pods or Services are created: ${fields}`;

describe("decideJob: a refused template creates nothing and says why", () => {
  const cases: Array<{ name: string; spec: Record<string, unknown>; allowed?: Partial<AllowedTemplates>; message: string }> = [
    { name: "privileged container", spec: { containers: [privileged()] }, message: refusal(`${T}.spec.containers[0].securityContext.privileged: ${PRIV}`) },
    { name: "hostNetwork", spec: { hostNetwork: true }, message: refusal(`${T}.spec.hostNetwork: ${host("Network")}`) },
    { name: "hostPID", spec: { hostPID: true }, message: refusal(`${T}.spec.hostPID: ${host("PID")}`) },
    { name: "hostIPC", spec: { hostIPC: true }, message: refusal(`${T}.spec.hostIPC: ${host("IPC")}`) },
    { name: "another ServiceAccount", spec: { serviceAccountName: "admin" }, message: refusal(`${T}.spec.serviceAccountName: ${sa("admin")}`) },
    {
      name: "several violations → all listed",
      spec: { hostNetwork: true, serviceAccountName: "admin", containers: [privileged()] },
      message: refusal(
        `${T}.spec.hostNetwork: ${host("Network")}; ${T}.spec.serviceAccountName: ${sa("admin")}; ${T}.spec.containers[0].securityContext.privileged: ${PRIV}`,
      ),
    },
    {
      name: "privileged allowed, hostNetwork not → only hostNetwork listed",
      spec: { hostNetwork: true, containers: [privileged()] },
      allowed: { privileged: true },
      message: refusal(`${T}.spec.hostNetwork: ${host("Network")}`),
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decideJob({ job: caffe2Job(c.spec), kind: CAFFE2, pods: [], services: [], now: NOW, allowedTemplates: allow(c.allowed) });
      assert.deepEqual(d.creates, []);
      assert.deepEqual(d.deletes, []);
      assert.deepEqual(d.problems, [`team-a/Caffe2Job/ex: ${c.message}`]);
      assert.deepEqual(d.events, [{ type: "Warning", reason: REASON_TEMPLATE_REFUSED, message: c.message }]);
      assert.deepEqual(conditionsOf(d), [
        {
          type: REASON_TEMPLATE_REFUSED,
          status: "True",
          reason: REASON_TEMPLATE_REFUSED,
          message: c.message,
          lastUpdateTime: "2026-11-29T07:00:00Z",
          lastTransitionTime: "2026-11-29T07:00:00Z",
        },
      ]);
      assert.equal(d.status?.lastReconcileTime, "2026-11-29T07:00:00Z");
    });
  }

  it("without allowedTemplates in the input → the policy's defaults (refused)", () => {
    const d = decideJob({ job: caffe2Job({ hostPID: true }), kind: CAFFE2, pods: [], services: [], now: NOW });
    assert.deepEqual(d.creates, []);
    assert.equal(conditionsOf(d)[0]?.type, REASON_TEMPLATE_REFUSED);
  });

  it("existing pods of a refused job are neither deleted nor added to (a missing index stays missing)", () => {
    const d = decideJob({ job: caffe2Job({ hostNetwork: true }, { replicas: 3 }), kind: CAFFE2, pods: [pod(0), pod(1, "Failed")], services: [], now: NOW });
    assert.deepEqual(d.creates, []);
    assert.deepEqual(d.deletes, []);
    assert.equal(d.restarts, undefined);
  });

  it("the next decision with the same template → no new Event, no status write", () => {
    const first = decideJob({ job: caffe2Job({ hostIPC: true }), kind: CAFFE2, pods: [], services: [], now: NOW });
    const again = decideJob({ job: caffe2Job({ hostIPC: true }, { status: first.status! }), kind: CAFFE2, pods: [], services: [], now: LATER });
    assert.deepEqual(again.events, []);
    assert.equal(again.status, undefined);
    assert.deepEqual(again.creates, []);
  });

  it("the template changed to another violation → the message says which fields now, with a new Event", () => {
    const first = decideJob({ job: caffe2Job({ hostIPC: true }), kind: CAFFE2, pods: [], services: [], now: NOW });
    const again = decideJob({ job: caffe2Job({ hostPID: true }, { status: first.status! }), kind: CAFFE2, pods: [], services: [], now: LATER });
    const msg = refusal(`${T}.spec.hostPID: ${host("PID")}`);
    assert.deepEqual(again.events, [{ type: "Warning", reason: REASON_TEMPLATE_REFUSED, message: msg }]);
    assert.deepEqual(conditionsOf(again), [
      {
        type: REASON_TEMPLATE_REFUSED,
        status: "True",
        reason: REASON_TEMPLATE_REFUSED,
        message: msg,
        lastUpdateTime: "2026-11-29T07:05:00Z",
        lastTransitionTime: "2026-11-29T07:00:00Z",
      },
    ]);
  });

  it("over the replica ceiling too → TooManyReplicas decides (checked first)", () => {
    const d = decideJob({ job: caffe2Job({ hostNetwork: true }, { replicas: MAX_JOB_REPLICAS + 1 }), kind: CAFFE2, pods: [], services: [], now: NOW });
    assert.deepEqual(
      conditionsOf(d).map((c) => c.type),
      [REASON_TOO_MANY_REPLICAS],
    );
  });
});

describe("decideJob: allowed templates go on as before", () => {
  const cases: Array<{ name: string; spec: Record<string, unknown>; allowed?: Partial<AllowedTemplates> }> = [
    { name: "a plain template", spec: {} },
    { name: "serviceAccountName unset", spec: {} },
    { name: "serviceAccountName default", spec: { serviceAccountName: "default" } },
    { name: "a listed ServiceAccount", spec: { serviceAccountName: "trainer" }, allowed: { serviceAccounts: ["trainer"] } },
    { name: "a ServiceAccount listed for the job's namespace", spec: { serviceAccountName: "trainer" }, allowed: { serviceAccounts: ["team-a/trainer"] } },
    { name: "privileged, allowed", spec: { containers: [privileged()] }, allowed: { privileged: true } },
    { name: "host namespaces, allowed", spec: { hostNetwork: true, hostPID: true, hostIPC: true }, allowed: { hostNamespaces: true } },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decideJob({ job: caffe2Job(c.spec), kind: CAFFE2, pods: [], services: [], now: NOW, allowedTemplates: allow(c.allowed) });
      assert.deepEqual(
        d.creates.map((x) => `${x.kind}/${x.name}`),
        ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1", "Service/team-a-ex-worker-0", "Service/team-a-ex-worker-1"],
      );
      assert.deepEqual(d.problems, []);
      assert.deepEqual(
        conditionsOf(d).map((x) => `${x.type}=${x.status}`),
        ["Created=True"],
      );
      // The pod is the template: what the policy allowed is kept, not stripped.
      const spec = (d.creates[0]!.body as { spec: Record<string, unknown> }).spec;
      for (const [k, v] of Object.entries(c.spec)) if (k !== "containers") assert.deepEqual(spec[k], v, k);
    });
  }
});

describe("decideJob: a fixed template clears the condition and creation proceeds", () => {
  it("refused, then fixed: TemplateRefused=False (TemplateAllowed), a Normal Event, the pods and Services", () => {
    const refused = decideJob({ job: caffe2Job({ containers: [privileged()] }), kind: CAFFE2, pods: [], services: [], now: NOW });
    const fixed = decideJob({ job: caffe2Job({}, { status: refused.status! }), kind: CAFFE2, pods: [], services: [], now: LATER });
    const msg = "Caffe2Job team-a/ex: its template is now allowed by the policy (reconciler.allowedTemplates).";
    assert.deepEqual(
      fixed.creates.map((x) => `${x.kind}/${x.name}`),
      ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1", "Service/team-a-ex-worker-0", "Service/team-a-ex-worker-1"],
    );
    assert.deepEqual(fixed.events, [{ type: "Normal", reason: REASON_TEMPLATE_ALLOWED, message: msg }]);
    const conds = conditionsOf(fixed);
    assert.deepEqual(
      conds.find((c) => c.type === REASON_TEMPLATE_REFUSED),
      {
        type: REASON_TEMPLATE_REFUSED,
        status: "False",
        reason: REASON_TEMPLATE_ALLOWED,
        message: msg,
        lastUpdateTime: "2026-11-29T07:05:00Z",
        lastTransitionTime: "2026-11-29T07:05:00Z",
      },
    );
    assert.deepEqual(
      conds.map((c) => `${c.type}=${c.status}`),
      ["TemplateRefused=False", "Created=True"],
    );
    // Fixed stays fixed: the next decision neither repeats the Event nor rewrites the condition.
    const next = decideJob({
      job: caffe2Job({}, { status: fixed.status! }),
      kind: CAFFE2,
      pods: [pod(0, "Pending"), pod(1, "Pending")],
      services: [],
      now: LATER,
    });
    assert.deepEqual(next.events, []);
    const refusedOf = (st: Record<string, unknown>) => conditionsOf({ status: st }).find((c) => c.type === REASON_TEMPLATE_REFUSED);
    assert.deepEqual(refusedOf(next.status ?? fixed.status!), refusedOf(fixed.status!));
  });

  it("fixed by the policy instead (the setting now allows it) → cleared the same way", () => {
    const refused = decideJob({ job: caffe2Job({ serviceAccountName: "trainer" }), kind: CAFFE2, pods: [], services: [], now: NOW });
    const fixed = decideJob({
      job: caffe2Job({ serviceAccountName: "trainer" }, { status: refused.status! }),
      kind: CAFFE2,
      pods: [],
      services: [],
      now: LATER,
      allowedTemplates: allow({ serviceAccounts: ["trainer"] }),
    });
    assert.equal(fixed.creates.length, 4);
    assert.equal(conditionsOf(fixed).find((c) => c.type === REASON_TEMPLATE_REFUSED)?.status, "False");
  });
});

describe("decideJob: where the guard does not apply", () => {
  it("a finished job (Succeeded) → no TemplateRefused: it creates nothing anyway", () => {
    const status = {
      conditions: [{ type: "Succeeded", status: "True", reason: "JobSucceeded", message: "done" }],
      replicaStatuses: { active: 0, succeeded: 2, failed: 0 },
    };
    const d = decideJob({ job: caffe2Job({ hostNetwork: true }, { status }), kind: CAFFE2, pods: [], services: [], now: NOW });
    assert.deepEqual(d.creates, []);
    assert.deepEqual(d.events, []);
    assert.ok(!conditionsOf(d).some((c) => c.type === REASON_TEMPLATE_REFUSED));
  });

  it("a suspended job → still suspended (its pods deleted as upstream's suspend), no TemplateRefused", () => {
    const d = decideJob({ job: caffe2Job({ hostNetwork: true }, { suspend: true }), kind: CAFFE2, pods: [pod(0)], services: [], now: NOW });
    assert.deepEqual(
      d.deletes.map((x) => `${x.kind}/${x.name}`),
      ["Pod/team-a-ex-worker-0"],
    );
    assert.deepEqual(d.creates, []);
    assert.ok(!conditionsOf(d).some((c) => c.type === REASON_TEMPLATE_REFUSED));
  });
});

describe("the pass: the policy reaches the decision, the condition and Event the cluster", () => {
  const c2 = (podSpec: Record<string, unknown>): KubeObject => ({
    ...caffe2Job(podSpec),
    metadata: { name: "ex", namespace: "team-a", uid: "uid-ex", resourceVersion: "1" },
  });
  const withAllowed = (a: Partial<AllowedTemplates>): Policy => {
    const p = defaultPolicy();
    return { ...p, reconciler: { ...p.reconciler, allowedTemplates: allow(a) } };
  };
  const cases: Array<{ name: string; policy: Policy; pods: number; refused: boolean }> = [
    { name: "default policy: a privileged Caffe2Job → no pods, TemplateRefused, a Warning Event", policy: defaultPolicy(), pods: 0, refused: true },
    { name: "allowedTemplates.privileged: true → its pods", policy: withAllowed({ privileged: true }), pods: 2, refused: false },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const kind: JobKind = { ...CAFFE2 };
      const cluster = fakeCluster({ jobs: [{ kind, job: c2({ containers: [privileged()] }) }] });
      await runPass({ cluster, policy: { ...c.policy, jobKinds: [kind] }, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
      assert.equal(cluster.pods.length, c.pods);
      assert.equal(cluster.services.length, c.pods);
      const job = cluster.jobs.get("team-a/ex")!.job as { status?: { conditions?: Cond[] } };
      assert.equal(
        (job.status?.conditions ?? []).some((x) => x.type === REASON_TEMPLATE_REFUSED && x.status === "True"),
        c.refused,
      );
      assert.equal(
        (cluster.events as Array<{ type: string; reason: string }>).some((e) => e.type === "Warning" && e.reason === REASON_TEMPLATE_REFUSED),
        c.refused,
      );
    });
  }
});

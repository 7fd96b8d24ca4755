/**
 * The doctor's checks of the reconciler CronJob (last success against its schedule, failed passes), the
 * device ledger (presence, checksums, age) and RBAC (what each ServiceAccount needs, and the findings when
 * a SubjectAccessReview says no), as tables with a fixed clock.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkLedger, type LedgerContext } from "../../../src/doctor/ledger.js";
import { checkAccess, requiredAccess } from "../../../src/doctor/rbac.js";
import { checkReconciler, humanAge, scheduledBetween, schedulePeriodSeconds } from "../../../src/doctor/reconciler.js";
import type { CronJob, DoctorSnapshot, DoctorFinding as Finding, Job, LedgerState } from "../../../src/doctor/types.js";
import { defaultPolicy } from "../../../src/policy/load.js";

const NOW = new Date("2026-06-01T12:00:00Z");
const NS = "quartermaster";
const ago = (seconds: number): string => new Date(NOW.getTime() - seconds * 1000).toISOString();
const brief = (findings: readonly Finding[]): string[] => findings.map((f) => `${f.severity} ${f.subject}`);

function cronJob(status: CronJob["status"], spec: Partial<CronJob["spec"]> = {}): CronJob {
  return {
    metadata: { name: "quartermaster-reconciler", namespace: NS, uid: "cj", creationTimestamp: "2026-05-01T00:00:00Z" },
    spec: { schedule: "*/5 * * * *", startingDeadlineSeconds: 120, jobTemplate: { spec: { activeDeadlineSeconds: 600 } }, ...spec },
    status,
  };
}

function job(name: string, createdSecondsAgo: number, outcome: "Complete" | "Failed" | "running", owner = "cj"): Job {
  return {
    metadata: { name, creationTimestamp: ago(createdSecondsAgo), ownerReferences: [{ uid: owner, kind: "CronJob" }] },
    status:
      outcome === "running"
        ? {}
        : {
            conditions: [
              {
                type: outcome,
                status: "True",
                ...(outcome === "Failed" ? { reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" } : {}),
              },
            ],
          },
  };
}

function snapshot(reconciler: DoctorSnapshot["reconciler"]): DoctorSnapshot {
  return {
    now: NOW,
    namespace: NS,
    webhookConfigurations: [],
    services: {},
    certificates: {},
    protectedNamespaces: {},
    reconciler,
    ledger: "absent",
    access: [],
  };
}

const CJ = `CronJob ${NS}/quartermaster-reconciler`;

describe("doctor: reconciler CronJob", () => {
  const cases: Array<{ name: string; reconciler: DoctorSnapshot["reconciler"]; want: string[]; message?: RegExp }> = [
    {
      name: "a pass succeeded a minute ago → ok",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(60) }), jobs: [job("a", 100, "Complete")] },
      want: [`ok ${CJ}`],
      message: /^last successful pass 60s ago \(schedule \*\/5 \* \* \* \*\)$/,
    },
    {
      name: "last success 12 minutes ago, within the passes' start and run deadlines (720 s) → ok",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(720) }), jobs: [] },
      want: [`ok ${CJ}`],
    },
    {
      name: "last success an hour ago on a five-minute schedule → warning with the passes missed",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(3600) }), jobs: [] },
      want: [`warning ${CJ}`],
      message: /^last successful pass 60m ago; 9 scheduled passes since \(schedule \*\/5 \* \* \* \*\)$/,
    },
    {
      name: "without deadlines, two scheduled passes since the last success → warning",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(540) }, { startingDeadlineSeconds: undefined, jobTemplate: {} }), jobs: [] },
      want: [`warning ${CJ}`],
      message: /2 scheduled passes since/,
    },
    {
      name: "never succeeded, created three minutes ago → info (no pass yet)",
      reconciler: { cronJob: { ...cronJob(undefined), metadata: { name: "quartermaster-reconciler", uid: "cj", creationTimestamp: ago(180) } }, jobs: [] },
      want: [`info ${CJ}`],
      message: /^no pass has succeeded yet \(created 3m ago, schedule \*\/5 \* \* \* \*\)$/,
    },
    {
      name: "never succeeded, created a month ago → warning",
      reconciler: { cronJob: cronJob(undefined), jobs: [job("a", 100, "Failed")] },
      want: [`warning ${CJ}`, `warning Job ${NS}/a`],
      message: /^no successful pass since it was created 32d ago; 1000\+ scheduled passes since/,
    },
    {
      name: "the latest finished pass failed → warning naming the Job and its reason",
      reconciler: {
        cronJob: cronJob({ lastSuccessfulTime: ago(400) }),
        jobs: [job("old", 400, "Complete"), job("new", 100, "Failed"), job("running", 10, "running")],
      },
      want: [`ok ${CJ}`, `warning Job ${NS}/new`],
    },
    {
      name: "an older failure followed by a success → ok",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(60) }), jobs: [job("old", 400, "Failed"), job("new", 100, "Complete")] },
      want: [`ok ${CJ}`],
    },
    {
      name: "a failed Job another CronJob owns → not ours, ok",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(60) }), jobs: [job("theirs", 10, "Failed", "other-uid")] },
      want: [`ok ${CJ}`],
    },
    {
      name: "suspended → warning (and no age judgement)",
      reconciler: { cronJob: cronJob({ lastSuccessfulTime: ago(86400) }, { suspend: true }), jobs: [] },
      want: [`warning ${CJ}`],
      message: /^suspended: no passes run$/,
    },
    {
      name: "a schedule that does not parse → warning",
      reconciler: { cronJob: cronJob({}, { schedule: "every five minutes" }), jobs: [] },
      want: [`warning ${CJ}`],
      message: /does not parse/,
    },
    {
      name: "no CronJob but the resident reconciler Deployment, ready → ok",
      reconciler: { cronJob: undefined, jobs: [], resident: { replicas: 1, readyReplicas: 1 } },
      want: [`ok Deployment ${NS}/quartermaster-reconciler`],
      message: /^resident reconciler running \(1\/1 ready\); its passes are in its logs$/,
    },
    {
      name: "the resident reconciler Deployment without a ready replica → warning",
      reconciler: { cronJob: undefined, jobs: [], resident: { replicas: 1, readyReplicas: 0 } },
      want: [`warning Deployment ${NS}/quartermaster-reconciler`],
    },
    {
      name: "no CronJob → warning",
      reconciler: { cronJob: undefined, jobs: [] },
      want: [`warning ${CJ}`],
      message: /^not found: finished jobs keep their pods and GPUs/,
    },
    {
      name: "cannot be read → not checked (warning)",
      reconciler: { error: "HTTP 403: forbidden" },
      want: [`warning ${CJ}`],
      message: /^not checked: HTTP 403/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = checkReconciler(snapshot(c.reconciler));
      assert.deepEqual(brief(findings), c.want);
      if (c.message) assert.match(findings[0]!.message, c.message);
    });
  }

  it("the failed pass's finding carries its reason and how to read its logs", () => {
    const [, failed] = checkReconciler(snapshot({ cronJob: cronJob({ lastSuccessfulTime: ago(400) }), jobs: [job("new", 100, "Failed")] }));
    assert.equal(failed!.message, "the latest finished pass failed (BackoffLimitExceeded: Job has reached the specified backoff limit)");
    assert.equal(failed!.fix, "kubectl -n quartermaster logs job/new");
  });

  it("scheduledBetween: the ticks in (from, to], in the CronJob's time zone", () => {
    const ticks = scheduledBetween({ schedule: "0 * * * *" }, new Date("2026-06-01T09:00:00Z"), new Date("2026-06-01T12:00:00Z"));
    assert.deepEqual(
      ticks!.map((d) => d.toISOString()),
      ["2026-06-01T10:00:00.000Z", "2026-06-01T11:00:00.000Z", "2026-06-01T12:00:00.000Z"],
    );
    const berlin = scheduledBetween({ schedule: "0 3 * * *", timeZone: "Europe/Berlin" }, new Date("2026-06-01T00:00:00Z"), new Date("2026-06-02T00:00:00Z"));
    assert.deepEqual(
      berlin!.map((d) => d.toISOString()),
      ["2026-06-01T01:00:00.000Z"],
    );
    assert.equal(scheduledBetween({ schedule: "nonsense" }, new Date(0), NOW), undefined);
  });

  it("schedulePeriodSeconds: five minutes, an hour, a day (@daily)", () => {
    assert.equal(schedulePeriodSeconds({ schedule: "*/5 * * * *" }, NOW), 300);
    assert.equal(schedulePeriodSeconds({ schedule: "17 * * * *" }, NOW), 3600);
    assert.equal(schedulePeriodSeconds({ schedule: "@daily" }, NOW), 86400);
  });

  it("humanAge: seconds, minutes, hours, days", () => {
    assert.deepEqual([59, 119, 120, 7199, 7200, 172_799, 172_800].map(humanAge), ["59s", "119s", "2m", "120m", "2h", "48h", "2d"]);
  });
});

describe("doctor: ledger", () => {
  const ctx = (over: Partial<LedgerContext> = {}): LedgerContext => ({ now: NOW, namespace: NS, periodSeconds: 300, reconcilerHasSucceeded: true, ...over });
  const L = `ledger in ${NS}`;
  const cases: Array<{ name: string; ledger: LedgerState; ctx?: Partial<LedgerContext>; want: string[]; message?: RegExp }> = [
    {
      name: "written a minute ago, checksums valid → ok",
      ledger: { generatedAt: new Date(ago(60)), shards: 4, corrupt: [] },
      want: [`ok ${L}`],
      message: /^4 shards, checksums valid, written 60s ago$/,
    },
    {
      name: "written 20 minutes ago on a five-minute schedule (over three periods) → warning",
      ledger: { generatedAt: new Date(ago(1200)), shards: 1, corrupt: [] },
      want: [`warning ${L}`],
      message: /^written 20m ago, older than 15m/,
    },
    {
      name: "written 50 minutes ago, period unknown (an hour allowed) → ok",
      ledger: { generatedAt: new Date(ago(3000)), shards: 1, corrupt: [] },
      ctx: { periodSeconds: undefined },
      want: [`ok ${L}`],
    },
    {
      name: "shards failing their checksum → warning naming them",
      ledger: { generatedAt: new Date(ago(60)), shards: 4, corrupt: ["quartermaster-ledger-1", "quartermaster-ledger-3"] },
      want: [`warning ${L}`],
      message: /^2 of 4 shards fail their checksum \(quartermaster-ledger-1, quartermaster-ledger-3\)/,
    },
    { name: "no generation time → warning", ledger: { shards: 1, corrupt: [] }, want: [`warning ${L}`] },
    {
      name: "absent after successful passes → warning: the capacity rule is skipped",
      ledger: "absent",
      want: [`warning ${L}`],
      message: /capacity rule is skipped/,
    },
    { name: "absent before the first pass → info", ledger: "absent", ctx: { reconcilerHasSucceeded: false }, want: [`info ${L}`] },
    { name: "not read → info saying why", ledger: { unread: "no reader" }, want: [`info ${L}`], message: /^ledger not read: no reader$/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = checkLedger(c.ledger, ctx(c.ctx));
      assert.deepEqual(brief(findings), c.want);
      if (c.message) assert.match(findings[0]!.message, c.message);
    });
  }
});

describe("doctor: RBAC", () => {
  const policy = defaultPolicy();
  const key = (a: { serviceAccount: string; verb: string; group: string; resource: string; namespace: string; name?: string }): string =>
    `${a.serviceAccount.split("/")[1]} ${a.verb} ${a.group ? `${a.resource}.${a.group}` : a.resource}${a.name ? `/${a.name}` : ""}${a.namespace ? ` in ${a.namespace}` : ""}`;

  it("the webhook needs a GET of each job kind, of what else its reader reads, of the ledger index, and to create Events, nothing else", () => {
    const webhook = requiredAccess(policy, NS)
      .filter((a) => a.serviceAccount === `${NS}/quartermaster-webhook`)
      .map(key);
    assert.deepEqual(webhook, [
      ...["tfjobs", "pytorchjobs", "mxjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "caffe2jobs"].map((p) => `quartermaster-webhook get ${p}.kubeflow.org`),
      // The default job kinds' TrainJob (Kubeflow Trainer v2), and its runtimes for /validate/jobs.
      ...["trainjobs", "clustertrainingruntimes", "trainingruntimes"].map((p) => `quartermaster-webhook get ${p}.trainer.kubeflow.org`),
      // A TensorFlow TrainJob pod's JobSet (its TF_CONFIG), and the ResourceClaims and templates pods name (DRA).
      "quartermaster-webhook get jobsets.jobset.x-k8s.io",
      ...["resourceclaims", "resourceclaimtemplates", "deviceclasses"].map((p) => `quartermaster-webhook get ${p}.resource.k8s.io`),
      // A DRA pod's batch Job, judged again with its claims under a per-job GPU cap.
      "quartermaster-webhook get jobs.batch",
      // A queued job's Kueue LocalQueue, ClusterQueue and flavors (queue-capacity), and the Event on a job whose Kueue admission is refused.
      ...["localqueues", "clusterqueues", "resourceflavors"].map((p) => `quartermaster-webhook get ${p}.kueue.x-k8s.io`),
      "quartermaster-webhook create events",
      "quartermaster-webhook get configmaps/quartermaster-ledger in quartermaster",
    ]);
  });

  it("the reconciler's needs follow the policy: no Service create without per-replica Services, no Events when off", () => {
    const on = requiredAccess(policy, NS).map(key);
    assert.ok(on.includes("quartermaster-reconciler create services"));
    assert.ok(on.includes("quartermaster-reconciler create events"));
    assert.ok(on.includes("quartermaster-reconciler list leases.coordination.k8s.io in kube-node-lease"));
    const off = requiredAccess({ ...policy, reconciler: { ...policy.reconciler, perReplicaServices: false, events: false } }, NS).map(key);
    assert.ok(!off.includes("quartermaster-reconciler create services"));
    assert.ok(!off.includes("quartermaster-reconciler create events"));
    assert.ok(off.includes("quartermaster-reconciler delete services"));
  });

  it("a missing job GET is a warning under onJobLookupFailure warn and critical under deny", () => {
    const get = (p: typeof policy) =>
      requiredAccess(p, NS).find((a) => a.resource === "tfjobs" && a.verb === "get" && a.serviceAccount.endsWith("webhook"))!.ifDenied;
    assert.equal(get(policy), "warning");
    assert.equal(get({ ...policy, clusterSpec: { ...policy.clusterSpec, onJobLookupFailure: "deny" } }), "critical");
  });

  it("findings: one per ServiceAccount, listing what is refused with why", () => {
    const access = requiredAccess(policy, NS).map((a) => ({
      ...a,
      allowed: !a.mustNot && !(a.resource === "leases" && a.namespace === NS && a.verb === "update"),
    }));
    const findings = checkAccess(access);
    assert.deepEqual(brief(findings), [`ok ServiceAccount ${NS}/quartermaster-webhook`, `warning ServiceAccount ${NS}/quartermaster-reconciler`]);
    assert.equal(findings[1]!.message, "not allowed to update leases.coordination.k8s.io in quartermaster (the pass Lease)");
  });

  it("the reconciler needs update on every job kind's finalizers, list on namespaces, and the ledger's ConfigMaps by name", () => {
    const on = requiredAccess(policy, NS)
      .filter((a) => !a.mustNot)
      .map(key);
    // Every kind whose pods it adopts (not TrainJob's: JobSet's Jobs own them, so no ownerReference to it is set).
    for (const k of policy.jobKinds.filter((k) => k.kind !== "TrainJob"))
      assert.ok(on.includes(`quartermaster-reconciler update ${k.plural}/finalizers.${k.group}`), k.plural);
    assert.ok(!on.includes("quartermaster-reconciler update trainjobs/finalizers.trainer.kubeflow.org"));
    assert.ok(on.includes("quartermaster-reconciler list namespaces"));
    assert.ok(on.includes("quartermaster-reconciler update configmaps/quartermaster-ledger in quartermaster"));
    assert.ok(on.includes("quartermaster-reconciler delete configmaps/quartermaster-ledger-0 in quartermaster"));
    assert.ok(!on.some((k) => /reconciler (update|delete) configmaps in/.test(k)), "no unnamed update/delete");
  });

  it("a reconciler that may still write the policy ConfigMap (an old unrestricted grant) → warning naming it", () => {
    const access = requiredAccess(policy, NS).map((a) => ({ ...a, allowed: !a.mustNot || a.verb === "update" }));
    const findings = checkAccess(access);
    assert.deepEqual(brief(findings), [`ok ServiceAccount ${NS}/quartermaster-webhook`, `warning ServiceAccount ${NS}/quartermaster-reconciler`]);
    assert.equal(
      findings[1]!.message,
      "allowed to update configmaps/quartermaster-policy in quartermaster (the webhook's policy ConfigMap), which it must not be",
    );
    assert.match(findings[1]!.fix, /reconciler-ledger-rbac\.yaml.*remove other grants/);
  });

  it("SubjectAccessReviews refused to the caller → not checked (warning)", () => {
    assert.deepEqual(brief(checkAccess({ error: "cannot create subjectaccessreviews: HTTP 403" })), ["warning ServiceAccounts"]);
  });
});

/**
 * Issue 45, finding 8: every kind that makes GPU pods is a job to the caps. `/validate/jobs` judges batch Jobs
 * and JobSets with the GPU rules (src/validate/workload.ts): job-gpus on the pods they run at once
 * (src/membership/workload.ts: a Job's parallelism bounded by completions; a JobSet's replicas × each Job's),
 * capacity, the pod-spec rules on every template; never the training-job rules, and nothing at all for one
 * that asks for no GPU. An unsuspend is judged as a CREATE; Kueue's admission (and the JobSet controller's resume
 * of its Jobs) only for the node labels it wrote.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { gpuWorkloadGuard } from "../../../src/admission/guards.js";
import { admitObjects } from "../../../src/cli/admit.js";
import { KUEUE_QUEUE_NAME, kueueWorkloadAdmissionOnly } from "../../../src/kueue/admission.js";
import { STAND_IN_NAMES, StandInUndecided } from "../../../src/core/stand-in.js";
import { QUEUED_WORKLOAD_KINDS } from "../../../src/core/job-shapes.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validateWorkload } from "../../../src/validate/workload.js";
import { jobPodsAtOnce } from "../../../src/membership/workload.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { deepFreeze, request, review } from "../../fixtures/reviews.js";

type Obj = Record<string, unknown>;
const clone = <T>(o: T): T => JSON.parse(JSON.stringify(o)) as T;
const JOB_KIND = QUEUED_WORKLOAD_KINDS.find((k) => k.kind === "Job")!;
const JOBSET_KIND = QUEUED_WORKLOAD_KINDS.find((k) => k.kind === "JobSet")!;

/** A pod template whose one container asks for `gpus` (none: no GPU, cpu only). */
function template(gpus?: number | string, extra: Obj = {}): Obj {
  const resources = gpus === undefined ? { requests: { cpu: "64" }, limits: { cpu: "64" } } : { limits: { "nvidia.com/gpu": String(gpus) } };
  return { spec: { restartPolicy: "Never", containers: [{ name: "main", image: "img", resources }], ...extra } };
}

/** A batch Job; `spec` fields over parallelism 1. */
function batchJob(spec: Obj, o: { gpus?: number | string; labels?: Record<string, string>; owner?: string } = {}): Obj {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name: "train",
      namespace: "team-a",
      uid: "uid-train",
      ...(o.labels ? { labels: o.labels } : {}),
      ...(o.owner ? { ownerReferences: [{ apiVersion: "jobset.x-k8s.io/v1alpha2", kind: "JobSet", name: o.owner, uid: "js", controller: true }] } : {}),
    },
    spec: { ...spec, template: template(o.gpus) },
  };
}

/** A JobSet of `rjobs`: each its replicas, its Job's parallelism (and completions), its pods' GPUs. */
function jobSet(
  rjobs: Array<{ name: string; replicas?: number; parallelism?: number; completions?: number; gpus?: number }>,
  labels?: Record<string, string>,
): Obj {
  return {
    apiVersion: "jobset.x-k8s.io/v1alpha2",
    kind: "JobSet",
    metadata: { name: "train", namespace: "team-a", ...(labels ? { labels } : {}) },
    spec: {
      replicatedJobs: rjobs.map((r) => ({
        name: r.name,
        ...(r.replicas !== undefined ? { replicas: r.replicas } : {}),
        template: {
          spec: {
            ...(r.parallelism !== undefined ? { parallelism: r.parallelism } : {}),
            ...(r.completions !== undefined ? { completions: r.completions } : {}),
            template: template(r.gpus),
          },
        },
      })),
    },
  };
}

/** Run-policy limits set too: none of them may reach a Job or JobSet. */
const CAPPED = {
  limits: {
    job: { gpus: 32, replicas: { Worker: 1 } },
    container: { cpu: "4" },
    runPolicy: { requireTtlSecondsAfterFinished: true, maxBackoffLimit: 1, maxActiveDeadlineSeconds: 60 },
  },
};

const admit = (o: { policy?: Obj; object: Obj; oldObject?: Obj; gpus?: number; operation?: "CREATE" | "UPDATE" }) => {
  const policy = checkPolicy(o.policy ?? CAPPED, "workloads");
  const capacity = o.gpus === undefined ? {} : { capacity: { current: () => ({ total: () => o.gpus }) } };
  const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date(), ...capacity });
  const [group, version] = String(o.object.apiVersion).split("/") as [string, string];
  const kind = String(o.object.kind);
  const result = hooks["/validate/jobs"]!.admit(
    review({
      kind: { group, version, kind },
      resource: { group, version, resource: kind === "Job" ? "jobs" : "jobsets" },
      operation: o.operation ?? (o.oldObject ? "UPDATE" : "CREATE"),
      namespace: "team-a",
      name: "train",
      object: deepFreeze(clone(o.object)),
      oldObject: o.oldObject ? deepFreeze(clone(o.oldObject)) : null,
    }),
  );
  assert.ok(!(result instanceof Promise), "decided at once: nothing to read");
  return result;
};

interface Case {
  name: string;
  policy?: Obj;
  object: Obj;
  oldObject?: Obj;
  gpus?: number;
  /** The violations, as `rule field value` (value when the finding has one). */
  denied: string[];
  warning?: RegExp;
  noWarnings?: boolean;
}

const violationsOf = (r: ReturnType<typeof admit>): string[] =>
  r.policyViolations.filter((v) => v.mode === "deny").map((v) => [v.rule, v.field, ...("value" in v && v.value !== undefined ? [v.value] : [])].join(" "));

const suspended = (o: Obj): Obj => {
  const c = clone(o);
  (c.spec as Obj).suspend = true;
  return c;
};
const resumed = (o: Obj, nodeSelector?: Record<string, string>): Obj => {
  const c = clone(o);
  (c.spec as Obj).suspend = false;
  if (nodeSelector) {
    const t = (c.spec as { template: { spec: Obj } }).template.spec;
    t.nodeSelector = nodeSelector;
    t.tolerations = [{ key: "flavor", operator: "Exists", effect: "NoSchedule" }];
  }
  return c;
};
const QUEUED = { [KUEUE_QUEUE_NAME]: "gpu-queue" };
const A100 = { "nvidia.com/gpu.product": "A100-SXM4-80GB" };
const H100 = { "nvidia.com/gpu.product": "H100-SXM5-80GB" };
const ALLOW_A100 = { limits: { ...CAPPED.limits, allowedAccelerators: ["A100-SXM4-80GB"] } };

describe("/validate/jobs on batch Jobs and JobSets", () => {
  const cases: Case[] = [
    // The red team's two attacks (issue 45 finding 8).
    {
      name: "a batch Job of parallelism 16 × 8 GPUs under a 32-GPU job cap → job-gpus 128 at spec.parallelism",
      object: batchJob({ parallelism: 16 }, { gpus: 8 }),
      denied: ["job-gpus spec.parallelism 128"],
    },
    {
      name: "a JobSet of 16 pods × 8 GPUs under a 32-GPU job cap → job-gpus 128 at spec.replicatedJobs",
      object: jobSet([{ name: "node", replicas: 1, parallelism: 16, completions: 16, gpus: 8 }]),
      denied: ["job-gpus spec.replicatedJobs 128"],
    },
    {
      name: "a JobSet of 16 Jobs of one 8-GPU pod each (replicas) → 128",
      object: jobSet([{ name: "worker", replicas: 16, gpus: 8 }]),
      denied: ["job-gpus spec.replicatedJobs 128"],
    },
    // Pods at once: parallelism bounded by completions (kubernetes pkg/controller/job manageJob wantActive).
    {
      name: "completions 2 < parallelism 16: counted at completions (16 GPUs) → admitted",
      object: batchJob({ parallelism: 16, completions: 2 }, { gpus: 8 }),
      denied: [],
    },
    {
      name: "completions 5 < parallelism 16 over the cap: job-gpus 40 at spec.completions",
      object: batchJob({ parallelism: 16, completions: 5 }, { gpus: 8 }),
      denied: ["job-gpus spec.completions 40"],
    },
    {
      name: "Indexed, completions 8 > parallelism 4: counted at parallelism (32) → admitted, near the limit",
      object: batchJob({ parallelism: 4, completions: 8, completionMode: "Indexed" }, { gpus: 8 }),
      denied: [],
      warning: /runs 32 of the 32 GPUs allowed per job at once/,
    },
    {
      name: "podReplacementPolicy TerminatingOrFailed counts the pods at once, not their replacements (see src/membership/workload.ts)",
      object: batchJob({ parallelism: 4, completions: 4, podReplacementPolicy: "TerminatingOrFailed" }, { gpus: 8 }),
      denied: [],
    },
    { name: "no parallelism: one pod", object: batchJob({}, { gpus: 8 }), denied: [] },
    {
      name: "a suspended Job is counted as it will run",
      object: batchJob({ parallelism: 16, suspend: true }, { gpus: 8 }),
      denied: ["job-gpus spec.parallelism 128"],
    },
    {
      name: "a JobSet's replicated Jobs summed: 2 × 4 pods × 2 GPUs + 1 × 2 pods × 8 + a CPU launcher = 32 → admitted",
      policy: { limits: { job: { gpus: 32 } } },
      object: jobSet([
        { name: "launcher", replicas: 1 },
        { name: "worker", replicas: 2, parallelism: 4, completions: 4, gpus: 2 },
        { name: "eval", parallelism: 2, gpus: 8 },
      ]),
      denied: [],
    },
    {
      name: "the same with one more eval pod: 40 → job-gpus 40 at spec.replicatedJobs",
      policy: { limits: { job: { gpus: 32 } } },
      object: jobSet([
        { name: "launcher", replicas: 1 },
        { name: "worker", replicas: 2, parallelism: 4, completions: 4, gpus: 2 },
        { name: "eval", parallelism: 3, gpus: 8 },
      ]),
      denied: ["job-gpus spec.replicatedJobs 40"],
    },
    {
      name: "the JobSet Trainer makes of a TrainJob of 4 nodes × 8 GPUs, at the cap → admitted",
      object: jobSet([{ name: "node", replicas: 1, parallelism: 4, completions: 4, gpus: 8 }]),
      denied: [],
    },
    {
      name: "a Job a JobSet makes (its controller) of 4 × 8 GPUs, at the cap → admitted",
      object: { ...batchJob({ parallelism: 4, completions: 4, completionMode: "Indexed" }, { gpus: 8, owner: "train" }) },
      denied: [],
    },
    // No GPUs: no finding at all, whatever the run-policy limits, the container cpu cap or the job's size.
    {
      name: "a Job with no GPU (cpu over the container cap, no TTL, backoffLimit 6) → nothing",
      object: batchJob({ parallelism: 500, backoffLimit: 6 }),
      denied: [],
      noWarnings: true,
    },
    { name: "a JobSet with no GPU → nothing", object: jobSet([{ name: "a", replicas: 100, parallelism: 100 }]), denied: [], noWarnings: true },
    // The GPU rules on the templates.
    {
      name: "a template over the per-container GPU cap → container-limits at its path in the JobSet",
      policy: { limits: { container: { gpus: { "nvidia.com/gpu": 8 } } } },
      object: jobSet([{ name: "node", gpus: 16 }]),
      denied: ["container-limits spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu] 16"],
    },
    {
      name: "a template over the per-pod GPU cap → pod-gpus at the Job's template",
      policy: { limits: { pod: { gpus: 4 } } },
      object: batchJob({}, { gpus: 8 }),
      denied: ["pod-gpus spec.template.spec 8"],
    },
    {
      name: "a fractional GPU → extended-resources",
      object: batchJob({}, { gpus: "0.5" }),
      denied: ["extended-resources spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"],
    },
    {
      name: "more GPUs than the cluster has → capacity",
      policy: {},
      object: batchJob({ parallelism: 16 }, { gpus: 8 }),
      gpus: 64,
      denied: ["capacity spec 128"],
    },
    // What cannot be counted is not counted as nothing.
    {
      name: "parallelism that is no number → gpu-unknown at spec.parallelism",
      object: batchJob({ parallelism: "16" }, { gpus: 8 }),
      denied: ["gpu-unknown spec.parallelism"],
    },
    {
      name: "JobSet replicas that are no number → gpu-unknown at the replicas",
      object: {
        ...jobSet([{ name: "node", gpus: 8 }]),
        spec: { replicatedJobs: [{ ...(jobSet([{ name: "node", gpus: 8 }]).spec as { replicatedJobs: Obj[] }).replicatedJobs[0], replicas: -1 }] },
      },
      denied: ["gpu-unknown spec.replicatedJobs[0].replicas"],
    },
    // UPDATEs: only what they make worse, but an unsuspend is a CREATE.
    {
      name: "an unsuspend of an over-cap Job (not queued) → refused",
      oldObject: batchJob({ parallelism: 16, suspend: true }, { gpus: 8 }),
      object: batchJob({ parallelism: 16, suspend: false }, { gpus: 8 }),
      denied: ["job-gpus spec.parallelism 128"],
    },
    {
      name: "an unsuspend of an over-cap JobSet → refused",
      oldObject: suspended(jobSet([{ name: "node", replicas: 16, gpus: 8 }])),
      object: resumed(jobSet([{ name: "node", replicas: 16, gpus: 8 }])),
      denied: ["job-gpus spec.replicatedJobs 128"],
    },
    {
      name: "a running over-cap Job (the cap lowered since) relabelled → admitted (nothing made worse)",
      oldObject: batchJob({ parallelism: 16 }, { gpus: 8 }),
      object: batchJob({ parallelism: 16 }, { gpus: 8, labels: { team: "a" } }),
      denied: [],
    },
    {
      name: "a running Job scaled from 4 to 16 pods (elastic) → refused",
      oldObject: batchJob({ parallelism: 4 }, { gpus: 8 }),
      object: batchJob({ parallelism: 16 }, { gpus: 8 }),
      denied: ["job-gpus spec.parallelism 128"],
    },
    // Kueue's admission: suspend → false and the flavor's node labels (kueue pkg/controller/jobs/job RunWithPodSetsInfo).
    {
      name: "Kueue's admission of a queued Job within the caps → admitted",
      policy: ALLOW_A100,
      oldObject: batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED }),
      object: resumed(batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED }), A100),
      denied: [],
    },
    {
      name: "Kueue's admission of a queued Job over a cap lowered since CREATE → admitted with a warning (never stranded)",
      oldObject: batchJob({ parallelism: 16, suspend: true }, { gpus: 8, labels: QUEUED }),
      object: resumed(batchJob({ parallelism: 16, suspend: true }, { gpus: 8, labels: QUEUED }), A100),
      denied: [],
      warning: /Kueue's admission not refused for what the job already had: spec.parallelism/,
    },
    {
      name: "Kueue's admission whose node labels select a disallowed accelerator → refused at the nodeSelector",
      policy: ALLOW_A100,
      oldObject: batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED }),
      object: resumed(batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED }), H100),
      denied: ["accelerator-allowed spec.template.spec.nodeSelector[nvidia.com/gpu.product]"],
    },
    {
      name: "the JobSet controller's resume of its over-cap Job (the cap lowered since) → admitted with a warning",
      oldObject: batchJob({ parallelism: 16, suspend: true }, { gpus: 8, owner: "train" }),
      object: resumed(batchJob({ parallelism: 16, suspend: true }, { gpus: 8, owner: "train" }), A100),
      denied: [],
      warning: /Kueue's admission not refused/,
    },
    {
      name: "a queued over-cap Job resumed with more than Kueue writes (parallelism raised) → refused",
      oldObject: batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED }),
      object: resumed(batchJob({ parallelism: 16, suspend: true }, { gpus: 8, labels: QUEUED }), A100),
      denied: ["job-gpus spec.parallelism 128"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = admit({
        object: c.object,
        ...(c.oldObject ? { oldObject: c.oldObject } : {}),
        ...(c.policy ? { policy: c.policy } : {}),
        ...(c.gpus !== undefined ? { gpus: c.gpus } : {}),
      });
      assert.deepEqual(violationsOf(r), c.denied);
      assert.equal(r.outcome === "denied", c.denied.length > 0, JSON.stringify(r.review.response));
      const warnings = r.review.response!.warnings ?? [];
      if (c.warning)
        assert.ok(
          warnings.some((w) => c.warning!.test(w)),
          JSON.stringify(warnings),
        );
      if (c.noWarnings) {
        assert.deepEqual(warnings, []);
        assert.deepEqual(r.policyViolations, []);
      }
    });
  }

  it("a refusal names the pods at once and the limit", () => {
    const r = admit({ object: jobSet([{ name: "node", replicas: 2, parallelism: 8, completions: 8, gpus: 8 }]) });
    const denied = r.review.response!.status?.details?.causes?.map((c) => c.message) ?? [];
    assert.ok(
      denied.some((m) => /the JobSet runs 128 GPUs at once in all \(node: 16 pods × 8\), over the per-job limit of 32/.test(m)),
      JSON.stringify(denied),
    );
  });
});

describe("the GPU rules alone (validateWorkload)", () => {
  const policy = checkPolicy(CAPPED, "workloads");
  const ctx = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a"), claims: { claims: new Map(), templates: new Map() } };
  it("a Job that asks for no GPU gets no finding, even past the guard (a claim that is not a GPU's, cpu over the container cap)", () => {
    const job = batchJob({ parallelism: 1000 });
    ((job.spec as { template: { spec: Obj } }).template.spec as Obj).resourceClaims = [{ name: "nic", resourceClaimTemplateName: "sriov" }];
    // The template as the webhook reads it (a claim never read would be unknown, and refused under a cap: gpu-unknown).
    const nic = { devices: { requests: [{ name: "nic", exactly: { deviceClassName: "sriov.example.com" } }] } };
    const withClaims = { ...ctx, claims: { claims: new Map(), templates: new Map([["sriov", nic]]) } };
    assert.deepEqual(validateWorkload(job as KubeObject, JOB_KIND, withClaims), { violations: [], warnings: [] });
  });
  it("the training-job rules never apply (no job-name, job-shape, job-replicas, run-policy on a GPU Job)", () => {
    const job = batchJob({ parallelism: 2, backoffLimit: 6 }, { gpus: 8 });
    (job.metadata as Obj).name = "Not_A_DNS_Label";
    const rules = validateWorkload(job as KubeObject, JOB_KIND, ctx).violations.map((v) => v.rule);
    assert.deepEqual(rules, []);
  });
});

describe("pods at once (jobPodsAtOnce, from kubernetes pkg/controller/job manageJob)", () => {
  const cases: Array<[string, Obj, unknown]> = [
    ["neither set: 1", {}, { pods: 1n, field: "spec.parallelism" }],
    ["parallelism alone", { parallelism: 7 }, { pods: 7n, field: "spec.parallelism" }],
    ["completions below parallelism", { parallelism: 7, completions: 3 }, { pods: 3n, field: "spec.completions" }],
    ["completions above parallelism", { parallelism: 7, completions: 30 }, { pods: 7n, field: "spec.parallelism" }],
    ["parallelism 0 (a Job scaled to nothing)", { parallelism: 0, completions: 3 }, { pods: 0n, field: "spec.parallelism" }],
    ["a fraction", { parallelism: 1.5 }, { problem: "1.5 must be a whole number from 0 to 2147483647", field: "spec.parallelism" }],
    ["completions a string", { parallelism: 2, completions: "3" }, { problem: '"3" must be an integer, not string', field: "spec.completions" }],
  ];
  for (const [name, spec, want] of cases) it(name, () => assert.deepEqual(jobPodsAtOnce(spec, "spec"), want));
});

describe("kueueWorkloadAdmissionOnly", () => {
  const js = (): Obj => suspended(jobSet([{ name: "node", replicas: 2, parallelism: 4, gpus: 8 }, { name: "launcher" }], QUEUED));
  const admitted = (o: Obj, edit: (rjob: Obj, i: number) => void = () => {}): Obj => {
    const c = clone(o);
    (c.spec as Obj).suspend = false;
    ((c.spec as { replicatedJobs: Obj[] }).replicatedJobs as Obj[]).forEach((r, i) => {
      const pod = ((r.template as Obj).spec as { template: { spec: Obj } }).template;
      pod.spec.nodeSelector = A100;
      edit(r, i);
    });
    return c;
  };
  const cases: Array<{ name: string; now: Obj; unsuspended?: boolean; nodeSelector?: Obj }> = [
    { name: "suspend → false and each template's node labels: Kueue's", now: admitted(js()), unsuspended: true, nodeSelector: A100 },
    { name: "and replicas raised: not Kueue's", now: admitted(js(), (r, i) => void (i === 0 && (r.replicas = 16))) },
    {
      name: "and a container's GPUs raised: not Kueue's",
      now: admitted(js(), (r, i) => void (i === 0 && (((r.template as Obj).spec as { template: Obj }).template = template(16)))),
    },
    {
      name: "a replicated Job added: not Kueue's",
      now: (() => {
        const c = admitted(js());
        (c.spec as { replicatedJobs: Obj[] }).replicatedJobs.push({ name: "x", template: { spec: { template: template(8) } } });
        return c;
      })(),
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = kueueWorkloadAdmissionOnly(js() as KubeObject, c.now as KubeObject, JOBSET_KIND);
      if (c.unsuspended === undefined) return assert.equal(got, undefined);
      assert.equal(got?.unsuspended, c.unsuspended);
      assert.deepEqual(
        got?.templates.map((t) => t.nodeSelector),
        [c.nodeSelector, c.nodeSelector],
      );
      assert.deepEqual(
        got?.templates.map((t) => t.templateField),
        [0, 1].map((i) => `spec.replicatedJobs[${i}].template.spec.template`),
      );
    });
  }
});

describe("gpuWorkloadGuard (the match condition's test, exactly)", () => {
  const policy = defaultPolicy();
  const guard = (kind: typeof JOB_KIND, object: Obj) =>
    gpuWorkloadGuard(policy, kind)(request({ kind: { group: kind.group, version: kind.version, kind: kind.kind }, object: object as KubeObject }));
  const standIn = (length: number, names: string[] | null): unknown[] => Object.assign(new Array(length), { [STAND_IN_NAMES]: names });
  it("a GPU Job or JobSet is the webhook's; one without GPUs or claims is skipped", () => {
    assert.equal(guard(JOB_KIND, batchJob({}, { gpus: 1 })), undefined);
    assert.equal(guard(JOBSET_KIND, jobSet([{ name: "a" }, { name: "b", gpus: 1 }])), undefined);
    assert.match(guard(JOB_KIND, batchJob({}))!, /ask for no GPU/);
    assert.match(guard(JOBSET_KIND, jobSet([{ name: "a" }]))!, /ask for no GPU/);
  });
  it("a template naming ResourceClaims is the webhook's (DRA)", () => {
    const job = batchJob({});
    ((job.spec as { template: { spec: Obj } }).template.spec as Obj).resourceClaims = [{ name: "gpu", resourceClaimTemplateName: "t" }];
    assert.equal(guard(JOB_KIND, job), undefined);
  });
  it("stand-in container lists decide by their resource names; stand-in replicatedJobs cannot", () => {
    const job = (containers: unknown[]): Obj => ({ ...batchJob({}), spec: { template: { spec: { containers } } } });
    assert.equal(guard(JOB_KIND, job(standIn(2000, ["cpu", "nvidia.com/gpu"]))), undefined);
    assert.match(guard(JOB_KIND, job(standIn(2000, ["cpu"])))!, /ask for no GPU/);
    assert.throws(() => guard(JOB_KIND, job(standIn(2000, null))), StandInUndecided);
    assert.throws(() => guard(JOBSET_KIND, { ...jobSet([]), spec: { replicatedJobs: standIn(5000, ["nvidia.com/gpu"]) } }), StandInUndecided);
  });
});

describe("a refused Kueue admission of a batch Job", () => {
  // The Event is written after the answer, once the Job has been read fresh with the review's uid (issue 46).
  const settled = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  };
  const run = async (dryRun: boolean, stored?: KubeObject[]) => {
    const written: KubeObject[] = [];
    const old = batchJob({ parallelism: 4, suspend: true }, { gpus: 8, labels: QUEUED });
    const policy = checkPolicy(ALLOW_A100, "workloads");
    const hooks = createWebhooks({
      policy,
      log: capturingLogger().log,
      jobs: fakeJobReader(stored ?? [old as KubeObject]),
      now: () => new Date(0),
      events: { write: (e) => void written.push(e) },
    });
    const r = hooks["/validate/jobs"]!.admit(
      review({
        kind: { group: "batch", version: "v1", kind: "Job" },
        resource: { group: "batch", version: "v1", resource: "jobs" },
        operation: "UPDATE",
        namespace: "team-a",
        name: "train",
        dryRun,
        object: deepFreeze(resumed(old, H100)),
        oldObject: deepFreeze(clone(old)),
      }),
    );
    await settled();
    return { r: r as Exclude<typeof r, Promise<unknown>>, written };
  };
  it("writes a KueueAdmissionRefused Event on the Job, as for a training job", async () => {
    const { r, written } = await run(false);
    assert.equal(r.outcome, "denied");
    assert.deepEqual(
      written.map((e) => [e.reason, (e.involvedObject as Obj).apiVersion, (e.involvedObject as Obj).kind, (e.involvedObject as Obj).name]),
      [["KueueAdmissionRefused", "batch/v1", "Job", "train"]],
    );
  });
  it("none on a dry run", async () => assert.deepEqual((await run(true)).written, []));
  it("none for a Job the cluster does not have (a spoofed review)", async () => assert.deepEqual((await run(false, [])).written, []));
});

describe("quartermaster admit (offline) on batch Jobs and JobSets", () => {
  const admitted = async (policy: Obj, object: Obj) =>
    (await admitObjects([{ source: "in.yaml#1", object: object as KubeObject }], { policy: checkPolicy(policy, "workloads") }))[0]!;
  it("judges the object whole, as /validate/jobs does: job-gpus at spec.parallelism", async () => {
    const r = await admitted(CAPPED, batchJob({ parallelism: 16 }, { gpus: 8 }));
    assert.deepEqual(
      r.violations.map((v) => `${v.rule} ${v.field}`),
      ["job-gpus spec.parallelism"],
    );
  });
  it("a template's violation found by both the job and the pod rules is reported once", async () => {
    const r = await admitted({ limits: { container: { gpus: { "nvidia.com/gpu": 4 } } } }, jobSet([{ name: "node", gpus: 8 }]));
    assert.deepEqual(
      r.violations.map((v) => `${v.rule} ${v.field}`),
      ["container-limits spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"],
    );
  });
});

describe("UPDATEs of batch Jobs and JobSets a controller or a user makes every day (review findings)", () => {
  /** A JobSet Trainer made for a TrainJob: its controller. */
  const ofTrainJob = (o: Obj): Obj => {
    const c = clone(o);
    (c.metadata as Obj).ownerReferences = [{ apiVersion: "trainer.kubeflow.org/v1alpha1", kind: "TrainJob", name: "train", uid: "tj", controller: true }];
    return c;
  };
  // 2 × 8 pods × 4 GPUs: 64, over the job cap of 32 (lowered since the TrainJob was admitted, say).
  const big = jobSet([{ name: "node", replicas: 2, parallelism: 8, completions: 8, gpus: 4 }]);

  it("Trainer's resume of a TrainJob's JobSet over the cap → admitted (the TrainJob was judged whole at its own unsuspend)", () => {
    const old = suspended(ofTrainJob(big));
    assert.equal(admit({ object: resumed(old), oldObject: old }).outcome, "allowed");
  });
  it("the same resume of a JobSet no TrainJob controls → denied (judged as a CREATE)", () => {
    const old = suspended(big);
    assert.equal(admit({ object: resumed(old), oldObject: old }).outcome, "denied");
  });

  // 16 replicated Jobs of 40 containers: within the cost bound alone, over it priced with the old object too.
  const wide = jobSet(Array.from({ length: 16 }, (_, i) => ({ name: `r${i}`, parallelism: 1, completions: 1, gpus: 1 })));
  for (const r of (wide.spec as { replicatedJobs: Array<{ template: { spec: { template: { spec: { containers: Obj[] } } } } }> }).replicatedJobs) {
    const containers = r.template.spec.template.spec.containers;
    for (let i = 1; i < 40; i++) containers.push({ name: `c${i}`, image: "x" });
  }
  it("a wide JobSet is admitted at CREATE", () => assert.equal(admit({ object: wide }).outcome, "allowed"));
  for (const [name, change] of [
    ["a label", (o: Obj) => void ((o.metadata as Obj).labels = { team: "a" })],
    ["Kueue's preemption (suspend: true)", (o: Obj) => void ((o.spec as Obj).suspend = true)],
    ["a finalizer removed on deletion", (o: Obj) => void ((o.metadata as Obj).deletionTimestamp = "2026-12-04T00:00:00Z")],
  ] as const) {
    it(`then ${name} → admitted, neither priced nor checked again (its GPUs did not change)`, () => {
      const now = clone(wide);
      change(now);
      const r = admit({ object: now, oldObject: wide });
      assert.equal(r.outcome, "allowed");
      assert.notEqual(r.decidedBy, "cost-bound");
    });
  }
});

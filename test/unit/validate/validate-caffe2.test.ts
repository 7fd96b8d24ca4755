/**
 * `/validate/jobs` for Caffe2Job (src/validate/job.ts), the kind Quartermaster runs itself: the policy's
 * limits apply as to every other kind (replicas, GPUs, runPolicy caps, allowed cleanPodPolicy and
 * restartPolicy), at Caffe2Job's own paths (`spec.replicaSpecs`, one replica type); the restart policy the
 * job controller would use (the replica spec's, else the template's) is the one checked; and, since no CRD
 * schema checks a Caffe2Job's runPolicy (its CRD keeps unknown fields), fields the job controller cannot read
 * are refused at admission instead of leaving the job undone with only a log line. Kubeflow kinds keep
 * their CRD's checks and are unchanged.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { replicaObjectName as nameOfReplica } from "../../../src/mutate/frameworks.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { JobKind } from "../../../src/policy/types.js";
import { replicaObjectName } from "../../../src/reconcile/job-controller.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const strict = checkPolicy(
  {
    limits: {
      container: { gpus: { "nvidia.com/gpu": 8 } },
      pod: { gpus: 8 },
      job: { gpus: 16, replicas: { Worker: 4 } },
      runPolicy: {
        requireTtlSecondsAfterFinished: true,
        maxTtlSecondsAfterFinished: 86400,
        maxActiveDeadlineSeconds: 3600,
        maxBackoffLimit: 3,
        allowedCleanPodPolicies: ["All", "Running"],
        allowedRestartPolicies: ["OnFailure", "Never", "ExitCode"],
      },
    },
  },
  "strict",
);
const open = checkPolicy({}, "open");
const ctx = (policy = strict): ValidationContext => ({ policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") });
type Want = Array<[rule: string, field: string, message: string]>;
const got = (f: { violations: Array<{ rule: string; field: string; message: string }> }): Want => f.violations.map((v) => [v.rule, v.field, v.message]);

const C2 = kindOf("Caffe2Job");
const okRunPolicy = { ttlSecondsAfterFinished: 3600, cleanPodPolicy: "Running" };
/** Caffe2Job team-a/ex with `replicas` workers; `edit` changes a copy of it. */
const c2 = (replicas: number, edit: (j: any) => void = () => undefined, runPolicy: unknown = okRunPolicy): KubeObject => {
  const j = structuredClone(job("Caffe2Job", "ex", "team-a", { Worker: replicas }, { RuntimeID: "r1", runPolicy })) as any;
  j.spec.replicaSpecs.template.spec.containers[0].name = "trainer"; // Caffe2 names no container
  edit(j);
  return j;
};
const gpus = (n: string) => (j: any) => (j.spec.replicaSpecs.template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": n } });

describe("validateJob: Caffe2Job against the policy's limits", () => {
  const cases: Array<{ name: string; job: KubeObject; policy?: ReturnType<typeof checkPolicy>; want: Want }> = [
    { name: "a well-formed Caffe2Job under the limits → allowed", job: c2(4), want: [] },
    { name: "5 workers over a cap of 4", job: c2(5), want: [["job-replicas", "spec.replicaSpecs.replicas", "5 exceeds the limit of 4 Worker replicas"]] },
    {
      name: "replicas as a string is no count",
      job: c2(1, (j) => (j.spec.replicaSpecs.replicas = "3")),
      want: [["job-replicas", "spec.replicaSpecs.replicas", '"3" must be an integer, not string']],
    },
    {
      name: "3 workers × 8 GPUs = 24 over the per-job 16",
      job: c2(3, gpus("8")),
      want: [["job-gpus", "spec", "the job requests 24 GPUs in all, over the per-job limit of 16"]],
    },
    {
      name: "a template over the per-container and per-pod GPU limits → at the template's path",
      job: c2(1, gpus("9")),
      want: [
        ["container-limits", "spec.replicaSpecs.template.spec.containers[0].resources.limits[nvidia.com/gpu]", "9 exceeds the per-container limit of 8"],
        ["pod-gpus", "spec.replicaSpecs.template.spec", "the pod requests 9 GPUs, over the per-pod limit of 8"],
      ],
    },
    {
      name: "runPolicy: no TTL, too long a deadline, too many retries, cleanPodPolicy None",
      job: c2(1, () => undefined, { activeDeadlineSeconds: 7200, backoffLimit: 10, cleanPodPolicy: "None" }),
      want: [
        ["run-policy", "spec.runPolicy.ttlSecondsAfterFinished", "is required: finished jobs must be cleaned up"],
        ["run-policy", "spec.runPolicy.activeDeadlineSeconds", "7200 exceeds the limit of 3600 seconds"],
        ["run-policy", "spec.runPolicy.backoffLimit", "10 exceeds the limit of 3 retries"],
        ["run-policy", "spec.runPolicy.cleanPodPolicy", "None is not allowed; allowed: All, Running"],
      ],
    },
    {
      name: "no runPolicy at all: the TTL is required",
      job: c2(1, (j) => delete j.spec.runPolicy),
      want: [["run-policy", "spec.runPolicy.ttlSecondsAfterFinished", "is required: finished jobs must be cleaned up"]],
    },
    {
      name: "a TTL over the cap",
      job: c2(1, () => undefined, { ttlSecondsAfterFinished: 90000 }),
      want: [["run-policy", "spec.runPolicy.ttlSecondsAfterFinished", "90000 exceeds the limit of 86400 seconds"]],
    },
    {
      name: "replicaSpecs.restartPolicy Always is not allowed",
      job: c2(1, (j) => (j.spec.replicaSpecs.restartPolicy = "Always")),
      want: [["run-policy", "spec.replicaSpecs.restartPolicy", "Always is not allowed; allowed: OnFailure, Never, ExitCode"]],
    },
    {
      name: "no replica-level restartPolicy: the template's is the one the controller uses, and is checked",
      job: c2(1, (j) => (j.spec.replicaSpecs.template.spec.restartPolicy = "Always")),
      want: [["run-policy", "spec.replicaSpecs.template.spec.restartPolicy", "Always is not allowed; allowed: OnFailure, Never, ExitCode"]],
    },
    {
      name: "a replica-level restartPolicy overrides the template's: only it is checked",
      job: c2(1, (j) => {
        j.spec.replicaSpecs.restartPolicy = "OnFailure";
        j.spec.replicaSpecs.template.spec.restartPolicy = "Always";
      }),
      want: [],
    },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(got(validateJob(c.job, C2, ctx(c.policy))), c.want));
});

describe("validateJob: what Quartermaster's job controller cannot read is refused (no CRD schema checks it)", () => {
  const cases: Array<{ name: string; runPolicy?: unknown; edit?: (j: any) => void; want: Want }> = [
    {
      name: "backoffLimit as a string",
      runPolicy: { backoffLimit: "3" },
      want: [["run-policy", "spec.runPolicy.backoffLimit", '"3" must be an integer, not string']],
    },
    {
      name: "a negative backoffLimit",
      runPolicy: { backoffLimit: -1 },
      want: [["run-policy", "spec.runPolicy.backoffLimit", "-1 must be a whole number from 0 to 2147483647"]],
    },
    {
      name: "activeDeadlineSeconds 0",
      runPolicy: { activeDeadlineSeconds: 0 },
      want: [["run-policy", "spec.runPolicy.activeDeadlineSeconds", "0 must be at least 1"]],
    },
    {
      name: "a fractional ttlSecondsAfterFinished",
      runPolicy: { ttlSecondsAfterFinished: 1.5 },
      want: [["run-policy", "spec.runPolicy.ttlSecondsAfterFinished", "1.5 must be a whole number from 0 to 2147483647"]],
    },
    { name: "suspend as a string", runPolicy: { suspend: "yes" }, want: [["run-policy", "spec.runPolicy.suspend", '"yes" must be a boolean']] },
    { name: "runPolicy not an object", runPolicy: "soon", want: [["run-policy", "spec.runPolicy", '"soon" must be an object']] },
    {
      name: "an unknown restartPolicy",
      edit: (j) => (j.spec.replicaSpecs.restartPolicy = "Sometimes"),
      want: [["run-policy", "spec.replicaSpecs.restartPolicy", '"Sometimes" is not one of Always, OnFailure, Never, ExitCode']],
    },
    {
      name: "well-typed fields → allowed",
      runPolicy: { backoffLimit: 0, activeDeadlineSeconds: 1, ttlSecondsAfterFinished: 0, suspend: true, cleanPodPolicy: "All" },
      edit: (j) => (j.spec.replicaSpecs.restartPolicy = "ExitCode"),
      want: [],
    },
  ];
  for (const c of cases) {
    it(`${c.name} (a policy with no caps)`, () => assert.deepEqual(got(validateJob(c2(1, c.edit, c.runPolicy), C2, ctx(open))), c.want));
  }

  it("a Caffe2Job marked controller: operator (caffe2-operator runs it) is not held to the job controller's reading", () => {
    const j = c2(1, (x) => (x.spec.replicaSpecs.restartPolicy = "Sometimes"), { backoffLimit: "3", suspend: "yes" });
    assert.deepEqual(got(validateJob(j, { ...C2, controller: "operator" }, ctx(open))), []);
  });

  it("a TFJob with the same fields: unchanged (its CRD's schema checks them)", () => {
    const tf = structuredClone(
      job("TFJob", "mnist", "team-a", { Worker: 1 }, { runPolicy: { backoffLimit: "3", suspend: "yes", activeDeadlineSeconds: 0 } }),
    ) as any;
    assert.deepEqual(got(validateJob(tf, kindOf("TFJob"), ctx(open))), []);
  });

  it("a TFJob marked controller: quartermaster is held to it too", () => {
    const tf = structuredClone(job("TFJob", "mnist", "team-a", { Worker: 1 }, { runPolicy: { suspend: "yes" } })) as any;
    assert.deepEqual(got(validateJob(tf, { ...kindOf("TFJob"), controller: "quartermaster" }, ctx(open))), [
      ["run-policy", "spec.runPolicy.suspend", '"yes" must be a boolean'],
    ]);
  });
});

// Issue 29 item 7: the name check used `<job>-worker-<i>` while the Caffe2 controller names pods and Services
// `<namespace>-<job>-worker-<i>`, so 70-character or digit-first Service names were admitted.
describe("validateJob: Caffe2Job names checked as the controller makes them (<namespace>-<job>-worker-<index>)", () => {
  const named = (name: string, namespace: string, replicas: number, edit: (j: any) => void = () => undefined): KubeObject =>
    c2(replicas, (j) => {
      j.metadata.name = name;
      j.metadata.namespace = namespace;
      edit(j);
    });
  const TF = kindOf("TFJob");
  const n = (len: number): string => "j" + "x".repeat(len - 1);
  const cases: Array<{ name: string; job: KubeObject; kind?: JobKind; namespace?: string; want: Want }> = [
    // team-a- (7) + 47 + -worker-0 (9) = 63
    { name: "team-a/<47 chars>, 1 worker: 63 characters → allowed", job: named(n(47), "team-a", 1), want: [] },
    {
      name: "team-a/<48 chars>, 1 worker: 64 characters (the job-only name would be 57) → denied",
      job: named(n(48), "team-a", 1),
      want: [
        [
          "job-name",
          "metadata.name",
          `pod name team-a-${n(48)}-worker-0 would be 64 characters, over 63: shorten the job name (the Caffe2 controller prefixes it with the namespace)`,
        ],
      ],
    },
    {
      name: "team-a/<54 chars>: the issue's 70-character Service name → denied",
      job: named(n(54), "team-a", 1),
      want: [
        [
          "job-name",
          "metadata.name",
          `pod name team-a-${n(54)}-worker-0 would be 70 characters, over 63: shorten the job name (the Caffe2 controller prefixes it with the namespace)`,
        ],
      ],
    },
    {
      name: "team-a/<47 chars>, 10 workers: the last index, worker-9, is 63 → allowed",
      job: named(n(47), "team-a", 10),
      want: [],
    },
    {
      name: "team-a/<47 chars>, 11 workers: worker-10 is 64 → denied",
      job: named(n(47), "team-a", 11),
      want: [
        [
          "job-name",
          "metadata.name",
          `pod name team-a-${n(47)}-worker-10 would be 64 characters, over 63: shorten the job name (the Caffe2 controller prefixes it with the namespace)`,
        ],
      ],
    },
    {
      name: "a digit-first namespace: 1team-ex-worker-0 is no DNS-1035 label → denied",
      job: named("ex", "1team", 1),
      namespace: "1team",
      want: [
        [
          "job-name",
          "metadata.name",
          'Service name "1team-ex-worker-0" would not be a DNS-1035 label (lower-case letters, digits and \'-\', starting with a letter): the Caffe2 controller names replicas <namespace>-<job>-worker-<index>, and namespace "1team" does not start with a letter',
        ],
      ],
    },
    {
      name: "no metadata.namespace (a CREATE): the request's namespace is used",
      job: named("ex", "1team", 1, (j) => delete j.metadata.namespace),
      namespace: "1team",
      want: [
        [
          "job-name",
          "metadata.name",
          'Service name "1team-ex-worker-0" would not be a DNS-1035 label (lower-case letters, digits and \'-\', starting with a letter): the Caffe2 controller names replicas <namespace>-<job>-worker-<index>, and namespace "1team" does not start with a letter',
        ],
      ],
    },
    { name: "zero workers: no names to check", job: named("ex", "1team", 0), namespace: "1team", want: [] },
    {
      name: "a TFJob in the same digit-first namespace: its names carry no namespace → allowed",
      job: job("TFJob", "ex", "1team", { Worker: 1 }, { runPolicy: okRunPolicy }),
      kind: TF,
      namespace: "1team",
      want: [],
    },
    {
      name: "a TFJob of 55 characters in team-a: <job>-worker-0 is 64 → denied as before",
      job: job("TFJob", n(55), "team-a", { Worker: 1 }, { runPolicy: okRunPolicy }),
      kind: TF,
      want: [["job-name", "metadata.name", `pod name ${n(55)}-worker-0 would be 64 characters, over 63: shorten the job name`]],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const c0 = { ...ctx(open), namespace: c.namespace ?? "team-a" };
      assert.deepEqual(
        got(validateJob(c.job, c.kind ?? C2, c0)).filter(([rule]) => rule === "job-name"),
        c.want,
      );
    });
  }

  it("the names checked are the controller's: replicaObjectName is the one function both use", () => {
    const j = named(n(20), "team-a", 3);
    assert.equal(replicaObjectName(j, C2, "worker", 2), `team-a-${n(20)}-worker-2`);
    assert.equal(nameOfReplica("caffe2", "team-a", n(20), "Worker", 2), replicaObjectName(j, C2, "worker", 2));
  });
});

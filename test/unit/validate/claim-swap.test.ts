/**
 * A ResourceClaimTemplate created again asking more after the job naming it was admitted (red team: `job.gpus: 8`,
 * a suspended TFJob of 8 workers × a 1-GPU template admitted, the template deleted and created again asking 8, the
 * job unsuspended: 64 GPUs). `/validate/pods` judges a DRA pod of a job with its job, the claims read as they are now
 * (src/validate/pod-job.ts, src/admission/pod-job.ts): through the webhooks and the real cached reader (src/kube/jobs.ts),
 * over a store that a test changes as the apiserver would (a new uid and resourceVersion at each CREATE).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../../src/core/kube.js";
import { cachedJobReader, type GetObject } from "../../../src/kube/jobs.js";
import { readPodJob } from "../../../src/admission/pod-job.js";
import { claimSpecOf, type DeviceClassRead } from "../../../src/core/dra.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { keptJobFindings, podJobFindings } from "../../../src/validate/pod-job.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { review } from "../../fixtures/reviews.js";

const NS = "team-a";

/** An apiserver's objects by `plural/name`: each put gets a new uid and resourceVersion, as a CREATE does. */
class Store {
  private readonly objects = new Map<string, KubeObject>();
  private version = 100;
  readonly asked: string[] = [];
  failing = new Set<string>();
  put(plural: string, obj: KubeObject): KubeObject {
    const name = (obj.metadata as { name: string }).name;
    const v = ++this.version;
    const stored = { ...obj, metadata: { ...(obj.metadata as object), namespace: NS, uid: `uid-${name}-${v}`, resourceVersion: String(v) } };
    this.objects.set(`${plural}/${name}`, stored);
    return stored;
  }
  delete(plural: string, name: string): void {
    this.objects.delete(`${plural}/${name}`);
  }
  /** The GetObject the cached reader is built over: whole objects, and metadata alone. */
  client(): GetObject {
    const read = (what: string) => (kind: ObjectKind, _ns: string, name: string) => {
      this.asked.push(`${what} ${kind.plural}/${name}`);
      if (this.failing.has(kind.plural)) return Promise.reject(new Error(`HTTP 503: ${kind.plural} unavailable`));
      return Promise.resolve(this.objects.get(`${kind.plural}/${name}`));
    };
    const get = read("get") as GetObject;
    get.metadata = (kind, ns, name) => read("metadata")(kind, ns, name).then((o) => o && { metadata: o.metadata });
    return get;
  }
}

const template = (name: string, count: number, deviceClassName = "gpu.nvidia.com"): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name },
  spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName, count } }] } } },
});

/** A pod spec naming the template `claim` for its one container. */
const draSpec = (claim: string, container = "tensorflow") => ({
  resourceClaims: [{ name: "gpus", resourceClaimTemplateName: claim }],
  containers: [{ name: container, image: "x", resources: { claims: [{ name: "gpus" }] } }],
});

const tfJob = (workers: number, claim = "gpus", ps?: string): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "TFJob",
  metadata: { name: "tf" },
  spec: {
    tfReplicaSpecs: {
      Worker: { replicas: workers, template: { spec: draSpec(claim) } },
      ...(ps ? { PS: { replicas: 1, template: { spec: draSpec(ps) } } } : {}),
    },
  },
});

const batchJob = (parallelism: number, owner?: KubeObject): KubeObject => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "bj", ...(owner ? { ownerReferences: [controllerRef(owner)] } : {}) },
  spec: { parallelism, completions: parallelism, template: { spec: { ...draSpec("gpus", "main"), restartPolicy: "Never" } } },
});

const jobSet = (replicas: number, parallelism: number): KubeObject => ({
  apiVersion: "jobset.x-k8s.io/v1alpha2",
  kind: "JobSet",
  metadata: { name: "js" },
  spec: {
    replicatedJobs: [
      {
        name: "node",
        replicas,
        template: { spec: { parallelism, completions: parallelism, template: { spec: { ...draSpec("gpus", "main"), restartPolicy: "Never" } } } },
      },
    ],
  },
});

function controllerRef(owner: KubeObject) {
  const m = owner.metadata as { name: string; uid: string };
  return { apiVersion: owner.apiVersion as string, kind: owner.kind as string, name: m.name, uid: m.uid, controller: true };
}

/** A pod its controller made from the template `claim`. */
const podOf = (owner: KubeObject | undefined, name = "p", claim = "gpus"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS, ...(owner ? { ownerReferences: [controllerRef(owner)] } : {}) },
  spec: draSpec(claim),
});

/** A pod's CREATE (`review`'s defaults) in {@link NS}. */
const podReview = (pod: KubeObject) => review({ namespace: NS, object: pod });

const policyOf = (limits: object, extra: object = {}): Policy => checkPolicy({ limits, ...extra }, "claim-swap");
const CAPPED = policyOf({ pod: { gpus: 8 }, job: { gpus: 8 } });

/** `/validate/pods` over the store, through the real cached reader (a 5 s TTL, the policy's default). */
function webhookOver(store: Store, policy = CAPPED) {
  const jobs = cachedJobReader(() => Promise.resolve(store.client()), { ttlMs: 5000 });
  const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs, now: () => new Date() });
  return async (pod: KubeObject) => {
    const response = (await hooks["/validate/pods"]!.admit(podReview(pod))).review.response!;
    const causes = (response.status?.details?.causes ?? []) as Array<{ field?: string; message?: string; reason?: string }>;
    return { allowed: response.allowed, causes, warnings: (response.warnings ?? []).join("\n") };
  };
}

/** The template `name` deleted and created again asking `count` (what `kubectl replace --force` does). */
const swap = (store: Store, name: string, count: number) => {
  store.delete("resourceclaimtemplates", name);
  store.put("resourceclaimtemplates", template(name, count));
};

describe("a ResourceClaimTemplate created again after its job's admission: the job's pods judged with it as it is now", () => {
  interface Case {
    name: string;
    policy?: Policy;
    /** Puts the objects; returns the pod the controller creates. */
    setup(store: Store): KubeObject;
    /** What happens between a first pod's admission (through the cache) and the pod judged. */
    then?(store: Store): void;
    allowed: boolean;
    cause?: { field: string; message: RegExp };
    warning?: RegExp;
  }
  const cases: Case[] = [
    {
      name: "TFJob, 8 workers × a 1-GPU template, cap 8: a worker admitted",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 1)), podOf(s.put("tfjobs", tfJob(8)))),
      allowed: true,
    },
    {
      name: "TFJob, the template created again asking 8 within the cache's 5 s: 64 GPUs, the worker refused at spec.resourceClaims",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 1)), podOf(s.put("tfjobs", tfJob(8)))),
      then: (s) => swap(s, "gpus", 8),
      allowed: false,
      cause: {
        field: "spec.resourceClaims",
        message:
          /TFJob team-a\/tf: the job requests 64 GPUs in all, over the per-job limit of 8, with the claims its pod templates name as they are now \(at spec\)\..*restore it, or delete the job/,
      },
    },
    {
      name: "TFJob, the template created again asking 8, job-gpus in warn mode: admitted with the warning",
      policy: policyOf({ pod: { gpus: 8 }, job: { gpus: 8 } }, { enforcement: { rules: { "job-gpus": "warn" } } }),
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 1)), podOf(s.put("tfjobs", tfJob(8)))),
      then: (s) => swap(s, "gpus", 8),
      allowed: true,
      warning: /job-gpus \(warn\): spec\.resourceClaims: TFJob team-a\/tf: the job requests 64 GPUs/,
    },
    {
      name: "TFJob whose PS template is gone: its GPUs unknown, the worker refused (gpu-unknown)",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 1)), podOf(s.put("tfjobs", tfJob(4, "gpus", "ps-gpus")))),
      allowed: false,
      cause: { field: "spec.resourceClaims", message: /ResourceClaimTemplate ps-gpus \(claim gpus\) does not exist/ },
    },
    {
      name: "batch Job, parallelism 4 × 2 GPUs: admitted",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 2)), podOf(s.put("jobs", batchJob(4)))),
      allowed: true,
    },
    {
      name: "batch Job, the template created again asking 8: 32 GPUs at once, refused",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 2)), podOf(s.put("jobs", batchJob(4)))),
      then: (s) => swap(s, "gpus", 8),
      allowed: false,
      cause: { field: "spec.resourceClaims", message: /Job team-a\/bj.*runs 32 GPUs at once in all \(4 pods × 8\), over the per-job limit of 8/ },
    },
    {
      name: "a JobSet's Job (2 Jobs × parallelism 2 × 2 GPUs): judged as its JobSet, admitted",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 2)), podOf(s.put("jobs", batchJob(2, s.put("jobsets", jobSet(2, 2)))))),
      allowed: true,
    },
    {
      name: "a JobSet's Job, the template created again asking 4: the JobSet's 16 GPUs, refused naming the JobSet",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 2)), podOf(s.put("jobs", batchJob(2, s.put("jobsets", jobSet(2, 2)))))),
      then: (s) => swap(s, "gpus", 4),
      allowed: false,
      cause: { field: "spec.resourceClaims", message: /JobSet team-a\/js \(the controller of Job team-a\/bj\).*16 GPUs at once/ },
    },
    {
      name: "the job cannot be read: its GPUs unknown, refused at metadata.ownerReferences (gpu-unknown)",
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 1)), (s.failing = new Set(["tfjobs"])), podOf(s.put("tfjobs", tfJob(8)))),
      allowed: false,
      cause: { field: "metadata.ownerReferences", message: /could not be read \(.*503.*per-job limit of 8.*retry/ },
    },
    {
      name: "the controller is gone: no job to count against, the pod's own caps (admitted)",
      setup: (s) => {
        s.put("resourceclaimtemplates", template("gpus", 8));
        const job = s.put("tfjobs", tfJob(8));
        s.delete("tfjobs", "tf");
        return podOf(job);
      },
      allowed: true,
    },
    {
      name: "another TFJob of the name (another uid): not this pod's job, the pod's own caps",
      setup: (s) => {
        s.put("resourceclaimtemplates", template("gpus", 8));
        const old = s.put("tfjobs", tfJob(8));
        s.put("tfjobs", tfJob(8));
        return podOf(old);
      },
      allowed: true,
    },
    {
      name: "a pod its claims give no GPU (a NIC template): nothing of the job's counted",
      setup: (s) => {
        s.put("deviceclasses", {
          apiVersion: "resource.k8s.io/v1",
          kind: "DeviceClass",
          metadata: { name: "nic.example.com" },
          spec: { selectors: [{ cel: { expression: 'device.driver == "nic.example.com"' } }] },
        });
        s.put("resourceclaimtemplates", template("gpus", 8, "nic.example.com"));
        return podOf(s.put("tfjobs", tfJob(64)));
      },
      allowed: true,
    },
    {
      name: "no per-job cap: nothing of the job's counted (64 GPUs admitted)",
      policy: policyOf({ pod: { gpus: 8 } }),
      setup: (s) => (s.put("resourceclaimtemplates", template("gpus", 8)), podOf(s.put("tfjobs", tfJob(8)))),
      allowed: true,
    },
  ];

  for (const tc of cases)
    it(tc.name, async () => {
      const store = new Store();
      const admit = webhookOver(store, tc.policy);
      const pod = tc.setup(store);
      if (tc.then) {
        // A first worker admitted with the job as it was (and the template cached), then the change.
        assert.equal((await admit({ ...podOf(undefined, "first"), metadata: { ...(pod.metadata as object), name: "first" } })).allowed, true);
        tc.then(store);
      }
      const got = await admit(pod);
      assert.equal(got.allowed, tc.allowed, JSON.stringify(got.causes));
      if (tc.cause) {
        const cause = got.causes.find((c) => c.field === tc.cause!.field);
        assert.ok(cause, `a cause at ${tc.cause.field}: ${JSON.stringify(got.causes)}`);
        assert.match(cause.message ?? "", tc.cause.message);
      }
      if (tc.warning) assert.match(got.warnings, tc.warning);
    });

  it("the job made again under its name while the old one is cached (another uid), the template asking 8: the new job's worker refused", async () => {
    const store = new Store();
    const admit = webhookOver(store);
    store.put("resourceclaimtemplates", template("gpus", 1));
    assert.equal((await admit(podOf(store.put("tfjobs", tfJob(8)), "w0"))).allowed, true, "the old job's worker (the job now cached)");
    store.delete("tfjobs", "tf");
    const again = store.put("tfjobs", tfJob(8));
    swap(store, "gpus", 8);
    const got = await admit(podOf(again, "w1"));
    assert.equal(got.allowed, false, "the cached job of the old uid is not believed to say the pod has no job");
    assert.match(got.causes.find((c) => c.field === "spec.resourceClaims")?.message ?? "", /TFJob team-a\/tf: the job requests 64 GPUs in all/);
  });

  it("reads: a job's DRA pod reads the job once (cached), and each claim's metadata alone while it is unchanged", async () => {
    const store = new Store();
    const admit = webhookOver(store);
    store.put("resourceclaimtemplates", template("gpus", 1));
    const job = store.put("tfjobs", tfJob(8));
    for (let i = 0; i < 3; i++) assert.equal((await admit(podOf(job, `w${i}`))).allowed, true);
    assert.deepEqual(store.asked, [
      "get tfjobs/tf",
      "get resourceclaimtemplates/gpus",
      "metadata resourceclaimtemplates/gpus",
      "metadata resourceclaimtemplates/gpus",
    ]);
  });

  it("reads: a DRA pod without a job, or without a per-job cap, reads its claims through the cache only", async () => {
    for (const policy of [CAPPED, policyOf({ pod: { gpus: 8 } })]) {
      const store = new Store();
      const admit = webhookOver(store, policy);
      store.put("resourceclaimtemplates", template("gpus", 1));
      const job = store.put("tfjobs", tfJob(8));
      const pods = policy === CAPPED ? [podOf(undefined, "a"), podOf(undefined, "b")] : [podOf(job, "a"), podOf(job, "b")];
      for (const pod of pods) assert.equal((await admit(pod)).allowed, true);
      assert.deepEqual(store.asked, ["get resourceclaimtemplates/gpus"]);
    }
  });
});

describe("readPodJob: the job a pod counts against, by its controllers", () => {
  const reader = (store: Store) => cachedJobReader(() => Promise.resolve(store.client()), { ttlMs: 5000 });

  it("a cached absence is read again fresh before it is believed", async () => {
    const store = new Store();
    const jobs = reader(store);
    await jobs.get({ group: "kubeflow.org", version: "v1", kind: "TFJob", plural: "tfjobs" }, NS, "tf"); // cached: absent
    const job = store.put("tfjobs", tfJob(2));
    const read = await readPodJob(podOf(job) as never, NS, CAPPED, jobs, 1000);
    assert.equal(read.kind, "found");
    assert.deepEqual(store.asked, ["get tfjobs/tf", "get tfjobs/tf"]);
  });

  it("a cached copy of another uid (the job made again under its name) is read again fresh before it is believed", async () => {
    const store = new Store();
    const jobs = reader(store);
    const TFJOB = { group: "kubeflow.org", version: "v1", kind: "TFJob", plural: "tfjobs" };
    store.put("tfjobs", tfJob(2));
    await jobs.get(TFJOB, NS, "tf"); // cached: the first uid
    const again = store.put("tfjobs", tfJob(4));
    const read = await readPodJob(podOf(again) as never, NS, CAPPED, jobs, 1000);
    assert.equal(read.kind === "found" && (read.job.metadata as { uid: string }).uid, (again.metadata as { uid: string }).uid);
    // A pod of the first job, gone: the fresh read finds another uid, so no job to count against.
    assert.equal(
      (await readPodJob(podOf({ ...again, metadata: { ...(again.metadata as object), uid: "uid-gone" } }) as never, NS, CAPPED, jobs, 1000)).kind,
      "none",
    );
  });

  it("controllers that make no job's pods: none, and nothing read", async () => {
    const store = new Store();
    const owners = [
      { apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u", controller: true },
      { apiVersion: "trainer.kubeflow.org/v1alpha1", kind: "TrainJob", name: "tj", uid: "u", controller: true },
      { apiVersion: "batch/v1", kind: "Job", name: "bj", uid: "u" }, // not the controller
    ];
    for (const owner of owners) {
      const pod = { metadata: { name: "p", ownerReferences: [owner] }, spec: draSpec("gpus") };
      assert.equal((await readPodJob(pod as never, NS, CAPPED, reader(store), 1000)).kind, "none", owner.kind);
    }
    assert.deepEqual(store.asked, []);
  });
});

describe("podJobFindings keeps a job's findings for its launch's pods, and judges it again when what it depends on changes", () => {
  const policy = CAPPED;
  const ctxWith = (count: number | "same", known?: Map<string, unknown>) => ({
    policy,
    namespace: NS,
    limits: effectiveLimits(policy, NS),
    claims: { claims: new Map(), templates: (known ?? new Map([["gpus", claimSpecOf(template("gpus", count as number), "ResourceClaimTemplate")]])) as never },
  });
  const job = { job: tfJob(8), owner: { training: policy.jobKinds.find((k) => k.kind === "TFJob")! }, what: "TFJob team-a/tf" };
  const spec = draSpec("gpus") as never;

  it("the same job, claim objects, policy and namespace: the findings kept; a claim object created again: judged again", () => {
    const kept = keptJobFindings();
    const one = ctxWith(1);
    const first = podJobFindings(spec, job, one, kept).violations;
    assert.deepEqual(first, []);
    // Another pod of the launch: the same claim object (a fresh read answers its copy when unchanged).
    assert.equal(podJobFindings(spec, job, ctxWith("same", one.claims.templates as never), kept).violations, first, "kept: the same array");
    // The template created again asking 8: another object, the job judged again.
    const swapped = podJobFindings(spec, job, ctxWith(8), kept).violations;
    assert.deepEqual(
      swapped.map((v) => v.rule),
      ["job-gpus"],
    );
    // Another namespace's limits, or another Job of a JobSet (its name in the message): not the kept findings.
    assert.notEqual(podJobFindings(spec, { ...job, what: "another" }, ctxWith(8), kept).violations, swapped);
  });

  it("the unlisted DeviceClasses read: kept while each reads the same (a new map each review), judged again when one changes", () => {
    const kept = keptJobFindings();
    const base = ctxWith(1);
    const withClasses = (classes: Array<[string, DeviceClassRead]>) => ({ ...base, claims: { ...base.claims, deviceClasses: new Map(classes) } });
    const first = podJobFindings(spec, job, withClasses([["fast", { kind: "found" }]]), kept).violations;
    assert.equal(podJobFindings(spec, job, withClasses([["fast", { kind: "found" }]]), kept).violations, first, "the same reads in a new map: kept");
    // Each changed in one thing from the one before (the cache holds the last): judged again, then kept.
    let previous = first;
    for (const changed of [
      [["fast", { kind: "found", gpu: "selects gpu.nvidia.com" }]],
      [["fast", { kind: "missing" }]],
      [["fast", { kind: "unreadable", reason: "timed out" }]],
      [["fast", { kind: "unreadable", reason: "forbidden" }]],
      [["fast", { kind: "found" }]],
      [["slow", { kind: "found" }]],
      [],
    ] as Array<Array<[string, DeviceClassRead]>>) {
      const again = podJobFindings(spec, job, withClasses(changed), kept).violations;
      assert.notEqual(again, previous, JSON.stringify(changed));
      assert.equal(podJobFindings(spec, job, withClasses(changed), kept).violations, again, `then kept: ${JSON.stringify(changed)}`);
      previous = again;
    }
    // The same reads kept in another order (they are kept as they finish): the findings kept.
    const two = podJobFindings(
      spec,
      job,
      withClasses([
        ["a", { kind: "found" }],
        ["b", { kind: "missing" }],
      ]),
      kept,
    ).violations;
    const swapped = withClasses([
      ["b", { kind: "missing" }],
      ["a", { kind: "found" }],
    ]);
    assert.equal(podJobFindings(spec, job, swapped, kept).violations, two, "the same reads in another order: kept");
  });
});

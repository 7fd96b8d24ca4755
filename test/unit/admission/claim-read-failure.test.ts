/**
 * A ResourceClaim or ResourceClaimTemplate a pod or job names that does not exist yet, or cannot be read (a 403
 * after an upgrade that left the webhook's ClusterRole behind, a timeout), is unknown, and unknown is not zero
 * (issue 45 finding 3): under a GPU cap it is refused, rule `gpu-unknown`, at its `resourceClaims[i]` field, with
 * the fix (create it first; retry or check the RBAC); the rule's mode is the policy's (`gpu-unknown: warn` admits
 * with a warning). Without a GPU cap it is a warning. `clusterSpec.onJobLookupFailure` no longer decides for
 * claims (it still does for the pod's job and a TrainJob's runtime). An UPDATE (a pod resize, a job update) that
 * names the same claims is not refused for them: it makes nothing worse. Before, an absent claim was only a
 * warning, and a failed read was counted as zero by default: 4 claims of 8 GPUs created after a pod capped at 8.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { scaleReview } from "../../fixtures/array-work.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { trainJob, upstream } from "../../fixtures/trainer-v2.js";

const NS = "team-a";

/** A NIC claim template: no GPU. */
const nicTemplate: KubeObject = {
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name: "eight-gpus", namespace: "team-a" },
  spec: { spec: { devices: { requests: [{ name: "nic", exactly: { deviceClassName: "nic.example.com", count: 8 } }] } } },
};

/** The administrator's DeviceClass of the NIC template: it selects the NIC driver's devices. */
const nicClass: KubeObject = {
  apiVersion: "resource.k8s.io/v1",
  kind: "DeviceClass",
  metadata: { name: "nic.example.com" },
  spec: { selectors: [{ cel: { expression: 'device.driver == "nic.example.com"' } }] },
};

/** A template of 8 NVIDIA GPUs. */
const gpuTemplate: KubeObject = {
  ...nicTemplate,
  spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count: 8 } }] } } },
};

/** A reader whose DRA reads fail as `failure` says (or find nothing, a NIC template, an 8-GPU one), and that has `jobs`. */
function reader(failure: "forbidden" | "absent" | "nic" | "gpu8", jobs: KubeObject[] = []) {
  const asked: string[] = [];
  return {
    asked,
    get(kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined> {
      asked.push(`${kind.plural}/${namespace}/${name}`);
      if (kind.plural === "deviceclasses") return Promise.resolve(name === "nic.example.com" ? nicClass : undefined);
      if (kind.group === "resource.k8s.io") {
        if (failure === "nic" || failure === "gpu8") return Promise.resolve(failure === "nic" ? nicTemplate : gpuTemplate);
        return failure === "forbidden"
          ? Promise.reject(new Error(`HTTP 403: ${kind.plural}.resource.k8s.io "${name}" is forbidden`))
          : Promise.resolve(undefined);
      }
      return Promise.resolve(jobs.find((j) => j.kind === kind.kind && (j.metadata as { name?: string }).name === name));
    },
  };
}

const claimPod = (name: string): KubeObject =>
  deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS },
    spec: {
      resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "eight-gpus" }],
      containers: [{ name: "c", image: "x", resources: { claims: [{ name: "gpus" }] } }],
    },
  });

const claimJob: KubeObject = deepFreeze({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "pj", namespace: NS },
  spec: {
    pytorchReplicaSpecs: {
      Worker: {
        replicas: 2,
        template: {
          spec: {
            resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "eight-gpus" }],
            containers: [{ name: "pytorch", image: "x", resources: { claims: [{ name: "gpus" }] } }],
          },
        },
      },
    },
  },
});

const podReview = (object: KubeObject, resize = false) =>
  review({
    kind: { group: "", version: "v1", kind: "Pod" },
    resource: { group: "", version: "v1", resource: "pods" },
    operation: resize ? "UPDATE" : "CREATE",
    ...(resize ? { subResource: "resize", oldObject: object } : {}),
    namespace: NS,
    object,
  });
const jobReview = (object: KubeObject, update = false) =>
  review({
    kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
    resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
    operation: update ? "UPDATE" : "CREATE",
    namespace: NS,
    object,
    oldObject: update ? object : null,
  });

const CAPS = { pod: { gpus: 4 }, job: { gpus: 8 } };
const policies = {
  capped: checkPolicy({ limits: CAPS }, "capped"),
  cappedDeny: checkPolicy({ limits: CAPS, clusterSpec: { onJobLookupFailure: "deny" } }, "capped-deny"),
  containerCap: checkPolicy({ limits: { container: { gpus: { "nvidia.com/gpu": 8 } } } }, "container-cap"),
  cappedWarn: checkPolicy({ limits: CAPS, enforcement: { rules: { "gpu-unknown": "warn" } } }, "capped-warn"),
  cappedWarnHere: checkPolicy({ limits: CAPS, enforcement: { namespaces: [{ pattern: "team-*", rules: { "gpu-unknown": "warn" } }] } }, "warn-here"),
  uncapped: checkPolicy({}, "uncapped"),
  uncappedDeny: checkPolicy({ clusterSpec: { onJobLookupFailure: "deny" } }, "uncapped-deny"),
};

const POD_FIELD = "spec.resourceClaims[0]";
const JOB_FIELD = "spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims[0]";

describe("claims that do not exist or cannot be read: unknown, refused under a GPU cap (gpu-unknown)", () => {
  const cases: Array<{
    name: string;
    path: "/validate/pods" | "/validate/jobs" | "/mutate/pods";
    policy: keyof typeof policies;
    failure: "forbidden" | "absent" | "nic";
    body: ReturnType<typeof review>;
    allowed: boolean;
    causes: Array<{ field: string; rule: RegExp }>;
    warning?: RegExp;
  }> = [
    {
      name: "pod CREATE, claim template absent, pod cap → refused at spec.resourceClaims[0]: create it before the pod",
      path: "/validate/pods",
      policy: "capped",
      failure: "absent",
      body: podReview(claimPod("a1")),
      allowed: false,
      causes: [
        { field: POD_FIELD, rule: /ResourceClaimTemplate eight-gpus \(claim gpus\) does not exist.*create ResourceClaimTemplate eight-gpus before the pod/ },
      ],
    },
    {
      name: "pod CREATE, claim template absent, only a per-container GPU cap → refused",
      path: "/validate/pods",
      policy: "containerCap",
      failure: "absent",
      body: podReview(claimPod("a2")),
      allowed: false,
      causes: [{ field: POD_FIELD, rule: /does not exist/ }],
    },
    {
      name: "pod CREATE, claim template forbidden, pod cap → refused at spec.resourceClaims[0]: retry, check the RBAC",
      path: "/validate/pods",
      policy: "capped",
      failure: "forbidden",
      body: podReview(claimPod("p1")),
      allowed: false,
      causes: [{ field: POD_FIELD, rule: /could not be read \(.*403.*retry.*resourceclaimtemplates\.resource\.k8s\.io/ }],
    },
    {
      name: "pod CREATE, claim template forbidden, pod cap, onJobLookupFailure deny → the same gpu-unknown refusal",
      path: "/validate/pods",
      policy: "cappedDeny",
      failure: "forbidden",
      body: podReview(claimPod("p2")),
      allowed: false,
      causes: [{ field: POD_FIELD, rule: /could not be read/ }],
    },
    {
      name: "pod CREATE, claim template absent, enforcement gpu-unknown: warn → admitted with the warning",
      path: "/validate/pods",
      policy: "cappedWarn",
      failure: "absent",
      body: podReview(claimPod("w1")),
      allowed: true,
      causes: [],
      warning: /gpu-unknown \(warn\): spec\.resourceClaims\[0\]: ResourceClaimTemplate eight-gpus/,
    },
    {
      name: "pod CREATE, claim template forbidden, gpu-unknown: warn in the namespace's enforcement entry → admitted with the warning",
      path: "/validate/pods",
      policy: "cappedWarnHere",
      failure: "forbidden",
      body: podReview(claimPod("w2")),
      allowed: true,
      causes: [],
      warning: /gpu-unknown \(warn\)/,
    },
    {
      name: "pod CREATE, claim template absent, no GPU cap → admitted with a warning",
      path: "/validate/pods",
      policy: "uncapped",
      failure: "absent",
      body: podReview(claimPod("n1")),
      allowed: true,
      causes: [],
      warning: /ResourceClaimTemplate eight-gpus \(claim gpus\) was not found/,
    },
    {
      name: "pod CREATE, claim template forbidden, no GPU cap, onJobLookupFailure deny → admitted with a warning",
      path: "/validate/pods",
      policy: "uncappedDeny",
      failure: "forbidden",
      body: podReview(claimPod("n2")),
      allowed: true,
      causes: [],
      warning: /ResourceClaimTemplate eight-gpus \(claim gpus\) could not be read, its GPUs not counted: reading/,
    },
    {
      name: "pod CREATE, the claim template exists and asks for no GPU, pod cap → admitted, nothing said",
      path: "/validate/pods",
      policy: "capped",
      failure: "nic",
      body: podReview(claimPod("nic")),
      allowed: true,
      causes: [],
    },
    {
      name: "pod resize, claim template forbidden, pod cap → allowed (a read cannot make it worse)",
      path: "/validate/pods",
      policy: "capped",
      failure: "forbidden",
      body: podReview(claimPod("p3"), true),
      allowed: true,
      causes: [],
    },
    {
      name: "job CREATE, claim template absent, job cap → refused at the template's resourceClaims[0]: create it before the job",
      path: "/validate/jobs",
      policy: "capped",
      failure: "absent",
      body: jobReview(claimJob),
      allowed: false,
      causes: [{ field: JOB_FIELD, rule: /does not exist.*create ResourceClaimTemplate eight-gpus before the job/ }],
    },
    {
      name: "job CREATE, claim template forbidden, job cap → refused at the template's resourceClaims[0]",
      path: "/validate/jobs",
      policy: "capped",
      failure: "forbidden",
      body: jobReview(claimJob),
      allowed: false,
      causes: [{ field: JOB_FIELD, rule: /could not be read/ }],
    },
    {
      name: "job CREATE, claim template forbidden, gpu-unknown: warn → admitted with the warning",
      path: "/validate/jobs",
      policy: "cappedWarn",
      failure: "forbidden",
      body: jobReview(claimJob),
      allowed: true,
      causes: [],
      warning: /gpu-unknown \(warn\)/,
    },
    {
      name: "job CREATE, claim template forbidden, no GPU cap → admitted with a warning",
      path: "/validate/jobs",
      policy: "uncapped",
      failure: "forbidden",
      body: jobReview(claimJob),
      allowed: true,
      causes: [],
      warning: /ResourceClaimTemplate eight-gpus \(claim gpus\) could not be read, its GPUs not counted/,
    },
    {
      name: "job UPDATE (Kueue's unsuspend, say), claim template forbidden, job cap → allowed (nothing new or worse)",
      path: "/validate/jobs",
      policy: "capped",
      failure: "forbidden",
      body: jobReview(claimJob, true),
      allowed: true,
      causes: [],
    },
    {
      name: "pod CREATE through /mutate/pods, claim template forbidden → admitted with a warning",
      path: "/mutate/pods",
      policy: "capped",
      failure: "forbidden",
      body: podReview(claimPod("p5")),
      allowed: true,
      causes: [],
      warning: /GPUs of the pod's claims not known/,
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const jobs = reader(tc.failure);
      const hooks = createWebhooks({ policy: policies[tc.policy], log: capturingLogger().log, jobs, now: () => new Date() });
      const res = await hooks[tc.path]!.admit(tc.body);
      const response = res.review.response!;
      assert.equal(response.allowed, tc.allowed, JSON.stringify(response.status));
      assert.ok(jobs.asked.includes(`resourceclaimtemplates/${NS}/eight-gpus`), `the template was read: ${jobs.asked.join(", ")}`);
      const causes = (response.status?.details?.causes ?? []) as Array<{ field?: string; message?: string; reason?: string }>;
      assert.equal(causes.length, tc.causes.length, JSON.stringify(causes));
      tc.causes.forEach((c, i) => {
        assert.equal(causes[i]!.field, c.field);
        assert.match(causes[i]!.message ?? "", c.rule);
      });
      const warnings = (response.warnings ?? []).join("\n");
      if (tc.warning) assert.match(warnings, tc.warning);
      else assert.doesNotMatch(warnings, /could not be read|not known|not found|gpu-unknown/);
    });
});

describe("a scaled job counts the claims its templates name (kubectl scale)", () => {
  // One Worker of one 8-GPU claim template: 8 GPUs, at the job cap. Scaled to 16: 128.
  const train: KubeObject = deepFreeze({ ...claimJob, metadata: { name: "train", namespace: NS } });
  const cases: Array<{ name: string; replicas: number; allowed: boolean; message?: RegExp }> = [
    { name: "scaled to 16 Workers of 8 GPUs under a job cap of 8 → refused (job-gpus)", replicas: 16, allowed: false, message: /128/ },
    { name: "scaled to 1 → allowed", replicas: 1, allowed: true },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const jobs = reader("gpu8", [train]);
      const hooks = createWebhooks({ policy: policies.capped, log: capturingLogger().log, jobs, now: () => new Date() });
      const response = (await hooks["/validate/jobs"]!.admit(scaleReview(tc.replicas))).review.response!;
      assert.equal(response.allowed, tc.allowed, JSON.stringify(response.status));
      assert.ok(jobs.asked.includes(`resourceclaimtemplates/${NS}/eight-gpus`), `the template was read: ${jobs.asked.join(", ")}`);
      if (tc.message) assert.match(response.status?.message ?? "", tc.message);
    });
});

describe("a TrainJob counts the claims its runtime's templates name", () => {
  // The upstream torch-distributed runtime, its `node` pods each naming one 8-GPU claim template.
  const runtime = (() => {
    const r = structuredClone(upstream("torch_distributed.yaml")) as {
      spec: {
        template: {
          spec: {
            replicatedJobs: Array<{ template: { spec: { template: { spec: Record<string, unknown> & { containers: Array<Record<string, unknown>> } } } } }>;
          };
        };
      };
    };
    const pod = r.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec;
    pod.resourceClaims = [{ name: "gpus", resourceClaimTemplateName: "eight-gpus" }];
    pod.containers[0]!.resources = { claims: [{ name: "gpus" }] };
    return deepFreeze(r as unknown as KubeObject);
  })();
  const tjReview = (object: KubeObject) =>
    review({
      kind: { group: "trainer.kubeflow.org", version: "v1alpha1", kind: "TrainJob" },
      resource: { group: "trainer.kubeflow.org", version: "v1alpha1", resource: "trainjobs" },
      operation: "CREATE",
      namespace: NS,
      object,
    });
  const jobCap = checkPolicy({ limits: { job: { gpus: 8 } } }, "job-cap");
  const cases: Array<{ name: string; numNodes: number; allowed: boolean; rule?: RegExp }> = [
    { name: "4 nodes of one 8-GPU claim each under a job cap of 8 → refused (job-gpus: 32)", numNodes: 4, allowed: false, rule: /32/ },
    { name: "1 node → allowed", numNodes: 1, allowed: true },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const jobs = reader("gpu8", [runtime]);
      const hooks = createWebhooks({ policy: jobCap, log: capturingLogger().log, jobs, now: () => new Date() });
      const response = (await hooks["/validate/jobs"]!.admit(tjReview(trainJob(`tj${tc.numNodes}`, { numNodes: tc.numNodes })))).review.response!;
      assert.equal(response.allowed, tc.allowed, JSON.stringify(response.status));
      assert.ok(jobs.asked.includes(`resourceclaimtemplates/${NS}/eight-gpus`), `the template was read: ${jobs.asked.join(", ")}`);
      if (tc.rule) assert.match(response.status?.message ?? "", tc.rule);
    });
});

/**
 * A ResourceClaim or ResourceClaimTemplate that cannot be read (a 403 after an upgrade that left the webhook's
 * ClusterRole behind, a timeout) is handled like a job that cannot be read: `clusterSpec.onJobLookupFailure`
 * `warn` (the default) admits, counted without it, and says so; `deny` refuses under the rule that would have
 * counted its GPUs, at its field; an UPDATE (a pod resize, a job update), which a failed read cannot make
 * worse, is only warned of. An absent claim is no failure. Before, both validating webhooks failed closed on
 * any read error: every claim-naming pod in an opted-in namespace refused while the RBAC was behind.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import { claimReadFindings } from "../../src/validate/claims.js";
import { createWebhooks } from "../../webhooks/index.js";
import { capturingLogger } from "../fixtures/https.js";
import { deepFreeze, review } from "../fixtures/reviews.js";

const NS = "team-a";

/** A reader whose DRA reads fail as `failure` says (or find nothing), and that has `jobs`. */
function reader(failure: "forbidden" | "absent", jobs: KubeObject[] = []) {
  const asked: string[] = [];
  return {
    asked,
    get(kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined> {
      asked.push(`${kind.plural}/${namespace}/${name}`);
      if (kind.group === "resource.k8s.io") {
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

const policies = {
  warn: checkPolicy({ limits: { pod: { gpus: 4 }, job: { gpus: 8 } } }, "warn"),
  deny: checkPolicy({ limits: { pod: { gpus: 4 }, job: { gpus: 8 } }, clusterSpec: { onJobLookupFailure: "deny" } }, "deny"),
};

describe("claims that cannot be read: handled as a failed job lookup", () => {
  const cases: Array<{
    name: string;
    path: "/validate/pods" | "/validate/jobs" | "/mutate/pods";
    policy: keyof typeof policies;
    failure: "forbidden" | "absent";
    body: ReturnType<typeof review>;
    allowed: boolean;
    causes: Array<{ field: string; rule: RegExp }>;
    warning?: RegExp;
  }> = [
    {
      name: "pod CREATE, claim template forbidden, warn → allowed with a warning",
      path: "/validate/pods",
      policy: "warn",
      failure: "forbidden",
      body: podReview(claimPod("p1")),
      allowed: true,
      causes: [],
      warning: /pod's GPUs counted without a claim that could not be read: reading ResourceClaimTemplate team-a\/eigh/,
    },
    {
      name: "pod CREATE, claim template forbidden, deny → refused at spec.resourceClaims",
      path: "/validate/pods",
      policy: "deny",
      failure: "forbidden",
      body: podReview(claimPod("p2")),
      allowed: false,
      causes: [{ field: "spec.resourceClaims", rule: /cannot count the pod's GPUs: .*403/ }],
    },
    {
      name: "pod resize, claim template forbidden, deny → allowed with a warning (a read cannot make it worse)",
      path: "/validate/pods",
      policy: "deny",
      failure: "forbidden",
      body: podReview(claimPod("p3"), true),
      allowed: true,
      causes: [],
      warning: /counted without a claim that could not be read/,
    },
    {
      name: "pod CREATE, claim template absent, deny → allowed, no warning (absence is no failure)",
      path: "/validate/pods",
      policy: "deny",
      failure: "absent",
      body: podReview(claimPod("p4")),
      allowed: true,
      causes: [],
    },
    {
      name: "job CREATE, claim template forbidden, warn → allowed with a warning",
      path: "/validate/jobs",
      policy: "warn",
      failure: "forbidden",
      body: jobReview(claimJob),
      allowed: true,
      causes: [],
      warning: /job's GPUs counted without a claim that could not be read/,
    },
    {
      name: "job CREATE, claim template forbidden, deny → refused at spec",
      path: "/validate/jobs",
      policy: "deny",
      failure: "forbidden",
      body: jobReview(claimJob),
      allowed: false,
      causes: [{ field: "spec", rule: /cannot count the job's GPUs/ }],
    },
    {
      name: "job UPDATE (Kueue's unsuspend, say), claim template forbidden, deny → allowed with a warning",
      path: "/validate/jobs",
      policy: "deny",
      failure: "forbidden",
      body: jobReview(claimJob, true),
      allowed: true,
      causes: [],
      warning: /counted without a claim/,
    },
    {
      name: "pod CREATE through /mutate/pods, claim template forbidden → admitted with a warning",
      path: "/mutate/pods",
      policy: "deny",
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
      const causes = (response.status?.details?.causes ?? []) as Array<{ field?: string; message?: string }>;
      assert.equal(causes.length, tc.causes.length, JSON.stringify(causes));
      tc.causes.forEach((c, i) => {
        assert.equal(causes[i]!.field, c.field);
        assert.match(causes[i]!.message ?? "", c.rule);
      });
      const warnings = (response.warnings ?? []).join("\n");
      if (tc.warning) assert.match(warnings, tc.warning);
      else assert.doesNotMatch(warnings, /could not be read|not known/);
    });

  it("claimReadFindings: nothing failed, nothing said", () => {
    assert.deepEqual(claimReadFindings({ failures: [], onFailure: "deny", rule: "pod-gpus", field: "spec.resourceClaims", subject: "pod" }), {
      violations: [],
      warnings: [],
    });
  });
});

/**
 * The pod webhooks' match condition walks a pod only within CONDITION_MAX_CONTAINERS and CONDITION_MAX_RESOURCES
 * and sends a wider one on unwalked (its cost stays bounded, so it can never fail and deny through the validating
 * webhook's failurePolicy). For those pods the webhooks' guard makes the condition's test: a wide pod that is no
 * training pod is skipped, as the condition would have skipped it, and never meets the rules or the cost bound.
 * The same decisions through a real kube-apiserver: test/e2e/webhook-scope.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { allGuards, podGuard, unwalkedPodGuard } from "../../../src/admission/guards.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { silentLogger } from "../../../src/log.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES } from "../../../src/core/gpu.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { request, review } from "../../fixtures/reviews.js";

type Obj = Record<string, unknown>;
const policy = checkPolicy({ limits: { container: { cpu: "4" } } }, "cpu-cap");
const guard = unwalkedPodGuard(policy);

/** `n` containers (and `init` init containers), each limiting `limits`. */
function podOf(n: number, limits: Obj = { cpu: "1" }, labels?: Record<string, string>, init = 0, extra: { initLimits?: Obj } = {}): KubeObject {
  const c = (name: string, l: Obj): Obj => ({ name, image: "busybox", resources: { limits: l } });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "team-a", ...(labels ? { labels } : {}) },
    spec: {
      containers: Array.from({ length: n }, (_, i) => c(`c-${i}`, limits)),
      ...(init > 0 ? { initContainers: Array.from({ length: init }, (_, i) => c(`i-${i}`, extra.initLimits ?? limits)) } : {}),
    },
  };
}
const wideResources = (n: number, gpu?: string): Obj =>
  Object.fromEntries([...Array.from({ length: n }, (_, i) => [`example.com/r-${i}`, "1"]), ...(gpu ? [[gpu, "1"]] : [])]);

describe("unwalkedPodGuard: what the match condition would have decided, for the pods it does not walk", () => {
  const over = CONDITION_MAX_CONTAINERS + 1;
  const cases: Array<{ name: string; object: unknown; skipped: boolean }> = [
    { name: "a narrow pod, no label, no GPU (the condition decided: passes)", object: podOf(1), skipped: false },
    { name: `exactly ${CONDITION_MAX_CONTAINERS} containers, no GPU (within the bounds: passes)`, object: podOf(CONDITION_MAX_CONTAINERS), skipped: false },
    { name: `${over} containers, no label, no GPU`, object: podOf(over), skipped: true },
    {
      name: `${CONDITION_MAX_CONTAINERS} containers and one init container, no GPU`,
      object: podOf(CONDITION_MAX_CONTAINERS, { cpu: "1" }, undefined, 1),
      skipped: true,
    },
    { name: `${over} containers, the job-name label`, object: podOf(over, { cpu: "1" }, { "training.kubeflow.org/job-name": "mnist" }), skipped: false },
    {
      name: `${over} containers, caffe2-operator's two labels`,
      object: podOf(over, { cpu: "1" }, { caffe2_job_key: "team-a-r", group_name: "kubeflow.org" }),
      skipped: false,
    },
    { name: `${over} containers, only one of caffe2-operator's labels`, object: podOf(over, { cpu: "1" }, { caffe2_job_key: "team-a-r" }), skipped: true },
    {
      name: `${over} containers, a GPU in an init container's limits`,
      object: podOf(over, { cpu: "1" }, undefined, 1, { initLimits: { "nvidia.com/gpu": "1" } }),
      skipped: false,
    },
    { name: `${over} containers, a MIG slice in every container`, object: podOf(over, { "nvidia.com/mig-1g.5gb": "1" }), skipped: false },
    { name: `a container of ${CONDITION_MAX_RESOURCES + 1} resources, no GPU`, object: podOf(1, wideResources(CONDITION_MAX_RESOURCES + 1)), skipped: true },
    {
      name: `a container of ${CONDITION_MAX_RESOURCES} resources, no GPU (within the bounds: passes)`,
      object: podOf(1, wideResources(CONDITION_MAX_RESOURCES)),
      skipped: false,
    },
    {
      name: `a container of ${CONDITION_MAX_RESOURCES + 1} resources, one of them amd.com/gpu`,
      object: podOf(1, wideResources(CONDITION_MAX_RESOURCES, "amd.com/gpu")),
      skipped: false,
    },
    // Not what the apiserver sends, but never a throw.
    { name: "containers not a list", object: { metadata: {}, spec: { containers: "x" } }, skipped: false },
    {
      name: `${over} containers of which some are null, labels null`,
      object: { metadata: { labels: null }, spec: { containers: [...Array(over).fill(null)] } },
      skipped: true,
    },
    { name: "no object at all", object: null, skipped: false },
  ];
  for (const c of cases) {
    it(`${c.name} → ${c.skipped ? "skipped" : "passes"}`, () => {
      const reason = guard(request({ object: c.object as KubeObject }));
      assert.equal(reason !== undefined, c.skipped, reason);
      if (c.skipped) assert.match(reason!, /not a training pod.*wider than its bounds/);
    });
  }

  it("without caffe2 job kinds in the policy, caffe2-operator's labels do not make a training pod", () => {
    const noCaffe2 = unwalkedPodGuard({ ...policy, jobKinds: policy.jobKinds.filter((k) => k.framework !== "caffe2") });
    assert.notEqual(noCaffe2(request({ object: podOf(over, { cpu: "1" }, { caffe2_job_key: "team-a-r", group_name: "kubeflow.org" }) })), undefined);
  });

  it("allGuards: the first reason, or none", () => {
    const g = allGuards(podGuard(["CREATE"]), guard);
    assert.equal(g(request({ operation: "UPDATE", object: podOf(over) })), "operation UPDATE is not handled");
    assert.match(g(request({ object: podOf(over) }))!, /not a training pod/);
    assert.equal(g(request({ object: podOf(1) })), undefined);
  });
});

describe("the pod webhooks and a wide pod that is no training pod", () => {
  const hooks = createWebhooks({ policy, log: silentLogger(), jobs: fakeJobReader(), now: () => new Date() });
  // 1,500 containers over the cpu cap: without the guard, over the validating webhook's cost bound (denied).
  const wide = podOf(1500, { cpu: "1000" });
  const labelled = podOf(1500, { cpu: "1000" }, { "training.kubeflow.org/job-name": "mnist" });

  for (const path of ["/mutate/pods", "/validate/pods"]) {
    it(`${path}: skipped, allowed, nothing changed`, async () => {
      const r = await hooks[path]!.admit(review({ object: wide }));
      assert.equal(r.outcome, "skipped");
      assert.equal(r.review.response?.allowed, true);
      assert.equal(r.review.response?.patch, undefined);
      assert.equal(r.review.response?.warnings, undefined);
    });
  }

  it("the same pod labelled as a job's: /validate/pods prices and refuses it (the cost bound)", async () => {
    const r = await hooks["/validate/pods"]!.admit(review({ object: labelled }));
    assert.equal(r.outcome, "denied");
    assert.deepEqual(r.deniedRules, ["review-cost"]);
  });

  it("a narrow pod that is no training pod is still checked when it is sent (the CLI's `admit`, a broader configuration)", async () => {
    const r = await hooks["/validate/pods"]!.admit(review({ object: podOf(1, { cpu: "1000" }) }));
    assert.equal(r.outcome, "denied");
  });
});

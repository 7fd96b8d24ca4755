/**
 * Issue 29 item 3: per-job error isolation in the job controller's pass. An exception deciding (planPass) or
 * applying (applyJobControllers) one job is recorded for that job; the other jobs still proceed. Tables of
 * named cases.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { applyJobControllers } from "../../../src/run/job-controller.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { JobKind } from "../../../src/policy/types.js";
import { decideJob } from "../../../src/reconcile/job-controller.js";
import { planPass, type ControllerPlan } from "../../../src/reconcile/plan.js";
import { SCOPE, snapshotOf } from "../../fixtures/cluster.js";
import { caffe2JobObject } from "../../fixtures/jobs.js";

const CAFFE2: JobKind = { kind: "Caffe2Job", group: "kubeflow.org", version: "v1alpha1", plural: "caffe2jobs", framework: "caffe2" };
const NOW = new Date("2026-11-26T12:00:00Z");

function caffe2Job(name: string, replicas = 2): KubeObject {
  return caffe2JobObject({ name, replicas });
}

/** A job whose reading throws (a stand-in for any bug in deciding one job). */
function poisoned(name: string): KubeObject {
  const j = caffe2Job(name) as Record<string, any>;
  Object.defineProperty(j.spec, "replicaSpecs", {
    enumerable: true,
    get: () => {
      throw new Error("boom");
    },
  });
  return j as KubeObject;
}

describe("planPass: one job's exception stays that job's", () => {
  const cases: Array<{ name: string; jobs: KubeObject[]; good: string[]; bad: string[] }> = [
    { name: "poisoned first", jobs: [poisoned("bad"), caffe2Job("good")], good: ["good"], bad: ["bad"] },
    { name: "poisoned last", jobs: [caffe2Job("good"), poisoned("bad")], good: ["good"], bad: ["bad"] },
    { name: "poisoned between", jobs: [caffe2Job("a"), poisoned("bad"), caffe2Job("b")], good: ["a", "b"], bad: ["bad"] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const plan = planPass(snapshotOf({ jobs: c.jobs.map((job) => ({ kind: CAFFE2, job })) }), NOW, defaultPolicy(), SCOPE);
      for (const g of c.good)
        assert.ok(
          plan.controller.some((p) => p.name === g && p.decision.creates.length > 0),
          `${g} decided`,
        );
      for (const b of c.bad) {
        assert.ok(!plan.controller.some((p) => p.name === b));
        assert.ok(
          plan.problems.some((p) => p.includes(b) && p.includes("boom")),
          plan.problems.join("\n"),
        );
      }
    });
  }
});

describe("applyJobControllers: one job's exception stays that job's", () => {
  const planOf = (name: string): ControllerPlan => ({
    kind: CAFFE2,
    namespace: "team-a",
    name,
    uid: `uid-${name}`,
    decision: decideJob({ job: caffe2Job(name), kind: CAFFE2, pods: [], services: [], now: NOW }),
  });
  const cases: Array<{ name: string; order: string[] }> = [
    { name: "throwing job first", order: ["bad", "good"] },
    { name: "throwing job last", order: ["good", "bad"] },
  ];
  for (const c of cases) {
    for (const width of [1, 4]) {
      it(`${c.name}, width ${width}`, async () => {
        const created: string[] = [];
        const cluster = {
          createPod: async (_ns: string, body: KubeObject) => (created.push(String((body.metadata as any).name)), "created" as const),
          createService: async () => "created" as const,
          delete: async () => "deleted" as const,
          patchJobStatus: async () => "patched" as const,
          patchJobAnnotations: async () => "patched" as const,
          createEvent: async () => undefined,
        };
        // An expectations store that throws for one job: outside every per-call try.
        const expectations = {
          expectCreate: (uid: string) => {
            if (uid === "uid-bad") throw new Error("boom");
          },
          expectDelete: () => undefined,
          forget: () => undefined,
        };
        const report = await applyJobControllers({
          cluster: cluster as any,
          plans: c.order.map(planOf),
          expectations: expectations as any,
          now: () => NOW,
          log: silentLogger(),
          width,
          events: false,
        });
        assert.ok(
          created.some((n) => n.includes("-good-")),
          created.join(","),
        );
        assert.ok(
          report.failed.some((f) => f.action.includes("team-a/bad") && f.error.includes("boom")),
          JSON.stringify(report.failed),
        );
      });
    }
  }
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { applyPatch } from "../../../src/admission/patch.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { effectiveJobDefaults, fillJobDefaults } from "../../../src/mutate/job-defaults.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { JobDefaults } from "../../../src/policy/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, job, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

const ALL: JobDefaults = { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", activeDeadlineSeconds: 3600, backoffLimit: 3 };
const ptJob = (runPolicy?: unknown): KubeObject => job("PyTorchJob", "bert", "team-a", { Master: 1, Worker: 2 }, runPolicy === undefined ? {} : { runPolicy });
const runPolicyOf = (j: KubeObject): unknown => (j.spec as { runPolicy?: unknown }).runPolicy;
const warning = (f: string): string => `quartermaster: set spec.runPolicy.${f} (platform default)`;

describe("fillJobDefaults", () => {
  const cases: Array<{ name: string; job: KubeObject; defaults: JobDefaults; runPolicy?: unknown; warnings: string[] }> = [
    // No change.
    { name: "no defaults configured → unchanged", job: ptJob(), defaults: {}, warnings: [] },
    {
      name: "every field set by the job → unchanged, whatever the defaults",
      job: ptJob({ ttlSecondsAfterFinished: 5, cleanPodPolicy: "None", activeDeadlineSeconds: 9, backoffLimit: 0 }),
      defaults: ALL,
      warnings: [],
    },
    {
      name: "zero values are set values → unchanged",
      job: ptJob({ ttlSecondsAfterFinished: 0, cleanPodPolicy: "All", activeDeadlineSeconds: 1, backoffLimit: 0 }),
      defaults: ALL,
      warnings: [],
    },
    { name: "Caffe2Job (no runPolicy in caffe2-operator) → unchanged", job: job("Caffe2Job", "c2", "team-a", { Worker: 2 }), defaults: ALL, warnings: [] },
    { name: "runPolicy a string → unchanged (the CRD refuses it)", job: ptJob("soon"), defaults: ALL, warnings: [] },
    { name: "runPolicy an array → unchanged", job: ptJob([1]), defaults: ALL, warnings: [] },
    {
      name: "spec missing → unchanged",
      job: deepFreeze({ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", metadata: { name: "x" } }),
      defaults: ALL,
      warnings: [],
    },
    {
      name: "spec null → unchanged",
      job: deepFreeze({ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", metadata: { name: "x" }, spec: null }),
      defaults: ALL,
      warnings: [],
    },
    // Each field on its own.
    {
      name: "ttlSecondsAfterFinished unset → filled",
      job: ptJob(),
      defaults: { ttlSecondsAfterFinished: 86400 },
      runPolicy: { ttlSecondsAfterFinished: 86400 },
      warnings: [warning("ttlSecondsAfterFinished=86400")],
    },
    {
      name: "cleanPodPolicy unset → filled",
      job: ptJob(),
      defaults: { cleanPodPolicy: "Running" },
      runPolicy: { cleanPodPolicy: "Running" },
      warnings: [warning("cleanPodPolicy=Running")],
    },
    {
      name: "activeDeadlineSeconds unset → filled",
      job: ptJob(),
      defaults: { activeDeadlineSeconds: 3600 },
      runPolicy: { activeDeadlineSeconds: 3600 },
      warnings: [warning("activeDeadlineSeconds=3600")],
    },
    {
      name: "backoffLimit unset → filled, 0 included",
      job: ptJob(),
      defaults: { backoffLimit: 0 },
      runPolicy: { backoffLimit: 0 },
      warnings: [warning("backoffLimit=0")],
    },
    {
      name: "all four unset → all filled, one warning each, in a fixed order",
      job: ptJob(),
      defaults: ALL,
      runPolicy: ALL,
      warnings: [warning("ttlSecondsAfterFinished=86400"), warning("cleanPodPolicy=Running"), warning("activeDeadlineSeconds=3600"), warning("backoffLimit=3")],
    },
    {
      name: "runPolicy null → created",
      job: ptJob(null),
      defaults: { backoffLimit: 3 },
      runPolicy: { backoffLimit: 3 },
      warnings: [warning("backoffLimit=3")],
    },
    {
      name: "a field null → filled",
      job: ptJob({ ttlSecondsAfterFinished: null }),
      defaults: { ttlSecondsAfterFinished: 60 },
      runPolicy: { ttlSecondsAfterFinished: 60 },
      warnings: [warning("ttlSecondsAfterFinished=60")],
    },
    {
      name: "other Kubeflow kinds too (TFJob)",
      job: job("TFJob", "mnist", "team-a", { Worker: 1 }),
      defaults: { cleanPodPolicy: "All" },
      runPolicy: { cleanPodPolicy: "All" },
      warnings: [warning("cleanPodPolicy=All")],
    },
    // Preservation.
    {
      name: "fields the job sets are kept, the rest filled; other runPolicy fields untouched",
      job: ptJob({ cleanPodPolicy: "None", schedulingPolicy: { queue: "q" }, suspend: false }),
      defaults: ALL,
      runPolicy: {
        cleanPodPolicy: "None",
        schedulingPolicy: { queue: "q" },
        suspend: false,
        ttlSecondsAfterFinished: 86400,
        activeDeadlineSeconds: 3600,
        backoffLimit: 3,
      },
      warnings: [warning("ttlSecondsAfterFinished=86400"), warning("activeDeadlineSeconds=3600"), warning("backoffLimit=3")],
    },
    {
      name: "wrong-typed fields are set fields → kept as they are (the validator and the CRD judge them)",
      job: ptJob({ ttlSecondsAfterFinished: "1d", cleanPodPolicy: 3, activeDeadlineSeconds: {}, backoffLimit: [] }),
      defaults: ALL,
      warnings: [],
    },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const kind = kindOf(String(tc.job.kind));
      const out = fillJobDefaults(tc.job, kind, tc.defaults);
      assert.deepEqual(out.warnings, tc.warnings);
      if (tc.runPolicy === undefined) {
        assert.equal(out.job, tc.job, "the very same reference when nothing is filled");
        return;
      }
      assert.deepEqual(runPolicyOf(out.job), tc.runPolicy);
      // Nothing but runPolicy changed: replica specs, metadata and the rest are the input's own objects.
      const { runPolicy: _a, ...restOut } = out.job.spec as Record<string, unknown>;
      const { runPolicy: _b, ...restIn } = tc.job.spec as Record<string, unknown>;
      assert.deepEqual(restOut, restIn);
      assert.equal(out.job.metadata, tc.job.metadata);
      // Reinvocation: filling the result again changes nothing.
      const again = fillJobDefaults(out.job, kind, tc.defaults);
      assert.equal(again.job, out.job);
      assert.deepEqual(again.warnings, []);
    });
  }
});

describe("effectiveJobDefaults", () => {
  const policy = checkPolicy(
    {
      jobDefaults: { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running" },
      namespaces: [
        { pattern: "research-*", jobDefaults: { ttlSecondsAfterFinished: 600, backoffLimit: 1 } },
        { pattern: "prod", limits: { pod: { gpus: 8 } } },
        { pattern: "*", jobDefaults: { cleanPodPolicy: "All" } },
      ],
    },
    "t",
  );
  const cases: Array<[string, string, JobDefaults]> = [
    [
      "a namespace's own field wins; the others keep the top-level default",
      "research-nlp",
      { ttlSecondsAfterFinished: 600, cleanPodPolicy: "Running", backoffLimit: 1 },
    ],
    ["first match wins: an entry with only limits keeps the top-level defaults", "prod", { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running" }],
    ["a later catch-all applies to the rest", "team-a", { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "All" }],
  ];
  for (const [name, ns, want] of cases) it(`${name} (${ns})`, () => assert.deepEqual(effectiveJobDefaults(policy, ns), want));

  it("no namespaces[] entry matches → the top-level defaults", () => {
    const p = checkPolicy({ jobDefaults: { backoffLimit: 2 } }, "t");
    assert.deepEqual(effectiveJobDefaults(p, "anything"), { backoffLimit: 2 });
  });
});

describe("/mutate/jobs", () => {
  const policy = checkPolicy({ jobDefaults: ALL, namespaces: [{ pattern: "research-*", jobDefaults: { ttlSecondsAfterFinished: 600 } }] }, "t");
  const webhook = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() })["/mutate/jobs"]!;
  const jobReview = (object: KubeObject, o: { operation?: "CREATE" | "UPDATE" | "DELETE"; namespace?: string; subResource?: string } = {}) => {
    const kind = kindOf(String(object.kind));
    return review({
      kind: { group: kind.group, version: kind.version, kind: kind.kind },
      resource: { group: kind.group, version: kind.version, resource: kind.plural },
      operation: o.operation ?? "CREATE",
      namespace: o.namespace ?? "team-a",
      object,
      oldObject: o.operation === "UPDATE" ? object : null,
      ...(o.subResource ? { subResource: o.subResource } : {}),
    });
  };
  const patchOf = (res: { review: { response?: { patch?: string } } }): Parameters<typeof applyPatch>[1] =>
    res.review.response?.patch ? JSON.parse(Buffer.from(res.review.response.patch, "base64").toString()) : [];

  it("CREATE → a JSON Patch that gives the job its defaults, and the warnings", async () => {
    const object = ptJob();
    const res = await webhook.admit(jobReview(object));
    assert.equal(res.outcome, "patched");
    assert.deepEqual(patchOf(res), [{ op: "add", path: "/spec/runPolicy", value: ALL }]);
    assert.deepEqual(res.review.response?.warnings, [
      warning("ttlSecondsAfterFinished=86400"),
      warning("cleanPodPolicy=Running"),
      warning("activeDeadlineSeconds=3600"),
      warning("backoffLimit=3"),
    ]);
    const patched = applyPatch(object, patchOf(res));
    assert.deepEqual(runPolicyOf(patched), ALL);
    const again = await webhook.admit(jobReview(deepFreeze(patched)));
    assert.equal(again.outcome, "allowed");
    assert.equal(again.review.response?.patch, undefined, "mutating twice changes nothing");
  });

  it("the namespace's override is used", async () => {
    const res = await webhook.admit(jobReview(ptJob({ cleanPodPolicy: "None" }), { namespace: "research-cv" }));
    assert.deepEqual(runPolicyOf(applyPatch(ptJob({ cleanPodPolicy: "None" }), patchOf(res))), {
      cleanPodPolicy: "None",
      ttlSecondsAfterFinished: 600,
      activeDeadlineSeconds: 3600,
      backoffLimit: 3,
    });
  });

  const passThrough: Array<[string, Parameters<typeof jobReview>[0], Parameters<typeof jobReview>[1], string]> = [
    ["UPDATE (jobs are never defaulted after they were created)", ptJob(), { operation: "UPDATE" }, "operation UPDATE is not handled"],
    ["DELETE", ptJob(), { operation: "DELETE" }, "operation DELETE is not handled"],
    ["a subresource (status)", ptJob(), { subResource: "status" }, "subresource status is not handled"],
  ];
  for (const [name, object, o, reason] of passThrough) {
    it(`${name} → allowed, no patch, skipped`, async () => {
      const res = await webhook.admit(jobReview(object, o));
      assert.equal(res.outcome, "skipped");
      assert.equal(res.skipReason, reason);
      assert.deepEqual(res.review.response, { uid: res.request.uid, allowed: true });
    });
  }

  it("a Pod, or a kind that is not a configured job kind → skipped", async () => {
    const res = await webhook.admit(review());
    assert.equal(res.outcome, "skipped");
    assert.match(res.skipReason ?? "", /not a configured job kind/);
  });

  it("Caffe2Job CREATE → allowed, no patch", async () => {
    const res = await webhook.admit(jobReview(job("Caffe2Job", "c2", "team-a", { Worker: 2 })));
    assert.equal(res.outcome, "allowed");
    assert.equal(res.review.response?.patch, undefined);
  });
});

/**
 * Enforcement modes (issue 19): each violation denies, warns or is only recorded, by its rule's mode in the
 * namespace. Mode resolution as a table (rule × namespace pattern precedence), the policy's errors at load,
 * and the validating webhooks: deny unchanged, warn allowed with a warning naming rule and field, audit
 * allowed and counted.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { silentLogger } from "../../../src/log.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { CONFIGURABLE_RULES, RULES } from "../../../src/policy/rules.js";
import type { Policy } from "../../../src/policy/types.js";
import { createAdmissionMetrics } from "../../../src/server/metrics.js";
import { enforce, modeOf, warningFor } from "../../../src/validate/enforcement.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { gpuJob, scale } from "../../fixtures/array-work.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { policyProblems } from "../../fixtures/policies.js";
import { pod, review } from "../../fixtures/reviews.js";

const LIMITS = { container: { gpus: { "nvidia.com/gpu": 4 } }, job: { gpus: 8, replicas: { Worker: 4 } } };

const rollout = checkPolicy(
  {
    limits: LIMITS,
    enforcement: {
      rules: { "job-gpus": "warn", "container-limits": "audit" },
      namespaces: [
        { pattern: "team-a", rules: { "job-gpus": "deny" } },
        { pattern: "sandbox-*", mode: "audit", rules: { "job-name": "deny" } },
        { pattern: "team-*", mode: "warn" },
        { pattern: "*", rules: { "pod-gpus": "audit" } },
      ],
    },
  },
  "rollout",
);

describe("modeOf: rule × namespace pattern precedence", () => {
  const cases: Array<{ name: string; policy: Policy; rule: string; namespace: string; want: string }> = [
    { name: "built-in policy: deny", policy: checkPolicy({}, "t"), rule: "job-gpus", namespace: "x", want: "deny" },
    { name: "cluster-wide blanket mode", policy: checkPolicy({ enforcement: { mode: "audit" } }, "t"), rule: "job-gpus", namespace: "x", want: "audit" },
    {
      name: "cluster-wide rule beats the blanket mode",
      policy: checkPolicy({ enforcement: { mode: "audit", rules: { "job-gpus": "deny" } } }, "t"),
      rule: "job-gpus",
      namespace: "x",
      want: "deny",
    },
    { name: "cluster-wide rule, no namespace entry matches", policy: rollout, rule: "job-gpus", namespace: "prod", want: "warn" },
    { name: "namespace entry's rule beats the cluster-wide rule", policy: rollout, rule: "job-gpus", namespace: "team-a", want: "deny" },
    {
      name: "first matching entry naming the rule wins: team-a says nothing of job-replicas, team-* does (mode)",
      policy: rollout,
      rule: "job-replicas",
      namespace: "team-a",
      want: "warn",
    },
    { name: "namespace entry's blanket mode beats the cluster-wide rule", policy: rollout, rule: "container-limits", namespace: "team-b", want: "warn" },
    { name: "within an entry, its rule beats its mode", policy: rollout, rule: "job-name", namespace: "sandbox-1", want: "deny" },
    { name: "entry's blanket mode", policy: rollout, rule: "run-policy", namespace: "sandbox-1", want: "audit" },
    { name: "an entry that names other rules only is passed over", policy: rollout, rule: "run-policy", namespace: "prod", want: "deny" },
    { name: "a later catch-all entry names the rule", policy: rollout, rule: "pod-gpus", namespace: "prod", want: "audit" },
    { name: "pattern must match the whole name", policy: rollout, rule: "job-gpus", namespace: "team-ab", want: "warn" },
    { name: "review-cost always denies", policy: checkPolicy({ enforcement: { mode: "audit" } }, "t"), rule: "review-cost", namespace: "x", want: "deny" },
    { name: "job-scale always denies", policy: checkPolicy({ enforcement: { mode: "warn" } }, "t"), rule: "job-scale", namespace: "x", want: "deny" },
    {
      name: "an unknown rule (no such violation exists) denies",
      policy: checkPolicy({ enforcement: { mode: "warn" } }, "t"),
      rule: "made-up",
      namespace: "x",
      want: "deny",
    },
  ];
  for (const c of cases) it(c.name, () => assert.equal(modeOf(c.policy.enforcement, c.rule, c.namespace), c.want));
});

describe("enforce", () => {
  const findings = {
    violations: [
      { rule: "job-gpus", field: "spec", message: "16 GPUs over 8" },
      { rule: "container-limits", field: "spec.containers[0].resources.limits[nvidia.com/gpu]", message: "8 exceeds 4" },
      { rule: "job-name", field: "metadata.name", message: "too long" },
    ],
    warnings: ["quartermaster: something deprecated"],
  };
  it("splits by mode: deny stays a violation, warn becomes a warning naming rule and field, audit is only waived", () => {
    const out = enforce(findings, rollout.enforcement, "prod");
    assert.deepEqual(out.violations, [findings.violations[2]]);
    assert.deepEqual(out.warnings, ["quartermaster: job-gpus (warn): spec: 16 GPUs over 8", "quartermaster: something deprecated"]);
    assert.deepEqual(
      out.waived.map((v) => [v.rule, v.mode]),
      [
        ["job-gpus", "warn"],
        ["container-limits", "audit"],
      ],
    );
  });
  it("the built-in policy changes nothing", () => {
    const out = enforce(findings, checkPolicy({}, "t").enforcement, "prod");
    assert.deepEqual(out, { violations: findings.violations, warnings: findings.warnings, waived: [] });
  });
  it("warning text: rule, then field path, then message", () => {
    assert.equal(warningFor({ rule: "pod-gpus", field: "spec", message: "m" }), "quartermaster: pod-gpus (warn): spec: m");
  });
});

describe("the enforcement section at load", () => {
  const cases: Array<[string, string, string[]]> = [
    ["an invalid mode → its path", "enforcement: {rules: {job-gpus: block}}", ['enforcement.rules[job-gpus]: must be one of "deny", "warn", "audit"']],
    ["an invalid blanket mode", "enforcement: {mode: off}", ['enforcement.mode: must be one of "deny", "warn", "audit"']],
    [
      "an unknown rule name → its path and the rules there are",
      "enforcement: {rules: {job-gpu: warn}}",
      [`enforcement.rules.job-gpu: "job-gpu" is not a rule; rules: ${CONFIGURABLE_RULES.join(", ")}`],
    ],
    [
      "an unknown rule in a namespace entry",
      "enforcement: {namespaces: [{pattern: a, rules: {gpus: warn}}]}",
      [`enforcement.namespaces[0].rules.gpus: "gpus" is not a rule; rules: ${CONFIGURABLE_RULES.join(", ")}`],
    ],
    [
      "a rule that always denies cannot be relaxed",
      "enforcement: {rules: {review-cost: audit}}",
      [`enforcement.rules.review-cost: "review-cost" always denies, its mode cannot be set; rules: ${CONFIGURABLE_RULES.join(", ")}`],
    ],
    ["an entry without a pattern", "enforcement: {namespaces: [{mode: warn}]}", ["enforcement.namespaces[0]: missing required field 'pattern'"]],
    [
      "an entry that sets nothing",
      "enforcement: {namespaces: [{pattern: a}]}",
      ["enforcement.namespaces[0]: sets neither mode nor rules; it would change nothing"],
    ],
  ];
  for (const [name, text, want] of cases) it(name, () => assert.deepEqual([...policyProblems(text)], want));
  it("every rule name a validation reports is in the catalog (docs/policy.md lists it), and every catalogued rule is reported somewhere", () => {
    const root = join(import.meta.dirname, "../../..");
    const files = [
      ...readdirSync(join(root, "src/validate")).map((f) => join(root, "src/validate", f)),
      join(root, "src/admission/handler.ts"),
      join(root, "webhooks/validate-pods.ts"),
      join(root, "webhooks/validate-jobs.ts"),
    ];
    const used = new Set(
      files.flatMap((f) => [...readFileSync(f, "utf8").matchAll(/\brule: "([a-z-]+)"|\bviolation\("([a-z-]+)"/g)].map((m) => m[1] ?? m[2]!)),
    );
    assert.ok(used.size >= 10, `the scan finds the rules (${[...used].join(", ")})`);
    assert.deepEqual([...used].sort(), RULES.map((r) => r.name).sort());
    assert.equal(new Set(RULES.map((r) => r.name)).size, RULES.length, "names are unique");
    assert.ok(CONFIGURABLE_RULES.every((r) => !["review-cost", "job-scale"].includes(r)));
  });
});

const gpuPod = (namespace: string, gpus: string): KubeObject =>
  pod({
    namespace,
    spec: { containers: [{ name: "c", image: "img", resources: { limits: { "nvidia.com/gpu": gpus }, requests: { "nvidia.com/gpu": gpus } } }] },
  });

const jobReview = (object: KubeObject, namespace: string) =>
  review({
    namespace,
    kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
    resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
    object,
  });

describe("validating webhooks under enforcement modes", () => {
  const policy = checkPolicy(
    {
      limits: LIMITS,
      enforcement: {
        namespaces: [
          { pattern: "warn-*", mode: "warn" },
          { pattern: "audit-*", mode: "audit" },
          { pattern: "mixed", rules: { "job-gpus": "warn" } },
        ],
      },
    },
    "modes",
  );
  const hooks = (jobs = fakeJobReader()) => createWebhooks({ policy, log: silentLogger(), jobs, now: () => new Date() });

  const podCases: Array<{ name: string; namespace: string; outcome: string; warnings: RegExp[]; modes: string[] }> = [
    { name: "deny (default) → denied as before", namespace: "prod", outcome: "denied", warnings: [], modes: ["deny"] },
    {
      name: "warn → allowed, a warning naming rule and field",
      namespace: "warn-1",
      outcome: "allowed",
      warnings: [/^quartermaster: container-limits \(warn\): spec\.containers\[0\]\.resources\.limits\[nvidia\.com\/gpu\]: 8 exceeds/],
      modes: ["warn"],
    },
    { name: "audit → allowed, no warning, recorded", namespace: "audit-1", outcome: "allowed", warnings: [], modes: ["audit"] },
  ];
  for (const c of podCases) {
    it(`/validate/pods: ${c.name}`, async () => {
      const res = await hooks()["/validate/pods"]!.admit(review({ namespace: c.namespace, object: gpuPod(c.namespace, "8") }));
      assert.equal(res.outcome, c.outcome);
      assert.equal(res.review.response!.allowed, c.outcome === "allowed");
      const warnings = res.review.response!.warnings ?? [];
      assert.equal(warnings.length, c.warnings.length);
      for (const w of c.warnings)
        assert.ok(
          warnings.some((x) => w.test(x)),
          `${JSON.stringify(warnings)} has ${w}`,
        );
      assert.deepEqual(
        res.policyViolations.map((v) => `${v.rule}:${v.mode}`),
        c.modes.map((m) => `container-limits:${m}`),
      );
    });
  }

  it("/validate/jobs: a rule in warn, another in deny → denied for the deny one only, warned of the other", async () => {
    // 3 workers + master × 4 GPUs = 16 over the job's 8 (job-gpus: warn in `mixed`); 5 workers over 4 (job-replicas: deny).
    const j = structuredClone(gpuJob(5, 4)) as any;
    j.metadata.namespace = "mixed";
    const res = await hooks()["/validate/jobs"]!.admit(jobReview(j, "mixed"));
    assert.equal(res.outcome, "denied");
    assert.deepEqual(res.deniedRules, ["job-replicas"]);
    assert.deepEqual(
      res.review.response!.status!.details!.causes!.map((c) => c.field),
      ["spec.pytorchReplicaSpecs.Worker.replicas"],
    );
    assert.ok(
      res.review.response!.warnings!.some((w) => w.startsWith("quartermaster: job-gpus (warn): spec: ")),
      JSON.stringify(res.review.response!.warnings),
    );
    assert.deepEqual(
      res.policyViolations.map((v) => `${v.rule}:${v.mode}`),
      ["job-replicas:deny", "job-gpus:warn"],
    );
  });

  it("/validate/jobs: the job within its limits in warn mode → allowed, no warnings", async () => {
    const res = await hooks()["/validate/jobs"]!.admit(jobReview(gpuJob(1, 4), "warn-1"));
    assert.equal(res.outcome, "allowed");
    assert.deepEqual(res.policyViolations, []);
  });

  it("/validate/jobs scale subresource: audit → allowed and recorded; deny → denied", async () => {
    const jobs = fakeJobReader([{ ...gpuJob(2, 2), metadata: { name: "train", namespace: "audit-1" } }, gpuJob(2, 2)]);
    const scaleReview = (namespace: string) =>
      review({
        namespace,
        kind: { group: "autoscaling", version: "v1", kind: "Scale" },
        resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
        subResource: "scale",
        requestSubResource: "scale",
        operation: "UPDATE",
        name: "train",
        object: scale(9),
        oldObject: scale(2),
      });
    const audited = await hooks(jobs)["/validate/jobs"]!.admit(scaleReview("audit-1"));
    assert.equal(audited.outcome, "allowed");
    assert.deepEqual(
      audited.policyViolations.map((v) => `${v.rule}:${v.mode}:${v.field}`),
      ["job-replicas:audit:spec.replicas", "job-gpus:audit:spec.replicas"],
    );
    const denied = await hooks(jobs)["/validate/jobs"]!.admit(scaleReview("team-a"));
    assert.equal(denied.outcome, "denied");
  });

  it("a job's UPDATE: only what gets worse counts, in any mode", async () => {
    const old = gpuJob(5, 1);
    const res = await hooks()["/validate/jobs"]!.admit(
      review({
        namespace: "warn-1",
        operation: "UPDATE",
        kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
        resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
        object: old,
        oldObject: old,
      }),
    );
    assert.equal(res.outcome, "allowed");
    assert.deepEqual(res.policyViolations, []);
  });

  it("metrics: quartermaster_policy_violations_total by webhook, rule and mode", async () => {
    const metrics = createAdmissionMetrics({ timeoutSeconds: 5 });
    for (const ns of ["prod", "warn-1", "audit-1", "audit-2"]) {
      metrics.observe("validate-pods", await hooks()["/validate/pods"]!.admit(review({ namespace: ns, object: gpuPod(ns, "8") })), 0.001);
    }
    const text = await metrics.registry.metrics();
    const series = text.split("\n").filter((l) => l.startsWith("quartermaster_policy_violations_total{"));
    assert.deepEqual(series.sort(), [
      'quartermaster_policy_violations_total{webhook="validate-pods",rule="container-limits",mode="audit"} 2',
      'quartermaster_policy_violations_total{webhook="validate-pods",rule="container-limits",mode="deny"} 1',
      'quartermaster_policy_violations_total{webhook="validate-pods",rule="container-limits",mode="warn"} 1',
    ]);
  });
});

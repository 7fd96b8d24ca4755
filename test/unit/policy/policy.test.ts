import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import { parsePolicy } from "../../../src/policy/parse.js";
import { DEFAULT_JOB_KINDS } from "../../../src/policy/schema.js";
import { policyProblems } from "../../fixtures/policies.js";

const problems = policyProblems;

describe("policy", () => {
  it("empty document → the built-in defaults", () => {
    const p = defaultPolicy();
    assert.deepEqual(p.jobKinds, DEFAULT_JOB_KINDS);
    assert.equal(p.jobKinds.length, 8, "the Kubeflow v1 kinds, Caffe2Job and Kubeflow Trainer v2's TrainJob");
    assert.equal(p.gpu.resourceName, "nvidia.com/gpu");
    assert.deepEqual(
      p.gpu.resources.map((r) => r.pattern),
      ["nvidia.com/gpu", "nvidia.com/mig-*", "amd.com/gpu"],
    );
    assert.equal(p.clusterSpec.enabled, true);
    assert.equal(p.clusterSpec.onJobLookupFailure, "warn");
    assert.deepEqual(p.jobDefaults, {}, "no job defaults: jobs keep upstream's (no TTL, cleanPodPolicy None)");
    assert.equal(p.webhook.timeoutSeconds, 5);
  });

  it("the result is frozen", () => {
    const p = defaultPolicy();
    assert.throws(() => {
      (p.clusterSpec as { enabled: boolean }).enabled = false;
    }, TypeError);
  });

  it("partial sections keep the other defaults", () => {
    const p = parsePolicy("clusterSpec:\n  clusterDomain: cluster.local\nreconciler:\n  maxDeletionsPerPass: 5\n", "x");
    assert.equal(p.clusterSpec.clusterDomain, "cluster.local");
    assert.equal(p.clusterSpec.enabled, true);
    assert.equal(p.reconciler.maxDeletionsPerPass, 5);
    assert.equal(p.reconciler.leaseGracePeriodSeconds, 40);
  });

  it("job defaults within the limits, and a namespace entry with only job defaults → accepted, limits {} filled in", () => {
    const p = parsePolicy(
      [
        "limits: {runPolicy: {maxTtlSecondsAfterFinished: 86400, allowedCleanPodPolicies: [All, Running]}}",
        "jobDefaults: {ttlSecondsAfterFinished: 86400, cleanPodPolicy: Running, activeDeadlineSeconds: 3600, backoffLimit: 0}",
        "namespaces:",
        "  - pattern: research-*",
        "    jobDefaults: {ttlSecondsAfterFinished: 600}",
      ].join("\n"),
      "ok",
    );
    assert.deepEqual(p.jobDefaults, { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", activeDeadlineSeconds: 3600, backoffLimit: 0 });
    assert.deepEqual(p.namespaces, [{ pattern: "research-*", limits: {}, jobDefaults: { ttlSecondsAfterFinished: 600 } }]);
  });

  it("reconciler.allowedTemplates: refused by default, and what a policy allows is kept", () => {
    assert.deepEqual(defaultPolicy().reconciler.allowedTemplates, { privileged: false, hostNamespaces: false, serviceAccounts: [] });
    const p = parsePolicy("reconciler:\n  allowedTemplates:\n    privileged: true\n    serviceAccounts: [trainer, team-a/ingest]\n", "x");
    assert.deepEqual(p.reconciler.allowedTemplates, { privileged: true, hostNamespaces: false, serviceAccounts: ["trainer", "team-a/ingest"] });
  });

  it("JSON is accepted too", () => {
    assert.equal(parsePolicy('{"webhook": {"timeoutSeconds": 3}}', "p.json").webhook.timeoutSeconds, 3);
  });

  const errorCases: Array<{ name: string; text: string; want: string[] }> = [
    {
      name: "every schema error at once, with paths",
      text: [
        "clusterSpec:",
        "  enabled: maybe",
        "  onJobLookupFailure: panic",
        "gpu:",
        "  resources:",
        "    - tolerations: []",
        "reconciler:",
        "  maxDeletionsPerPass: 0",
        "  events: sometimes",
        "limits:",
        "  container:",
        "    cpu: lots",
        "surprise: true",
      ].join("\n"),
      want: [
        "(document): unknown field 'surprise'",
        "clusterSpec.enabled: must be boolean",
        'clusterSpec.onJobLookupFailure: must be one of "warn", "deny"',
        "gpu.resources[0]: missing required field 'pattern'",
        'limits.container.cpu: must match pattern "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$"',
        "reconciler.maxDeletionsPerPass: must be >= 1",
        "reconciler.events: must be boolean",
      ],
    },
    {
      name: "YAML syntax error → its line",
      text: "clusterSpec:\n  enabled: true\n   bad: [",
      want: ["line 2: Nested mappings", "line 2: Implicit keys", "line 3: Flow sequence"],
    },
    { name: "duplicate keys → refused", text: "webhook: {}\nwebhook: {}\n", want: ["line 2: Map keys must be unique"] },
    { name: "a list instead of a mapping", text: "- a\n- b\n", want: ["(document): must be a mapping of policy sections"] },
    {
      name: "removed reconciler defaults → each named, with where to go, beside every other error",
      text: "reconciler:\n  defaultTtlSecondsAfterFinished: 86400\n  defaultCleanPodPolicy: Running\n  maxDeletionsPerPass: 0\n",
      want: [
        'reconciler.defaultTtlSecondsAfterFinished: no longer exists: the reconciler no longer deletes jobs that set no TTL; to give new jobs a TTL, set jobDefaults.ttlSecondsAfterFinished (see "Upgrading" in docs/operations.md)',
        'reconciler.defaultCleanPodPolicy: no longer exists: a job without cleanPodPolicy now gets None, as upstream; to give new jobs one, set jobDefaults.cleanPodPolicy (see "Upgrading" in docs/operations.md)',
        "reconciler.maxDeletionsPerPass: must be >= 1",
      ],
    },
    {
      name: "a removed field alone → refused too",
      text: "reconciler:\n  defaultCleanPodPolicy: None\n",
      want: ["reconciler.defaultCleanPodPolicy: no longer exists: "],
    },
    {
      name: "job defaults of the wrong type or range",
      text: "jobDefaults:\n  ttlSecondsAfterFinished: -1\n  cleanPodPolicy: Some\n  activeDeadlineSeconds: 0\n  backoffLimit: 1.5\n  retries: 3\n",
      want: [
        "jobDefaults: unknown field 'retries'",
        "jobDefaults.ttlSecondsAfterFinished: must be >= 0",
        'jobDefaults.cleanPodPolicy: must be one of "All", "Running", "None"',
        "jobDefaults.activeDeadlineSeconds: must be >= 1",
        "jobDefaults.backoffLimit: must be integer",
      ],
    },
    {
      name: "job defaults over the policy's own run-policy limits → every one named",
      text: [
        "limits:",
        "  runPolicy: {maxTtlSecondsAfterFinished: 3600, maxActiveDeadlineSeconds: 60, maxBackoffLimit: 2, allowedCleanPodPolicies: [All, Running]}",
        "jobDefaults: {ttlSecondsAfterFinished: 86400, activeDeadlineSeconds: 61, backoffLimit: 3, cleanPodPolicy: None}",
      ].join("\n"),
      want: [
        "jobDefaults.ttlSecondsAfterFinished: 86400 is over limits.runPolicy.maxTtlSecondsAfterFinished (3600); every job left to this default would be denied",
        "jobDefaults.activeDeadlineSeconds: 61 is over limits.runPolicy.maxActiveDeadlineSeconds (60)",
        "jobDefaults.backoffLimit: 3 is over limits.runPolicy.maxBackoffLimit (2)",
        "jobDefaults.cleanPodPolicy: None is not in limits.runPolicy.allowedCleanPodPolicies (All, Running)",
      ],
    },
    {
      name: "a namespace's defaults over its limits, or its limits under the top-level defaults → named with the namespace",
      text: [
        "jobDefaults: {ttlSecondsAfterFinished: 7200, cleanPodPolicy: Running}",
        "namespaces:",
        "  - pattern: team-a",
        "    jobDefaults: {ttlSecondsAfterFinished: 999999}",
        "    limits: {runPolicy: {maxTtlSecondsAfterFinished: 86400}}",
        "  - pattern: team-b*",
        "    limits: {runPolicy: {allowedCleanPodPolicies: [All]}}",
        "  - pattern: team-c",
        "    jobDefaults: {backoffLimit: 4}",
      ].join("\n"),
      want: [
        "namespaces[0].jobDefaults.ttlSecondsAfterFinished: 999999 is over limits.runPolicy.maxTtlSecondsAfterFinished (86400) in namespaces matching team-a (namespaces[0]); every job",
        "jobDefaults.cleanPodPolicy: Running is not in limits.runPolicy.allowedCleanPodPolicies (All) in namespaces matching team-b* (namespaces[1]); every job",
      ],
    },
    {
      name: "reconciler.allowedTemplates of the wrong types → every field named",
      text: "reconciler:\n  allowedTemplates:\n    privileged: yes please\n    hostNamespaces: 1\n    serviceAccounts: admin\n    capabilities: true\n",
      want: [
        "reconciler.allowedTemplates: unknown field 'capabilities'",
        "reconciler.allowedTemplates.privileged: must be boolean",
        "reconciler.allowedTemplates.hostNamespaces: must be boolean",
        "reconciler.allowedTemplates.serviceAccounts: must be array",
      ],
    },
    {
      name: "reconciler.allowedTemplates.serviceAccounts: not ServiceAccount names → each item named",
      text: "reconciler:\n  allowedTemplates:\n    serviceAccounts: [trainer, team-a/trainer, Admin, a/b/c, '', 7]\n",
      want: [
        "reconciler.allowedTemplates.serviceAccounts[2]: must match pattern ",
        "reconciler.allowedTemplates.serviceAccounts[3]: must match pattern ",
        "reconciler.allowedTemplates.serviceAccounts[4]: must match pattern ",
        "reconciler.allowedTemplates.serviceAccounts[5]: must be string",
      ],
    },
    {
      name: "reconciler.allowedTemplates not an object",
      text: "reconciler:\n  allowedTemplates: true\n",
      want: ["reconciler.allowedTemplates: must be object"],
    },
    {
      name: "duplicate job kinds",
      text: "jobKinds:\n  - {kind: TFJob, group: kubeflow.org, version: v1, plural: tfjobs, framework: tensorflow}\n  - {kind: TFJob, group: kubeflow.org, version: v1, plural: tfjobs, framework: tensorflow}\n",
      want: ["jobKinds[1]: duplicates jobKinds[0] (kubeflow.org/TFJob)"],
    },
  ];
  for (const tc of errorCases) {
    it(`${tc.name}`, () => {
      const got = problems(tc.text);
      for (const w of tc.want)
        assert.ok(
          got.some((g) => g.startsWith(w)),
          `missing ${JSON.stringify(w)} in ${JSON.stringify(got)}`,
        );
      assert.equal(got.length, tc.want.length, JSON.stringify(got));
    });
  }
});

describe("generated validators", () => {
  it("the committed standalone validators match their schemas (npm run generate)", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { GENERATED, generateValidator } = await import("../../../src/generated/generate.js");
    for (const g of GENERATED) {
      const committed = readFileSync(join(import.meta.dirname, "../../../src/generated", g.file), "utf8");
      assert.equal(committed, generateValidator(g.schema, g.options), `src/generated/${g.file} is stale: run npm run generate`);
    }
  });
  it("the committed built-in policy is the schema's defaults (npm run generate)", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { DEFAULT_POLICY_FILE, defaultPolicySource } = await import("../../../src/generated/generate.js");
    const committed = readFileSync(join(import.meta.dirname, "../../../src/generated", DEFAULT_POLICY_FILE), "utf8");
    assert.equal(committed, defaultPolicySource(), `src/generated/${DEFAULT_POLICY_FILE} is stale: run npm run generate`);
    assert.deepEqual(defaultPolicy(), checkPolicy({}, "(test)"));
    assert.ok(Object.isFrozen(defaultPolicy().limits), "the built-in policy is frozen, as a checked one is");
    assert.notEqual(defaultPolicy(), defaultPolicy(), "each caller gets a copy of its own");
  });
});

describe("shipped policy", () => {
  it("manifests/base/policy.yaml is a valid policy", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const text = readFileSync(join(import.meta.dirname, "../../../manifests/base/policy.yaml"), "utf8");
    assert.equal(parsePolicy(text, "manifests/base/policy.yaml").clusterSpec.enabled, true);
  });
});

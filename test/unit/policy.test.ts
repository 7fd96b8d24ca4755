import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PolicyError } from "../../src/errors.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { parsePolicy } from "../../src/policy/parse.js";
import { DEFAULT_JOB_KINDS } from "../../src/policy/schema.js";

function problems(text: string): readonly string[] {
  try {
    parsePolicy(text, "test.yaml");
  } catch (err) {
    assert.ok(err instanceof PolicyError);
    return err.problems;
  }
  assert.fail("policy accepted");
}

describe("policy", () => {
  it("empty document → the built-in defaults", () => {
    const p = defaultPolicy();
    assert.deepEqual(p.jobKinds, DEFAULT_JOB_KINDS);
    assert.equal(p.jobKinds.length, 7);
    assert.equal(p.gpu.resourceName, "nvidia.com/gpu");
    assert.deepEqual(p.gpu.resources.map((r) => r.pattern), ["nvidia.com/gpu", "nvidia.com/mig-*", "amd.com/gpu"]);
    assert.equal(p.clusterSpec.enabled, true);
    assert.equal(p.clusterSpec.onJobLookupFailure, "warn");
    assert.equal(p.reconciler.defaultCleanPodPolicy, "Running");
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
    assert.equal(p.reconciler.defaultTtlSecondsAfterFinished, 86400);
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
        "  defaultCleanPodPolicy: Some",
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
        'reconciler.defaultCleanPodPolicy: must be one of "All", "Running", "None"',
      ],
    },
    { name: "YAML syntax error → its line", text: "clusterSpec:\n  enabled: true\n   bad: [", want: ["line 2: Nested mappings", "line 2: Implicit keys", "line 3: Flow sequence"] },
    { name: "duplicate keys → refused", text: "webhook: {}\nwebhook: {}\n", want: ["line 2: Map keys must be unique"] },
    { name: "a list instead of a mapping", text: "- a\n- b\n", want: ["(document): must be a mapping of policy sections"] },
    {
      name: "duplicate job kinds",
      text: "jobKinds:\n  - {kind: TFJob, group: kubeflow.org, version: v1, plural: tfjobs, framework: tensorflow}\n  - {kind: TFJob, group: kubeflow.org, version: v1, plural: tfjobs, framework: tensorflow}\n",
      want: ["jobKinds[1]: duplicates jobKinds[0] (kubeflow.org/TFJob)"],
    },
  ];
  for (const tc of errorCases) {
    it(`${tc.name}`, () => {
      const got = problems(tc.text);
      for (const w of tc.want) assert.ok(got.some((g) => g.startsWith(w)), `missing ${JSON.stringify(w)} in ${JSON.stringify(got)}`);
      assert.equal(got.length, tc.want.length, JSON.stringify(got));
    });
  }
});

describe("generated validators", () => {
  it("the committed standalone validators match their schemas (npm run generate)", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { GENERATED, generateValidator } = await import("../../src/generated/generate.js");
    for (const g of GENERATED) {
      const committed = readFileSync(join(import.meta.dirname, "../../src/generated", g.file), "utf8");
      assert.equal(committed, generateValidator(g.schema, g.options), `src/generated/${g.file} is stale: run npm run generate`);
    }
  });
});

describe("shipped policy", () => {
  it("manifests/base/policy.yaml is a valid policy", async () => {
    const { readFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const text = readFileSync(join(import.meta.dirname, "../../manifests/base/policy.yaml"), "utf8");
    assert.equal(parsePolicy(text, "manifests/base/policy.yaml").clusterSpec.enabled, true);
  });
});

/**
 * The exported ValidatingAdmissionPolicy (src/manifests/vap.ts) as text: its scope is the webhooks' scope, and each
 * rule kind's CEL appears exactly when the policy uses the rule, with the policy's values, escaped. Whether the
 * CEL judges pods as /validate/pods does is test/e2e/vap.test.ts, on a real apiserver.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { runCli } from "../../../src/cli/commands.js";
import { ALL_CONTAINERS, renderWebhookConfigurations, trainingPodExpression } from "../../../src/manifests/webhooks.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES } from "../../../src/core/gpu.js";
import { checkPolicy } from "../../../src/policy/load.js";
import {
  BEYOND_BOUNDS_CONDITION,
  beyondBoundsExpression,
  denyCondition,
  mayViolateExpression,
  POD_RULE_PASSES,
  renderValidatingAdmissionPolicy,
  trainingExpression,
  unexpressedRules,
  validatingAdmissionPolicyYaml,
  vapVariables,
  withinBoundsExpression,
} from "../../../src/manifests/vap.js";
import { VALIDATE_POD_PASSES } from "../../../webhooks/validate-pods.js";
import { ROOT } from "../../fixtures/manifests.js";

type Obj = Record<string, any>;
const policyOf = (doc: unknown) => checkPolicy(doc, "test");
const variable = (doc: unknown, name: string): string | undefined => vapVariables(policyOf(doc)).find((v) => v.name === name)?.expression;

describe("renderValidatingAdmissionPolicy: scope", () => {
  it("matches pod CREATE with the pods.validate webhook's namespaceSelector, the fast path, then the training-pods-only test first in the validation", () => {
    const policy = policyOf({ gpu: { resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "example.com/tpu-*" }] } });
    const { policy: vap, binding } = renderValidatingAdmissionPolicy(policy, { namespace: "platform" });
    const hook = renderWebhookConfigurations(policy, { namespace: "platform" })[1].webhooks.find((h) => h.name === "pods.validate.quartermaster.dev")!;
    const spec = vap.spec as Obj;
    assert.deepEqual(spec.matchConstraints.namespaceSelector, hook.namespaceSelector);
    assert.equal(spec.matchConditions.length, 2);
    assert.deepEqual(spec.matchConditions[0], { name: "within-the-webhook-bounds", expression: withinBoundsExpression() });
    assert.equal(spec.matchConditions[1].name, "pods-that-may-violate");
    assert.equal(spec.matchConditions[1].expression, mayViolateExpression(policy));
    // The webhook's training-pods-only test (its labels and GPU patterns; limits alone, all of them being
    // extended resources), tested first.
    assert.deepEqual(spec.variables[0], { name: "training", expression: trainingExpression(policy) });
    assert.ok(spec.validations[0].expression.startsWith("!variables.training || ("));
    assert.ok(spec.validations[0].messageExpression.startsWith("!variables.training ? '' :"));
    const expression = trainingExpression(policy);
    for (const s of [
      "'training.kubeflow.org/job-name' in object.metadata.?labels",
      "'caffe2_job_key' in object.metadata.?labels",
      "r == 'gpu'",
      "r == 'nvidia.com/gpu'",
      "r.startsWith('example.com/tpu-')",
    ]) {
      assert.ok(expression.includes(s), `lacks ${s}`);
      assert.ok(hook.matchConditions![0]!.expression.includes(s), `the webhook's condition lacks ${s}`);
    }
    assert.equal(expression, trainingPodExpression(policy, { limitsOnly: true }));
    assert.ok(!expression.includes("requests"), expression);
    assert.ok(hook.matchConditions![0]!.expression.includes(".?resources.?requests.orValue({})"), "the webhook's condition looks at requests too");
    assert.deepEqual(spec.matchConstraints.resourceRules, [
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" },
    ]);
    assert.equal(spec.failurePolicy, "Fail");
    assert.equal(spec.validations[0].reason, "Forbidden");
    assert.deepEqual((binding.spec as Obj).validationActions, ["Deny"]);
    assert.equal((binding.spec as Obj).policyName, (vap.metadata as Obj).name);
  });

  it("prices reviews with the webhook's passes", () => {
    assert.equal(POD_RULE_PASSES, VALIDATE_POD_PASSES);
    assert.match(variable({}, "costDenial")!, /> 10000 \?/);
    assert.match(variable({}, "partialItems")!, /> 2500 \?/);
  });
});

describe("renderValidatingAdmissionPolicy: CEL per rule kind", () => {
  const cases: Array<{ name: string; policy: unknown; variable: string; has?: string[]; lacks?: string[]; absent?: boolean }> = [
    {
      name: "container-limits: cpu and memory caps, quoted as the policy writes them",
      policy: { limits: { container: { cpu: "4", memory: "16Gi" } } },
      variable: "findings",
      has: ["k == 'cpu' ? '4'", "k == 'memory' ? '16Gi'", "' exceeds the per-container limit of '"],
    },
    {
      name: "container-limits: a GPU cap by exact name and by pattern, in the policy's order",
      policy: { limits: { container: { gpus: { "nvidia.com/gpu": 4, "nvidia.com/mig-*": 2 } } } },
      variable: "findings",
      has: ["k == 'nvidia.com/gpu' ? '4' : k.startsWith('nvidia.com/mig-') ? '2' : ''"],
    },
    {
      name: "container-limits: a request equal to its limit is named once, at the limit",
      policy: { limits: { container: { cpu: "4" } } },
      variable: "findings",
      has: [".compareTo(quantity(string(v))) == 0)"],
    },
    {
      name: "container-limits: none without caps (only the quantity checks on GPU resources)",
      policy: {},
      variable: "findings",
      lacks: ["exceeds the per-container limit"],
      has: ["is out of range"],
    },
    {
      name: "quantity: counted values out of range or negative",
      policy: { limits: { container: { cpu: "4" } } },
      variable: "findings",
      has: ["quantity('9223372036854775807')) > 0", "compareTo(quantity('0')) < 0", "must be greater than or equal to 0"],
    },
    {
      name: "gpu-mig-mixing: with nvidia.com/gpu among the GPU resources",
      policy: {},
      variable: "migs",
      has: ["'nvidia.com/gpu' in", "k.startsWith('nvidia.com/mig-')"],
    },
    {
      name: "gpu-mig-mixing: none when nvidia.com/gpu is not a GPU resource",
      policy: { gpu: { resources: [{ pattern: "amd.com/gpu" }] } },
      variable: "migs",
      absent: true,
    },
    {
      name: "pod-gpus: the sum and the per-pod cap",
      policy: { limits: { pod: { gpus: 8 } } },
      variable: "podLevel",
      has: ["variables.podGpus > 8", "' GPUs, over the per-pod limit of 8'"],
    },
    {
      name: "pod-gpus: init containers and native sidecars",
      policy: { limits: { pod: { gpus: 8 } } },
      variable: "podGpus",
      has: ["c.restartPolicy == 'Always'", ".max()", "variables.initGpuNames.map"],
    },
    { name: "pod-gpus: not computed without a per-pod cap", policy: {}, variable: "podGpus", absent: true },
    {
      name: "namespace overrides: the first matching pattern picks the limits",
      policy: {
        limits: { pod: { gpus: 8 } },
        namespaces: [
          { pattern: "team-b*", limits: { pod: { gpus: 2 } } },
          { pattern: "exact", limits: {} },
        ],
      },
      variable: "limitClass",
      has: ["request.namespace.startsWith('team-b') ? 1 : request.namespace == 'exact' ? 0 : 0"],
    },
    {
      name: "namespace overrides: no class variable when the limits are the same everywhere",
      policy: { namespaces: [{ pattern: "team-*", limits: {} }] },
      variable: "limitClass",
      absent: true,
    },
    {
      name: "a GPU pattern with a quote and a backslash is escaped, not injected",
      policy: { gpu: { resources: [{ pattern: "ex'am\\ple.com/gpu" }] } },
      variable: "gpuNames",
      has: ["k == 'ex\\'am\\\\ple.com/gpu'"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const text = variable(c.policy, c.variable);
      if (c.absent) return assert.equal(text, undefined);
      assert.ok(text !== undefined, `no variable ${c.variable}`);
      for (const s of c.has ?? []) assert.ok(text.includes(s), `${c.variable} lacks ${s}:\n${text}`);
      for (const s of c.lacks ?? []) assert.ok(!text.includes(s), `${c.variable} has ${s}`);
    });
  }

  const quick: Array<{ name: string; policy: unknown; has: string[]; lacks?: string[] }> = [
    {
      name: "may-violate: the cost bound, the caps and negative values",
      policy: { limits: { container: { cpu: "4" } } },
      has: [
        "size((object.spec.?initContainers.orValue([]) + object.spec.?containers.orValue([]))) <= 8",
        "<= 10 &&",
        "!string(v).startsWith('-') && quantity(string(v)).compareTo(quantity(k == 'cpu' ? '4' : ",
      ],
      lacks: ["request.namespace", "1e300"],
    },
    {
      name: "may-violate: one pass summing the GPUs only with a per-pod cap",
      policy: { limits: { pod: { gpus: 8 } } },
      has: [".map(c, ", ": 1e300)).sum() <= 8.0"],
    },
    {
      name: "may-violate: the limit class written out",
      policy: { limits: { pod: { gpus: 8 } }, namespaces: [{ pattern: "team-b*", limits: { pod: { gpus: 2 } } }] },
      has: ["request.namespace.startsWith('team-b') ? (", "<= 2.0", "<= 8.0"],
    },
    {
      name: "may-violate: whole GPUs and MIG slices in one container's limits (extended resources)",
      policy: {},
      has: ["!(k.startsWith('nvidia.com/mig-') && 'nvidia.com/gpu' in c.?resources.?limits.orValue({}))"],
      lacks: ["c.?resources.?requests.orValue({})].exists("],
    },
    {
      name: "may-violate: a GPU pattern that may name a non-extended resource: MIG mixing and GPU requests on both sides",
      policy: { gpu: { resources: [{ pattern: "*/gpu" }, { pattern: "nvidia.com/gpu" }] }, limits: { pod: { gpus: 8 } } },
      has: [
        "[c.?resources.?requests.orValue({}), c.?resources.?limits.orValue({})].exists(m, m.exists(k, k.startsWith('nvidia.com/mig-') && (",
        "&& !(k in c.?resources.?limits.orValue({}))",
      ],
    },
  ];
  for (const c of quick) {
    it(c.name, () => {
      const text = mayViolateExpression(policyOf(c.policy));
      for (const s of c.has) assert.ok(text.includes(s), `lacks ${s}:\n${text}`);
      for (const s of c.lacks ?? []) assert.ok(!text.includes(s), `has ${s}`);
    });
  }

  const training: Array<{ name: string; policy: unknown; has: string[]; lacks?: string[] }> = [
    {
      name: "training pods: GPU resources looked up in limits only when all are extended resources",
      policy: {},
      has: [".exists(c, c.?resources.?limits.orValue({}).exists(r, r == 'gpu' || r == 'nvidia.com/gpu'"],
      lacks: ["].exists(m, m.exists(r, "],
    },
    {
      name: "training pods: in requests and limits when a GPU pattern may name a non-extended resource",
      policy: { gpu: { resources: [{ pattern: "*/gpu" }] } },
      has: ["].exists(m, m.exists(r, r == 'gpu' || r == 'nvidia.com/gpu' || r.endsWith('/gpu') || "],
    },
  ];
  for (const c of training) {
    it(c.name, () => {
      const text = trainingExpression(policyOf(c.policy));
      for (const s of c.has) assert.ok(text.includes(s), `lacks ${s}:\n${text}`);
      for (const s of c.lacks ?? []) assert.ok(!text.includes(s), `has ${s}`);
    });
  }

  it("the match condition makes one pass over the containers (the apiserver plans it for every request)", () => {
    const text = mayViolateExpression(
      policyOf({ limits: { container: { cpu: "4", memory: "8Gi", gpus: { "nvidia.com/gpu": 8, "nvidia.com/mig-*": 7 } }, pod: { gpus: 8 } } }),
    );
    const comprehensions = text.match(/\.(all|exists|map|filter|transformList)\(/g) ?? [];
    // One pass over the containers: the entries of requests, then of limits.
    assert.equal(comprehensions.length, 3, text);
  });

  it("variables only use variables defined before them", () => {
    const vars = vapVariables(
      policyOf({
        limits: { container: { cpu: "1", gpus: { "nvidia.com/gpu": 1 } }, pod: { gpus: 1 } },
        namespaces: [{ pattern: "x", limits: { pod: { gpus: 2 } } }],
      }),
    );
    const seen = new Set<string>();
    for (const v of vars) {
      for (const m of v.expression.matchAll(/variables\.([A-Za-z]+)/g)) assert.ok(seen.has(m[1]!), `${v.name} uses ${m[1]} before it is defined`);
      seen.add(v.name);
    }
  });
});

describe("enforcement modes: the export denies only what the webhook denies", () => {
  const caps = { limits: { container: { cpu: "4", gpus: { "nvidia.com/gpu": 4 } }, pod: { gpus: 8 } } };
  const conds: Array<{ name: string; enforcement: unknown; rule: string; want: string }> = [
    { name: "nothing set: deny everywhere", enforcement: {}, rule: "container-limits", want: "true" },
    { name: "the rule in warn cluster-wide: nowhere", enforcement: { rules: { "container-limits": "warn" } }, rule: "container-limits", want: "false" },
    { name: "everything in audit: nowhere", enforcement: { mode: "audit" }, rule: "pod-gpus", want: "false" },
    { name: "review-cost always denies, whatever the mode", enforcement: { mode: "warn" }, rule: "review-cost", want: "true" },
    {
      name: "another rule's mode changes nothing",
      enforcement: { rules: { "job-gpus": "warn" }, namespaces: [{ pattern: "t*", rules: { quantity: "audit" } }] },
      rule: "container-limits",
      want: "true",
    },
    {
      name: "a namespace entry that names deny again: still everywhere",
      enforcement: { namespaces: [{ pattern: "t*", mode: "deny" }] },
      rule: "quantity",
      want: "true",
    },
    {
      name: "warn by default, deny in team-a-*: only there",
      enforcement: { rules: { "pod-gpus": "warn" }, namespaces: [{ pattern: "team-a-*", rules: { "pod-gpus": "deny" } }] },
      rule: "pod-gpus",
      want: "(request.namespace.startsWith('team-a-') ? true : false)",
    },
    {
      name: "first matching entry wins; an entry naming no mode for the rule is passed over",
      enforcement: {
        namespaces: [
          { pattern: "x", rules: { quantity: "warn" } },
          { pattern: "team-*", mode: "audit" },
          { pattern: "team-a", rules: { "container-limits": "deny" } },
        ],
      },
      rule: "container-limits",
      want: "(request.namespace.startsWith('team-') ? false : request.namespace == 'team-a' ? true : true)",
    },
    {
      name: "a pattern matching every namespace ends the chain",
      enforcement: {
        namespaces: [
          { pattern: "*", mode: "warn" },
          { pattern: "a", mode: "deny" },
        ],
      },
      rule: "gpu-mig-mixing",
      want: "false",
    },
    {
      name: "a glob in the middle: a regular expression on the name",
      enforcement: { namespaces: [{ pattern: "ml-*-prod", rules: { "gpu-mig-mixing": "warn" } }] },
      rule: "gpu-mig-mixing",
      want: "(request.namespace.matches('^ml-.*-prod$') ? false : true)",
    },
  ];
  for (const c of conds) {
    it(`where ${c.rule} denies: ${c.name}`, () => assert.equal(denyCondition(policyOf({ enforcement: c.enforcement }).enforcement, c.rule), c.want));
  }

  const cases: Array<{ name: string; enforcement: unknown; variable: string; has?: string[]; lacks?: string[]; absent?: boolean; equals?: string }> = [
    {
      name: "container-limits in warn: no cap check, the quantity checks stay",
      enforcement: { rules: { "container-limits": "warn" } },
      variable: "findings",
      lacks: ["exceeds the per-container limit"],
      has: ["is out of range", "must be greater than or equal to 0"],
    },
    {
      name: "quantity in audit: no range or sign message, the cap check stays",
      enforcement: { rules: { quantity: "audit" } },
      variable: "findings",
      lacks: ["is out of range", "must be greater than or equal to 0"],
      has: ["exceeds the per-container limit"],
    },
    { name: "gpu-mig-mixing in warn: not computed", enforcement: { rules: { "gpu-mig-mixing": "warn" } }, variable: "migs", absent: true },
    {
      name: "gpu-mig-mixing in warn: nothing in the per-container list",
      enforcement: { rules: { "gpu-mig-mixing": "warn" } },
      variable: "perContainer",
      lacks: ["MIG slices"],
    },
    { name: "pod-gpus in audit: not summed", enforcement: { rules: { "pod-gpus": "audit" } }, variable: "podGpus", absent: true },
    { name: "pod-gpus in audit: no pod-level finding", enforcement: { rules: { "pod-gpus": "audit" } }, variable: "podLevel", equals: "[]" },
    {
      name: "container-limits denied in team-a-* only: the cap check under the namespace's condition",
      enforcement: { mode: "warn", namespaces: [{ pattern: "team-a-*", rules: { "container-limits": "deny" } }] },
      variable: "findings",
      has: ["(request.namespace.startsWith('team-a-') ? true : false) ? (", "exceeds the per-container limit"],
      lacks: ["is out of range"],
    },
    {
      name: "pod-gpus in warn in team-b only",
      enforcement: { namespaces: [{ pattern: "team-b", rules: { "pod-gpus": "warn" } }] },
      variable: "podLevel",
      has: ["(request.namespace == 'team-b' ? false : true) ? (variables.podGpus > 8"],
    },
    {
      name: "gpu-mig-mixing in audit in team-b only",
      enforcement: { namespaces: [{ pattern: "team-b", rules: { "gpu-mig-mixing": "audit" } }] },
      variable: "perContainer",
      has: ["(request.namespace == 'team-b' ? false : true) && size(variables.migs[ci]) > 0"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const text = variable({ ...caps, enforcement: c.enforcement }, c.variable);
      if (c.absent) return assert.equal(text, undefined);
      assert.ok(text !== undefined, `no variable ${c.variable}`);
      if (c.equals !== undefined) assert.equal(text, c.equals);
      for (const s of c.has ?? []) assert.ok(text.includes(s), `${c.variable} lacks ${s}:\n${text}`);
      for (const s of c.lacks ?? []) assert.ok(!text.includes(s), `${c.variable} has ${s}`);
    });
  }

  it("deny everywhere: the same policy as without an enforcement section", () => {
    const plain = renderValidatingAdmissionPolicy(policyOf(caps));
    const explicit = renderValidatingAdmissionPolicy(
      policyOf({ ...caps, enforcement: { mode: "deny", rules: { "job-gpus": "warn" }, namespaces: [{ pattern: "x*", rules: { capacity: "audit" } }] } }),
    );
    assert.deepEqual(explicit, plain);
  });

  it("still one binding, validationActions [Deny]: warn and audit stay with the webhook", () => {
    const { binding } = renderValidatingAdmissionPolicy(policyOf({ ...caps, enforcement: { mode: "warn" } }));
    assert.deepEqual((binding.spec as Obj).validationActions, ["Deny"]);
  });

  const listed: Array<{ name: string; enforcement: unknown; active: string[]; why?: RegExp }> = [
    {
      name: "warn everywhere: every expressed rule listed",
      enforcement: { mode: "warn" },
      active: ["container-limits (warn)", "quantity (warn)", "gpu-mig-mixing (warn)", "pod-gpus (warn)"],
      why: /warn mode everywhere: the exported policy leaves the rule out; the webhook's warnings/,
    },
    {
      name: "warn by default, deny in team-a: listed as warn by default",
      enforcement: { rules: { "pod-gpus": "warn" }, namespaces: [{ pattern: "team-a", rules: { "pod-gpus": "deny" } }] },
      active: ["pod-gpus (warn)"],
      why: /warn mode by default: the exported policy denies it only where its mode is deny/,
    },
    { name: "a job rule in warn: nothing more listed", enforcement: { rules: { "job-gpus": "warn", capacity: "audit" } }, active: [] },
    {
      name: "per namespace: listed with its patterns",
      enforcement: { namespaces: [{ pattern: "team-b*", rules: { "pod-gpus": "audit", quantity: "warn" } }] },
      active: ["quantity (warn)", "pod-gpus (audit)"],
      why: /in namespaces matching team-b\*: the exported policy denies it only where its mode is deny/,
    },
  ];
  for (const c of listed) {
    it(`unexpressedRules: ${c.name}`, () => {
      const rules = unexpressedRules(policyOf({ enforcement: c.enforcement })).filter((r) => r.active);
      assert.deepEqual(
        rules.map((r) => r.rule),
        c.active,
      );
      if (c.why) assert.match(rules.map((r) => r.why).join("\n"), c.why);
    });
  }

  it("the YAML header names the rules denied everywhere and those denied by namespace", async () => {
    const yaml = await validatingAdmissionPolicyYaml(
      policyOf({ ...caps, enforcement: { rules: { quantity: "audit" }, namespaces: [{ pattern: "team-b", rules: { "pod-gpus": "warn" } }] } }),
    );
    assert.match(yaml, /^# Expressed: review-cost, container-limits, gpu-mig-mixing; where their mode is deny: pod-gpus\. Not expressed/m);
    assert.match(yaml, /^# - quantity \(audit\) \(USED BY THIS POLICY\): enforcement puts it in audit mode everywhere/m);
    assert.match(yaml, /^# - pod-gpus \(warn\) \(USED BY THIS POLICY\): enforcement puts it in warn mode in namespaces matching team-b/m);
  });
});

describe("unexpressedRules", () => {
  const cases: Array<{ name: string; policy: unknown; active: string[] }> = [
    { name: "the built-in policy: nothing it uses is missing", policy: {}, active: [] },
    {
      name: "caps: resizes and near-limit warnings stay with the webhook",
      policy: { limits: { container: { cpu: "4" } } },
      active: ["pods/resize", "near-limit warnings"],
    },
    {
      name: "allowed accelerators in an override",
      policy: { namespaces: [{ pattern: "t", limits: { allowedAccelerators: ["A100"] } }] },
      active: ["accelerator-allowed"],
    },
  ];
  for (const c of cases) {
    it(c.name, () =>
      assert.deepEqual(
        unexpressedRules(policyOf(c.policy))
          .filter((r) => r.active)
          .map((r) => r.rule),
        c.active,
      ),
    );
  }
});

describe("quartermaster policy export-vap", () => {
  async function cli(args: string[], cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd, shutdown: new Promise(() => {}) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  }

  it("prints the policy and its binding; what the policy uses and the export cannot express goes to stderr", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-vap-"));
    writeFileSync(join(dir, "p.yaml"), "limits:\n  allowedAccelerators: [A100]\n");
    const r = await cli(["policy", "export-vap", "--policy", "p.yaml", "--namespace", "platform"], dir);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"],
    );
    assert.ok(docs[0]!.spec.matchConstraints.namespaceSelector.matchExpressions[1].values.includes("platform"));
    assert.match(r.stdout, /^# .*accelerator-allowed \(USED BY THIS POLICY\)/m);
    assert.match(r.stderr, /not in the exported policy: accelerator-allowed/);
  });

  it("rules in warn or audit mode go to stderr", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-vap-"));
    writeFileSync(
      join(dir, "p.yaml"),
      'enforcement:\n  rules: {container-limits: warn}\n  namespaces:\n    - {pattern: "team-b*", rules: {pod-gpus: audit}}\n',
    );
    const r = await cli(["policy", "export-vap", "--policy", "p.yaml"], dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /not in the exported policy: container-limits \(warn\): enforcement puts it in warn mode everywhere/);
    assert.match(r.stderr, /not in the exported policy: pod-gpus \(audit\): enforcement puts it in audit mode in namespaces matching team-b\*/);
  });

  it("the built-in policy: nothing on stderr", async () => {
    const r = await cli(["policy", "export-vap"]);
    assert.equal(r.code, 0);
    assert.equal(r.stderr, "");
  });

  const bad: Array<{ name: string; args: string[]; code: number; stderr: RegExp }> = [
    { name: "an unknown flag", args: ["--output", "x"], code: 2, stderr: /unknown option '--output'[\s\S]*Usage: quartermaster policy export-vap/ },
    { name: "a namespace that is not a name", args: ["--namespace", "Bad_NS"], code: 2, stderr: /--namespace must be a namespace name/ },
    { name: "a missing policy file", args: ["--policy", "/nonexistent/p.yaml"], code: 1, stderr: /cannot read/ },
  ];
  for (const b of bad) {
    it(`refuses ${b.name}`, async () => {
      const r = await cli(["policy", "export-vap", ...b.args]);
      assert.equal(r.code, b.code, r.stderr);
      assert.match(r.stderr, b.stderr);
      assert.equal(r.stdout, "");
    });
  }
});

/**
 * The bounds conditions evaluated as JavaScript: they use only the container list, `size`, `all`/`exists`,
 * comparisons and `request.operation`, so a textual translation of the rendered CEL is exact for them.
 */
function evalBounds(cel: string, pod: Obj, operation = "CREATE"): boolean {
  const js = cel
    .split(ALL_CONTAINERS)
    .join("all")
    .replaceAll(".?", "?.")
    .replace(/([\w?.]+)\.orValue\((\[\]|\{\})\)/g, "(($1) ?? $2)")
    .replace(/\.all\((\w+), /g, ".every(($1) => ")
    .replace(/\.exists\((\w+), /g, ".some(($1) => ");
  assert.doesNotMatch(js, /orValue|\.all\(|\.exists\(|\bobject\.spec\?\.(init)?[cC]ontainers/, `untranslated CEL: ${js}`);
  const all = [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])];
  const size = (x: unknown): number => (Array.isArray(x) ? x.length : Object.keys(x as object).length);
  return new Function("all", "size", "request", "object", `return (${js});`)(all, size, { operation }, pod) as boolean;
}

describe("bounds: the policy judges only pods within the webhooks' match-condition bounds; the webhook keeps the rest", () => {
  const container = (j: number, entries: number, gpu = false): Obj => ({
    name: `c-${j}`,
    image: "busybox",
    resources: {
      limits: Object.fromEntries(Array.from({ length: entries }, (_, i) => (gpu && i === 0 ? ["nvidia.com/gpu", "1"] : [`example.com/r-${i}`, "1"]))),
    },
  });
  const pod = (containers: Obj[], initContainers: Obj[] = [], labels?: Obj): Obj => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", ...(labels ? { labels } : {}) },
    spec: { containers, ...(initContainers.length ? { initContainers } : {}) },
  });
  const n = (count: number, entries = 1, gpu = false): Obj[] => Array.from({ length: count }, (_, j) => container(j, entries, gpu));
  const cases: Array<{ name: string; pod: Obj; judged: boolean }> = [
    {
      name: `${CONDITION_MAX_CONTAINERS + 1} containers, no GPU, no job label (a wide non-training pod): not evaluated by the policy`,
      pod: pod(n(CONDITION_MAX_CONTAINERS + 1)),
      judged: false,
    },
    {
      name: `${CONDITION_MAX_CONTAINERS + 1} containers of a training pod: left to the webhook`,
      pod: pod(n(CONDITION_MAX_CONTAINERS + 1, 1, true), [], { "training.kubeflow.org/job-name": "j" }),
      judged: false,
    },
    { name: "1,500 containers of 16 entries: not evaluated by the policy", pod: pod(n(1500, 16)), judged: false },
    { name: `init containers count: 40 init + ${CONDITION_MAX_CONTAINERS - 39} containers`, pod: pod(n(CONDITION_MAX_CONTAINERS - 39), n(40)), judged: false },
    {
      name: `a container of ${CONDITION_MAX_RESOURCES + 1} resource entries: not evaluated by the policy`,
      pod: pod([container(0, CONDITION_MAX_RESOURCES + 1)]),
      judged: false,
    },
    { name: `exactly ${CONDITION_MAX_CONTAINERS} containers: still evaluated`, pod: pod(n(CONDITION_MAX_CONTAINERS, 1, true)), judged: true },
    {
      name: `a container of exactly ${CONDITION_MAX_RESOURCES} entries: still evaluated`,
      pod: pod([container(0, CONDITION_MAX_RESOURCES, true)]),
      judged: true,
    },
    { name: "a one-container training pod: still evaluated", pod: pod(n(1, 2, true), [], { "training.kubeflow.org/job-name": "j" }), judged: true },
    { name: "a pod without containers: still evaluated", pod: pod([]), judged: true },
  ];
  const vap = renderValidatingAdmissionPolicy(policyOf({})).policy.spec as Obj;
  const overlay = parseAllDocuments(readFileSync(join(ROOT, "manifests/overlays/validating-admission-policy/kustomization.yaml"), "utf8"))[0]!.toJS() as Obj;
  const ops = parseAllDocuments(overlay.patches[0].patch)[0]!.toJS() as Obj[];
  for (const c of cases) {
    it(c.name, () => {
      // Every match condition must hold for the policy to run: the first is the bounds.
      assert.equal(evalBounds(vap.matchConditions[0].expression, c.pod), c.judged);
      // The overlay's webhook takes exactly the pods the policy leaves.
      assert.equal(evalBounds(beyondBoundsExpression(), c.pod), !c.judged);
    });
  }
  it("a pod that names ResourceClaims reaches the webhook too (its claims are other objects), and the policy still judges its containers", () => {
    const pod = { spec: { containers: [container(0, 2, true)], resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "t" }] } };
    assert.equal(evalBounds(vap.matchConditions[0].expression, pod), true);
    assert.equal(evalBounds(beyondBoundsExpression(), pod), true);
    assert.equal(evalBounds(beyondBoundsExpression(), { spec: { ...pod.spec, resourceClaims: [] } }), false);
  });
  it("an in-place resize always reaches the webhook, whatever the pod", () => {
    for (const c of cases) assert.equal(evalBounds(beyondBoundsExpression(), c.pod, "UPDATE"), true);
  });
  it("the bounds are the webhooks' constants", () => {
    assert.ok(withinBoundsExpression().includes(`<= ${CONDITION_MAX_CONTAINERS} &&`));
    assert.ok(withinBoundsExpression().includes(`<= ${CONDITION_MAX_RESOURCES})`));
  });
  it("the overlay adds the complement to pods.validate, keeping its rules (pod CREATE and pods/resize) and training-pods-only", () => {
    assert.deepEqual(overlay.patches[0].target, {
      group: "admissionregistration.k8s.io",
      version: "v1",
      kind: "ValidatingWebhookConfiguration",
      name: "quartermaster",
    });
    assert.deepEqual(ops[0], { op: "test", path: "/webhooks/0/name", value: "pods.validate.quartermaster.dev" });
    assert.deepEqual(ops[1], {
      op: "add",
      path: "/webhooks/0/matchConditions/-",
      value: { name: BEYOND_BOUNDS_CONDITION, expression: beyondBoundsExpression() },
    });
    assert.equal(overlay.patches.length, 1, "no other patch (the webhook's rules stay as in the base)");
    const hooks = renderWebhookConfigurations(policyOf({}))[1].webhooks;
    assert.equal(hooks[0]!.name, "pods.validate.quartermaster.dev");
    assert.deepEqual(
      hooks[0]!.matchConditions!.map((m) => m.name),
      ["training-pods-only"],
    );
  });
});

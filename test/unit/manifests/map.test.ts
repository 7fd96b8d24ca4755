/**
 * The exported MutatingAdmissionPolicy (src/manifests/map.ts) as structure: which mutations and variables each policy
 * setting renders, its scope and binding, the pods webhook's reduced mode, `policy export-map`, the doctor's check,
 * and the pipeline's record of mutation names (kept in pipeline order, so the policy and the webhook agree). Whether
 * the CEL outfits pods as /mutate/pods does is test/e2e/map-parity.test.ts, on a real apiserver.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { runCli } from "../../../src/cli/commands.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkMutatingPolicy } from "../../../src/doctor/admission-policy.js";
import type { MutatingPolicyState, Unreadable } from "../../../src/doctor/types.js";
import {
  MAP_NAME,
  mapSpec,
  REDUCED_MODE_CONDITION,
  reducedModeExpression,
  renderMutatingAdmissionPolicy,
  unexpressedMutations,
  withinBoundsExpression,
} from "../../../src/manifests/map.js";
import { renderWebhookConfigurations } from "../../../src/manifests/webhooks.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";

type Obj = Record<string, any>;
const policyOf = (doc: unknown): Policy => checkPolicy(doc, "test");
const variable = (p: Policy, name: string): string | undefined => mapSpec(p).variables.find((v) => v.name === name)?.expression;
/** The pipeline's steps the policy carries (all in its one mutation). */
const stepNames = (p: Policy): string[] => mapSpec(p).steps;

describe("policy settings → the rendered MutatingAdmissionPolicy", () => {
  const CASES: Array<{ name: string; doc: Obj; mutations: string[]; check?: (p: Policy) => void }> = [
    {
      name: "the built-in policy: resources, GPU tolerations, accelerator; no interruptible settings, so no interruptible step",
      doc: {},
      mutations: ["resources", "gpu-tolerations", "accelerator"],
      check: (p) => {
        // cpu 1 and memory 1Gi defaults, written as the webhook writes them; no limitsFromRequests: limits pass through.
        assert.match(variable(p, "r3")!, /'1Gi'/);
        assert.equal(variable(p, "l3"), "variables.l2.transformList(i, l, l)");
        // GFD's labels, from src/mutate/accelerator.ts GFD (mixed count label and single-strategy product).
        assert.match(variable(p, "accAlts")!, /'nvidia\.com\/mig-' \+ \(variables\.accPartition\) \+ '\.count', 'Gt', '0'/);
        assert.match(variable(p, "accProducts")!, /'-MIG-'/);
        // No accelerator tolerations unless the policy asks.
        assert.equal(variable(p, "accWanted"), undefined);
        // The MIG pattern's extra toleration, only for names it matches.
        assert.match(variable(p, "gpuWanted")!, /n\.startsWith\('nvidia\.com\/mig-'\) \? \[\['nvidia\.com\/gpu', 'Exists', '', 'NoSchedule', ''\]\]/);
      },
    },
    {
      name: "interruptible tolerations and both requirements: an interruptible step",
      doc: {
        interruptible: {
          tolerations: [{ key: "spot", operator: "Equal", value: "true", effect: "NoSchedule", tolerationSeconds: 30 }],
          nodeRequirement: { key: "lifecycle", operator: "In", values: ["spot"] },
          nonInterruptibleNodeRequirement: { key: "lifecycle", operator: "NotIn", values: ["spot"] },
        },
      },
      mutations: ["resources", "gpu-tolerations", "accelerator", "interruptible"],
      check: (p) => {
        assert.equal(
          variable(p, "intAlts"),
          "(variables.interruptible ? [[['lifecycle', 'In', 'spot']]] : [[['lifecycle', 'NotIn', 'spot']]]).filter(a, size(a) > 0)",
        );
        assert.match(variable(p, "intWanted")!, /\['spot', 'Equal', 'true', 'NoSchedule', '30'\]/);
        assert.match(variable(p, "interruptible")!, /trim\(\)\.lowerAscii\(\) == 'true'/);
      },
    },
    {
      name: "interruptible tolerations only: no affinity variables",
      doc: { interruptible: { tolerations: [{ key: "spot", operator: "Exists" }] } },
      mutations: ["resources", "gpu-tolerations", "accelerator", "interruptible"],
      check: (p) => assert.equal(variable(p, "intAlts"), undefined),
    },
    {
      name: "partitionNodeLabel and addTolerations: one label for partitions, tolerations for both",
      doc: { accelerator: { nodeLabel: "gpu-type", partitionNodeLabel: "mig-profile", addTolerations: true } },
      mutations: ["resources", "gpu-tolerations", "accelerator"],
      check: (p) => {
        assert.match(variable(p, "accAlts")!, /\['mig-profile', 'In', variables\.accPartition\]/);
        assert.doesNotMatch(variable(p, "accAlts")!, /\.count/);
        assert.match(variable(p, "accAlts")!, /\['mig-profile', 'DoesNotExist'\]/);
        assert.match(variable(p, "accWanted")!, /\['gpu-type', 'Equal', variables\.accDevice, 'NoSchedule', ''\]/);
        assert.match(variable(p, "accWanted")!, /\['mig-profile', 'Equal', variables\.accPartition, 'NoSchedule', ''\]/);
      },
    },
    {
      name: "limitsFromRequests and no cpu default: limits from requests, cpu requests only from a limit",
      doc: { resources: { defaultRequests: { memory: "2Gi" }, limitsFromRequests: ["memory", "example.com/foo"] } },
      mutations: ["resources", "gpu-tolerations", "accelerator"],
      check: (p) => {
        assert.match(variable(p, "l3")!, /\['memory', 'example\.com\/foo'\]\.filter/);
        assert.match(variable(p, "r3")!, /'2Gi'/);
        assert.match(variable(p, "r3")!, /\|\| false\)\)/, "no cpu default");
      },
    },
    {
      name: "a zero default is no default (the webhook never writes zero)",
      doc: { resources: { defaultRequests: { cpu: "0", memory: "0Mi" } } },
      mutations: ["resources", "gpu-tolerations", "accelerator"],
      check: (p) => assert.doesNotMatch(variable(p, "r3")!, /'0Mi'|: '0'/),
    },
    {
      name: "another GPU resource name: the rename target",
      doc: { gpu: { resourceName: "amd.com/gpu" } },
      mutations: ["resources", "gpu-tolerations", "accelerator"],
      check: (p) => assert.match(variable(p, "r1")!, /'amd\.com\/gpu' in m/),
    },
  ];
  for (const c of CASES) {
    it(c.name, () => {
      const p = policyOf(c.doc);
      assert.deepEqual(stepNames(p), c.mutations);
      c.check?.(p);
      // One mutation (one round trip of the pod in the apiserver) carrying every step; each step's name is recorded
      // (in `applied`) only when it changes the pod, and a pod nothing changes gets the failing test only.
      const { mutations } = mapSpec(p);
      assert.equal(mutations.length, 1);
      assert.match(mutations[0]!.expression, /^size\(variables\.applied\) == 0 \? \[JSONPatch\{op: 'test'/);
      const applied = variable(p, "applied")!;
      for (const name of c.mutations) assert.ok(applied.includes(`['${name}']`), name);
      assert.equal(applied.split(" + ").length, c.mutations.length);
    });
  }
});

describe("scope, binding and which pods", () => {
  it("the webhooks' scope and training pods, within the webhook's bounds, and never pods naming claims when the policy knows device classes", () => {
    const p = policyOf({});
    const { policy, binding } = renderMutatingAdmissionPolicy(p, { namespace: "platform" });
    const spec = policy.spec as Obj;
    assert.equal(spec.failurePolicy, "Ignore");
    assert.equal(spec.reinvocationPolicy, "IfNeeded");
    assert.ok(spec.matchConstraints.namespaceSelector.matchExpressions[1].values.includes("platform"));
    assert.deepEqual(spec.matchConstraints.resourceRules[0].operations, ["CREATE"]);
    assert.deepEqual(
      spec.matchConditions.map((c: Obj) => c.name),
      ["within-the-webhook-bounds", "training-pods-only"],
    );
    assert.match(spec.matchConditions[0].expression, /!\(size\(object\.spec\.\?resourceClaims/);
    assert.doesNotMatch(withinBoundsExpression({ ...p, gpu: { ...p.gpu, deviceClasses: [] } }), /resourceClaims/);
    assert.ok(spec.mutations.every((m: Obj) => m.patchType === "JSONPatch"));
    assert.deepEqual(binding, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingAdmissionPolicyBinding",
      metadata: { name: MAP_NAME },
      spec: { policyName: MAP_NAME },
    });
  });

  it("reduced mode: the pods webhook gains the complement condition (jobs by label or controller, the policy's bounds), only then", () => {
    const full = policyOf({});
    const reduced = policyOf({ webhook: { podMutation: "reduced" } });
    const hook = (p: Policy) => renderWebhookConfigurations(p)[0].webhooks.find((h) => h.name === "pods.mutate.quartermaster.dev")!;
    assert.deepEqual(
      hook(full).matchConditions!.map((c) => c.name),
      ["training-pods-only"],
    );
    const conds = hook(reduced).matchConditions!;
    assert.deepEqual(
      conds.map((c) => c.name),
      ["training-pods-only", REDUCED_MODE_CONDITION],
    );
    const expr = conds[1]!.expression;
    assert.equal(expr, reducedModeExpression(reduced));
    assert.ok(expr.endsWith(`!(${withinBoundsExpression(reduced)})`));
    assert.match(expr, /'training\.kubeflow\.org\/job-name' in object\.metadata/);
    assert.match(expr, /o\.kind in \[.*'PyTorchJob'.*'Job'\]/);
    assert.match(expr, /'jobset\.sigs\.k8s\.io\/jobset-name'/);
    // The other webhooks are the same in both modes.
    const others = (p: Policy) =>
      JSON.stringify(renderWebhookConfigurations(p).flatMap((c) => c.webhooks.filter((h) => h.name !== "pods.mutate.quartermaster.dev")));
    assert.equal(others(full), others(reduced));
  });

  it("what is left to the webhook: claims only when the policy knows device classes", () => {
    const names = (p: Policy) =>
      unexpressedMutations(p)
        .filter((u) => u.active)
        .map((u) => u.mutation);
    assert.ok(names(policyOf({})).includes("GPUs through ResourceClaims (DRA)"));
    assert.ok(!names(policyOf({ gpu: { deviceClasses: [] } })).includes("GPUs through ResourceClaims (DRA)"));
    assert.ok(names(policyOf({})).some((n) => n.startsWith("training-labels, cluster-spec")));
  });
});

describe("quartermaster.dev/mutations: the pipeline's order, however the names arrive", () => {
  const gpuPod = (annotations?: Record<string, string>) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", ...(annotations ? { annotations } : {}) },
    spec: { containers: [{ name: "c", image: "x", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
  });
  const CASES: Array<{ name: string; annotations?: Record<string, string>; want: string }> = [
    { name: "a new pod: the names in pipeline order", want: "resources,gpu-tolerations" },
    {
      name: "a later step recorded first (the policy's interruptible, say): reordered",
      annotations: { "quartermaster.dev/mutations": "interruptible" },
      want: "resources,gpu-tolerations,interruptible",
    },
    {
      name: "unknown names stay, after the pipeline's",
      annotations: { "quartermaster.dev/mutations": " custom,,resources" },
      want: "resources,gpu-tolerations,custom",
    },
    {
      name: "nothing new: the value is left as it is",
      annotations: { "quartermaster.dev/mutations": "gpu-tolerations,resources" },
      want: "gpu-tolerations,resources",
    },
  ];
  for (const c of CASES) {
    it(c.name, () => {
      const policy = policyOf({});
      const out = mutatePod(gpuPod(c.annotations) as never, { policy, namespace: "a" });
      assert.equal(out.pod.metadata?.annotations?.["quartermaster.dev/mutations"], c.want);
    });
  }
});

describe("doctor: the exported policy against the policy in force", () => {
  const full = policyOf({});
  const reduced = policyOf({ webhook: { podMutation: "reduced" } });
  const { policy: POLICY, binding: BINDING } = renderMutatingAdmissionPolicy(reduced, { namespace: "quartermaster" });
  /** As the apiserver returns it: defaults added, a rule's fields in its own order. */
  const stored = (o: Record<string, unknown>): KubeObject => {
    const s = structuredClone(o) as Obj;
    s.metadata = { ...s.metadata, uid: "u", resourceVersion: "1" };
    if (s.kind === "MutatingAdmissionPolicy") {
      s.spec.matchConstraints.objectSelector = {};
      s.spec.matchConstraints.resourceRules = s.spec.matchConstraints.resourceRules.map((r: Obj) => ({
        operations: r.operations,
        apiGroups: r.apiGroups,
        apiVersions: r.apiVersions,
        resources: r.resources,
        scope: r.scope,
      }));
    }
    return s as KubeObject;
  };
  const stale = stored(
    renderMutatingAdmissionPolicy(policyOf({ webhook: { podMutation: "reduced" }, resources: { defaultRequests: { cpu: "2" } } }), {
      namespace: "quartermaster",
    }).policy,
  );
  const CASES: Array<{ name: string; policy: Policy; state: MutatingPolicyState | Unreadable | undefined; severity?: string; message?: RegExp }> = [
    { name: "not read: nothing", policy: reduced, state: undefined },
    { name: "full mode, none installed: nothing", policy: full, state: {} },
    { name: "reduced, none installed: critical", policy: reduced, state: {}, severity: "critical", message: /not installed/ },
    { name: "reduced, unreadable: critical", policy: reduced, state: { error: "forbidden" }, severity: "critical", message: /cannot read it/ },
    { name: "full, unreadable: nothing", policy: full, state: { error: "forbidden" } },
    {
      name: "reduced, as rendered: ok",
      policy: reduced,
      state: { policy: stored(POLICY), binding: stored(BINDING) },
      severity: "ok",
      message: /bound and current/,
    },
    {
      name: "reduced, rendered from another policy: critical",
      policy: reduced,
      state: { policy: stale, binding: stored(BINDING) },
      severity: "critical",
      message: /differs from what the policy in force renders/,
    },
    { name: "reduced, not bound: critical", policy: reduced, state: { policy: stored(POLICY) }, severity: "critical", message: /not bound/ },
    {
      name: "full, installed and current: a warning (redundant)",
      policy: full,
      state: { policy: stored(POLICY), binding: stored(BINDING) },
      severity: "warning",
      message: /redundant/,
    },
    { name: "full, stale: a warning", policy: full, state: { policy: stale, binding: stored(BINDING) }, severity: "warning", message: /differs/ },
  ];
  for (const c of CASES) {
    it(c.name, () => {
      const findings = checkMutatingPolicy(c.state, c.policy, "quartermaster");
      if (!c.severity) return assert.deepEqual(findings, []);
      assert.equal(findings.length, 1);
      assert.equal(findings[0]!.severity, c.severity);
      assert.match(findings[0]!.message, c.message!);
    });
  }
});

describe("quartermaster policy export-map", () => {
  async function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd, shutdown: new Promise(() => {}) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  }

  it("prints the policy and its binding; the header and stderr list what stays with the webhook", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-map-"));
    writeFileSync(join(dir, "p.yaml"), "gpu:\n  deviceClasses: []\n");
    const r = await cli(["policy", "export-map", "--policy", "p.yaml", "--namespace", "platform"], dir);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"],
    );
    assert.match(r.stdout, /^# Expressed: resources, gpu-tolerations, accelerator, interruptible/m);
    assert.match(r.stdout, /^# - GPUs through ResourceClaims \(DRA\): /m);
    assert.match(r.stderr, /left to \/mutate\/pods\): training-labels, cluster-spec, jobset-tf-config/);
    assert.doesNotMatch(r.stderr, /ResourceClaims/);
  });

  it("an invalid policy: exit 1, nothing printed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-map-"));
    writeFileSync(join(dir, "p.yaml"), "webhook: {podMutation: half}\n");
    const r = await cli(["policy", "export-map", "--policy", "p.yaml"], dir);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /podMutation/);
  });
});

/**
 * The chart follows the policy in its values (issue 47): with a real helm (QM_HELM_BIN; skipped without it),
 * `helm template` of each release revision either refuses to render, naming `quartermaster manifests
 * chart-values`, or renders webhook configurations and a reconciler confinement that agree with the policy its
 * ConfigMap mounts, by doctor's own comparison (src/doctor/webhooks.ts renderDifferences, the confinement's render).
 * The revisions walk install, upgrade and rollback with a policy that changes `gpu.resources` and `jobKinds`; a
 * refused upgrade leaves the previous revision in place, and a rollback re-applies a revision's values, so
 * "every revision renders consistently or not at all" is what keeps `doctor` clean after each step.
 * test/e2e/chart.test.ts installs on a real apiserver.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments, stringify } from "yaml";
import { chartPolicyValues } from "../../src/manifests/chart.js";
import { renderReconcilerConfinement } from "../../src/manifests/confinement.js";
import { expectedWebhooks, renderDifferences } from "../../src/doctor/webhooks.js";
import type { WebhookEntry } from "../../src/doctor/types.js";
import { parsePolicy } from "../../src/policy/parse.js";

type Obj = Record<string, any>;

const ROOT = resolve(import.meta.dirname, "../..");
const CHART = join(ROOT, "charts/quartermaster");
const HELM = process.env.QM_HELM_BIN;
const NS = "quartermaster";
const BASE = ["--kube-version", "1.33.0", "--set", "webhook.networkPolicy.apiserverFrom={10.0.0.0/24}"];

/** gpu.resources gains intel.com/gpu, jobKinds narrows to two kinds: both change what the webhooks match. */
const CUSTOM = {
  gpu: { resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "intel.com/gpu" }] },
  jobKinds: [
    { kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs", framework: "pytorch" },
    { kind: "JAXJob", group: "kubeflow.org", version: "v1", plural: "jaxjobs", framework: "jax" },
  ],
};
/** The next policy: another GPU resource and kind. */
const CHANGED = {
  gpu: { resources: [...CUSTOM.gpu.resources, { pattern: "amd.com/gpu" }] },
  jobKinds: [...CUSTOM.jobKinds, { kind: "TFJob", group: "kubeflow.org", version: "v1", plural: "tfjobs", framework: "tensorflow" }],
};

function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(HELM!, args, { maxBuffer: 64 << 20, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** `quartermaster manifests chart-values` for `raw`, as the command prints it (the same function). */
async function chartValues(raw: Obj, namespace = NS): Promise<Obj> {
  return chartPolicyValues(raw, parsePolicy(stringify(raw), "test"), namespace);
}

/**
 * What doctor would say about a render: every webhook of the policy's render registered and agreeing (rules,
 * namespaceSelector, matchConditions), none besides, and the confinement as the policy renders it.
 */
function disagreements(objects: Obj[], namespace = NS): string[] {
  const cm = objects.find((o) => o.kind === "ConfigMap" && String(o.metadata.name).startsWith("quartermaster-policy-"));
  assert.ok(cm, "the policy ConfigMap is rendered");
  const policy = parsePolicy(String(cm.data["policy.yaml"]), "the policy ConfigMap");
  const configs = objects.filter((o) => o.kind === "MutatingWebhookConfiguration" || o.kind === "ValidatingWebhookConfiguration");
  const hooks = configs.flatMap((c) => (c.webhooks as WebhookEntry[]).map((h) => ({ kind: c.kind as string, hook: h })));
  const out: string[] = [];
  const expected = expectedWebhooks(policy, namespace);
  for (const e of expected) {
    const found = hooks.find((h) => h.kind === e.kind && h.hook.name === e.name);
    if (!found) out.push(`${e.name} missing`);
    else out.push(...renderDifferences(found.hook, e.hook).map((p) => `${e.name}: ${p}`));
  }
  for (const h of hooks) if (!expected.some((e) => e.kind === h.kind && e.name === h.hook.name)) out.push(`${h.hook.name} not in the policy's render`);
  const [vap, binding] = renderReconcilerConfinement(policy, namespace) as [Obj, Obj];
  for (const want of [vap, binding]) {
    const have = objects.find((o) => o.kind === want.kind && o.metadata.name === want.metadata.name);
    if (!have) out.push(`${want.kind} missing`);
    else if (!isDeepStrictEqual(have.spec, want.spec)) out.push(`${want.kind} ${want.metadata.name} differs from the policy's render`);
  }
  return out;
}

describe(
  "the chart follows the policy in values",
  { skip: HELM ? false : "QM_HELM_BIN is unset: point it at a helm binary, or build one with test/e2e/helm/build.sh" },
  () => {
    let dir = "";
    let n = 0;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "qm-chart-policy-"));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    /** `helm template` with these values files (objects), in `namespace`. */
    async function render(values: Obj[], namespace = NS): Promise<{ code: number; objects: Obj[]; stderr: string }> {
      const files = values.map((v) => {
        const f = join(dir, `values-${n++}.yaml`);
        writeFileSync(f, stringify(v, { aliasDuplicateObjects: false }));
        return ["-f", f];
      });
      const r = await helm(["template", "quartermaster", CHART, "-n", namespace, ...BASE, ...files.flat()]);
      const objects =
        r.code === 0
          ? parseAllDocuments(r.stdout)
              .map((d) => d.toJS() as Obj | null)
              .filter((o): o is Obj => o !== null)
          : [];
      return { code: r.code, objects, stderr: r.stderr };
    }

    const refusals: Array<{ name: string; values: () => Promise<Obj[]>; namespace?: string; says: RegExp }> = [
      {
        name: "gpu.resources without policyRenders",
        values: async () => [{ policy: { gpu: CUSTOM.gpu } }],
        says: /sets gpu, jobKinds or webhook.timeoutSeconds/,
      },
      { name: "jobKinds without policyRenders", values: async () => [{ policy: { jobKinds: CUSTOM.jobKinds } }], says: /no policyRenders/ },
      { name: "webhook.timeoutSeconds without policyRenders", values: async () => [{ policy: { webhook: { timeoutSeconds: 3 } } }], says: /no policyRenders/ },
      {
        name: "policyRenders of the previous policy after the policy changed",
        values: async () => [await chartValues(CUSTOM), { policy: CHANGED }],
        says: /rendered for another policy/,
      },
      {
        name: "policyRenders with podMutation changed afterwards",
        values: async () => [await chartValues(CUSTOM), { policy: { webhook: { podMutation: "reduced" } } }],
        says: /rendered for another policy/,
      },
      {
        name: "policyRenders for another namespace",
        values: async () => [await chartValues(CUSTOM, "elsewhere")],
        says: /rendered for namespace elsewhere, the release is in quartermaster/,
      },
    ];
    for (const c of refusals) {
      it(`refuses to render: ${c.name}, naming the command that makes the values`, async () => {
        const r = await render(await c.values(), c.namespace);
        assert.notEqual(r.code, 0, "the render must fail");
        assert.match(r.stderr, c.says);
        assert.match(r.stderr, /quartermaster manifests chart-values --policy my-policy\.yaml --namespace quartermaster > qm-values\.yaml/);
      });
    }

    const agreeing: Array<{ name: string; values: () => Promise<Obj[]>; namespace?: string; matches?: RegExp }> = [
      { name: "the default values (built-in policy)", values: async () => [] },
      { name: "a policy that only changes limits", values: async () => [{ policy: { limits: { pod: { gpus: 4 } } } }] },
      {
        name: "podMutation reduced alone (the generated template's reduced branch)",
        values: async () => [{ policy: { webhook: { podMutation: "reduced" } } }],
      },
      { name: "custom gpu.resources and jobKinds with their chart-values", values: async () => [await chartValues(CUSTOM)], matches: /intel\.com\/gpu/ },
      {
        name: "chart-values plus a limits change (limits do not change what is matched)",
        values: async () => [await chartValues(CUSTOM), { policy: { limits: { pod: { gpus: 4 } } } }],
      },
      {
        name: "custom policy in reduced mode with its chart-values",
        values: async () => [await chartValues({ ...CUSTOM, webhook: { podMutation: "reduced" } })],
      },
      { name: "custom policy in another namespace", values: async () => [await chartValues(CUSTOM, "gpu-admission")], namespace: "gpu-admission" },
    ];
    for (const c of agreeing) {
      it(`renders configurations that agree with the mounted policy: ${c.name}`, async () => {
        const r = await render(await c.values(), c.namespace);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(disagreements(r.objects, c.namespace), []);
        if (c.matches) assert.match(JSON.stringify(r.objects.filter((o) => /WebhookConfiguration$/.test(o.kind))), c.matches);
      });
    }

    it("the values `quartermaster manifests chart-values --policy F` prints render an agreeing install", async () => {
      const policyFile = join(dir, "my-policy.yaml");
      writeFileSync(policyFile, `# a policy file as a user writes it\n${stringify(CUSTOM)}`);
      const printed = await new Promise<string>((done, fail) =>
        execFile(
          process.execPath,
          ["--import", "tsx", join(ROOT, "src/cli/main.ts"), "manifests", "chart-values", "--policy", policyFile],
          { cwd: ROOT, timeout: 60_000 },
          (err, stdout, stderr) => (err ? fail(new Error(`${err.message}: ${stderr}`)) : done(stdout)),
        ),
      );
      const valuesFile = join(dir, "qm-values.yaml");
      writeFileSync(valuesFile, printed);
      const r = await helm(["template", "quartermaster", CHART, "-n", NS, ...BASE, "-f", valuesFile]);
      assert.equal(r.code, 0, r.stderr);
      const objects = parseAllDocuments(r.stdout)
        .map((d) => d.toJS() as Obj | null)
        .filter((o): o is Obj => o !== null);
      assert.deepEqual(disagreements(objects), []);
      assert.match(r.stdout, /intel\.com\/gpu/);
    });

    it("install, upgrades and rollback: each revision is refused or agrees with its policy", async () => {
      // Helm keeps each revision's values; `helm rollback` re-applies a stored revision, so its render is this one.
      const steps: Array<{ step: string; values: Obj[]; refused: boolean }> = [
        { step: "install, built-in policy", values: [], refused: false },
        { step: "upgrade to the custom policy without its renders", values: [{ policy: CUSTOM }], refused: true },
        { step: "upgrade with chart-values of the custom policy", values: [await chartValues(CUSTOM)], refused: false },
        { step: "upgrade, policy changed, stale renders kept (--reuse-values)", values: [await chartValues(CUSTOM), { policy: CHANGED }], refused: true },
        { step: "upgrade with chart-values of the changed policy", values: [await chartValues(CHANGED)], refused: false },
        { step: "rollback to the custom policy's revision", values: [await chartValues(CUSTOM)], refused: false },
        { step: "rollback to the install", values: [], refused: false },
      ];
      for (const s of steps) {
        const r = await render(s.values);
        assert.equal(r.code !== 0, s.refused, `${s.step}: ${r.stderr}`);
        if (!s.refused) assert.deepEqual(disagreements(r.objects), [], s.step);
      }
    });
  },
);

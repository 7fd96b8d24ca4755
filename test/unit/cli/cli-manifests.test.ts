/**
 * `quartermaster manifests webhooks`: the render for a policy file and a namespace, on stdout, without the
 * Kubernetes client on its path (the command needs no cluster and must start fast).
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { runCli } from "../../../src/cli/commands.js";
import { ROOT } from "../../fixtures/manifests.js";

async function cli(args: string[], cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd, shutdown: new Promise(() => {}) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

describe("quartermaster manifests webhooks", () => {
  it("without flags prints the committed manifest", async () => {
    const r = await cli(["manifests", "webhooks"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(`${r.stdout}\n`, readFileSync(join(ROOT, "manifests/base/webhook-configurations.yaml"), "utf8"));
  });

  it("--policy with a GPU pattern added and --namespace: both reach the render", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-manifests-"));
    writeFileSync(join(dir, "p.yaml"), "gpu:\n  resources:\n    - pattern: nvidia.com/gpu\n    - pattern: intel.com/gpu\n");
    const r = await cli(["manifests", "webhooks", "--policy", "p.yaml", "--namespace", "platform"], dir);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS());
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"],
    );
    const hooks = docs.flatMap((d) => d.webhooks);
    for (const h of hooks) {
      assert.equal(h.clientConfig.service.namespace, "platform");
      assert.ok(h.namespaceSelector.matchExpressions[1].values.includes("platform"));
    }
    const pods = hooks.find((h) => h.name === "pods.validate.quartermaster.dev");
    assert.match(pods.matchConditions[0].expression, /r == 'intel\.com\/gpu'/);
    assert.doesNotMatch(pods.matchConditions[0].expression, /r == 'amd\.com\/gpu'/);
  });

  const bad: Array<{ name: string; args: string[]; code: number; stderr: RegExp }> = [
    {
      name: "an invalid policy → exit 1 with its errors",
      args: ["manifests", "webhooks", "--policy", "bad.yaml"],
      code: 1,
      stderr: /invalid policy bad\.yaml/,
    },
    { name: "a namespace that is no name → usage", args: ["manifests", "webhooks", "--namespace", "Bad_NS"], code: 2, stderr: /DNS-1123/ },
    { name: "an unknown subcommand → usage", args: ["manifests", "rbac"], code: 2, stderr: /expected 'webhooks'/ },
  ];
  for (const c of bad) {
    it(c.name, async () => {
      const dir = mkdtempSync(join(tmpdir(), "qm-manifests-"));
      writeFileSync(join(dir, "bad.yaml"), "gpu:\n  resources: 3\n");
      const r = await cli(c.args, dir);
      assert.equal(r.code, c.code);
      assert.match(r.stderr, c.stderr);
    });
  }

  it("the render's modules never import @kubernetes/client-node", () => {
    const seen = new Set<string>();
    const queue = [join(ROOT, "src/manifests/webhooks.ts")];
    const offenders: string[] = [];
    while (queue.length > 0) {
      const f = queue.pop()!;
      if (seen.has(f)) continue;
      seen.add(f);
      const text = readFileSync(f, "utf8");
      if (/^import (?!type\b)[^;]*from "@kubernetes\/client-node"|import\("@kubernetes\/client-node"\)/m.test(text)) offenders.push(f);
      const specs = [...text.matchAll(/^import (?!type\b)[^;]*?from "(\.[^"]+)"/gm), ...text.matchAll(/import\("(\.[^"]+)"\)/g)].map((m) => m[1]!);
      for (const s of specs) {
        const target = resolve(dirname(f), s.replace(/\.js$/, ".ts"));
        if (existsSync(target)) queue.push(target);
      }
    }
    assert.ok(seen.size > 3, "the scan followed the imports");
    assert.deepEqual(offenders, []);
  });
});

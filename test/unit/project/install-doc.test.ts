/**
 * docs/install.md says what works: the repository paths it names exist, its `quartermaster …` commands and their
 * flags are the CLI's, its chart version is package.json's, its values files satisfy the chart's
 * values.schema.json, and (with a real helm, QM_HELM_BIN; skipped without) each `helm install|upgrade` command it
 * gives renders with `helm template`, the released chart standing in as charts/quartermaster and its values files
 * as written in the doc (qm-values.yaml made by `manifests chart-values` from a policy that sets gpu and jobKinds).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import { parse as parseYaml, stringify } from "yaml";
import { COMMANDS } from "../../../src/cli/command-list.js";
import { chartPolicyValues } from "../../../src/manifests/chart.js";
import { parsePolicy } from "../../../src/policy/parse.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const DOC = readFileSync(join(ROOT, "docs/install.md"), "utf8");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const HELM = process.env.QM_HELM_BIN;

/** The doc's fenced blocks of a language, with the `<!-- name -->` marker above each (if any). */
function blocks(lang: string): Array<{ marker?: string; text: string }> {
  return [...DOC.matchAll(new RegExp(`(?:<!-- ([\\w-]+) -->\\n)?\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g"))].map((m) => ({ marker: m[1], text: m[2]! }));
}

/** Shell command lines of the sh blocks: continuations joined, comments dropped, split into words (single quotes kept together). */
function commands(): string[][] {
  const lines = blocks("sh").flatMap((b) => b.text.replace(/\\\n\s*/g, " ").split("\n"));
  return lines
    .map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l !== "")
    .map((l) => [...l.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!));
}

/** The values files the doc writes out (`# apiserver-….yaml` on their first line), by name. */
function valuesFiles(): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const b of blocks("yaml")) {
    const name = /^# (\S+\.yaml)/.exec(b.text)?.[1];
    if (name) out.set(name, parseYaml(b.text));
  }
  return out;
}

describe("docs/install.md", () => {
  it("names repository paths that exist", () => {
    const paths = [...DOC.matchAll(/`((?:docs|charts|examples|manifests|test|src)\/[\w./-]+|[A-Z]+\.md)`/g)].map((m) => m[1]!);
    assert.ok(paths.length > 5);
    for (const p of paths) assert.ok(existsSync(join(ROOT, p)), `${p} does not exist`);
  });

  it("its quartermaster commands and flags are the CLI's", () => {
    const qm = commands().filter((words) => words[0] === "quartermaster");
    assert.ok(qm.length >= 4);
    for (const words of qm) {
      const args = words.slice(1);
      const command = COMMANDS.filter((c) => c.name.split(" ").every((w, i) => args[i] === w)).sort((a, b) => b.name.length - a.name.length)[0];
      assert.ok(command, `no command for: ${words.join(" ")}`);
      for (const flag of args.filter((a) => a.startsWith("--")).map((a) => a.slice(2).split("=")[0]!))
        assert.ok(flag in command.flags, `${command.name} has no --${flag} (${words.join(" ")})`);
    }
  });

  it(`names the chart at package.json's version ${VERSION}`, () => {
    const versions = [...DOC.matchAll(/--version (\S+)/g)].map((m) => m[1]!);
    assert.ok(versions.length > 0);
    for (const v of versions) assert.equal(v, VERSION);
  });

  it("its values files are valid chart values (values.schema.json), one per platform", () => {
    const schema = JSON.parse(readFileSync(join(ROOT, "charts/quartermaster/values.schema.json"), "utf8")) as Record<string, unknown>;
    const defaults = parseYaml(readFileSync(join(ROOT, "charts/quartermaster/values.yaml"), "utf8")) as Record<string, Record<string, unknown>>;
    const validate = new Ajv2020({ strict: false, allErrors: true }).compile(schema);
    const files = valuesFiles();
    assert.deepEqual([...files.keys()].sort(), ["apiserver-aks.yaml", "apiserver-eks.yaml", "apiserver-gke.yaml", "apiserver-kubeadm.yaml"]);
    for (const [name, values] of files) {
      const from = (values as { webhook: { networkPolicy: Record<string, unknown> } }).webhook.networkPolicy;
      const merged = { ...defaults, webhook: { ...defaults.webhook, networkPolicy: { ...(defaults.webhook!.networkPolicy as object), ...from } } };
      assert.ok(validate(merged), `${name}: ${JSON.stringify(validate.errors)}`);
    }
  });

  describe("its helm commands render", { skip: HELM ? false : "QM_HELM_BIN is unset" }, () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-install-doc-"));
    after(() => rmSync(dir, { recursive: true, force: true }));

    const helm = (args: string[]): Promise<{ code: number; stderr: string }> =>
      new Promise((done) => execFile(HELM!, args, { maxBuffer: 64 << 20, timeout: 60_000 }, (err, _stdout, stderr) => done({ code: err ? 1 : 0, stderr })));

    it("every helm install and upgrade of the doc, with its values files", async () => {
      for (const [name, values] of valuesFiles()) writeFileSync(join(dir, name), stringify(values));
      const policy = {
        gpu: { resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "intel.com/gpu" }] },
        jobKinds: [{ kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs", framework: "pytorch" }],
      };
      writeFileSync(
        join(dir, "qm-values.yaml"),
        stringify(await chartPolicyValues(policy, parsePolicy(stringify(policy), "my-policy.yaml"), "quartermaster"), { aliasDuplicateObjects: false }),
      );
      const helmCommands = commands().filter((w) => w[0] === "helm" && (w[1] === "install" || w[1] === "upgrade"));
      assert.ok(helmCommands.length >= 4);
      for (const words of helmCommands) {
        const args = words.slice(1).flatMap((w, i, all): string[] => {
          if (w === "install" || w === "upgrade" || w === "--install" || w === "--create-namespace" || w === "--reuse-values") return [];
          if (w.startsWith("oci://")) return [join(ROOT, "charts/quartermaster")];
          if (all[i - 1] === "--version") return [];
          if (w === "--version") return [];
          if (all[i - 1] === "-f") return [join(dir, w)];
          return [w];
        });
        // `--reuse-values` upgrades keep the install's apiserverFrom: stand in for it.
        const reused = words.includes("--reuse-values") ? ["-f", join(dir, "apiserver-kubeadm.yaml")] : [];
        const r = await helm(["template", ...args.slice(0, 1), ...args.slice(1), ...reused, "--kube-version", "1.33.0"]);
        assert.equal(r.code, 0, `${words.join(" ")}: ${r.stderr}`);
      }
      for (const name of valuesFiles().keys()) {
        const r = await helm([
          "template",
          "quartermaster",
          join(ROOT, "charts/quartermaster"),
          "-n",
          "quartermaster",
          "-f",
          join(dir, name),
          "--kube-version",
          "1.33.0",
        ]);
        assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      }
    });
  });
});

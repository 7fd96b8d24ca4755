/**
 * `quartermaster audit`: its command line (the cluster part is test/e2e/policy-reports.test.ts).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";

async function run(args: string[], cwd = process.cwd()): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd, shutdown: new Promise(() => {}) });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("quartermaster audit: command line", () => {
  it("-o other than table or json → usage error (2)", async () => {
    const r = await run(["audit", "-o", "yaml"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /audit: -o must be table or json/);
  });
  it("an unknown flag → usage error (2)", async () => {
    const r = await run(["audit", "--all"]);
    assert.equal(r.code, 2);
    assert.match(r.err, /unknown option '--all'/i);
  });
  it("an invalid policy → every problem with its path, exit 1, before any cluster access", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-audit-"));
    writeFileSync(join(dir, "p.yaml"), "enforcement: {rules: {job-gpu: warn}}\n");
    const r = await run(["audit", "--policy", "p.yaml", "--kubeconfig", join(dir, "missing")], dir);
    assert.equal(r.code, 1);
    assert.match(r.err, /enforcement\.rules\.job-gpu: "job-gpu" is not a rule/);
  });
  it("is listed in the usage", async () => {
    assert.match((await run(["help"])).out, /audit \[options\] +hold what already runs/);
    assert.match((await run(["audit", "--help"])).out, /-o, --output <format>[\s\S]*--namespace <name>/);
  });
});

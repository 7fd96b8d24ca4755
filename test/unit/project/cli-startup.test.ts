/**
 * What every command loads before it runs: the modules src/cli/main.ts reaches through static imports (a
 * command's own modules come through `import()` when it runs). Heavy or command-specific modules must stay off
 * this path, so `serve` is ready fast: the Kubernetes client (~1.5 s to import), the YAML parser, ajv's compiler,
 * the certificate libraries, and `admit`/`test` with everything they pull in.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { describe, it } from "node:test";

const ROOT = resolve(import.meta.dirname, "../../..");

/** Static, non-type imports of a file: relative ones resolved to .ts files, bare ones as package specifiers. */
function staticImports(file: string): { files: string[]; packages: string[] } {
  const text = readFileSync(file, "utf8");
  const specs = [...text.matchAll(/^import (?!type\b)(?:[^;]*? from )?"([^"]+)"/gm)].map((m) => m[1]!);
  const files = specs
    .filter((s) => s.startsWith("."))
    .map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")))
    .filter((f) => existsSync(f));
  return { files, packages: specs.filter((s) => !s.startsWith(".") && !s.startsWith("node:")) };
}

function startPath(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [resolve(ROOT, entry)];
  while (queue.length > 0) {
    const f = queue.pop()!;
    if (files.has(f)) continue;
    files.add(f);
    const found = staticImports(f);
    found.packages.forEach((p) => packages.add(p));
    queue.push(...found.files);
  }
  return { files: new Set([...files].map((f) => relative(ROOT, f))), packages };
}

describe("the start path of every command (src/cli/main.ts, static imports)", () => {
  const { files, packages } = startPath("src/cli/main.ts");

  it("the scanner follows imports (so the checks below can fail)", () => {
    assert.ok(files.has("src/cli/commands.ts") && files.has("src/cli/program.ts"), [...files].join(", "));
    assert.ok(packages.has("commander"), [...packages].join(", "));
    assert.ok(startPath("src/cli/admit.ts").packages.has("yaml"));
  });

  for (const heavy of ["@kubernetes/client-node", "yaml", "ajv", "@peculiar/x509", "fast-json-patch", "node-cron"]) {
    it(`does not load ${heavy}`, () => assert.ok(!packages.has(heavy), `${heavy} is imported statically on the start path`));
  }

  for (const module of [
    "src/cli/admit.ts",
    "src/cli/admit-command.ts",
    "src/cli/admit-input.ts",
    "src/cli/policy-test.ts",
    "webhooks/index.ts",
    "src/kube/client.ts",
  ]) {
    it(`does not load ${module}`, () => assert.ok(!files.has(module), `${module} is on the start path: import it with import() in the command that needs it`));
  }
});

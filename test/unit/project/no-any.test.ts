/**
 * Issue 30: no `any` in src/ outside generated code, and no `as unknown as` outside the one documented
 * boundary module (src/core/boundary.ts, where client-node's typed objects and our untyped `KubeObject`
 * meet). Scanned with the TypeScript compiler API, so comments and strings mentioning "any" don't count;
 * a failure lists file:line for each occurrence.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, it } from "node:test";
import ts from "typescript";

const ROOT = join(import.meta.dirname, "../../..");
const SRC = join(ROOT, "src");

/** Not scanned: generated code. */
const GENERATED = "src/generated/";
/** The one module allowed `as unknown as`, each cast documented there. */
const BOUNDARY = "src/core/boundary.ts";

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts|cts)$/.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

interface Hit {
  where: string;
  what: "any" | "as unknown as";
}

/** Every `any` type and every `x as unknown as T` in one file's text. */
export function scan(file: string, text: string): Hit[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const hits: Hit[] = [];
  const at = (node: ts.Node): string => `${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
  const visit = (node: ts.Node): void => {
    if (node.kind === ts.SyntaxKind.AnyKeyword) hits.push({ where: at(node), what: "any" });
    if (ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) {
      const inner = ts.isParenthesizedExpression(node.expression) ? node.expression.expression : node.expression;
      if ((ts.isAsExpression(inner) || ts.isTypeAssertionExpression(inner)) && inner.type.kind === ts.SyntaxKind.UnknownKeyword) {
        hits.push({ where: at(node), what: "as unknown as" });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return hits;
}

const files = sourceFiles(SRC)
  .map((path) => relative(ROOT, path).split(sep).join("/"))
  .filter((file) => !file.startsWith(GENERATED));
const hits = files.flatMap((file) => scan(file, readFileSync(join(ROOT, file), "utf8")));

describe("no any, no as-unknown-as (issue 30)", () => {
  it("the scanner sees what it is meant to see, and not comments or strings", () => {
    const text = [
      "// any in a comment",
      "const s = 'any';",
      "let a: any;",
      "const b = x as unknown as string;",
      "const c = (x as unknown) as string;",
      "const d = x as unknown;",
      "function f(y: Record<string, any>): void {}",
    ].join("\n");
    assert.deepEqual(scan("t.ts", text), [
      { where: "t.ts:3", what: "any" },
      { where: "t.ts:4", what: "as unknown as" },
      { where: "t.ts:5", what: "as unknown as" },
      { where: "t.ts:7", what: "any" },
    ]);
  });

  it("scans real files", () => {
    assert.ok(files.length > 50, `only ${files.length} files under src/`);
    assert.ok(files.includes(BOUNDARY), `${BOUNDARY} missing`);
  });

  it("src/ has no `any` outside generated code", () => {
    const found = hits.filter((h) => h.what === "any").map((h) => h.where);
    assert.deepEqual(found, [], `\`any\` at:\n${found.join("\n")}`);
  });

  it(`src/ has no \`as unknown as\` outside ${BOUNDARY}`, () => {
    const found = hits.filter((h) => h.what === "as unknown as" && !h.where.startsWith(`${BOUNDARY}:`)).map((h) => h.where);
    assert.deepEqual(found, [], `\`as unknown as\` at:\n${found.join("\n")}`);
  });
});

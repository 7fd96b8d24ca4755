/**
 * docs/policy.md against the JSON Schema it is generated from (src/policy/docs.ts): the committed page is
 * exactly what the schema renders to, every field has a meaning and no meaning is left over from a field
 * that is gone, and every default the page states is the one the loader applies.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { DESCRIPTIONS, POLICY_DOCS_FILE, policyFields, renderPolicyDocs, undocumented } from "../../../src/policy/docs.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { POLICY_SCHEMA } from "../../../src/policy/schema.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const committed = (): string => readFileSync(join(ROOT, POLICY_DOCS_FILE), "utf8");

/** A deep copy of the schema, changed by `edit`. */
function schemaWith(edit: (s: any) => void): any {
  const s = structuredClone(POLICY_SCHEMA) as any;
  edit(s);
  return s;
}

describe("docs/policy.md", () => {
  it("is what the schema renders to (regenerate with `npm run docs:policy`)", () => {
    assert.equal(committed(), renderPolicyDocs(), `${POLICY_DOCS_FILE} and src/policy/schema.ts disagree: run npm run docs:policy`);
  });

  it("every field has a meaning, and every meaning belongs to a field", () => {
    assert.deepEqual(undocumented(), []);
    const paths = new Set(policyFields().map((f) => f.path));
    assert.deepEqual(
      Object.keys(DESCRIPTIONS).filter((p) => !paths.has(p)),
      [],
      "descriptions of fields that no longer exist",
    );
  });

  it("every default it states is the one the loader applies to {}", () => {
    const policy = defaultPolicy() as unknown as Record<string, unknown>;
    const at = (path: string): unknown => path.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], policy);
    const fields = policyFields().filter((f) => f.default !== undefined && !f.path.includes("[]"));
    assert.ok(fields.length > 20);
    for (const f of fields) {
      // An object default ({} for a section) is the starting point its fields' own defaults fill in.
      const isObject = typeof f.default === "object" && f.default !== null && !Array.isArray(f.default);
      if (!isObject) assert.deepEqual(at(f.path), f.default, f.path);
      else for (const [k, v] of Object.entries(f.default as object)) assert.deepEqual(at(`${f.path}.${k}`), v, `${f.path}.${k}`);
    }
  });

  it("a changed default → the page no longer matches", () => {
    const changed = renderPolicyDocs(schemaWith((s) => (s.properties.webhook.properties.timeoutSeconds.default = 7)));
    assert.notEqual(changed, committed());
    assert.match(changed, /\| `webhook\.timeoutSeconds` \| integer, 1 to 30 \| `7` \|/);
  });

  it("a new field without a meaning → the generator refuses, naming it; with a schema description → documented", () => {
    const bare = schemaWith((s) => (s.properties.reconciler.properties.newKnob = { type: "boolean", default: false }));
    assert.throws(() => renderPolicyDocs(bare), /without a description .*: reconciler\.newKnob/);
    const described = schemaWith((s) => (s.properties.reconciler.properties.newKnob = { type: "boolean", default: false, description: "Turns the new knob." }));
    assert.match(renderPolicyDocs(described), /\| `reconciler\.newKnob` \| boolean \| `false` \| Turns the new knob\. \|/);
  });

  it("lists every section with its fields, and the built-in policy in full", () => {
    const page = committed();
    for (const section of Object.keys(POLICY_SCHEMA.properties)) assert.match(page, new RegExp(`\n## ${section}\n`));
    assert.match(page, /\| `clusterSpec\.onJobLookupFailure` \| `warn` \\\| `deny` \| `"warn"` \|/);
    assert.match(page, /\| `resources\.defaultRequests\.cpu` \| quantity \(`500m`, `4Gi`\) \| unset; `"1"` when `resources\.defaultRequests` is left out \|/);
    assert.match(page, /```yaml\njobKinds:\n  - kind: TFJob\n/);
  });
});

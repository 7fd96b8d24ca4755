/**
 * @module
 * Parsing and checking a policy document (YAML or JSON: JSON is YAML). Pure: the caller reads the file.
 * An invalid document is a {@link PolicyError} carrying every problem, with line numbers for syntax
 * errors and field paths for schema errors.
 */
import { LineCounter, parseDocument } from "yaml";
import { PolicyError } from "../errors.js";
import { compileSchema, describeSchemaErrors } from "../schema.js";
import { POLICY_SCHEMA } from "./schema.js";
import type { Policy } from "./types.js";

const validatePolicy = compileSchema<Policy>(POLICY_SCHEMA, { useDefaults: true });

/** The built-in policy: the schema's defaults. */
export function defaultPolicy(): Policy {
  return parsePolicy("{}", "(built-in defaults)");
}

/** Parses and validates `text`; defaults fill every missing field. Throws PolicyError with all problems. */
export function parsePolicy(text: string, source: string): Policy {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  if (doc.errors.length > 0) {
    throw new PolicyError(
      source,
      doc.errors.map((e) => `line ${lineCounter.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`),
    );
  }
  const value: unknown = doc.toJS() ?? {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PolicyError(source, ["(document): must be a mapping of policy sections"]);
  }
  const policy = structuredClone(value);
  if (!validatePolicy(policy)) {
    throw new PolicyError(source, describeSchemaErrors(validatePolicy.errors));
  }
  const problems = crossFieldProblems(policy);
  if (problems.length > 0) throw new PolicyError(source, problems);
  return deepFreeze(policy);
}

/** Rules a JSON Schema cannot say: unique job kinds. */
function crossFieldProblems(policy: Policy): string[] {
  const problems: string[] = [];
  const seen = new Map<string, number>();
  policy.jobKinds.forEach((k, i) => {
    const id = `${k.group}/${k.kind}`;
    const first = seen.get(id);
    if (first !== undefined) problems.push(`jobKinds[${i}]: duplicates jobKinds[${first}] (${id})`);
    else seen.set(id, i);
  });
  return problems;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

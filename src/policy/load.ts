/**
 * @module
 * Checking a policy document against the schema, filling defaults. Pure: the caller parses the file
 * (`parse.ts`, YAML or JSON). An invalid document is a {@link PolicyError} carrying every problem with
 * its field path.
 */
import { PolicyError } from "../errors.js";
import type { ValidateFunction } from "ajv";
import generatedPolicyValidator from "../generated/policy-validator.js";
import { describeSchemaErrors } from "../schema.js";
import type { Policy } from "./types.js";

const validatePolicy = generatedPolicyValidator as unknown as ValidateFunction<Policy>;


/** The built-in policy: the schema's defaults. */
export function defaultPolicy(): Policy {
  return checkPolicy({}, "(built-in defaults)");
}

/** Validates a parsed document; defaults fill every missing field. Throws PolicyError with all problems. */
export function checkPolicy(value: unknown, source: string): Policy {
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

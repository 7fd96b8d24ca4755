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
import { MAX_PATTERN_LENGTH } from "../glob.js";
import { checkQuantity } from "../quantity.js";
import type { Limits, Policy } from "./types.js";

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

/**
 * Quantities and caps of one limits section (the defaults, or a namespace override) at `base`: a quantity the
 * exact parser refuses (too long, beyond 2^63−1, or negative) would make the limit fail open, so it is an error
 * here, not at admission; so is an integer cap beyond 2^53 (JSON numbers lose exactness there) and a GPU
 * pattern longer than the glob matcher allows.
 */
function limitsProblems(limits: Partial<Limits> | undefined, base: string, problems: string[]): void {
  for (const name of ["cpu", "memory"] as const) {
    quantityProblem(limits?.container?.[name], `${base}.container.${name}`, problems);
  }
  for (const [pattern, n] of Object.entries(limits?.container?.gpus ?? {})) {
    const at = `${base}.container.gpus[${pattern}]`;
    if (pattern.length > MAX_PATTERN_LENGTH) problems.push(`${at}: the pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
    capProblem(n, at, problems);
  }
  capProblem(limits?.pod?.gpus, `${base}.pod.gpus`, problems);
  capProblem(limits?.job?.gpus, `${base}.job.gpus`, problems);
  for (const [type, n] of Object.entries(limits?.job?.replicas ?? {})) capProblem(n, `${base}.job.replicas.${type}`, problems);
  for (const f of ["maxTtlSecondsAfterFinished", "maxActiveDeadlineSeconds", "maxBackoffLimit"] as const) {
    capProblem(limits?.runPolicy?.[f], `${base}.runPolicy.${f}`, problems);
  }
}

function quantityProblem(value: string | undefined, at: string, problems: string[]): void {
  if (value === undefined) return;
  const r = checkQuantity(value);
  if (!r.ok) problems.push(`${at}: ${r.message}`);
  else if (r.quantity.nano < 0n) problems.push(`${at}: ${value} must not be negative`);
}

function capProblem(value: number | undefined, at: string, problems: string[]): void {
  if (value !== undefined && !Number.isSafeInteger(value)) problems.push(`${at}: ${value} is beyond ${Number.MAX_SAFE_INTEGER}, the largest exact integer`);
}

/**
 * Rules a JSON Schema cannot say: unique job kinds; quantities and caps in range; patterns within the glob
 * matcher's bound. Every problem is listed, with its path.
 */
function crossFieldProblems(policy: Policy): string[] {
  const problems: string[] = [];
  limitsProblems(policy.limits, "limits", problems);
  policy.namespaces.forEach((n, i) => {
    if (n.pattern.length > MAX_PATTERN_LENGTH) problems.push(`namespaces[${i}].pattern: longer than ${MAX_PATTERN_LENGTH} characters`);
    limitsProblems(n.limits, `namespaces[${i}].limits`, problems);
  });
  policy.gpu.resources.forEach((g, i) => {
    if (g.pattern.length > MAX_PATTERN_LENGTH) problems.push(`gpu.resources[${i}].pattern: longer than ${MAX_PATTERN_LENGTH} characters`);
  });
  for (const name of ["cpu", "memory"] as const) {
    quantityProblem(policy.resources.defaultRequests[name], `resources.defaultRequests.${name}`, problems);
  }
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

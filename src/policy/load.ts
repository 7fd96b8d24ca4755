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
import type { JobDefaults, Policy, RunPolicyLimits } from "./types.js";

const validatePolicy = generatedPolicyValidator as unknown as ValidateFunction<Policy>;


/** The built-in policy: the schema's defaults. */
export function defaultPolicy(): Policy {
  return checkPolicy({}, "(built-in defaults)");
}

/**
 * Fields that existed once and are gone, with what to do instead. A policy still using one is refused with
 * that advice (not a bare "unknown field"), and the field is then set aside so every other problem is listed too.
 */
export const REMOVED_FIELDS: ReadonlyArray<{ section: string; field: string; advice: string }> = [
  {
    section: "reconciler",
    field: "defaultTtlSecondsAfterFinished",
    advice: "the reconciler no longer deletes jobs that set no TTL; to give new jobs a TTL, set jobDefaults.ttlSecondsAfterFinished",
  },
  {
    section: "reconciler",
    field: "defaultCleanPodPolicy",
    advice: "a job without cleanPodPolicy now gets None, as upstream; to give new jobs one, set jobDefaults.cleanPodPolicy",
  },
];

const UPGRADING = 'see "Upgrading" in docs/operations.md';

/** Problems for removed fields in `doc` (a private copy), each deleted from it afterwards. */
function removedFieldProblems(doc: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const { section, field, advice } of REMOVED_FIELDS) {
    const holder = doc[section];
    if (holder === null || typeof holder !== "object" || Array.isArray(holder) || !Object.prototype.hasOwnProperty.call(holder, field)) continue;
    problems.push(`${section}.${field}: no longer exists: ${advice} (${UPGRADING})`);
    delete (holder as Record<string, unknown>)[field];
  }
  return problems;
}

/** Validates a parsed document; defaults fill every missing field. Throws PolicyError with all problems. */
export function checkPolicy(value: unknown, source: string): Policy {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PolicyError(source, ["(document): must be a mapping of policy sections"]);
  }
  const policy = structuredClone(value) as Record<string, unknown>;
  const removed = removedFieldProblems(policy);
  if (!validatePolicy(policy)) {
    throw new PolicyError(source, [...removed, ...describeSchemaErrors(validatePolicy.errors)]);
  }
  const problems = [...removed, ...crossFieldProblems(policy)];
  if (problems.length > 0) throw new PolicyError(source, problems);
  return deepFreeze(policy);
}

const CAPS = [
  ["ttlSecondsAfterFinished", "maxTtlSecondsAfterFinished"],
  ["activeDeadlineSeconds", "maxActiveDeadlineSeconds"],
  ["backoffLimit", "maxBackoffLimit"],
] as const;

/**
 * Job defaults that the policy's own run-policy limits would refuse: the validating webhook sees the job
 * after `/mutate/jobs`, so every job left to such a default would be denied. `only` limits the check to the
 * fields a namespace entry changes (defaults or limits), so a top-level problem is reported once.
 */
function jobDefaultProblems(
  defaults: JobDefaults,
  limits: RunPolicyLimits,
  where: (field: string) => string,
  scope: string,
  only?: (field: string, limit: string) => boolean,
): string[] {
  const problems: string[] = [];
  const tail = `${scope}; every job left to this default would be denied`;
  for (const [field, cap] of CAPS) {
    const v = defaults[field];
    const max = limits[cap];
    if (v === undefined || max === undefined || v <= max || (only && !only(field, cap))) continue;
    problems.push(`${where(field)}: ${v} is over limits.runPolicy.${cap} (${max})${tail}`);
  }
  const allowed = limits.allowedCleanPodPolicies;
  const policy = defaults.cleanPodPolicy;
  if (policy !== undefined && allowed && !allowed.includes(policy) && (!only || only("cleanPodPolicy", "allowedCleanPodPolicies"))) {
    problems.push(`${where("cleanPodPolicy")}: ${policy} is not in limits.runPolicy.allowedCleanPodPolicies (${allowed.join(", ") || "empty"})${tail}`);
  }
  return problems;
}

/** Rules a JSON Schema cannot say: unique job kinds; job defaults within the run-policy limits, per namespace too. */
function crossFieldProblems(policy: Policy): string[] {
  const problems: string[] = jobDefaultProblems(policy.jobDefaults, policy.limits.runPolicy, (f) => `jobDefaults.${f}`, "");
  policy.namespaces.forEach((n, i) => {
    // What a namespace matching this entry gets: each section laid over the top-level one, field by field.
    const own = n.jobDefaults ?? {};
    const ownLimits = n.limits.runPolicy ?? {};
    const defaults = { ...policy.jobDefaults, ...own };
    const limits = { ...policy.limits.runPolicy, ...ownLimits };
    const changes = (field: string, limit: string): boolean => field in own || limit in ownLimits;
    const where = (f: string): string => (f in own ? `namespaces[${i}].jobDefaults.${f}` : `jobDefaults.${f}`);
    problems.push(...jobDefaultProblems(defaults, limits, where, ` in namespaces matching ${n.pattern} (namespaces[${i}])`, changes));
  });
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

/**
 * @module
 * Checking a policy document against the schema, filling defaults. Pure: the caller parses the file
 * (`parse.ts`, YAML or JSON). An invalid document is a {@link PolicyError} carrying every problem with
 * its field path.
 */
import { PolicyError } from "../core/errors.js";
import { compiledValidator } from "../core/boundary.js";
import generatedPolicyValidator from "../generated/policy-validator.js";
import { describeSchemaErrors } from "../core/schema.js";
import { MAX_PATTERN_LENGTH } from "../core/glob.js";
import { checkQuantity } from "../core/quantity.js";
import { CONFIGURABLE_RULES, RULE_NAMES } from "./rules.js";
import type { Enforcement, JobDefaults, Policy, RunPolicyLimits } from "./types.js";
import { deepFreeze, isObject } from "../core/object.js";

const validatePolicy = compiledValidator<Policy>(generatedPolicyValidator);

/** The built-in policy (./default.ts: generated from checking an empty document here). */
export { defaultPolicy } from "./default.js";

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
    throw new PolicyError(source, [...removed, ...describeSchemaErrors(validatePolicy.errors).map(ruleNameProblem), ...rangeProblems(policy, true)]);
  }
  const problems = [...removed, ...rangeProblems(policy, false), ...crossFieldProblems(policy)];
  if (problems.length > 0) throw new PolicyError(source, problems);
  return deepFreeze(policy);
}

/** `enforcement…rules: unknown field 'x'` said as what it is: an unknown rule name, with the names there are. */
function ruleNameProblem(line: string): string {
  const m = /^(enforcement(?:\.namespaces\[\d+\])?\.rules): unknown field '(.*)'$/.exec(line);
  if (!m) return line;
  const why = RULE_NAMES.includes(m[2]!) ? "always denies, its mode cannot be set" : "is not a rule";
  return `${m[1]}.${m[2]}: ${JSON.stringify(m[2])} ${why}; rules: ${CONFIGURABLE_RULES.join(", ")}`;
}

const entriesOf = (v: unknown): Array<[string, unknown]> => (isObject(v) ? Object.entries(v) : []);

/**
 * Quantities and caps of one limits section (the defaults, or a namespace override) at `base`: a quantity the
 * exact parser refuses (too long, beyond 2^63−1, or negative) would make the limit fail open, so it is an error
 * here, not at admission; so is an integer cap beyond 2^53 (JSON numbers lose exactness there) and a GPU
 * pattern longer than the glob matcher allows. Written over the raw document (a wrong type is the schema's
 * error), so these problems are listed together with the schema's.
 */
/** Problems found so far; `schemaFailed` when the schema has already reported the document's errors. */
type Problems = string[] & { schemaFailed?: boolean };

function limitsProblems(limits: unknown, base: string, problems: Problems): void {
  if (!isObject(limits)) return;
  const container = isObject(limits.container) ? limits.container : {};
  for (const name of ["cpu", "memory"]) quantityProblem(container[name], `${base}.container.${name}`, problems);
  for (const [pattern, n] of entriesOf(container.gpus)) {
    const at = `${base}.container.gpus[${pattern.length > 64 ? `${pattern.slice(0, 61)}...` : pattern}]`;
    if (pattern.length > MAX_PATTERN_LENGTH) problems.push(`${at}: the pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
    capProblem(n, at, problems);
  }
  capProblem(isObject(limits.pod) ? limits.pod.gpus : undefined, `${base}.pod.gpus`, problems);
  capProblem(isObject(limits.job) ? limits.job.gpus : undefined, `${base}.job.gpus`, problems);
  for (const [type, n] of entriesOf(isObject(limits.job) ? limits.job.replicas : undefined)) capProblem(n, `${base}.job.replicas.${type}`, problems);
  for (const f of ["maxTtlSecondsAfterFinished", "maxActiveDeadlineSeconds", "maxBackoffLimit"]) {
    capProblem(isObject(limits.runPolicy) ? limits.runPolicy[f] : undefined, `${base}.runPolicy.${f}`, problems);
  }
}

function quantityProblem(value: unknown, at: string, problems: Problems): void {
  if (typeof value !== "string") return;
  const r = checkQuantity(value);
  // The schema's pattern is the same grammar: when it has failed, it has said so already.
  if (!r.ok) {
    if (!(r.problem === "not a quantity" && problems.schemaFailed)) problems.push(`${at}: ${r.message}`);
  } else if (r.quantity.nano < 0n) {
    problems.push(`${at}: ${value} must not be negative`);
  }
}

function capProblem(value: unknown, at: string, problems: string[]): void {
  if (typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    problems.push(`${at}: ${value} is beyond ${Number.MAX_SAFE_INTEGER}, the largest exact integer`);
  }
}

function patternProblem(pattern: unknown, at: string, problems: string[]): void {
  if (typeof pattern === "string" && pattern.length > MAX_PATTERN_LENGTH) problems.push(`${at}: longer than ${MAX_PATTERN_LENGTH} characters`);
}

/** Quantities, caps and patterns in range, over the raw document: every problem with its path. */
function rangeProblems(doc: unknown, schemaFailed: boolean): string[] {
  const problems: Problems = Object.assign([], { schemaFailed });
  if (!isObject(doc)) return problems;
  limitsProblems(doc.limits, "limits", problems);
  (Array.isArray(doc.namespaces) ? doc.namespaces : []).forEach((n: unknown, i: number) => {
    if (!isObject(n)) return;
    patternProblem(n.pattern, `namespaces[${i}].pattern`, problems);
    limitsProblems(n.limits, `namespaces[${i}].limits`, problems);
  });
  const gpu = isObject(doc.gpu) && Array.isArray(doc.gpu.resources) ? (doc.gpu.resources as unknown[]) : [];
  gpu.forEach((g, i) => patternProblem(isObject(g) ? g.pattern : undefined, `gpu.resources[${i}].pattern`, problems));
  const enforcement = isObject(doc.enforcement) && Array.isArray(doc.enforcement.namespaces) ? (doc.enforcement.namespaces as unknown[]) : [];
  enforcement.forEach((n, i) => patternProblem(isObject(n) ? n.pattern : undefined, `enforcement.namespaces[${i}].pattern`, problems));
  const defaults = isObject(doc.resources) && isObject(doc.resources.defaultRequests) ? doc.resources.defaultRequests : {};
  for (const name of ["cpu", "memory"]) quantityProblem(defaults[name], `resources.defaultRequests.${name}`, problems);
  return problems;
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
  problems.push(...enforcementProblems(policy.enforcement));
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

/** Problems with the enforcement section a schema cannot see, each with its path. */
export function enforcementProblems(enforcement: Enforcement): string[] {
  const problems: string[] = [];
  enforcement.namespaces.forEach((n, i) => {
    if (n.mode === undefined && (n.rules === undefined || Object.keys(n.rules).length === 0)) {
      problems.push(`enforcement.namespaces[${i}]: sets neither mode nor rules; it would change nothing`);
    }
  });
  return problems;
}

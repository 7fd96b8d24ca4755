/**
 * @module
 * Enforcement modes: which violations deny, which only warn, which are only recorded. Pure.
 *
 * The mode of rule R in namespace N is, in this order:
 * 1. the first `enforcement.namespaces[]` entry whose pattern matches N and that names a mode for R: its
 *    `rules[R]`, else its `mode` (an entry that says nothing about R is passed over);
 * 2. `enforcement.rules[R]`;
 * 3. `enforcement.mode` (default `deny`).
 * A rule with a milder default (`no-node-shape`: `warn`) takes it in place of a blanket mode (1's `mode`, 3) that is
 * stricter; only its own name in `rules` makes it deny.
 * So a namespace entry beats the cluster-wide setting, and within one scope a rule's own mode beats the
 * blanket one. The rules that say an object could not be checked (`job-scale`, `review-cost`) always deny.
 *
 * Rolling out a new limit: set it with `enforcement.rules: {job-gpus: warn}`, then
 * `namespaces: [{pattern: "team-a-*", rules: {job-gpus: deny}}]`, then drop both (deny is the default).
 */
import { matchesGlob } from "../core/glob.js";
import type { Enforcement, EnforcementMode } from "../policy/types.js";
import { CONFIGURABLE_RULES, RULES } from "../policy/rules.js";
import type { Finding, Findings } from "./types.js";

const CONFIGURABLE = new Set(CONFIGURABLE_RULES);
const DEFAULT_MODES = new Map(RULES.flatMap((r) => (r.defaultMode ? [[r.name, r.defaultMode] as const] : [])));
const STRICTNESS: Readonly<Record<EnforcementMode, number>> = { audit: 0, warn: 1, deny: 2 };

/** A blanket mode as it applies to `rule`: no stricter than the rule's own default (`RuleInfo.defaultMode`). */
function blanket(mode: EnforcementMode, rule: string): EnforcementMode {
  const mild = DEFAULT_MODES.get(rule);
  return mild !== undefined && STRICTNESS[mild] < STRICTNESS[mode] ? mild : mode;
}

/** The mode of `rule` in `namespace`. */
export function modeOf(enforcement: Enforcement, rule: string, namespace: string): EnforcementMode {
  if (!CONFIGURABLE.has(rule)) return "deny";
  for (const entry of enforcement.namespaces) {
    const mode = entry.rules?.[rule] ?? (entry.mode === undefined ? undefined : blanket(entry.mode, rule));
    if (mode !== undefined && matchesGlob(entry.pattern, namespace)) return mode;
  }
  return enforcement.rules[rule] ?? blanket(enforcement.mode, rule);
}

/** A violation the policy lets through (`warn` or `audit`). */
export interface WaivedViolation extends Finding {
  mode: "warn" | "audit";
}

export interface EnforcedFindings {
  /** The violations that deny (mode `deny`). */
  violations: Finding[];
  /** The rules' own warnings, then one per `warn` violation. */
  warnings: string[];
  /** The violations let through, with their mode. */
  waived: WaivedViolation[];
}

/** The kubectl warning for a violation in `warn` mode: the rule and the field path come first (warnings are cut at 120 characters). */
export function warningFor(v: Finding): string {
  return `quartermaster: ${v.rule} (warn): ${v.field}: ${v.message}`;
}

/** Splits the findings by the mode of each violation's rule in `namespace`. */
export function enforce(findings: Findings, enforcement: Enforcement, namespace: string): EnforcedFindings {
  const violations: Finding[] = [];
  const waived: WaivedViolation[] = [];
  const warned: string[] = [];
  for (const v of findings.violations) {
    const mode = modeOf(enforcement, v.rule, namespace);
    if (mode === "deny") violations.push(v);
    else {
      waived.push({ ...v, mode });
      if (mode === "warn") warned.push(warningFor(v));
    }
  }
  // Warn-mode violations first: the response keeps at most ten warnings.
  return { violations, warnings: [...warned, ...findings.warnings], waived };
}

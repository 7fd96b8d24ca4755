/**
 * @module
 * `/validate/pods` as a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) and its binding, rendered
 * from the policy, pure. The apiserver then judges pod creates in-process, in CEL, with no webhook round trip;
 * `quartermaster policy export-vap` prints it and manifests/overlays/validating-admission-policy uses it.
 *
 * Which pods: those within the webhooks' match-condition bounds ({@link withinBoundsExpression}, the policy's
 * first match condition: at most 64 containers, at most 32 resource entries in each), so the CEL work is bounded
 * whatever the pod; wider pods are left to /validate/pods ({@link beyondBoundsExpression}, in the overlay).
 *
 * What is expressed, with the webhook's verdict, field paths and messages (one `messageExpression` builds the
 * same `N policy violations: <field>: <message>; …` text the webhook returns):
 * - review-cost: the webhook's cost bound (src/core/cost.ts), counted the same way, so a pod the webhook
 *   refuses as too large to check is refused here with the same words. It is checked first, and every other
 *   rule runs only under it, which also bounds the CEL runtime cost (the apiserver's per-expression limit and
 *   per-policy budget) whatever the pod: under the bound a pod has at most 2,500 containers and entries, and
 *   at most ~100 distinct GPU resource names;
 * - container-limits: every container's and init container's requests and limits of cpu, memory and each
 *   capped GPU resource at most the per-container limit (a request equal to its over-limit limit is named once,
 *   at the limit), with the namespace overrides (`namespaces[]`, first match by name);
 * - quantity: a counted value that is negative or out of range (above 2^63-1 units);
 * - gpu-mig-mixing: whole GPUs and MIG slices in one container;
 * - pod-gpus: the pod's effective GPU request (Kubernetes' rule, with native sidecars) at most the per-pod limit.
 *
 * Enforcement modes (`enforcement`, src/validate/enforcement.ts): the exported policy only denies, and only what
 * the webhook would deny. A rule whose mode is `deny` everywhere is expressed as above; one in `warn` or `audit`
 * everywhere is left out; one whose mode depends on the namespace is checked only where its mode is `deny`,
 * the namespace's mode computed in CEL from `request.namespace` with the enforcement patterns in their order
 * ({@link denyCondition}: the same globs, the same first-match rule, so exact; a binding's namespace selector
 * cannot say it, as a label selector cannot match a glob on names). The denial counts and lists only the
 * violations that deny, as the webhook's does. The `warn` and `audit` parts are not rendered as `[Warn]` or
 * `[Audit]` bindings: the apiserver would warn once per policy in its own words (`Validation failed for
 * ValidatingAdmissionPolicy ...`), not once per violation as `quartermaster: <rule> (warn): <field>: ...`, and
 * audit annotations are not the webhook's log line and metric; they stay with the webhook and are listed.
 *
 * What is not (the YAML header says so, and `export-vap` lists what the policy actually uses on stderr): see
 * {@link unexpressedRules}. Resource maps are iterated in random order by CEL, so each container's violations
 * are sorted in CEL (by side, then name: the webhook's order, which is the apiserver's sorted JSON).
 *
 * Cost: the apiserver evaluates a validation's messageExpression for every request it evaluates, admitted or
 * not, with the variables computed again. So the policy's match condition is a fast path
 * ({@link mayViolateExpression}): a pod that surely breaks no limit skips the policy after one pass over its
 * entries; only the others run the exact rules (a few milliseconds of apiserver CPU each), the first of which
 * is whether the pod is a training pod at all. The apiserver plans each CEL program anew for every evaluation
 * (it tracks each one's cost), so what every pod pays is the size of the match condition as much as what it
 * evaluates: it is kept short. bench/e2e-vap.ts measures the apiserver CPU per pod against the webhook's.
 *
 * Needs Kubernetes 1.33 or later: the two-variable comprehensions (`transformList(i, v, …)`) that give each
 * container its index are in the CEL environment new expressions may use from 1.33 (`ext.TwoVarComprehensions`
 * is introduced at 1.32 and the apiserver compiles new expressions for its previous minor version).
 */
import { MAX_REVIEW_COST } from "../core/cost.js";
import { ALL_CONTAINERS, celString, DEFAULT_NAMESPACE, globCondition, HAS_CLAIMS, limitsOf, requestsOf, trainingPodExpression, type MatchCondition } from "./webhooks.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES, gpuResourcePatterns } from "../core/gpu.js";
import { IMPLICIT_DEVICE_CLASS_PREFIX } from "../vendors/index.js";
import { isGpuResource } from "../core/gpu.js";
import { namespaceScope, namespaceSelector } from "../core/scope.js";
import type { LabelSelector } from "../core/selector.js";
import { overrideLimits } from "../validate/limits.js";
import type { Enforcement, EnforcementMode, Limits, Policy } from "../policy/types.js";
import { CONFIGURABLE_RULES } from "../policy/rules.js";
import { yamlStream } from "./yaml.js";

/** Passes of the pod rules the webhook prices (webhooks/validate-pods.ts `VALIDATE_POD_PASSES`; a unit test keeps them equal). */
export const POD_RULE_PASSES = 4;
export const VAP_NAME = "quartermaster-pod-limits";
/** Largest value of a quantity the webhook accepts, in units (src/core/quantity.ts `MAX_QUANTITY_UNITS`). */
const MAX_UNITS = "9223372036854775807";

export interface VapOptions {
  /** Quartermaster's namespace: excluded from the scope, as for the webhooks. */
  namespace?: string;
}

export interface RenderedVap {
  policy: Record<string, unknown>;
  binding: Record<string, unknown>;
}

/** A rule of `/validate/pods` the exported policy does not carry, and whether this policy makes it bite. */
export interface UnexpressedRule {
  rule: string;
  why: string;
  /** True when the policy sets what the rule enforces (so dropping the webhook drops a check). */
  active: boolean;
}

// ---- enforcement modes -----------------------------------------------------------------------------------------

/** The rules of `/validate/pods` the policy expresses whose mode the enforcement section can set. */
export const EXPRESSED_RULES = ["container-limits", "quantity", "gpu-mig-mixing", "pod-gpus"] as const;

/**
 * Where `rule` denies, as CEL on `request.namespace`: `"true"` (everywhere), `"false"` (nowhere) or a chain of
 * the enforcement patterns that name a mode for the rule, first match wins, as `modeOf` in
 * src/validate/enforcement.ts.
 */
export function denyCondition(enforcement: Enforcement, rule: string): string {
  if (!CONFIGURABLE_RULES.includes(rule)) return "true";
  const fallback = (enforcement.rules[rule] ?? enforcement.mode) === "deny";
  const entries = enforcement.namespaces
    .map((e) => ({ pattern: e.pattern, mode: e.rules?.[rule] ?? e.mode }))
    .filter((e): e is { pattern: string; mode: EnforcementMode } => e.mode !== undefined);
  if (entries.every((e) => (e.mode === "deny") === fallback)) return String(fallback);
  let out = String(fallback);
  for (let n = entries.length - 1; n >= 0; n--) {
    const cond = globCondition("request.namespace", entries[n]!.pattern);
    // A pattern matching every namespace ends the chain: what follows it is never reached.
    out = cond === "true" ? String(entries[n]!.mode === "deny") : `${cond} ? ${entries[n]!.mode === "deny"} : ${out}`;
  }
  return out === "true" || out === "false" ? out : `(${out})`;
}

/** The modes other than deny that `rule` has somewhere, and the patterns that give them. */
function waivedModes(enforcement: Enforcement, rule: string): { modes: Array<"warn" | "audit">; patterns: string[]; fallback: boolean } {
  const modes = new Set<"warn" | "audit">();
  const patterns: string[] = [];
  const global = enforcement.rules[rule] ?? enforcement.mode;
  if (global !== "deny") modes.add(global);
  for (const e of enforcement.namespaces) {
    const mode = e.rules?.[rule] ?? e.mode;
    if (mode === undefined || mode === "deny") continue;
    modes.add(mode);
    patterns.push(e.pattern);
  }
  return { modes: [...modes].sort(), patterns, fallback: global !== "deny" };
}

/** `expr` where `cond` (a {@link denyCondition}) holds, else `none`; `expr` itself, unchanged, where it always does. */
function whereDenied(cond: string, expr: string, none: string): string {
  if (cond === "true") return expr;
  if (cond === "false") return none;
  return `(${cond} ? (${expr}) : ${none})`;
}

// ---- CEL helpers: each returns CEL text; `c` is a CEL expression for one container ---------------------------

const side = (c: string, s: "requests" | "limits"): string => `(has(${c}.resources) && has(${c}.resources.${s}) ? ${c}.resources.${s} : {})`;
const R = (c: string): string => side(c, "requests");
const L = (c: string): string => side(c, "limits");
/** `s` as the webhook shows a value in a message: cut to 64 characters. */
const show = (s: string): string => `(size(${s}) > 64 ? ${s}.substring(0, 61) + '...' : ${s})`;
/** A GPU quantity as an int: 0 when it cannot be counted (out of int64, fractional, negative), as the webhook's `gpuNanos`. */
const gpuInt = (s: string): string => `(quantity(${s}).isInteger() && quantity(${s}).compareTo(quantity('0')) > 0 ? quantity(${s}).asInteger() : 0)`;
/** The CEL sum of an int list that may be empty (`sum()` of an empty list has no element type). */
const sum = (list: string): string => `([0] + ${list}).sum()`;
/** The container at index `i` of `variables.all` as its field path. */
const path = (i: string): string => `(${i} < variables.nInit ? 'spec.initContainers[' + string(${i}) + ']' : 'spec.containers[' + string(${i} - variables.nInit) + ']')`;
const isSidecar = (i: string, c: string): string => `(${i} < variables.nInit && has(${c}.restartPolicy) && ${c}.restartPolicy == 'Always')`;
const isRegularInit = (i: string, c: string): string => `(${i} < variables.nInit && !(has(${c}.restartPolicy) && ${c}.restartPolicy == 'Always'))`;

function isGpu(policy: Pick<Policy, "gpu">, k: string): string {
  const patterns = [...new Set(policy.gpu.resources.map((r) => r.pattern))];
  return patterns.length === 0 ? "false" : `(${patterns.map((p) => globCondition(k, p)).join(" || ")})`;
}

/** The per-container maximum for resource `k` as a CEL string ('' when none), as `containerMax` in src/validate/pod-spec.ts; undefined when nothing is capped. */
function boundOf(limits: Limits, k: string): string | undefined {
  const { cpu, memory, gpus = {} } = limits.container;
  const gpuCaps = Object.entries(gpus);
  if (cpu === undefined && memory === undefined && gpuCaps.length === 0) return undefined;
  // cpu and memory never fall through to the GPU patterns (a pattern `*` does not cap cpu).
  let out = "''";
  for (const [pattern, n] of gpuCaps.reverse()) out = `${globCondition(k, pattern)} ? ${celString(String(n))} : ${out}`;
  return `(${k} == 'cpu' ? ${celString(cpu ?? "")} : ${k} == 'memory' ? ${celString(memory ?? "")} : ${out})`;
}

/**
 * One container's resource findings for limits `limits`: a list of `'<side><name>\t<field>: <message>'` (the
 * prefix sorts them into the webhook's order and is cut off later). `c` is the container, `i` its index.
 */
function resourceFindings(policy: Policy, limits: Limits, c: string, i: string): string {
  // Each entry as key `k` and value `v` (two-variable transformList over the map); `v` is the apiserver's text.
  const entry = (s: "requests" | "limits"): string => {
    const q = "quantity(string(v))";
    const pre = `'${s === "requests" ? 0 : 1}' + k + '\\t' + ${path(i)} + '.resources.${s}[' + k + ']: '`;
    const bound = boundOf(limits, "k");
    const counted = bound === undefined ? isGpu(policy, "k") : `(${bound} != '' || ${isGpu(policy, "k")})`;
    const sameAsLimit = s === "requests" ? ` && !(k in ${L(c)} && quantity(string(${L(c)}[k])).compareTo(${q}) == 0)` : "";
    const deny = { limits: denyCondition(policy.enforcement, "container-limits"), quantity: denyCondition(policy.enforcement, "quantity") };
    const over = bound === undefined ? "''" : whereDenied(deny.limits, `${bound} != '' && ${q}.compareTo(quantity(${bound})) > 0${sameAsLimit} ? ${pre} + string(v) + ' exceeds the per-container limit of ' + ${bound} : ''`, "''");
    // A value out of range or negative is a quantity violation and nothing else (the webhook goes on to the next).
    return (
      `!${counted} ? '' :\n` +
      `  ${q}.compareTo(quantity('${MAX_UNITS}')) > 0 || ${q}.compareTo(quantity('-${MAX_UNITS}')) < 0 ? ${whereDenied(deny.quantity, `${pre} + ${show("string(v)")} + ' is out of range: the magnitude must be at most 2^63-1 (${MAX_UNITS})'`, "''")} :\n` +
      `  ${q}.compareTo(quantity('0')) < 0 ? ${whereDenied(deny.quantity, `${pre} + string(v) + ' must be greater than or equal to 0'`, "''")} :\n` +
      `  ${over}`
    );
  };
  return `(${R(c)}.transformList(k, v, ${entry("requests")}) +\n ${L(c)}.transformList(k, v, ${entry("limits")})).filter(s, s != '')`;
}

/** The CEL that picks, per limit variant, `render(limits)`: a chain on `variables.limitClass` when there is more than one. */
function perVariant(variants: Limits[], render: (l: Limits) => string): string {
  const texts = variants.map(render);
  if (new Set(texts).size === 1) return texts[0]!;
  let out = `(${texts[texts.length - 1]!})`;
  for (let v = texts.length - 2; v >= 0; v--) out = `variables.limitClass == ${v} ? (${texts[v]}) :\n${out}`;
  return out;
}

interface Variable {
  name: string;
  expression: string;
}

/** The limits in force per namespace class: distinct variants, and the CEL picking the variant for the request's namespace. */
/** What the rendered rules read of limits, in a canonical form (an override's merge adds `gpus: {}`, which changes nothing). */
const keyOf = (l: Limits): string => JSON.stringify([l.container.cpu, l.container.memory, Object.entries(l.container.gpus ?? {}), l.pod.gpus]);
const variantOf = (variants: Limits[], l: Limits): number => variants.findIndex((v) => keyOf(v) === keyOf(l));
const indexOfDefault = (policy: Policy, variants: Limits[]): number => variantOf(variants, policy.limits);

function limitVariants(policy: Policy): { variants: Limits[]; limitClass: string } {
  const variants: Limits[] = [];
  const indexOf = (l: Limits): number => {
    let at = variantOf(variants, l);
    if (at < 0) at = variants.push(l) - 1;
    return at;
  };
  let limitClass = String(indexOf(policy.limits));
  const byOverride = policy.namespaces.map((o) => indexOf(overrideLimits(policy, o)));
  for (let n = policy.namespaces.length - 1; n >= 0; n--) {
    limitClass = `${globCondition("request.namespace", policy.namespaces[n]!.pattern)} ? ${byOverride[n]} : ${limitClass}`;
  }
  return { variants, limitClass };
}

/** The policy's variables, in evaluation order (each may use the ones before; the apiserver evaluates them lazily). */
export function vapVariables(policy: Policy): Variable[] {
  const { variants, limitClass } = limitVariants(policy);
  const limit = MAX_REVIEW_COST;
  const perPassLimit = Math.floor(limit / POD_RULE_PASSES);
  const vars: Variable[] = [
    { name: "training", expression: trainingExpression(policy) },
    { name: "nInit", expression: "has(object.spec.initContainers) ? size(object.spec.initContainers) : 0" },
    { name: "all", expression: "(has(object.spec.initContainers) ? object.spec.initContainers : []) + (has(object.spec.containers) ? object.spec.containers : [])" },
    // review-cost, as src/core/cost.ts counts: the pod spec, each container, each resource entry; passes are
    // the rules plus the distinct GPU resource names. Counting stops past the bound, at the entry or list it was in.
    { name: "entries", expression: `variables.all.map(c, size(${R("c")}) + size(${L("c")}))` },
    { name: "items", expression: `1 + size(variables.all) + ${sum("variables.entries")}` },
    { name: "gpuNames", expression: `variables.all.map(c, ${R("c")}.filter(k, ${isGpu(policy, "k")}) + ${L("c")}.filter(k, ${isGpu(policy, "k")} && !(k in ${R("c")})))` },
    {
      name: "partialItems",
      expression:
        `1 + variables.nInit > ${perPassLimit} ? 1 + variables.nInit :\n` +
        `1 + variables.nInit + ${sum("variables.entries.transformList(i, n, i < variables.nInit, n)")} > ${perPassLimit} ? ${perPassLimit + 1} :\n` +
        `1 + size(variables.all) + ${sum("variables.entries.transformList(i, n, i < variables.nInit, n)")} > ${perPassLimit} ? 1 + size(variables.all) + ${sum("variables.entries.transformList(i, n, i < variables.nInit, n)")} :\n` +
        `${perPassLimit + 1}`,
    },
    {
      name: "passes",
      expression: `variables.items > ${perPassLimit} ? ${POD_RULE_PASSES} : ${POD_RULE_PASSES} + ${sum("variables.gpuNames.transformList(i, ns, size(ns.filter(n, !variables.gpuNames.exists(j, ms, j < i && n in ms))))")}`,
    },
    {
      name: "costDenial",
      expression:
        `variables.items > ${perPassLimit} ? 'too large to check: cost at least ' + string(variables.partialItems * ${POD_RULE_PASSES}) + ' is over the bound of ${limit} (at least ' + string(variables.partialItems) + ${celString(` pod specs, containers and resource entries × ${POD_RULE_PASSES} rule passes); split the workload or ask the platform team`)} :\n` +
        `variables.items * variables.passes > ${limit} ? 'too large to check: cost ' + string(variables.items * variables.passes) + ' is over the bound of ${limit} (' + string(variables.items) + ${celString(" pod specs, containers and resource entries × ")} + string(variables.passes) + ' rule passes); split the workload or ask the platform team' :\n` +
        `''`,
    },
  ];
  if (variants.length > 1) vars.push({ name: "limitClass", expression: limitClass });
  // container-limits and quantity, per container, sorted by side then name.
  vars.push({ name: "findings", expression: perVariant(variants, (l) => `variables.all.transformList(i, c, ${resourceFindings(policy, l, "c", "i")})`) });
  vars.push({ name: "findingRanks", expression: "variables.findings.map(l, l.map(s, size(l.filter(t, t < s))))" });
  // gpu-mig-mixing, only when nvidia.com/gpu is one of the policy's GPU resources (as in the webhook).
  const mixingDenies = denyCondition(policy.enforcement, "gpu-mig-mixing");
  const mixing = isGpuResource("nvidia.com/gpu", policy.gpu.resources) && mixingDenies !== "false";
  if (mixing) {
    const mig = (k: string): string => `(${k}.startsWith('nvidia.com/mig-') && ${isGpu(policy, k)})`;
    vars.push({
      name: "migs",
      expression: `variables.all.map(c, ('nvidia.com/gpu' in ${R("c")} || 'nvidia.com/gpu' in ${L("c")}) ? ${R("c")}.filter(k, ${mig("k")}).map(k, '0' + k) + ${L("c")}.filter(k, ${mig("k")} && !(k in ${R("c")})).map(k, '1' + k) : [])`,
    });
    vars.push({ name: "migRanks", expression: "variables.migs.map(l, l.map(s, size(l.filter(t, t < s))))" });
  }
  const mixingText = mixing
    ? ` + (${mixingDenies === "true" ? "" : `${mixingDenies} && `}size(variables.migs[ci]) > 0 ? [${path("ci")} + '.resources: asks for whole GPUs (nvidia.com/gpu) and MIG slices (' + variables.migs[ci].transformList(i, x, variables.migs[ci][variables.migRanks[ci].indexOf(i)].substring(1)).join(', ') + ') at once; use one or the other'] : [])`
    : "";
  vars.push({
    name: "perContainer",
    expression: `variables.findings.transformList(ci, l, l.transformList(i, x, l[variables.findingRanks[ci].indexOf(i)]).map(s, s.substring(s.indexOf('\\t') + 1))${mixingText})`,
  });
  // pod-gpus: Σ over GPU names of max(regular, init), regular = sidecars + containers, init = each regular init
  // container plus the sidecars before it. Only names a regular init container asks for can make init exceed
  // regular, so the sum is the flat sum over sidecars and containers plus, for those names, the excess.
  const podGpusDeny = denyCondition(policy.enforcement, "pod-gpus");
  if (podGpusDeny !== "false" && variants.some((l) => l.pod.gpus !== undefined)) {
    const g = (c: string, n: string): string => `(${n} in ${R(c)} ? ${gpuInt(`string(${R(c)}[${n}])`)} : ${n} in ${L(c)} ? ${gpuInt(`string(${L(c)}[${n}])`)} : 0)`;
    vars.push({ name: "gpuAmounts", expression: `variables.gpuNames.transformList(i, ns, ${sum(`ns.map(n, ${g("variables.all[i]", "n")})`)})` });
    vars.push({ name: "initGpuList", expression: `variables.gpuNames.transformList(i, ns, ${isRegularInit("i", "variables.all[i]")}, ns.join(',')).join(',').split(',').filter(n, n != '')` });
    vars.push({ name: "initGpuNames", expression: "variables.initGpuList.transformList(i, n, variables.initGpuList.indexOf(n) == i, n)" });
    const regular = (n: string): string => sum(`variables.all.transformList(i, c, !${isRegularInit("i", "c")}, ${g("c", n)})`);
    const initMax = (n: string): string => `([0] + variables.all.transformList(i, c, ${isRegularInit("i", "c")}, ${g("c", n)} + ${sum(`variables.all.transformList(j, d, j < i && ${isSidecar("j", "d")}, ${g("d", n)})`)})).max()`;
    vars.push({
      name: "podGpus",
      expression: `${sum(`variables.gpuAmounts.transformList(i, a, !${isRegularInit("i", "variables.all[i]")}, a)`)} +\n${sum(`variables.initGpuNames.map(n, [0, ${initMax("n")} - ${regular("n")}].max())`)}`,
    });
  }
  vars.push({
    name: "podLevel",
    expression: perVariant(variants, (l) =>
      l.pod.gpus === undefined || podGpusDeny === "false"
        ? "[]"
        : whereDenied(podGpusDeny, `variables.podGpus > ${l.pod.gpus} ? ['spec: the pod requests ' + string(variables.podGpus) + ' GPUs, over the per-pod limit of ${l.pod.gpus}'] : []`, "[]"),
    ),
  });
  vars.push({ name: "count", expression: `${sum("variables.perContainer.map(l, size(l))")} + size(variables.podLevel)` });
  return vars;
}

/**
 * A GPU resource pattern that only names extended resources (a domain-qualified name outside kubernetes.io, as
 * `IsExtendedResourceName` in Kubernetes' pkg/apis/core/helper): the apiserver's own validation, before
 * admission, refuses such a request without a limit, or unequal to it. Then whatever a container requests of it
 * is in its limits, with the same value.
 */
const namesExtendedResources = (pattern: string): boolean => /^[^*/]+\/[^/]*$/.test(pattern) && !pattern.includes("kubernetes.io/") && !pattern.startsWith("requests.");

/**
 * The fast path, in the match condition: true when the pod may break a rule, false when it surely breaks none, so
 * the policy is not evaluated for it at all. The apiserver evaluates a validation's messageExpression for every
 * request it evaluates, admitted or not, in an activation of its own (the variables computed again); checked
 * here once, without messages or sorting, a pod that passes costs one pass over its entries. Conservative: a
 * request over a cap but equal to its limit, say, or an uncounted value past 2^63-1, is left to the exact rules.
 * Uses no variables (a match condition cannot), so the limit class is written out.
 *
 * Short on purpose: the apiserver tracks the cost of every evaluation, and cel-go then plans the program anew
 * for each one (`cel.EvalOptions(OptTrackCost)` makes the program a generator), so a request pays for every node
 * of the expression, evaluated or not, and most for each comprehension. Hence one comprehension over the
 * containers that both checks each entry and sums the GPUs, each entry's cap picked by one chain, no bindings.
 */
export function mayViolateExpression(policy: Policy): string {
  const { variants } = limitVariants(policy);
  const mixing = isGpuResource("nvidia.com/gpu", policy.gpu.resources);
  const extendedOnly = policy.gpu.resources.every((r) => namesExtendedResources(r.pattern));
  // Whether every nvidia.com/mig-* name is a GPU resource (so `startsWith` alone says it).
  const migIsGpu = policy.gpu.resources.some((r) => r.pattern === "*" || (r.pattern.endsWith("*") && !r.pattern.slice(0, -1).includes("*") && "nvidia.com/mig-".startsWith(r.pattern.slice(0, -1))));
  const isMig = `k.startsWith('nvidia.com/mig-')${migIsGpu ? "" : ` && ${isGpu(policy, "k")}`}`;
  const quick = (limits: Limits): string => {
    const { cpu, memory, gpus = {} } = limits.container;
    // The cap of entry `k` as containerMax picks it; any other value is fine up to 2^63-1 (only GPU resources are
    // counted uncapped, and only they must be in range: for the others the exact rules decide).
    let cap = `'${MAX_UNITS}'`;
    for (const [pattern, n] of Object.entries(gpus).reverse()) cap = `${globCondition("k", pattern)} ? ${celString(String(n))} : ${cap}`;
    if (memory !== undefined) cap = `k == 'memory' ? ${celString(memory)} : ${cap}`;
    if (cpu !== undefined) cap = `k == 'cpu' ? ${celString(cpu)} : ${cap}`;
    const within = `!string(v).startsWith('-') && quantity(string(v)).compareTo(quantity(${cap})) <= 0`;
    // Whole GPUs and MIG slices in one container: in its limits when both are extended resources.
    const migInLimits = mixing && extendedOnly ? ` && !(${isMig} && 'nvidia.com/gpu' in ${limitsOf("c")})` : "";
    const mixedAnywhere =
      mixing && !extendedOnly ? ` && !(('nvidia.com/gpu' in ${requestsOf("c")} || 'nvidia.com/gpu' in ${limitsOf("c")}) && [${requestsOf("c")}, ${limitsOf("c")}].exists(m, m.exists(k, ${isMig})))` : "";
    // Surely under the cost bound (items × passes ≤ (1 + containers + entries) × (4 + entries)): at most 8
    // containers (checked below) of at most 10 entries are (1 + 8 + 80) × (4 + 80) = 7,476.
    const containerOk = `size(${requestsOf("c")}) + size(${limitsOf("c")}) <= 10 && ${requestsOf("c")}.all(k, v, ${within})${mixedAnywhere}`;
    if (limits.pod.gpus === undefined) return `${ALL_CONTAINERS}.all(c, ${containerOk} && ${limitsOf("c")}.all(k, v, ${within}${migInLimits}))`;
    // With a per-pod cap, the same pass sums each container's GPU limits (else requests), at least the effective
    // request (a request is at most its limit: the apiserver's validation); a container that fails a check adds
    // 1e300, over any cap. In doubles: no overflow error whatever the values, exact for whole numbers up to 2^53.
    const value = "quantity(string(v)).asApproximateFloat()";
    const requested = extendedOnly ? "" : ` + ${requestsOf("c")}.transformList(k, v, ${isGpu(policy, "k")} && !(k in ${limitsOf("c")}), ${value})`;
    return (
      `([0.0] + ${ALL_CONTAINERS}.map(c, ${containerOk} ?\n  ([0.0] + ${limitsOf("c")}.transformList(k, v, ${within}${migInLimits} ? (${isGpu(policy, "k")} ? ${value} : 0.0) : 1e300)${requested}).sum() : 1e300)).sum() <= ${limits.pod.gpus}.0`
    );
  };
  const texts = variants.map(quick);
  let pick = `(${texts[0]!})`;
  if (new Set(texts).size > 1) {
    // The limit class, written out: the first namespaces[] pattern matching the request's namespace.
    pick = `(${texts[indexOfDefault(policy, variants)]!})`;
    for (let n = policy.namespaces.length - 1; n >= 0; n--) {
      pick = `${globCondition("request.namespace", policy.namespaces[n]!.pattern)} ? (${texts[variantOf(variants, overrideLimits(policy, policy.namespaces[n]))]!}) :\n${pick}`;
    }
    pick = `(${pick})`;
  }
  return `!(size(${ALL_CONTAINERS}) <= 8 &&\n${pick})`;
}

/**
 * The pods the policy judges at all: those the webhooks' match condition walks (src/manifests/webhooks.ts: at
 * most CONDITION_MAX_CONTAINERS containers and init containers, each with at most CONDITION_MAX_RESOURCES
 * requests and limits). Within them every variable's work, and so the CEL runtime cost, is bounded whatever the
 * pod; a wider pod (a 1,500-container web server's, say) would walk every container and could run past the
 * apiserver's per-expression cost limit, and be refused for that. Wider pods are left to /validate/pods, which the
 * overlay keeps for them ({@link beyondBoundsExpression}); its guard skips those that are no training pods.
 */
export function withinBoundsExpression(): string {
  return `size(${ALL_CONTAINERS}) <= ${CONDITION_MAX_CONTAINERS} &&\n${ALL_CONTAINERS}.all(c, size(${requestsOf("c")}) + size(${limitsOf("c")}) <= ${CONDITION_MAX_RESOURCES})`;
}

/**
 * The complement of {@link withinBoundsExpression}, as the pods.validate webhook's match condition next to the
 * policy (manifests/overlays/validating-admission-policy): pod CREATEs the policy does not judge, and every
 * other operation the webhook handles (UPDATE pods/resize).
 */
export function beyondBoundsExpression(): string {
  return `request.operation != 'CREATE' ||\nsize(${ALL_CONTAINERS}) > ${CONDITION_MAX_CONTAINERS} ||\n${ALL_CONTAINERS}.exists(c, size(${requestsOf("c")}) + size(${limitsOf("c")}) > ${CONDITION_MAX_RESOURCES}) ||\n${HAS_CLAIMS}`;
}

/** The name of the overlay's extra match condition on the pods.validate webhook. */
export const BEYOND_BOUNDS_CONDITION = "beyond-the-policy-bounds";

/**
 * Whether the pod is a training pod: the webhooks' training-pods-only condition (`trainingPodExpression` in
 * src/manifests/webhooks.ts, the same test): a job label, or a GPU resource in some container (only its limits
 * need looking at when the GPU resources are extended resources). The first variable, and the
 * validation's first test rather than part of the match condition: every request plans the match condition,
 * only those the fast path leaves plan this.
 */
export function trainingExpression(policy: Policy): string {
  // A bare `gpu` is no valid container resource name (the apiserver refuses it before admission), so it does not
  // make the GPU resources non-extended; it stays in the test, as in the webhooks'.
  return trainingPodExpression(policy, { limitsOnly: gpuResourcePatterns(policy).every((p) => p === "gpu" || p.startsWith(IMPLICIT_DEVICE_CLASS_PREFIX) || namesExtendedResources(p)) });
}

/** The rules of `/validate/pods` the exported policy does not express, and whether `policy` uses each. */
export function unexpressedRules(policy: Policy): UnexpressedRule[] {
  const all = [policy.limits, ...policy.namespaces.map((o) => overrideLimits(policy, o))];
  const capped = all.some((l) => l.container.cpu !== undefined || l.container.memory !== undefined || Object.keys(l.container.gpus ?? {}).length > 0);
  // The expressed rules in warn or audit mode somewhere: the export only denies, and only where the mode is deny.
  const byMode: UnexpressedRule[] = EXPRESSED_RULES.flatMap((rule) => {
    const { modes, patterns, fallback } = waivedModes(policy.enforcement, rule);
    if (modes.length === 0) return [];
    const deny = denyCondition(policy.enforcement, rule);
    const matching = `in namespaces matching ${patterns.join(", ")}`;
    const where = !fallback ? matching : patterns.length > 0 ? `by default and ${matching}` : deny === "false" ? "everywhere" : "by default";
    const denied =
      deny === "false"
        ? "the exported policy leaves the rule out"
        : "the exported policy denies it only where its mode is deny (request.namespace against the enforcement patterns)";
    return [{
      rule: `${rule} (${modes.join("/")})`,
      why: `enforcement puts it in ${modes.join("/")} mode ${where}: ${denied}; the webhook's ${modes.map((m) => (m === "warn" ? "warnings" : "audit records")).join(" and ")} for it need the webhook`,
      active: true,
    }];
  });
  return [
    ...byMode,
    {
      rule: "gpu-unknown",
      why: "a GPU-looking resource name the policy does not count (e.g. example.com/gpu) is refused under a GPU cap by the webhook only",
      active: all.some((l) => Object.keys(l.container.gpus ?? {}).length > 0 || l.pod.gpus !== undefined || l.job.gpus !== undefined),
    },
    {
      rule: "accelerator-allowed",
      why: "allowedAccelerators / allowedPartitions (annotations, node selectors, affinity, MIG resources) are checked by the webhook only",
      active: all.some((l) => l.allowedAccelerators !== undefined || l.allowedPartitions !== undefined),
    },
    {
      rule: "pods/resize",
      why: "an in-place resize is refused only where it makes the pod worse than before; the policy matches pod CREATE only (keep the webhook for UPDATE pods/resize)",
      active: capped,
    },
    { rule: "near-limit warnings", why: "the webhook warns at 90 % of a per-container limit; the policy only denies", active: capped },
    {
      rule: "extended-resources",
      why: "not repeated: the apiserver's own pod validation (ValidateResourceRequirements) already refuses fractional extended resources and a request unequal to its limit, before admission",
      active: false,
    },
    {
      rule: "GPUs through ResourceClaims (DRA)",
      why: "a pod's claims are other objects, which a ValidatingAdmissionPolicy cannot read: the devices a pod asks for through spec.resourceClaims are counted and checked by /validate/pods, which the overlay keeps for every pod that names a claim",
      active: false,
    },
    {
      rule: "job rules",
      why: "job-gpus, replicas, runPolicy and capacity (the job and the device ledger) stay with /validate/jobs",
      active: false,
    },
  ];
}

/** The ValidatingAdmissionPolicy and its binding for `policy`. */
export function renderValidatingAdmissionPolicy(policy: Policy, opts: VapOptions = {}): RenderedVap {
  const selector: LabelSelector = namespaceSelector(namespaceScope(opts.namespace ?? DEFAULT_NAMESPACE));
  // One condition, the fast path: every request to the policy plans and evaluates it. Whether the pod is a
  // training pod is the validation's first test (`variables.training`), for the few the fast path leaves.
  const matchConditions: MatchCondition[] = [
    { name: "within-the-webhook-bounds", expression: withinBoundsExpression() },
    { name: "pods-that-may-violate", expression: mayViolateExpression(policy) },
  ];
  const summary = "string(variables.count) + ' policy violation' + (variables.count == 1 ? '' : 's') + ': '";
  return {
    policy: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: VAP_NAME },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          matchPolicy: "Equivalent",
          namespaceSelector: selector,
          resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" }],
        },
        matchConditions,
        variables: vapVariables(policy),
        validations: [
          {
            expression: "!variables.training || (variables.costDenial == '' && variables.count == 0)",
            messageExpression:
              "!variables.training ? '' :\n" +
              "variables.costDenial != '' ? 'spec: ' + variables.costDenial :\n" +
              `${summary} + (variables.perContainer.filter(l, size(l) > 0).map(l, l.join('; ')) + variables.podLevel).join('; ')`,
            // What the apiserver says when the list is longer than it allows in a message (5 KiB).
            message: "the pod is over Quartermaster's limits (too many violations to list; /validate/pods lists them all)",
            reason: "Forbidden",
          },
        ],
      },
    },
    binding: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: VAP_NAME },
      spec: { policyName: VAP_NAME, validationActions: ["Deny"] },
    },
  };
}

const HEADER = [
  " Quartermaster's pod limits (/validate/pods) as a ValidatingAdmissionPolicy: the apiserver judges pod creates",
  " in CEL, with the webhook's verdicts, field paths and messages, and no webhook call. Kubernetes >= 1.33.",
  " Rendered by `quartermaster policy export-vap [--policy F] [--namespace N]` (src/manifests/vap.ts); do not edit.",
  " Same scope as the webhooks: opted-in namespaces (quartermaster.dev/enabled=true) but never the system ones or",
  " Quartermaster's own, training pods only. It only denies, and only what the webhook denies (enforcement modes).",
  ` Pods wider than ${CONDITION_MAX_CONTAINERS} containers, or ${CONDITION_MAX_RESOURCES} resource entries in a container, are left to /validate/pods: keep it for them.`,
];

/** The header's line of expressed rules: those that deny everywhere, those that deny in some namespaces. */
function expressedLine(policy: Policy): string {
  const conds = EXPRESSED_RULES.map((rule) => ({ rule, deny: denyCondition(policy.enforcement, rule) }));
  const everywhere = ["review-cost", ...conds.filter((c) => c.deny === "true").map((c) => c.rule)];
  const some = conds.filter((c) => c.deny !== "true" && c.deny !== "false").map((c) => c.rule);
  return ` Expressed: ${everywhere.join(", ")}${some.length > 0 ? `; where their mode is deny: ${some.join(", ")}` : ""}. Not expressed (they stay with the webhooks):`;
}

/** Policy and binding as one YAML stream, the header listing what is not expressed. */
export async function validatingAdmissionPolicyYaml(policy: Policy, opts: VapOptions = {}): Promise<string> {
  const { policy: vap, binding } = renderValidatingAdmissionPolicy(policy, opts);
  const header = [...HEADER, expressedLine(policy), ...unexpressedRules(policy).map((r) => ` - ${r.rule}${r.active ? " (USED BY THIS POLICY)" : ""}: ${r.why}`)].join("\n");
  return yamlStream([vap, binding], header, { literalBlocks: true, noAliases: true });
}

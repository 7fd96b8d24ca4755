/**
 * @module
 * The pod mutations that need no lookup as a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
 * Kubernetes 1.36) and its binding, rendered from the policy, pure. The apiserver then outfits GPU pods in-process,
 * in CEL, with no webhook call; `quartermaster policy export-map` prints it, manifests/overlays/mutating-admission-policy
 * uses it with the pods webhook in its reduced mode ({@link reducedModeExpression}).
 *
 * One source: every value comes from the policy and from the definitions src/mutate uses (the annotation keys,
 * GPU feature discovery's labels `GFD`, `unpartitionedRequirements`, the GPU patterns, the pipeline's mutation
 * names and order); the CEL restates the algorithms of src/mutate, step for step, and test/e2e/map-parity.test.ts
 * compares the pods the apiserver stores with the policy and with the webhook.
 *
 * Expressed as one mutation, one JSON patch list carrying the pipeline's steps in its order (src/mutate/index.ts),
 * the name of each step that changes the pod recorded in `quartermaster.dev/mutations` (in pipeline order, as the
 * webhook records them):
 * - resources: bare `gpu` renamed, extended resources paired, cpu/memory requests defaulted, limitsFromRequests;
 * - gpu-tolerations: per GPU resource name, sorted, its `Exists` toleration and the pattern's extra ones;
 * - accelerator: `quartermaster.dev/accelerator` and `quartermaster.dev/gpu-partition` as required node affinity
 *   (GFD's mixed and single strategies, or `partitionNodeLabel`; `none`), tolerations when the policy asks;
 * - interruptible: tolerations and the node requirement, or the non-interruptible requirement.
 * The steps see each other's output as the pipeline's do, computed in the variables rather than applied in turn (one
 * mutation is one round trip of the pod in the apiserver, not four: {@link mapSpec}). Existing values are compared as
 * the webhook compares them (tolerations field by field with `Equal` as the default operator; requirements by key,
 * operator and values), so a second run changes nothing: the policy is reinvoked (`IfNeeded`) after the webhook's
 * cluster spec, and is then a no-op ({@link UNCHANGED}).
 *
 * Which pods: the webhooks' training pods (the same condition), within the bounds where the CEL's cost is bounded
 * and the webhook would not refuse the work ({@link withinBoundsExpression}), and not naming ResourceClaims when the
 * policy knows GPU device classes (their GPUs are in other objects). Everything else stays with /mutate/pods:
 * {@link unexpressedMutations} lists it, the YAML header and `export-map`'s stderr say so.
 */
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION, ANNOTATION_INTERRUPTIBLE, ANNOTATION_MUTATIONS } from "../core/keys.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES } from "../core/gpu.js";
import { namespaceScope, namespaceSelector } from "../core/scope.js";
import { unpartitionedRequirements } from "../mutate/accelerator.js";
import { GFD } from "../vendors/nvidia.js";
import { POD_MUTATIONS } from "../mutate/index.js";
import { nonZero as nonZeroQuantity } from "../mutate/resources.js";
import type { NodeSelectorRequirement, Policy, Toleration } from "../policy/types.js";
import { ALL_CONTAINERS, celString, DEFAULT_NAMESPACE, globCondition, limitsOf, requestsOf, trainingPodExpression, withinBoundsExpression, type MatchCondition } from "./webhooks.js";
import { yamlStream } from "./yaml.js";

export const MAP_NAME = "quartermaster-pod-outfit";
// Which pods the policy outfits and which the reduced webhook keeps live with the webhook configurations (they render
// the reduced mode): src/manifests/webhooks.ts.
export { REDUCED_MODE_CONDITION, reducedModeExpression, withinBoundsExpression } from "./webhooks.js";

/** The pipeline's mutations the policy carries, by name (src/mutate/index.ts). */
export const EXPRESSED_MUTATIONS = ["resources", "gpu-tolerations", "accelerator", "interruptible"] as const;

export interface MapOptions {
  /** Quartermaster's namespace: excluded from the scope, as for the webhooks. */
  namespace?: string;
}

export interface RenderedMap {
  policy: Record<string, unknown>;
  binding: Record<string, unknown>;
}

export interface UnexpressedMutation {
  mutation: string;
  why: string;
  /** True when this policy makes it happen (so the webhook must stay for it). */
  active: boolean;
}

// ---- CEL helpers ------------------------------------------------------------------------------------------

/** The separator of a toleration's canonical key (no Kubernetes name or value holds it). */
const SEP = celString("\u001f");
const list = (items: readonly string[]): string => `[${items.join(", ")}]`;
const strings = (items: readonly string[]): string => list(items.map(celString));
/** JSON pointer escaping (RFC 6901) of one key. */
const pointerKey = (key: string): string => key.replace(/~/g, "~0").replace(/\//g, "~1");
const annotationOf = (key: string): string => `object.metadata.?annotations[?${celString(key)}]`;

/** A function of strings written out as CEL concatenation with `args` (CEL expressions) in place: one source for label shapes. */
function template(fn: (...args: string[]) => string, args: readonly string[]): string {
  // Markers no label or name holds stand for the arguments, then the text is cut at them.
  const mark = "\u{10FFFF}";
  const marks = args.map((_, i) => `${mark}${i}${mark}`);
  const parts = fn(...marks).split(new RegExp(`${mark}(\\d+)${mark}`, "u"));
  const out: string[] = [];
  parts.forEach((p, i) => {
    if (i % 2 === 0) {
      if (p !== "") out.push(celString(p));
    } else out.push(`(${args[Number(p)]})`);
  });
  return out.length === 0 ? "''" : out.join(" + ");
}

/** True in CEL when `v` is a GPU resource name: some `gpu.resources` pattern matches it (src/core/gpu.ts isGpuResource). */
function isGpu(policy: Pick<Policy, "gpu">, v: string): string {
  const patterns = [...new Set(policy.gpu.resources.map((r) => r.pattern))];
  return patterns.length === 0 ? "false" : `(${patterns.map((p) => globCondition(v, p)).join(" || ")})`;
}

/** Kubernetes' IsExtendedResourceName, as src/core/gpu.ts isExtendedResource. */
const isExtended = (v: string): string =>
  `(${v}.contains('/') && !${v}.startsWith('requests.') && ${v}.substring(0, ${v}.indexOf('/')) != 'kubernetes.io' && !${v}.substring(0, ${v}.indexOf('/')).endsWith('.kubernetes.io'))`;
/** A quantity that parses and is not zero (src/mutate/resources.ts nonZero). */
const nonZero = (v: string): string => `(isQuantity(${v}) && quantity(${v}).compareTo(quantity('0')) != 0)`;
/** A valid label value (src/mutate/accelerator.ts isLabelValue). */
const isLabelValue = (v: string): string => `(size(${v}) <= 63 && ${v}.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'))`;

/** A policy default the webhook would write: a quantity that is not zero (decided here, as src/mutate/resources.ts does). */
const nonZeroStatic = (v: string | undefined): v is string => nonZeroQuantity(v);

// A toleration as a tuple of strings [key, operator, value, effect, tolerationSeconds] ('' when absent), so lists of
// them are homogeneous CEL values; its canonical key is what the webhook compares (src/mutate/pod.ts sameToleration).
const tuple = (t: Toleration): string =>
  strings([t.key ?? "", t.operator ?? "", t.value ?? "", t.effect ?? "", t.tolerationSeconds === undefined ? "" : String(t.tolerationSeconds)]);
const tupleKey = (t: string): string => `${t}[0] + ${SEP} + (${t}[1] == '' ? 'Equal' : ${t}[1]) + ${SEP} + ${t}[2] + ${SEP} + ${t}[3] + ${SEP} + (${t}[4] == '' ? 'u' : ${t}[4])`;
const existingKey = (e: string): string =>
  `${e}.?key.orValue('') + ${SEP} + ${e}.?operator.orValue('Equal') + ${SEP} + ${e}.?value.orValue('') + ${SEP} + ${e}.?effect.orValue('') + ${SEP} + (has(${e}.tolerationSeconds) ? string(${e}.tolerationSeconds) : 'u')`;

// A node-selector requirement as [key, operator, values...].
const req = (r: Pick<NodeSelectorRequirement, "key" | "values"> & { operator: string }): string => strings([r.key, r.operator, ...(r.values ?? [])]);
const TERM_TYPE = "Object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
const REQUIRED = "object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])";
/** A requirement of the pod (typed, from the apiserver) as the same tuple: key, operator, values as strings. */
const reqTupleOf = (e: string): string => `[${e}.?key.orValue(''), ${e}.?operator.orValue('')] + ${e}.?values.orValue([]).map(v, string(v))`;
/**
 * The pod's required node-selector terms as data the steps can work on and hand on to each other: each term a pair
 * [its matchExpressions, its matchFields], each a list of requirement tuples (so two requirements are the same when
 * the tuples are equal, as src/mutate/pod.ts sameRequirement compares them: key, operator, values).
 */
const TERMS = `${REQUIRED}.map(t, [t.?matchExpressions.orValue([]).map(e, ${reqTupleOf("e")}), t.?matchFields.orValue([]).map(e, ${reqTupleOf("e")})])`;
/** Terms (as above) back to the pod's type, for the patch (every value a string: nothing typed is carried over). */
const termObjects = (terms: string): string => {
  const reqs = (list: string, type: string): string => `${list}.map(r, ${TERM_TYPE}.${type}{key: r[0], operator: r[1], values: r.slice(2, size(r))})`;
  return `${terms}.map(t, ${TERM_TYPE}{matchExpressions: ${reqs("t[0]", "matchExpressions")}, matchFields: ${reqs("t[1]", "matchFields")}})`;
};

const patch = (op: string, path: string, value?: string): string => `JSONPatch{op: '${op}', path: ${path}${value === undefined ? "" : `, value: ${value}`}}`;

interface Step {
  variables: Variable[];
  /** CEL that is true when the step changes the pod (`false`: this policy never makes it). */
  changed: string;
}

/**
 * One ANDed-alternatives change (src/mutate/accelerator.ts withRequiredNodeAlternatives, of which
 * src/mutate/pod.ts withRequiredNodeRequirements is the one-alternative case) on `before`, the terms (as {@link TERMS})
 * the earlier steps leave: the variables `<p>Alts` (the non-empty alternatives), `<p>AffinityChanged` and `<p>Terms`
 * (the terms after this step, `before` when it changes nothing). `alts` undefined: never any.
 */
function affinityStep(p: string, alts: string | undefined, before: string): Step & { terms: string } {
  if (alts === undefined) return { variables: [], changed: "false", terms: before };
  const A = `variables.${p}Alts`;
  // A term stays as it is when it is empty (in a pod that has terms) or already holds all of some alternative.
  const keep = (t: string): string => `((size(${t}[0]) == 0 && size(${t}[1]) == 0) || ${A}.exists(a, a.all(r, r in ${t}[0])))`;
  const changed = `variables.${p}AffinityChanged`;
  return {
    variables: [
      { name: `${p}Alts`, expression: `(${alts}).filter(a, size(a) > 0)` },
      { name: `${p}AffinityChanged`, expression: `size(${A}) > 0 && (size(${before}) == 0 || ${before}.exists(t, !${keep("t")}))` },
      {
        name: `${p}Terms`,
        expression:
          `!${changed} ? ${before} :\n` +
          `size(${before}) == 0 ? ${A}.map(a, [a, a.filter(r, false)]) :\n` +
          `${before}.map(t, ${keep("t")} ? [t] : ${A}.map(a, [t[0] + a.filter(r, !(r in t[0])), t[1]])).flatten()`,
      },
    ],
    changed,
    terms: `variables.${p}Terms`,
  };
}

/**
 * One tolerations change (src/mutate/pod.ts withTolerations): `wanted` a CEL list of toleration tuples, undefined when
 * never any; `seen` the canonical keys of the tolerations the pod has once the earlier steps' are added. The variables
 * `<p>TolerationsAdded` (what this step appends) and `<p>Seen` (`seen` with them).
 */
function tolerationStep(p: string, wanted: string | undefined, seen: string): Step & { added?: string; seen: string } {
  if (wanted === undefined) return { variables: [], changed: "false", seen };
  const W = `variables.${p}Wanted`;
  const K = `variables.${p}WantedKeys`;
  const added = `variables.${p}TolerationsAdded`;
  return {
    variables: [
      { name: `${p}Wanted`, expression: wanted },
      { name: `${p}WantedKeys`, expression: `${W}.map(t, ${tupleKey("t")})` },
      { name: `${p}TolerationsAdded`, expression: `${W}.transformList(i, t, ${K}.indexOf(${K}[i]) == i && !(${K}[i] in ${seen}), t)` },
      { name: `${p}Seen`, expression: `${seen} + ${added}.map(t, ${tupleKey("t")})` },
    ],
    changed: `size(${added}) > 0`,
    added,
    seen: `variables.${p}Seen`,
  };
}

/**
 * The patches recording `variables.applied` (the names of the steps that changed the pod, in pipeline order) in
 * `quartermaster.dev/mutations`, as src/mutate/index.ts `recorded` (the pipeline's names in its order, then others).
 */
function recordPatches(): string {
  const N = "variables.applied";
  const known = strings(POD_MUTATIONS.map((m) => m.name));
  const cur = annotationOf(ANNOTATION_MUTATIONS);
  const set = `${cur}.orValue('').split(',').map(s, s.trim()).filter(s, s != '').distinct()`;
  const value = `!${cur}.hasValue() ? ${N}.join(',') : (${known}.filter(k, k in ${set} || k in ${N}) + ${set}.filter(s, !(s in ${known}))).join(',')`;
  return (
    `(object.metadata.?annotations.hasValue() ? [] : [${patch("add", "'/metadata/annotations'", "{}")}]) +\n` +
    `(${cur}.hasValue() && ${N}.all(n, n in ${set}) ? [] : [${patch("add", celString(`/metadata/annotations/${pointerKey(ANNOTATION_MUTATIONS)}`), value)}])`
  );
}

/**
 * What the mutation answers for a pod it changes nothing on: one JSON Patch `test` that fails. The apiserver applies
 * a mutation's patch list, even an empty one, as a round trip of the whole pod (k8s.io/apiserver
 * pkg/admission/plugin/policy/mutating/patch/json_patch.go: encode the pod, evanphx/json-patch's Apply parses and
 * re-serializes it, then a strict decode back into a Pod); a failed `test` ends Apply before the re-serializing and
 * the patcher returns the pod as it was, without the decode. The path is a top-level member no Pod has, so the test
 * always fails (a missing member against a value: ErrTestFailed).
 */
export const UNCHANGED = `[${patch("test", celString(`/${pointerKey("quartermaster.dev/unchanged")}`), "true")}]`;

interface Variable {
  name: string;
  expression: string;
}

/** The path of container `i` of `variables.all` (init containers first). */
const containerPath = (i: string): string => `(${i} < variables.nInit ? '/spec/initContainers/' + string(${i}) : '/spec/containers/' + string(${i} - variables.nInit))`;

/** A map rebuilt from its key list: `keys` (CEL list) with values from `value` (CEL of `k`). */
const mapOf = (keys: string, value: string): string => `${keys}.transformMapEntry(j, k, {k: ${value}})`;
const keysOf = (m: string): string => `${m}.map(k, k)`;

function resourceVariables(policy: Policy): Variable[] {
  const G = celString(policy.gpu.resourceName);
  // Bare `gpu` renamed (an explicit value of the policy's resource wins).
  const rename = (m: string): string => `('gpu' in ${m} ? ${mapOf(`(${keysOf(m)}.filter(k, k != 'gpu') + (${G} in ${m} ? [] : [${G}]))`, `k in ${m} ? ${m}[k] : ${m}['gpu']`)} : ${m})`;
  // Extended resources: the missing side filled from the other.
  const pair = (m: string, other: string): string =>
    `(${keysOf(other)}.exists(k, ${isExtended("k")} && !(k in ${m})) ? ${mapOf(`(${keysOf(m)} + ${keysOf(other)}.filter(k, ${isExtended("k")} && !(k in ${m})))`, `k in ${m} ? ${m}[k] : ${other}[k]`)} : ${m})`;
  // cpu and memory requests from a non-zero limit, else the policy's (non-zero) default; `r` and `l` are CEL for
  // one container's requests and limits.
  const defaults = policy.resources.defaultRequests;
  const defaulted = (r: string, l: string): string => {
    const limitOk = (n: string): string => `('${n}' in ${l} && ${nonZero(`${l}['${n}']`)})`;
    const cond = (n: "cpu" | "memory"): string => `(!('${n}' in ${r}) && (${limitOk(n)} || ${nonZeroStatic(defaults[n])}))`;
    const val = (n: "cpu" | "memory"): string => (nonZeroStatic(defaults[n]) ? `(${limitOk(n)} ? ${l}['${n}'] : ${celString(defaults[n])})` : `${l}['${n}']`);
    return (
      `(!(${cond("cpu")} || ${cond("memory")}) ? ${r} : ` +
      mapOf(`(${keysOf(r)} + (${cond("cpu")} ? ['cpu'] : []) + (${cond("memory")} ? ['memory'] : []))`, `k in ${r} ? ${r}[k] : k == 'cpu' ? ${val("cpu")} : ${val("memory")}`) +
      ")"
    );
  };
  // Limits from requests for the resources the policy lists.
  const fromRequests = policy.resources.limitsFromRequests;
  const limited = (r: string, l: string): string => {
    if (fromRequests.length === 0) return l;
    const lcond = (n: string): string => `(!(${celString(n)} in ${l}) && ${celString(n)} in ${r} && ${nonZero(`${r}[${celString(n)}]`)})`;
    return (
      `(!(${fromRequests.map(lcond).join(" || ")}) ? ${l} : ` +
      mapOf(`(${keysOf(l)} + ${strings(fromRequests)}.filter(n, ${fromRequests.map((n) => `(n == ${celString(n)} && ${lcond(n)})`).join(" || ")}))`, `k in ${l} ? ${l}[k] : ${r}[k]`) +
      ")"
    );
  };
  return [
    { name: "r0", expression: `variables.all.map(c, ${requestsOf("c")}.transformMap(k, v, string(v)))` },
    { name: "l0", expression: `variables.all.map(c, ${limitsOf("c")}.transformMap(k, v, string(v)))` },
    { name: "r1", expression: `variables.r0.map(m, ${rename("m")})` },
    { name: "l1", expression: `variables.l0.map(m, ${rename("m")})` },
    { name: "r2", expression: `variables.r1.transformList(i, m, ${pair("m", "variables.l1[i]")})` },
    { name: "l2", expression: `variables.l1.transformList(i, m, ${pair("m", "variables.r1[i]")})` },
    { name: "r3", expression: `variables.r2.transformList(i, r, ${defaulted("r", "variables.l2[i]")})` },
    { name: "l3", expression: `variables.l2.transformList(i, l, ${limited("variables.r3[i]", "l")})` },
  ];
}

/** The accelerator step's CEL: the partition asked and whether it is valid, the MIG products, the node terms and tolerations. */
function acceleratorCel(policy: Policy): { part: string; validPartition: string; bases: string; accAlts: string; accTolerations: string | undefined } {
  const NL = policy.accelerator.nodeLabel;
  const pnl = policy.accelerator.partitionNodeLabel;
  const dev = "variables.accDevice";
  const part = "variables.accPartition";
  const onDevice = `(${dev} == '' ? [] : [[${celString(NL)}, 'In', ${dev}]])`;
  const p = "variables.accPartitionAsked";
  // src/mutate/accelerator.ts isPartitionProfile: a label value that fits GFD's `mig-<profile>.count` key.
  const validPartition = pnl
    ? `(${p} == 'none' || ${isLabelValue(p)})`
    : `(${p} == 'none' || (${isLabelValue(p)} && size(${p}) > 0 && size(${template((x) => `mig-${x}.count`, [p])}) <= 63))`;
  // src/mutate/accelerator.ts gfdPartitionTerms: the mixed strategy's count label, and the single strategy's product.
  const onProductLabel = NL === GFD.product;
  const bases = onProductLabel ? `(${dev} != '' ? [${dev}] : ${strings(policy.accelerator.migProducts)})` : strings(policy.accelerator.migProducts);
  const gfdAlts =
    `[${onDevice} + [[${template((x) => GFD.migLabel(x, "count"), [part])}, 'Gt', '0']]] +\n` +
    `(size(variables.accProducts) == 0 ? [] : [${onProductLabel ? `(${dev} != '' ? [] : ${onDevice})` : onDevice} + [[${celString(GFD.migStrategy)}, 'In', 'single'], [${celString(GFD.product)}, 'In'] + variables.accProducts]])`;
  const partitioned = pnl ? `[${onDevice} + [[${celString(pnl)}, 'In', ${part}]]]` : gfdAlts;
  const accAlts =
    `!variables.gpuLimit ? [] :\n` +
    `${part} == '' ? (${dev} == '' ? [] : [${onDevice}]) :\n` +
    `${part} == 'none' ? [${onDevice} + ${list(unpartitionedRequirements(policy).map(req))}] :\n` +
    partitioned;
  const accTolerations = !policy.accelerator.addTolerations
    ? undefined
    : `!variables.gpuLimit ? [] : (${dev} == '' ? [] : [[${celString(NL)}, 'Equal', ${dev}, 'NoSchedule', '']])` +
      (pnl ? ` + (${part} == '' || ${part} == 'none' ? [] : [[${celString(pnl)}, 'Equal', ${part}, 'NoSchedule', '']])` : "");
  return { part, validPartition, bases, accAlts, accTolerations };
}

/** The one mutation's patches: resources, every toleration added, the required node affinity, and the record. */
function outfitExpression(affinityChanged: string, terms: string): string {
  const resources =
    `(!variables.resourcesChanged ? [] : variables.all.transformList(i, c, variables.r3[i] != variables.r0[i] || variables.l3[i] != variables.l0[i],\n` +
    `  (has(c.resources) ? [] : [${patch("add", `${containerPath("i")} + '/resources'`, "{}")}]) +\n` +
    `  (variables.r3[i] == variables.r0[i] ? [] : [${patch("add", `${containerPath("i")} + '/resources/requests'`, "variables.r3[i]")}]) +\n` +
    `  (variables.l3[i] == variables.l0[i] ? [] : [${patch("add", `${containerPath("i")} + '/resources/limits'`, "variables.l3[i]")}])).flatten())`;
  const tolerations =
    `(size(variables.tolerationsAdded) == 0 ? [] :\n` +
    `(object.spec.?tolerations.hasValue() ? [] : [${patch("add", "'/spec/tolerations'", "[]")}]) +\n` +
    `variables.tolerationsAdded.map(t, ${patch(
      "add",
      "'/spec/tolerations/-'",
      "t[4] == '' ? Object.spec.tolerations{key: t[0], operator: t[1], value: t[2], effect: t[3]} : Object.spec.tolerations{key: t[0], operator: t[1], value: t[2], effect: t[3], tolerationSeconds: int(t[4])}",
    )}))`;
  const affinity =
    affinityChanged === "false"
      ? "[]"
      : `(!(${affinityChanged}) ? [] :\n` +
        `(object.spec.?affinity.hasValue() ? [] : [${patch("add", "'/spec/affinity'", "{}")}]) +\n` +
        `(object.spec.?affinity.?nodeAffinity.hasValue() ? [] : [${patch("add", "'/spec/affinity/nodeAffinity'", "{}")}]) +\n` +
        `[${patch(
          "add",
          "'/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution'",
          `Object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution{nodeSelectorTerms: ${termObjects(terms)}}`,
        )}])`;
  return `size(variables.applied) == 0 ? ${UNCHANGED} :\n${resources} +\n${tolerations} +\n${affinity} +\n${recordPatches()}`;
}

/**
 * The policy's variables (in evaluation order) and its one mutation: a single JSON patch list carrying every step's
 * operations, in the pipeline's order. One mutation, because the apiserver applies each mutation as a round trip of
 * the whole pod and evaluates the variables again for each (docs/benchmarks.md, issue 51). So no step sees another's
 * output on the object: each later step is computed from what the earlier ones will have produced (the resources
 * step's requests and limits `r3`/`l3` for the GPU names and limits; the tolerations the earlier steps add counted as
 * existing, `<p>Seen`; the required node terms the accelerator step writes being what the interruptible step extends,
 * `accTerms`), `/spec/tolerations`, `/spec/affinity` and the record each written once, and the record holds exactly the
 * names of the steps that changed the pod, in pipeline order. The apiserver's defaulting between two mutations does
 * not come into it: it only copies limits to missing requests, which no later step reads (`gpuNames` takes both,
 * `gpuLimit` the limits). A pod the policy changes nothing on gets {@link UNCHANGED}.
 */
export function mapSpec(policy: Policy): { variables: Variable[]; steps: string[]; mutations: Array<{ name: string; expression: string }> } {
  const { part, validPartition, bases, accAlts, accTolerations } = acceleratorCel(policy);
  const { tolerations: iTolerations, nodeRequirement, nonInterruptibleNodeRequirement } = policy.interruptible;
  const wantedGpu =
    `variables.gpuNames.map(n, [[string(n), 'Exists', '', 'NoSchedule', '']]` +
    policy.gpu.resources
      .filter((r) => r.tolerations.length > 0)
      .map((r) => ` + (${globCondition("n", r.pattern)} ? ${list(r.tolerations.map(tuple))} : [])`)
      .join("") +
    `).flatten()`;
  // Each step on what the earlier ones leave: tolerations by their keys, required terms as data.
  const gpuTolerations = tolerationStep("gpu", wantedGpu, "variables.tolerationKeys");
  const accAffinity = affinityStep("acc", accAlts, "variables.requiredTerms");
  const accToleration = tolerationStep("acc", accTolerations, gpuTolerations.seen);
  const intReq = (r: NodeSelectorRequirement | undefined): string => (r ? `[[${req(r)}]]` : "[]");
  const intAffinity = affinityStep(
    "int",
    nodeRequirement || nonInterruptibleNodeRequirement ? `variables.interruptible ? ${intReq(nodeRequirement)} : ${intReq(nonInterruptibleNodeRequirement)}` : undefined,
    accAffinity.terms,
  );
  const intToleration = tolerationStep("int", iTolerations.length > 0 ? `variables.interruptible ? ${list(iTolerations.map(tuple))} : []` : undefined, accToleration.seen);
  const or = (...c: string[]): string => c.filter((x) => x !== "false").join(" || ") || "false";
  const stepChanged: Record<(typeof EXPRESSED_MUTATIONS)[number], string> = {
    resources: "variables.resourcesChanged",
    "gpu-tolerations": gpuTolerations.changed,
    accelerator: or(accAffinity.changed, accToleration.changed),
    interruptible: or(intAffinity.changed, intToleration.changed),
  };
  // A step the policy never makes happen (no interruptible settings, say) is left out.
  const steps = EXPRESSED_MUTATIONS.filter((name) => stepChanged[name] !== "false");
  const added = [gpuTolerations, accToleration, intToleration].flatMap((s) => (s.added ? [s.added] : []));
  const affinityChanged = or(accAffinity.changed, intAffinity.changed);
  const variables: Variable[] = [
    { name: "nInit", expression: "size(object.spec.?initContainers.orValue([]))" },
    { name: "all", expression: ALL_CONTAINERS },
    ...resourceVariables(policy),
    { name: "resourcesChanged", expression: "variables.r3 != variables.r0 || variables.l3 != variables.l0" },
    { name: "tolerationKeys", expression: `object.spec.?tolerations.orValue([]).map(e, ${existingKey("e")})` },
    // gpu-tolerations: the GPU resource names of every container's requests and limits (after the resources step), sorted.
    { name: "gpuNames", expression: `(variables.r3 + variables.l3).map(m, ${keysOf("m")}).flatten().distinct().filter(n, ${isGpu(policy, "n")}).sort()` },
    ...gpuTolerations.variables,
    // accelerator: regular containers with a GPU in their limits (after the resources step), src/mutate/pod.ts hasGpuLimit.
    { name: "gpuLimit", expression: `variables.l3.transformList(i, m, i >= variables.nInit, m).exists(m, m.exists(k, ${isGpu(policy, "k")}))` },
    { name: "accDeviceAsked", expression: `${annotationOf(ANNOTATION_ACCELERATOR)}.orValue('').trim()` },
    { name: "accDevice", expression: `${isLabelValue("variables.accDeviceAsked")} ? variables.accDeviceAsked : ''` },
    { name: "accPartitionAsked", expression: `${annotationOf(ANNOTATION_GPU_PARTITION)}.orValue('').trim()` },
    { name: "accPartition", expression: `${validPartition} ? variables.accPartitionAsked : ''` },
    { name: "accProducts", expression: `${bases}.map(b, ${template((b, p) => GFD.migProduct(b, p), ["b", part])}).filter(x, ${isLabelValue("x")})` },
    { name: "requiredTerms", expression: TERMS },
    ...accAffinity.variables,
    ...accToleration.variables,
    // interruptible
    { name: "interruptible", expression: `${annotationOf(ANNOTATION_INTERRUPTIBLE)}.orValue('').trim().lowerAscii() == 'true'` },
    ...intAffinity.variables,
    ...intToleration.variables,
    // The names of the steps that change the pod, in pipeline order (the record), and every toleration they add.
    { name: "applied", expression: steps.map((name) => `(${stepChanged[name]} ? [${celString(name)}] : [])`).join(" + ") },
    { name: "tolerationsAdded", expression: added.join(" + ") },
  ];
  const expression = outfitExpression(affinityChanged, intAffinity.terms);
  return { variables, steps, mutations: [{ name: "outfit", expression }] };
}

// ---- which pods ----------------------------------------------------------------------------------------------

/** What the policy does not do, and whether `policy` makes it matter. */
export function unexpressedMutations(policy: Policy): UnexpressedMutation[] {
  return [
    {
      mutation: "training-labels, cluster-spec, jobset-tf-config",
      why: "need the pod's job (or JobSet), which an admission policy cannot read: the pods webhook keeps every pod with a job's labels (reduced mode)",
      active: true,
    },
    {
      mutation: "GPUs through ResourceClaims (DRA)",
      why: "a pod's claims are other objects: pods naming ResourceClaims are left to the webhook",
      active: policy.gpu.deviceClasses.length > 0,
    },
    {
      mutation: "wide pods",
      why: `pods past ${CONDITION_MAX_CONTAINERS} containers, ${CONDITION_MAX_RESOURCES} resource entries in a container, or near the webhook's cost bound are left to the webhook`,
      active: true,
    },
    {
      mutation: "admission warnings",
      why: "an admission policy cannot warn: the webhook's warnings (what was added, an ignored accelerator or partition annotation, a MIG resource that does not match the partition) are not given for the pods it outfits",
      active: true,
    },
  ];
}

/** The MutatingAdmissionPolicy and its binding for `policy`. */
export function renderMutatingAdmissionPolicy(policy: Policy, opts: MapOptions = {}): RenderedMap {
  const matchConditions: MatchCondition[] = [
    { name: "within-the-webhook-bounds", expression: withinBoundsExpression(policy) },
    { name: "training-pods-only", expression: trainingPodExpression(policy) },
  ];
  const spec = mapSpec(policy);
  return {
    policy: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingAdmissionPolicy",
      metadata: { name: MAP_NAME },
      spec: {
        // As /mutate/pods: a pod is created without its outfit rather than refused.
        failurePolicy: "Ignore",
        reinvocationPolicy: "IfNeeded",
        matchConstraints: {
          matchPolicy: "Equivalent",
          namespaceSelector: namespaceSelector(namespaceScope(opts.namespace ?? DEFAULT_NAMESPACE)),
          resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" }],
        },
        matchConditions,
        variables: spec.variables,
        mutations: spec.mutations.map((m) => ({ patchType: "JSONPatch", jsonPatch: { expression: m.expression } })),
      },
    },
    binding: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingAdmissionPolicyBinding",
      metadata: { name: MAP_NAME },
      spec: { policyName: MAP_NAME },
    },
  };
}

const HEADER = [
  " Quartermaster's pod mutations that need no lookup (/mutate/pods) as a MutatingAdmissionPolicy: the apiserver",
  " outfits GPU pods in CEL with no webhook call. Kubernetes >= 1.36 (admissionregistration.k8s.io/v1).",
  " Rendered by `quartermaster policy export-map [--policy F] [--namespace N]` (src/manifests/map.ts); do not edit.",
  " Same scope as the webhooks: opted-in namespaces, training pods only. Pair it with the pods webhook's reduced mode",
  " (manifests/overlays/mutating-admission-policy), which keeps what this policy leaves.",
  ` Expressed: ${EXPRESSED_MUTATIONS.join(", ")}. Not expressed (they stay with the webhook):`,
];

/** Policy and binding as one YAML stream, the header listing what is not expressed. */
export async function mutatingAdmissionPolicyYaml(policy: Policy, opts: MapOptions = {}): Promise<string> {
  const { policy: map, binding } = renderMutatingAdmissionPolicy(policy, opts);
  const header = [...HEADER, ...unexpressedMutations(policy).map((u) => ` - ${u.mutation}${u.active ? " (USED BY THIS POLICY)" : ""}: ${u.why}`)].join("\n");
  return yamlStream([map, binding], header, { literalBlocks: true, noAliases: true });
}

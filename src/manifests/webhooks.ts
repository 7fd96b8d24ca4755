/**
 * @module
 * The webhook configurations (MutatingWebhookConfiguration and ValidatingWebhookConfiguration), rendered from
 * the policy and the namespace scope, pure. manifests/base/webhook-configurations.yaml is this render with the
 * built-in policy (`npm run generate`; a unit test fails when the two differ), `quartermaster manifests
 * webhooks --policy F` prints it for another policy, and `doctor` compares the registered configurations with
 * it. So the `namespaceSelector` is the one the reconciler's scope uses (src/core/scope.ts), and the
 * `matchConditions` name exactly the GPU resources the policy knows: a pattern added to `gpu.resources`
 * (`intel.com/gpu`) reaches the apiserver's filter too.
 *
 * What is registered, and why each failure policy:
 * - `pods.mutate` (`/mutate/pods`, CREATE of training pods): `Ignore` — if Quartermaster is down, training
 *   pods are created without their cluster spec and placement rather than refused; `IfNeeded` reinvocation,
 *   the mutations are idempotent and a later mutating webhook (a service mesh) may change the pod after us.
 * - `jobs.mutate` (`/mutate/jobs`, CREATE of every job kind): `Ignore`, `IfNeeded` — it fills the platform's
 *   run-policy defaults once, at creation (a job created during an outage keeps upstream's defaults), and outfits
 *   the pod templates of a job queued in Kueue; reinvoked because Kueue's own mutating webhook (ordered before
 *   this configuration by name) may add the queue-name label after this one ran (kueue LocalQueueDefaulting),
 *   and every change it makes is idempotent (test/unit/kueue/kueue-outfit.test.ts). It also takes the CREATE of batch
 *   Jobs and JobSets, whose pod templates it outfits when they are queued in Kueue, so Kueue admits them by what
 *   their pods will ask for (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts); its match condition
 *   `training-jobs-or-queued` keeps every unqueued batch Job and JobSet away from Quartermaster.
 * - `pods.validate` (`/validate/pods`, CREATE of training pods and their in-place `pods/resize`): `Fail` —
 *   platform limits are the point; the selectors bound who waits on an outage.
 * - `jobs.validate` (`/validate/jobs`, CREATE/UPDATE of every job kind and UPDATE of its `/scale`, and CREATE/UPDATE
 *   of batch Jobs and JobSets, which make GPU pods too): `Fail`. Its match condition `training-jobs-or-gpu-workloads`
 *   ({@link gpuWorkloadExpression}) passes every training job and only the batch Jobs and JobSets whose templates
 *   ask for GPUs (or name ResourceClaims); and CREATE/UPDATE of the
 *   Trainer's TrainingRuntimes and ClusterTrainingRuntimes when the policy has a Trainer job kind.
 * - `claims.validate` (`/validate/claims`, CREATE of ResourceClaims and ResourceClaimTemplates, when the policy
 *   names GPU device classes): `Fail`, as for pods: a claim over the limits could hold GPUs a pod may not have.
 */
import type { LabelSelector } from "../core/selector.js";
import type { Policy } from "../policy/types.js";
import { namespaceScope, namespaceSelector } from "../core/scope.js";
import { jobShape, schemesOf } from "../kinds/index.js";
import { QUEUED_WORKLOAD_KINDS, TRAINER_RUNTIME_KINDS } from "../core/job-shapes.js";
import { KUEUE_QUEUE_NAME } from "../kueue/admission.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_REPLICATED_JOBS, CONDITION_MAX_RESOURCES, gpuResourcePatterns } from "../core/gpu.js";
import { GPU_WORD_RE2 } from "../vendors/index.js";
import type { Document } from "yaml";
import { yamlStream } from "./yaml.js";
import { MAX_REVIEW_COST } from "../core/cost.js";
import { POD_MUTATIONS } from "../mutate/index.js";
import { JOBSET_LABELS } from "../membership/jobset.js";

export const WEBHOOK_CONFIGURATION_NAME = "quartermaster";
export const WEBHOOK_SERVICE_NAME = "quartermaster-webhook";
export const DEFAULT_NAMESPACE = "quartermaster";


export interface RuleWithOperations {
  apiGroups: string[];
  apiVersions: string[];
  operations: string[];
  resources: string[];
  scope: "Namespaced" | "Cluster";
}

export interface MatchCondition {
  name: string;
  expression: string;
}

/** admissionregistration.k8s.io/v1 MutatingWebhook / ValidatingWebhook, the fields Quartermaster sets. */
export interface RenderedWebhook {
  name: string;
  admissionReviewVersions: string[];
  sideEffects: "None" | "NoneOnDryRun";
  reinvocationPolicy?: "IfNeeded" | "Never";
  timeoutSeconds: number;
  failurePolicy: "Ignore" | "Fail";
  matchPolicy: "Equivalent";
  clientConfig: { service: { name: string; namespace: string; path: string; port: number }; caBundle?: string };
  rules: RuleWithOperations[];
  namespaceSelector: LabelSelector;
  matchConditions?: MatchCondition[];
}

export interface RenderedConfiguration {
  apiVersion: "admissionregistration.k8s.io/v1";
  kind: "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration";
  metadata: { name: string };
  webhooks: RenderedWebhook[];
}

export interface RenderOptions {
  /** Quartermaster's namespace: where the webhook Service is, and excluded from the scope. */
  namespace?: string;
  /** Base64 PEM bundle for every webhook's clientConfig; left out (for cert-manager or `certs install`) when unset. */
  caBundle?: string;
}

export type WebhookPolicy = Pick<Policy, "jobKinds" | "gpu" | "webhook" | "kindShapes">;

/** Why each webhook is there, for `doctor` when one is missing (by webhook name). */
export const WEBHOOK_PURPOSE: Readonly<Record<string, string>> = {
  "pods.mutate.quartermaster.dev": "training pods are created without cluster spec, GPU tolerations or placement",
  "jobs.mutate.quartermaster.dev":
    "new jobs do not get the platform's run-policy defaults, and jobs queued in Kueue are admitted by their templates as written, not by what their pods will ask for",
  "pods.validate.quartermaster.dev": "pod limits are not enforced",
  "jobs.validate.quartermaster.dev": "job limits are not enforced",
  "claims.validate.quartermaster.dev": "GPU limits on ResourceClaims and their templates (DRA) are not enforced when they are created",
};

// ---- CEL ----------------------------------------------------------------------------------------------

/**
 * A CEL single-quoted string literal holding exactly `text`. Printable ASCII other than `'` and `\` stands
 * for itself; everything else is escaped (`\'`, `\\`, `\uHHHH`, `\UHHHHHHHH`), so no input can end the
 * literal early or inject CEL. Hand-written because no library here writes CEL; the CEL spec's escapes
 * (cel-spec, doc/langdef.md, "String and Bytes Values") are all it needs.
 */
export function celString(text: string): string {
  let out = "'";
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (ch === "'" || ch === "\\") out += `\\${ch}`;
    else if (cp >= 0x20 && cp <= 0x7e) out += ch;
    else if (cp >= 0xd800 && cp <= 0xdfff) throw new Error(`cannot put a lone surrogate (U+${cp.toString(16).toUpperCase()}) in a CEL string`);
    else if (cp <= 0xffff) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return `${out}'`;
}

/** RE2 syntax with every metacharacter of `text` escaped (RE2's QuoteMeta set). */
export function re2Quote(text: string): string {
  return text.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");
}

/**
 * CEL that is true when the string variable `v` matches the policy glob `pattern` (`*`: any run of
 * characters), in the cheapest form: `==`, `startsWith`, `endsWith`, else `matches` with an anchored RE2.
 */
export function globCondition(v: string, pattern: string): string {
  const parts = pattern.split("*");
  if (parts.length === 1) return `${v} == ${celString(pattern)}`;
  if (parts.length === 2) {
    const [prefix, suffix] = parts as [string, string];
    if (suffix === "") return prefix === "" ? "true" : `${v}.startsWith(${celString(prefix)})`;
    if (prefix === "") return `${v}.endsWith(${celString(suffix)})`;
  }
  // `*x*`: a substring, cheaper in the apiserver's CEL cost than a regular expression.
  if (parts.length === 3 && parts[0] === "" && parts[2] === "") return `${v}.contains(${celString(parts[1]!)})`;
  return `${v}.matches(${celString(`^${parts.map(re2Quote).join(".*")}$`)})`;
}

/**
 * True in CEL when resource name `r` makes a pod or job one the webhooks see: a name the policy counts as a GPU
 * (`gpuResourcePatterns`) or one that looks like a GPU's (`GPU_WORD_RE2`, src/vendors: refused under a cap as
 * `gpu-unknown`, never counted as nothing). The guards standing in for the conditions test the same (`sentAsGpu`).
 */
export function gpuCondition(policy: Pick<Policy, "gpu">): string {
  return [...gpuResourcePatterns(policy).map((p) => globCondition("r", p)), `r.matches(${celString(GPU_WORD_RE2)})`].join(" || ");
}

// A pod's containers and init containers as one list, and each side of a container's resources as a map (empty
// when absent): CEL optionals, in the admission CEL environment of every apiserver that has matchConditions.
export const ALL_CONTAINERS = "(object.spec.?initContainers.orValue([]) + object.spec.?containers.orValue([]))";
export const requestsOf = (c: string): string => `${c}.?resources.?requests.orValue({})`;
/** The pod names ResourceClaims (DRA): its GPUs, if any, are in other objects the webhook reads. */
export const HAS_CLAIMS = "size(object.spec.?resourceClaims.orValue([])) > 0";
export const limitsOf = (c: string): string => `${c}.?resources.?limits.orValue({})`;


/**
 * The `training-pods-only` expression: a pod of a training job (by its framework's labels) or one requesting a
 * GPU resource in any container or init container. `limitsOnly` looks at limits alone (right after the
 * apiserver's own validation, when every GPU resource is an extended resource: see `trainingExpression` in
 * src/manifests/vap.ts); the webhooks look at both, the mutating one seeing pods before that validation.
 * `bounded` (the webhooks' match condition) is also true for a pod wider than {@link CONDITION_MAX_CONTAINERS}
 * and {@link CONDITION_MAX_RESOURCES}, so its cost is bounded whatever the pod.
 *
 * Written as small as it can be, the GPU test once: kube-apiserver plans a match condition's CEL program anew
 * for every request (its cost tracking wants a fresh program; kubernetes staging/src/k8s.io/apiserver,
 * pkg/admission/plugin/cel/condition.go), at a cost that grows with the expression. In bench:e2e's apiserver
 * profiles the two pod webhooks' conditions took 14 % of the apiserver's CPU, 6 % of it planning, when the
 * expression tested each GPU pattern four times (containers and init containers, limits and requests).
 */
export function trainingPodExpression(policy: Pick<Policy, "jobKinds" | "gpu" | "kindShapes">, opts: { limitsOnly?: boolean; bounded?: boolean } = {}): string {
  const isGpu = gpuCondition(policy);
  const labelled = (label: string): string => `${celString(label)} in object.metadata.?labels.orValue({})`;
  const labels = schemesOf(policy.jobKinds, policy.kindShapes).map(({ podLabels: l }) => (l.length === 1 ? labelled(l[0]!) : `(${l.map(labelled).join(" && ")})`));
  const wide = opts.bounded ? `size(${requestsOf("c")}) + size(${limitsOf("c")}) > ${CONDITION_MAX_RESOURCES} || ` : "";
  const gpu = opts.limitsOnly
    ? `${ALL_CONTAINERS}.exists(c, ${wide}${limitsOf("c")}.exists(r, ${isGpu}))`
    : `${ALL_CONTAINERS}.exists(c, ${wide}[${requestsOf("c")}, ${limitsOf("c")}].exists(m, m.exists(r, ${isGpu})))`;
  // A pod that names ResourceClaims may ask for GPUs through them (DRA): the claims are other objects, so the
  // webhook reads them and decides (src/core/dra.ts); the condition can only see that there are some.
  const claims = policy.gpu.deviceClasses.length > 0 ? [HAS_CLAIMS] : [];
  return [...labels, ...(opts.bounded ? [`size${ALL_CONTAINERS} > ${CONDITION_MAX_CONTAINERS}`] : []), gpu, ...claims].join(" ||\n");
}

// ---- the reduced mode (src/manifests/map.ts) ---------------------------------------------------------------

/** The name of the reduced mode's match condition on the pods.mutate webhook. */
export const REDUCED_MODE_CONDITION = "not-outfitted-by-the-admission-policy";

/**
 * The pods the policy outfits, beyond being training pods: within the webhooks' match-condition bounds (64
 * containers, 32 resource entries each: the CEL cost is bounded) and surely under the webhook's cost bound
 * (src/core/cost.ts: items × (mutations + distinct GPU names), the entries standing in for the names; a pod
 * over it the webhook admits unchanged), and, when the policy knows GPU device classes, naming no ResourceClaims.
 */
export function withinBoundsExpression(policy: Pick<Policy, "gpu">): string {
  const entries = `([0] + ${ALL_CONTAINERS}.map(c, size(${requestsOf("c")}) + size(${limitsOf("c")}))).sum()`;
  return [
    `size(${ALL_CONTAINERS}) <= ${CONDITION_MAX_CONTAINERS}`,
    `${ALL_CONTAINERS}.all(c, size(${requestsOf("c")}) + size(${limitsOf("c")}) <= ${CONDITION_MAX_RESOURCES})`,
    `(1 + size(${ALL_CONTAINERS}) + ${entries}) * (${POD_MUTATIONS.length} + ${entries}) <= ${MAX_REVIEW_COST}`,
    ...(policy.gpu.deviceClasses.length > 0 ? [`!(${HAS_CLAIMS})`] : []),
  ].join(" &&\n");
}

/**
 * The reduced mode's extra match condition on the pods.mutate webhook: the pods the policy does not fully outfit.
 * Pods of a job (its labels, or a job as controller: training labels and cluster spec), TensorFlow TrainJob pods
 * (their JobSet's TF_CONFIG), and pods outside {@link withinBoundsExpression}. The webhook runs its whole pipeline on them; what
 * the policy already did is a no-op for it (idempotence).
 */
export function reducedModeExpression(policy: Pick<Policy, "jobKinds" | "gpu" | "kindShapes">): string {
  const labelled = (label: string): string => `${celString(label)} in object.metadata.?labels.orValue({})`;
  const labels = schemesOf(policy.jobKinds, policy.kindShapes).map(({ podLabels: l }) => (l.length === 1 ? labelled(l[0]!) : `(${l.map(labelled).join(" && ")})`));
  // A pod's job is found by its controller first (src/membership/resolve.ts jobRef): a job kind, or a batch Job (JobSet).
  const kinds = `[${[...new Set([...policy.jobKinds.map((k) => k.kind), "Job"])].map(celString).join(", ")}]`;
  const owned = `object.metadata.?ownerReferences.orValue([]).exists(o, o.?controller.orValue(false) && o.kind in ${kinds})`;
  return [...new Set([...labels, labelled(JOBSET_LABELS.jobSetName)]), owned, `!(${withinBoundsExpression(policy)})`].join(" ||\n");
}

// ---- the configurations ---------------------------------------------------------------------------------

/** Rules for `operations` on every job kind (`subresource` appended to each plural), one rule per group and version. */
function jobRules(policy: Pick<Policy, "jobKinds" | "kindShapes">, operations: string[], subresource = ""): RuleWithOperations[] {
  const byGroupVersion = new Map<string, { group: string; version: string; plurals: string[] }>();
  for (const k of policy.jobKinds) {
    // A kind without a scale subresource (TrainJob's CRD has only status) gets no /scale rule.
    if (subresource === "/scale" && !jobShape(k, policy.kindShapes).scaleSubresource) continue;
    const key = `${k.group}/${k.version}`;
    const entry = byGroupVersion.get(key) ?? { group: k.group, version: k.version, plurals: [] };
    const resource = `${k.plural}${subresource}`;
    if (!entry.plurals.includes(resource)) entry.plurals.push(resource);
    byGroupVersion.set(key, entry);
  }
  return [...byGroupVersion.values()].map((e) => ({ apiGroups: [e.group], apiVersions: [e.version], operations, resources: e.plurals, scope: "Namespaced" }));
}

/** Rules for `operations` on the kinds Kueue queues that are not training jobs (batch Jobs, JobSets), one per group and version. */
const workloadRules = (operations: string[]): RuleWithOperations[] =>
  QUEUED_WORKLOAD_KINDS.map((k) => ({ apiGroups: [k.group], apiVersions: [k.version], operations, resources: [k.plural], scope: "Namespaced" }));

/**
 * `jobs.mutate`'s match condition: a training job (any resource but the batch Jobs and JobSets of
 * `QUEUED_WORKLOAD_KINDS`), or an object carrying Kueue's queue name (the label, or the older annotation of the
 * same key: `queueNameOf`).
 */
export const JOBS_OR_QUEUED_EXPRESSION = [
  `!(request.resource.group + '/' + request.resource.resource in [${QUEUED_WORKLOAD_KINDS.map((k) => celString(`${k.group}/${k.plural}`)).join(", ")}])`,
  ...["labels", "annotations"].map((m) => `${celString(KUEUE_QUEUE_NAME)} in object.metadata.?${m}.orValue({})`),
].join(" ||\n");

/**
 * `jobs.validate`'s match condition `training-jobs-or-gpu-workloads`: a training job (any resource but the batch
 * Jobs and JobSets of `QUEUED_WORKLOAD_KINDS`), or a batch Job or JobSet one of whose pod templates asks for a GPU:
 * a container or init container naming a GPU resource pattern of the policy in its requests or limits, or, when
 * the policy knows GPU device classes, a template naming ResourceClaims (the webhook reads them). Bounded as the
 * pod condition is ({@link trainingPodExpression}): a template wider than {@link CONDITION_MAX_CONTAINERS}
 * containers or {@link CONDITION_MAX_RESOURCES} entries in one, or a JobSet of more than
 * {@link CONDITION_MAX_REPLICATED_JOBS} replicated Jobs or {@link CONDITION_MAX_CONTAINERS} containers over all its
 * templates, is sent on unwalked, and the webhook's guard makes the same test exactly (`gpuWorkloadGuard` in
 * src/admission/guards.ts). Every other batch Job and JobSet (a CronJob's, a JobSet's without GPUs) never reaches
 * Quartermaster.
 */
export function gpuWorkloadExpression(policy: Pick<Policy, "gpu">): string {
  const isGpu = gpuCondition(policy);
  const containersAt = (spec: string): string => `(${spec}.?initContainers.orValue([]) + ${spec}.?containers.orValue([]))`;
  const claims = (spec: string): string[] => (policy.gpu.deviceClasses.length > 0 ? [`size(${spec}.?resourceClaims.orValue([])) > 0`] : []);
  const walk = (spec: string): string =>
    `${containersAt(spec)}.exists(c, size(${requestsOf("c")}) + size(${limitsOf("c")}) > ${CONDITION_MAX_RESOURCES} || [${requestsOf("c")}, ${limitsOf("c")}].exists(m, m.exists(r, ${isGpu})))`;
  const job = "object.spec.?template.?spec";
  const rjobs = "object.spec.?replicatedJobs.orValue([])";
  const rjob = "j.?template.?spec.?template.?spec";
  const jobAsks = [`size${containersAt(job)} > ${CONDITION_MAX_CONTAINERS}`, ...claims(job), walk(job)].join(" || ");
  const jobSetAsks = [
    `size(${rjobs}) > ${CONDITION_MAX_REPLICATED_JOBS}`,
    `([0] + ${rjobs}.map(j, size${containersAt(rjob)})).sum() > ${CONDITION_MAX_CONTAINERS}`,
    `${rjobs}.exists(j, ${[...claims(rjob), walk(rjob)].join(" || ")})`,
  ].join(" ||\n  ");
  const workloads = QUEUED_WORKLOAD_KINDS.map((k) => celString(`${k.group}/${k.plural}`)).join(", ");
  return [
    `!(request.resource.group + '/' + request.resource.resource in [${workloads}])`,
    `(request.resource.resource == 'jobs' && (${jobAsks}))`,
    `(request.resource.resource == 'jobsets' && (\n  ${jobSetAsks}))`,
  ].join(" ||\n");
}

/** ResourceClaims and ResourceClaimTemplates (DRA, `resource.k8s.io/v1`, served from Kubernetes 1.34): their specs are immutable. */
const claimRule: RuleWithOperations = {
  apiGroups: ["resource.k8s.io"],
  apiVersions: ["v1"],
  operations: ["CREATE"],
  resources: ["resourceclaims", "resourceclaimtemplates"],
  scope: "Namespaced",
};

/**
 * The Trainer's runtimes, checked by `jobs.validate` when the policy has a Trainer job kind (issue 45): a
 * ClusterTrainingRuntime is cluster-scoped (the namespaceSelector does not apply to it), a TrainingRuntime namespaced.
 */
const runtimeRules = (policy: Pick<Policy, "jobKinds" | "kindShapes">): RuleWithOperations[] =>
  policy.jobKinds.some((k) => jobShape(k, policy.kindShapes).layout === "runtime")
    ? TRAINER_RUNTIME_KINDS.map((k) => ({ apiGroups: [k.group], apiVersions: [k.version], operations: ["CREATE", "UPDATE"], resources: [k.plural], scope: k.scope }))
    : [];

const podRule = (operations: string[], resource: string): RuleWithOperations => ({ apiGroups: [""], apiVersions: ["v1"], operations, resources: [resource], scope: "Namespaced" });

/** Both webhook configurations for `policy`, Mutating first. */
export function renderWebhookConfigurations(policy: WebhookPolicy, opts: RenderOptions = {}): [RenderedConfiguration, RenderedConfiguration] {
  const namespace = opts.namespace ?? DEFAULT_NAMESPACE;
  const selector = namespaceSelector(namespaceScope(namespace));
  const jobsOrQueued: MatchCondition[] = [{ name: "training-jobs-or-queued", expression: JOBS_OR_QUEUED_EXPRESSION }];
  const trainingPods: MatchCondition[] = [{ name: "training-pods-only", expression: trainingPodExpression(policy, { bounded: true }) }];
  const gpuWorkloads: MatchCondition[] = [{ name: "training-jobs-or-gpu-workloads", expression: gpuWorkloadExpression(policy) }];
  // Reduced mode: the pods the exported MutatingAdmissionPolicy outfits do not reach /mutate/pods (src/manifests/map.ts).
  const podMutation: MatchCondition[] =
    policy.webhook.podMutation === "reduced" ? [...trainingPods, { name: REDUCED_MODE_CONDITION, expression: reducedModeExpression(policy) }] : trainingPods;
  const hook = (name: string, path: string, failurePolicy: "Ignore" | "Fail", rules: RuleWithOperations[], extra: Partial<RenderedWebhook> = {}): RenderedWebhook => ({
    name,
    admissionReviewVersions: ["v1"],
    sideEffects: extra.sideEffects ?? "None",
    ...(extra.reinvocationPolicy ? { reinvocationPolicy: extra.reinvocationPolicy } : {}),
    timeoutSeconds: policy.webhook.timeoutSeconds,
    failurePolicy,
    matchPolicy: "Equivalent",
    clientConfig: { service: { name: WEBHOOK_SERVICE_NAME, namespace, path, port: 443 }, ...(opts.caBundle ? { caBundle: opts.caBundle } : {}) },
    rules,
    namespaceSelector: structuredClone(selector),
    ...(extra.matchConditions ? { matchConditions: structuredClone(extra.matchConditions) } : {}),
  });
  const mutating: RenderedConfiguration = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: WEBHOOK_CONFIGURATION_NAME },
    webhooks: [
      hook("pods.mutate.quartermaster.dev", "/mutate/pods", "Ignore", [podRule(["CREATE"], "pods")], { reinvocationPolicy: "IfNeeded", matchConditions: podMutation }),
      hook("jobs.mutate.quartermaster.dev", "/mutate/jobs", "Ignore", [...jobRules(policy, ["CREATE"]), ...workloadRules(["CREATE"])], {
        reinvocationPolicy: "IfNeeded",
        matchConditions: jobsOrQueued,
      }),
    ],
  };
  const validating: RenderedConfiguration = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: { name: WEBHOOK_CONFIGURATION_NAME },
    webhooks: [
      hook("pods.validate.quartermaster.dev", "/validate/pods", "Fail", [podRule(["CREATE"], "pods"), podRule(["UPDATE"], "pods/resize")], { matchConditions: trainingPods }),
      hook(
        "jobs.validate.quartermaster.dev",
        "/validate/jobs",
        "Fail",
        [...jobRules(policy, ["CREATE", "UPDATE"]), ...jobRules(policy, ["UPDATE"], "/scale"), ...workloadRules(["CREATE", "UPDATE"]), ...runtimeRules(policy)],
        { sideEffects: "NoneOnDryRun", matchConditions: gpuWorkloads },
      ),
      ...(policy.gpu.deviceClasses.length > 0 ? [hook("claims.validate.quartermaster.dev", "/validate/claims", "Fail", [claimRule])] : []),
    ],
  };
  return [mutating, validating];
}

/** The comment above each webhook in the YAML: the reason for its failure policy. */
const WEBHOOK_COMMENTS: Readonly<Record<string, string>> = {
  "pods.mutate.quartermaster.dev":
    " Ignore: if Quartermaster is down, training pods are still created, without their cluster spec and GPU\n" +
    " placement, rather than every training pod being refused (the validating webhooks fail closed, so limits\n" +
    " still hold). IfNeeded: the mutations are idempotent and a later mutating webhook may change the pod.",
  "jobs.mutate.quartermaster.dev":
    " Ignore: fills the policy's run-policy defaults (TTL, cleanPodPolicy, deadlines) where a new job leaves them\n" +
    " unset (a job created during an outage keeps upstream's defaults), and outfits the pod templates of jobs,\n" +
    " batch Jobs and JobSets queued in Kueue. IfNeeded: Kueue's webhook may add the queue name after this one ran.",
  "pods.validate.quartermaster.dev":
    " Fail: platform limits are the point; a pod that skipped them could hold GPUs it may not have. Also\n" +
    " in-place resizes (pods/resize), so cpu/memory limits cannot be raised after creation.",
  "jobs.validate.quartermaster.dev":
    " Fail, as for pods: a job over its limits must not start, nor be scaled past them (the /scale subresource).\n" +
    " Batch Jobs and JobSets too, only those whose pod templates ask for GPUs (matchConditions), with the GPU rules;\n" +
    " and Trainer runtimes whose pods would ask for more GPUs than a pod may have (CREATE and UPDATE).\n" +
    " NoneOnDryRun: when it refuses Kueue's admission of a job it writes an Event on the job, never on a dry run.",
  "claims.validate.quartermaster.dev":
    " Fail, as for pods: a ResourceClaim or ResourceClaimTemplate (DRA, resource.k8s.io/v1) asking for more GPU\n" +
    " devices than a pod may have, or for accelerators the namespace may not use, is refused when it is created.",
};

export const GENERATED_HEADER = [
  " Generated by `npm run generate` from the built-in policy (src/manifests/webhooks.ts); do not edit.",
  " For another policy: quartermaster manifests webhooks --policy F [--namespace N].",
  " The admission webhooks, scoped so Quartermaster is never the reason a cluster stops:",
  " - only namespaces that opt in with the label quartermaster.dev/enabled=true, and never kube-system,",
  "   kube-public, kube-node-lease or Quartermaster's own namespace, whatever their labels say (src/core/scope.ts,",
  "   the same scope the reconciler writes in);",
  " - pod webhooks see only training pods (matchConditions): pods with their job's labels (Kubeflow's",
  "   job-name label, caffe2-operator's group_name and caffe2_job_key) or a request for one of the policy's",
  "   GPU resources (gpu.resources patterns), or one naming ResourceClaims (DRA; the webhook reads them);",
  " - jobs.validate sees every training job, and only the batch Jobs and JobSets whose pod templates ask for GPUs",
  "   the same way (matchConditions): it holds them to the per-job GPU cap too;",
  " - a timeout of a few seconds (policy webhook.timeoutSeconds); the apiserver's default of 10 s would stall",
  "   every pod create on an outage.",
  " The caBundle is filled in by cert-manager's CA injector or `quartermaster certs install`.",
].join("\n");

/** The two configurations as one YAML stream with explanatory comments (the committed manifest's text). */
export async function webhookConfigurationsYaml(policy: WebhookPolicy, opts: RenderOptions = {}): Promise<string> {
  const { isMap, isSeq } = await import("yaml");
  // Each webhook gets the comment that says why it is set up as it is.
  const decorate = (doc: Document): void => {
    const hooks = doc.get("webhooks", true);
    if (!isSeq(hooks)) return;
    for (const item of hooks.items) {
      if (!isMap(item)) continue;
      const comment = WEBHOOK_COMMENTS[String(item.get("name"))];
      if (comment) item.commentBefore = comment;
    }
  };
  return yamlStream(renderWebhookConfigurations(policy, opts), GENERATED_HEADER, { literalBlocks: true, noAliases: true, decorate });
}

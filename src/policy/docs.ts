/**
 * @module
 * docs/policy.md, generated from the JSON Schema in src/policy/schema.ts (`npm run docs:policy`): every
 * field with its type, constraints, default and meaning. Types, constraints and defaults come from the
 * schema; the meanings come from the schema's `description` where it has one, else from DESCRIPTIONS
 * below. A field without a meaning stops the generator, and test/unit/policy/policy-docs.test.ts regenerates the
 * page and fails when the committed one differs, so the page cannot drift from the schema.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { policyTestingDocs } from "./test-docs.js";
import { REMOVED_FIELDS, defaultPolicy } from "./load.js";
import { RULES } from "./rules.js";
import { POLICY_SCHEMA } from "./schema.js";

type Schema = {
  type?: string;
  enum?: readonly unknown[];
  pattern?: string;
  minLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  default?: unknown;
  description?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  required?: readonly string[];
};

/** What each field means, by path (`a.b`, `a[].b` for array items). */
export const DESCRIPTIONS: Record<string, string> = {
  jobKinds: "The training-job kinds the webhooks and the reconciler know. Replacing the list replaces all seven built-in kinds.",
  "jobKinds[].kind": "The kind, e.g. `TFJob`.",
  "jobKinds[].group": "Its API group, e.g. `kubeflow.org`.",
  "jobKinds[].version": "Its API version, e.g. `v1`.",
  "jobKinds[].plural": "Its resource name, e.g. `tfjobs`; the webhook and reconciler RBAC must name it.",
  "jobKinds[].framework": "Which framework's cluster spec, labels and replica rules apply.",
  "jobKinds[].controller":
    "Who runs the kind's jobs: `operator` (its own operator creates the pods and writes the status; Quartermaster only adopts, cleans up and adds Services) or `quartermaster` (the reconciler is the job controller: pods and Services per replica, restarts, backoffLimit, activeDeadlineSeconds, suspend, status and Events, as the Kubeflow common job controller; see docs/architecture.md). Unset: `quartermaster` for the `caffe2` framework (caffe2-operator is archived), `operator` for every other. Never set `quartermaster` for a kind whose operator runs: both would create and delete the same pods.",
  clusterSpec: "Injection of the distributed cluster spec (TF_CONFIG, MASTER_ADDR, ...) into training pods.",
  "clusterSpec.enabled": "Inject the cluster spec at all.",
  "clusterSpec.clusterDomain": "Appended to service host names (e.g. `cluster.local`); empty keeps the training operator's short names.",
  "clusterSpec.onJobLookupFailure":
    "When the pod's job or a TrainJob's runtime cannot be read (an error or a timeout, not an absence): `warn` admits without what could not be read (no cluster spec) and says why, `deny` refuses it (a CREATE; an UPDATE only warns). A ResourceClaim or ResourceClaimTemplate that cannot be read is not decided here but by rule `gpu-unknown` (refused under a GPU cap, a warning without one).",
  "clusterSpec.jobLookupTimeoutMs": "Upper bound on reading the pod's job during admission (the webhook timeout is a few seconds).",
  "clusterSpec.jobCacheTtlMs":
    "How long a job read is reused for the job's other replicas, never longer; 0 reads every time. A copy read past half of it is re-read in the background (refresh-ahead), so the pods of a launch seldom wait on a read. A copy of another uid than the pod's controller's (the job deleted and made again under its name) is read again at once.",
  gpu: "GPU resources: which resource names are GPUs and what each brings.",
  "gpu.resourceName": "The resource a bare `gpu` request or limit is renamed to.",
  "gpu.resources":
    "GPU resource name patterns (`*` matches any run of characters); a pod requesting one gets a NoSchedule toleration for it. The webhook configurations' `matchConditions` are rendered from these patterns (`quartermaster manifests webhooks --policy F`), so a pattern added here reaches the webhooks once that render is applied; `doctor` warns while it is not.",
  "gpu.resources[].pattern": "A resource name or pattern, e.g. `nvidia.com/mig-*`.",
  "gpu.resources[].tolerations": "Extra tolerations for pods requesting a matching resource (MIG slices tolerate the `nvidia.com/gpu` taint by default).",
  "gpu.deviceClasses":
    "DeviceClasses whose devices are GPUs, for GPUs asked for through Dynamic Resource Allocation (`resource.k8s.io/v1`, Kubernetes 1.34+): a pod's ResourceClaims and ResourceClaimTemplates of these classes count as the resource each maps to, so every cap, allow-list, toleration and placement applies to them as to the extended resource. " +
    "A request counts `exactly.count` devices (default 1); `allocationMode: All` counts the largest node's devices of the class, and is refused (`gpu-unknown`) where a GPU cap applies and no capacity is known; of `firstAvailable` alternatives the largest counts toward the pod's and job's totals, and each alternative is held on its own to the per-container cap of its resource and to the allow-lists (the scheduler takes the first that fits, not the largest). " +
    "Products and MIG profiles that a request's CEL selectors pin (`device.attributes['gpu.nvidia.com'].productName == '…'`, `['productName']`, `.profile in [...]`) are checked against `allowedAccelerators` / `allowedPartitions` (a `productName` with spaces matches the label value with dashes); a selector that tests them any other way, or reads an attribute through an index that is not a name, is refused while a list is set. A request that pins no product is not refused, as a pod asking for `nvidia.com/gpu` with no accelerator annotation or node selection is not. " +
    "Under a GPU cap (a per-container GPU cap, `limits.pod.gpus` or `limits.job.gpus`) a pod's or job's claim that does not exist yet or could not be read, and a request of a DeviceClass not listed here whose name looks like a GPU's (`vfio.gpu.nvidia.com`, `gpu.example.com`) or whose object, which the webhooks read (`get` on `deviceclasses`), may select GPUs (a CEL selector naming a GPU driver or attribute domain such as `gpu.nvidia.com`, no selectors at all, a GPU `extendedResourceName`) or does not exist or cannot be read, are refused with rule `gpu-unknown` at their field: create the claim or template before the pod or job, and list every GPU class here; without a GPU cap an absent or unreadable claim is a warning. `quartermaster doctor` lists the cluster's GPU-looking DeviceClasses that are not here. " +
    "Claims and templates are also checked when they are created (`/validate/claims`). Empty: claims are not read and pods naming them are not sent to the webhooks for it.",
  "gpu.deviceClasses[].name": "The DeviceClass name, e.g. `gpu.nvidia.com` (NVIDIA's DRA driver), `mig.nvidia.com`, `gpu.amd.com` (AMD's).",
  "gpu.deviceClasses[].extendedResourceName":
    "The extended-resource name the cluster's DeviceClass serves (its `spec.extendedResourceName`, DRA's extended-resource support), when it sets one that is not already in `gpu.resources`: a container asking for it counts as this class's resource. Every class's implicit name, `deviceclass.resource.kubernetes.io/<class>`, counts so without being listed. `quartermaster doctor` compares both with the cluster's DeviceClasses.",
  "gpu.deviceClasses[].resourceName":
    "The resource name its devices count as, e.g. `nvidia.com/gpu`; `{profile}` is replaced by the MIG profile the request's selectors pin (`nvidia.com/mig-{profile}` → `nvidia.com/mig-1g.10gb`), or `any` when none is pinned.",
  accelerator:
    "Placement from the `quartermaster.dev/accelerator` and `quartermaster.dev/gpu-partition` annotations, for pods with a GPU limit: required node affinity, ANDed into each of the pod's own required terms.\n\n" +
    "A partition is a MIG profile (`1g.5gb`) and matches the labels NVIDIA's GPU feature discovery (part of the GPU operator) sets, as ORed terms, one per MIG strategy: " +
    "**mixed**, `nvidia.com/mig-<profile>.count Gt 0` (with the accelerator, also `nodeLabel In [<accelerator>]`); " +
    "**single**, `nvidia.com/mig.strategy In [single]` and `nvidia.com/gpu.product In [<product>-MIG-<profile>]`, for the accelerator's product or else each of `migProducts` (no such term when neither names one). " +
    "The pod's MIG resource decides which term can fit: `nvidia.com/mig-<profile>` exists only on mixed-strategy nodes, a single-strategy node offers its slices as `nvidia.com/gpu`. " +
    "`none` matches nodes whose GPUs are not MIG-enabled: `nvidia.com/gpu.replicas NotIn [0]` (GFD gives MIG-enabled GPUs 0 replicas, except under the single strategy) and `nvidia.com/gpu.slices.gi DoesNotExist` (set for the single strategy's MIG devices); " +
    "`nvidia.com/mig.capable` and `nvidia.com/mig.strategy` are set on MIG-disabled A100s too, so they cannot tell. " +
    "`partitionNodeLabel` replaces all of this with one label of your own (e.g. GKE's `cloud.google.com/gke-gpu-partition-size`).\n\n" +
    "Why these labels: the defaults use only labels the NVIDIA GPU operator puts on every GPU node it manages, through GPU feature discovery (NVIDIA/k8s-device-plugin, `internal/lm`), whatever the cloud: " +
    "`nvidia.com/gpu.product` (e.g. `A100-SXM4-40GB`, `NVIDIA-H100-80GB-HBM3`), `nvidia.com/gpu.replicas`, `nvidia.com/mig.strategy`, `nvidia.com/mig-<profile>.count` (mixed strategy) and `nvidia.com/gpu.slices.gi` (single strategy's MIG devices). " +
    "Cloud-specific labels (`cloud.google.com/gke-accelerator`, `node.kubernetes.io/instance-type`) name node pools, not GPUs, and are missing on-premises. " +
    "`test/e2e/placement.test.ts` proves these defaults with the real kube-scheduler against nodes labelled as GFD labels them (`test/fixtures/nodes.ts`, written from GFD, not from this policy): a default changed to a label no real node carries leaves its pods unschedulable.",
  "accelerator.nodeLabel": "Node label the accelerator annotation becomes a required node affinity on.",
  "accelerator.partitionNodeLabel":
    "One node label whose value is the partition: the GPU-partition annotation becomes `<label> In [<value>]` (`none`: `DoesNotExist`). Unset, partitions match the labels NVIDIA's GPU feature discovery sets (above). `nvidia.com/mig.config` (the default of earlier versions) holds MIG configuration names such as `all-1g.5gb`, not profiles.",
  "accelerator.migProducts":
    "Base GPU products (as in `nvidia.com/gpu.product`, e.g. `A100-SXM4-40GB`) whose single-strategy MIG nodes a partition may land on (`<product>-MIG-<profile>`); empty, a partition without an accelerator matches mixed-strategy nodes only.",
  "accelerator.addTolerations":
    "Also add `{key: <label>, operator: Equal, value, effect: NoSchedule}` tolerations for the chosen accelerator and, with `partitionNodeLabel`, partition.",
  "accelerator.unpartitionedRequirement":
    "Node requirement for `quartermaster.dev/gpu-partition: none`; unset, `partitionNodeLabel` must not exist on the node, or (no `partitionNodeLabel`) the node's GPUs are not MIG-enabled: `nvidia.com/gpu.replicas NotIn [0]` and `nvidia.com/gpu.slices.gi DoesNotExist`.",
  interruptible: "Placement from the `quartermaster.dev/interruptible` annotation.",
  "interruptible.tolerations": 'Tolerations added to pods annotated `quartermaster.dev/interruptible: "true"`.',
  "interruptible.nodeRequirement":
    'Required node affinity for interruptible pods (e.g. spot nodes). There is no default: spot labels differ per cloud (AKS `kubernetes.azure.com/scalesetpriority: spot`, which is also its spot taint; GKE `cloud.google.com/gke-spot: "true"`; EKS `eks.amazonaws.com/capacityType: SPOT`; Karpenter `karpenter.sh/capacity-type: spot`).',
  "interruptible.nonInterruptibleNodeRequirement": "Required node affinity for every other training pod (e.g. keep them off spot nodes).",
  resources: "Resource defaults for training containers; nothing a user set is changed.",
  "resources.defaultRequests": "cpu and memory requests for containers that set neither the request nor a limit (a limit is copied to the request first).",
  "resources.defaultRequests.cpu": "Default cpu request.",
  "resources.defaultRequests.memory": "Default memory request.",
  "resources.limitsFromRequests": "Resources whose limit is set equal to the request when a container has none (e.g. `memory`).",
  limits: "Platform limits the validating webhooks enforce. An unset limit is not enforced.",
  "limits.container": "Per-container maximums (requests and limits).",
  "limits.container.cpu": "Largest cpu per container.",
  "limits.container.memory": "Largest memory per container.",
  "limits.container.gpus": 'Largest count per GPU resource name or pattern per container, e.g. `{"nvidia.com/gpu": 8}`.',
  "limits.pod": "Per-pod maximums.",
  "limits.pod.gpus": "Largest effective GPU request of a pod (containers plus native sidecars, or the largest init container).",
  "limits.job": "Per-job maximums.",
  "limits.job.gpus": "Largest GPU total of a whole job (every replica).",
  "limits.job.replicas": 'Largest replica count per replica type, e.g. `{"Worker": 64}`.',
  "limits.runPolicy": "Rules on a job's `runPolicy`.",
  "limits.runPolicy.requireTtlSecondsAfterFinished": "Refuse jobs without `ttlSecondsAfterFinished`.",
  "limits.runPolicy.maxTtlSecondsAfterFinished": "Largest `ttlSecondsAfterFinished`.",
  "limits.runPolicy.maxActiveDeadlineSeconds": "Largest `activeDeadlineSeconds`.",
  "limits.runPolicy.maxBackoffLimit": "Largest `backoffLimit`.",
  "limits.runPolicy.allowedCleanPodPolicies": "The `cleanPodPolicy` values a job may use.",
  "limits.runPolicy.allowedRestartPolicies": "The replica `restartPolicy` values a job may use.",
  "limits.allowedAccelerators":
    "Accelerators a pod may ask for: the `quartermaster.dev/accelerator` annotation, `spec.nodeSelector[<accelerator.nodeLabel>]` and required node affinity on that label (`In` values; `NotIn`, `Exists`, `Gt`, `Lt` could select any accelerator and are refused). A product value `<product>-MIG-<profile>` or `<product>-SHARED` counts as `<product>`.",
  "limits.allowedPartitions":
    "Partitions a pod may ask for: the `quartermaster.dev/gpu-partition` annotation (`none` included), MIG resources `nvidia.com/mig-<profile>` in requests or limits, and node selection on GFD's `nvidia.com/mig-<profile>.*` labels, `<product>-MIG-<profile>` products or `accelerator.partitionNodeLabel`.",
  jobDefaults:
    "Platform defaults for a training job's `spec.runPolicy`, written into the job by `/mutate/jobs` when it is created, for each field the job leaves unset, with a kubectl warning naming it. Jobs that exist already are never changed, and an update is never defaulted. Caffe2Job has no `runPolicy` and is left alone. Each default must pass `limits.runPolicy` (an invalid pair stops the process at start).",
  "jobDefaults.ttlSecondsAfterFinished":
    "Seconds after a job finished before the reconciler deletes it. Unset, a job without its own TTL is never deleted (upstream's default).",
  "jobDefaults.cleanPodPolicy":
    "Which pods of a finished job the reconciler deletes (`All`, `Running` = Running and Pending, `None`). Unset, a job without its own gets `None` (upstream's default).",
  "jobDefaults.activeDeadlineSeconds": "Seconds a job may run before the training operator fails it.",
  "jobDefaults.backoffLimit": "Retries before the training operator fails a job.",
  namespaces:
    "Per-namespace overrides of `limits` and `jobDefaults`, by namespace name pattern (the AdmissionReview carries no namespace labels); the first match wins, for both sections.",
  "namespaces[].pattern": "Namespace name pattern; `*` matches any run of characters.",
  "namespaces[].limits":
    "The fields of `limits` above, laid over them field by field (a field left out keeps the top-level value; GPU and replica maps are merged).",
  "namespaces[].jobDefaults": "The fields of `jobDefaults` above, laid over them field by field (a field left out keeps the top-level default).",
  enforcement:
    "What a violation does, per rule and per namespace pattern: `deny` refuses the object (the default), `warn` admits it with a kubectl warning naming the rule and the field path, `audit` admits it and records it (a log line, and `quartermaster_policy_violations_total{rule,mode}`, which counts every violation with its mode). " +
    "The mode of a rule in a namespace: the first `namespaces[]` entry whose pattern matches the namespace and that names a mode for the rule (its `rules[rule]`, else its `mode`; an entry saying nothing of the rule is passed over), else `rules[rule]`, else `mode`. " +
    "Rule names are listed under Rules below; an unknown name or an invalid mode is an error at load with its path. `job-scale` and `review-cost` always deny.",
  "enforcement.mode": "The mode of every rule not named elsewhere.",
  "enforcement.rules": "Modes by rule name, cluster-wide, e.g. `{job-gpus: warn}`.",
  "enforcement.namespaces": "Modes by namespace name pattern, searched in order.",
  "enforcement.namespaces[].pattern": "Namespace name pattern; `*` matches any run of characters.",
  "enforcement.namespaces[].mode": "The mode of every rule in matching namespaces, unless `rules` names it.",
  "enforcement.namespaces[].rules": "Modes by rule name in matching namespaces.",
  reconciler: "The reconciler's passes.",
  "reconciler.maxDeletionsPerPass": "At most this many deletions a pass (pods first); the rest wait for later passes.",
  "reconciler.leaseGracePeriodSeconds": "A node whose Lease was last renewed longer ago than this is stale in the device ledger.",
  "reconciler.passLeaseSeconds": "How long the pass Lease holds after its last renewal: a killed pass blocks the next for at most this long.",
  "reconciler.perReplicaServices": "Create a headless Service per replica pod of a running job.",
  "reconciler.events": "Record Kubernetes Events on the job for adoptions, releases and deletions.",
  "reconciler.pendingGpuPodSeconds": "A GPU pod still unscheduled after this long is listed in the device ledger with its reason.",
  "reconciler.ledgerShardBytes": "Largest device-ledger shard (ConfigMap data) in bytes; ConfigMaps stop at 1 MiB.",
  "reconciler.policyReports":
    "Each pass also evaluates the pods and training jobs of every opted-in namespace against the policy and writes one `wgpolicyk8s.io/v1alpha2` PolicyReport per namespace (see Rules below), when that CRD is installed (else one log line, and nothing written). Needs the reconciler's policyreports grant (manifests/base/reconciler-policyreports-rbac.yaml).",
  "reconciler.concurrency": "API calls a reconcile pass keeps in flight while it applies its plan (adoptions, Services, deletions).",
  "reconciler.allowedTemplates":
    "What Quartermaster's job controller (Caffe2Job, and kinds with `controller: quartermaster`) may create from a job's pod templates. It creates pods with its own ServiceAccount, so without this a user allowed to create such jobs but not pods would get any pod Pod Security Admission lets through. A job whose templates ask for more gets no pods or Services, a `TemplateRefused` condition and a Warning Event naming each field; its existing pods are left alone. Fixing the template clears the condition and creation proceeds. hostPath volumes, hostPorts, capabilities and the other Pod Security baseline items stay with Pod Security Admission.",
  "reconciler.allowedTemplates.privileged": "Allow `securityContext.privileged: true` on containers and init containers.",
  "reconciler.allowedTemplates.hostNamespaces": "Allow `hostNetwork`, `hostPID` and `hostIPC`.",
  "reconciler.allowedTemplates.serviceAccounts":
    "ServiceAccounts a template may name (`serviceAccountName`, or the deprecated `serviceAccount`) besides `default`, which is always allowed (as is leaving it unset): `<name>` in any namespace, `<namespace>/<name>` in that namespace only.",
  webhook: "The admission webhooks.",
  "webhook.podMutation":
    "`full`: the pods webhook outfits every training pod. `reduced`: GPU pods that need no lookup are outfitted by the MutatingAdmissionPolicy `quartermaster policy export-map` prints (apply it too), and only pods of a job (cluster spec), pods naming ResourceClaims and wide pods reach the webhook (an extra match condition). `doctor` checks the policy in the cluster against this one.",
  "webhook.timeoutSeconds": "The `timeoutSeconds` the webhook configurations use; the latency histogram's buckets reach up to it and `doctor` warns above it.",
};

/** Fields whose sub-fields are not listed again (their description says where they are). */
const SUMMARIZED = new Set(["namespaces[].limits", "namespaces[].jobDefaults", "enforcement.rules", "enforcement.namespaces[].rules"]);

const TOLERATION_KEYS = "effect,key,operator,tolerationSeconds,value";
const REQUIREMENT_KEYS = "key,operator,values";

export interface FieldDoc {
  path: string;
  type: string;
  default?: unknown;
  required: boolean;
  description?: string;
}

const code = (s: string): string => `\`${s}\``;

/** A named Kubernetes shape the schema reuses (tolerations, node selector requirements). */
function shape(s: Schema): string | undefined {
  if (s.type !== "object" || !s.properties) return undefined;
  const keys = Object.keys(s.properties).sort().join(",");
  if (keys === TOLERATION_KEYS) return "toleration";
  if (keys === REQUIREMENT_KEYS) return "node selector requirement";
  return undefined;
}

function typeOf(s: Schema): string {
  if (s.enum) return s.enum.map((v) => code(JSON.stringify(v).replace(/^"|"$/g, ""))).join(" \\| ");
  const named = shape(s);
  if (named) return `${named} (${Object.keys(s.properties!).join(", ")})`;
  switch (s.type) {
    case "integer":
    case "number":
      return numberType(s, s.type);
    case "string":
      return stringType(s);
    case "boolean":
      return "boolean";
    case "array":
      return arrayType(s);
    case "object":
      return objectType(s);
    default:
      return "any";
  }
}

function numberType(s: Schema, type: string): string {
  if (s.minimum !== undefined && s.maximum !== undefined) return `${type}, ${s.minimum} to ${s.maximum}`;
  if (s.minimum !== undefined) return `${type} ≥ ${s.minimum}`;
  return type;
}

function stringType(s: Schema): string {
  if (s.pattern?.includes("[KMGTPE]i")) return "quantity (`500m`, `4Gi`)";
  if (s.pattern) return `string matching ${code(s.pattern.replace(/\|/g, "\\|"))}`;
  if (s.minLength) return "string, not empty";
  return "string";
}

function arrayType(s: Schema): string {
  const items = s.items ?? {};
  const named = shape(items);
  const of = named ? `${named}s` : items.enum ? typeOf(items) : items.type === "object" ? "objects" : `${items.type ?? "any"}s`;
  return `list of ${of}${s.minItems ? `, at least ${s.minItems}` : ""}`;
}

function objectType(s: Schema): string {
  // A closed map whose every key takes the one same enum: modes by rule name (enforcement.rules).
  if (s.additionalProperties === false && s.properties && Object.keys(s.properties).length > 1) {
    const values = Object.values(s.properties);
    if (values[0]!.enum && values.every((v) => v === values[0])) return `map of rule name → ${typeOf(values[0]!)}`;
  }
  if (s.additionalProperties && typeof s.additionalProperties === "object") return `map of name → ${typeOf(s.additionalProperties)}`;
  return "object";
}

/** Every field of the schema, depth first, in the schema's order. */
export function policyFields(schema: Schema = POLICY_SCHEMA): FieldDoc[] {
  const out: FieldDoc[] = [];
  const walk = (node: Schema, prefix: string): void => {
    for (const [key, sub] of Object.entries(node.properties ?? {})) {
      const path = prefix ? `${prefix}.${key}` : key;
      out.push({
        path,
        type: typeOf(sub),
        default: sub.default,
        required: (node.required ?? []).includes(key),
        description: sub.description ?? DESCRIPTIONS[path],
      });
      if (SUMMARIZED.has(path) || shape(sub)) continue;
      if (sub.type === "object" && sub.properties) walk(sub, path);
      if (sub.type === "array" && sub.items?.type === "object" && !shape(sub.items)) walk(sub.items, `${path}[]`);
    }
  };
  walk(schema, "");
  return out;
}

/** Paths of fields without a description (the generator refuses to write the page while there are any). */
export function undocumented(schema?: Schema): string[] {
  return policyFields(schema)
    .filter((f) => !f.description)
    .map((f) => f.path);
}

const defaultJson = (value: unknown): string => {
  const json = JSON.stringify(value);
  return json.length > 40 ? "see below" : code(json.replace(/\|/g, "\\|"));
};

function defaultCell(f: FieldDoc, fields: readonly FieldDoc[]): string {
  if (f.default !== undefined) return defaultJson(f.default);
  if (f.required) return "required";
  // A field without a default of its own may still come from its parent's default object.
  const dot = f.path.lastIndexOf(".");
  const parent = fields.find((p) => p.path === f.path.slice(0, dot));
  const inherited =
    parent?.default !== null && typeof parent?.default === "object" ? (parent.default as Record<string, unknown>)[f.path.slice(dot + 1)] : undefined;
  return inherited === undefined ? "unset" : `unset; ${defaultJson(inherited)} when ${code(parent!.path)} is left out`;
}

const escapeCell = (s: string): string => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** The whole of docs/policy.md. */
export function renderPolicyDocs(schema?: Schema): string {
  const missing = undocumented(schema);
  if (missing.length > 0) {
    throw new Error(
      `policy fields without a description (add them to DESCRIPTIONS in src/policy/docs.ts, or a description in the schema): ${missing.join(", ")}`,
    );
  }
  const fields = policyFields(schema);
  const sections = fields.filter((f) => !f.path.includes(".") && !f.path.includes("[]"));
  const lines = [...INTRO];
  for (const section of sections) {
    lines.push(`## ${section.path}`, "", section.description!, "");
    lines.push("| field | type | default | meaning |", "|---|---|---|---|");
    for (const f of fields.filter((x) => x.path === section.path || x.path.startsWith(`${section.path}.`) || x.path.startsWith(`${section.path}[]`))) {
      const meaning = f.path === section.path ? "(the section, above)" : escapeCell(f.description!);
      lines.push(`| ${code(f.path)} | ${f.type} | ${defaultCell(f, fields)} | ${meaning} |`);
    }
    lines.push("");
  }
  lines.push(...rulesSection());
  lines.push(...VAP_SECTION);
  lines.push(
    "## The built-in policy",
    "",
    "What `{}` expands to (`quartermaster policy defaults`), including the defaults too long for the tables:",
    "",
    "```yaml",
    stringify(defaultPolicy()).trimEnd(),
    "```",
    "",
  );
  lines.push(policyTestingDocs());
  return lines.join("\n");
}

/** The page's opening: what the policy is, where it lives, how paths, quantities and removed fields read. */
const INTRO: readonly string[] = [
  "# Policy reference",
  "",
  "<!-- Generated by `npm run docs:policy` from the JSON Schema in src/policy/schema.ts (src/policy/docs.ts). Do not edit:",
  "     test/unit/policy/policy-docs.test.ts fails when this page and the schema disagree. -->",
  "",
  "The policy is one YAML or JSON document, checked against the JSON Schema in `src/policy/schema.ts` when",
  "`serve` or `reconcile` starts (an invalid policy stops the process with every error listed) and by",
  "`quartermaster policy check F`. Every field has a default or is optional, so `{}` is a complete policy;",
  "`quartermaster policy defaults` prints the built-in one. Unknown fields are errors.",
  "",
  "In `manifests/base` the policy is `manifests/base/policy.yaml`, shipped as a ConfigMap whose name carries",
  "a hash of its content, so an edit rolls the webhook Deployment.",
  "",
  'Paths: `a.b` is field `b` of object `a`; `a[].b` is field `b` of each item of list `a`. Default "unset"',
  "means the field is optional and the behaviour it controls is off (a limit not enforced, a requirement not",
  "added).",
  "",
  "Quantities (`cpu`, `memory`) follow Kubernetes' grammar (`resource.ParseQuantity` in k8s.io/apimachinery) and",
  "are compared exactly, as whole nano-units, never as floating point. A policy quantity longer than 1,024",
  'characters, above 2^63-1 in magnitude (Kubernetes\' `maxAllowed`; e.g. `cpu: "1e1001"`) or negative is an',
  "error with its path, as is an integer cap above 2^53-1 or a name pattern longer than 1,024 characters; every",
  "error is listed. The same bounds apply to the objects admitted where a limit applies (a per-container cap on",
  "that resource, or a GPU resource, which pod, job and capacity limits sum): a request or limit that is not a",
  "quantity, is too long, out of range or negative is then a violation at its field path; elsewhere the",
  "apiserver alone judges it. GPU counts must be whole numbers;",
  "a replica count, and a run-policy field a cap or requirement applies to (`ttlSecondsAfterFinished`,",
  '`activeDeadlineSeconds`, `backoffLimit`), must be a whole number (`replicas: "3"` is a violation). Name',
  "patterns are matched in time linear in the name.",
  "",
  `Removed fields are refused with what to use instead (see "Upgrading" in \`docs/operations.md\`): ${REMOVED_FIELDS.map((f) => code(`${f.section}.${f.field}`)).join(", ")}.`,
  "",
];

/** The rules table, rolling out a limit, and PolicyReports. */
function rulesSection(): string[] {
  return [
    "## Rules",
    "",
    "Every violation names its rule: in the denial's message (`details.causes[]` carry the field paths), in kubectl",
    "warnings under `warn`, in the `quartermaster_admission_denials_total` and `quartermaster_policy_violations_total`",
    "metrics, in the admission log line, in `quartermaster audit` and in PolicyReports. The names are stable. A rule",
    "whose mode can be set is one of `enforcement.rules`' keys.",
    "",
    "| rule | webhooks | mode settable | checks |",
    "|---|---|---|---|",
    ...RULES.map((r) => `| ${code(r.name)} | ${r.webhooks.join(", ")} | ${r.configurable ? "yes" : "no: always deny"} | ${escapeCell(r.description)} |`),
    "",
    "Rolling out a new limit: add it with its rule in `warn` (users see the warning, nothing is refused), watch",
    '`quartermaster_policy_violations_total{rule="job-gpus",mode="warn"}` and `quartermaster audit` for what',
    "already runs, then `deny` namespace by namespace, then everywhere:",
    "",
    "```yaml",
    "limits: {job: {gpus: 64}}",
    "enforcement:",
    "  rules: {job-gpus: warn}          # step 1: everywhere, a warning",
    "  namespaces:",
    "    - pattern: team-a-*            # step 2: team-a first",
    "      rules: {job-gpus: deny}",
    "    - pattern: sandbox-*           # never refused there, only recorded",
    "      mode: audit",
    "# step 3: remove job-gpus from enforcement.rules: deny is the default",
    "```",
    "",
    "PolicyReports (`reconciler.policyReports`): one `wgpolicyk8s.io/v1alpha2` PolicyReport named `quartermaster` per",
    "opted-in namespace, labelled `app.kubernetes.io/managed-by: quartermaster`, rewritten each pass from that pass's",
    "evaluation of the namespace's pods (not finished ones) and training jobs, as policy-reporter and Kyverno's and",
    "Gatekeeper's users read them: one result per violation (`policy` the webhook, `rule` the rule, `result` `fail` for",
    "`deny` and `audit`, `warn` for `warn`; `properties.field` the field path, `properties.mode` the mode) and one `pass`",
    "per object without any, and the summary's counts. A fixed object's entries are gone at the next pass; a",
    "namespace with nothing left to report loses its report. Reports are written with the field manager",
    "`quartermaster-reconciler`, and a report counts as Quartermaster's when it carries that label or its",
    "`metadata.managedFields` name that manager: only such a report is ever replaced or deleted, and one whose label",
    "a tenant removed is still rewritten (label restored) or deleted. A report named `quartermaster` with neither is",
    "someone else's: left alone, with a warning in the log. `capacity` is not evaluated there (it needs the ledger at",
    "admission time).",
    "",
  ];
}

/** When to judge pods with the exported ValidatingAdmissionPolicy instead of `/validate/pods` (src/manifests/vap.ts). */
const VAP_SECTION = [
  "## The pod limits as a ValidatingAdmissionPolicy",
  "",
  "`quartermaster policy export-vap [--policy F] [--namespace N]` prints the pod-create rules of `/validate/pods` for a",
  "policy as a ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1, **Kubernetes 1.33 or later**:",
  "the CEL uses two-variable comprehensions). The apiserver then judges pod creates itself, in CEL, with the same",
  "scope as the webhooks (opted-in namespaces, training pods) and the same verdicts, field paths and messages",
  "(`N policy violations: <field>: <message>; …`, after the apiserver's own prefix) — checked against the webhook",
  "on a real apiserver over the corpus and hundreds of generated pods (`test/e2e/vap.test.ts`).",
  "`manifests/overlays/validating-admission-policy` installs the one for the built-in policy and leaves the",
  "`/validate/pods` webhook only in-place resizes and the pods the policy does not judge: those wider than the",
  "webhooks' match condition walks (over 64 containers and init containers, or over 32 resource entries in one",
  "container), where the policy's CEL could run past the apiserver's cost limit. Keep the webhook for them when",
  "you install the policy another way (its guard admits those that are no training pods at once).",
  "",
  "Expressed: `limits.container` (cpu, memory, GPU caps by name or pattern, requests and limits), `limits.pod.gpus`",
  "(with init containers and native sidecars), `namespaces[]` overrides of both (first match by name), no",
  "container mixing `nvidia.com/gpu` and MIG slices, counted quantities negative or out of range, and the",
  "webhook's cost bound (`review-cost`, same count and words; the exact rules run only under it, which bounds the",
  "CEL's cost: the apiserver's per-expression limit and per-policy budget are never reached).",
  "",
  "Enforcement modes (`enforcement`, see Rules): the exported policy only denies, and only what the webhook",
  "denies. A rule in `deny` everywhere is expressed as above; one in `warn` or `audit` everywhere is left out; one",
  "whose mode depends on the namespace is checked only in the namespaces where its mode is `deny`, the mode",
  "worked out in CEL from the request's namespace with the enforcement patterns in their order (exact: a",
  "binding's namespace selector could not say it, as a label selector cannot match a glob on names). A denial",
  "counts and lists only the violations that deny, as the webhook's does. `review-cost` always denies.",
  "",
  "Not expressed — keep the webhook for these:",
  "",
  "- the `warn` and `audit` modes of the pod rules: their kubectl warnings, log lines and",
  "  `quartermaster_policy_violations_total` come from the webhook only (the header and stderr list each such rule",
  "  with its mode). No `[Warn]` or `[Audit]` binding is rendered: the apiserver would warn once per policy in its",
  "  own words, not once per violation as `quartermaster: <rule> (warn): <field>: …`, and audit annotations are not",
  "  the webhook's records; keep `/validate/pods` for pod CREATE too if you rely on them;",
  "- `limits.allowedAccelerators` / `allowedPartitions`: with either set, `export-vap` says so on stderr; keep",
  "  `/validate/pods` for pod CREATE too (the overlay as it is would drop the check);",
  "- in-place resizes (`pods/resize`): refused only where they make the pod worse, which needs the old pod; the",
  "  overlay keeps the webhook for them;",
  "- the warnings near a limit (90 %): the policy only denies;",
  "- the job rules (`/validate/jobs`: replicas, job GPUs, run policy, cluster capacity from the device ledger; job",
  "  GPUs and capacity of batch Jobs and JobSets too).",
  "",
  "Fractional extended resources and a request unequal to its limit need no rule: the apiserver's own pod",
  "validation refuses them before any admission.",
  "",
  "When to use it: pod limits then hold while Quartermaster's webhook is down or unreachable (its",
  "`failurePolicy: Fail` would refuse every training pod meanwhile), and a pod create makes no call to it. The",
  "limits are constants in the policy: **export again after every change to the policy** (the webhook reads its",
  "ConfigMap; the ValidatingAdmissionPolicy does not). The work moves into the apiserver: `npm run bench:e2e:vap`",
  "prints its CPU per pod beside the webhook's. A pod that surely breaks no limit (at most 8 containers of at",
  "most 10 resource entries, every value within its cap) is cleared by the match condition in one pass; any",
  "other goes through the exact rules (first: is it a training pod at all), which cost the apiserver a few",
  "milliseconds of CPU. The match condition is kept short because the apiserver, which tracks the CEL cost of",
  "every evaluation, plans the expression anew for each request: its size, not only what it evaluates, is paid",
  "per pod. Past 5 KiB the apiserver drops a policy's message; the denial then says there are too many",
  "violations to list.",
  "",
];

export const POLICY_DOCS_FILE = "docs/policy.md";

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = join(import.meta.dirname, "../..", POLICY_DOCS_FILE);
  writeFileSync(file, renderPolicyDocs());
  console.log(`wrote ${POLICY_DOCS_FILE}`);
}

/**
 * @module
 * The validation rules by their stable names: every violation the validating webhooks report carries one
 * (`Violation.rule`), and the policy's `enforcement` section sets each rule's mode by that name. The names
 * are part of the policy's interface: metrics, logs, kubectl warnings and PolicyReports use them, so a
 * rule is never renamed. docs/policy.md lists them (generated from this table, `npm run docs:policy`).
 */

export type EnforcementMode = "deny" | "warn" | "audit";

export const ENFORCEMENT_MODES: readonly EnforcementMode[] = ["deny", "warn", "audit"];

export interface RuleInfo {
  name: string;
  /** Which webhooks report it. */
  webhooks: ReadonlyArray<"validate-pods" | "validate-jobs">;
  /** What it checks, one sentence for docs/policy.md. */
  description: string;
  /**
   * False for the rules that say the object could not be checked at all: they always deny (validating
   * webhooks fail closed), whatever the policy's enforcement says.
   */
  configurable: boolean;
  /**
   * A rule that starts milder than the policy's `enforcement.mode`: the mode it has when neither `enforcement.rules`
   * nor a namespace entry names it, unless the policy's mode is milder still (a rule whose verdict rests on an
   * estimate, such as the ledger's node shapes, warns until a team chooses to deny).
   */
  defaultMode?: "warn" | "audit";
}

const BOTH = ["validate-pods", "validate-jobs"] as const;
const JOBS = ["validate-jobs"] as const;

export const RULES: readonly RuleInfo[] = [
  {
    name: "container-limits",
    webhooks: BOTH,
    configurable: true,
    description: "Each container's and init container's cpu, memory and GPU requests and limits at most `limits.container`.",
  },
  {
    name: "extended-resources",
    webhooks: BOTH,
    configurable: true,
    description: "Extended resources (GPUs, MIG slices) in whole numbers, with request equal to limit.",
  },
  { name: "gpu-mig-mixing", webhooks: BOTH, configurable: true, description: "No container asks for whole GPUs and MIG slices at once." },
  { name: "pod-gpus", webhooks: BOTH, configurable: true, description: "The pod's effective GPU request at most `limits.pod.gpus`." },
  {
    name: "quantity",
    webhooks: BOTH,
    configurable: true,
    description: "A request or limit a cap applies to is a quantity in range (not too long, not negative).",
  },
  {
    name: "accelerator-allowed",
    webhooks: BOTH,
    configurable: true,
    description:
      "Accelerators and GPU partitions asked for (annotations, node selection, MIG resources) among `limits.allowedAccelerators` / `allowedPartitions`.",
  },
  {
    name: "job-name",
    webhooks: JOBS,
    configurable: true,
    description: "The job name is a DNS-1035 label and every pod name `<job>-<type>-<index>` fits in 63 characters.",
  },
  {
    name: "job-shape",
    webhooks: JOBS,
    configurable: true,
    description: "Replica specs with containers, one named as the framework expects, and each framework's replica rules.",
  },
  { name: "job-replicas", webhooks: JOBS, configurable: true, description: "Replicas per replica type whole numbers, at most `limits.job.replicas`." },
  {
    name: "job-replica-ceiling",
    webhooks: JOBS,
    configurable: false,
    description:
      "Replicas summed over replica types at most 10000 per job (`MAX_JOB_REPLICAS`), whatever the policy says: a hard ceiling (upstream has none). Always denies.",
  },
  {
    name: "job-gpus",
    webhooks: BOTH,
    configurable: true,
    description:
      "Replicas × GPUs per pod, summed over replica types, at most `limits.job.gpus`; for a batch Job or JobSet that asks for GPUs, the pods it runs at once (a Job's parallelism bounded by completions; a JobSet's replicas × each Job's) × GPUs per pod. Also at the CREATE of a pod that names ResourceClaims and is made by a job (its controller: a training job, a batch Job, a JobSet's Job): the job judged again with its claims and claim templates read as they are now, so a template deleted and created again asking more after the job's admission cannot pass the cap through the pods made from it (refused at the pod's `spec.resourceClaims`; its job unreadable: `gpu-unknown`). Stricter than judging the job once: a DRA job over a `job.gpus` lowered since its admission gets no new pods.",
  },
  {
    name: "run-policy",
    webhooks: JOBS,
    configurable: true,
    description:
      "The job's `runPolicy` and restart policies within `limits.runPolicy`; for kinds Quartermaster runs (Caffe2Job), also readable by its job controller.",
  },
  {
    name: "capacity",
    webhooks: JOBS,
    configurable: true,
    description: "The job asks for no more GPUs than the whole cluster has (the device ledger's totals).",
  },
  {
    name: "no-node-shape",
    webhooks: JOBS,
    configurable: true,
    defaultMode: "warn",
    description:
      "A pod of the job asks for more of a GPU resource than the one node with the most of it offers (the device ledger's largest healthy node), so it could never be scheduled. Skipped while the ledger is missing or older than 15 minutes. `warn` unless set.",
  },
  {
    name: "queue-capacity",
    webhooks: JOBS,
    configurable: true,
    description:
      "At CREATE, a job queued in Kueue (`kueue.x-k8s.io/queue-name`) asks for no GPUs its ClusterQueue can never admit: a GPU resource the queue has no quota for, a replica no flavor fits, a replica over every fitting flavor's nominalQuota + borrowingLimit, or the job over their sum. A queue or flavor that cannot be read is a warning, never a refusal.",
  },
  {
    name: "job-scale",
    webhooks: JOBS,
    configurable: false,
    description:
      "A scaling (`scale` subresource) that cannot be checked: no known scale subresource, a replica count that is not a whole number, the job unreadable, or a Scale of an older version of the job than the current one (denied with 409 Conflict, so the client retries). Always denies.",
  },
  {
    name: "job-runtime",
    webhooks: JOBS,
    configurable: false,
    description:
      "A TrainJob whose runtime (`spec.runtimeRef`) cannot be read while `clusterSpec.onJobLookupFailure` is `deny` (with `warn` it is checked on its own numNodes × resourcesPerNode, with a warning). Always denies.",
  },
  {
    name: "gpu-unknown",
    webhooks: BOTH,
    configurable: true,
    description:
      "Under a GPU cap, what cannot be counted is refused at its field, never counted as nothing: a ResourceClaim or ResourceClaimTemplate not found or not readable, a DRA request whose device count nothing bounds, a GPU-looking resource name or DeviceClass the policy does not list, a DeviceClass the policy does not list whose object (read under a GPU cap) may select GPUs (a selector naming a GPU driver or attribute domain, no selectors at all, a GPU `extendedResourceName`) or that does not exist or cannot be read, a container setting a vendor's visible-devices variable (`NVIDIA_VISIBLE_DEVICES`, `AMD_VISIBLE_DEVICES`) to anything but a value that exposes no device (`void`, `none`, empty) or from a `valueFrom` (the container runtime would give it those GPUs whatever its resources say; an image's `ENV` and `envFrom` are not in the pod spec: set the NVIDIA Container Toolkit's `accept-nvidia-visible-devices-envvar-when-unprivileged = false` on GPU nodes, as the GPU Operator does, to close those), a TrainJob runtime patch Trainer v2.3.0 cannot hold or a patch field it lacks that would change GPUs or pod counts. Set it to `warn` to admit such objects counted without the unknown part.",
  },
  {
    name: "review-cost",
    webhooks: BOTH,
    configurable: false,
    description:
      "An object too large to check within the cost bound (a TrainJob priced with its runtime's templates), or a TrainJob with more runtime patches than Trainer's CRD admits (16). Always denies.",
  },
];

export const RULE_NAMES: readonly string[] = RULES.map((r) => r.name);
export const CONFIGURABLE_RULES: readonly string[] = RULES.filter((r) => r.configurable).map((r) => r.name);

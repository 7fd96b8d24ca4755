/**
 * @module
 * The policy document, as the rest of the code sees it after schema validation and defaults
 * (`src/policy/schema.ts` is the JSON Schema; `test/unit/policy/policy.test.ts` keeps the two in step).
 */

import type { EnforcementMode } from "./rules.js";
import { controllerOf, type KindShape } from "../kinds/index.js";

export type { EnforcementMode } from "./rules.js";

export type { Framework } from "../kinds/index.js";

/** A training-job kind the webhooks and the reconciler know. */
export interface JobKind {
  kind: string;
  group: string;
  version: string;
  plural: string;
  /** One of the frameworks of the kinds registry (`src/kinds/index.ts`): it says the kind's shape. */
  framework: string;
  /**
   * Who creates the job's pods and Services and writes its status: its operator, or Quartermaster's job
   * controller (`src/reconcile/job-controller.ts`) for kinds that have none. Unset: Quartermaster for
   * Caffe2Job (caffe2-operator is archived), the operator for every other framework (the shape's
   * `defaultController`, `src/kinds/`).
   */
  controller?: "operator" | "quartermaster";
}

/** Whether Quartermaster is the controller of `kind`'s jobs (see {@link JobKind.controller}). */
export function quartermasterControls(kind: JobKind, shapes?: readonly KindShape[]): boolean {
  return controllerOf(kind, shapes) === "quartermaster";
}

export interface Toleration {
  key?: string;
  operator?: "Exists" | "Equal";
  value?: string;
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  tolerationSeconds?: number;
}

export interface NodeSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  values?: string[];
}

export type { GpuDeviceClass } from "../core/dra.js";
import type { GpuDeviceClass } from "../core/dra.js";

/** A GPU resource name pattern (`*` matches any run of characters) and the extra tolerations it brings. */
export interface GpuResource {
  pattern: string;
  tolerations: Toleration[];
}

export interface ResourceLimits {
  cpu?: string;
  memory?: string;
  /** Maximum per GPU resource name (or pattern), e.g. `{"nvidia.com/gpu": 8}`. */
  gpus?: Record<string, number>;
}

export interface RunPolicyLimits {
  requireTtlSecondsAfterFinished?: boolean;
  maxTtlSecondsAfterFinished?: number;
  maxActiveDeadlineSeconds?: number;
  maxBackoffLimit?: number;
  allowedCleanPodPolicies?: CleanPodPolicy[];
  allowedRestartPolicies?: Array<"Always" | "OnFailure" | "Never" | "ExitCode">;
}

export interface Limits {
  container: ResourceLimits;
  pod: { gpus?: number };
  job: { gpus?: number; replicas?: Record<string, number> };
  runPolicy: RunPolicyLimits;
  allowedAccelerators?: string[];
  allowedPartitions?: string[];
}

export type CleanPodPolicy = "All" | "Running" | "None";

/**
 * Platform defaults for a job's `spec.runPolicy`, filled in at admission (`/mutate/jobs`, CREATE only) where
 * the job leaves the field unset. An unset default changes nothing.
 */
export interface JobDefaults {
  ttlSecondsAfterFinished?: number;
  cleanPodPolicy?: CleanPodPolicy;
  activeDeadlineSeconds?: number;
  backoffLimit?: number;
}

export interface NamespaceOverride {
  /** Namespace name pattern; `*` matches any run of characters. First match wins. */
  pattern: string;
  /** Laid over `limits` (`{}` when the entry only overrides job defaults). */
  limits: Partial<Limits>;
  /** Laid over `jobDefaults`, field by field. */
  jobDefaults?: JobDefaults;
}

/** Modes by rule name (src/policy/rules.ts); a rule left out takes the enclosing mode. */
export type RuleModes = Partial<Record<string, EnforcementMode>>;

export interface EnforcementOverride {
  /** Namespace name pattern; `*` matches any run of characters. */
  pattern: string;
  /** The mode of every configurable rule in matching namespaces, unless `rules` names the rule. */
  mode?: EnforcementMode;
  rules?: RuleModes;
}

/**
 * How violations are enforced: `deny` refuses the object, `warn` admits it with a kubectl warning naming the
 * rule and field, `audit` admits it and records the violation (log line, metric). See src/validate/enforcement.ts.
 */
export interface Enforcement {
  mode: EnforcementMode;
  rules: RuleModes;
  namespaces: EnforcementOverride[];
}

/**
 * What the job controller may create from a job's pod templates (`src/reconcile/template-guard.ts`): a job
 * whose templates ask for more gets no pods and a `TemplateRefused` condition.
 */
export interface AllowedTemplates {
  /** Privileged containers and init containers. */
  privileged: boolean;
  /** hostNetwork, hostPID, hostIPC. */
  hostNamespaces: boolean;
  /** ServiceAccounts besides `default`: `<name>` in any namespace, `<namespace>/<name>` in that one. */
  serviceAccounts: readonly string[];
}

export interface Policy {
  jobKinds: JobKind[];
  /**
   * The kinds registry the policy's kinds are looked up in; absent: the built-in one (`KIND_SHAPES`,
   * `src/kinds/index.ts`). Set by code only (the schema has no such field, a policy file cannot), to try a shape
   * that is not built in (test/unit/kinds/kind-registry.test.ts).
   */
  kindShapes?: readonly KindShape[];
  clusterSpec: {
    enabled: boolean;
    /** Appended to service host names, e.g. `cluster.local`; empty keeps upstream's short names. */
    clusterDomain: string;
    /** What to do when the pod's job cannot be read: admit without a cluster spec (warn) or deny. */
    onJobLookupFailure: "warn" | "deny";
    jobLookupTimeoutMs: number;
    jobCacheTtlMs: number;
  };
  gpu: {
    /** The resource that a bare `gpu` request is renamed to. */
    resourceName: string;
    resources: GpuResource[];
    /**
     * DeviceClasses whose devices are GPUs (Dynamic Resource Allocation), each with the resource name its devices
     * count as; `{profile}` in the name takes the MIG profile a request's selectors pin (src/core/dra.ts).
     */
    deviceClasses: GpuDeviceClass[];
  };
  accelerator: {
    nodeLabel: string;
    /**
     * One node label whose value is the partition (`<label> In [<profile>]`; `none`: DoesNotExist). Unset,
     * partitions match the labels of NVIDIA's GPU feature discovery (see src/mutate/accelerator.ts).
     */
    partitionNodeLabel?: string;
    /** Base products (e.g. `A100-SXM4-40GB`) whose single-strategy MIG product labels a partition may match. */
    migProducts: string[];
    /** Also add `{key: label, operator: Equal, value, effect: NoSchedule}` tolerations for the accelerator (and, with partitionNodeLabel, the partition). */
    addTolerations: boolean;
    unpartitionedRequirement?: NodeSelectorRequirement;
  };
  interruptible: {
    tolerations: Toleration[];
    nodeRequirement?: NodeSelectorRequirement;
    nonInterruptibleNodeRequirement?: NodeSelectorRequirement;
  };
  resources: {
    defaultRequests: { cpu?: string; memory?: string };
    /** Set limits equal to requests for these resources when a container has none. */
    limitsFromRequests: string[];
  };
  limits: Limits;
  jobDefaults: JobDefaults;
  namespaces: NamespaceOverride[];
  enforcement: Enforcement;
  reconciler: {
    maxDeletionsPerPass: number;
    /** Node Lease staleness (device ledger). */
    leaseGracePeriodSeconds: number;
    /** How long the reconciler's own Lease holds after its last renewal; a killed pass blocks others this long at most. */
    passLeaseSeconds: number;
    perReplicaServices: boolean;
    /** Kubernetes Events on the job for adoptions, releases and deletions. */
    events: boolean;
    /** A GPU pod still unscheduled after this long is listed in the device ledger with its reason. */
    pendingGpuPodSeconds: number;
    /** Largest ledger shard (ConfigMap data) in bytes. */
    ledgerShardBytes: number;
    /** API calls a pass keeps in flight when it applies its plan. */
    concurrency: number;
    /** Write a PolicyReport per opted-in namespace each pass, where the wgpolicyk8s.io CRD is installed. */
    policyReports: boolean;
    /** What the job controller may create from a job's pod templates. */
    allowedTemplates: AllowedTemplates;
  };
  webhook: {
    /** The timeoutSeconds the webhook configurations use; metrics buckets reach up to it. */
    timeoutSeconds: number;
    /**
     * `full`: /mutate/pods outfits every training pod. `reduced`: the pods the exported MutatingAdmissionPolicy
     * outfits (`policy export-map`) never reach it; it keeps pods of a job (cluster spec), pods naming
     * ResourceClaims and wide pods (src/manifests/map.ts reducedModeExpression).
     */
    podMutation: "full" | "reduced";
  };
}

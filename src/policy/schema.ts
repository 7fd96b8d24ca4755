/**
 * @module
 * JSON Schema of the policy document. Defaults live here (ajv `useDefaults`), so a missing section means
 * the built-in behaviour and `{}` is a complete policy.
 */

import { frameworkNames } from "../kinds/index.js";
import { defaultDeviceClasses, defaultGpuResources } from "../vendors/index.js";
import { CONFIGURABLE_RULES, ENFORCEMENT_MODES } from "./rules.js";

const toleration = {
  type: "object",
  additionalProperties: false,
  properties: {
    key: { type: "string" },
    operator: { enum: ["Exists", "Equal"] },
    value: { type: "string" },
    effect: { enum: ["NoSchedule", "PreferNoSchedule", "NoExecute"] },
    tolerationSeconds: { type: "integer" },
  },
};

const nodeSelectorRequirement = {
  type: "object",
  additionalProperties: false,
  required: ["key", "operator"],
  properties: {
    key: { type: "string", minLength: 1 },
    operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] },
    values: { type: "array", items: { type: "string" } },
  },
};

/** A Kubernetes quantity (`500m`, `0.5Gi`, `1e3`); the exact grammar is checked by the quantity parser. */
const quantity = { type: "string", pattern: "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$" };
const positiveInt = { type: "integer", minimum: 0 };
const gpuCounts = { type: "object", additionalProperties: positiveInt };

const resourceLimits = {
  type: "object",
  additionalProperties: false,
  properties: { cpu: quantity, memory: quantity, gpus: gpuCounts },
};

const limitsProperties = {
  container: resourceLimits,
  pod: { type: "object", additionalProperties: false, properties: { gpus: positiveInt } },
  job: {
    type: "object",
    additionalProperties: false,
    properties: { gpus: positiveInt, replicas: { type: "object", additionalProperties: positiveInt } },
  },
  runPolicy: {
    type: "object",
    additionalProperties: false,
    properties: {
      requireTtlSecondsAfterFinished: { type: "boolean" },
      maxTtlSecondsAfterFinished: positiveInt,
      maxActiveDeadlineSeconds: positiveInt,
      maxBackoffLimit: positiveInt,
      allowedCleanPodPolicies: { type: "array", items: { enum: ["All", "Running", "None"] } },
      allowedRestartPolicies: { type: "array", items: { enum: ["Always", "OnFailure", "Never", "ExitCode"] } },
    },
  },
  allowedAccelerators: { type: "array", items: { type: "string" } },
  allowedPartitions: { type: "array", items: { type: "string" } },
};

/**
 * Platform defaults for a training job's `spec.runPolicy`, filled in by `/mutate/jobs` on CREATE where the job
 * leaves a field unset. Nothing is defaulted here: an empty section changes no job.
 */
const jobDefaultsProperties = {
  ttlSecondsAfterFinished: positiveInt,
  cleanPodPolicy: { enum: ["All", "Running", "None"] },
  // 0 would fail every job at once (training-operator: now - startTime >= activeDeadlineSeconds).
  activeDeadlineSeconds: { type: "integer", minimum: 1 },
  backoffLimit: positiveInt,
};

const kubeflowKinds = [
  ["TFJob", "tfjobs", "tensorflow"],
  ["PyTorchJob", "pytorchjobs", "pytorch"],
  ["MXJob", "mxjobs", "mxnet"],
  ["XGBoostJob", "xgboostjobs", "xgboost"],
  ["PaddleJob", "paddlejobs", "paddle"],
  ["JAXJob", "jaxjobs", "jax"],
].map(([kind, plural, framework]) => ({ kind, group: "kubeflow.org", version: "v1", plural, framework }));

/** The built-in job kinds: the Kubeflow training-operator v1 kinds and Caffe2Job v1alpha1. */
export const DEFAULT_JOB_KINDS = [
  ...kubeflowKinds,
  { kind: "Caffe2Job", group: "kubeflow.org", version: "v1alpha1", plural: "caffe2jobs", framework: "caffe2" },
  { kind: "TrainJob", group: "trainer.kubeflow.org", version: "v1alpha1", plural: "trainjobs", framework: "trainer" },
];

/** An enforcement mode (src/policy/rules.ts). */
const enforcementMode = { enum: ENFORCEMENT_MODES };
/** A mode per rule, by rule name; an unknown name is an error (so is a rule that always denies). */
const ruleModes = {
  type: "object",
  additionalProperties: false,
  properties: Object.fromEntries(CONFIGURABLE_RULES.map((r) => [r, enforcementMode])),
};

export const POLICY_SCHEMA = {
  $id: "https://quartermaster.dev/schemas/policy.json",
  title: "Quartermaster policy",
  type: "object",
  additionalProperties: false,
  properties: {
    jobKinds: {
      type: "array",
      minItems: 1,
      default: DEFAULT_JOB_KINDS,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["kind", "group", "version", "plural", "framework"],
        properties: {
          kind: { type: "string", pattern: "^[A-Z][A-Za-z0-9]*$" },
          group: { type: "string", minLength: 1 },
          version: { type: "string", pattern: "^v[0-9]+((alpha|beta)[0-9]+)?$" },
          plural: { type: "string", pattern: "^[a-z][a-z0-9]*$" },
          // The kinds registry's frameworks (src/kinds/index.ts), compiled into the validator by `npm run generate`.
          framework: { enum: frameworkNames() },
          controller: { enum: ["operator", "quartermaster"] },
        },
      },
    },
    clusterSpec: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: "boolean", default: true },
        clusterDomain: { type: "string", default: "", pattern: "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$" },
        onJobLookupFailure: { enum: ["warn", "deny"], default: "warn" },
        jobLookupTimeoutMs: { type: "integer", minimum: 50, maximum: 10000, default: 1500 },
        jobCacheTtlMs: { type: "integer", minimum: 0, maximum: 600000, default: 5000 },
      },
    },
    gpu: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        resourceName: { type: "string", minLength: 1, default: "nvidia.com/gpu" },
        resources: {
          type: "array",
          // Every vendor's resources (src/vendors/).
          default: defaultGpuResources(),
          items: {
            type: "object",
            additionalProperties: false,
            required: ["pattern"],
            properties: {
              pattern: { type: "string", minLength: 1 },
              tolerations: { type: "array", items: toleration, default: [] },
            },
          },
        },
        deviceClasses: {
          type: "array",
          default: defaultDeviceClasses(),
          items: {
            type: "object",
            additionalProperties: false,
            required: ["name", "resourceName"],
            properties: {
              name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", maxLength: 253 },
              resourceName: { type: "string", minLength: 1 },
              extendedResourceName: { type: "string", minLength: 1 },
            },
          },
        },
      },
    },
    accelerator: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        nodeLabel: { type: "string", minLength: 1, default: "nvidia.com/gpu.product" },
        partitionNodeLabel: { type: "string", minLength: 1 },
        migProducts: { type: "array", items: { type: "string", minLength: 1 }, default: [] },
        addTolerations: { type: "boolean", default: false },
        unpartitionedRequirement: nodeSelectorRequirement,
      },
    },
    interruptible: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        tolerations: { type: "array", items: toleration, default: [] },
        nodeRequirement: nodeSelectorRequirement,
        nonInterruptibleNodeRequirement: nodeSelectorRequirement,
      },
    },
    resources: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        defaultRequests: {
          type: "object",
          additionalProperties: false,
          default: { cpu: "1", memory: "1Gi" },
          properties: { cpu: quantity, memory: quantity },
        },
        limitsFromRequests: { type: "array", items: { type: "string" }, default: [] },
      },
    },
    limits: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        ...limitsProperties,
        container: { ...resourceLimits, default: {} },
        pod: { ...limitsProperties.pod, default: {} },
        job: { ...limitsProperties.job, default: {} },
        runPolicy: { ...limitsProperties.runPolicy, default: {} },
      },
    },
    jobDefaults: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: jobDefaultsProperties,
    },
    namespaces: {
      type: "array",
      default: [],
      items: {
        type: "object",
        additionalProperties: false,
        required: ["pattern"],
        properties: {
          pattern: { type: "string", minLength: 1 },
          limits: { type: "object", additionalProperties: false, default: {}, properties: limitsProperties },
          jobDefaults: { type: "object", additionalProperties: false, properties: jobDefaultsProperties },
        },
      },
    },
    enforcement: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        mode: { ...enforcementMode, default: "deny" },
        rules: { ...ruleModes, default: {} },
        namespaces: {
          type: "array",
          default: [],
          items: {
            type: "object",
            additionalProperties: false,
            required: ["pattern"],
            properties: {
              pattern: { type: "string", minLength: 1 },
              mode: enforcementMode,
              rules: ruleModes,
            },
          },
        },
      },
    },
    reconciler: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        maxDeletionsPerPass: { type: "integer", minimum: 1, default: 100 },
        leaseGracePeriodSeconds: { type: "integer", minimum: 1, default: 40 },
        passLeaseSeconds: { type: "integer", minimum: 10, maximum: 86400, default: 600 },
        perReplicaServices: { type: "boolean", default: true },
        /** Kubernetes Events on the job for adoptions, releases and deletions. */
        events: { type: "boolean", default: true },
        /** A GPU pod still unscheduled after this long is listed in the device ledger with its reason. */
        pendingGpuPodSeconds: { type: "integer", minimum: 0, default: 300 },
        /** Largest ledger shard (ConfigMap data) in bytes; ConfigMaps stop at 1 MiB. */
        ledgerShardBytes: { type: "integer", minimum: 16384, maximum: 921600, default: 524288 },
        /** API calls a pass keeps in flight when it applies its plan. */
        concurrency: { type: "integer", minimum: 1, maximum: 64, default: 8 },
        /** One wgpolicyk8s.io/v1alpha2 PolicyReport per opted-in namespace, written each pass (when the CRD exists). */
        policyReports: { type: "boolean", default: false },
        /** What the job controller may create from a job's pod templates (src/reconcile/template-guard.ts). */
        allowedTemplates: {
          type: "object",
          additionalProperties: false,
          default: {},
          properties: {
            privileged: { type: "boolean", default: false },
            hostNamespaces: { type: "boolean", default: false },
            // `<name>` (a ServiceAccount name, a DNS subdomain) or `<namespace>/<name>` (a namespace is a DNS label).
            serviceAccounts: {
              type: "array",
              default: [],
              items: { type: "string", pattern: "^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" },
            },
          },
        },
      },
    },
    webhook: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        timeoutSeconds: { type: "integer", minimum: 1, maximum: 30, default: 5 },
        podMutation: { enum: ["full", "reduced"], default: "full" },
      },
    },
  },
} as const;

/**
 * @module
 * The JSON Schema of a policy test file (`*.test.yaml`, read by `quartermaster test`): resources, a policy,
 * and the expected outcome per object. Documented in docs/policy.md ("Policy tests").
 */

const stringMap = { type: "object", additionalProperties: { type: "string" } } as const;

/** The rows of `expect`: one object and what must hold for it after admission. */
const expectation = {
  type: "object",
  additionalProperties: false,
  required: ["resource"],
  properties: {
    resource: {
      type: "string",
      pattern: "^[A-Za-z][A-Za-z0-9]*/([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
      description: "Kind/name or Kind/namespace/name of an object among the results (a training job's replica pods are Pod/<job>-<type>-<index>).",
    },
    allowed: { type: "boolean", description: "Whether it is admitted." },
    deniedBy: {
      type: "array",
      items: { type: "string", minLength: 1 },
      uniqueItems: true,
      description: "Exactly the rules that deny it (any order); implies allowed: false.",
    },
    violations: {
      type: "array",
      description: "Each must match one violation: its field path, rule and a part of its message, as far as given.",
      items: {
        type: "object",
        additionalProperties: false,
        minProperties: 1,
        properties: {
          field: { type: "string", description: "The field path, e.g. `spec.containers[0].resources.limits[nvidia.com/gpu]`." },
          rule: { type: "string", description: "The rule that found it, e.g. `container-limits`." },
          message: { type: "string", description: "A substring of the message." },
        },
      },
    },
    warnings: { type: "array", items: { type: "string", minLength: 1 }, description: "Each a substring of one of its warnings." },
    env: {
      type: "object",
      description: "Per container name: environment variables and their values (null: must not be set).",
      additionalProperties: { type: "object", additionalProperties: { type: ["string", "null"] } },
    },
    tolerations: { type: "array", items: { type: "object" }, description: "Each must match one of the pod's tolerations (the fields given)." },
    affinity: { type: "object", description: "Must be contained in the pod's spec.affinity (lists: each given item in some item)." },
    nodeSelector: { ...stringMap, description: "Entries the pod's spec.nodeSelector must have." },
    labels: { type: "object", additionalProperties: { type: ["string", "null"] }, description: "Labels and values (null: must not be set)." },
    annotations: { type: "object", additionalProperties: { type: ["string", "null"] }, description: "Annotations and values (null: must not be set)." },
  },
} as const;

export const POLICY_TEST_SCHEMA = {
  $schema: "http://json-schema.org/draft-07/schema#",
  title: "Quartermaster policy test",
  type: "object",
  additionalProperties: false,
  required: ["apiVersion", "kind", "name", "expect"],
  anyOf: [{ required: ["resources"] }, { required: ["objects"] }],
  properties: {
    apiVersion: { const: "quartermaster.dev/v1alpha1", description: "The format's version." },
    kind: { const: "PolicyTest", description: "What the document is." },
    name: { type: "string", minLength: 1, description: "Shown in the table with the file name." },
    description: { type: "string", description: "What the test is for." },
    policy: { type: "string", minLength: 1, description: "Policy file, relative to the test file; default the built-in policy." },
    namespace: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", description: "Namespace of objects that name none; default `default`." },
    resources: {
      type: "array",
      minItems: 1,
      items: { type: "string", minLength: 1 },
      description: "Files or directories of objects, relative to the test file.",
    },
    objects: { type: "array", minItems: 1, items: { type: "object", required: ["apiVersion", "kind"] }, description: "Objects given inline." },
    pods: { type: "boolean", default: true, description: "Admit every replica pod of each training job too (as `admit --pods`)." },
    expect: { type: "array", minItems: 1, items: expectation, description: "What must hold, one entry per object (the same object may come again)." },
  },
} as const;

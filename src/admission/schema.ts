/**
 * @module
 * JSON Schema of the AdmissionReview v1 request envelope: the parts of admission.k8s.io/v1 the pipeline
 * relies on. `src/generated/review-validator.ts` is generated from it.
 */

const gvk = {
  type: "object",
  required: ["group", "version", "kind"],
  properties: { group: { type: "string" }, version: { type: "string", minLength: 1 }, kind: { type: "string", minLength: 1 } },
};
const gvr = {
  type: "object",
  required: ["group", "version", "resource"],
  properties: {
    group: { type: "string" },
    version: { type: "string", minLength: 1 },
    resource: { type: "string", minLength: 1 },
  },
};
const objectOrNull = { type: ["object", "null"] };

/** JSON Schema of the AdmissionReview v1 request envelope. */
export const ADMISSION_REVIEW_REQUEST_SCHEMA = {
  type: "object",
  required: ["apiVersion", "kind", "request"],
  properties: {
    apiVersion: { const: "admission.k8s.io/v1" },
    kind: { const: "AdmissionReview" },
    request: {
      type: "object",
      required: ["uid", "kind", "resource", "operation"],
      properties: {
        uid: { type: "string", minLength: 1 },
        kind: gvk,
        resource: gvr,
        subResource: { type: "string" },
        requestKind: gvk,
        requestResource: gvr,
        requestSubResource: { type: "string" },
        name: { type: "string" },
        namespace: { type: "string" },
        operation: { enum: ["CREATE", "UPDATE", "DELETE", "CONNECT"] },
        userInfo: { type: "object" },
        object: objectOrNull,
        oldObject: objectOrNull,
        dryRun: { type: "boolean" },
        options: objectOrNull,
      },
    },
  },
} as const;

/**
 * @module
 * Decoding at the edge: an HTTP body (already JSON-parsed) becomes a typed AdmissionRequest, or a
 * {@link ReviewDecodeError} that names every problem with the envelope. The envelope is checked with
 * ajv against the parts of admission.k8s.io/v1 the pipeline relies on; the object itself is left
 * untyped so unknown fields reach the diff untouched.
 */
import { ReviewDecodeError } from "../errors.js";
import { compileSchema, describeSchemaErrors } from "../schema.js";
import type { AdmissionRequest, AdmissionResponse, AdmissionReview } from "./types.js";

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

const validateEnvelope = compileSchema<AdmissionReview>(ADMISSION_REVIEW_REQUEST_SCHEMA);

/**
 * Returns the request of a valid AdmissionReview v1, or throws ReviewDecodeError listing every
 * problem (`request.uid: missing required field 'uid'`, `apiVersion: must be "admission.k8s.io/v1"`).
 */
export function decodeReview(body: unknown): AdmissionRequest {
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ReviewDecodeError(["body must be a JSON object (an AdmissionReview)"]);
  }
  if (!validateEnvelope(body)) {
    throw new ReviewDecodeError(describeSchemaErrors(validateEnvelope.errors));
  }
  return (body as AdmissionReview).request as AdmissionRequest;
}

/** Wraps a response in the AdmissionReview envelope the apiserver requires (`VerifyAdmissionResponse`). */
export function encodeReview(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response };
}

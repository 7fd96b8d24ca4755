/**
 * @module
 * Decoding at the edge: an HTTP body (already JSON-parsed) becomes a typed AdmissionRequest, or a
 * {@link ReviewDecodeError} that names every problem with the envelope. The envelope is checked with
 * ajv against the parts of admission.k8s.io/v1 the pipeline relies on; the object itself is left
 * untyped so unknown fields reach the diff untouched.
 */
import { ReviewDecodeError } from "../core/errors.js";
import { describeSchemaErrors } from "../core/schema.js";
import { compiledValidator } from "../core/boundary.js";
import generatedEnvelopeValidator from "../generated/review-validator.js";
import type { AdmissionRequest, AdmissionResponse, AdmissionReview } from "./types.js";

const validateEnvelope = compiledValidator<AdmissionReview>(generatedEnvelopeValidator);

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
  return body.request as AdmissionRequest;
}

/** Wraps a response in the AdmissionReview envelope the apiserver requires (`VerifyAdmissionResponse`). */
export function encodeReview(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response };
}

const RESPONSE_KEYS = new Set(["uid", "allowed", "status", "patch", "patchType", "auditAnnotations", "warnings"]);

/**
 * The JSON text of an answer, equal in value to `JSON.stringify(review)`. The base64 patch (about a
 * third of the bytes) is put in as it is: base64 never needs escaping, and JSON.stringify would scan
 * every byte of it again (bench/admission). Anything but a plain answer goes through JSON.stringify.
 */
export function reviewJson(review: AdmissionReview): string {
  const r = review.response;
  const plain =
    r !== undefined &&
    review.request === undefined &&
    typeof r.allowed === "boolean" &&
    (r.patch === undefined || typeof r.patch === "string") &&
    Object.keys(r).every((k) => RESPONSE_KEYS.has(k));
  if (!plain) return JSON.stringify(review);
  let out = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":${JSON.stringify(r.uid)},"allowed":${r.allowed}`;
  if (r.status !== undefined) out += `,"status":${JSON.stringify(r.status)}`;
  if (r.patch !== undefined) out += `,"patch":"${r.patch}"`;
  if (r.patchType !== undefined) out += `,"patchType":${JSON.stringify(r.patchType)}`;
  if (r.auditAnnotations !== undefined) out += `,"auditAnnotations":${JSON.stringify(r.auditAnnotations)}`;
  if (r.warnings !== undefined) out += `,"warnings":${JSON.stringify(r.warnings)}`;
  return `${out}}}`;
}

/**
 * @module
 * Decoding at the edge: an HTTP body (already JSON-parsed) becomes a typed AdmissionRequest, or a
 * {@link ReviewDecodeError} that names every problem with the envelope. The envelope is checked with
 * ajv against the parts of admission.k8s.io/v1 the pipeline relies on; the object itself is left
 * untyped so unknown fields reach the diff untouched.
 */
import { ReviewDecodeError } from "../errors.js";
import { describeSchemaErrors } from "../schema.js";
import type { ValidateFunction } from "ajv";
import generatedEnvelopeValidator from "../generated/review-validator.js";
import type { AdmissionRequest, AdmissionResponse, AdmissionReview } from "./types.js";

const validateEnvelope = generatedEnvelopeValidator as unknown as ValidateFunction<AdmissionReview>;


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

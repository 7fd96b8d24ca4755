/**
 * @module
 * The admission.k8s.io/v1 wire types Quartermaster reads and writes. Only v1 is spoken: every
 * webhook configuration in `manifests/` lists `admissionReviewVersions: [v1]`.
 */
import type { GroupVersionKind, GroupVersionResource, KubeObject } from "../core/kube.js";

export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** `request` of an AdmissionReview (k8s.io/api admission/v1 AdmissionRequest). */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  requestKind?: GroupVersionKind;
  requestResource?: GroupVersionResource;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  userInfo?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  object?: KubeObject | null;
  oldObject?: KubeObject | null;
  dryRun?: boolean;
  options?: KubeObject | null;
}

/** One cause of a denial: a field path and what is wrong there (metav1.StatusCause). */
export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

/** metav1.Status as carried in `response.status`. */
export interface Status {
  code?: number;
  message?: string;
  reason?: string;
  status?: "Success" | "Failure";
  details?: { causes?: StatusCause[] };
}

/** `response` of an AdmissionReview (k8s.io/api admission/v1 AdmissionResponse). */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: Status;
  /** base64 of a JSON Patch (RFC 6902) document; present only together with patchType. */
  patch?: string;
  patchType?: "JSONPatch";
  auditAnnotations?: Record<string, string>;
  warnings?: string[];
}

export interface AdmissionReview {
  apiVersion: "admission.k8s.io/v1";
  kind: "AdmissionReview";
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

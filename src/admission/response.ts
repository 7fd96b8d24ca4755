/**
 * @module
 * The only code that builds AdmissionResponses. Every builder takes the request's uid, so the apiserver
 * always gets its uid back (`VerifyAdmissionResponse` rejects a mismatch).
 */
import { errorMessage } from "../core/errors.js";
import { withKey } from "../core/copy.js";
import { diff, encodePatch } from "./diff.js";
import type { Violation } from "../core/violation.js";
import type { AdmissionResponse, StatusCause } from "./types.js";

export type { Violation };

/** The apiserver asks for warnings of at most 120 characters ("Limit warnings to 120 characters if possible"). */
export const MAX_WARNING_LENGTH = 120;
/** Past about ten warnings kubectl output becomes noise; the apiserver truncates hard at 4096 runes in all. */
export const MAX_WARNINGS = 10;

export function allowed(uid: string): AdmissionResponse {
  return { uid, allowed: true };
}

/**
 * A denial with HTTP code 403, reason Forbidden (or the given `status`: 409 Conflict for a stale `/scale`)
 * and one cause per violation. The message lists them all; the apiserver prefixes it with
 * `admission webhook "<name>" denied the request: `.
 */
export function denied(uid: string, violations: readonly Violation[], summary?: string, status: DenialStatus = FORBIDDEN): AdmissionResponse {
  const causes: StatusCause[] = violations.map((v) => ({ reason: "FieldValueForbidden", field: v.field, message: v.message }));
  const listed = violations.map((v) => `${v.field}: ${v.message}`).join("; ");
  const message = summary ? (listed ? `${summary}: ${listed}` : summary) : listed || "denied by policy";
  return {
    uid,
    allowed: false,
    status: { status: "Failure", code: status.code, reason: status.reason, message, details: { causes } },
  };
}

/** A denial's HTTP code and reason. */
export interface DenialStatus {
  code: number;
  reason: string;
}

export const FORBIDDEN: DenialStatus = Object.freeze({ code: 403, reason: "Forbidden" });
/** The object changed since the client read it: the client reads it again and retries (as for any 409). */
export const CONFLICT: DenialStatus = Object.freeze({ code: 409, reason: "Conflict" });

/** A refusal because of an internal error (validating webhooks fail closed), with the error's message. */
export function errored(uid: string, code: number, err: unknown): AdmissionResponse {
  return {
    uid,
    allowed: false,
    status: { status: "Failure", code, reason: code >= 500 ? "InternalError" : "BadRequest", message: errorMessage(err) },
  };
}

/**
 * The response for `next` and how many patch operations it carries; an allowed response with no
 * patch at all when nothing changed.
 */
export function patched(uid: string, original: object, next: object): { response: AdmissionResponse; ops: number } {
  if (original === next) return { response: allowed(uid), ops: 0 };
  const patch = diff(original, next);
  if (patch.ops === 0) return { response: allowed(uid), ops: 0 };
  return { response: { uid, allowed: true, patchType: "JSONPatch", patch: encodePatch(patch) }, ops: patch.ops };
}

/**
 * Adds warnings to a response: each cut to {@link MAX_WARNING_LENGTH} characters, exact duplicates
 * dropped, at most {@link MAX_WARNINGS} (the last one then says how many were left out).
 */
export function withWarnings(response: AdmissionResponse, warnings: readonly string[]): AdmissionResponse {
  const all = normalizeWarnings([...(response.warnings ?? []), ...warnings]);
  if (all.length === 0) return response;
  return withKey(response, "warnings", all);
}

export function normalizeWarnings(warnings: readonly string[]): string[] {
  const seen = new Set<string>();
  for (const w of warnings) {
    const oneLine = /\s\s|[\t\n\r]|^\s|\s$/.test(w) ? w.replace(/\s+/g, " ").trim() : w;
    if (!oneLine) continue;
    // Length in characters (code points), counted only when the UTF-16 length could exceed the limit.
    const chars = oneLine.length > MAX_WARNING_LENGTH ? [...oneLine] : undefined;
    seen.add(chars && chars.length > MAX_WARNING_LENGTH ? chars.slice(0, MAX_WARNING_LENGTH - 1).join("") + "…" : oneLine);
  }
  const unique = [...seen];
  if (unique.length <= MAX_WARNINGS) return unique;
  const kept = unique.slice(0, MAX_WARNINGS - 1);
  kept.push(`${unique.length - kept.length} more warnings not shown`);
  return kept;
}

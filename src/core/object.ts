/**
 * @module
 * Reading untyped JSON (admission request bodies, CRD objects, policy files): one plain-object check and the
 * default that goes with it, instead of a copy under another name in every reader (issue 50).
 */

/** A JSON object: not null, not an array. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `v` when it is a JSON object, else a fresh empty one (a missing or mistyped field reads as empty). */
export function objectOr(v: unknown): Record<string, unknown> {
  return isObject(v) ? v : {};
}

/** `value`, and every object and array under it, frozen; returned for chaining. */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

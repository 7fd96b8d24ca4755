/**
 * @module
 * The JSON Patch sent back to the apiserver: always the diff between the raw request object and the
 * result of the mutations, never hand-assembled operations, so unknown fields are never touched.
 *
 * The diff is written here instead of calling fast-json-patch's `compare`, on purpose and measured:
 * `compare` deep-clones every added or replaced value through a JSON round trip (so its caller may
 * change either document afterwards) and returns operation objects that the response then serializes
 * again; that was a third of the cost of a mutating admission (bench/admission). The walk below is
 * `compare`'s own, step for step, but its operations refer to the values in `next` (no copies) and
 * are serialized once, in a single `JSON.stringify` call. The test suite holds it to fast-json-patch
 * byte for byte (same operations, same order, same escaping) over the corpus, generated pods and
 * edge cases, and applies every patch with fast-json-patch (./patch.ts, which the webhook never loads).
 */
import type { Operation } from "fast-json-patch";

export type PatchOperation = Operation;

/** A patch as the response carries it: the JSON text of the operations and how many there are. */
export interface Patch {
  readonly ops: number;
  /** JSON text of the operation array, e.g. `[{"op":"add","path":"/metadata/labels","value":{...}}]`. */
  readonly json: string;
}

/** RFC 6901: `~` → `~0`, `/` → `~1`. */
function escapePathComponent(key: string): string {
  if (key.indexOf("/") === -1 && key.indexOf("~") === -1) return key;
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

type Op = { op: "add" | "replace"; path: string; value: unknown } | { op: "remove"; path: string };

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

// fast-json-patch's clone of `undefined` is `null` (as JSON.stringify writes it inside arrays).
function addOp(out: Op[], path: string, value: unknown): void {
  out.push({ op: "add", path, value: value === undefined ? null : value });
}

function replaceOp(out: Op[], path: string, value: unknown): void {
  out.push({ op: "replace", path, value: value === undefined ? null : value });
}

function removeOp(out: Op[], path: string): void {
  out.push({ op: "remove", path });
}

/**
 * Appends to `out` the operations turning `before` into `after`, in fast-json-patch's order: existing
 * keys from the last to the first (recursing where both sides are objects of the same kind), then the
 * added keys in order, which it skips when nothing was removed and the key counts are equal. Paths are
 * built only for operations and recursion; arrays are walked by index.
 */
function walk(before: object, after: object, path: string, out: Op[]): void {
  // Shared subtrees (mutations copy only what they change) are skipped without being walked.
  if (before === after) return;
  if (Array.isArray(before) && Array.isArray(after)) return walkArray(before, after, path, out);
  if (Array.isArray(before) !== Array.isArray(after)) return walkMismatch(before, after, path, out);
  const b = before as Record<string, unknown>;
  const a = after as Record<string, unknown>;
  const oldKeys = Object.keys(b);
  let deleted = false;
  for (let t = oldKeys.length - 1; t >= 0; t--) {
    const key = oldKeys[t]!;
    const oldVal = b[key];
    const newVal = a[key];
    if (newVal !== undefined ? Object.hasOwn(a, key) : oldVal === undefined && Object.hasOwn(a, key)) {
      if (oldVal === newVal) continue;
      if (isObject(oldVal) && isObject(newVal) && Array.isArray(oldVal) === Array.isArray(newVal)) {
        walk(oldVal, newVal, `${path}/${escapePathComponent(key)}`, out);
      } else {
        replaceOp(out, `${path}/${escapePathComponent(key)}`, newVal);
      }
    } else {
      removeOp(out, `${path}/${escapePathComponent(key)}`);
      deleted = true;
    }
  }
  const newKeys = Object.keys(a);
  if (!deleted && newKeys.length === oldKeys.length) return;
  for (const key of newKeys) {
    if (!Object.hasOwn(b, key) && a[key] !== undefined) addOp(out, `${path}/${escapePathComponent(key)}`, a[key]);
  }
}

/** {@link walk} for two arrays: a missing index is removed (an `undefined` element is replaced by null). */
function walkArray(before: unknown[], after: unknown[], path: string, out: Op[]): void {
  for (let i = before.length - 1; i >= 0; i--) {
    const oldVal = before[i];
    if (i < after.length) {
      const newVal = after[i];
      if (oldVal === newVal) continue;
      if (isObject(oldVal) && isObject(newVal) && Array.isArray(oldVal) === Array.isArray(newVal)) walk(oldVal, newVal, `${path}/${i}`, out);
      else replaceOp(out, `${path}/${i}`, newVal);
    } else {
      removeOp(out, `${path}/${i}`);
    }
  }
  for (let i = before.length; i < after.length; i++) {
    if (after[i] !== undefined) addOp(out, `${path}/${i}`, after[i]);
  }
}

/**
 * {@link walk} for an array against an object (reached only at the root, since a nested pair of
 * different kinds is replaced whole), as fast-json-patch does it: keys compare as strings; a shared key
 * whose value differs gets a replace, each key of `before` missing from `after` a replace of the whole
 * document, and keys only `after` has are added when the key counts differ.
 */
function walkMismatch(before: object, after: object, path: string, out: Op[]): void {
  const b = before as Record<string, unknown>;
  const a = after as Record<string, unknown>;
  const oldKeys = Array.isArray(before) ? before.map((_v, i) => String(i)) : Object.keys(before);
  const newKeys = Array.isArray(after) ? after.map((_v, i) => String(i)) : Object.keys(after);
  const afterIsArray = Array.isArray(after);
  for (let t = oldKeys.length - 1; t >= 0; t--) {
    const key = oldKeys[t]!;
    const oldVal = b[key];
    if (Object.hasOwn(after, key) && !(a[key] === undefined && oldVal !== undefined && !afterIsArray)) {
      const newVal = a[key];
      if (isObject(oldVal) && isObject(newVal) && Array.isArray(oldVal) === Array.isArray(newVal))
        walk(oldVal, newVal, `${path}/${escapePathComponent(key)}`, out);
      else if (oldVal !== newVal) replaceOp(out, `${path}/${escapePathComponent(key)}`, newVal);
    } else {
      replaceOp(out, path, after);
    }
  }
  if (newKeys.length === oldKeys.length) return;
  for (const key of newKeys) {
    if (!Object.hasOwn(before, key) && a[key] !== undefined) addOp(out, `${path}/${escapePathComponent(key)}`, a[key]);
  }
}

/**
 * The JSON Patch turning `original` into `next`. Subtrees that `next` shares by reference with
 * `original` are skipped without being walked, so mutations that copy only what they change keep this cheap.
 */
export function diff(original: object, next: object): Patch {
  const out: Op[] = [];
  walk(original, next, "", out);
  return { ops: out.length, json: JSON.stringify(out) };
}

/** The operations of {@link diff}, as objects. */
export function createPatch(original: object, next: object): PatchOperation[] {
  return JSON.parse(diff(original, next).json) as PatchOperation[];
}

/** base64 of a patch, as `AdmissionResponse.patch` carries it. */
export function encodePatch(patch: Patch): string {
  return Buffer.from(patch.json).toString("base64");
}

/**
 * @module
 * The only user of fast-json-patch. The patch is always the diff between the raw request object and
 * the result of the mutations, never hand-written operations, so unknown fields are never touched and
 * path escaping (`/metadata/labels/nvidia.com~1gpu`) is the library's.
 */
import jsonpatch from "fast-json-patch";
import type { Operation } from "fast-json-patch";

export type PatchOperation = Operation;

/**
 * JSON Patch turning `original` into `next`. Subtrees that `next` shares by reference with `original`
 * are skipped without being walked, so mutations that copy only what they change keep this cheap.
 */
export function createPatch(original: object, next: object): PatchOperation[] {
  return jsonpatch.compare(original, next);
}

/** Applies `ops` to a copy of `document` and returns the copy; throws if an operation does not apply. */
export function applyPatch<T extends object>(document: T, ops: readonly PatchOperation[]): T {
  return jsonpatch.applyPatch(structuredClone(document), ops as PatchOperation[], true, true).newDocument;
}

/** base64 of the patch document, as `AdmissionResponse.patch` carries it. */
export function encodePatch(ops: readonly PatchOperation[]): string {
  return Buffer.from(JSON.stringify(ops)).toString("base64");
}

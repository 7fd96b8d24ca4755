/**
 * @module
 * JSON Patches for `admit` and the tests: ./diff.ts's patch, and applying one with fast-json-patch. The webhook
 * only makes patches (./response.ts imports ./diff.ts), so a `serve` start does not load fast-json-patch.
 */
import jsonpatch from "fast-json-patch";
import type { PatchOperation } from "./diff.js";

export { createPatch, diff, encodePatch, type Patch, type PatchOperation } from "./diff.js";

/** Applies `ops` to a copy of `document` and returns the copy; throws if an operation does not apply. */
export function applyPatch<T extends object>(document: T, ops: readonly PatchOperation[]): T {
  return jsonpatch.applyPatch(structuredClone(document), ops as PatchOperation[], true, true).newDocument;
}

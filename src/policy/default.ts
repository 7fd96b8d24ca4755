/**
 * @module
 * The built-in policy (every field its schema's default), without loading the policy's validator: a `serve` or
 * CLI start without `--policy` reads this constant. src/generated/generate.ts writes it from the schema by checking
 * an empty document (src/policy/load.ts), and a unit test regenerates it, so the two cannot differ.
 */
import { deepFreeze } from "../core/object.js";
import { DEFAULT_POLICY } from "../generated/default-policy.js";
import type { Policy } from "./types.js";

/** The built-in policy: the schema's defaults, a frozen copy of its own. */
export function defaultPolicy(): Policy {
  return deepFreeze(structuredClone(DEFAULT_POLICY));
}

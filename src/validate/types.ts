/**
 * @module
 * Validation rules: pure functions from an object and a context to violations (each with its field path)
 * and warnings. Rules never throw for policy; the handler turns violations into one 403 with every cause.
 */
import type { Violation } from "../core/violation.js";
import type { DraCapacity, KnownClaims } from "../core/dra.js";
import type { Limits, Policy } from "../policy/types.js";

export type { Violation } from "../core/violation.js";

/** A violation with the measured value, so an UPDATE can tell "still over" from "worse". */
export interface Finding extends Violation {
  value?: number;
}

export interface Findings {
  violations: Finding[];
  warnings: string[];
}

export interface ValidationContext {
  policy: Policy;
  /** The limits for the object's namespace: the first matching override over the defaults. */
  limits: Limits;
  namespace: string;
  /** The ResourceClaims and ResourceClaimTemplates the object's pods name, as far as they could be read (DRA). */
  claims?: KnownClaims;
  /** The largest node's device count per DeviceClass, for `allocationMode: All` (from the device ledger). */
  draCapacity?: DraCapacity;
}

export function none(): Findings {
  return { violations: [], warnings: [] };
}

export function merge(...all: Findings[]): Findings {
  return { violations: all.flatMap((f) => f.violations), warnings: all.flatMap((f) => f.warnings) };
}

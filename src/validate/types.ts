/**
 * @module
 * Validation rules: pure functions from an object and a context to violations (each with its field path)
 * and warnings. Rules never throw for policy; the handler turns violations into one 403 with every cause.
 */
import type { Violation } from "../admission/response.js";
import type { Limits, Policy } from "../policy/types.js";

export type { Violation } from "../admission/response.js";

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
}

export function none(): Findings {
  return { violations: [], warnings: [] };
}

export function merge(...all: Findings[]): Findings {
  return { violations: all.flatMap((f) => f.violations), warnings: all.flatMap((f) => f.warnings) };
}

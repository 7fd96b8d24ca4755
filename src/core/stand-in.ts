/**
 * @module
 * Stand-in arrays. A large body is parsed in a worker thread (`src/server/parse.ts`), which sends the
 * document back with every long array replaced by a stand-in: an array of holes with the original length
 * (it crosses the thread boundary as its length), carrying one named property, {@link STAND_IN_NAMES}: the
 * distinct names of the resources its elements request or limit (the own keys of each element's
 * `resources.requests` and `resources.limits`), or null when there were more than the worker keeps.
 *
 * A JSON document never has an array with a named property, so the property also tells a stand-in from a
 * real array. Code that may see such a document (the guards, the cost bound) reads a list's length and, for a
 * stand-in, these names, and nothing else of it; where that does not decide its answer it throws
 * {@link StandInUndecided}, and the body is parsed again whole on the main thread (`src/server/app.ts`).
 */

/** The property of a stand-in array holding its elements' resource names. */
export const STAND_IN_NAMES = "resourceNames";

/**
 * The property of a stand-in array holding the claims its elements name as a pod's `resourceClaims` entries
 * (`{count, names}`: the distinct `c/<ResourceClaim>` and `t/<ResourceClaimTemplate>`, the names null when more than
 * the worker keeps), for the claim-name bound (`claims.ts`): a pod naming 20,000 claims is refused from it.
 */
export const STAND_IN_CLAIMS = "claimNames";

/** What a stand-in array carries of the claims its elements name (see {@link STAND_IN_CLAIMS}). */
export interface StandInClaims {
  /** Distinct names, ResourceClaims and ResourceClaimTemplates apart. */
  count: number;
  /** Those names as `c/<name>` and `t/<name>`; null when more than the worker keeps. */
  names: readonly string[] | null;
}

/**
 * For a stand-in array, the claims its elements name (null: it does not say); undefined for any other value (a real
 * array).
 */
export function standInClaims(list: unknown): StandInClaims | null | undefined {
  if (standInNames(list) === undefined) return undefined;
  const c = (list as unknown[] & Record<typeof STAND_IN_CLAIMS, unknown>)[STAND_IN_CLAIMS];
  return typeof c === "object" && c !== null && typeof (c as StandInClaims).count === "number" ? (c as StandInClaims) : null;
}

/**
 * For a stand-in array, the distinct resource names its elements requested or limited (null: more than the
 * worker keeps); undefined for any other value (a real array).
 */
export function standInNames(list: unknown): readonly string[] | null | undefined {
  if (!Array.isArray(list) || !Object.prototype.hasOwnProperty.call(list, STAND_IN_NAMES)) return undefined;
  const names = (list as unknown[] & Record<typeof STAND_IN_NAMES, unknown>)[STAND_IN_NAMES];
  return Array.isArray(names) ? (names as string[]) : null;
}

/** Thrown by code that cannot give, from a document with stand-ins, the answer the whole document would get. */
export class StandInUndecided extends Error {
  constructor(what: string) {
    super(`cannot decide from stand-in arrays: ${what}`);
    this.name = "StandInUndecided";
  }
}

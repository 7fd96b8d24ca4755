/**
 * @module
 * Error classes, one per meaning. Each sets `name` and keeps its `cause`, so logs show both.
 */

/** The HTTP body is not a usable AdmissionReview v1 request. Maps to HTTP 400 with every problem listed. */
export class ReviewDecodeError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[], options?: { cause?: unknown }) {
    super(`invalid AdmissionReview: ${problems.join("; ")}`, options);
    this.name = "ReviewDecodeError";
    this.problems = problems;
  }
}

/** A policy document that does not satisfy the schema. `problems` holds every error with its path. */
export class PolicyError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: readonly string[], options?: { cause?: unknown }) {
    super(`invalid policy ${source}:\n  ${problems.join("\n  ")}`, options);
    this.name = "PolicyError";
    this.problems = problems;
  }
}

/** A command line that cannot be run as given (unknown flag, missing value). */
export class UsageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** The message of anything thrown, never `JSON.stringify(err)` (which is "{}" for an Error). */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

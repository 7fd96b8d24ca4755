/**
 * @module
 * Parsing a policy file's text (YAML or JSON: JSON is YAML) and checking it. Kept apart from
 * `load.ts` so a server started without `--policy` never loads the YAML parser.
 */
import { LineCounter, parseDocument } from "yaml";
import { PolicyError } from "../core/errors.js";
import { checkPolicy } from "./load.js";
import type { Policy } from "./types.js";

/** Parses and validates `text`; syntax errors carry their line, schema errors their field path. */
export function parsePolicy(text: string, source: string): Policy {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  if (doc.errors.length > 0) {
    throw new PolicyError(
      source,
      doc.errors.map((e) => `line ${lineCounter.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`),
    );
  }
  return checkPolicy(doc.toJS() ?? {}, source);
}

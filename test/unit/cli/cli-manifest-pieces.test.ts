/**
 * `admit` reads a file a megabyte at a time (src/cli/admit-input.ts readObjects, src/cli/manifest-yaml.ts
 * manifestDocumentReader): whatever the pieces, every document, value, error and error line is what the yaml
 * package's parseAllDocuments finds in the whole text with the same options, and the objects (or the error) are
 * what parseObjects makes of the whole text. Over the corpus, the fixtures' YAML and texts made to trip a reader
 * in pieces (a byte order mark, CRLF split between pieces, no final newline, directives, errors, aliases).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { LineCounter, parseAllDocuments, type Document } from "yaml";
import { objectReader, parseObjects } from "../../../src/cli/admit-input.js";
import { manifestDocumentReader, manifestValue, MANIFEST_OPTIONS } from "../../../src/cli/manifest-yaml.js";
import { errorMessage } from "../../../src/core/errors.js";
import { REPO_CORPUS_DIR } from "../../fixtures/corpus.js";
import { ROOT } from "../../fixtures/manifests.js";

const files = (dir: string): string[] =>
  readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .map((f) => join(dir, f));

const TEXTS: Array<[string, string]> = [
  ...[...files(join(REPO_CORPUS_DIR, "manifests")), ...files(join(ROOT, "examples")), ...files(join(ROOT, "examples/trainer"))].map((f): [string, string] => [
    f.slice(ROOT.length + 1),
    readFileSync(f, "utf8"),
  ]),
  ["byte order mark", "\uFEFFapiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"],
  ["CRLF", "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: Pod\r\nmetadata: {name: b}\r\n"],
  ["no final newline", "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: ConfigMap\ndata: {a: 'x'}"],
  [
    "directives",
    "%YAML 1.1\n---\napiVersion: v1\nkind: Pod\n...\n%TAG !e! tag:example.com,2000:\n---\napiVersion: v1\nkind: Pod\nmetadata: {labels: {a: !e!x y}}\n",
  ],
  ["an error in the third document", "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [\n"],
  ["a duplicate key", "apiVersion: v1\nkind: Pod\nkind: Pod\n"],
  ["merge keys and aliases", "apiVersion: v1\nkind: ConfigMap\nx: &a {p: 1, q: yes}\ndata:\n  <<: *a\n  r: 0777\n  s: *a\n"],
  [
    "a block scalar and comments",
    "# head\napiVersion: v1 # c\nkind: ConfigMap\ndata:\n  f: |\n    line 1\n\n    line 3\n  g: >-\n    folded\n    text\n# tail\n",
  ],
  ["only comments", "# nothing\n"],
  ["empty", ""],
  ["a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n"],
  ["not an object", "apiVersion: v1\nkind: Pod\n---\n- a\n- b\n"],
  ["non-ASCII", "apiVersion: v1\nkind: ConfigMap\ndata: {a: 'héllo wörld — 日本語 😀'}\n"],
];

type Seen = { errors: Array<[number, string]>; value?: unknown; failed?: string };
function seen(doc: Document.Parsed, lc: LineCounter): Seen {
  const errors = doc.errors.map((e): [number, string] => [lc.linePos(e.pos[0]).line, e.message]);
  if (errors.length > 0) return { errors };
  try {
    return { errors, value: manifestValue(doc) };
  } catch (err) {
    return { errors, failed: errorMessage(err) };
  }
}

/** `text` cut before each of `cuts` (offsets, any order). */
const cut = (text: string, cuts: number[]): string[] => {
  const at = [...new Set(cuts.map((c) => Math.min(Math.max(c, 0), text.length)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let from = 0;
  for (const c of at) {
    pieces.push(text.slice(from, c));
    from = c;
  }
  pieces.push(text.slice(from));
  return pieces;
};

function inPieces(pieces: string[]): Seen[] {
  const lc = new LineCounter();
  const reader = manifestDocumentReader(lc);
  const docs: Document.Parsed[] = [];
  for (const p of pieces) docs.push(...reader.push(p));
  docs.push(...reader.end());
  return docs.map((d) => seen(d, lc));
}

function whole(text: string): Seen[] {
  const lc = new LineCounter();
  const docs = parseAllDocuments(text, { ...MANIFEST_OPTIONS, lineCounter: lc });
  return (Array.isArray(docs) ? docs : []).map((d) => seen(d, lc));
}

const objects = (read: () => unknown): unknown => {
  try {
    return read();
  } catch (err) {
    return { threw: errorMessage(err) };
  }
};

function objectsInPieces(pieces: string[]): unknown {
  return objects(() => {
    const reader = objectReader("x.yaml");
    for (const p of pieces) reader.push(p);
    return reader.end();
  });
}

describe("manifests read in pieces", () => {
  it(`reads ${TEXTS.length} texts as parseAllDocuments and parseObjects read them whole, in pieces of 1, 2, 3, 7, 64 and 4096 characters`, () => {
    for (const [name, text] of TEXTS) {
      const expected = whole(text);
      const expectedObjects = objects(() => parseObjects(text, "x.yaml"));
      for (const size of [1, 2, 3, 7, 64, 4096]) {
        const pieces = cut(
          text,
          Array.from({ length: Math.ceil(text.length / size) }, (_, i) => i * size),
        );
        assert.deepEqual(inPieces(pieces), expected, `${name} in pieces of ${size}`);
        assert.deepEqual(objectsInPieces(pieces), expectedObjects, `${name} in pieces of ${size}: objects`);
      }
    }
  });

  it("reads every text the same wherever it is cut", () => {
    fc.assert(
      fc.property(fc.constantFrom(...TEXTS), fc.array(fc.nat(), { maxLength: 40 }), ([, text], cuts) => {
        const pieces = cut(
          text,
          cuts.map((c) => c % (text.length + 1)),
        );
        assert.deepEqual(inPieces(pieces), whole(text));
        assert.deepEqual(
          objectsInPieces(pieces),
          objects(() => parseObjects(text, "x.yaml")),
        );
      }),
      { numRuns: 300 },
    );
  });
});

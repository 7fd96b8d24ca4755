/**
 * @module
 * Manifests read the way kubectl reads them, for `admit` and `test`: kubectl decodes YAML with sigs.k8s.io/yaml,
 * which is go-yaml v2, a YAML 1.1 reader. So here:
 * - `<<` merge keys are merged (YAML 1.2 has none: `<<` would stay a literal key, and a pod kubectl sees with
 *   9 GPUs would be admitted offline with the 1 GPU it was merged over);
 * - YAML 1.1 scalars: `yes`/`no`/`on`/`off`/`y`/`n` are booleans, `0777` octal, `0b1010` binary, `1_000` an
 *   integer; but not the 1.1 schema's sexagesimal `1:20` nor timestamps, which go-yaml v2 leaves as strings
 *   when decoding into untyped values (what sigs.k8s.io/yaml does);
 * - aliases are bounded by what they expand to, not by how many there are: a document whose aliases make it
 *   larger than {@link MAX_EXPANDED_BYTES} is refused before it is built (99 aliases of a 1 MB node would be
 *   ~100 MB; nested ones exponentially more), while many small aliases are fine, as they are for kubectl.
 */
import {
  Composer,
  isAlias,
  isCollection,
  isDocument,
  isPair,
  isScalar,
  LineCounter,
  Parser,
  type Document,
  type DocumentOptions,
  type Node,
  type ParseOptions,
  type SchemaOptions,
} from "yaml";

/** The most a document may expand to through its aliases: the apiserver's request body limit (3 MiB). */
export const MAX_EXPANDED_BYTES = 3 * 1024 * 1024;

/** Tags of the YAML 1.1 schema that go-yaml v2 does not apply to untyped values: sexagesimal numbers, timestamps. */
const notGoYamlV2 = (t: { tag: string; format?: string }): boolean => t.format === "TIME" || t.tag === "tag:yaml.org,2002:timestamp";

/** The yaml package's options for a manifest (with a LineCounter, what parseAllDocuments would be given). */
export const MANIFEST_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = {
  uniqueKeys: true,
  prettyErrors: false,
  version: "1.1",
  merge: true,
  customTags: (tags) => tags.filter((t) => !notGoYamlV2(t as { tag: string; format?: string })),
};

/** Every document of `text`, parsed as kubectl parses manifests (YAML 1.1, merge keys); lines in `lineCounter`. */
export function parseManifestDocuments(text: string, lineCounter: LineCounter): Array<Document.Parsed> {
  return [...manifestDocuments(text, lineCounter)];
}

/**
 * The documents of `text` one at a time, as {@link parseManifestDocuments} reads them (what the yaml package's
 * parseAllDocuments does, without holding every document's syntax tree at once: a 50 MB file's trees take
 * gigabytes). A document comes with every error of its own, as there: the composer hands one over only when the
 * next begins or the text ends.
 */
export function* manifestDocuments(text: string, lineCounter: LineCounter): Generator<Document.Parsed> {
  const reader = manifestDocumentReader(lineCounter);
  yield* reader.push(text);
  yield* reader.end();
}

/**
 * {@link manifestDocuments} of a text given in pieces (a file read a megabyte at a time: the whole text is never
 * held): `push` each piece in order, then `end`; each hands over the documents complete so far. The yaml package's
 * own streaming (its Parser's `incomplete`, as its CLI reads stdin), given whole lines only: its lexer misreads a
 * flow collection or a scalar cut mid-line (test/unit/cli/cli-manifest-pieces.test.ts), so the rest of a line waits for
 * the next piece. Positions, and lines in `lineCounter`, are the whole text's.
 */
export function manifestDocumentReader(lineCounter: LineCounter): { push(piece: string): Generator<Document.Parsed>; end(): Generator<Document.Parsed> } {
  // A call that yields no token leaves the parser at offset 0, and the next would count line 1 again.
  let last = -1;
  const parser = new Parser((offset) => {
    if (offset > last) lineCounter.addNewLine(offset);
    last = offset;
  });
  const composer = new Composer(MANIFEST_OPTIONS);
  let rest = "";
  return {
    *push(piece) {
      const text = rest + piece;
      const lines = text.lastIndexOf("\n") + 1;
      rest = text.slice(lines);
      if (lines > 0) for (const token of parser.parse(text.slice(0, lines), true)) yield* composer.next(token);
    },
    *end() {
      for (const token of parser.parse(rest, false)) yield* composer.next(token);
      rest = "";
      yield* composer.end();
    },
  };
}

/** A document whose aliases expand it past {@link MAX_EXPANDED_BYTES}, or an alias of a node within itself. */
export class AliasExpansionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AliasExpansionError";
  }
}

/**
 * About how many bytes `doc` holds (and whether it has aliases) once every alias is replaced by what it names (each scalar's text plus one,
 * keys included), computed without expanding anything: each node's size is computed once, so a nested alias
 * bomb costs its source's size to measure. Throws AliasExpansionError for an alias inside the node it names
 * (go-yaml v2: "anchor ... value contains itself").
 */
export function expandedSize(doc: Document.Parsed): { bytes: number; aliases: boolean } {
  const sizes = new Map<Node, number>();
  let aliases = false;
  const open = new Set<Node>();
  const size = (node: unknown): number => {
    if (node === null || node === undefined) return 1;
    if (isPair(node)) return size(node.key) + size(node.value);
    if (isScalar(node)) return String(node.value ?? "").length + 1;
    if (isAlias(node)) {
      aliases = true;
      const target = node.resolve(doc);
      if (!target) return 1;
      return size(target);
    }
    if (!isCollection(node)) return 1;
    const known = sizes.get(node);
    if (known !== undefined) return known;
    if (open.has(node)) throw new AliasExpansionError(`an alias refers to a node that contains it (anchor ${JSON.stringify(node.anchor ?? "")})`);
    open.add(node);
    let total = 1;
    for (const item of node.items) {
      total += size(item);
      // Stop early: a bomb's size can exceed what a number holds exactly.
      if (total > Number.MAX_SAFE_INTEGER / 2) break;
    }
    open.delete(node);
    sizes.set(node, total);
    return total;
  };
  const bytes = isDocument(doc) ? size(doc.contents) : 0;
  return { bytes, aliases };
}

/**
 * The plain value of one parsed document, aliases and merge keys resolved; throws AliasExpansionError (with
 * a message that says what to do) rather than build a document its aliases make larger than `limit`.
 */
export function manifestValue(doc: Document.Parsed, limit = MAX_EXPANDED_BYTES): unknown {
  const { bytes: size, aliases } = expandedSize(doc);
  // Without aliases a document is no larger than its text: nothing to bound here.
  if (aliases && size > limit) {
    throw new AliasExpansionError(
      `YAML aliases expand this document to ${size > 1e15 ? "more than 10^15" : `about ${size}`} bytes, over the limit of ${limit} (the apiserver's 3 MiB request limit): refused without expanding it (write the values out, or use fewer aliases)`,
    );
  }
  // Bounded by expanded size above instead of the yaml package's alias count, which refuses manifests kubectl takes.
  return doc.toJS({ maxAliasCount: -1 });
}

/**
 * @module
 * The inputs of `admit` (and `test`): files, directories and stdin read as kubectl reads manifests (YAML 1.1, merge
 * keys, bounded aliases; src/cli/manifest-yaml.ts), a megabyte at a time, each document's object built and its syntax
 * tree dropped, `List`s unpacked, an object over the apiserver's 3 MiB request limit refused as the apiserver would.
 */
import { open, readdir, stat, type FileHandle } from "node:fs/promises";
import { extname, join, resolve } from "node:path";
import { deserialize, serialize } from "node:v8";
import { LineCounter, type Document } from "yaml";
import type { KubeObject } from "../core/kube.js";
import { errorMessage } from "../core/errors.js";
import { isObject } from "../core/object.js";
import { manifestDocumentReader, manifestValue, MAX_EXPANDED_BYTES } from "./manifest-yaml.js";

/** One object read from a file: `source` is `file#n` (n counts documents from 1, list items as `#n.i`). */
export interface InputObject {
  source: string;
  object: KubeObject;
}

type Meta = { name?: string; generateName?: string; namespace?: string };
const metaOf = (o: KubeObject): Meta => o.metadata ?? {};

/** What a file system error means, in words (never an errno alone). */
const READ_PROBLEMS: Readonly<Record<string, string>> = {
  ENOENT: "no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "is a directory",
  ENOTDIR: "a part of the path is not a directory",
};

/** `cannot read -f x.yaml: no such file`. */
function cannotRead(flag: string | undefined, path: string, err: unknown): InputError {
  const code = (err as { code?: unknown } | null)?.code;
  const what = (typeof code === "string" && READ_PROBLEMS[code]) || errorMessage(err);
  return new Unreadable(`cannot read ${flag ? `${flag} ` : ""}${path}: ${what}`);
}

/** How much of a file is read and parsed at a time. */
const PIECE_BYTES = 1 << 20;

export interface ReadInputsOptions {
  /** The flag that named the paths, for messages (`-f`). */
  flag?: string;
  /** Standard input, read when a path is `-` (kubectl's `-f -`). */
  stdin?: () => Promise<string>;
  /** Told about a file of a directory that holds no Kubernetes objects, which is then skipped; without it, that is an error. */
  onSkip?: (message: string) => void;
  /** Told after each document of a file (or stdin) is read: see {@link ParseProgress}. */
  onDocument?: ParseProgress;
  /** Each object held compactly until {@link admitEach} takes it ({@link HeldInput}), as `admit` reads them. */
  hold?: boolean;
}

/**
 * An input held as the bytes of `v8.serialize` (what a structured clone keeps: NaN, -0, shared nodes, Buffers)
 * until its turn, and `head`, what is read of every input before then. Its `object` is a new copy at each read.
 * A 50 MB file's objects take ~200 MB as objects (and keep the file's text alive through their strings), ~40 MB so.
 */
export class HeldInput implements InputObject {
  readonly source: string;
  /** apiVersion, kind, and metadata's name, generateName and namespace (strings of their own, not of the text). */
  readonly head: KubeObject;
  readonly #bytes: Buffer;

  constructor({ source, object }: InputObject) {
    this.source = source;
    const { name, generateName, namespace } = metaOf(object);
    this.head = JSON.parse(JSON.stringify({ apiVersion: object.apiVersion, kind: object.kind, metadata: { name, generateName, namespace } })) as KubeObject;
    this.#bytes = serialize(object);
  }

  get object(): KubeObject {
    return deserialize(this.#bytes) as KubeObject;
  }
}

/** What the first pass reads of an input: apiVersion, kind, metadata's names and namespace. */
export const headOf = (input: InputObject): KubeObject => (input instanceof HeldInput ? input.head : input.object);

/**
 * After each document of `name`: read up to `done` of `total` (a file's bytes, counted in characters read, so
 * about; stdin's characters), `objects` found in it so far.
 */
export type ParseProgress = (name: string, done: number, total: number, objects: number) => void;

/**
 * Reads the objects in `paths` (files, `-` for stdin, or directories: their .yaml, .yml and .json files):
 * multi-document YAML, `List`s unpacked.
 */
export async function readInputs(paths: readonly string[], cwd: string, opts: ReadInputsOptions = {}): Promise<InputObject[]> {
  const out: InputObject[] = [];
  for (const p of paths) {
    if (p === "-" && opts.stdin) {
      for (const o of parseObjects(await opts.stdin(), "(stdin)", opts.onDocument, opts.hold)) out.push(o);
      continue;
    }
    const full = resolve(cwd, p);
    let files = [p];
    let inDirectory = false;
    try {
      if ((await stat(full)).isDirectory()) {
        inDirectory = true;
        files = (await readdir(full))
          .filter((f) => [".yaml", ".yml", ".json"].includes(extname(f)))
          .sort()
          .map((f) => join(p, f));
      }
    } catch (err) {
      throw cannotRead(opts.flag, p, err);
    }
    for (const file of files) {
      let handle: FileHandle;
      try {
        handle = await open(resolve(cwd, file), "r");
      } catch (err) {
        throw cannotRead(opts.flag, file, err);
      }
      try {
        for (const o of await readObjects(handle, file, opts)) out.push(o);
      } catch (err) {
        // One stray file (a values.yaml, a kustomization) among a directory's manifests: said, skipped.
        if (!(inDirectory && opts.onSkip && err instanceof InputError) || err instanceof Unreadable) throw err;
        opts.onSkip(`${err.message}; skipped`);
      } finally {
        await handle.close();
      }
    }
  }
  return out;
}

/** A file that cannot be read or holds something that is no Kubernetes object (exit 1, naming file and document). */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InputError";
  }
}

/** A file that cannot be read (never skipped as a stray file of a directory). */
class Unreadable extends InputError {}

/**
 * The objects of the file open in `handle`, read and parsed {@link PIECE_BYTES} at a time (a 50 MB file's text is
 * never held whole), as {@link parseObjects} reads its whole text.
 */
async function readObjects(handle: FileHandle, name: string, opts: ReadInputsOptions): Promise<InputObject[]> {
  let size = 0;
  try {
    size = (await handle.stat()).size;
  } catch (err) {
    throw cannotRead(opts.flag, name, err);
  }
  const { onDocument } = opts;
  const reader = objectReader(name, opts.hold ?? false, onDocument && ((done, objects) => onDocument(name, Math.min(done, size), size, objects)));
  // As readFile(…, "utf8") decodes: a byte order mark is kept (the YAML lexer reads it), a piece may end mid-character.
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  const buffer = Buffer.allocUnsafe(PIECE_BYTES);
  for (;;) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(buffer, 0, PIECE_BYTES, null));
    } catch (err) {
      throw cannotRead(opts.flag, name, err);
    }
    if (bytesRead === 0) break;
    reader.push(decoder.decode(buffer.subarray(0, bytesRead), { stream: true }));
  }
  reader.push(decoder.decode());
  return reader.end();
}

/**
 * The objects in one file's text; `name` is used in `source` and messages. Documents are read one at a time, each
 * syntax tree dropped once its object is built.
 */
export function parseObjects(text: string, name: string, onDocument?: ParseProgress, hold = false): InputObject[] {
  const reader = objectReader(name, hold, onDocument && ((done, objects) => onDocument(name, done, text.length, objects)));
  reader.push(text);
  return reader.end();
}

/**
 * The objects of one file's text given in pieces: `push` each, then `end` for them all. `onDocument` is told after
 * each document, with the characters read up to its end and the objects so far.
 */
export function objectReader(
  name: string,
  hold = false,
  onDocument?: (done: number, objects: number) => void,
): { push(piece: string): void; end(): InputObject[] } {
  const lineCounter = new LineCounter();
  // As kubectl reads it (YAML 1.1, merge keys, aliases bounded by expanded size): manifest-yaml.ts.
  const documents = manifestDocumentReader(lineCounter);
  const out: InputObject[] = [];
  let i = 0;
  const add = (docs: Iterable<Document.Parsed>): void => {
    for (const doc of docs) {
      const before = out.length;
      addDocument(doc, `${name}#${++i}`, lineCounter, out);
      if (hold) for (let j = before; j < out.length; j++) out[j] = new HeldInput(out[j]!);
      onDocument?.(doc.range[2], out.length);
    }
  };
  return {
    push: (piece) => add(documents.push(piece)),
    end: () => {
      add(documents.end());
      return out;
    },
  };
}

/** The object (or a List's objects) of one document onto `out`; an empty document adds nothing. */
function addDocument(doc: Document.Parsed, where: string, lineCounter: LineCounter, out: InputObject[]): void {
  if (doc.errors.length > 0)
    throw new InputError(`${where}: line ${lineCounter.linePos(doc.errors[0]!.pos[0]).line}: ${doc.errors[0]!.message.split("\n")[0]}`);
  let value: unknown;
  try {
    value = manifestValue(doc);
  } catch (err) {
    throw new InputError(`${where}: ${errorMessage(err)}`);
  }
  if (value === null || value === undefined) return; // an empty document (a trailing ---)
  const check = (o: unknown, at: string): KubeObject => {
    if (!isObject(o)) throw new InputError(`${at}: not a Kubernetes object (a mapping with apiVersion and kind)`);
    for (const f of ["apiVersion", "kind"]) if (typeof o[f] !== "string" || !o[f]) throw new InputError(`${at}: missing ${f}`);
    if (o.metadata !== undefined && !isObject(o.metadata)) throw new InputError(`${at}: metadata must be a mapping`);
    return o;
  };
  const object = check(value, where);
  // The apiserver refuses a request body over 3 MiB (413); kubectl sends a List's items one by one. Measured as
  // JSON only for a document whose text is over 1 MiB: YAML's text is never much smaller than the JSON of it.
  const big = doc.range[2] - doc.range[0] > OBJECT_CHECK_FROM_BYTES;
  const sized = (o: KubeObject, at: string): KubeObject => (big ? withinRequestLimit(o, at) : o);
  if (object.kind === "List" || (String(object.kind).endsWith("List") && Array.isArray(object.items))) {
    (Array.isArray(object.items) ? object.items : []).forEach((item, j) =>
      out.push({ source: `${where}.${j + 1}`, object: sized(check(item, `${where}.items[${j}]`), `${where}.items[${j}]`) }),
    );
  } else {
    out.push({ source: where, object: sized(object, where) });
  }
}

/** Documents longer than this (text) have each object's JSON size checked against {@link MAX_EXPANDED_BYTES}. */
const OBJECT_CHECK_FROM_BYTES = 1024 * 1024;

/** `o`, unless its JSON is over the apiserver's request limit: then refused as the apiserver would (413). */
function withinRequestLimit(o: KubeObject, at: string): KubeObject {
  const bytes = Buffer.byteLength(JSON.stringify(o));
  if (bytes <= MAX_EXPANDED_BYTES) return o;
  const name = metaOf(o).name ?? metaOf(o).generateName ?? "";
  throw new InputError(
    `${at}: ${String(o.kind)} ${name} is ${bytes} bytes as JSON, over the apiserver's request limit of ${MAX_EXPANDED_BYTES} bytes (3 MiB): the apiserver would refuse it (413 Request Entity Too Large); make it smaller or split it`,
  );
}

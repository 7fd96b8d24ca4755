/**
 * Generators (fast-check) of admission requests for the fuzz suite: AdmissionReviews built from the
 * corpus (test/fixtures/corpus) and then damaged at random (values replaced, removed or retyped at every level of the
 * envelope and the object, unicode and `/` `~` `__proto__` keys, huge arrays, deep nesting), and raw
 * bodies that are truncated, corrupted or not JSON at all. Every case is plain data, so fast-check can
 * shrink a failure to a small reproduction.
 */
import fc from "fast-check";
import type { KubeObject } from "../../src/core/kube.js";
import { CORPUS_SKIP, corpusJobs, corpusObjects, corpusPods, type CorpusObject } from "../fixtures/corpus.js";
import { job as sampleJob } from "../fixtures/jobs.js";

/** One HTTP request to the admission server. */
export interface FuzzCase {
  /** What produced it, for the tallies and failure messages. */
  family: "pod" | "job" | "envelope" | "bytes" | "http";
  method: string;
  path: string;
  contentType: string | undefined;
  body: Buffer;
  /** More request headers (Content-Encoding). */
  headers?: Record<string, string>;
}

/** A short, printable form of a case for fast-check's counterexample report (bodies can be megabytes). */
export function describeCase(c: FuzzCase): string {
  const head = c.body.subarray(0, 400).toString("utf8");
  return `${c.family} ${c.method} ${c.path} (${c.contentType ?? "no content-type"}${c.headers ? `, ${JSON.stringify(c.headers)}` : ""}, ${c.body.length} bytes): ${head}${c.body.length > 400 ? "…" : ""}`;
}

function fuzzCase(c: FuzzCase): FuzzCase {
  return Object.defineProperty(c, fc.toStringMethod, { value: () => describeCase(c), enumerable: false });
}

/** The webhook paths; the only ones the in-process driver serves. */
export const WEBHOOK_PATHS = ["/mutate/pods", "/validate/pods", "/validate/jobs", "/mutate/jobs"] as const;

// ---------------------------------------------------------------------------------------------------
// Values and keys

/**
 * Any UTF-16 units, lone surrogates and control characters included (fc.string's "binary" unit does the
 * same but builds a table of every code point first, which costs most of a second).
 */
const utf16 = (maxLength: number): fc.Arbitrary<string> =>
  fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength }).map((units) => String.fromCharCode(...units));

/** Keys that break naive code: JSON-pointer escapes, prototype names, Quartermaster's own keys, unicode. */
const weirdKey: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "a/b",
      "~",
      "/",
      "~0",
      "~1",
      "a~1b",
      "~01",
      "x/y~z",
      "/~/",
      "a//b",
      "nvidia.com/gpu",
      "nvidia.com/mig-1g.5gb",
      "nvidia.com/mig-",
      "amd.com/gpu",
      "gpu",
      "cpu",
      "memory",
      "training.kubeflow.org/job-name",
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      "training.kubeflow.org/operator-name",
      "training.kubeflow.org/job-role",
      "quartermaster.dev/accelerator",
      "quartermaster.dev/gpu-partition",
      "quartermaster.dev/interruptible",
      "quartermaster.dev/mutations",
      "__proto__",
      "constructor",
      "prototype",
      "toString",
      "hasOwnProperty",
      "valueOf",
      "length",
      "",
      " ",
      "\u0000",
      "\ud800",
      "\u202e",
      "ключ/值",
      "🚀/gpu",
      "e\u0301",
      "a".repeat(300),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 12 }) },
  { weight: 1, arbitrary: utf16(8) },
);

/** Scalars that look like what the rules parse (quantities, enum values, names) and what they must not. */
const scalar: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      null,
      true,
      false,
      0,
      -0,
      1,
      -1,
      1.5,
      8,
      16,
      1e308,
      -1e308,
      2 ** 53 + 2,
      -(2 ** 31),
      "",
      "0",
      "1",
      "8",
      "16",
      "-1",
      "500m",
      "0.5",
      "1Gi",
      "1e3",
      "1E+400",
      "1e-400",
      "NaN",
      "Infinity",
      "0x10",
      ".5",
      "1.",
      "+1",
      "9999999999999999999999Ei",
      "1Ki1",
      "1 Gi",
      "true",
      "false",
      "null",
      // Quantities that once parsed to NaN, were slow, or passed a cap (issue 16): long, huge, tiny, negative.
      `8.${"0".repeat(309)}`,
      `136.${"0".repeat(309)}`,
      "1e1001",
      "1".padEnd(2000, "0"),
      `0.${"0".repeat(400)}1`,
      "-8",
      "8Ei",
      "9223372036854775808",
      "A100-SXM4-40GB",
      "none",
      "1g.5gb",
      "Exists",
      "Equal",
      "NoSchedule",
      "In",
      "Never",
      "OnFailure",
      "CREATE",
      "tensorflow",
      "pytorch",
      "Worker",
      "Master",
      "Chief",
      "PS",
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 16 }) },
  { weight: 1, arbitrary: utf16(16) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
);

/** A plain object with `entries` as own properties, `__proto__` included (assignment would set the prototype). */
function objectOf(entries: ReadonlyArray<readonly [string, unknown]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

const smallObject = fc.array(fc.tuple(weirdKey, scalar), { maxLength: 4 }).map(objectOf);

const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: smallObject },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(smallObject, { maxLength: 3 }) },
);

// ---------------------------------------------------------------------------------------------------
// Damage to a document

/**
 * One change to a document. `at` picks a node among the candidates in `scope` (modulo their number),
 * so a case stays valid whatever the document looks like, and shrinks towards the first node.
 */
export type Damage =
  | { op: "set"; scope: Scope; at: number; value: unknown }
  | { op: "delete"; scope: Scope; at: number }
  | { op: "retype"; scope: Scope; at: number; to: number }
  | { op: "addKey"; scope: Scope; at: number; key: string; value: unknown }
  | { op: "special"; where: Special; key: string; value: unknown }
  | { op: "dup"; scope: Scope; at: number }
  | { op: "grow"; scope: Scope; at: number; size: number }
  | { op: "nest"; scope: Scope; at: number; depth: number; array: boolean };

type Scope = "object" | "envelope" | "any";
type Special = "labels" | "annotations" | "limits" | "requests" | "nodeSelector" | "containerName" | "jobName" | "ownerName" | "runPolicy" | "subResource";

const scope = fc.constantFrom<Scope>("object", "object", "object", "object", "envelope", "any");
const at = fc.nat();

// Weights: about one case in sixty gets a huge array or a deep nest; they cost milliseconds each.
const damage: fc.Arbitrary<Damage> = fc.oneof(
  { weight: 30, arbitrary: fc.record({ op: fc.constant("set" as const), scope, at, value }) },
  { weight: 15, arbitrary: fc.record({ op: fc.constant("delete" as const), scope, at }) },
  { weight: 20, arbitrary: fc.record({ op: fc.constant("retype" as const), scope, at, to: fc.nat({ max: 7 }) }) },
  { weight: 15, arbitrary: fc.record({ op: fc.constant("addKey" as const), scope, at, key: weirdKey, value }) },
  {
    weight: 30,
    arbitrary: fc.record({
      op: fc.constant("special" as const),
      where: fc.constantFrom<Special>(
        "labels",
        "annotations",
        "limits",
        "requests",
        "nodeSelector",
        "containerName",
        "jobName",
        "ownerName",
        "runPolicy",
        "subResource",
      ),
      key: weirdKey,
      value: fc.oneof({ weight: 4, arbitrary: scalar }, { weight: 1, arbitrary: value }),
    }),
  },
  { weight: 10, arbitrary: fc.record({ op: fc.constant("dup" as const), scope, at }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("grow" as const), scope, at, size: fc.constantFrom(100, 300, 1000, 2000, 5000) }),
  },
  {
    // The apiserver's JSON decoder stops at 10,000 levels; go to it, and past V8's JSON.stringify limit.
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("nest" as const), scope, at, depth: fc.constantFrom(20, 100, 1000, 5000, 10_000), array: fc.boolean() }),
  },
);

interface Slot {
  parent: Record<string, unknown> | unknown[];
  key: string | number;
  value: unknown;
}

/** Nodes of `doc` below `root` (depth first, bounded), each with where it hangs. */
function slots(holder: Record<string, unknown>, rootKey: string, limit = 4000): Slot[] {
  const out: Slot[] = [];
  const visit = (parent: Slot["parent"], key: string | number, v: unknown): void => {
    if (out.length >= limit) return;
    out.push({ parent, key, value: v });
    if (Array.isArray(v)) v.forEach((c, i) => visit(v, i, c));
    else if (v && typeof v === "object") for (const k of Object.keys(v)) visit(v as Record<string, unknown>, k, (v as Record<string, unknown>)[k]);
  };
  if (rootKey in holder) visit(holder, rootKey, holder[rootKey]);
  return out;
}

function candidates(review: Record<string, unknown>, s: Scope): Slot[] {
  const request = review.request as Record<string, unknown> | undefined;
  if (s === "object") {
    return request && request.object && typeof request.object === "object" ? slots(request, "object").slice(1) : [];
  }
  if (s === "envelope") {
    // The envelope: every field of the review and of request, and one level into each, not the object.
    const out: Slot[] = [];
    for (const k of Object.keys(review)) out.push({ parent: review, key: k, value: review[k] });
    if (request && typeof request === "object" && !Array.isArray(request)) {
      for (const k of Object.keys(request)) {
        const v = request[k];
        out.push({ parent: request, key: k, value: v });
        if (k !== "object" && k !== "oldObject" && v && typeof v === "object" && !Array.isArray(v)) {
          for (const k2 of Object.keys(v)) out.push({ parent: v as Record<string, unknown>, key: k2, value: (v as Record<string, unknown>)[k2] });
        }
      }
    }
    return out;
  }
  return slots({ review }, "review").slice(1);
}

function put(slot: Slot, v: unknown): void {
  if (Array.isArray(slot.parent)) slot.parent[slot.key as number] = v;
  else Object.defineProperty(slot.parent, slot.key, { value: v, enumerable: true, writable: true, configurable: true });
}

function remove(slot: Slot): void {
  if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
  else delete slot.parent[slot.key as string];
}

/** A value of another JSON type than `v`. */
function retyped(v: unknown, to: number): unknown {
  const options: unknown[] = [null, true, 0, "", [], {}, ["x"], { x: 1 }];
  const kind = (x: unknown): string => (x === null ? "null" : Array.isArray(x) ? "array" : typeof x);
  const others = options.filter((o) => kind(o) !== kind(v));
  return structuredClone(others[to % others.length]);
}

/** Marker replaced by deep nesting after serialisation (V8 cannot stringify 5,000 levels). */
const DEEP = "\u0000qm-deep:";

/** An object, or the named map inside it, created when missing (or replaced when not an object). */
function mapAt(holder: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = holder[key];
  if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  const fresh: Record<string, unknown> = {};
  Object.defineProperty(holder, key, { value: fresh, enumerable: true, writable: true, configurable: true });
  return fresh;
}

function special(review: Record<string, unknown>, d: Extract<Damage, { op: "special" }>): void {
  const request = review.request as Record<string, unknown>;
  const obj = request?.object;
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return;
  const o = obj as Record<string, unknown>;
  const meta = mapAt(o, "metadata");
  const containers = (): Array<Record<string, unknown>> => {
    const spec = mapAt(o, "spec");
    const tmplSpec = (spec.template as { spec?: Record<string, unknown> } | undefined)?.spec;
    const list = (Array.isArray(spec.containers) ? spec.containers : Array.isArray(tmplSpec?.containers) ? tmplSpec!.containers : undefined) as
      unknown[] | undefined;
    return (list ?? []).filter((c): c is Record<string, unknown> => !!c && typeof c === "object" && !Array.isArray(c));
  };
  const defineIn = (map: Record<string, unknown>): void => {
    Object.defineProperty(map, d.key, { value: d.value, enumerable: true, writable: true, configurable: true });
  };
  switch (d.where) {
    case "labels":
    case "annotations":
      return defineIn(mapAt(meta, d.where));
    case "nodeSelector":
      return defineIn(mapAt(mapAt(o, "spec"), "nodeSelector"));
    case "limits":
    case "requests": {
      const c = containers()[0];
      if (c) defineIn(mapAt(mapAt(c, "resources"), d.where));
      return;
    }
    case "containerName": {
      const c = containers()[0];
      if (c) c.name = d.key;
      return;
    }
    case "jobName":
      mapAt(meta, "labels")["training.kubeflow.org/job-name"] = typeof d.value === "string" ? d.value : d.key;
      return;
    case "runPolicy": {
      // A job's spec.runPolicy (what /mutate/jobs fills) replaced whole, or one of its fields: null, retyped, odd.
      const spec = mapAt(o, "spec");
      const fields = ["ttlSecondsAfterFinished", "cleanPodPolicy", "activeDeadlineSeconds", "backoffLimit"];
      if (d.key.length % 5 === 4) Object.defineProperty(spec, "runPolicy", { value: d.value, enumerable: true, writable: true, configurable: true });
      else Object.defineProperty(mapAt(spec, "runPolicy"), fields[d.key.length % 5]!, { value: d.value, enumerable: true, writable: true, configurable: true });
      return;
    }
    case "subResource": {
      // An UPDATE of a subresource the webhooks are registered for (a job's /scale, pods/resize) or not
      // (status): the scale's object is an autoscaling/v1 Scale whose spec.replicas is the damaged value.
      const sub = (["scale", "resize", "status"] as const)[d.key.length % 3]!;
      request.operation = "UPDATE";
      request.subResource = sub;
      request.oldObject = structuredClone(o);
      if (sub === "scale") {
        request.object = { apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: meta.name, namespace: meta.namespace }, spec: { replicas: d.value } };
      } else {
        const c = containers()[0];
        if (c) mapAt(mapAt(c, "resources"), "limits").cpu = d.value;
      }
      return;
    }
    case "ownerName": {
      const refs = meta.ownerReferences;
      if (Array.isArray(refs) && refs[0] && typeof refs[0] === "object") (refs[0] as Record<string, unknown>).name = d.value;
      return;
    }
  }
}

/** Applies `damage` to `review` in place. */
export function applyDamage(review: Record<string, unknown>, damage: readonly Damage[]): void {
  // One huge array and one deep nest per case at most: a second could multiply the first (elements are shared).
  let grown = false;
  let nested = false;
  for (const d of damage) {
    if ((d.op === "grow" && grown) || (d.op === "nest" && nested)) continue;
    grown ||= d.op === "grow";
    nested ||= d.op === "nest";
    if (d.op === "special") {
      special(review, d);
      continue;
    }
    const list = candidates(review, d.scope);
    if (list.length === 0) continue;
    const slot = list[d.at % list.length]!;
    switch (d.op) {
      case "set":
        put(slot, structuredClone(d.value));
        break;
      case "delete":
        remove(slot);
        break;
      case "retype":
        put(slot, retyped(slot.value, d.to));
        break;
      case "addKey": {
        const target = slot.value && typeof slot.value === "object" && !Array.isArray(slot.value) ? slot.value : undefined;
        if (target) Object.defineProperty(target, d.key, { value: structuredClone(d.value), enumerable: true, writable: true, configurable: true });
        else put(slot, objectOf([[d.key, structuredClone(d.value)]]));
        break;
      }
      case "dup":
        if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 0, structuredClone(slot.value));
        else if (Array.isArray(slot.value) && slot.value.length > 0) slot.value.push(structuredClone(slot.value[0]));
        break;
      case "grow": {
        const arr = Array.isArray(slot.value) && slot.value.length > 0 ? slot.value : [slot.value ?? "x"];
        const grown = Array.from({ length: d.size }, (_, i) => arr[i % arr.length]);
        put(slot, grown);
        break;
      }
      case "nest":
        put(slot, `${DEEP}${d.depth}:${d.array ? "a" : "o"}`);
        break;
    }
  }
}

/** JSON text of `doc` with every deep-nesting marker expanded. */
export function serialize(doc: unknown): string {
  const text = JSON.stringify(doc);
  if (!text.includes("\\u0000qm-deep:")) return text;
  return text.replace(/"\\u0000qm-deep:(\d+):([ao])"/g, (_m, depth: string, kind: string) => {
    const n = Number(depth);
    return kind === "a" ? `${"[".repeat(n)}1${"]".repeat(n)}` : `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;
  });
}

// ---------------------------------------------------------------------------------------------------
// Base documents from the corpus

let seq = 0;
const uidOf = (): string => `fuzz-${(++seq).toString(16).padStart(8, "0")}-0000-4000-8000-000000000000`;

const gvr = (resource: string, group = "", version = "v1") => ({ group, version, resource });

function podReview(pod: KubeObject, operation: string): Record<string, unknown> {
  const meta = (pod.metadata ?? {}) as { namespace?: string; name?: string };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: uidOf(),
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: gvr("pods"),
      requestKind: { group: "", version: "v1", kind: "Pod" },
      requestResource: gvr("pods"),
      name: meta.name ?? "",
      namespace: meta.namespace ?? "default",
      operation,
      userInfo: { username: "system:serviceaccount:kubeflow:training-operator", uid: "u-1", groups: ["system:serviceaccounts", "system:authenticated"] },
      object: { ...structuredClone(pod), metadata: { ...structuredClone(pod.metadata as object), namespace: meta.namespace ?? "default" } },
      oldObject: operation === "UPDATE" ? structuredClone(pod) : null,
      dryRun: false,
      options: { kind: "CreateOptions", apiVersion: "meta.k8s.io/v1" },
    },
  };
}

function jobReview(job: KubeObject, plural: string, group: string, version: string, operation: string): Record<string, unknown> {
  const meta = job.metadata as { namespace: string; name: string };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: uidOf(),
      kind: { group, version, kind: String(job.kind) },
      resource: gvr(plural, group, version),
      name: meta.name,
      namespace: meta.namespace,
      operation,
      userInfo: { username: "alice", groups: ["system:authenticated"] },
      object: structuredClone(job),
      oldObject: operation === "UPDATE" ? structuredClone(job) : null,
      dryRun: false,
    },
  };
}

export interface Corpus {
  pods: KubeObject[];
  jobs: Array<{ job: KubeObject; plural: string; group: string; version: string }>;
}

/**
 * The corpus, or, when QM_CORPUS_DIR names a directory without it (CORPUS_SKIP), a small built-in sample: one job of every
 * default kind with a GPU container, unpacked into pods the same way, plus a bare GPU pod.
 */
export function loadCorpus(): Corpus {
  const objects = CORPUS_SKIP ? sampleObjects() : corpusObjects();
  return {
    pods: corpusPods(objects).map((p) => p.pod),
    jobs: corpusJobs(objects).map(({ job, kind }) => ({ job, plural: kind.plural, group: kind.group, version: kind.version })),
  };
}

function sampleObjects(): CorpusObject[] {
  const gpu = { limits: { "nvidia.com/gpu": "2", cpu: "4", memory: "16Gi" } };
  const withGpu = (o: KubeObject): KubeObject => JSON.parse(JSON.stringify(o).replace(/"image":"img"/g, `"image":"img","resources":${JSON.stringify(gpu)}`));
  const replicas: Record<string, Record<string, number>> = {
    TFJob: { Chief: 1, PS: 1, Worker: 2 },
    PyTorchJob: { Master: 1, Worker: 2 },
    MXJob: { Scheduler: 1, Server: 1, Worker: 2 },
    XGBoostJob: { Master: 1, Worker: 2 },
    PaddleJob: { Master: 1, Worker: 2 },
    JAXJob: { Worker: 2 },
    Caffe2Job: { Worker: 2 },
  };
  return [
    ...Object.entries(replicas).map(([kind, r]) => ({ file: "sample.yaml", object: withGpu(sampleJob(kind, `sample-${kind.toLowerCase()}`, "team-a", r)) })),
    {
      file: "sample.yaml",
      object: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "gpu-pod", namespace: "team-a" },
        spec: { containers: [{ name: "main", image: "img", resources: gpu }] },
      },
    },
  ];
}

// ---------------------------------------------------------------------------------------------------
// Cases

const json = "application/json";

/** `review` (a fresh object: fast-check may map the same generated value again while shrinking) damaged. */
function reviewCase(family: FuzzCase["family"], path: string, review: Record<string, unknown>, damage: readonly Damage[]): FuzzCase {
  applyDamage(review, damage);
  return fuzzCase({ family, method: "POST", path, contentType: json, body: Buffer.from(serialize(review)) });
}

/** Bytes that are not UTF-8, or are surprising in it. */
const oddBytes = fc.constantFrom(
  [0xff],
  [0xfe, 0xff],
  [0xc3, 0x28],
  [0xed, 0xa0, 0x80],
  [0xc0, 0xaf],
  [0xf4, 0x90, 0x80, 0x80],
  [0x00],
  [0xef, 0xbb, 0xbf],
  [0x22],
  [0x5c],
  [0x7b],
  [0x7d],
);

type Corruption =
  | { kind: "truncate"; at: number }
  | { kind: "flip"; at: number[]; byte: number }
  | { kind: "insert"; at: number; bytes: readonly number[] }
  | { kind: "bom" }
  | { kind: "trailing"; text: string }
  | { kind: "duplicateKey" }
  | { kind: "hugeNumber" }
  | { kind: "replace"; text: string }
  | { kind: "random"; bytes: Uint8Array }
  | { kind: "wrapped"; inner: unknown };

const corruption: fc.Arbitrary<Corruption> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("flip" as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), byte: fc.nat({ max: 255 }) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: oddBytes }) },
  { weight: 1, arbitrary: fc.constant({ kind: "bom" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("trailing" as const), text: fc.constantFrom("}", "x", "\u0000", " \n\t", ",{}", "{}") }) },
  { weight: 1, arbitrary: fc.constant({ kind: "duplicateKey" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "hugeNumber" as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("replace" as const),
      text: fc.oneof(
        fc.constantFrom(
          "",
          "null",
          "[]",
          "{}",
          '""',
          "0",
          "true",
          "-",
          "{",
          "[",
          '{"apiVersion":',
          "\u0000",
          "{}}",
          "[{}]",
          '{"request":null}',
          "1e400",
          '"\\ud800"',
        ),
        utf16(40),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("random" as const), bytes: fc.uint8Array({ maxLength: 200 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("wrapped" as const), inner: value }) },
);

function corrupt(text: string, c: Corruption): Buffer {
  const buf = Buffer.from(text);
  switch (c.kind) {
    case "truncate":
      return buf.subarray(0, c.at % buf.length);
    case "flip": {
      const out = Buffer.from(buf);
      for (const i of c.at) out[i % out.length] = c.byte;
      return out;
    }
    case "insert": {
      const i = c.at % (buf.length + 1);
      return Buffer.concat([buf.subarray(0, i), Buffer.from(c.bytes), buf.subarray(i)]);
    }
    case "bom":
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), buf]);
    case "trailing":
      return Buffer.concat([buf, Buffer.from(c.text)]);
    case "duplicateKey":
      return Buffer.from(text.replace('"request":', '"request":{"uid":"dup"},"request":'));
    case "hugeNumber":
      return Buffer.from(text.replace(/:(-?\d+)([,}\]])/, ":1e400$2"));
    case "replace":
      return Buffer.from(c.text);
    case "random":
      return Buffer.from(c.bytes);
    case "wrapped":
      return Buffer.from(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${serialize(c.inner)}}`);
  }
}

const operation = fc.constantFrom("CREATE", "CREATE", "CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT");
const damages = (max: number) => fc.array(damage, { maxLength: max });

/** Every kind of case the in-process driver can serve (webhook paths, POST). */
export function fuzzCases(corpus: Corpus): fc.Arbitrary<FuzzCase> {
  // fast-check builds lookup tables for unicode strings per arbitrary instance: build each once.
  let cached = built.get(corpus);
  if (!cached) built.set(corpus, (cached = buildFuzzCases(corpus)));
  return cached;
}

const built = new WeakMap<Corpus, fc.Arbitrary<FuzzCase>>();

function buildFuzzCases(corpus: Corpus): fc.Arbitrary<FuzzCase> {
  const pod = fc.nat({ max: corpus.pods.length - 1 });
  const job = fc.nat({ max: corpus.jobs.length - 1 });
  // Which corpus document, built afresh by reviewOf() in each case's own map.
  const anyReview = fc.oneof(
    fc.record({ kind: fc.constant("pod" as const), i: pod, op: operation }),
    fc.record({ kind: fc.constant("job" as const), i: job, op: operation }),
  );
  const reviewOf = (d: { kind: "pod" | "job"; i: number; op: string }): Record<string, unknown> => {
    if (d.kind === "pod") return podReview(corpus.pods[d.i]!, d.op);
    const j = corpus.jobs[d.i]!;
    return jobReview(j.job, j.plural, j.group, j.version, d.op);
  };
  return fc.oneof(
    {
      weight: 45,
      arbitrary: fc
        .record({ pod, operation, path: fc.constantFrom("/mutate/pods", "/mutate/pods", "/validate/pods"), damage: damages(4) })
        .map((g) => reviewCase("pod", g.path, podReview(corpus.pods[g.pod]!, g.operation), g.damage)),
    },
    {
      weight: 12,
      arbitrary: fc
        .record({
          job,
          operation: fc.constantFrom("CREATE", "UPDATE"),
          path: fc.constantFrom("/validate/jobs", "/mutate/jobs", "/mutate/jobs"),
          damage: damages(4),
        })
        .map((g) => {
          const j = corpus.jobs[g.job]!;
          return reviewCase("job", g.path, jobReview(j.job, j.plural, j.group, j.version, g.operation), g.damage);
        }),
    },
    {
      weight: 15,
      arbitrary: fc
        .record({
          review: anyReview,
          path: fc.constantFrom(...WEBHOOK_PATHS),
          damage: fc.array(
            damage.map((d) => ("scope" in d ? { ...d, scope: "envelope" as const } : d)),
            { minLength: 1, maxLength: 3 },
          ),
        })
        .map((g) => reviewCase("envelope", g.path, reviewOf(g.review), g.damage)),
    },
    {
      weight: 25,
      arbitrary: fc
        .record({ review: anyReview, path: fc.constantFrom(...WEBHOOK_PATHS), corruption })
        .map((g): FuzzCase =>
          fuzzCase({ family: "bytes", method: "POST", path: g.path, contentType: json, body: corrupt(serialize(reviewOf(g.review)), g.corruption) }),
        ),
    },
    {
      weight: 3,
      arbitrary: fc
        .record({
          review: anyReview,
          path: fc.constantFrom(...WEBHOOK_PATHS),
          contentType: fc.constantFrom(
            undefined,
            "",
            "text/plain",
            "application/json; charset=latin1",
            "application/json; charset=UTF-8",
            "APPLICATION/JSON",
            "application/json;",
            "application/jsonx",
            "application/yaml",
            "multipart/form-data; boundary=x",
          ),
        })
        .map((g): FuzzCase =>
          fuzzCase({ family: "http", method: "POST", path: g.path, contentType: g.contentType, body: Buffer.from(serialize(reviewOf(g.review))) }),
        ),
    },
  );
}

/**
 * Requests only a whole server answers: other methods and paths (404, 405; paths are exact), and bodies
 * with a Content-Encoding (415 unless identity).
 */
export function httpOnlyCases(corpus: Corpus): fc.Arbitrary<FuzzCase> {
  return fc
    .record({
      method: fc.constantFrom("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "POST", "HEAD"),
      path: fc.constantFrom(
        "/mutate/pods/",
        "/MUTATE/PODS",
        "/mutate/pods?timeout=10s",
        "/validate/pods?timeout=5s&x=%00",
        "/validate",
        "/",
        "/mutate/pods/../validate/pods",
        "/%2e%2e/",
        "/healthz",
        "/readyz",
        "/metrics",
        "/mutate/services",
        "/validate/jobs%2F",
        "/mutate//pods",
      ),
      pod: fc.nat({ max: corpus.pods.length - 1 }),
      encoding: fc.option(fc.constantFrom("gzip", "br", "deflate", "identity", "IDENTITY", "gzip, identity", "x-unknown", ""), { nil: undefined }),
    })
    .map((g) =>
      fuzzCase({
        family: "http" as const,
        method: g.method,
        path: g.path,
        contentType: json,
        body: g.method === "GET" || g.method === "HEAD" ? Buffer.alloc(0) : Buffer.from(serialize(podReview(corpus.pods[g.pod]!, "CREATE"))),
        ...(g.encoding === undefined ? {} : { headers: { "content-encoding": g.encoding } }),
      }),
    );
}

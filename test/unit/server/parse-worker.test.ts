/**
 * The body parser worker's script (`src/server/parse-worker.ts`) is made of its functions' own text: run it
 * in a bare context (nothing but `require` for `node:worker_threads`), as the worker does, to show that the
 * functions are self-contained under the loader this test runs with (tsx), and answer as the module does.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runInNewContext } from "node:vm";
import { parseBody, workerSource, type ParseReply, type WorkerParseOptions } from "../../../src/server/parse-worker.js";

const options: WorkerParseOptions = { maxItems: 4, maxDepth: 10, namesKey: "resourceNames", claimsKey: "claimNames", nice: 0 };

function script(): (id: number, body: ArrayBuffer) => ParseReply {
  let onMessage: ((m: { id: number; body: ArrayBuffer }) => void) | undefined;
  let reply: ParseReply | undefined;
  const parentPort = { on: (_: string, f: typeof onMessage) => (onMessage = f), postMessage: (m: ParseReply) => (reply = m) };
  runInNewContext(workerSource(), {
    require: () => ({ parentPort, workerData: { parse: options } }),
    TextDecoder,
    Uint8Array,
    JSON,
    Array,
    Object,
    Set,
    String,
    Error,
  });
  return (id, body) => {
    onMessage!({ id, body });
    return reply!;
  };
}

/** A value with each array as its length, stand-in names and elements (holes as null), comparable across contexts. */
function plain(v: unknown): unknown {
  if (Array.isArray(v))
    return {
      length: v.length,
      names: plain((v as unknown as Record<string, unknown>).resourceNames),
      claims: plain((v as unknown as Record<string, unknown>).claimNames),
      items: Array.from(v, (x) => plain(x ?? null)),
    };
  if (typeof v === "object" && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** A pod's resourceClaims entries naming these claims (`t:<name>`: a template), and one entry naming neither. */
const claimEntries = (names: string[]): unknown[] => [
  ...names.map((n, i) => (n.startsWith("t:") ? { name: `e${i}`, resourceClaimTemplateName: n.slice(2) } : { name: `e${i}`, resourceClaimName: n })),
  { name: "neither" },
];

const bytes = (text: string): ArrayBuffer => new TextEncoder().encode(text).buffer as ArrayBuffer;

describe("the parser worker's script", () => {
  const run = script();
  const cases = [
    JSON.stringify({ spec: { containers: Array.from({ length: 6 }, (_, i) => ({ name: `c${i}`, resources: { limits: { "nvidia.com/gpu": "1" } } })) } }),
    JSON.stringify({ spec: { containers: [{ name: "a" }] } }),
    JSON.stringify({ spec: { resourceClaims: claimEntries(["a", "b", "a", "t:x", "b", "c"]) } }),
    JSON.stringify({ spec: { resourceClaims: claimEntries(["a", "b", "c", "d", "t:a", "e"]) } }),
    JSON.stringify([1, 2, 3, 4, 5, 6]),
    "[".repeat(12) + "]".repeat(12),
    "{nope",
  ];
  for (const [i, text] of cases.entries()) {
    it(`answers case ${i} as the module's functions do`, () => {
      const fromScript = run(i, bytes(text));
      const direct = parseBody(i, bytes(text), options, new TextDecoder("utf-8", { ignoreBOM: true }));
      assert.deepEqual(plain(fromScript), plain(direct));
    });
  }
  it("stubs a long array to holes of its length with its resource names", () => {
    const r = run(9, bytes(cases[0]!)) as { ok: true; value: { spec: { containers: unknown[] } }; stubbed: boolean };
    assert.equal(r.stubbed, true);
    assert.equal(r.value.spec.containers.length, 6);
    assert.equal(0 in r.value.spec.containers, false);
    assert.deepEqual([...((r.value.spec.containers as unknown as Record<string, string[]>).resourceNames ?? [])], ["nvidia.com/gpu"]);
  });
  const claimCases = [
    { name: "distinct claims and templates, in order, with their count", text: cases[2]!, want: { count: 4, names: ["c/a", "c/b", "t/x", "c/c"] } },
    { name: "more distinct than the worker keeps: the count, no names", text: cases[3]!, want: { count: 6, names: null } },
  ];
  for (const tc of claimCases)
    it(`stubs a long resourceClaims list with the claims it names: ${tc.name}`, () => {
      const r = run(10, bytes(tc.text)) as { ok: true; value: { spec: { resourceClaims: unknown[] } } };
      const claims = (r.value.spec.resourceClaims as unknown as Record<string, { count: number; names: string[] | null }>).claimNames!;
      assert.deepEqual({ count: claims.count, names: claims.names && [...claims.names] }, tc.want);
    });
});

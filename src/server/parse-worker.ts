/**
 * @module
 * The body parser worker's code (`parse.ts`), as TypeScript that tsc checks. The worker runs it as a script
 * (`new Worker(source, { eval: true })`) made of these functions' own text ({@link workerSource}), so the same
 * code runs from source under tsx (whose loader Node 20 workers do not get) and from the built `dist/`.
 *
 * So every function here must be self-contained: it may use its parameters, globals, and the other
 * functions listed in {@link workerSource} by name; no imports, no module constants, nothing captured.
 * Under tsx a named inner function or arrow comes out wrapped in `__name(...)` (esbuild's keepNames); the
 * script defines that as the identity, but the functions here keep to top-level functions anyway.
 */

/** What the worker is told at start: arrays longer than `maxItems` become stand-ins; nesting past `maxDepth` refuses. */
export interface WorkerParseOptions {
  maxItems: number;
  maxDepth: number;
  /** The stand-in's property holding its elements' resource names (`core/stand-in.ts`, STAND_IN_NAMES). */
  namesKey: string;
  /** The stand-in's property holding the claims its elements name, as pod `resourceClaims` entries (STAND_IN_CLAIMS). */
  claimsKey: string;
  /** How many nice steps the worker thread runs below the process ({@link lowerThreadPriority}); 0 leaves it as the process's. */
  nice: number;
}

/**
 * Lowers this thread's scheduling priority by `nice` steps below the process's (Linux: `setpriority(PRIO_PROCESS, tid)`
 * names one thread; its id is /proc/thread-self's last part, read by the calling thread itself). The worker parses
 * only large bodies, sent by the few tenants whose reviews are large: where it and the event loop want the same CPU,
 * the event loop (every other tenant's small review) goes first, and the large body waits, a cost to the tenant who
 * sent it (issue 46). Nowhere else (no /proc, or not permitted): nothing, and the worker runs as before. Returns the
 * nice value set.
 */
export function lowerThreadPriority(
  nice: number,
  readlink: (path: string) => string,
  os: { getPriority(id: number): number; setPriority(id: number, nice: number): void },
): number | undefined {
  if (!(nice > 0)) return undefined;
  try {
    const tid = Number(readlink("/proc/thread-self").split("/").pop());
    if (!Number.isInteger(tid) || tid <= 0) return undefined;
    const lowered = Math.min(19, os.getPriority(tid) + nice);
    os.setPriority(tid, lowered);
    return lowered;
  } catch {
    return undefined;
  }
}

/** The worker's reply to one body. */
export type ParseReply = { id: number; ok: true; value: unknown; stubbed: boolean } | { id: number; ok: false; message: string } | { id: number; deep: true };

/**
 * True when the JSON text in `bytes` nests arrays and objects deeper than `max`: `[` and `{` counted
 * outside strings (UTF-8 continuation bytes are never ASCII). One pass, stops at the first level past `max`;
 * nothing is allocated. Malformed text (an unterminated string, unbalanced closers) is left for JSON.parse.
 * A string is skipped to its closing quote with `indexOf` (memchr in native code) rather than byte by byte:
 * most of a review's bytes are in strings, and the byte loop was ~8 % of a small review's CPU on the main thread
 * (bench:admission's profile); measured on the 8 KB training-pod review, 13 µs a scan byte by byte, 7 µs now.
 * A 7 MB body of 3.5M nested arrays is refused after its first 1,001 bytes.
 * Run in the worker and, for a small body, on the main thread (`app.ts`).
 */
export function nestedDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === 0x22) {
      i = closingQuote(bytes, i + 1);
      if (i < 0) return false;
    } else if (b === 0x5b || b === 0x7b) {
      if (++depth > max) return true;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return false;
}

/**
 * The index of the quote that ends the string whose content starts at `from`, or -1 when it is not ended: the
 * next quote not escaped, one with an even run of backslashes before it (`\\"` ends a string, `\"` does not).
 */
function closingQuote(bytes: Uint8Array, from: number): number {
  for (;;) {
    const q = bytes.indexOf(0x22, from);
    if (q < 0) return -1;
    let k = q - 1;
    while (k >= from && bytes[k] === 0x5c) k--;
    if ((q - 1 - k) % 2 === 0) return q;
    from = q + 1;
  }
}

/** An array longer than `maxItems`: sent back as a stand-in. */
export function isLongArray(v: unknown, maxItems: number): v is unknown[] {
  return Array.isArray(v) && v.length > maxItems;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The distinct ResourceClaims and ResourceClaimTemplates the elements of `list` name, as a pod's `resourceClaims`
 * entries do (`claimReferences` in core/dra.ts: an object with a string `name`, its string `resourceClaimName`
 * before its string `resourceClaimTemplateName`), each as `c/<name>` or `t/<name>`: their count, and the names
 * themselves when at most `maxItems` (else null).
 */
export function claimNamesOf(list: readonly unknown[], maxItems: number): { count: number; names: string[] | null } {
  const keys = new Set<string>();
  for (let i = 0; i < list.length; i++) {
    const e = list[i];
    if (!isPlainObject(e) || typeof e.name !== "string") continue;
    if (typeof e.resourceClaimName === "string") keys.add(`c/${e.resourceClaimName}`);
    else if (typeof e.resourceClaimTemplateName === "string") keys.add(`t/${e.resourceClaimTemplateName}`);
  }
  return { count: keys.size, names: keys.size <= maxItems ? [...keys] : null };
}

/**
 * The stand-in of a long array: holes of its length (it crosses the thread boundary as its length), and
 * the distinct resource names its elements request or limit (at most `maxItems` of them, else null), for
 * the guards, and the distinct claims its elements name, for the claim-name bound (`core/stand-in.ts`).
 */
export function standIn(list: readonly unknown[], options: WorkerParseOptions): unknown[] {
  const out: unknown[] = new Array(list.length);
  const names = new Set<string>();
  let kept = true;
  for (let i = 0; i < list.length && kept; i++) {
    const c = list[i];
    const resources = isPlainObject(c) ? c.resources : undefined;
    if (!isPlainObject(resources)) continue;
    for (const side of [resources.requests, resources.limits]) {
      if (!isPlainObject(side)) continue;
      for (const name of Object.keys(side)) {
        names.add(name);
        if (names.size > options.maxItems) {
          kept = false;
          break;
        }
      }
      if (!kept) break;
    }
  }
  Reflect.set(out, options.namesKey, kept ? [...names] : null);
  Reflect.set(out, options.claimsKey, claimNamesOf(list, options.maxItems));
  return out;
}

/**
 * Replaces, in place, every long array below `root` by its stand-in; true when one was. "deep" for a
 * document nested deeper than `maxDepth`, which the byte scan already refused: its structured clone back to
 * the main thread could overflow the stack there (a 'messageerror', no reply).
 */
export function stubLongArrays(root: unknown, options: WorkerParseOptions): boolean | "deep" {
  let stubbed = false;
  const stack: unknown[] = [root];
  const depths: number[] = [0];
  while (stack.length > 0) {
    const v = stack.pop();
    const depth = depths.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > options.maxDepth) return "deep";
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (isLongArray(v[i], options.maxItems)) {
          v[i] = standIn(v[i] as unknown[], options);
          stubbed = true;
        } else {
          stack.push(v[i]);
          depths.push(depth + 1);
        }
      }
    } else {
      const o = v as Record<string, unknown>;
      for (const k in o) {
        // An own "__proto__" key (JSON.parse makes one) shadows the prototype setter: "=" replaces the own value.
        if (isLongArray(o[k], options.maxItems)) {
          o[k] = standIn(o[k], options);
          stubbed = true;
        } else {
          stack.push(o[k]);
          depths.push(depth + 1);
        }
      }
    }
  }
  return stubbed;
}

/** One body, start to reply: refused unparsed when too deep, else parsed and its long arrays stubbed. */
export function parseBody(id: number, body: ArrayBuffer, options: WorkerParseOptions, decoder: TextDecoder): ParseReply {
  // Refused before parsing: the main thread is told "deep" and answers 400, parsing nothing.
  if (nestedDeeperThan(new Uint8Array(body), options.maxDepth)) return { id, deep: true };
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(body));
  } catch (err) {
    return { id, ok: false, message: err instanceof Error ? err.message : String(err) };
  }
  let stubbed: boolean | "deep";
  if (isLongArray(value, options.maxItems)) {
    value = standIn(value, options);
    stubbed = true;
  } else {
    stubbed = stubLongArrays(value, options);
  }
  return stubbed === "deep" ? { id, deep: true } : { id, ok: true, value, stubbed };
}

/**
 * The worker's script: the functions above by their own text, and the message loop. It reads its
 * {@link WorkerParseOptions} from `workerData.parse`.
 */
export function workerSource(): string {
  const functions = [nestedDeeperThan, closingQuote, isLongArray, isPlainObject, claimNamesOf, standIn, stubLongArrays, parseBody, lowerThreadPriority];
  return `
// esbuild's keepNames helper, should tsx have put one in the functions' text.
var __name = (fn) => fn;
const { parentPort, workerData } = require("node:worker_threads");
${functions.map((f) => f.toString()).join("\n")}
const options = workerData.parse;
lowerThreadPriority(options.nice, require("node:fs").readlinkSync, require("node:os"));
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
parentPort.on("message", ({ id, body }) => parentPort.postMessage(parseBody(id, body, options, decoder)));
`;
}

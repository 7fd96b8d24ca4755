/**
 * @module
 * Kubernetes resource quantities (`500m`, `0.5Gi`, `1e3`, `2.5`), parsed as k8s.io/apimachinery
 * `pkg/api/resource/quantity.go` (`ParseQuantity`) does, into an exact integer count of nano-units (a BigInt),
 * so no comparison against a limit ever rounds:
 *
 *   quantity ::= signedNumber suffix
 *   signedNumber ::= [+-] number ;  number ::= digits | digits "." digits? | "." digits
 *   suffix ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m "" k M G T P E) | ("e"|"E") [+-] digits
 *
 * As upstream, a non-zero value finer than a nano-unit is rounded up, away from zero, to the next nano-unit
 * (`inf.RoundUp` at `Nano` scale: "if you want some resources, you should get some resources").
 *
 * Bounds (upstream has none on length, and keeps decimal values of any size as `inf.Dec`):
 * - at most {@link MAX_QUANTITY_LENGTH} characters. No real quantity comes near: the largest value in range
 *   written out with nano precision is 30 characters. The bound keeps one parse cheap (a few µs on 1,024
 *   digits; a 1M-digit string took 150–400 ms) and bounds each cache key;
 * - magnitude at most 2^63 − 1 units, upstream's `maxAllowed` (the cap `ParseQuantity` applies to binary-SI
 *   values, and the range of `Quantity.Value()`); anything larger is refused rather than clamped, so
 *   `cpu: "1e1001"` in a policy is an error, not an unlimited cap.
 * Upstream quirks not copied (both are refused here, which fails closed): a bare sign or "." parsing as 0, and
 * exponents beyond int32 wrapping (`int32(parsed)`).
 *
 * Written by hand because no maintained npm package implements this grammar exactly (@kubernetes/client-node's
 * internal `quantityToScalar` throws on fractional binary values such as `0.5Gi` and uses floats).
 * Floats appear only in {@link toNumber}, for messages and display.
 */

/** An exact value in nano-units (value × 10⁹). Shared: never modify one. */
export interface Quantity {
  readonly nano: bigint;
  /** The text it was parsed from (or a canonical form, for sums). */
  readonly text: string;
}

/** Longest quantity string accepted. */
export const MAX_QUANTITY_LENGTH = 1024;
/** Largest magnitude accepted, in units: upstream's `maxAllowed` (max int64). */
export const MAX_QUANTITY_UNITS = (1n << 63n) - 1n;
const NANO = 1_000_000_000n;
const MAX_NANO = MAX_QUANTITY_UNITS * NANO;
/** Decimal digits of MAX_NANO (9223372036854775807000000000): a value with more integer digits is out of range. */
const MAX_NANO_DIGITS = MAX_NANO.toString().length;

const BINARY: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
// Linear: no two alternatives can match the same prefix, and the input is length-checked first.
const GRAMMAR = /^([+-]?)(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?\d+)|(n|u|m|k|M|G|T|P|E))?$/;

/** Why a value is not a usable quantity. */
export type QuantityProblem = "not a quantity" | "too long" | "out of range" | "not a finite number";

/** A parsed quantity, or why the value is refused (`message` is ready for a violation or a policy error). */
export type QuantityResult = { ok: true; quantity: Quantity } | { ok: false; problem: QuantityProblem; message: string };

// The same few quantities ("1", "8", "500m", "1Gi") recur in every pod: parse each text once. Bounded by the
// bytes of its keys (UTF-16, 2 per character, plus a per-entry overhead), not by entries: 4,096 entries of
// 1M characters each was 8 GiB. Oldest entries go first (a Map iterates in insertion order).
const CACHE_BYTES = 512 * 1024;
const ENTRY_OVERHEAD = 64;
const cache = new Map<string, QuantityResult>();
let cacheBytes = 0;

function entryBytes(key: string): number {
  return key.length * 2 + ENTRY_OVERHEAD;
}

/** Size of the parse cache, for tests and metrics. */
export function quantityCacheStats(): { entries: number; bytes: number; maxBytes: number } {
  return { entries: cache.size, bytes: cacheBytes, maxBytes: CACHE_BYTES };
}

/** Empties the parse cache (tests). */
export function clearQuantityCache(): void {
  cache.clear();
  cacheBytes = 0;
}

/**
 * Checks any value found where a quantity belongs (a string, or a number from a YAML/JSON integer) and says
 * what is wrong with it; a field validator reports `message` with the field's path.
 */
export function checkQuantity(value: unknown): QuantityResult {
  let s: string;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return fail("not a finite number", `${String(value)} is not a finite number`);
    s = String(value); // 1e+21, 1e-7: both in the grammar
  } else if (typeof value === "string") {
    s = value;
  } else {
    return fail("not a quantity", `${describe(value)} is not a valid quantity`);
  }
  if (s.length > MAX_QUANTITY_LENGTH) return fail("too long", `a quantity of ${s.length} characters is longer than the ${MAX_QUANTITY_LENGTH} allowed`);
  const hit = cache.get(s);
  if (hit) return hit;
  const result = parse(s);
  const bytes = entryBytes(s);
  for (const key of cache.keys()) {
    if (cacheBytes + bytes <= CACHE_BYTES) break;
    cache.delete(key);
    cacheBytes -= entryBytes(key);
  }
  cache.set(s, result);
  cacheBytes += bytes;
  return result;
}

/** Parses a quantity; undefined for anything that is not one in range (use {@link checkQuantity} for why). */
export function parseQuantity(text: string | number): Quantity | undefined {
  const r = checkQuantity(text);
  return r.ok ? r.quantity : undefined;
}

function fail(problem: QuantityProblem, message: string): QuantityResult {
  return { ok: false, problem, message };
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === "object") return Array.isArray(value) ? "a list" : "an object";
  return `${typeof value} ${String(value).slice(0, 64)}`;
}

/** The text for a message: cut to 64 characters. */
function show(s: string): string {
  return s.length > 64 ? `${s.slice(0, 61)}...` : s;
}

function parse(s: string): QuantityResult {
  const m = GRAMMAR.exec(s);
  if (!m) return fail("not a quantity", `${show(s)} is not a valid quantity`);
  const [, sign, whole = "", frac1 = "", frac2 = "", binary, exp, decimal] = m;
  const outOfRange = fail("out of range", `${show(s)} is out of range: the magnitude must be at most 2^63-1 (${MAX_QUANTITY_UNITS})`);
  // Significant digits only: leading zeros of the whole part and trailing zeros of the fraction change nothing.
  const frac = trimZeros(frac1 || frac2);
  const digits = (whole + frac).replace(/^0+/, "");
  if (digits === "") return { ok: true, quantity: { nano: 0n, text: s } };
  // value = digits × 10^power10 × multiplier; in nano-units the power grows by 9.
  let power10: number;
  if (exp !== undefined) {
    // More than 6 exponent digits is far outside the range either way (handled below without computing 10^exp).
    const e = exp.replace(/^[+-]?0*/, "");
    power10 = e.length > 6 ? (exp.startsWith("-") ? -1e7 : 1e7) : Number(exp);
  } else {
    power10 = binary ? 0 : DECIMAL[decimal ?? ""]!;
  }
  power10 += 9 - frac.length;
  const multiplier = binary ? BINARY[binary]! : 1n;
  let nano: bigint;
  if (power10 >= 0) {
    // digits ≥ 10^(len−1), so the value has at least len + power10 digits.
    if (digits.length + power10 > MAX_NANO_DIGITS) return outOfRange;
    nano = BigInt(digits) * 10n ** BigInt(power10) * multiplier;
  } else if (-power10 > digits.length + 19) {
    // Below one nano-unit (the multiplier is under 10^19): rounds up to 1n.
    nano = 1n;
  } else {
    const div = 10n ** BigInt(-power10);
    const n = BigInt(digits) * multiplier;
    nano = n / div + (n % div === 0n ? 0n : 1n); // round up, away from zero (the sign is applied after)
  }
  if (nano > MAX_NANO) return outOfRange;
  return { ok: true, quantity: { nano: sign === "-" ? -nano : nano, text: s } };
}

/** `s` without trailing zeros (a loop: the regex /0+$/ is quadratic on "000…01"). */
function trimZeros(s: string): string {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 48) end--;
  return s.slice(0, end);
}

/** -1, 0 or 1 as `a` is less than, equal to or greater than `b`. */
export function compareQuantities(a: Quantity, b: Quantity): -1 | 0 | 1 {
  return a.nano < b.nano ? -1 : a.nano > b.nano ? 1 : 0;
}

/** True for any spelling of zero (`0`, `0m`, `-0.0Gi`). */
export function isZero(q: Quantity): boolean {
  return q.nano === 0n;
}

/** True below zero: never a valid request, limit or cap (Kubernetes' `ValidateNonnegativeQuantity`). */
export function isNegative(q: Quantity): boolean {
  return q.nano < 0n;
}

/** True when the value is a whole number (extended resources such as GPUs must be). */
export function isInteger(q: Quantity): boolean {
  return q.nano % NANO === 0n;
}

/** A whole count of units as a quantity (a cap from the policy, a replica count). */
export function quantityOfUnits(n: number | bigint): Quantity {
  const units = typeof n === "bigint" ? n : BigInt(n);
  return { nano: units * NANO, text: String(units) };
}

/** Nano-units of a whole count (`8` → 8_000_000_000n). The count must be an integer. */
export function nanoOfUnits(n: number | bigint): bigint {
  return (typeof n === "bigint" ? n : BigInt(n)) * NANO;
}

/** The value as a JavaScript number: may round. For messages, metrics and display only, never for a limit. */
export function toNumber(q: Quantity): number {
  return nanoToNumber(q.nano);
}

/** Nano-units as a number of units: may round. For messages and display only. */
export function nanoToNumber(nano: bigint): number {
  const whole = nano / NANO;
  return Number(whole) + Number(nano - whole * NANO) / 1e9;
}

/** Sum of quantities, exact (sums may exceed the parse range; they are never parsed back). */
export function addQuantities(a: Quantity, b: Quantity): Quantity {
  const nano = a.nano + b.nano;
  return { nano, text: formatNano(nano) };
}

/** Canonical text of a nano count: `2`, `1500m`, `250u`, `7n` (the smallest suffix that is exact). */
export function formatNano(nano: bigint): string {
  if (nano % NANO === 0n) return String(nano / NANO);
  if (nano % 1_000_000n === 0n) return `${nano / 1_000_000n}m`;
  if (nano % 1000n === 0n) return `${nano / 1000n}u`;
  return `${nano}n`;
}

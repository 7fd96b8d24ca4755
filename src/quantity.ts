/**
 * @module
 * Kubernetes resource quantities (`500m`, `0.5Gi`, `1e3`, `2.5`), parsed exactly as the apiserver's
 * `resource.ParseQuantity` grammar says, into an exact rational so comparisons never round:
 *
 *   quantity ::= signedNumber suffix
 *   signedNumber ::= [+-] number ;  number ::= digits | digits "." digits? | "." digits
 *   suffix ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m "" k M G T P E) | ("e"|"E") [+-] digits
 *
 * Written by hand because no maintained npm package implements this grammar exactly (@kubernetes/client-node's
 * internal `quantityToScalar` throws on fractional binary values such as `0.5Gi`).
 */

/** An exact value: `num / den`, with `den` a positive power of ten. Shared: never modify one. */
export interface Quantity {
  readonly num: bigint;
  readonly den: bigint;
  /** The text it was parsed from. */
  readonly text: string;
}

const BINARY: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const GRAMMAR = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([eE])([+-]?\d+)|(n|u|m|k|M|G|T|P|E))?$/;

// The same few quantities ("1", "8", "500m", "1Gi") recur in every pod: parse each text once.
const parsed = new Map<string, Quantity | undefined>();
const MAX_CACHED = 4096;

/** Parses a quantity; returns undefined for anything that is not one (so callers can report the field). */
export function parseQuantity(text: string | number): Quantity | undefined {
  const s = typeof text === "number" ? String(text) : text;
  if (parsed.has(s)) return parsed.get(s);
  const q = parse(s);
  if (parsed.size >= MAX_CACHED) parsed.clear();
  parsed.set(s, q);
  return q;
}

function parse(s: string): Quantity | undefined {
  const m = GRAMMAR.exec(s);
  if (!m) return undefined;
  const [, sign, digits, binary, expMark, exp, decimal] = m;
  const [whole = "", frac = ""] = digits!.split(".");
  let num = BigInt((whole || "0") + frac);
  let den = 10n ** BigInt(frac.length);
  if (sign === "-") num = -num;
  let power = 0;
  if (binary) num *= BINARY[binary]!;
  else if (expMark) power = Number(exp);
  else power = DECIMAL[decimal ?? ""]!;
  if (!Number.isSafeInteger(power) || Math.abs(power) > 1000) return undefined;
  if (power >= 0) num *= 10n ** BigInt(power);
  else den *= 10n ** BigInt(-power);
  return { num, den, text: s };
}

/** -1, 0 or 1 as `a` is less than, equal to or greater than `b`. */
export function compareQuantities(a: Quantity, b: Quantity): -1 | 0 | 1 {
  const l = a.num * b.den;
  const r = b.num * a.den;
  return l < r ? -1 : l > r ? 1 : 0;
}

export function isZero(q: Quantity): boolean {
  return q.num === 0n;
}

/** True when the value is a whole number (extended resources such as GPUs must be). */
export function isInteger(q: Quantity): boolean {
  return q.num % q.den === 0n;
}

/** The value as a JavaScript number (may round; for messages and sums of small counts only). */
export function toNumber(q: Quantity): number {
  return Number(q.num) / Number(q.den);
}

/** Sum of quantities, exact. */
export function addQuantities(a: Quantity, b: Quantity): Quantity {
  const den = a.den > b.den ? a.den : b.den;
  const num = a.num * (den / a.den) + b.num * (den / b.den);
  return { num, den, text: formatQuantity(num, den) };
}

function formatQuantity(num: bigint, den: bigint): string {
  if (num % den === 0n) return String(num / den);
  const milli = (num * 1000n) / den;
  if ((num * 1000n) % den === 0n) return `${milli}m`;
  return String(Number(num) / Number(den));
}

/**
 * @module
 * Name patterns of the policy (`nvidia.com/mig-*`, `team-*`): `*` matches any run of characters, every
 * other character matches itself.
 *
 * Matched in time linear in pattern + name, never by a backtracking regular expression (`^.*a.*a.*b$` takes
 * exponential-looking time on a name of a's; `*a*a*a*a*a*a*b` on 63 characters took 6 s). Hand-written because
 * the glob libraries (minimatch, picomatch, micromatch) compile to such regular expressions. The pattern is
 * split at `*` into segments S0 * S1 * … * Sk: the name must start with S0 and end with Sk, and S1 … Sk−1
 * must occur in order, without overlapping, in between. Taking each middle segment at its leftmost occurrence
 * is optimal (it leaves the most room for the rest), so there is nothing to undo; each leftmost occurrence is
 * found with Knuth–Morris–Pratt, whose scans over the name never overlap, so the total work is at most
 * 2·(name length) + (pattern length) comparisons. Policy patterns are at most {@link MAX_PATTERN_LENGTH}
 * characters (checked when the policy is loaded); names need no bound, the work being linear.
 */

/** Longest pattern a policy may hold. */
export const MAX_PATTERN_LENGTH = 1024;

interface Compiled {
  /** No `*`: the name must equal the pattern. */
  exact: boolean;
  first: string;
  last: string;
  /** Middle segments, non-empty, with their KMP failure tables. */
  middle: Array<{ text: string; fail: Int32Array }>;
}

// Patterns come from the policy, so there are few; the bound only guards against a caller passing names.
const MAX_CACHED = 1024;
const cache = new Map<string, Compiled>();

function failureTable(s: string): Int32Array {
  const fail = new Int32Array(s.length);
  let k = 0;
  for (let i = 1; i < s.length; i++) {
    while (k > 0 && s.charCodeAt(i) !== s.charCodeAt(k)) k = fail[k - 1]!;
    if (s.charCodeAt(i) === s.charCodeAt(k)) k++;
    fail[i] = k;
  }
  return fail;
}

function compile(pattern: string): Compiled {
  let c = cache.get(pattern);
  if (c) return c;
  const parts = pattern.split("*");
  c = {
    exact: parts.length === 1,
    first: parts[0]!,
    last: parts.length > 1 ? parts[parts.length - 1]! : "",
    middle: parts
      .slice(1, -1)
      .filter((p) => p !== "")
      .map((text) => ({ text, fail: failureTable(text) })),
  };
  if (cache.size >= MAX_CACHED) cache.clear();
  cache.set(pattern, c);
  return c;
}

/** Counts character comparisons when passed (tests hold the matcher to its linear bound). */
export interface GlobSteps {
  steps: number;
}

/** Index just past the leftmost occurrence of `seg` in `name[from, to)`, or -1 (KMP). */
function findAfter(seg: { text: string; fail: Int32Array }, name: string, from: number, to: number, counter?: GlobSteps): number {
  const { text, fail } = seg;
  let k = 0;
  for (let i = from; i < to; i++) {
    const ch = name.charCodeAt(i);
    while (k > 0 && ch !== text.charCodeAt(k)) {
      k = fail[k - 1]!;
      if (counter) counter.steps++;
    }
    if (counter) counter.steps++;
    if (ch === text.charCodeAt(k)) k++;
    if (k === text.length) return i + 1;
  }
  return -1;
}

/** True when `name` matches `pattern` (`*` any run of characters, anything else itself), in linear time. */
export function matchesGlob(pattern: string, name: string, counter?: GlobSteps): boolean {
  const c = compile(pattern);
  if (c.exact) return name === pattern;
  if (name.length < c.first.length + c.last.length || !name.startsWith(c.first) || !name.endsWith(c.last)) return false;
  if (counter) counter.steps += c.first.length + c.last.length;
  let at = c.first.length;
  const end = name.length - c.last.length;
  for (const seg of c.middle) {
    const next = findAfter(seg, name, at, end, counter);
    if (next < 0) return false;
    at = next;
  }
  return true;
}

/**
 * Latency summaries for the benchmarks: exact percentiles over every sample (nearest rank, as k6 and
 * Kyverno's published tables report them), and a little table printing.
 */

export interface Summary {
  count: number;
  avg: number;
  min: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of sorted `values` (ascending); `p` in [0, 100]. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  const arr = Array.from(sorted);
  const sum = arr.reduce((a, b) => a + b, 0);
  return {
    count: arr.length,
    avg: arr.length ? sum / arr.length : NaN,
    min: arr[0] ?? NaN,
    p50: percentile(arr, 50),
    p90: percentile(arr, 90),
    p95: percentile(arr, 95),
    p99: percentile(arr, 99),
    max: arr.at(-1) ?? NaN,
  };
}

/** A Markdown table: `rows` of cells under `header`, numbers right-aligned. */
export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === "number" ? (Number.isInteger(c) ? String(c) : c.toFixed(1)) : c)));
  const width = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const right = header.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === "number"));
  const line = (r: readonly string[]): string => `| ${r.map((c, i) => (right[i] ? c.padStart(width[i]!) : c.padEnd(width[i]!))).join(" | ")} |`;
  const rule = `|${width.map((w, i) => (right[i] ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(header), rule, ...cells.map(line)].join("\n");
}

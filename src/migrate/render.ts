/**
 * @module
 * The not-carried table of `quartermaster migrate`, as text lines (for stderr and for the `# not carried over`
 * comment block in front of the YAML).
 */
import type { NotCarried } from "./types.js";

export function notCarriedLines(job: string, rows: readonly NotCarried[]): string[] {
  if (rows.length === 0) return [`${job}: everything carried over`];
  const w = Math.min(60, Math.max(5, ...rows.map((r) => r.field.length)));
  return [
    `${job}: not carried over (${rows.length})`,
    `  ${"FIELD".padEnd(w)}  VALUE / WHY`,
    ...rows.map((r) => `  ${r.field.padEnd(w)}  ${r.value === undefined ? "" : `${r.value}: `}${r.reason}`),
  ];
}

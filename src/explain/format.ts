/**
 * @module
 * A verdict as `explain -o table` prints it: the main reason and summary, the evidence one line each, the next
 * step, then each other reason that holds, shorter.
 */
import type { Verdict } from "./types.js";

export function verdictText(v: Verdict): string {
  const out = [`${v.job}: ${v.reason.toUpperCase()}: ${v.summary}`, "", "EVIDENCE"];
  for (const e of v.evidence) out.push(`  ${e.object}: ${e.text}`);
  out.push("", `NEXT  ${v.next}`);
  if (v.also.length > 0) {
    out.push("", "ALSO");
    for (const f of v.also) {
      out.push(`  ${f.reason}: ${f.summary}`);
      for (const e of f.evidence.slice(0, 3)) out.push(`    ${e.object}: ${e.text}`);
      out.push(`    next: ${f.next}`);
    }
  }
  return out.join("\n");
}

/**
 * @module
 * What a job UPDATE that only carries Kueue's admission (`src/kueue/admission.ts` kueueAdmissionOnly) may be
 * refused for (issue 33, "never strand an admitted job"): only what the node labels Kueue wrote select, never
 * what the job already had at CREATE. `/validate/jobs` (webhooks/validate-jobs.ts) applies it to the violations
 * `newOrWorse` kept.
 */
import type { KueueAdmission } from "../kueue/admission.js";
import type { Findings } from "./types.js";

/**
 * What an UPDATE carrying only Kueue's admission is refused for: the violations (already only those the update
 * makes worse) at a nodeSelector entry Kueue wrote, each message naming the node labels Kueue wrote and the
 * job's queue; every other violation becomes a warning (the job already had it, or the check's wording changed).
 */
export function kueueAdmissionFindings(worse: Findings, admission: KueueAdmission, queue: string | undefined): Findings {
  const written = admission.templates.flatMap((t) => Object.entries(t.nodeSelector));
  const keys = new Set(written.map(([k]) => k));
  const labels = [...new Map(written).entries()].map(([k, v]) => `${k}=${v}`).join(", ");
  const atWritten = (field: string): boolean => {
    const m = /\.nodeSelector\[([^\]]+)\]$/.exec(field);
    return m !== null && keys.has(m[1]!);
  };
  const violations = worse.violations
    .filter((v) => atWritten(v.field))
    .map((v) => ({
      ...v,
      message: `the node labels Kueue wrote (${labels}) at admission${queue ? ` from queue ${queue}` : ""}: ${v.message}; change the ResourceFlavor's nodeLabels or the ClusterQueue's flavors`,
    }));
  const warnings = worse.violations
    .filter((v) => !atWritten(v.field))
    .map((v) => `quartermaster: Kueue's admission not refused for what the job already had: ${v.field}: ${v.message}`);
  return { violations, warnings: [...worse.warnings, ...warnings] };
}

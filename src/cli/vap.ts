/**
 * @module
 * `quartermaster policy export-vap [--policy F] [--namespace N]`: the pod limits as a ValidatingAdmissionPolicy
 * and its binding (src/manifests/vap.ts) on stdout; on stderr, each `/validate/pods` rule the policy uses that the
 * export cannot express, so nobody drops the webhook unaware.
 */
import type { CliIo } from "./io.js";
import { loadPolicyOrReport, namespaceFlag } from "./policy-file.js";

/** `quartermaster policy export-vap`, its flags parsed by the command line (src/cli/commands.ts). */
export async function exportVapCommand(values: Record<string, unknown>, io: CliIo): Promise<number> {
  const namespace = namespaceFlag(values.namespace);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  const { unexpressedRules, validatingAdmissionPolicyYaml } = await import("../manifests/vap.js");
  io.stdout((await validatingAdmissionPolicyYaml(policy, { namespace })).trimEnd());
  for (const r of unexpressedRules(policy).filter((u) => u.active)) {
    io.stderr(`quartermaster: not in the exported policy: ${r.rule}: ${r.why}`);
  }
  return 0;
}

/**
 * @module
 * `quartermaster policy export-vap [--policy F] [--namespace N]`: the pod limits as a ValidatingAdmissionPolicy
 * and its binding (src/policy/vap.ts) on stdout; on stderr, each `/validate/pods` rule the policy uses that the
 * export cannot express, so nobody drops the webhook unaware.
 */
import { PolicyError, UsageError } from "../core/errors.js";
import type { CliIo } from "./io.js";

/** `quartermaster policy export-vap`, its flags parsed by the command line (src/cli/commands.ts). */
export async function exportVapCommand(values: Record<string, unknown>, io: CliIo): Promise<number> {
  const namespace = (values.namespace as string | undefined) ?? "quartermaster";
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) throw new UsageError(`--namespace must be a namespace name (DNS-1123 label), got ${JSON.stringify(namespace)}`);
  const { loadPolicy } = await import("./commands.js");
  let policy;
  try {
    policy = await loadPolicy(values.policy as string | undefined, io.cwd);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    io.stderr(err.message);
    return 1;
  }
  const { unexpressedRules, validatingAdmissionPolicyYaml } = await import("../policy/vap.js");
  io.stdout((await validatingAdmissionPolicyYaml(policy, { namespace })).trimEnd());
  for (const r of unexpressedRules(policy).filter((u) => u.active)) {
    io.stderr(`quartermaster: not in the exported policy: ${r.rule}: ${r.why}`);
  }
  return 0;
}

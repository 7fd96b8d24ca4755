/**
 * @module
 * `quartermaster policy check|defaults|export-vap|export-map`: a policy file checked (every problem listed), the
 * built-in policy printed, and the pod limits exported as a ValidatingAdmissionPolicy and its binding
 * (src/manifests/vap.ts) with, on stderr, each `/validate/pods` rule the policy uses that the export cannot
 * express, so nobody drops the webhook unaware.
 */
import type { Command } from "commander";
import { UsageError } from "../../core/errors.js";
import { defaultPolicy } from "../../policy/default.js";
import type { CliDeps, NoFlags } from "../deps.js";
import { policyOption } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicyOrReport, renderNamespaceOption } from "../policy-file.js";

type ExportVapOptions = { policy?: string; namespace: string };

async function policyCheckCommand(_opts: NoFlags, [file]: readonly string[], io: CliIo): Promise<number> {
  if (!file) throw new UsageError("policy check: missing the policy file");
  if (!(await loadPolicyOrReport(file, io))) return 1;
  io.stdout(`${file}: valid`);
  return 0;
}

function policyDefaultsCommand(_opts: NoFlags, _args: readonly string[], io: CliIo): Promise<number> {
  io.stdout(JSON.stringify(defaultPolicy(), null, 2));
  return Promise.resolve(0);
}

async function exportVapCommand(opts: ExportVapOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const { unexpressedRules, validatingAdmissionPolicyYaml } = await import("../../manifests/vap.js");
  io.stdout((await validatingAdmissionPolicyYaml(policy, { namespace: opts.namespace })).trimEnd());
  for (const r of unexpressedRules(policy).filter((u) => u.active)) {
    io.stderr(`quartermaster: not in the exported policy: ${r.rule}: ${r.why}`);
  }
  return 0;
}

async function exportMapCommand(opts: ExportVapOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const { unexpressedMutations, mutatingAdmissionPolicyYaml } = await import("../../manifests/map.js");
  io.stdout((await mutatingAdmissionPolicyYaml(policy, { namespace: opts.namespace })).trimEnd());
  for (const u of unexpressedMutations(policy).filter((m) => m.active)) {
    io.stderr(`quartermaster: not in the exported policy (left to /mutate/pods): ${u.mutation}: ${u.why}`);
  }
  return 0;
}

export function registerPolicy(program: Command, deps: CliDeps): void {
  const policy = deps.group(program, "policy", "check and print policies");
  const check = policy
    .command("check")
    .summary("validate a policy file and print every error")
    .description("validate a policy file and print every error")
    .argument("<file>", "policy file (YAML or JSON)");
  deps.action(check, policyCheckCommand);

  const defaults = policy.command("defaults").summary("print the built-in policy as JSON").description("print the built-in policy as JSON");
  deps.action(defaults, policyDefaultsCommand);

  const exportVap = policy
    .command("export-vap")
    .summary("print the pod limits as a ValidatingAdmissionPolicy and its binding")
    .description(
      `Print the pod limits of /validate/pods as a ValidatingAdmissionPolicy and its binding (Kubernetes >= 1.33);
the rules it cannot express are listed in it, and on stderr when the policy uses them.`,
    )
    .addOption(policyOption())
    .addOption(renderNamespaceOption("Quartermaster's namespace (the scope's own)"));
  deps.action(exportVap, exportVapCommand);

  const exportMap = policy
    .command("export-map")
    .summary("print the pod mutations that need no lookup as a MutatingAdmissionPolicy and its binding")
    .description(
      `Print the pod mutations of /mutate/pods that need no lookup (resources, GPU tolerations, accelerator and partition
placement, interruptible placement) as a MutatingAdmissionPolicy and its binding (Kubernetes >= 1.36); what it
leaves to the webhook is listed in it and on stderr. Pair it with the webhook's reduced mode (webhook.podMutation:
reduced in the policy, or manifests/overlays/mutating-admission-policy).`,
    )
    .addOption(policyOption())
    .addOption(renderNamespaceOption("Quartermaster's namespace (the scope's own)"));
  deps.action(exportMap, exportMapCommand);
}

/**
 * @module
 * `quartermaster manifests webhooks|confinement`: manifests rendered from a policy, without cluster access:
 * the webhook configurations, and the ValidatingAdmissionPolicy confining the reconciler's writes.
 */
import type { Command } from "commander";
import type { CliDeps } from "../deps.js";
import { policyOption } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicyOrReport, renderNamespaceOption } from "../policy-file.js";

type RenderOptions = { policy?: string; namespace: string };

/** `manifests webhooks`: the webhook configurations rendered from a policy. */
async function manifestsWebhooksCommand(opts: RenderOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const { webhookConfigurationsYaml } = await import("../../manifests/webhooks.js");
  io.stdout((await webhookConfigurationsYaml(policy, { namespace: opts.namespace })).trimEnd());
  return 0;
}

/** `manifests confinement`: the reconciler's ValidatingAdmissionPolicy for a policy's job kinds and a namespace. */
async function manifestsConfinementCommand(opts: RenderOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const { reconcilerConfinementYaml } = await import("../../manifests/confinement.js");
  io.stdout((await reconcilerConfinementYaml(policy, opts.namespace)).trimEnd());
  return 0;
}

export function registerManifests(program: Command, deps: CliDeps): void {
  const manifests = deps.group(program, "manifests", "render manifests from a policy");
  const webhooks = manifests
    .command("webhooks")
    .summary("print the webhook configurations for a policy")
    .description(
      `Print the Mutating- and ValidatingWebhookConfiguration for the policy (namespaceSelector from the scope,
matchConditions from its GPU patterns, rules for its job kinds); apply with \`| kubectl apply -f -\`.
manifests/base/webhook-configurations.yaml is this for the built-in policy.`,
    )
    .addOption(policyOption())
    .addOption(renderNamespaceOption("namespace of the webhook Service"));
  deps.action(webhooks, manifestsWebhooksCommand);

  const confinement = manifests
    .command("confinement")
    .summary("print the ValidatingAdmissionPolicy confining the reconciler's writes")
    .description(
      `Print the ValidatingAdmissionPolicy and binding that refuse the reconciler's writes (pods, Services, Events,
job kinds, PolicyReports) outside the namespaces in scope; apply with \`| kubectl apply -f -\`.
manifests/base/reconciler-confinement.yaml is this for the built-in policy in namespace quartermaster.`,
    )
    .addOption(policyOption())
    .addOption(renderNamespaceOption("Quartermaster's namespace (the reconciler's ServiceAccount's)"));
  deps.action(confinement, manifestsConfinementCommand);
}

/**
 * @module
 * `quartermaster manifests webhooks|confinement|chart-values`: manifests rendered from a policy, without cluster
 * access: the webhook configurations, the ValidatingAdmissionPolicy confining the reconciler's writes, and both as
 * the Helm chart's values.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
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

/**
 * `manifests chart-values`: the chart values for a policy file: the policy as written and `policyRenders` (its
 * webhook configurations and confinement), which the chart requires when the policy changes what they match.
 */
async function manifestsChartValuesCommand(opts: RenderOptions, _args: readonly string[], io: CliIo): Promise<number> {
  if (opts.policy === undefined) {
    io.stderr("manifests chart-values needs --policy F: the built-in policy needs no policyRenders (the chart renders it)");
    return 2;
  }
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const [yaml, { chartPolicyValues }] = await Promise.all([import("yaml"), import("../../manifests/chart.js")]);
  // The policy as written, not as loaded: the chart compares its copy in values with these very sections.
  const raw: unknown = yaml.parse(await readFile(resolve(io.cwd, opts.policy), "utf8"));
  const values = await chartPolicyValues(
    raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {},
    policy,
    opts.namespace,
  );
  io.stdout(
    `# Values for charts/quartermaster: the policy in ${opts.policy} and what it renders (quartermaster manifests chart-values).\n` +
      `# Pass with -f; render again whenever the policy changes (the chart refuses stale renders).\n` +
      yaml.stringify(values, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd(),
  );
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

  const chartValues = manifests
    .command("chart-values")
    .summary("print the Helm chart values for a policy (the policy and its webhook configurations)")
    .description(
      `Print values for charts/quartermaster: the policy as written and policyRenders, its webhook configurations and
the reconciler's confinement rendered for the release namespace. The chart requires them when the policy sets gpu,
jobKinds or webhook.timeoutSeconds, and refuses them when they were made for another policy or namespace:
  quartermaster manifests chart-values --policy my-policy.yaml --namespace quartermaster > qm-values.yaml
  helm upgrade --install quartermaster CHART -n quartermaster -f qm-values.yaml ...`,
    )
    .addOption(policyOption())
    .addOption(renderNamespaceOption("the release namespace"));
  deps.action(chartValues, manifestsChartValuesCommand);
}

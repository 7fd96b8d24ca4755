/**
 * @module
 * Build-time generator of manifests/base/webhook-configurations.yaml (from the built-in policy),
 * manifests/base/reconciler-ledger-rbac.yaml (from the ledger's naming) and
 * manifests/base/reconciler-confinement.yaml (from src/core/scope.ts and the job kinds) (run by `npm
 * run generate`). The YAML is committed for `kubectl apply -k`; a unit test renders it again and fails when
 * the committed file differs, so the manifest cannot drift from the policy or from src/core/scope.ts. The Helm
 * chart's templates for the same objects are written from the same renders (src/manifests/chart.ts).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultPolicy } from "../policy/load.js";
import { POLICY_SCHEMA } from "../policy/schema.js";
import {
  CHART_DASHBOARD,
  CHART_CONFINEMENT_TEMPLATE,
  CHART_LEDGER_RBAC_TEMPLATE,
  CHART_POLICY_REPORTS_RBAC_TEMPLATE,
  CHART_PROMETHEUS_RULE_TEMPLATE,
  CHART_VALUES_SCHEMA,
  CHART_WEBHOOK_TEMPLATE,
  chartConfinementTemplate,
  chartLedgerRbacTemplate,
  chartPolicyReportsRbacTemplate,
  chartPrometheusRuleTemplate,
  chartValuesSchema,
  chartWebhookTemplate,
  DASHBOARD_MANIFEST,
  PROMETHEUS_RULE_MANIFEST,
} from "./chart.js";
import { reconcilerConfinementYaml } from "./confinement.js";
import { ledgerRbacYaml, policyReportsRbacYaml } from "./rbac.js";
import { validatingAdmissionPolicyYaml } from "./vap.js";
import { webhookConfigurationsYaml } from "./webhooks.js";

/** The committed manifests, relative to the repository root. */
export const WEBHOOK_MANIFEST = "manifests/base/webhook-configurations.yaml";
export const LEDGER_RBAC_MANIFEST = "manifests/base/reconciler-ledger-rbac.yaml";
export const POLICY_REPORTS_RBAC_MANIFEST = "manifests/base/reconciler-policyreports-rbac.yaml";
export const CONFINEMENT_MANIFEST = "manifests/base/reconciler-confinement.yaml";
export const VAP_MANIFEST = "manifests/overlays/validating-admission-policy/validating-admission-policy.yaml";

/** The text manifests/base/webhook-configurations.yaml must have. */
export function generatedWebhookManifest(): Promise<string> {
  return webhookConfigurationsYaml(defaultPolicy());
}

const ROOT = join(import.meta.dirname, "../..");

/**
 * Every generated manifest: path → the text it must have. The Helm chart's templates for the same objects
 * come from the same renders (src/manifests/chart.ts); its PrometheusRule from the monitoring overlay's.
 */
export async function generatedManifests(): Promise<Record<string, string>> {
  return {
    [WEBHOOK_MANIFEST]: await generatedWebhookManifest(),
    [LEDGER_RBAC_MANIFEST]: await ledgerRbacYaml(),
    [POLICY_REPORTS_RBAC_MANIFEST]: await policyReportsRbacYaml(),
    [CHART_POLICY_REPORTS_RBAC_TEMPLATE]: await chartPolicyReportsRbacTemplate(),
    [CONFINEMENT_MANIFEST]: await reconcilerConfinementYaml(defaultPolicy()),
    [CHART_CONFINEMENT_TEMPLATE]: await chartConfinementTemplate(),
    [VAP_MANIFEST]: await validatingAdmissionPolicyYaml(defaultPolicy()),
    [CHART_WEBHOOK_TEMPLATE]: await chartWebhookTemplate(),
    [CHART_LEDGER_RBAC_TEMPLATE]: await chartLedgerRbacTemplate(),
    [CHART_PROMETHEUS_RULE_TEMPLATE]: chartPrometheusRuleTemplate(readFileSync(join(ROOT, PROMETHEUS_RULE_MANIFEST), "utf8")),
    [CHART_VALUES_SCHEMA]: chartValuesSchema(POLICY_SCHEMA),
    // Helm reads only files inside the chart (`.Files.Get`): the monitoring overlay's dashboard, copied.
    [CHART_DASHBOARD]: readFileSync(join(ROOT, DASHBOARD_MANIFEST), "utf8"),
  };
}

export async function writeGeneratedManifests(root: string): Promise<string[]> {
  const files = await generatedManifests();
  for (const [file, text] of Object.entries(files)) writeFileSync(join(root, file), text);
  return Object.keys(files);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const f of await writeGeneratedManifests(join(import.meta.dirname, "../.."))) console.log(`wrote ${f}`);
}

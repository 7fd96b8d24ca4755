/**
 * @module
 * Build-time generator of manifests/base/webhook-configurations.yaml from the built-in policy (run by `npm
 * run generate`). The YAML is committed for `kubectl apply -k`; a unit test renders it again and fails when
 * the committed file differs, so the manifest cannot drift from the policy or from src/scope.ts.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultPolicy } from "../policy/load.js";
import { webhookConfigurationsYaml } from "./webhooks.js";

/** The committed manifest, relative to the repository root. */
export const WEBHOOK_MANIFEST = "manifests/base/webhook-configurations.yaml";

/** The text manifests/base/webhook-configurations.yaml must have. */
export function generatedWebhookManifest(): Promise<string> {
  return webhookConfigurationsYaml(defaultPolicy());
}

export async function writeGeneratedManifests(root: string): Promise<string[]> {
  writeFileSync(join(root, WEBHOOK_MANIFEST), await generatedWebhookManifest());
  return [WEBHOOK_MANIFEST];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const f of await writeGeneratedManifests(join(import.meta.dirname, "../.."))) console.log(`wrote ${f}`);
}

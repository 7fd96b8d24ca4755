/**
 * @module
 * The policy route of issue 35 for the benches (bench/e2e.ts, bench/launch.ts): the MutatingAdmissionPolicy and
 * binding `quartermaster policy export-map` prints for the built-in policy in the reduced mode, with the pods
 * webhook's reduced-mode match conditions, as manifests/overlays/mutating-admission-policy installs them.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { cli } from "../../test/e2e/harness/webhook.js";

type Obj = Record<string, any>;

/**
 * The built-in policy in the reduced mode, written to `dir`; the MutatingAdmissionPolicy and binding
 * `quartermaster policy export-map` prints for it; and the pods webhook's match conditions that
 * `quartermaster manifests webhooks` renders for it (the reduced mode's extra condition after the others).
 */
export async function exportedMap(dir: string): Promise<{ policyFile: string; objects: Obj[]; reducedConditions: Obj[] }> {
  const policyFile = join(dir, "bench-policy-reduced.yaml");
  writeFileSync(policyFile, "webhook: {podMutation: reduced}\n");
  const exported = await cli(["policy", "export-map", "--policy", policyFile]);
  if (exported.code !== 0) throw new Error(`policy export-map: ${exported.stderr}`);
  const objects = parseAllDocuments(exported.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
  const rendered = await cli(["manifests", "webhooks", "--policy", policyFile]);
  if (rendered.code !== 0) throw new Error(`manifests webhooks: ${rendered.stderr}`);
  const mutating = parseAllDocuments(rendered.stdout)
    .map((d) => d.toJS() as Obj | null)
    .find((c) => c?.kind === "MutatingWebhookConfiguration");
  const hook = (mutating?.webhooks as Obj[] | undefined)?.find((h) => h.name === POD_MUTATE_HOOK);
  if (!hook?.matchConditions) throw new Error(`manifests webhooks --policy (reduced) rendered no ${POD_MUTATE_HOOK} match conditions`);
  return { policyFile, objects, reducedConditions: hook.matchConditions as Obj[] };
}

export const POD_MUTATE_HOOK = "pods.mutate.quartermaster.dev";

/**
 * The configurations with the pods webhook's match conditions replaced by `reduced` (its reduced mode). The rest is
 * manifests/base's, and so must the conditions `reduced` keeps be: the mode is the one difference.
 */
export function withPodMutationConditions(configs: Obj[], reduced: Obj[]): Obj[] {
  const copy = structuredClone(configs);
  const hook = copy.flatMap((c) => c.webhooks as Obj[]).find((h) => h.name === POD_MUTATE_HOOK);
  if (!hook) throw new Error(`manifests/base has no ${POD_MUTATE_HOOK}`);
  const text = (conditions: Obj[]): string => JSON.stringify(conditions.map((c) => [c.name, c.expression]));
  const kept = reduced.slice(0, -1);
  if (text(kept) !== text(hook.matchConditions as Obj[]))
    throw new Error(`the reduced mode's conditions do not extend manifests/base's (run npm run generate?): ${text(kept).slice(0, 300)}`);
  hook.matchConditions = structuredClone(reduced);
  return copy;
}

/**
 * The MutatingAdmissionPolicy and binding the checkout in `root` (an older Quartermaster, its dependencies
 * installed) exports for the policy in `policyFile`: the `map-only-before` variant measures it against today's in
 * the same run.
 */
export function exportedMapFrom(root: string, policyFile: string): Obj[] {
  const out = execFileSync(process.execPath, ["--import", "tsx", join(root, "webhooks/cli.ts"), "policy", "export-map", "--policy", policyFile], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

/**
 * @module
 * `doctor`'s checks of Kueue on the same cluster (issue 33), pure, each a real way for queued jobs to wait
 * forever or for Kueue and Quartermaster to undo each other:
 *
 * - `kueue-quota`: a flavor's GPU nominal quota, summed over the ClusterQueues that list it, above the
 *   allocatable GPUs of the nodes its nodeLabels select. Kueue admits up to the quota, so jobs are admitted
 *   (quota held, job unsuspended) whose pods no node can take: Pending with nothing in Kueue saying why.
 * - `kueue-webhooks`: Kueue mutates the training jobs at CREATE (suspends them, may add the queue name from its
 *   LocalQueue defaulting) and admits them with an UPDATE writing the flavor's node labels. Quartermaster's
 *   `jobs.mutate` must see the job as Kueue left it and cover every kind Kueue manages, or queued jobs' templates
 *   are not outfitted and Kueue charges quota and picks flavors from what the pods will not ask for; and
 *   `jobs.validate` must see UPDATEs, or Kueue's admission writes node labels no allow-list ever checks.
 * - `kueue-flavors`: a flavor whose nodeLabels select an accelerator or partition outside the allow-list in force
 *   for a namespace whose LocalQueue feeds a ClusterQueue using the flavor. Kueue admits such a namespace's jobs
 *   into it and `/validate/jobs` refuses the admission UPDATE (src/validate/kueue.ts): the job stays suspended
 *   while Kueue retries. Judged by the same rule the webhook applies (src/validate/accelerator.ts), on a pod
 *   spec whose nodeSelector is the flavor's nodeLabels.
 */
import { inScope, namespaceScope } from "../core/scope.js";
import type { Policy } from "../policy/types.js";
import { clusterQueueQuotas, flavorLabels, kueueLedger, kueueNodesFromObjects } from "../ledger/kueue-quota.js";
import { validateAccelerators } from "../validate/accelerator.js";
import { effectiveLimits } from "../validate/limits.js";
import {
  isUnreadable,
  type DoctorFinding,
  type KueueSnapshot,
  type KueueState,
  type Unreadable,
  type WebhookConfiguration,
  type WebhookEntry,
} from "./types.js";

export type { KueueSnapshot, KueueState } from "./types.js";

const JOBS_MUTATE = "jobs.mutate.quartermaster.dev";
const JOBS_VALIDATE = "jobs.validate.quartermaster.dev";
const APPLY_FIX = "kubectl apply -k manifests/base (or your overlay), or quartermaster manifests webhooks --policy <the policy> | kubectl apply -f -";

/** The path a webhook is served at (service path, or the URL's). */
function hookPath(h: Pick<WebhookEntry, "clientConfig">): string {
  if (h.clientConfig.service?.path) return h.clientConfig.service.path;
  try {
    return h.clientConfig.url ? new URL(h.clientConfig.url).pathname : "";
  } catch {
    return "";
  }
}

/**
 * Whether a webhook configuration is Kueue's: one of its webhooks serves Kueue's own API (kueue
 * `config/components/webhook/manifests.yaml`: `/mutate-kueue-x-k8s-io-v1beta2-workload`, ...; the webhooks are
 * named `*.kb.io` there), or is named under kueue.x-k8s.io.
 */
export function isKueueConfiguration(config: { webhooks?: ReadonlyArray<Pick<WebhookEntry, "name" | "clientConfig">> }): boolean {
  return (config.webhooks ?? []).some((h) => /^\/(mutate|validate)-kueue-x-k8s-io-/.test(hookPath(h)) || h.name.endsWith(".kueue.x-k8s.io"));
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

// ---- a. quota above the nodes' GPUs ----------------------------------------------------------------------

/** Warns per flavor and GPU resource whose nominal quota exceeds the physical GPUs of the flavor's nodes. */
export function checkKueueQuota(state: KueueState, policy: Pick<Policy, "gpu">): DoctorFinding[] {
  const gpu = policy.gpu.resources;
  const ledger = kueueLedger(state, kueueNodesFromObjects(state.nodes, gpu), gpu);
  const out: DoctorFinding[] = [];
  let within = 0;
  for (const f of ledger.flavors) {
    for (const [resource, r] of Object.entries(f.resources)) {
      if (r.quota <= r.physical) {
        if (r.quota > 0) within++;
        continue;
      }
      const holding = r.quotas.filter((q) => q.nominalQuota > 0);
      const queues = holding.map((q) => `${q.clusterQueue} (${q.nominalQuota})`).join(", ");
      const labels =
        Object.entries(f.nodeLabels)
          .map(([k, v]) => `${k}=${v}`)
          .join(", ") || "none: every node";
      const nodes = f.missing
        ? "no ResourceFlavor of that name exists"
        : `the ${plural(f.nodes, "node")} its nodeLabels (${labels}) select ${f.nodes === 1 ? "has" : "have"} ${r.physical} allocatable`;
      out.push({
        check: "kueue-quota",
        severity: "warning",
        subject: `ResourceFlavor ${f.name}`,
        message:
          `ClusterQueue${holding.length === 1 ? "" : "s"} ${queues} give${holding.length === 1 ? "s" : ""} flavor ${f.name} a nominal quota of ${r.quota} ${resource}, ` +
          `but ${nodes}: Kueue admits jobs up to the quota whose pods no node can take (admitted, quota held, pods Pending)`,
        fix: f.missing
          ? `create ResourceFlavor ${f.name} or remove it from the ClusterQueues`
          : `lower the nominalQuota of ${resource} in flavor ${f.name} to ${r.physical} in total, add nodes carrying its nodeLabels, or correct the nodeLabels`,
      });
    }
  }
  if (out.length === 0)
    out.push({
      check: "kueue-quota",
      severity: "ok",
      subject: "Kueue ResourceFlavors",
      message: `${plural(ledger.flavors.length, "flavor")}: every GPU quota within the GPUs of the flavor's nodes (${plural(within, "quota")} checked)`,
      fix: "",
    });
  return out;
}

// ---- b. the two sides' webhooks ----------------------------------------------------------------------------

/** `group/plural` pairs a webhook's rules match for `operation` (`*` wildcards expanded against `kinds`). */
function covered(hook: WebhookEntry, operation: string, kinds: ReadonlyArray<{ group: string; plural: string }>): Set<string> {
  const out = new Set<string>();
  for (const r of hook.rules ?? []) {
    const ops = r.operations ?? [];
    if (!ops.includes(operation) && !ops.includes("*")) continue;
    for (const k of kinds) {
      const group = (r.apiGroups ?? []).some((g) => g === k.group || g === "*");
      const resource = (r.resources ?? []).some((x) => x === k.plural || x === "*");
      if (group && resource) out.add(`${k.group}/${k.plural}`);
    }
  }
  return out;
}

/** The kinds' names for messages (`kubeflow.org/pytorchjobs, ...`). */
const kindList = (keys: Iterable<string>): string => [...keys].sort().join(", ");

type Found = { config: WebhookConfiguration; hook: WebhookEntry };
type KindKey = { group: string; plural: string };

/** What is wrong with /mutate/jobs beside Kueue's mutating webhooks: absent, missing kinds, or not reinvoked. */
function mutateFindings(mutate: Found | undefined, managed: ReadonlySet<string>, kueueNames: readonly string[], kinds: readonly KindKey[]): DoctorFinding[] {
  const out: DoctorFinding[] = [];
  if (!mutate) {
    out.push({
      check: "kueue-webhooks",
      severity: "warning",
      subject: JOBS_MUTATE,
      message:
        `Kueue mutates ${kindList(managed)} at CREATE (${kueueNames.join(", ")}) but Quartermaster's ${JOBS_MUTATE} is not registered: ` +
        "queued jobs' pod templates are not outfitted, so Kueue charges quota and picks flavors from requests and placement the pods will not have",
      fix: APPLY_FIX,
    });
  } else {
    const missing = [...managed].filter((k) => !covered(mutate.hook, "CREATE", kinds).has(k));
    if (missing.length > 0)
      out.push({
        check: "kueue-webhooks",
        severity: "warning",
        subject: JOBS_MUTATE,
        message:
          `Kueue mutates ${kindList(missing)} at CREATE but ${mutate.config.metadata.name}'s ${JOBS_MUTATE} does not match their CREATE: ` +
          "those queued jobs are admitted by Kueue from templates Quartermaster never outfitted",
        fix: APPLY_FIX,
      });
    const reinvoked = mutate.hook.reinvocationPolicy === "IfNeeded";
    // The apiserver calls mutating configurations in the order of their names.
    const first = kueueNames.some((k) => mutate.config.metadata.name < k);
    if (!reinvoked)
      out.push({
        check: "kueue-webhooks",
        severity: first ? "warning" : "info",
        subject: JOBS_MUTATE,
        message: first
          ? `${mutate.config.metadata.name} is called before Kueue's ${kueueNames.join(", ")} (configurations run in name order) and ${JOBS_MUTATE} is not reinvoked ` +
            `(reinvocationPolicy ${mutate.hook.reinvocationPolicy ?? "Never"}): a job that gets its queue name from Kueue's LocalQueue defaulting is never outfitted`
          : `${JOBS_MUTATE} is not reinvoked (reinvocationPolicy ${mutate.hook.reinvocationPolicy ?? "Never"}); it sees Kueue's changes only because ` +
            `${mutate.config.metadata.name} sorts after ${kueueNames.join(", ")}: renaming either configuration breaks it`,
        fix: `set reinvocationPolicy: IfNeeded on ${JOBS_MUTATE} (${APPLY_FIX})`,
      });
  }
  return out;
}

/**
 * Kueue's and Quartermaster's webhooks on the job kinds of the policy: `jobs.mutate` present, covering every kind
 * Kueue mutates at CREATE, reinvoked (IfNeeded) or called after Kueue's; `jobs.validate` matching UPDATE of them.
 */
export function checkKueueWebhooks(
  kueueConfigs: readonly WebhookConfiguration[],
  quartermaster: readonly WebhookConfiguration[] | Unreadable,
  policy: Pick<Policy, "jobKinds">,
): DoctorFinding[] {
  if (isUnreadable(quartermaster)) return [];
  const kinds = [...new Map(policy.jobKinds.map((k) => [`${k.group}/${k.plural}`, { group: k.group, plural: k.plural }])).values()];
  const kueueMutating = kueueConfigs.filter((c) => c.kind === "MutatingWebhookConfiguration");
  const managed = new Set<string>();
  const kueueConfigNames = new Set<string>();
  for (const c of kueueMutating)
    for (const h of c.webhooks ?? []) {
      const found = covered(h, "CREATE", kinds);
      if (found.size > 0) kueueConfigNames.add(c.metadata.name);
      for (const k of found) managed.add(k);
    }
  if (managed.size === 0)
    return [
      {
        check: "kueue-webhooks",
        severity: "info",
        subject: "Kueue webhooks",
        message: "Kueue's webhooks mutate none of the policy's job kinds: nothing to reconcile with Quartermaster's",
        fix: "",
      },
    ];
  const find = (kind: WebhookConfiguration["kind"], name: string): { config: WebhookConfiguration; hook: WebhookEntry } | undefined => {
    for (const config of quartermaster.filter((c) => c.kind === kind)) {
      const hook = (config.webhooks ?? []).find((h) => h.name === name);
      if (hook) return { config, hook };
    }
    return undefined;
  };
  const out: DoctorFinding[] = [];
  const kueueNames = [...kueueConfigNames].sort();
  const mutate = find("MutatingWebhookConfiguration", JOBS_MUTATE);
  out.push(...mutateFindings(mutate, managed, kueueNames, kinds));
  const validate = find("ValidatingWebhookConfiguration", JOBS_VALIDATE);
  if (validate) {
    const unchecked = [...managed].filter((k) => !covered(validate.hook, "UPDATE", kinds).has(k));
    if (unchecked.length > 0)
      out.push({
        check: "kueue-webhooks",
        severity: "warning",
        subject: JOBS_VALIDATE,
        message:
          `${validate.config.metadata.name}'s ${JOBS_VALIDATE} does not match UPDATE of ${kindList(unchecked)}: Kueue's admission (an UPDATE that unsuspends ` +
          "the job and writes the flavor's nodeLabels into its templates) is never checked, so a flavor places jobs on accelerators the namespace may not use",
        fix: APPLY_FIX,
      });
  }
  if (out.length === 0)
    out.push({
      check: "kueue-webhooks",
      severity: "ok",
      subject: "Kueue webhooks",
      message: `Kueue mutates ${kindList(managed)}; ${JOBS_MUTATE} covers them with reinvocationPolicy IfNeeded${validate ? ` and ${JOBS_VALIDATE} sees Kueue's admission UPDATE` : ""}`,
      fix: "",
    });
  return out;
}

// ---- c. flavors against the allow-lists ---------------------------------------------------------------------

/**
 * Per flavor and namespace: the flavor's nodeLabels judged by accelerator-allowed with the namespace's limits,
 * for every in-scope namespace whose LocalQueue feeds a ClusterQueue listing the flavor.
 */
export function checkKueueFlavors(state: KueueState, policy: Policy, ownNamespace: string): DoctorFinding[] {
  const scope = namespaceScope(ownNamespace);
  const namespaces = new Map(state.namespaces.map((n) => [n.name, n]));
  const flavors = new Map(state.resourceFlavors.flatMap((f) => (flavorLabels(f) ? [[flavorLabels(f)!.name, flavorLabels(f)!.nodeLabels] as const] : [])));
  const queueFlavors = new Map(
    state.clusterQueues.map((cq) => [String((cq.metadata as { name?: string } | undefined)?.name), [...new Set(clusterQueueQuotas(cq).map((q) => q.flavor))]]),
  );
  // (flavor, namespace) → the LocalQueues and ClusterQueues that lead there.
  const routes = new Map<string, { flavor: string; namespace: string; localQueues: Set<string>; clusterQueues: Set<string> }>();
  for (const lq of state.localQueues) {
    const m = (lq.metadata ?? {}) as { name?: string; namespace?: string };
    const cq = (lq.spec as { clusterQueue?: unknown } | undefined)?.clusterQueue;
    if (!m.name || !m.namespace || typeof cq !== "string") continue;
    const ns = namespaces.get(m.namespace);
    if (!ns || !inScope(scope, ns).inScope) continue;
    for (const flavor of queueFlavors.get(cq) ?? []) {
      const key = `${flavor}\0${m.namespace}`;
      const r = routes.get(key) ?? { flavor, namespace: m.namespace, localQueues: new Set(), clusterQueues: new Set() };
      r.localQueues.add(m.name);
      r.clusterQueues.add(cq);
      routes.set(key, r);
    }
  }
  const out: DoctorFinding[] = [];
  let judged = 0;
  for (const r of [...routes.values()].sort((a, b) => (a.flavor === b.flavor ? (a.namespace < b.namespace ? -1 : 1) : a.flavor < b.flavor ? -1 : 1))) {
    const nodeLabels = flavors.get(r.flavor);
    if (!nodeLabels || Object.keys(nodeLabels).length === 0) continue;
    const limits = effectiveLimits(policy, r.namespace);
    if (!limits.allowedAccelerators && !limits.allowedPartitions) continue;
    judged++;
    const found = validateAccelerators(undefined, { containers: [], nodeSelector: nodeLabels }, { policy, limits, namespace: r.namespace });
    if (found.violations.length === 0) continue;
    const labels = Object.entries(nodeLabels)
      .map(([k, v]) => `${k}=${v}`)
      .join(", ");
    out.push({
      check: "kueue-flavors",
      severity: "warning",
      subject: `ResourceFlavor ${r.flavor}`,
      message:
        `LocalQueue ${[...r.localQueues]
          .sort()
          .map((q) => `${r.namespace}/${q}`)
          .join(", ")} feeds ClusterQueue ${[...r.clusterQueues].sort().join(", ")}, ` +
        `which admits into flavor ${r.flavor} (nodeLabels ${labels}): ${[...new Set(found.violations.map((v) => v.message))].join("; ")}. ` +
        "Jobs Kueue admits there are refused at the admission UPDATE by /validate/jobs and stay suspended",
      fix: `remove flavor ${r.flavor} from ClusterQueue ${[...r.clusterQueues].sort().join(", ")} (or point the LocalQueue at a ClusterQueue whose flavors namespace ${r.namespace} may use), or allow the value in the policy's limits for ${r.namespace}`,
    });
  }
  if (out.length === 0)
    out.push({
      check: "kueue-flavors",
      severity: "ok",
      subject: "Kueue ResourceFlavors",
      message: `no flavor's nodeLabels contradict the allow-lists of the namespaces queued into it (${plural(judged, "flavor and namespace pair", "flavor and namespace pairs")} judged)`,
      fix: "",
    });
  return out;
}

/** Every Kueue finding: none when Kueue is not installed; one "not checked" warning when it could not be read. */
export function checkKueue(
  kueue: KueueSnapshot | undefined,
  quartermaster: readonly WebhookConfiguration[] | Unreadable,
  policy: Policy,
  ownNamespace: string,
): DoctorFinding[] {
  if (kueue === undefined || kueue === "absent") return [];
  if (isUnreadable(kueue))
    return [
      {
        check: "kueue-quota",
        severity: "warning",
        subject: "Kueue",
        message: `Kueue's objects not checked: ${kueue.error}`,
        fix: "run doctor as a user who may list resourceflavors, clusterqueues and localqueues (kueue.x-k8s.io), nodes and namespaces",
      },
    ];
  return [
    ...checkKueueQuota(kueue, policy),
    ...checkKueueWebhooks(kueue.webhookConfigurations, quartermaster, policy),
    ...checkKueueFlavors(kueue, policy, ownNamespace),
  ];
}

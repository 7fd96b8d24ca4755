/**
 * @module
 * queue-capacity (issue 33): a queued job its ClusterQueue can never admit, decided on what
 * `src/admission/queue.ts` read (pure). Kueue would hold such a job as inadmissible forever; refused (or warned, by
 * the rule's enforcement mode) at CREATE instead, naming the queue, the flavors and their quota.
 *
 * What Kueue does (sigs.k8s.io/kueue v0.19.2 `pkg/scheduler/flavorassigner/flavorassigner.go`): each pod set (one
 * per replica type, `replicas` pods of the template's requests) gets, per resource, a flavor of the ClusterQueue's
 * resource group covering that resource (`findFlavorForPodSets`; no group: "resource ... unavailable in
 * ClusterQueue", never admitted). A flavor is tried only when it fits the template (`checkFlavorForPodSets`): every
 * NoSchedule/NoExecute `nodeTaints` entry tolerated by the template's tolerations plus the flavor's own, and the
 * flavor's `nodeLabels` matching the template's `nodeSelector` and required node affinity, both cut down to the label
 * keys the group's flavors use (`flavorSelector`: an affinity term left empty matches every flavor). Then the
 * pod set's whole request, plus what earlier pod sets put on that flavor, must be at most the flavor's
 * `PotentialAvailable` (`fitsResourceQuota`; kueue `pkg/cache/scheduler/resource_node.go` potentialAvailable): the
 * `nominalQuota` for a ClusterQueue in no cohort; in a cohort, at most `nominalQuota + borrowingLimit` when the
 * borrowing limit is set, and otherwise bounded only by what the cohort's other members lend, which is not read
 * here (their ClusterQueues would have to be listed): treated as unbounded, never a refusal.
 *
 * So a job is refused only for what no later state of the queue can change short of editing the ClusterQueue or
 * its flavors (the conditions are necessary ones for admission, never Kueue's whole greedy search):
 * - a GPU resource no resource group of the ClusterQueue covers;
 * - a pod set no flavor of the covering group fits (taints, node labels);
 * - a pod set asking for more of a GPU resource than the limit of every flavor it fits (a pod set is admitted into
 *   one flavor per resource group, so its GPUs cannot be split across flavors);
 * - the job asking for more in all than the limits of the flavors its pod sets fit, summed.
 * Flavors that do not exist or could not be read count as fitting, with unbounded quota. GPUs asked for through
 * DRA claims are not counted (Kueue charges them only through its `deviceClassMappings`). A Kueue configured with
 * `resources.transformations` or `excludeResourcePrefixes` for a GPU resource charges something else: set the rule
 * to `warn` or `audit` there.
 */
import type { V1NodeSelectorRequirement, V1PodSpec, V1Toleration } from "@kubernetes/client-node";
import type { QueueRead } from "../kueue/queues.js";
import { KUEUE_QUEUE_NAME } from "../kueue/admission.js";
import { effectivePodGpuNanos } from "../core/gpu.js";
import type { KubeObject } from "../core/kube.js";
import { formatNano, parseQuantity } from "../core/quantity.js";
import type { JobKind } from "../policy/types.js";
import { replicasOf } from "../membership/resolve.js";
import { jobShape } from "../kinds/index.js";
import type { Finding, Findings, ValidationContext } from "./types.js";
import { objectOr } from "../core/object.js";

/** One of Kueue's pod sets of a job: a replica type, its pods, and what each asks for. */
export interface PodSet {
  name: string;
  count: number;
  /** GPUs per pod by resource, in nano-units (container requests, else limits; no DRA claims). */
  gpus: ReadonlyMap<string, bigint>;
  spec: V1PodSpec | undefined;
  /** Where `resource` is asked for in this pod set's template (the first container that does). */
  field(resource: string): string;
}

type Obj = Record<string, unknown>;
const arrayOr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const strings = (v: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(objectOr(v)).filter((e): e is [string, string] => typeof e[1] === "string"));

/** The job's pod sets as Kueue builds them: one per replica (a TrainJob's: its runtime's replicated Jobs). */
export function jobPodSets(job: KubeObject, kind: JobKind, ctx: ValidationContext, runtime?: KubeObject): PodSet[] {
  return jobShape(kind)
    .replicas(job, kind, runtime)
    .map((r) => {
      const spec = r.spec.template?.spec;
      const map = r.mapField ?? ((f: string) => f);
      return {
        name: r.type,
        count: replicasOf(r.spec),
        gpus: spec ? effectivePodGpuNanos(spec, ctx.policy.gpu) : new Map<string, bigint>(),
        spec,
        field: (resource: string) => map(resourceField(spec, `${r.templateField}.spec`, resource)),
      };
    });
}

function resourceField(spec: V1PodSpec | undefined, path: string, resource: string): string {
  for (const list of ["containers", "initContainers"] as const) {
    const containers = spec?.[list] ?? [];
    for (let i = 0; i < containers.length; i++) {
      const res = containers[i]?.resources;
      for (const side of ["requests", "limits"] as const)
        if (res?.[side]?.[resource] !== undefined) return `${path}.${list}[${i}].resources.${side}[${resource}]`;
    }
  }
  return path;
}

// ---- the ClusterQueue and its flavors -----------------------------------------------------------------------

interface Group {
  covered: string[];
  flavors: Array<{ name: string; quota: Map<string, { nominal: bigint; borrowingLimit?: bigint }> }>;
}

const nanoOf = (v: unknown): bigint | undefined => {
  const q = typeof v === "string" || typeof v === "number" ? parseQuantity(v) : undefined;
  return q?.nano;
};

function groupsOf(clusterQueue: KubeObject): Group[] {
  return arrayOr(objectOr(clusterQueue.spec).resourceGroups).map((g) => ({
    covered: arrayOr(objectOr(g).coveredResources).filter((r): r is string => typeof r === "string"),
    flavors: arrayOr(objectOr(g).flavors).map((f) => {
      const quota = new Map<string, { nominal: bigint; borrowingLimit?: bigint }>();
      for (const r of arrayOr(objectOr(f).resources)) {
        const name = objectOr(r).name;
        if (typeof name !== "string") continue;
        const borrowingLimit = nanoOf(objectOr(r).borrowingLimit);
        quota.set(name, { nominal: nanoOf(objectOr(r).nominalQuota) ?? 0n, ...(borrowingLimit === undefined ? {} : { borrowingLimit }) });
      }
      return { name: String(objectOr(f).name ?? ""), quota };
    }),
  }));
}

/** A flavor's most for one resource, and how it was arrived at; `most` undefined: not bounded as far as is known. */
interface Limit {
  most?: bigint;
  how: string;
}

function limitOf(quota: { nominal: bigint; borrowingLimit?: bigint } | undefined, cohort: string | undefined): Limit {
  const nominal = quota?.nominal ?? 0n;
  if (!cohort) return { most: nominal, how: `nominalQuota ${formatNano(nominal)}, no cohort to borrow from` };
  if (quota?.borrowingLimit !== undefined)
    return { most: nominal + quota.borrowingLimit, how: `nominalQuota ${formatNano(nominal)} + borrowingLimit ${formatNano(quota.borrowingLimit)}` };
  return { how: `nominalQuota ${formatNano(nominal)}, borrowing from cohort ${cohort} without a limit` };
}

// ---- does a flavor fit a pod set (kueue checkFlavorForPodSets) ------------------------------------------------

/** Why the flavor cannot take the pod set's pods, or undefined when it can (or it cannot be told). */
function misfit(spec: V1PodSpec | undefined, flavor: KubeObject | undefined, keys: ReadonlySet<string>): string | undefined {
  if (!flavor) return undefined;
  const fspec = objectOr(flavor.spec);
  const tolerations = [...arrayOr(spec?.tolerations), ...arrayOr(fspec.tolerations)].map(objectOr);
  for (const taint of arrayOr(fspec.nodeTaints).map(objectOr)) {
    if (taint.effect !== "NoSchedule" && taint.effect !== "NoExecute") continue;
    if (!tolerations.some((t) => tolerates(t, taint)))
      return `untolerated taint ${String(taint.key)}${taint.value ? `=${String(taint.value)}` : ""}:${String(taint.effect)}`;
  }
  const labels = strings(fspec.nodeLabels);
  for (const [k, v] of Object.entries(spec?.nodeSelector ?? {}))
    if (keys.has(k) && labels[k] !== v) return `its nodeLabels do not match nodeSelector ${k}=${v}`;
  const terms = arrayOr(objectOr(objectOr(objectOr(spec?.affinity).nodeAffinity).requiredDuringSchedulingIgnoredDuringExecution).nodeSelectorTerms);
  const cut = terms.map((t) =>
    arrayOr(objectOr(t).matchExpressions)
      .map((e) => e as V1NodeSelectorRequirement)
      .filter((e) => keys.has(e.key)),
  );
  // A term left with nothing Kueue reads matches every flavor (kueue flavorSelector).
  if (cut.length === 0 || cut.some((t) => t.length === 0)) return undefined;
  if (cut.some((term) => term.every((e) => requirementMatches(e, labels) !== false))) return undefined;
  return "its nodeLabels match no term of the required node affinity";
}

/** corev1 Toleration.ToleratesTaint; an operator not known here tolerates (never a refusal on a guess). */
function tolerates(t: V1Toleration, taint: Obj): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  if (!t.key && t.operator !== "Exists") return false;
  const value = typeof taint.value === "string" ? taint.value : "";
  switch (t.operator ?? "Equal") {
    case "Exists":
      return true;
    case "Equal":
    case "":
      return (t.value ?? "") === value;
    default:
      return true;
  }
}

/** A node selector requirement against the flavor's nodeLabels; undefined for an operator not known here (a match). */
function requirementMatches(e: V1NodeSelectorRequirement, labels: Record<string, string>): boolean | undefined {
  const has = Object.hasOwn(labels, e.key);
  const values = e.values ?? [];
  switch (e.operator) {
    case "In":
      return has && values.includes(labels[e.key]!);
    case "NotIn":
      return !has || !values.includes(labels[e.key]!);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "Gt":
    case "Lt": {
      const [a, b] = [Number.parseInt(labels[e.key] ?? "", 10), Number.parseInt(values[0] ?? "", 10)];
      if (!has || Number.isNaN(a) || Number.isNaN(b)) return false;
      return e.operator === "Gt" ? a > b : a < b;
    }
    default:
      return undefined;
  }
}

// ---- the decision -----------------------------------------------------------------------------------------------

const describe = (flavor: string, l: Limit): string => `${flavor} ${l.most === undefined ? "unbounded" : formatNano(l.most)} (${l.how})`;

/** The field naming the job's queue: its label, or the older annotation. */
function queueField(job: KubeObject): string {
  const labels = objectOr(objectOr(job.metadata).labels);
  return `metadata.${typeof labels[KUEUE_QUEUE_NAME] === "string" && labels[KUEUE_QUEUE_NAME] !== "" ? "labels" : "annotations"}[${KUEUE_QUEUE_NAME}]`;
}

/**
 * The queue-capacity findings for a queued job's pod sets, on what was read: violations for what the ClusterQueue
 * can never admit (see the module comment), warnings for what could not be checked.
 */
export function queueCapacityFindings(job: KubeObject, podSets: readonly PodSet[], read: QueueRead): Findings {
  if (read.kind === "none") return { violations: [], warnings: [] };
  if (read.kind === "unavailable") return { violations: [], warnings: [`quartermaster: queue ${read.queue} not checked: ${read.reason}`] };
  const cq = read.clusterQueue;
  const cqName = String(objectOr(cq.metadata).name ?? "");
  const cohortName = objectOr(cq.spec).cohortName;
  const cohort = typeof cohortName === "string" && cohortName !== "" ? cohortName : undefined;
  const groups = groupsOf(cq);
  const where = `ClusterQueue ${cqName} (queue ${read.queue})`;
  const violations: Finding[] = [];
  const resources = [...new Set(podSets.flatMap((p) => [...p.gpus.entries()].filter(([, n]) => n > 0n && p.count > 0).map(([r]) => r)))];
  for (const resource of resources) {
    const asking = podSets.filter((p) => p.count > 0 && (p.gpus.get(resource) ?? 0n) > 0n);
    const group = groups.find((g) => g.covered.includes(resource));
    if (!group) {
      const covered = [...new Set(groups.flatMap((g) => g.covered))];
      violations.push({
        rule: "queue-capacity",
        field: asking[0]!.field(resource),
        message: `${where} has no quota for ${resource} (it covers ${covered.length ? covered.join(", ") : "nothing"}): Kueue would never admit the job`,
      });
      continue;
    }
    violations.push(...resourceViolations({ job, resource, asking, group, cohort, where, flavors: read.flavors }));
  }
  const warnings = read.unread.length
    ? [`quartermaster: queue ${read.queue}: some ResourceFlavors could not be read (${read.unread.join("; ")}); counted as fitting`]
    : [];
  return { violations, warnings };
}

interface ResourceCheck {
  job: KubeObject;
  resource: string;
  asking: readonly PodSet[];
  group: Group;
  cohort: string | undefined;
  where: string;
  flavors: ReadonlyMap<string, KubeObject | undefined>;
}

function resourceViolations({ job, resource, asking, group, cohort, where, flavors }: ResourceCheck): Finding[] {
  // The label keys Kueue matches a pod set's node selection on: those the group's flavors' nodeLabels use.
  const keys = new Set(group.flavors.flatMap((f) => Object.keys(strings(objectOr(flavors.get(f.name)?.spec).nodeLabels))));
  const out: Finding[] = [];
  const usable = new Map<string, Limit>();
  let total = 0n;
  for (const p of asking) {
    const per = p.gpus.get(resource)!;
    const want = BigInt(p.count) * per;
    total += want;
    const fits = group.flavors.map((f) => ({ name: f.name, why: misfit(p.spec, flavors.get(f.name), keys), limit: limitOf(f.quota.get(resource), cohort) }));
    const ok = fits.filter((f) => f.why === undefined);
    for (const f of ok) usable.set(f.name, f.limit);
    const others = fits.filter((f) => f.why !== undefined).map((f) => `${f.name}: ${f.why}`);
    const asks = `${p.name} asks for ${p.count} × ${formatNano(per)} = ${formatNano(want)} ${resource}`;
    if (ok.length === 0) {
      out.push({
        rule: "queue-capacity",
        field: p.field(resource),
        message: `${asks}, but no flavor of ${where} can take its pods (${others.join("; ")})`,
        value: Number(want / 1_000_000_000n),
      });
      continue;
    }
    if (ok.some((f) => f.limit.most === undefined || want <= f.limit.most)) continue;
    const not = others.length ? `; the other flavors do not fit its pods (${others.join("; ")})` : "";
    out.push({
      rule: "queue-capacity",
      field: p.field(resource),
      message: `${asks}, more than ${where} can ever admit into one flavor: ${ok.map((f) => describe(f.name, f.limit)).join(", ")}${not}`,
      value: Number(want / 1_000_000_000n),
    });
  }
  if (out.length > 0 || [...usable.values()].some((l) => l.most === undefined)) return out;
  const room = [...usable.values()].reduce((n, l) => n + l.most!, 0n);
  if (total > room)
    out.push({
      rule: "queue-capacity",
      field: queueField(job),
      message: `the job asks for ${formatNano(total)} ${resource} in all, more than ${where} can ever admit in the flavors its pods fit: ${[...usable]
        .map(([name, l]) => describe(name, l))
        .join(", ")} (${formatNano(room)} in all)`,
      value: Number(total / 1_000_000_000n),
    });
  return out;
}

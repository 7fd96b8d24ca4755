/**
 * @module
 * Why a job is not running, as one verdict (issue 49): every reason that holds for the job in its evidence, the
 * first by {@link REASONS}' order as the main one and the rest in `also`, each with the objects, numbers and
 * messages it rests on and a concrete next step. Pure: the same evidence and time give the same verdict.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { effectivePodGpus } from "../core/gpu.js";
import { QUEUED_WORKLOAD_KINDS } from "../core/job-shapes.js";
import { asV1PodSpec } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import { KUEUE_ADMISSION_REFUSED, WEBHOOK_EVENT_SOURCE } from "../admission/events.js";
import type { NodeEntry } from "../ledger/compute.js";
import { jobReplicaTotal } from "../topology/ceiling.js";
import { workloadShape } from "../topology/workload.js";
import { queueFinding, reservationText } from "./kueue.js";
import { describePlacement, freeOn, nodeMatches, staleness, taintText, untoleratedTaints } from "./nodes.js";
import {
  conditionOf,
  conditionText,
  conditionsOf,
  duration,
  eventView,
  labelsOf,
  metaOf,
  nameOf,
  objectRef,
  secondsSince,
  uidOf,
  type EventView,
} from "./read.js";
import { REASONS, type EvidenceItem, type ExplainEvidence, type Finding, type Reason, type Verdict } from "./types.js";

/** Most pods quoted per reason: a 1,000-pod job's verdict names a few and counts the rest. */
const MAX_PODS_QUOTED = 5;

const podSpec = (pod: KubeObject): V1PodSpec => asV1PodSpec(objectOr(pod.spec));
const phaseOf = (pod: KubeObject): string => String(objectOr(pod.status).phase ?? "Pending");
const isActive = (pod: KubeObject): boolean => !["Succeeded", "Failed"].includes(phaseOf(pod)) && metaOf(pod).deletionTimestamp === undefined;

/** Whether the job is held suspended (`spec.suspend`, Kubeflow v1 `spec.runPolicy.suspend`). */
function suspendedOf(job: KubeObject): boolean {
  const spec = objectOr(job.spec);
  return spec.suspend === true || objectOr(spec.runPolicy).suspend === true;
}

/** How many pods the job runs at once: Kueue's pod sets, else the kind's replicas; undefined when unknown. */
export function expectedPods(ev: ExplainEvidence): number | undefined {
  const sets = objectOr(ev.workload?.spec).podSets;
  if (Array.isArray(sets) && sets.length > 0)
    return (sets as unknown[]).reduce<number>((n, s) => n + (isObject(s) && typeof s.count === "number" ? s.count : 1), 0);
  if (!ev.job) return undefined;
  if (ev.kind.jobKind && ev.kind.jobKind.framework !== "trainer") return jobReplicaTotal(ev.job, ev.kind.jobKind);
  if (QUEUED_WORKLOAD_KINDS.some((k) => k.group === ev.kind.group && k.kind === ev.kind.kind)) {
    let n = 0;
    for (const p of workloadShape(ev.kind).pods(ev.job)) {
      if (!("pods" in p.count)) return undefined;
      n += Number(p.count.pods);
    }
    return n;
  }
  return undefined;
}

/** A Kubernetes timestamp's age, as `for 4m10s` (empty when not a time). */
function forHow(at: unknown, now: Date): string {
  const s = secondsSince(at, now);
  return s === undefined ? "" : ` for ${duration(s)}`;
}

function finished(ev: ExplainEvidence, job: KubeObject, now: Date): Finding | undefined {
  const done = conditionsOf(job).find((c) => ev.kind.finishedConditions.includes(c.type) && c.status === "True");
  if (!done) return undefined;
  return {
    reason: "finished",
    summary: `the job has finished: ${done.type}${done.reason ? ` (${done.reason})` : ""}`,
    evidence: [{ object: objectRef(job, ev.kind.kind), text: conditionText(done, now) }],
    next:
      done.type === "Failed"
        ? `read the failed pods' logs (kubectl logs -n ${ev.ref.namespace} -l <the job's pod labels> --previous), fix, and create the job again`
        : "nothing: it ran to completion (its pods and GPUs are released per its cleanPodPolicy/TTL)",
  };
}

function refused(ev: ExplainEvidence, job: KubeObject, events: EventView[], stillHeld: boolean): Finding | undefined {
  const jobUid = uidOf(job);
  // A refusal Event outlives the refusal (Events are kept an hour): it counts while the job is still held back.
  const denial = !stillHeld
    ? undefined
    : events.find((e) => e.reason === KUEUE_ADMISSION_REFUSED && e.kind === ev.kind.kind && e.name === ev.ref.name && (!e.uid || e.uid === jobUid));
  const deny = ev.policyResults.filter((r) => r.result === "fail" && (r.mode ?? "deny") === "deny");
  if (!denial && deny.length === 0) return undefined;
  const evidence: EvidenceItem[] = [];
  if (denial)
    evidence.push({
      object: objectRef(job, ev.kind.kind),
      text: `Event ${denial.reason} (${denial.source}, ×${denial.count}${denial.at ? `, last ${denial.at}` : ""}): ${denial.message}`,
    });
  for (const r of deny) evidence.push({ object: r.object, text: `rule ${r.rule}${r.field ? ` at ${r.field}` : ""} (deny): ${r.message}` });
  const fields = [...new Set(deny.map((r) => r.field).filter(Boolean))];
  const fromEvent = denial ? [...denial.message.matchAll(/(?:: |; )([\w.[\]"/-]+): /g)].map((m) => m[1]!) : [];
  const where = [...new Set([...fields, ...fromEvent])].join(", ");
  return {
    reason: "refused",
    summary: denial
      ? "Quartermaster refused Kueue's admission of the job, so it stays suspended"
      : `the job breaks ${deny.map((r) => r.rule).join(", ")} (deny)`,
    evidence,
    next: `change ${where || "the fields named"} to be within the policy (or have the platform team change the rule); ${denial ? "Kueue admits the job again on its next try" : "an UPDATE that keeps the violation is refused"}`,
  };
}

function warned(ev: ExplainEvidence): Finding | undefined {
  const warns = ev.policyResults.filter((r) => r.result === "warn" || (r.result === "fail" && r.mode !== undefined && r.mode !== "deny"));
  if (warns.length === 0) return undefined;
  return {
    reason: "warned",
    summary: `Quartermaster warned about ${[...new Set(warns.map((r) => r.rule))].join(", ")}`,
    evidence: warns.map((r) => ({ object: r.object, text: `rule ${r.rule}${r.field ? ` at ${r.field}` : ""} (${r.mode ?? r.result}): ${r.message}` })),
    next: `fix ${[...new Set(warns.map((r) => r.field ?? r.rule))].join(", ")} before the rule moves to deny (the warning does not stop the job by itself)`,
  };
}

function noController(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], now: Date): Finding | undefined {
  const jobRef = objectRef(job, ev.kind.kind);
  const c = ev.kind.controller;
  const wl = ev.workload;
  const startedAt = wl ? conditionOf(wl, "Admitted")?.lastTransitionTime : metaOf(job).creationTimestamp;
  const silent = c.state === "unknown" && conditionsOf(job).length === 0 && (secondsSince(startedAt, now) ?? 0) >= ev.settings.graceSeconds;
  if (active.length > 0 || (ev.kind.served && c.state !== "not-running" && c.state !== "absent" && !silent)) return undefined;
  const evidence: EvidenceItem[] = [{ object: jobRef, text: `${wl ? "admitted by Kueue" : "not suspended"}${forHow(startedAt, now)}, and no pods` }];
  if (!ev.kind.served) evidence.push({ object: `CRD ${ev.kind.plural}.${ev.kind.group}`, text: `${ev.kind.group}/${ev.kind.version} is not served` });
  if (c.state !== "unknown" || c.detail) evidence.push({ object: `controller ${c.name}`, text: c.detail ?? c.state });
  if (silent) evidence.push({ object: jobRef, text: "status.conditions is empty: no controller has written the job's status" });
  return !ev.kind.served
    ? {
        reason: "no-controller",
        summary: `${ev.kind.kind}'s CRD is not served`,
        evidence,
        next: `install the CRD of ${ev.kind.plural}.${ev.kind.group} (version ${ev.kind.version}) and its controller`,
      }
    : {
        reason: "no-controller",
        summary: `${ev.kind.kind}'s controller (${c.name}) is ${c.state === "unknown" ? "not acting on it" : c.state}`,
        evidence,
        next: `install or restart ${c.name} (kubectl get deploy -A | grep ${c.name}; its logs say why it does not run)`,
      };
}

function controllerError(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], events: EventView[], now: Date): Finding | undefined {
  const jobRef = objectRef(job, ev.kind.kind);
  const bad = conditionsOf(job).filter(
    (x) => x.status === "True" && !ev.kind.finishedConditions.includes(x.type) && /error|fail|invalid|backoff/i.test(`${x.type} ${x.reason ?? ""}`),
  );
  const warnings = events.filter(
    (e) =>
      e.type === "Warning" &&
      e.kind === ev.kind.kind &&
      e.name === ev.ref.name &&
      e.source !== WEBHOOK_EVENT_SOURCE &&
      e.reason !== KUEUE_ADMISSION_REFUSED &&
      /fail|error|invalid|backoff/i.test(e.reason),
  );
  const expected = expectedPods(ev);
  if ((bad.length > 0 || warnings.length > 0) && (expected === undefined || active.length < expected)) {
    return {
      reason: "controller-error",
      summary: `${ev.kind.kind}'s controller reports an error: ${bad[0] ? `${bad[0].type}: ${bad[0].message ?? bad[0].reason}` : `${warnings[0]!.reason}: ${warnings[0]!.message}`}`,
      evidence: [
        ...bad.map((x) => ({ object: jobRef, text: conditionText(x, now) })),
        ...warnings.slice(0, MAX_PODS_QUOTED).map((e) => ({ object: jobRef, text: `Event ${e.reason} (${e.source || "?"}, ×${e.count}): ${e.message}` })),
      ],
      next: "fix what the message names in the job (or the quota/webhook that refused its pods); the controller retries by itself",
    };
  }
  return undefined;
}

function phantom(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], now: Date): Finding | undefined {
  const wl = ev.workload;
  if (!wl || active.length > 0) return undefined;
  const reserved = conditionOf(wl, "QuotaReserved");
  if (reserved?.status !== "True") return undefined;
  const age = secondsSince(reserved.lastTransitionTime, now) ?? 0;
  const evicted = conditionOf(wl, "Evicted");
  if (age < ev.settings.graceSeconds && evicted?.status !== "True") return undefined;
  const evidence: EvidenceItem[] = [
    { object: objectRef(wl, "Workload"), text: `${reservationText(wl)}${forHow(reserved.lastTransitionTime, now)}, and the job has no pods` },
  ];
  if (evicted?.status === "True") evidence.push({ object: objectRef(wl, "Workload"), text: conditionText(evicted, now) });
  if (suspendedOf(job)) evidence.push({ object: objectRef(job, ev.kind.kind), text: "spec.suspend is true" });
  return {
    reason: "phantom-reservation",
    summary: `quota reserved with no pods for ${duration(age)}`,
    evidence,
    next: `the reservation blocks other jobs' quota (kubernetes-sigs/kueue#14811): if the job should run, see why its controller makes no pods; else delete the job (or kubectl delete workload -n ${ev.ref.namespace} ${nameOf(wl)}) to release it`,
  };
}

type PodCause = Exclude<
  Reason,
  | "not-found"
  | "finished"
  | "refused"
  | "inadmissible"
  | "queued"
  | "no-controller"
  | "controller-error"
  | "phantom-reservation"
  | "gang-partial"
  | "warned"
  | "running"
>;

interface PodJudgement {
  cause: PodCause;
  items: EvidenceItem[];
  /** Parts of the next step (deduplicated per reason). */
  next: string;
}

type Shapes = Map<string, { free: number; node: string; nodes: number; ledger: boolean }>;

/** {@link shapes} per node list (the same arrays recur for every pod of a placement) and resource, for one verdict. */
type ShapesMemo = WeakMap<readonly KubeObject[], Map<string, Shapes>>;

/** Free GPUs of `resource` per shape (accelerator × resource) among `nodes`: the largest block, its node, and the node count. */
function shapes(
  nodes: KubeObject[],
  ledger: Map<string, NodeEntry>,
  resource: string,
  acceleratorLabel: string,
): Map<string, { free: number; node: string; nodes: number; ledger: boolean }> {
  const out = new Map<string, { free: number; node: string; nodes: number; ledger: boolean }>();
  for (const n of nodes) {
    const { free, fromLedger } = freeOn(n, ledger.get(nameOf(n)), resource);
    const capacity = Number(objectOr(objectOr(n.status).allocatable)[resource] ?? ledger.get(nameOf(n))?.resources[resource]?.allocatable ?? 0);
    if (!(capacity > 0)) continue;
    const shape = `${labelsOf(n)[acceleratorLabel] ?? "unlabelled"} ${resource}`;
    const s = out.get(shape);
    if (!s) out.set(shape, { free, node: nameOf(n), nodes: 1, ledger: fromLedger });
    else {
      s.nodes += 1;
      if (free > s.free) Object.assign(s, { free, node: nameOf(n) });
    }
  }
  return out;
}

function shapesOf(memo: ShapesMemo, nodes: readonly KubeObject[], ledger: Map<string, NodeEntry>, resource: string, acceleratorLabel: string): Shapes {
  let byResource = memo.get(nodes);
  if (!byResource) {
    byResource = new Map<string, Shapes>();
    memo.set(nodes, byResource);
  }
  let out = byResource.get(resource);
  if (!out) byResource.set(resource, (out = shapes(nodes as KubeObject[], ledger, resource, acceleratorLabel)));
  return out;
}

/** What the judges of one pod share: the pod, its spec, the nodes by name, the ledger, the scheduler's condition. */
interface PodContext {
  ev: ExplainEvidence;
  pod: KubeObject;
  spec: V1PodSpec;
  ref: string;
  ledger: Map<string, NodeEntry>;
  nodesByName: Map<string, KubeObject>;
  shapes: ShapesMemo;
  maxFree: MaxFreeMemo;
  /** The PodScheduled condition when it is not True, as evidence (empty otherwise). */
  schedItem: EvidenceItem[];
}

/** The most GPUs of a resource free on one node of a node list, per list (the same arrays recur) and resource. */
type MaxFreeMemo = WeakMap<readonly KubeObject[], Map<string, number>>;

function maxFreeOf(c: PodContext, nodes: readonly KubeObject[], resource: string): number {
  let byResource = c.maxFree.get(nodes);
  if (!byResource) c.maxFree.set(nodes, (byResource = new Map<string, number>()));
  let most = byResource.get(resource);
  if (most === undefined) {
    most = 0;
    for (const n of nodes) most = Math.max(most, freeOn(n, c.ledger.get(nameOf(n)), resource).free);
    byResource.set(resource, most);
  }
  return most;
}

/** A pod bound to a node that went stale (its lease, its Ready condition, or gone). */
function judgeBound(c: PodContext): PodJudgement | undefined {
  const at = c.spec.nodeName!;
  const why = staleness(c.nodesByName.get(at), c.ledger.get(at));
  // A running pod's node counts only when the ledger says stale: a Ready=Unknown blip is the kubelet's to settle.
  if (!why || (phaseOf(c.pod) === "Running" && !c.ledger.get(at)?.stale)) return undefined;
  return {
    cause: "stale-node",
    items: [{ object: c.ref, text: `${phaseOf(c.pod)} on node ${at}, which is stale: ${why}` }],
    next: `drain node ${at} or bring its kubelet back; delete the pod so its controller recreates it elsewhere (kubectl delete pod -n ${c.ev.ref.namespace} ${nameOf(c.pod)})`,
  };
}

/** The values each label the pod's placement names has on the nodes (`key: A100 (3), H100 (2)`). */
function labelValues(spec: V1PodSpec, nodes: readonly KubeObject[]): string[] {
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  const keys = new Set([...Object.keys(spec.nodeSelector ?? {}), ...terms.flatMap((t) => (t.matchExpressions ?? []).map((r) => r.key))]);
  return [...keys].map((k) => {
    const values = new Map<string, number>();
    for (const n of nodes) {
      const v = labelsOf(n)[k];
      if (v !== undefined) values.set(v, (values.get(v) ?? 0) + 1);
    }
    return `${k}: ${values.size === 0 ? "on no node" : [...values].map(([v, n]) => `${v} (${n})`).join(", ")}`;
  });
}

function judgePlacement(c: PodContext, matching: KubeObject[]): PodJudgement | undefined {
  if (c.ev.nodes.length === 0 || matching.length > 0) return undefined;
  return {
    cause: "no-matching-node",
    items: [
      { object: c.ref, text: `requires ${describePlacement(c.spec)}; none of ${c.ev.nodes.length} nodes matches` },
      ...labelValues(c.spec, c.ev.nodes).map((t) => ({ object: "Nodes", text: `labels ${t}` })),
      ...c.schedItem,
    ],
    next: "change the job's nodeSelector/affinity (or quartermaster.dev/accelerator, gpu-partition annotations) to labels some node has, or label nodes to match",
  };
}

function judgeTaints(c: PodContext, matching: KubeObject[], tolerated: KubeObject[]): PodJudgement | undefined {
  if (matching.length === 0 || tolerated.length > 0) return undefined;
  const taints = new Map<string, string[]>();
  for (const n of matching) for (const t of untoleratedTaints(c.spec, n)) taints.set(taintText(t), [...(taints.get(taintText(t)) ?? []), nameOf(n)]);
  const nodes = (ns: string[]): string => `Nodes ${ns.slice(0, 3).join(", ")}${ns.length > 3 ? ` and ${ns.length - 3} more` : ""}`;
  return {
    cause: "untolerated-taint",
    items: [
      { object: c.ref, text: `every one of the ${matching.length} node(s) it may go to has a taint it does not tolerate` },
      ...[...taints].map(([t, ns]) => ({ object: nodes(ns), text: `taint ${t}` })),
      ...c.schedItem,
    ],
    next: `add a toleration for ${[...taints.keys()].join(", ")} to the job's pod template (or set the policy's gpu tolerations for it), or remove the taint from the nodes`,
  };
}

function judgeStale(c: PodContext, tolerated: KubeObject[], fresh: KubeObject[]): PodJudgement | undefined {
  if (tolerated.length === 0 || fresh.length > 0) return undefined;
  return {
    cause: "stale-node",
    items: tolerated
      .slice(0, MAX_PODS_QUOTED)
      .map((n) => ({ object: `Node ${nameOf(n)}`, text: `the only kind of node it may go to, stale: ${staleness(n, c.ledger.get(nameOf(n)))}` })),
    next: "bring the nodes back (kubelet, node lease) or add healthy nodes of that shape",
  };
}

/** No node the pod may use has a block of free GPUs as large as its ask: the largest free block per shape. */
function judgeGpus(c: PodContext, fresh: KubeObject[]): PodJudgement | undefined {
  const { ev, ledger } = c;
  for (const [resource, ask] of effectivePodGpus(c.spec, ev.settings.gpu)) {
    if (!(ask > 0) || maxFreeOf(c, fresh, resource) >= ask) continue;
    const near = shapesOf(c.shapes, fresh, ledger, resource, ev.settings.acceleratorLabel);
    const all = shapesOf(c.shapes, ev.nodes, ledger, resource, ev.settings.acceleratorLabel);
    const items: EvidenceItem[] = [{ object: c.ref, text: `asks ${ask} ${resource} per pod (placement: ${describePlacement(c.spec)})` }];
    for (const [shape, s] of near)
      items.push({
        object: `Nodes (${shape})`,
        text: `largest free block ${s.free} on ${s.node} of ${s.nodes} node(s) it may use${s.ledger ? "" : " (allocatable: no ledger)"}`,
      });
    for (const [shape, s] of all)
      if (!near.has(shape)) items.push({ object: `Nodes (${shape})`, text: `largest free block ${s.free} on ${s.node}, outside its placement` });
    if (all.size === 0) items.push({ object: "Nodes", text: `no node has ${resource}` });
    const max = Math.max(0, ...[...all.values()].map((s) => s.free));
    const next =
      all.size === 0
        ? `ask for a GPU resource the cluster has, or add nodes with ${resource}`
        : max >= ask
          ? `widen its placement (accelerator/partition) to the shape that has ${ask} free, or wait for GPUs to free up on its own shape`
          : `ask at most ${max} ${resource} per pod (more pods with fewer GPUs), or wait for running jobs to free a node`;
    return { cause: "no-gpu-shape", items: [...items, ...c.schedItem], next };
  }
  return undefined;
}

/** What kube-scheduler's PodScheduled message says, when the nodes and the ledger showed nothing. */
function judgeScheduler(c: PodContext, sched: ReturnType<typeof conditionOf>): PodJudgement | undefined {
  if (sched?.status !== "False" || sched.reason !== "Unschedulable") return undefined;
  const msg = sched.message ?? "";
  const cause: PodCause = /untolerated taint/i.test(msg)
    ? "untolerated-taint"
    : /node affinity|node selector/i.test(msg)
      ? "no-matching-node"
      : /claim|device/i.test(msg)
        ? "dra-unsatisfiable"
        : /Insufficient/i.test(msg)
          ? "no-gpu-shape"
          : "pending";
  return { cause, items: c.schedItem, next: "the scheduler's message says what filtered the nodes out; see `kubectl describe pod`" };
}

/**
 * Why one pod is not placed, in the scheduler's filter order: node selector and affinity, taints, stale nodes,
 * free GPUs, DRA claims; then the scheduler's own message.
 */
/** What every pod of the job is judged against, made once: the ledger and nodes by name, and the nodes each placement leaves. */
interface NodeView {
  ledger: Map<string, NodeEntry>;
  nodesByName: Map<string, KubeObject>;
  /** By placement (nodeSelector, node affinity, tolerations): a job's pods share a few, so each is filtered once. */
  filtered: Map<string, { matching: KubeObject[]; tolerated: KubeObject[]; fresh: KubeObject[] }>;
  shapes: ShapesMemo;
  maxFree: MaxFreeMemo;
}

/**
 * What verdicts on many jobs over the same nodes and ledger share (the resident reconciler's tick,
 * src/kube/blocked.ts): each node list filtered once per placement, and its free GPUs counted once, instead of
 * once per job. Keyed by the identity of the evidence's node and ledger arrays: give a new memo (or new arrays)
 * when they change.
 */
export interface VerdictMemo {
  readonly views: WeakMap<readonly KubeObject[], WeakMap<object, NodeView>>;
}

export const verdictMemo = (): VerdictMemo => ({ views: new WeakMap() });

const NO_LEDGER: readonly NodeEntry[] = [];

function nodeView(ev: ExplainEvidence, memo: VerdictMemo): NodeView {
  let byLedger = memo.views.get(ev.nodes);
  if (!byLedger) memo.views.set(ev.nodes, (byLedger = new WeakMap<object, NodeView>()));
  const key = ev.ledger?.nodes ?? NO_LEDGER;
  let view = byLedger.get(key);
  if (!view)
    byLedger.set(
      key,
      (view = {
        ledger: new Map((ev.ledger?.nodes ?? []).map((n) => [n.name, n])),
        nodesByName: new Map(ev.nodes.map((n) => [nameOf(n), n])),
        filtered: new Map(),
        shapes: new WeakMap(),
        maxFree: new WeakMap(),
      }),
    );
  return view;
}

function nodesFor(ev: ExplainEvidence, view: NodeView, spec: V1PodSpec): { matching: KubeObject[]; tolerated: KubeObject[]; fresh: KubeObject[] } {
  const key = JSON.stringify([spec.nodeSelector, spec.affinity?.nodeAffinity, spec.tolerations]);
  let f = view.filtered.get(key);
  if (!f) {
    const matching = ev.nodes.filter((n) => nodeMatches(spec, n));
    const tolerated = matching.filter((n) => untoleratedTaints(spec, n).length === 0);
    f = { matching, tolerated, fresh: tolerated.filter((n) => !staleness(n, view.ledger.get(nameOf(n)))) };
    view.filtered.set(key, f);
  }
  return f;
}

function judgePod(ev: ExplainEvidence, pod: KubeObject, view: NodeView, now: Date): PodJudgement | undefined {
  const { ledger } = view;
  const spec = podSpec(pod);
  const sched = conditionOf(pod, "PodScheduled");
  const ref = objectRef(pod, "Pod");
  const c: PodContext = {
    ev,
    pod,
    spec,
    ref,
    ledger,
    nodesByName: view.nodesByName,
    shapes: view.shapes,
    maxFree: view.maxFree,
    schedItem: sched && sched.status !== "True" ? [{ object: ref, text: conditionText(sched, now) }] : [],
  };
  if (spec.nodeName) return judgeBound(c);
  if (phaseOf(pod) !== "Pending") return undefined;
  const { matching, tolerated, fresh } = nodesFor(ev, view, spec);
  return (
    judgePlacement(c, matching) ??
    judgeTaints(c, matching, tolerated) ??
    judgeStale(c, tolerated, fresh) ??
    judgeGpus(c, fresh) ??
    judgeClaims(ev, pod, c.schedItem) ??
    judgeScheduler(c, sched)
  );
}

function judgeClaims(ev: ExplainEvidence, pod: KubeObject, schedItem: EvidenceItem[]): PodJudgement | undefined {
  const statuses = objectOr(pod.status).resourceClaimStatuses;
  const names = new Map<string, string>();
  for (const s of Array.isArray(statuses) ? (statuses as unknown[]) : [])
    if (isObject(s) && typeof s.resourceClaimName === "string") names.set(String(s.name), s.resourceClaimName);
  for (const c of podSpec(pod).resourceClaims ?? []) if (c.resourceClaimName) names.set(c.name, c.resourceClaimName);
  const unallocated = ev.claims.filter((c) => [...names.values()].includes(nameOf(c)) && !isObject(objectOr(c.status).allocation));
  if (unallocated.length === 0) return undefined;
  const devices = ev.slices.reduce((n, s) => n + (Array.isArray(objectOr(s.spec).devices) ? (objectOr(s.spec).devices as unknown[]).length : 0), 0);
  const drivers = [...new Set(ev.slices.map((s) => String(objectOr(s.spec).driver ?? "?")))];
  const items: EvidenceItem[] = unallocated.map((c) => {
    const reqs = objectOr(objectOr(c.spec).devices).requests;
    const text = (Array.isArray(reqs) ? (reqs as unknown[]) : [])
      .filter(isObject)
      .map((r) => {
        const exact = objectOr(r.exactly);
        const cls = exact.deviceClassName ?? r.deviceClassName;
        const count = exact.count ?? r.count ?? 1;
        return `${String(r.name)}: ${String(count)} × ${String(cls)}${exact.allocationMode === "All" || r.allocationMode === "All" ? " (all)" : ""}`;
      })
      .join(", ");
    return { object: objectRef(c, "ResourceClaim"), text: `not allocated; requests ${text || "?"}` };
  });
  items.push({
    object: "ResourceSlices",
    text: `${ev.slices.length} slice(s) publish ${devices} device(s)${drivers.length ? ` (drivers ${drivers.join(", ")})` : ""}`,
  });
  return {
    cause: "dra-unsatisfiable",
    items: [...items, ...schedItem],
    next:
      devices === 0
        ? "no DRA driver publishes devices: install the driver (its kubelet plugin publishes ResourceSlices) or ask for GPUs as an extended resource"
        : "ask for devices a slice has (its DeviceClass, count and selectors), or wait for allocated ones to be freed",
  };
}

function podFindings(ev: ExplainEvidence, active: KubeObject[], now: Date, memo: VerdictMemo): Finding[] {
  const view = nodeView(ev, memo);
  const by = new Map<PodCause, { pods: number; items: EvidenceItem[]; next: Set<string> }>();
  for (const pod of active) {
    const j = judgePod(ev, pod, view, now);
    if (!j) continue;
    const g = by.get(j.cause) ?? { pods: 0, items: [], next: new Set<string>() };
    g.pods += 1;
    if (g.pods <= MAX_PODS_QUOTED) for (const i of j.items) if (!g.items.some((x) => x.object === i.object && x.text === i.text)) g.items.push(i);
    g.next.add(j.next);
    by.set(j.cause, g);
  }
  const summaries: Record<PodCause, string> = {
    "stale-node": "on or only able to go to a stale node",
    "untolerated-taint": "Pending: every node it may go to has a taint it does not tolerate",
    "no-matching-node": "Pending: its nodeSelector/affinity matches no node",
    "no-gpu-shape": "Pending: no node it may use has enough free GPUs of its shape",
    "dra-unsatisfiable": "Pending: a ResourceClaim no published device satisfies",
    pending: "Pending; the scheduler gives no cause Quartermaster recognises",
  };
  return [...by].map(([cause, g]) => ({
    reason: cause,
    summary: `${g.pods} pod(s) ${summaries[cause]}`,
    evidence: g.pods > MAX_PODS_QUOTED ? [...g.items, { object: "Pods", text: `and ${g.pods - MAX_PODS_QUOTED} more` }] : g.items,
    next: [...g.next].join("; "),
  }));
}

function gang(ev: ExplainEvidence, active: KubeObject[], now: Date): Finding | undefined {
  const expected = expectedPods(ev);
  const running = active.filter((p) => phaseOf(p) === "Running");
  if (running.length === 0 || expected === undefined || running.length >= expected) return undefined;
  const held = new Map<string, number>();
  for (const p of running) for (const [r, n] of effectivePodGpus(podSpec(p), ev.settings.gpu)) held.set(r, (held.get(r) ?? 0) + n);
  const starts = running
    .map((p) => objectOr(p.status).startTime)
    .filter((t): t is string => typeof t === "string")
    .sort();
  const since = secondsSince(starts[0], now);
  const gpus = [...held].map(([r, n]) => `${n} ${r}`).join(", ") || "no GPUs";
  return {
    reason: "gang-partial",
    summary: `${running.length} of ${expected} pods running: ${gpus} held idle${since !== undefined ? ` for ${duration(since)}` : ""}`,
    evidence: [
      { object: objectRef(ev.job, ev.kind.kind), text: `${expected} pods expected, ${running.length} running, ${active.length - running.length} not running` },
      { object: "Pods", text: `the running pods hold ${gpus}${starts[0] ? ` since ${starts[0]}` : ""}` },
    ],
    next: "a distributed job waits for all its pods: fix the missing pods' cause (also below), or scale the job to what fits; with Kueue, waitForPodsReady evicts such a gang after its timeout",
  };
}

function running(ev: ExplainEvidence, active: KubeObject[]): Finding | undefined {
  const run = active.filter((p) => phaseOf(p) === "Running");
  const expected = expectedPods(ev);
  if (run.length === 0 || (expected !== undefined && run.length < expected) || run.length < active.length) return undefined;
  return {
    reason: "running",
    summary: `running: ${run.length} pod(s)`,
    evidence: [{ object: objectRef(ev.job, ev.kind.kind), text: `${run.length} of ${expected ?? run.length} pods Running` }],
    next: "nothing: the job is running",
  };
}

function pendingFallback(ev: ExplainEvidence, active: KubeObject[], expected: number | undefined): Finding {
  return {
    reason: "pending",
    summary: active.length === 0 ? "no pods yet" : `${active.length} pod(s) not running yet`,
    evidence: [
      {
        object: objectRef(ev.job, ev.kind.kind),
        text: `${active.length} active pod(s)${expected !== undefined ? ` of ${expected}` : ""}; no cause found in the evidence`,
      },
    ],
    next: `wait a little (pods being created, images pulled), then kubectl describe ${ev.kind.kind.toLowerCase()} -n ${ev.ref.namespace} ${ev.ref.name}`,
  };
}

/** The verdict on the job in `ev` at `now`; `memo` shares the node work between verdicts over the same nodes. */
export function explainJob(ev: ExplainEvidence, now: Date, memo: VerdictMemo = verdictMemo()): Verdict {
  const name = `${ev.kind.kind}/${ev.ref.name}`;
  const job = ev.job;
  if (!job) {
    const evidence: EvidenceItem[] = [{ object: `${ev.kind.kind} ${ev.ref.namespace}/${ev.ref.name}`, text: "not found" }];
    if (!ev.kind.served) evidence.push({ object: `CRD ${ev.kind.plural}.${ev.kind.group}`, text: `${ev.kind.group}/${ev.kind.version} is not served` });
    return {
      job: name,
      reason: "not-found",
      summary: `no ${ev.kind.kind} ${ev.ref.name} in namespace ${ev.ref.namespace}`,
      evidence,
      next: ev.kind.served
        ? "check the name and namespace; a job Quartermaster refused at CREATE was never stored (kubectl apply printed the refusal)"
        : `install the CRD of ${ev.kind.plural}.${ev.kind.group}`,
      also: [],
    };
  }
  const done = finished(ev, job, now);
  if (done) return { job: name, ...done, also: [] };
  const events = ev.events.map(eventView);
  const active = ev.pods.filter(isActive);
  const suspended = suspendedOf(job);
  const found: Finding[] = [];
  const add = (f: Finding | undefined): void => void (f && found.push(f));
  add(refused(ev, job, events, suspended || active.length === 0));
  const queue = queueFinding(ev, suspended, now);
  add(queue);
  if (!queue && !suspended) {
    add(noController(ev, job, active, now));
    add(controllerError(ev, job, active, events, now));
  }
  add(phantom(ev, job, active, now));
  for (const f of podFindings(ev, active, now, memo)) add(f);
  add(gang(ev, active, now));
  add(warned(ev));
  add(running(ev, active));
  if (!found.some((f) => f.reason !== "warned")) add(pendingFallback(ev, active, expectedPods(ev)));
  found.sort((a, b) => REASONS.indexOf(a.reason) - REASONS.indexOf(b.reason));
  // A warned job that runs is running, its warnings in `also`.
  const run = found.findIndex((f) => f.reason === "running");
  if (run > 0 && found.every((f, i) => i >= run || f.reason === "warned")) found.unshift(...found.splice(run, 1));
  const [main, ...also] = found;
  return { job: name, ...main!, also };
}

/** Whether the reason means the job is held back (every reason but running and finished). */
export const isBlocked = (r: Reason): boolean => r !== "running" && r !== "finished";

/**
 * @module
 * Why a job's pods are not running, pod by pod (issue 49): bound to a node gone stale, placement no node matches,
 * taints none tolerates, no node with the free GPUs of the shape asked (the ledger's largest free block per
 * accelerator and partition), a DRA claim no slice satisfies, or the scheduler's own word; grouped by cause into
 * findings. The node views are computed once per evidence snapshot and shared across jobs ({@link verdictMemo}).
 * Pure, beside ./verdict.ts, which weighs them with the job's other reasons.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { effectivePodGpus, isGpuResource } from "../core/gpu.js";
import { asV1PodSpec } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import type { NodeEntry } from "../ledger/compute.js";
import { describePlacement, freeOn, nodeMatches, staleness, taintText, untoleratedTaints } from "./nodes.js";
import { conditionOf, conditionText, labelsOf, nameOf, objectRef } from "./read.js";
import type { EvidenceItem, ExplainEvidence, Finding, Reason } from "./types.js";

/** Most pods quoted per reason: a 1,000-pod job's verdict names a few and counts the rest. */
export const MAX_PODS_QUOTED = 5;

export const podSpec = (pod: KubeObject): V1PodSpec => asV1PodSpec(objectOr(pod.spec));
export const phaseOf = (pod: KubeObject): string => String(objectOr(pod.status).phase ?? "Pending");

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

/**
 * What kube-scheduler's PodScheduled message says, when the nodes and the ledger showed nothing. Its counts are
 * over every node ("4 node(s) didn't match Pod's node affinity/selector" names the nodes outside the pod's
 * placement, not a placement that matches none): with the nodes read, taints and placement were judged above,
 * and only what the nodes do not show counts here: claims, and a GPU resource the scheduler found short (the
 * ledger lagging). `Insufficient cpu` or `memory` is no GPU shape: the pod stays `pending`, the message quoted.
 */
function judgeScheduler(c: PodContext, sched: ReturnType<typeof conditionOf>): PodJudgement | undefined {
  if (sched?.status !== "False" || sched.reason !== "Unschedulable") return undefined;
  const msg = sched.message ?? "";
  const nodesRead = c.ev.nodes.length > 0;
  const shortGpu = [...msg.matchAll(/Insufficient (\S+?)[,.]?(?:\s|$)/gi)].some((m) => isGpuResource(m[1]!, c.ev.settings.gpu.resources));
  const cause: PodCause =
    !nodesRead && /untolerated taint/i.test(msg)
      ? "untolerated-taint"
      : !nodesRead && /node affinity|node selector/i.test(msg)
        ? "no-matching-node"
        : /claim|device/i.test(msg)
          ? "dra-unsatisfiable"
          : shortGpu || (!nodesRead && /Insufficient/i.test(msg))
            ? "no-gpu-shape"
            : "pending";
  if (cause === "no-gpu-shape") {
    // The nodes showed enough (allocatable without a ledger is an upper bound): the ask, beside the scheduler's count.
    const asks = [...effectivePodGpus(c.spec, c.ev.settings.gpu)].map(([r, n]) => ({
      object: c.ref,
      text: `asks ${n} ${r} per pod (placement: ${describePlacement(c.spec)}); kube-scheduler finds no node with that many free${c.ledger.size === 0 ? " (no device ledger read: free GPUs per node unknown here)" : ""}`,
    }));
    return {
      cause,
      items: [...asks, ...c.schedItem],
      next: "ask fewer GPUs per pod, or wait for running jobs on its nodes to free a whole block (or add a node of its shape)",
    };
  }
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
 * src/run/blocked.ts): each node list filtered once per placement, and its free GPUs counted once, instead of
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

export function podFindings(ev: ExplainEvidence, active: KubeObject[], now: Date, memo: VerdictMemo): Finding[] {
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

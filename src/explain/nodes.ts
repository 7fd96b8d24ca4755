/**
 * @module
 * Which nodes a pending pod could go to, and why not, as kube-scheduler's filters decide it (kubernetes/kubernetes
 * `pkg/scheduler/framework/plugins`: NodeAffinity for `nodeSelector` and required node affinity, TaintToleration
 * and NodeUnschedulable for taints, NodeResourcesFit for the GPUs a node has free), read from the Node objects
 * and the device ledger's free counts. Written here rather than imported: the scheduler's code is Go, and
 * `explain` must say which filter emptied the list, which the scheduler's own Event gives only as a count.
 */
import type { V1NodeSelectorRequirement, V1PodSpec, V1Taint, V1Toleration } from "@kubernetes/client-node";
import { asV1Taint } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import type { NodeEntry } from "../ledger/compute.js";
import { labelsOf, nameOf } from "./read.js";

function requirementMatches(r: V1NodeSelectorRequirement, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      const n = Number(value);
      const bound = Number(values[0]);
      if (value === undefined || !Number.isInteger(n) || !Number.isInteger(bound)) return false;
      return r.operator === "Gt" ? n > bound : n < bound;
    }
    default:
      return false;
  }
}

/** Whether `node` passes the pod's `nodeSelector` and required node affinity (terms ORed, expressions ANDed). */
export function nodeMatches(spec: V1PodSpec, node: KubeObject): boolean {
  const labels = labelsOf(node);
  for (const [k, v] of Object.entries(spec.nodeSelector ?? {})) if (labels[k] !== v) return false;
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms || terms.length === 0) return true;
  const fields: Record<string, string> = { "metadata.name": nameOf(node) };
  return terms.some(
    (t) =>
      ((t.matchExpressions ?? []).length > 0 || (t.matchFields ?? []).length > 0) &&
      (t.matchExpressions ?? []).every((r) => requirementMatches(r, labels[r.key])) &&
      (t.matchFields ?? []).every((r) => requirementMatches(r, fields[r.key])),
  );
}

/** The pod's placement constraints as text, for evidence. */
export function describePlacement(spec: V1PodSpec): string {
  const parts: string[] = Object.entries(spec.nodeSelector ?? {}).map(([k, v]) => `${k}=${v}`);
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  const text = terms.map((t) =>
    (t.matchExpressions ?? []).map((r) => `${r.key} ${r.operator}${r.values?.length ? ` [${r.values.join(",")}]` : ""}`).join(" and "),
  );
  if (text.length > 0) parts.push(text.length > 1 ? text.map((t) => `(${t})`).join(" or ") : text[0]!);
  return parts.join("; ") || "none";
}

function tolerates(t: V1Toleration, taint: V1Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (!t.key) return t.operator === "Exists";
  if (t.key !== taint.key) return false;
  return t.operator === "Exists" || (t.value ?? "") === (taint.value ?? "");
}

/** The node's NoSchedule/NoExecute taints (a cordoned node's too) that none of the pod's tolerations tolerates. */
export function untoleratedTaints(spec: V1PodSpec, node: KubeObject): V1Taint[] {
  const nodeSpec = objectOr(node.spec);
  const taints: V1Taint[] = (Array.isArray(nodeSpec.taints) ? (nodeSpec.taints as unknown[]) : []).filter(isObject).map(asV1Taint);
  if (nodeSpec.unschedulable === true) taints.push({ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" });
  return taints.filter((taint) => taint.effect !== "PreferNoSchedule" && !(spec.tolerations ?? []).some((t) => tolerates(t, taint)));
}

export const taintText = (t: V1Taint): string => `${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`;

/** Why a node is not a place for new pods: the ledger's staleness, or a Ready condition that is not True. */
export function staleness(node: KubeObject | undefined, entry: NodeEntry | undefined): string | undefined {
  if (entry?.stale) return entry.staleReason ?? "stale in the device ledger";
  if (entry?.missing) return "gone from the API (still in the device ledger)";
  if (!node) return entry ? undefined : "no such node";
  const conditions = objectOr(node.status).conditions;
  const ready = Array.isArray(conditions) ? (conditions as unknown[]).find((c) => isObject(c) && c.type === "Ready") : undefined;
  if (isObject(ready) && ready.status !== "True") return `Ready is ${String(ready.status)}${ready.reason ? ` (${String(ready.reason)})` : ""}`;
  return undefined;
}

/**
 * GPUs of `resource` free on the node: the ledger's count (allocatable less what pods hold), else the Node's
 * allocatable when no ledger covers it (an upper bound, said so in the evidence).
 */
export function freeOn(node: KubeObject, entry: NodeEntry | undefined, resource: string): { free: number; fromLedger: boolean } {
  const r = entry?.resources[resource];
  if (r) return { free: r.inactive ? 0 : Math.max(0, r.free), fromLedger: true };
  const alloc = objectOr(objectOr(node.status).allocatable)[resource];
  const n = Number(alloc ?? 0);
  return { free: Number.isFinite(n) ? n : 0, fromLedger: false };
}

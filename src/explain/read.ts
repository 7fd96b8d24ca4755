/**
 * @module
 * Small readers of untyped API objects for the verdict: conditions, times, events, and how they read in evidence.
 */
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** `status.conditions` of `obj`, the well-formed ones. */
export function conditionsOf(obj: KubeObject | undefined): Condition[] {
  const list = objectOr(obj?.status).conditions;
  if (!Array.isArray(list)) return [];
  return (list as unknown[]).filter((c): c is Condition => isObject(c) && typeof c.type === "string" && typeof c.status === "string");
}

export const conditionOf = (obj: KubeObject | undefined, type: string): Condition | undefined => conditionsOf(obj).find((c) => c.type === type);

export const isTrue = (obj: KubeObject | undefined, type: string): boolean => conditionOf(obj, type)?.status === "True";

/** Seconds from `at` to `now`; undefined when `at` is not a time. */
export function secondsSince(at: unknown, now: Date): number | undefined {
  if (typeof at !== "string") return undefined;
  const t = Date.parse(at);
  return Number.isNaN(t) ? undefined : Math.max(0, Math.round((now.getTime() - t) / 1000));
}

/** `2h05m`, `4m10s`, `12s`. */
export function duration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m${String(s).padStart(2, "0")}s`;
  return `${s}s`;
}

/** How a condition reads in evidence: `QuotaReserved=False (Pending): message, for 3m10s`. */
export function conditionText(c: Condition, now: Date): string {
  const age = secondsSince(c.lastTransitionTime, now);
  return `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}${c.message ? `: ${c.message}` : ""}${age !== undefined ? `, for ${duration(age)}` : ""}`;
}

export const metaOf = (o: KubeObject | undefined): Record<string, unknown> => objectOr(o?.metadata);
export const nameOf = (o: KubeObject | undefined): string => String(metaOf(o).name ?? "");
export const labelsOf = (o: KubeObject | undefined): Record<string, string> => objectOr(metaOf(o).labels) as Record<string, string>;
export const uidOf = (o: KubeObject | undefined): string => String(metaOf(o).uid ?? "");

/** `Kind namespace/name` (or `Kind name` for a cluster-scoped object). */
export function objectRef(o: KubeObject | undefined, kind?: string): string {
  const m = metaOf(o);
  const k = kind ?? String(o?.kind ?? "");
  return `${k} ${m.namespace ? `${String(m.namespace)}/` : ""}${String(m.name ?? "")}`.trim();
}

export interface EventView {
  kind: string;
  name: string;
  uid?: string;
  type: string;
  reason: string;
  message: string;
  source: string;
  at?: string;
  count: number;
}

/** An Event as the verdict reads it (core/v1 or events.k8s.io/v1 field names). */
export function eventView(e: KubeObject): EventView {
  const io = objectOr(e.involvedObject ?? e.regarding);
  const source = objectOr(e.source).component ?? e.reportingComponent ?? e.reportingController ?? "";
  const at = e.lastTimestamp ?? e.eventTime ?? objectOr(e.series).lastObservedTime ?? e.firstTimestamp;
  return {
    kind: String(io.kind ?? ""),
    name: String(io.name ?? ""),
    ...(typeof io.uid === "string" ? { uid: io.uid } : {}),
    type: String(e.type ?? "Normal"),
    reason: String(e.reason ?? ""),
    message: String(e.message ?? e.note ?? ""),
    source: String(source),
    ...(typeof at === "string" ? { at } : {}),
    count: typeof e.count === "number" ? e.count : 1,
  };
}

/** Quantities as Kueue and Nodes write them (`8`, `"16"`, `"500m"`), as numbers; undefined when not a plain count. */
export function countOf(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v !== "string") return undefined;
  const m = /^(\d+(?:\.\d+)?)(m|k|Ki)?$/.exec(v.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  return m[2] === "m" ? n / 1000 : m[2] === "k" ? n * 1000 : m[2] === "Ki" ? n * 1024 : n;
}

/** The JSON objects of a list field (an absent or mistyped list is empty). */
export function objectsIn(v: unknown): Array<Record<string, unknown>> {
  return Array.isArray(v) ? (v as unknown[]).filter(isObject) : [];
}

/**
 * @module
 * Kubernetes Events on the job, pure: for what a reconcile pass did to it, one Event per job and reason a pass
 * (with the count and the first names), not one per object, so a pass over thousands of pods does not flood the
 * API; and the webhook's one Event, on a job whose Kueue admission it refused. Written as core/v1 Events without
 * `eventTime` (the form `kubectl describe` and every dashboard show).
 */
import type { KubeObject } from "../core/kube.js";
import { RECONCILER_EVENT_SOURCE as EVENT_SOURCE } from "../core/keys.js";
import type { JobKind } from "../policy/types.js";

export type EventReason =
  "AdoptedPod" | "AdoptedService" | "ReleasedPod" | "ReleasedService" | "SuccessfulDeletePod" | "SuccessfulDeleteService" | "DeletedAfterTTL";

export interface JobEventOutcome {
  namespace: string;
  /** `<Kind>/<name>` of the job. */
  job: string;
  jobKind: JobKind;
  jobUid: string;
  reason: EventReason;
  /** The object acted on, and why (the first `why` of a group goes into the message). */
  object: string;
  why: string;
}

const VERBS: Record<EventReason, string> = {
  AdoptedPod: "Adopted pod",
  AdoptedService: "Adopted service",
  ReleasedPod: "Released pod",
  ReleasedService: "Released service",
  SuccessfulDeletePod: "Deleted pod",
  SuccessfulDeleteService: "Deleted service",
  DeletedAfterTTL: "Deleting the job",
};

const MAX_NAMES = 10;

export function jobEvents(outcomes: readonly JobEventOutcome[], now: Date): KubeObject[] {
  const groups = new Map<string, JobEventOutcome[]>();
  for (const o of outcomes) {
    const key = `${o.namespace}\0${o.jobUid}\0${o.reason}`;
    const g = groups.get(key);
    if (g) g.push(o);
    else groups.set(key, [o]);
  }
  const at = now.toISOString().replace(/\.\d+Z$/, "Z");
  return [...groups.values()].map((g) => {
    const first = g[0]!;
    const name = first.job.slice(first.job.indexOf("/") + 1);
    // Sorted: a pass applies its plan concurrently, so the order outcomes arrive in is not the plan's.
    g.sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
    const names = g.slice(0, MAX_NAMES).map((o) => o.object);
    const more = g.length > MAX_NAMES ? ` and ${g.length - MAX_NAMES} more` : "";
    const message =
      first.reason === "DeletedAfterTTL"
        ? `${VERBS.DeletedAfterTTL}: ${first.why}`
        : `${VERBS[first.reason]}${g.length > 1 ? `s (${g.length})` : ""} ${names.join(", ")}${more}: ${first.why}`;
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${name}.`, namespace: first.namespace },
      involvedObject: {
        apiVersion: `${first.jobKind.group}/${first.jobKind.version}`,
        kind: first.jobKind.kind,
        name,
        namespace: first.namespace,
        uid: first.jobUid,
      },
      reason: first.reason,
      message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message,
      type: "Normal",
      source: { component: EVENT_SOURCE },
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
  });
}

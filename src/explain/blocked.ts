/**
 * @module
 * The resident reconciler's verdicts, as what it writes and exports (issue 49, "the same verdict where users
 * look"): per tick, from each job's verdict (./verdict.ts over ./cached.ts's evidence) and what the previous
 * ticks saw, the Events to write on jobs, the gauge of jobs per main reason and the GPU-minutes spent blocked.
 * Pure: src/run/blocked.ts runs it on a timer and does the writing.
 *
 * Events (on the job, source `quartermaster-reconciler`):
 *
 * - Warning `QuartermasterBlocked` when the main reason becomes one with a cause (every reason but `running`,
 *   `finished`, `not-found` and `pending`, which says no cause was found) and has held `settleMs`: the reason,
 *   its summary, the next step and where to read the evidence. The same reason again writes nothing (a job
 *   blocked, then pending for a moment, then blocked for the same reason is not told twice), except after
 *   `refreshMs`, so `kubectl describe` still shows it once the apiserver has dropped the last one (its
 *   `--event-ttl` is one hour).
 * - Normal `QuartermasterRunning` when a job Quartermaster said was blocked runs: the story closes where it
 *   opened. A job that runs without ever having been blocked, or finishes, gets none.
 * - At most one per job per `perJobMs` (a reason that flaps is said at that pace, the latest one winning) and
 *   `perTick` a tick (the rest on the next ticks; the writer's own bound on writes in flight holds too).
 *
 * The gauge counts the jobs of each namespace, kind and main reason that are held back: `running` and
 * `finished` are not counted, `pending` is (as its own reason). GPU-minutes: each job held back at the previous
 * tick accrues the GPUs it asks × the minutes since (at most `maxAccrualMs`), charged to the reason it had then.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { effectivePodGpus, type GpuCatalog } from "../core/gpu.js";
import { asV1PodSpec } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { objectOr } from "../core/object.js";
import type { JobKind } from "../policy/types.js";
import { RECONCILER_EVENT_SOURCE as EVENT_SOURCE } from "../core/keys.js";
import { replicaSpecs, replicasOf } from "../membership/resolve.js";
import { duration } from "./read.js";
import type { Reason, Verdict } from "./types.js";
import { isBlocked } from "./verdict.js";

export const BLOCKED_EVENT = "QuartermasterBlocked";
export const RUNNING_EVENT = "QuartermasterRunning";

export interface BlockedBounds {
  /** A reason holds this long before its Warning is written (a passing state is not worth an Event). */
  settleMs: number;
  /** At most one Event per job per this. */
  perJobMs: number;
  /** At most this many Events per tick; the others wait for the next ticks. */
  perTick: number;
  /** The same reason is written again after this (0: never). */
  refreshMs: number;
  /** The most one tick accrues GPU-minutes for (a tick after a pause or a gap in the lead charges no more). */
  maxAccrualMs: number;
}

export const DEFAULT_BOUNDS: BlockedBounds = {
  settleMs: 10_000,
  perJobMs: 60_000,
  perTick: 20,
  refreshMs: 50 * 60_000,
  maxAccrualMs: 60_000,
};

/** What the previous ticks saw of one job (by uid). */
export interface JobTrack {
  /** The main reason at the last tick, and since when (ms) it has been that. */
  reason: Reason;
  since: number;
  /** The reason of the last Event written, and when: a blocked reason, or `running` after the Normal Event. */
  announced?: Reason;
  announcedAt?: number;
}

/** One job at this tick: who it is, its verdict, and the GPUs it asks per resource. */
export interface TickJob {
  uid: string;
  namespace: string;
  name: string;
  kind: Pick<JobKind, "group" | "version" | "kind">;
  verdict: Verdict;
  gpus: ReadonlyMap<string, number>;
}

export interface EventSpec {
  type: "Warning" | "Normal";
  reason: typeof BLOCKED_EVENT | typeof RUNNING_EVENT;
  message: string;
}

/** Whether a main reason gets a Warning: held back, with a cause found. */
export const announces = (r: Reason): boolean => isBlocked(r) && r !== "pending" && r !== "not-found";

const MAX_MESSAGE = 1024;
const clip = (s: string): string => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 3)}...` : s);

/** The Event's text: the reason, its summary, the first piece of evidence, the next step, and where to read the rest. */
export function eventMessage(job: Pick<TickJob, "namespace" | "name" | "kind" | "verdict">, was?: Reason, heldMs?: number): string {
  const v = job.verdict;
  const explain = `quartermaster explain ${job.kind.kind.toLowerCase()}/${job.name} -n ${job.namespace}`;
  if (v.reason === "running") return clip(`${v.summary}${was ? `; blocked before (${was}, said ${duration(Math.round((heldMs ?? 0) / 1000))} ago)` : ""}`);
  const first = v.evidence[0];
  return clip(`${v.reason}: ${v.summary}${first ? ` (${first.object}: ${first.text})` : ""}. Next: ${v.next}. Evidence: ${explain}`);
}

/**
 * The Event for one job's verdict now, given what the previous ticks saw, and the job's track with it written
 * (`announced`) and without (`track`: the caller keeps that one when the Event is not written).
 */
export function decideEvent(
  prev: JobTrack | undefined,
  job: Pick<TickJob, "namespace" | "name" | "kind" | "verdict">,
  nowMs: number,
  bounds: BlockedBounds,
): { track: JobTrack; announce?: { event: EventSpec; track: JobTrack } } {
  const reason = job.verdict.reason;
  const since = prev && prev.reason === reason ? prev.since : nowMs;
  const track: JobTrack = {
    reason,
    since,
    ...(prev?.announced !== undefined ? { announced: prev.announced, announcedAt: prev.announcedAt! } : {}),
  };
  const event = announces(reason) ? warningDue(prev, job, since, nowMs, bounds) : runningDue(prev, job, nowMs, bounds);
  return event ? { track, announce: { event, track: { ...track, announced: reason, announcedAt: nowMs } } } : { track };
}

/** Whether the last Event is `perJobMs` old (or there was none). */
const spaced = (prev: JobTrack | undefined, nowMs: number, bounds: BlockedBounds): boolean =>
  prev?.announcedAt === undefined || nowMs - prev.announcedAt >= bounds.perJobMs;

/** The Warning of a blocked reason: not said yet (or said `refreshMs` ago), settled, and spaced from the last Event. */
function warningDue(
  prev: JobTrack | undefined,
  job: Pick<TickJob, "namespace" | "name" | "kind" | "verdict">,
  since: number,
  nowMs: number,
  bounds: BlockedBounds,
): EventSpec | undefined {
  const said = prev?.announced === job.verdict.reason && (bounds.refreshMs <= 0 || nowMs - (prev.announcedAt ?? 0) < bounds.refreshMs);
  if (said || nowMs - since < bounds.settleMs || !spaced(prev, nowMs, bounds)) return undefined;
  return { type: "Warning", reason: BLOCKED_EVENT, message: eventMessage(job) };
}

/** The Normal Event of a job running after a Warning. */
function runningDue(
  prev: JobTrack | undefined,
  job: Pick<TickJob, "namespace" | "name" | "kind" | "verdict">,
  nowMs: number,
  bounds: BlockedBounds,
): EventSpec | undefined {
  if (job.verdict.reason !== "running" || prev?.announced === undefined || !announces(prev.announced) || !spaced(prev, nowMs, bounds)) return undefined;
  return { type: "Normal", reason: RUNNING_EVENT, message: eventMessage(job, prev.announced, nowMs - (prev.announcedAt ?? nowMs)) };
}

/** The core/v1 Event of `spec` on the job (the form `kubectl describe` shows, as src/reconcile/events.ts writes). */
export function eventObject(job: Pick<TickJob, "uid" | "namespace" | "name" | "kind">, spec: EventSpec, now: Date): KubeObject {
  const at = now.toISOString().replace(/\.\d+Z$/, "Z");
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { generateName: `${job.name}.`, namespace: job.namespace },
    involvedObject: {
      apiVersion: `${job.kind.group}/${job.kind.version}`,
      kind: job.kind.kind,
      name: job.name,
      namespace: job.namespace,
      uid: job.uid,
    },
    reason: spec.reason,
    message: spec.message,
    type: spec.type,
    source: { component: EVENT_SOURCE },
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
  };
}

/** At most this many namespaces get their own label value; the rest are summed as {@link OTHER} (as the ledger's metrics). */
export const NAMESPACE_CAP = 500;
export const OTHER = "other";

export interface GaugeRow {
  namespace: string;
  kind: string;
  reason: Reason;
  jobs: number;
}

/** Jobs held back per namespace, kind and main reason; the namespaces with most such jobs named, at most `cap`. */
export function blockedGauge(jobs: ReadonlyArray<Pick<TickJob, "namespace" | "kind" | "verdict">>, cap = NAMESPACE_CAP): GaugeRow[] {
  const perNamespace = new Map<string, number>();
  for (const j of jobs) if (isBlocked(j.verdict.reason)) perNamespace.set(j.namespace, (perNamespace.get(j.namespace) ?? 0) + 1);
  const named = new Set(
    [...perNamespace]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, cap)
      .map(([ns]) => ns),
  );
  const rows = new Map<string, GaugeRow>();
  for (const j of jobs) {
    if (!isBlocked(j.verdict.reason)) continue;
    const namespace = named.has(j.namespace) ? j.namespace : OTHER;
    const key = `${namespace}\0${j.kind.kind}\0${j.verdict.reason}`;
    const row = rows.get(key);
    if (row) row.jobs++;
    else rows.set(key, { namespace, kind: j.kind.kind, reason: j.verdict.reason, jobs: 1 });
  }
  return [...rows.values()];
}

export interface GpuMinutes {
  reason: Reason;
  resource: string;
  minutes: number;
}

/**
 * GPU-minutes accrued since the last tick (at `lastMs`) by the jobs held back then: each job's GPUs × the
 * minutes elapsed (at most `maxAccrualMs`), charged to its reason at that tick. None on the first tick.
 */
export function accrueGpuMinutes(
  previous: ReadonlyMap<string, JobTrack>,
  jobs: ReadonlyArray<Pick<TickJob, "uid" | "gpus">>,
  lastMs: number | undefined,
  nowMs: number,
  maxAccrualMs: number,
): GpuMinutes[] {
  if (lastMs === undefined || !(nowMs > lastMs)) return [];
  const minutes = Math.min(nowMs - lastMs, maxAccrualMs) / 60_000;
  const out = new Map<string, GpuMinutes>();
  for (const j of jobs) {
    const was = previous.get(j.uid)?.reason;
    if (was === undefined || !isBlocked(was)) continue;
    for (const [resource, n] of j.gpus) {
      if (!(n > 0)) continue;
      const key = `${was}\0${resource}`;
      const row = out.get(key) ?? { reason: was, resource, minutes: 0 };
      row.minutes += n * minutes;
      out.set(key, row);
    }
  }
  return [...out.values()];
}

export interface TickPlan {
  /** Each job's track as it stands if none of `announce` is written. */
  tracks: Map<string, JobTrack>;
  /** The Events to write (at most `perTick`), each with the job's track once it is written. */
  announce: Array<{ job: TickJob; event: EventSpec; track: JobTrack }>;
  /** Events due but over `perTick`: on the next ticks. */
  deferred: number;
  gauge: GaugeRow[];
  gpuMinutes: GpuMinutes[];
}

/**
 * One tick: every job's Event decision under the bounds, the gauge and the GPU-minutes since `lastMs`. A job
 * gone since the last tick is forgotten (a job recreated under the same name has another uid).
 */
export interface TickInput {
  previous: ReadonlyMap<string, JobTrack>;
  jobs: readonly TickJob[];
  nowMs: number;
  /** When the last tick ran (undefined: this is the first since taking the lead). */
  lastMs: number | undefined;
  bounds?: BlockedBounds;
  namespaceCap?: number;
}

export function planTick(input: TickInput): TickPlan {
  const { previous, jobs, nowMs, lastMs, bounds = DEFAULT_BOUNDS, namespaceCap = NAMESPACE_CAP } = input;
  const tracks = new Map<string, JobTrack>();
  const announce: TickPlan["announce"] = [];
  let deferred = 0;
  for (const job of jobs) {
    const d = decideEvent(previous.get(job.uid), job, nowMs, bounds);
    tracks.set(job.uid, d.track);
    if (!d.announce) continue;
    if (announce.length < bounds.perTick) announce.push({ job, ...d.announce });
    else deferred++;
  }
  return {
    tracks,
    announce,
    deferred,
    gauge: blockedGauge(jobs, namespaceCap),
    gpuMinutes: accrueGpuMinutes(previous, jobs, lastMs, nowMs, bounds.maxAccrualMs),
  };
}

/**
 * The GPUs a job asks per resource, all its pods together: for a training kind, each replica type's count times
 * its template's GPUs; for the others (a TrainJob, whose replicas are its runtime's), or when the templates ask
 * none, what its live pods ask.
 */
export function jobGpus(job: KubeObject, jobKind: JobKind | undefined, pods: readonly KubeObject[], gpu: GpuCatalog): Map<string, number> {
  const out = new Map<string, number>();
  const add = (spec: V1PodSpec, times: number): void => {
    for (const [r, n] of effectivePodGpus(spec, gpu)) out.set(r, (out.get(r) ?? 0) + n * times);
  };
  if (jobKind && jobKind.framework !== "trainer")
    for (const [, spec] of replicaSpecs(job, jobKind)) add(asV1PodSpec(objectOr(spec.template?.spec)), replicasOf(spec));
  if (out.size === 0)
    for (const p of pods) {
      const phase = objectOr(p.status).phase;
      if (phase !== "Succeeded" && phase !== "Failed") add(asV1PodSpec(objectOr(p.spec)), 1);
    }
  return out;
}

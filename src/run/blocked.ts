/**
 * @module
 * The resident reconciler's verdicts on its jobs (issue 49, "the same verdict where users look"): every
 * `tickSeconds` while this instance holds the Lease, `explain`'s verdict (src/explain/verdict.ts) on every job it
 * caches in a namespace that opted in, from its caches alone (src/explain/cached.ts: the jobs and pods of
 * ./watch.ts's informers, a node informer of its own, and Kueue's Workloads and queues (./blocked-kueue.ts); no
 * read per job), turned by src/explain/blocked.ts into
 * Events on the jobs (through ../kube/events.ts's bounded writer), `quartermaster_jobs_blocked` and
 * `quartermaster_blocked_gpu_minutes_total`. A standby keeps its node cache warm and exports no series; the
 * instance that takes the Lease starts from nothing (its first Events may repeat the last holder's).
 */
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { asKubeObject } from "../core/boundary.js";
import { errorMessage } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import { objectOr } from "../core/object.js";
import { DEFAULT_BOUNDS, eventObject, jobGpus, planTick, type BlockedBounds, type JobTrack, type TickJob, type TickPlan } from "../explain/blocked.js";
import { cachedEvidence, nodeEntriesFromCaches } from "../explain/cached.js";
import { knownKinds, type KnownKind } from "../explain/kinds.js";
import type { ExplainSettings } from "../explain/types.js";
import { explainJob } from "../explain/verdict.js";
import { verdictMemo } from "../explain/pods.js";
import type { JobKind, Policy } from "../policy/types.js";
import type { BlockedMetrics } from "../reconcile/metrics.js";
import { managedElsewhere } from "../reconcile/plan.js";
import type { kubeClient } from "../kube/client.js";
import { backgroundEventWriter } from "../kube/events.js";
import { trimmedInformer, type ListPage, type TrimmedInformer } from "../kube/informer.js";
import { isJobStub } from "../kube/projection.js";
import { JUDGED_WITHOUT, startKueueCaches, type KueueCaches } from "./blocked-kueue.js";
import { restartOnError } from "./informer-restart.js";
import { FOLLOW_UP_REASONS, FollowUps, type FollowUp } from "./blocked-follow-up.js";

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** Seconds between verdicts by default. */
export const BLOCKED_TICK_SECONDS = 10;
/** Seconds a pending state lasts before the verdict counts it (a reservation with no pods, a job with no status). */
const GRACE_SECONDS = 120;

export interface BlockedSettings {
  tickSeconds?: number;
  bounds?: Partial<BlockedBounds>;
}

export interface BlockedOptions extends BlockedSettings {
  k8s: ClientModule;
  kc: KubeConfig;
  /** A page of a plain LIST of `path` (../kube/cluster.ts plainListPage), where the kubeconfig allows; else client-node's. */
  plainPage?: (path: string) => (cont: string | undefined) => Promise<ListPage>;
  log: Logger;
  policy: Policy;
  now: () => Date;
  leading: () => boolean;
  /** ./watch.ts's job informers, one per `policy.jobKinds` entry, in its order. */
  jobs: ReadonlyArray<{ list(): readonly KubernetesObject[] }>;
  pods: { list(): readonly KubeObject[]; byController(uid: string): KubeObject[] };
  inScope: (namespace: string) => boolean;
  /** Creates an Event (../kube/cluster.ts createEvent). */
  post: (namespace: string, event: KubeObject) => Promise<unknown>;
  /** A GET through the plain client (../kube/rest.ts): what the caches lack, read for the jobs that need it (./blocked-follow-up.ts); none without. */
  get?: (path: string) => Promise<unknown>;
  metrics?: BlockedMetrics;
}

export interface BlockedTracker {
  /** One verdict round now, as the timer runs it (its Events are sent in the background); none while one runs. */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Node as the verdict reads it: name, labels, taints and cordon, allocatable, the Ready condition. Kept whole
 * in labels: a pod's nodeSelector may name any of them.
 */
export function verdictNode(o: object): KubeObject {
  const n = o as { metadata?: Record<string, unknown>; spec?: Record<string, unknown>; status?: Record<string, unknown> };
  const conditions = Array.isArray(n.status?.conditions) ? (n.status.conditions as Array<Record<string, unknown>>) : [];
  const ready = conditions.find((c) => c?.type === "Ready");
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: n.metadata?.name, uid: n.metadata?.uid, ...(n.metadata?.labels ? { labels: n.metadata.labels } : {}) },
    spec: {
      ...(Array.isArray(n.spec?.taints) && n.spec.taints.length > 0 ? { taints: n.spec.taints } : {}),
      ...(n.spec?.unschedulable === true ? { unschedulable: true } : {}),
    },
    status: {
      allocatable: objectOr(n.status?.allocatable),
      ...(ready ? { conditions: [{ type: "Ready", status: ready.status, ...(ready.reason ? { reason: ready.reason } : {}) }] } : {}),
    },
  };
}

/** The nodes as the verdicts read them, restarted after an error (every 30 s while the watch is refused, said once). */
function nodeCache(opts: BlockedOptions, stopped: () => boolean): TrimmedInformer<KubeObject> {
  const nodes = trimmedInformer<KubeObject>(opts.k8s, opts.kc, {
    path: "/api/v1/nodes",
    page: opts.plainPage
      ? opts.plainPage("/api/v1/nodes")
      : async (cont) => opts.kc.makeApiClient(opts.k8s.CoreV1Api).listNode({ limit: 500, _continue: cont }),
    trim: verdictNode,
  });
  restartOnError(nodes, { log: opts.log, prefix: "blocked", stopped, meanwhile: JUDGED_WITHOUT }).start();
  return nodes;
}

/** A job of this tick: its verdict from the caches, and the verdict again with what was read for it besides. */
export interface TickEntry {
  job: TickJob;
  known: KnownKind;
  /** The verdict from the caches alone: whether the job wants a follow-up read is decided from it, not from a read's. */
  cached: TickJob["verdict"];
  judge(read?: FollowUp): TickJob["verdict"];
}

/** Every cached job of an opted-in namespace, with its verdict now (with what was read for it) and the GPUs it asks for. */
function tickJobs(
  opts: BlockedOptions,
  kinds: ReadonlyArray<{ jobKind: JobKind; known: KnownKind }>,
  settings: ExplainSettings,
  at: { nowDate: Date; nodeList: KubeObject[]; ledger: ReturnType<typeof nodeEntriesFromCaches>; kueue: KueueCaches; follow?: FollowUps },
): TickEntry[] {
  const out: TickEntry[] = [];
  const ledgerAt = { generatedAt: at.nowDate.toISOString(), nodes: at.ledger };
  // One memo a tick: the nodes filtered once per placement and counted once, for every job.
  const memo = verdictMemo();
  opts.jobs.forEach((inf, i) => {
    const kind = kinds[i];
    if (!kind) return;
    for (const raw of inf.list()) {
      const ns = raw.metadata?.namespace ?? "";
      if (isJobStub(raw) || !opts.inScope(ns)) continue;
      const job = asKubeObject(raw);
      if (managedElsewhere(job, kind.jobKind)) continue;
      const uid = String(raw.metadata?.uid ?? "");
      const pods = opts.pods.byController(uid);
      const queued = at.kueue.view(job);
      const judge = (read?: FollowUp): TickJob["verdict"] =>
        explainJob(
          cachedEvidence({ kind: kind.known, job, pods, ...(queued ? { kueue: queued } : {}), ...(read ? { read } : {}) }, at.nodeList, ledgerAt, settings),
          at.nowDate,
          memo,
        );
      const cached = judge();
      const read = at.follow?.get(uid);
      const tickJob: TickJob = {
        uid,
        namespace: ns,
        name: raw.metadata?.name ?? "",
        kind: kind.jobKind,
        verdict: read ? judge(read) : cached,
        gpus: jobGpus(job, kind.jobKind, pods, opts.policy.gpu),
      };
      out.push({ job: tickJob, known: kind.known, cached, judge });
    }
  });
  return out;
}

/**
 * The jobs whose verdict the caches cannot settle, read (./blocked-follow-up.ts, bounded) and judged again with
 * what was read. Which jobs those are is decided from the caches' verdict: a read that turned a job's verdict
 * into one that wants no read (an Event saying Kueue's admission was refused) keeps it, instead of the job
 * flapping between the read's verdict and the caches' every other tick. A job the caches settle is judged
 * by them alone (its earlier read is dropped).
 */
export async function followUp(entries: readonly TickEntry[], follow: FollowUps): Promise<void> {
  const wanting = entries.filter((e) => FOLLOW_UP_REASONS.has(e.cached.reason));
  const read = new Set(await follow.refresh(wanting.map((e) => ({ uid: e.job.uid, namespace: e.job.namespace, kind: e.known }))));
  for (const e of entries) {
    if (!FOLLOW_UP_REASONS.has(e.cached.reason)) e.job.verdict = e.cached;
    else if (read.has(e.job.uid)) {
      const got = follow.get(e.job.uid);
      if (got) e.job.verdict = e.judge(got);
    }
  }
}

/** Each job whose verdict changed since the last tick, at debug (what an Event's absence is explained by). */
function logChanges(log: Logger, tracks: ReadonlyMap<string, JobTrack>, jobs: readonly TickJob[]): void {
  if (!log.isLevelEnabled("debug")) return;
  for (const j of jobs) {
    const was = tracks.get(j.uid)?.reason;
    if (was !== j.verdict.reason)
      log.debug({ job: `${j.kind.kind} ${j.namespace}/${j.name}`, reason: j.verdict.reason, was, summary: j.verdict.summary }, "blocked: verdict changed");
  }
}

/**
 * The Events handed to the writer, so that one whose POST fails is said again: the writer takes an Event at once
 * and posts it in the background, and the plan counts it said; a failed POST (a busy apiserver's timeout) puts the
 * job's track back to what it was before that Event, so the next tick decides again, instead of the job staying
 * silent until the 50-minute refresh.
 */
export class Announcements {
  /** By job uid: the announcement its track held before the Event in flight. */
  private readonly before = new Map<string, Pick<JobTrack, "announced" | "announcedAt">>();
  private readonly failed = new Set<string>();

  /** `post`, noting a failure by the job's uid, and forgetting the track kept for a success. */
  posting(post: (namespace: string, event: KubeObject) => Promise<unknown>): (namespace: string, event: KubeObject) => Promise<unknown> {
    return async (namespace, event) => {
      const uid = String(objectOr(event.involvedObject).uid ?? "");
      try {
        const r = await post(namespace, event);
        this.before.delete(uid);
        return r;
      } catch (err) {
        this.failed.add(uid);
        throw err;
      }
    };
  }

  /** The plan's Events to the writer, each job's track before it kept; how many the writer took. */
  announce(plan: TickPlan, to: { write: (e: KubeObject) => boolean; log: Logger; metrics?: BlockedMetrics }, nowDate: Date): number {
    let sent = 0;
    for (const a of plan.announce) {
      const ok = to.write(eventObject(a.job, a.event, nowDate));
      to.metrics?.event(a.event.type, ok ? "sent" : "dropped");
      if (!ok) continue;
      const was = plan.tracks.get(a.job.uid);
      this.before.set(a.job.uid, was?.announced !== undefined ? { announced: was.announced, announcedAt: was.announcedAt! } : {});
      plan.tracks.set(a.job.uid, a.track);
      sent++;
      to.log.info({ job: `${a.job.kind.kind} ${a.job.namespace}/${a.job.name}`, event: a.event.reason, reason: a.job.verdict.reason }, "blocked: event");
    }
    if (plan.deferred > 0) to.metrics?.event("Warning", "deferred", plan.deferred);
    return sent;
  }

  /** `tracks` with the announcement of each job whose Event failed undone (its reason and since kept); how many. */
  undoFailed(tracks: Map<string, JobTrack>): number {
    let undone = 0;
    for (const uid of this.failed) {
      const t = tracks.get(uid);
      const b = this.before.get(uid);
      if (t && b) {
        tracks.set(uid, { reason: t.reason, since: t.since, ...b });
        undone++;
      }
      this.before.delete(uid);
    }
    this.failed.clear();
    // Events the writer took without posting (the same one within its dedupe window) leave theirs: bounded by the jobs.
    if (this.before.size > 2 * tracks.size + 64) for (const uid of this.before.keys()) if (!tracks.has(uid)) this.before.delete(uid);
    return undone;
  }
}

export function startBlocked(opts: BlockedOptions): BlockedTracker {
  const { policy, log, metrics } = opts;
  const bounds: BlockedBounds = { ...DEFAULT_BOUNDS, ...opts.bounds };
  const known: KnownKind[] = knownKinds(policy);
  const kinds = policy.jobKinds.map((k) => ({ jobKind: k, known: known.find((x) => x.jobKind === k)! }));
  const settings = { gpu: policy.gpu, acceleratorLabel: policy.accelerator.nodeLabel, graceSeconds: GRACE_SECONDS };
  let stopped = false;
  const nodes = nodeCache(opts, () => stopped);
  const kueue = startKueueCaches({ ...opts, gpu: policy.gpu });
  const follow = opts.get ? new FollowUps({ get: opts.get, now: () => opts.now().getTime() }) : undefined;

  const said = new Announcements();
  const writer = backgroundEventWriter(() => Promise.resolve(said.posting(opts.post)), {
    log,
    maxInFlight: bounds.perTick,
    now: () => opts.now().getTime(),
  });
  let tracks = new Map<string, JobTrack>();
  let lastMs: number | undefined;
  let cleared = true;

  let ticking = false;
  const tick = async (): Promise<void> => {
    if (stopped || ticking) return;
    if (!opts.leading()) {
      // A standby says nothing: its series would be the old holder's, and the new one starts over.
      if (!cleared) [tracks, lastMs, cleared] = [new Map<string, JobTrack>(), undefined, true];
      metrics?.jobs([]);
      return;
    }
    if (!nodes.synced()) return;
    ticking = true;
    try {
      await judgeAndAnnounce();
    } finally {
      ticking = false;
    }
  };
  const judgeAndAnnounce = async (): Promise<void> => {
    const started = performance.now();
    const nowDate = opts.now();
    const nowMs = nowDate.getTime();
    const nodeList = [...nodes.list()];
    const ledger = nodeEntriesFromCaches(nodeList, opts.pods.list(), policy.gpu);
    const entries = tickJobs(opts, kinds, settings, { nowDate, nodeList, ledger, kueue, ...(follow ? { follow } : {}) });
    if (follow) await followUp(entries, follow);
    if (stopped || !opts.leading()) return;
    const jobs = entries.map((e) => e.job);
    said.undoFailed(tracks);
    const plan = planTick({ previous: tracks, jobs, nowMs, lastMs, bounds });
    logChanges(log, tracks, jobs);
    const sent = said.announce(plan, { write: (e) => writer.write(e), log, ...(metrics ? { metrics } : {}) }, nowDate);
    [tracks, lastMs, cleared] = [plan.tracks, nowMs, false];
    metrics?.jobs(plan.gauge);
    metrics?.gpuMinutes(plan.gpuMinutes);
    log.debug(
      {
        jobs: jobs.length,
        blocked: plan.gauge.reduce((n, r) => n + r.jobs, 0),
        events: sent,
        deferred: plan.deferred,
        ms: Math.round(performance.now() - started),
      },
      "blocked: verdicts",
    );
  };
  const timer = setInterval(
    () => void tick().catch((err: unknown) => log.error({ err: errorMessage(err) }, "blocked: verdicts failed")),
    (opts.tickSeconds ?? BLOCKED_TICK_SECONDS) * 1000,
  );
  timer.unref();

  return {
    tick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      metrics?.jobs([]);
      await Promise.all([nodes.stop().catch(() => undefined), kueue.stop()]);
    },
  };
}

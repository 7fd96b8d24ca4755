/**
 * @module
 * What the resident reconciler's caches lack, read for the few jobs that need it (issue 49, "the same verdict
 * where users look"). A job the cached verdict calls `pending` (no cause found), `no-controller` or
 * `controller-error` may be held by what only the API holds: the Events its controller writes on it (the training
 * operator's FailedCreate when a ResourceQuota refuses its pods: `controller-error`) and the controller's
 * Deployment (0 ready: `no-controller`, at once rather than after the grace period a job with no status waits).
 *
 * Bounded: each tick reads for at most `perTick` such jobs, those read longest ago first (so every one gets its
 * turn), each job at most every `everyMs`, the kind's Deployment at most every `controllerMs` (one read shared by
 * its jobs), and a tick waits at most `deadlineMs` for them (what comes later serves the next tick). A read that
 * fails or does not answer in time leaves that part unread: the verdict draws nothing from it, never "no Events"
 * or "no controller" (unknown is not zero).
 */
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import type { KnownKind } from "../explain/kinds.js";
import type { ControllerState, Reason } from "../explain/types.js";
import { readControllerState } from "./explain-read.js";

/** The cached verdicts that a job's Events or its controller's Deployment may change. */
export const FOLLOW_UP_REASONS: ReadonlySet<Reason> = new Set<Reason>(["pending", "no-controller", "controller-error"]);

/**
 * The Events on a job read: its Warnings only (all the verdict reads: a controller's error, Kueue's refusal),
 * selected by the apiserver, so that the Normal ones of a big job (a SuccessfulCreate per pod) never crowd them
 * out; 100 a page, at most 4 pages (a LIST gives them in name order, `<job>.<hex time>`: oldest first). A job with
 * more Warnings than that keeps the 400 read, each a real one, and its error is named by them.
 */
const EVENTS_PAGE = 100;
const EVENTS_PAGES = 4;

/** What was read for one job: each part present only when its read succeeded. */
export interface FollowUp {
  events?: KubeObject[];
  controller?: { name: string; state: ControllerState; detail?: string };
}

export interface FollowUpJob {
  uid: string;
  namespace: string;
  kind: KnownKind;
}

export interface FollowUpOptions {
  /** A GET through the API client: the object, undefined on 404; throws when the read fails. */
  get: (path: string) => Promise<unknown>;
  now: () => number;
  perTick?: number;
  everyMs?: number;
  controllerMs?: number;
  deadlineMs?: number;
}

export const FOLLOW_UP_DEFAULTS = { perTick: 8, everyMs: 9000, controllerMs: 5000, deadlineMs: 5000 };

type Controller = NonNullable<FollowUp["controller"]>;

export class FollowUps {
  private readonly o: Required<FollowUpOptions>;
  /** By job uid: what was read last, and when the last read began. */
  private readonly jobs = new Map<string, { at: number; value: FollowUp }>();
  /** By Deployment name: the last read of it (in flight or done), and when it began. */
  private readonly controllers = new Map<string, { at: number; value: Promise<Controller | undefined> }>();
  private readonly inFlight = new Set<string>();

  constructor(o: FollowUpOptions) {
    this.o = { ...FOLLOW_UP_DEFAULTS, ...o };
  }

  /** What was read of the job, if anything. */
  get(uid: string): FollowUp | undefined {
    return this.jobs.get(uid)?.value;
  }

  /**
   * Reads for up to `perTick` of `wanting` whose last read is `everyMs` old (longest ago first), waiting at most
   * `deadlineMs`; forgets the jobs no longer wanting. The uids read.
   */
  async refresh(wanting: readonly FollowUpJob[]): Promise<string[]> {
    const keep = new Set(wanting.map((j) => j.uid));
    for (const uid of this.jobs.keys()) if (!keep.has(uid)) this.jobs.delete(uid);
    const now = this.o.now();
    const due = wanting
      .filter((j) => !this.inFlight.has(j.uid) && now - (this.jobs.get(j.uid)?.at ?? -Infinity) >= this.o.everyMs)
      .sort((a, b) => (this.jobs.get(a.uid)?.at ?? -Infinity) - (this.jobs.get(b.uid)?.at ?? -Infinity))
      .slice(0, this.o.perTick);
    const reads = due.map((j) => this.readJob(j, now));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.o.deadlineMs)));
    await Promise.race([Promise.all(reads), deadline]);
    clearTimeout(timer);
    return due.map((j) => j.uid);
  }

  private async readJob(j: FollowUpJob, now: number): Promise<void> {
    this.inFlight.add(j.uid);
    // The last read stays until this one answers: a slow read does not turn known Events into unread ones.
    const last = this.jobs.get(j.uid)?.value ?? {};
    this.jobs.set(j.uid, { at: now, value: last });
    try {
      const [events, controller] = await Promise.all([this.readEvents(j), this.readController(j.kind, now)]);
      if (!this.jobs.has(j.uid)) return; // no longer wanted meanwhile
      this.jobs.set(j.uid, { at: now, value: { ...(events ? { events } : {}), ...(controller ? { controller } : {}) } });
    } finally {
      this.inFlight.delete(j.uid);
    }
  }

  private async readEvents(j: FollowUpJob): Promise<KubeObject[] | undefined> {
    const selector = encodeURIComponent(`involvedObject.uid=${j.uid},type=Warning`);
    const base = `/api/v1/namespaces/${encodeURIComponent(j.namespace)}/events?fieldSelector=${selector}&limit=${EVENTS_PAGE}`;
    const events: KubeObject[] = [];
    try {
      let next: string | undefined;
      for (let page = 0; page < EVENTS_PAGES; page++) {
        const list = objectOr(await this.o.get(next ? `${base}&continue=${encodeURIComponent(next)}` : base));
        if (Array.isArray(list.items)) events.push(...(list.items as unknown[]).filter(isObject));
        const cont = objectOr(list.metadata).continue;
        if (typeof cont !== "string" || cont === "") break;
        next = cont;
      }
      return events;
    } catch {
      return undefined;
    }
  }

  /** The kind's controller: this process for the kinds it runs; else its Deployment, read at most every `controllerMs`. */
  private readController(kind: KnownKind, now: number): Promise<Controller | undefined> {
    if (!kind.deployment) return Promise.resolve(undefined);
    if (kind.deployment === OWN_DEPLOYMENT) return Promise.resolve({ name: kind.deployment, state: "running", detail: "this reconciler runs it" });
    const cached = this.controllers.get(kind.deployment);
    if (cached && now - cached.at < this.o.controllerMs) return cached.value;
    let failed = false;
    const get = async (path: string): Promise<unknown> => {
      try {
        return await this.o.get(path);
      } catch {
        failed = true;
        return undefined;
      }
    };
    const value = readControllerState(kind, get).then((c) => (failed ? undefined : c));
    this.controllers.set(kind.deployment, { at: now, value });
    return value;
  }
}

/** The Deployment src/explain/kinds.ts names for the kinds Quartermaster's own job controller runs: this process. */
const OWN_DEPLOYMENT = "quartermaster-reconciler";

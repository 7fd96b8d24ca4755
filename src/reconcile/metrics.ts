/**
 * @module
 * Prometheus metrics of the reconciler's side, each on a registry the caller owns: the device ledger as the
 * webhook reads it (exported by the webhook's /metrics), the resident reconciler's passes, and the job
 * controller's syncs (`reconcile --watch`). The admission server's own metrics are in src/server/metrics.ts.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { LedgerIndex } from "../ledger/shards.js";

/** The device ledger's index as the webhook last read it, and when (Unix ms). */
export interface LedgerReading {
  index: LedgerIndex;
  readAt: number;
}

/**
 * At most this many namespaces get their own `namespace` label value on the ledger's per-namespace
 * series; the rest are summed into `namespace="other"`. Every namespace × resource pair is a series
 * each replica exports on every scrape, and a cluster with thousands of short-lived namespaces (one per
 * user or CI run) would otherwise grow Prometheus's head block without bound. The namespaces kept are
 * those with the most GPUs allocated, then the most GPU-seconds (ties by name), so the ones a dashboard
 * looks at stay visible; with two GPU resources 500 namespaces are 2,000 series, ~200 KB of a scrape
 * (bench/metrics.ts: uncapped, 20,000 namespaces would be 8 MB and 0.6 s per scrape).
 */
export const NAMESPACE_LABEL_CAP = 500;
export const OTHER_NAMESPACES = "other";

/** Per-namespace usage with at most `cap` namespaces named, the rest summed under {@link OTHER_NAMESPACES}. */
export function capNamespaces(
  namespaces: LedgerIndex["namespaces"],
  cap: number,
): Array<{ namespace: string; resource: string; allocated: number; gpuSeconds: number }> {
  const weight = (per: Record<string, { allocated: number; gpuSeconds: number }>) =>
    Object.values(per).reduce((w, u) => ({ allocated: w.allocated + u.allocated, gpuSeconds: w.gpuSeconds + u.gpuSeconds }), { allocated: 0, gpuSeconds: 0 });
  const ranked = Object.entries(namespaces)
    .map(([namespace, per]) => ({ namespace, per, w: weight(per) }))
    .sort((a, b) => b.w.allocated - a.w.allocated || b.w.gpuSeconds - a.w.gpuSeconds || (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
  const out = new Map<string, { namespace: string; resource: string; allocated: number; gpuSeconds: number }>();
  ranked.forEach(({ namespace, per }, i) => {
    const ns = i < cap ? namespace : OTHER_NAMESPACES;
    for (const [resource, u] of Object.entries(per)) {
      const key = `${ns}\u0000${resource}`;
      const row = out.get(key) ?? { namespace: ns, resource, allocated: 0, gpuSeconds: 0 };
      row.allocated += u.allocated;
      row.gpuSeconds += u.gpuSeconds;
      out.set(key, row);
    }
  });
  return [...out.values()];
}

/** GPU states exported per resource, as the ledger's totals name them. */
const GPU_STATES = ["capacity", "allocatable", "allocated", "free", "unavailable"] as const;

type LedgerRead = () => LedgerReading | undefined;

/** `quartermaster_ledger_present` and the GPUs over all nodes by state (`quartermaster_ledger_gpus`). */
function registerLedgerTotals(registers: Registry[], read: LedgerRead): void {
  new Gauge({
    name: "quartermaster_ledger_present",
    help: "1 while this replica holds a good device ledger index (read, checksum verified), else 0.",
    registers,
    collect() {
      this.set(read() ? 1 : 0);
    },
  });
  new Gauge({
    name: "quartermaster_ledger_gpus",
    help: "GPUs (devices of each policy GPU resource) over all nodes by state: capacity, allocatable, allocated, free, and unavailable (allocatable on stale nodes), from the device ledger's index.",
    labelNames: ["resource", "state"] as const,
    registers,
    collect() {
      this.reset();
      const r = read();
      if (!r) return;
      for (const [resource, t] of Object.entries(r.index.totals)) for (const state of GPU_STATES) this.set({ resource, state }, t[state]);
    },
  });
  new Gauge({
    name: "quartermaster_ledger_gpus_by_source",
    help:
      "GPUs over all nodes by how they are asked for, next to quartermaster_ledger_gpus: source dra, devices of ResourceSlices (state capacity) and those ResourceClaims allocated (allocated); " +
      "source extended-resource, GPUs pods' container requests hold (allocated). Resources without DRA devices have only the extended-resource series.",
    labelNames: ["resource", "source", "state"] as const,
    registers,
    collect() {
      this.reset();
      const r = read();
      if (!r) return;
      for (const [resource, t] of Object.entries(r.index.totals)) {
        const dra = t.dra ?? { allocated: 0, capacity: 0 };
        if (t.dra) {
          this.set({ resource, source: "dra", state: "capacity" }, dra.capacity);
          this.set({ resource, source: "dra", state: "allocated" }, dra.allocated);
        }
        this.set({ resource, source: "extended-resource", state: "allocated" }, t.allocated - dra.allocated);
      }
    },
  });
}

/** The ledger's counts (nodes, stale and inactive nodes, pending GPU pods, pods holding devices, jobs), one gauge each. */
function registerLedgerCounts(registers: Registry[], read: LedgerRead): void {
  const count = (name: string, help: string, key: keyof LedgerIndex["counts"]): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.reset();
        const r = read();
        if (r) this.set(r.index.counts[key] ?? 0);
      },
    });
  };
  count("quartermaster_ledger_nodes", "Nodes in the device ledger (nodes offering a GPU resource or holding GPU pods).", "nodes");
  count(
    "quartermaster_ledger_stale_nodes",
    "Nodes whose Lease (or Ready heartbeat) is older than the grace period: their GPUs count as unavailable.",
    "staleNodes",
  );
  count(
    "quartermaster_ledger_inactive_nodes",
    "Nodes listing a GPU resource with zero allocatable (device plugin down, GPUs unhealthy): `quartermaster ledger` names them.",
    "inactiveNodes",
  );
  count("quartermaster_ledger_pending_gpu_pods", "GPU pods unscheduled for longer than the reconciler's threshold.", "pendingGpuPods");
  count("quartermaster_ledger_pods_holding_devices", "Pods holding GPUs (bound, neither Succeeded nor Failed).", "podsHoldingDevices");
  count("quartermaster_ledger_jobs", "Training jobs in the device ledger.", "jobs");
}

/**
 * GPUs allocated and GPU-seconds by namespace and resource, at most `cap` namespaces by name (the rest summed
 * as {@link OTHER_NAMESPACES}).
 */
function registerNamespaceUsage(registers: Registry[], read: LedgerRead, cap: number): void {
  // The capped rows of the index last read: computed once per index (a refresh replaces the object), not
  // once per scrape and series.
  let capped: { index: LedgerIndex; rows: ReturnType<typeof capNamespaces> } | undefined;
  const namespaceRows = (index: LedgerIndex): ReturnType<typeof capNamespaces> => {
    if (capped?.index !== index) capped = { index, rows: capNamespaces(index.namespaces, cap) };
    return capped.rows;
  };
  const capNote = `at most ${cap} namespaces by name, the rest summed as namespace="${OTHER_NAMESPACES}"`;
  type Row = ReturnType<typeof capNamespaces>[number];
  /** One series per capped namespace and resource, from the index last read (none without one). */
  const fillPerNamespace = (
    reset: () => void,
    put: (labels: { namespace: string; resource: string }, v: number) => void,
    value: (row: Row) => number,
  ): void => {
    reset();
    const r = read();
    if (!r) return;
    for (const row of namespaceRows(r.index)) put({ namespace: row.namespace, resource: row.resource }, value(row));
  };
  new Gauge({
    name: "quartermaster_ledger_namespace_gpus_allocated",
    help: `GPUs allocated by namespace and resource; ${capNote}.`,
    labelNames: ["namespace", "resource"] as const,
    registers,
    collect() {
      fillPerNamespace(
        () => this.reset(),
        (l, v) => this.set(l, v),
        (row) => row.allocated,
      );
    },
  });
  // A counter: the ledger's GPU-seconds are cumulative (carried from pass to pass), so rate() gives GPUs in use
  // over time; a namespace moving into or out of "other" looks like a reset, which rate() handles.
  new Counter({
    name: "quartermaster_ledger_namespace_gpu_seconds_total",
    help: `GPU-seconds accrued by namespace and resource since the ledger began; ${capNote}.`,
    labelNames: ["namespace", "resource"] as const,
    registers,
    collect() {
      fillPerNamespace(
        () => this.reset(),
        (l, v) => this.inc(l, v),
        (row) => row.gpuSeconds,
      );
    },
  });
}

/** When the ledger this replica last read was written (its generatedAt), and when it was read. */
function registerLedgerTimestamps(registers: Registry[], read: LedgerRead): void {
  new Gauge({
    name: "quartermaster_ledger_generated_timestamp_seconds",
    help: "When the reconciler wrote the device ledger this replica last read (its generatedAt), as a Unix timestamp.",
    registers,
    collect() {
      this.reset();
      const r = read();
      const t = r ? Date.parse(r.index.generatedAt) : NaN;
      if (Number.isFinite(t)) this.set(t / 1000);
    },
  });
  new Gauge({
    name: "quartermaster_ledger_read_timestamp_seconds",
    help: "When this replica last read a good device ledger index, as a Unix timestamp.",
    registers,
    collect() {
      this.reset();
      const r = read();
      if (r) this.set(r.readAt / 1000);
    },
  });
}

/** The figures of a Kueue flavor's resource exported as `kind` (src/ledger/kueue-quota.ts). */
const KUEUE_KINDS = { quota: "quota", physical: "physical", in_use: "inUse", kueue_usage: "kueueUsage", kueue_reserved: "kueueReserved" } as const;

/** Per Kueue ResourceFlavor and GPU resource: quota, physical GPUs of its nodes, in use there, Kueue's usage and reservation. */
function registerKueueFlavors(registers: Registry[], read: LedgerRead): void {
  new Gauge({
    name: "quartermaster_kueue_flavor_gpus",
    help:
      "Per Kueue ResourceFlavor and GPU resource, from the device ledger's index: kind quota (nominal quota summed over the ClusterQueues listing the flavor), " +
      "physical (allocatable on the nodes its nodeLabels select), in_use (allocated on those nodes), kueue_usage and kueue_reserved (ClusterQueue status flavorsUsage and flavorsReservation). " +
      "No series where Kueue is not installed.",
    labelNames: ["flavor", "resource", "kind"] as const,
    registers,
    collect() {
      this.reset();
      const flavors = read()?.index.kueue?.flavors ?? [];
      for (const f of flavors)
        for (const [resource, r] of Object.entries(f.resources))
          for (const [kind, field] of Object.entries(KUEUE_KINDS)) this.set({ flavor: f.name, resource, kind }, r[field]);
    },
  });
}

/**
 * Gauges of the device ledger, computed at scrape time from the index `read()` returns. While there is none
 * (not read yet, missing, or failing its checksum) `quartermaster_ledger_present` is 0, the labelled series
 * are absent and the unlabelled ones 0 (prom-client always writes an unlabelled series), so a dashboard or
 * alert guards with `quartermaster_ledger_present == 1`.
 */
export function registerLedgerMetrics(registry: Registry, read: LedgerRead, opts: { namespaceCap?: number } = {}): void {
  const registers = [registry];
  registerLedgerTotals(registers, read);
  registerLedgerCounts(registers, read);
  registerNamespaceUsage(registers, read, opts.namespaceCap ?? NAMESPACE_LABEL_CAP);
  registerLedgerTimestamps(registers, read);
  registerKueueFlavors(registers, read);
}

/** What one reconcile pass did, as the loop reports it to {@link ReconcilerMetrics}. */
export interface PassActions {
  applied: readonly string[];
  skipped: ReadonlyArray<{ action: string }>;
  failed: ReadonlyArray<{ action: string }>;
}

/** How a pass ended: ok, with failed actions, thrown, or skipped because another instance held the Lease. */
export type PassResult = "ok" | "failed" | "error" | "lease_busy";

export interface ReconcilerMetrics {
  readonly registry: Registry;
  pass(result: PassResult, seconds: number, actions?: PassActions): void;
  /** A tick that found the previous pass still running. */
  tickSkipped(): void;
}

/**
 * The action type of a pass report's `verb Kind namespace/name`: its first two words (`delete Pod`), so the
 * label's values are bounded by the reconciler's verbs and kinds, not by object names.
 */
export function actionType(action: string): string {
  return action.split(" ", 2).join(" ");
}

/** Buckets for pass durations: a small cluster's pass is under a second, a large one's minutes. */
export const PASS_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Metrics of the resident reconciler's passes, on a registry of their own. */
export function createReconcilerMetrics(opts: { processMetrics?: boolean; now?: () => number } = {}): ReconcilerMetrics {
  const now = opts.now ?? Date.now;
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const duration = new Histogram({
    name: "quartermaster_reconcile_pass_duration_seconds",
    help: "Duration of reconcile passes, by result: ok, failed (some action failed), error (the pass threw), lease_busy (another instance holds the Lease).",
    labelNames: ["result"] as const,
    buckets: PASS_BUCKETS,
    registers,
  });
  const actions = new Counter({
    name: "quartermaster_reconcile_actions_total",
    help: "Reconciler actions by type (verb and kind, e.g. 'delete Pod') and result: applied, skipped (a precondition no longer held), failed.",
    labelNames: ["type", "result"] as const,
    registers,
  });
  const lastSuccess = new Gauge({
    name: "quartermaster_reconcile_last_success_timestamp_seconds",
    help: "When the last pass that ran and had no failed action ended, as a Unix timestamp.",
    registers,
  });
  const skippedTicks = new Counter({
    name: "quartermaster_reconcile_ticks_skipped_total",
    help: "Schedule ticks skipped because the previous pass was still running.",
    registers,
  });
  return {
    registry,
    pass(result, seconds, done) {
      duration.observe({ result }, seconds);
      if (done) {
        for (const a of done.applied) actions.inc({ type: actionType(a), result: "applied" });
        for (const a of done.skipped) actions.inc({ type: actionType(a.action), result: "skipped" });
        for (const a of done.failed) actions.inc({ type: actionType(a.action), result: "failed" });
      }
      if (result === "ok") lastSuccess.set(now() / 1000);
    },
    tickSkipped() {
      skippedTicks.inc();
    },
  };
}

/** How one `reconcile --watch` sync ended: done, queued again (a failed or conflicting write), or thrown. */
export type SyncResult = "ok" | "requeued" | "error";

/** What the resident job controller's metrics read at scrape time. */
export interface WatchSource {
  queueDepth(): number;
  leading(): boolean;
}

/**
 * Why jobs are not running, as the resident reconciler's verdicts say (src/explain/blocked.ts, src/run/blocked.ts):
 * the jobs held back per namespace, kind and main reason, GPU-minutes spent blocked, and the Events written.
 */
export interface BlockedMetrics {
  /** Replaces every series of `quartermaster_jobs_blocked` with these. */
  jobs(rows: ReadonlyArray<{ namespace: string; kind: string; reason: string; jobs: number }>): void;
  gpuMinutes(rows: ReadonlyArray<{ reason: string; resource: string; minutes: number }>): void;
  event(type: "Warning" | "Normal", result: BlockedEventResult, n?: number): void;
}

/** An Event of the verdicts: sent, dropped by the writer's bound on writes in flight, or left for a later tick. */
export type BlockedEventResult = "sent" | "dropped" | "deferred";

function blockedMetrics(registers: Registry[]): BlockedMetrics {
  const jobs = new Gauge({
    name: "quartermaster_jobs_blocked",
    help:
      "Jobs held back, by namespace, kind and main reason of the resident reconciler's verdict (the reasons of `quartermaster explain`; " +
      'pending: no cause found). Running and finished jobs are not counted; at most 500 namespaces by name, the rest as namespace="other". ' +
      "Only the instance holding the Lease exports series.",
    labelNames: ["namespace", "kind", "reason"] as const,
    registers,
  });
  const minutes = new Counter({
    name: "quartermaster_blocked_gpu_minutes_total",
    help: "GPU-minutes of jobs held back, by the main reason they were held back for and GPU resource: the GPUs each job asks × the minutes between two verdicts.",
    labelNames: ["reason", "resource"] as const,
    registers,
  });
  const events = new Counter({
    name: "quartermaster_blocked_events_total",
    help: "Events of the verdicts on jobs (Warning QuartermasterBlocked, Normal QuartermasterRunning), by result: sent, dropped (too many in flight), deferred (over the per-tick bound; later).",
    labelNames: ["type", "result"] as const,
    registers,
  });
  return {
    jobs(rows) {
      jobs.reset();
      for (const r of rows) jobs.set({ namespace: r.namespace, kind: r.kind, reason: r.reason }, r.jobs);
    },
    gpuMinutes(rows) {
      for (const r of rows) if (r.minutes > 0) minutes.inc({ reason: r.reason, resource: r.resource }, r.minutes);
    },
    event(type, result, n = 1) {
      if (n > 0) events.inc({ type, result }, n);
    },
  };
}

export interface WatchMetrics {
  readonly registry: Registry;
  /** The verdicts on jobs (`quartermaster_jobs_blocked`, ...). */
  readonly blocked: BlockedMetrics;
  /** Binds the gauges read at scrape time (the work queue, the Lease) once the controller runs. */
  source(source: WatchSource): void;
  sync(result: SyncResult, seconds: number): void;
  /** A full pass of the resident controller, by its pass result. */
  pass(result: PassResult, seconds: number): void;
  /** Pods, Services and jobs the controller created or deleted (applied writes only). */
  object(verb: "create" | "delete", kind: string): void;
}

/** Buckets for one job's sync: a decision and a handful of writes, milliseconds to seconds. */
export const SYNC_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The `verb Kind` of a pass report's applied action when it creates or deletes an object, else undefined. */
export function objectWrite(action: string): { verb: "create" | "delete"; kind: string } | undefined {
  const m = /^(create|delete) (Pod|Service|Job) /.exec(action);
  return m ? { verb: m[1] as "create" | "delete", kind: m[2]! } : undefined;
}

/** The gauges of the bound source (none bound: 0): the work queue's depth and whether the Lease is held. */
function registerWatchGauges(registers: Registry[], source: () => WatchSource | undefined): void {
  new Gauge({
    name: "quartermaster_watch_queue_depth",
    help: "Jobs waiting in the job controller's work queue (not counting those delayed or being synced).",
    registers,
    collect() {
      const bound = source();
      this.set(bound ? bound.queueDepth() : 0);
    },
  });
  new Gauge({
    name: "quartermaster_watch_lease_held",
    help: "1 while this instance holds the reconciler Lease and acts, 0 while it stands by.",
    registers,
    collect() {
      this.set(source()?.leading() ? 1 : 0);
    },
  });
}

/** The watch's counters and histograms: syncs and their duration, full passes, objects applied. */
function watchCounters(registers: Registry[]) {
  const syncs = new Counter({
    name: "quartermaster_watch_reconciles_total",
    help: "Job syncs by result: ok, requeued (a write failed or the job changed meanwhile; retried with backoff), error (the sync threw).",
    labelNames: ["result"] as const,
    registers,
  });
  const duration = new Histogram({
    name: "quartermaster_watch_reconcile_duration_seconds",
    help: "Duration of one job's sync (decision and writes).",
    buckets: SYNC_BUCKETS,
    registers,
  });
  const passes = new Histogram({
    name: "quartermaster_watch_pass_duration_seconds",
    help: "Duration of the job controller's full passes (after taking the Lease, then every --resync-seconds), by result: ok, failed (some action failed), error.",
    labelNames: ["result"] as const,
    buckets: PASS_BUCKETS,
    registers,
  });
  const objects = new Counter({
    name: "quartermaster_watch_objects_total",
    help: "Objects the job controller created or deleted (applied), by verb (create, delete) and kind (Pod, Service, Job).",
    labelNames: ["verb", "kind"] as const,
    registers,
  });
  return { syncs, duration, passes, objects };
}

/** Metrics of `quartermaster reconcile --watch` (src/run/watch.ts), on a registry of their own. */
export function createWatchMetrics(opts: { processMetrics?: boolean } = {}): WatchMetrics {
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let bound: WatchSource | undefined;
  registerWatchGauges(registers, () => bound);
  const { syncs, duration, passes, objects } = watchCounters(registers);
  for (const result of ["ok", "requeued", "error"]) syncs.inc({ result }, 0);
  return {
    registry,
    blocked: blockedMetrics(registers),
    source(s) {
      bound = s;
    },
    sync(result, seconds) {
      syncs.inc({ result });
      duration.observe(seconds);
    },
    pass(result, seconds) {
      passes.observe({ result }, seconds);
    },
    object(verb, kind) {
      objects.inc({ verb, kind });
    },
  };
}

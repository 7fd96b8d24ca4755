/**
 * @module
 * `quartermaster reconcile`: reconcile passes (adoption, cleanup of finished jobs, the GPU device ledger) once
 * (`--once`, the CronJob; `--dry-run` prints the plan), on a cron schedule (`--schedule`), or the resident job
 * controller (`--watch`: informers, a work queue, a Lease). Each is a few steps below; the cluster modules are
 * imported when a step needs them.
 */
import { Option, type Command } from "commander";
import type { LevelWithSilent } from "pino";
import { UsageError } from "../../core/errors.js";
import { createLogger, flushLog, type Logger } from "../../log.js";
import type { Policy } from "../../policy/types.js";
import type { PassOutcome } from "../../reconcile/loop.js";
import type { CliDeps } from "../deps.js";
import {
  INTERACTIVE_REQUEST_TIMEOUT_MS,
  integerOption,
  kubeconfigOption,
  logLevelOption,
  outputOption,
  policyOption,
  requestTimeoutOption,
  withDefault,
  type TableOrJson,
} from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicyOrReport, ownNamespace } from "../policy-file.js";

/** The resident reconciler's default metrics port (9090 is the webhook's, should both run on one host). */
const RECONCILER_METRICS_PORT = 9091;
const LEASE_SECONDS = 15;
const RESYNC_SECONDS = 300;

type ReconcileOptions = {
  once?: true;
  schedule?: string;
  dryRun?: true;
  output?: TableOrJson;
  policy?: string;
  kubeconfig?: string;
  requestTimeout?: number;
  namespace?: string;
  logLevel: LevelWithSilent;
  metricsPort?: number;
  watch?: true;
  leaseSeconds?: number;
  resyncSeconds?: number;
};

/** How passes run without --watch: the flags checked together. */
interface PassMode {
  /** The cron expression (--schedule), or undefined for one pass (--once). */
  schedule?: string;
  /** 0: no metrics server. */
  metricsPort: number;
  output: TableOrJson;
  dryRun: boolean;
}

function passMode(opts: ReconcileOptions): PassMode {
  const schedule = opts.schedule;
  if (Boolean(opts.once) === (schedule !== undefined)) throw new UsageError("reconcile: give exactly one of --once, --schedule CRON and --watch");
  for (const [flag, value] of [
    ["lease-seconds", opts.leaseSeconds],
    ["resync-seconds", opts.resyncSeconds],
  ] as const) {
    if (value !== undefined) throw new UsageError(`reconcile: --${flag} goes with --watch`);
  }
  // Resident (--schedule): /metrics on 9091 by default; 0 turns it off.
  // One pass (--once, the CronJob) has nothing a scrape could catch: its failures show as failed Jobs.
  const metricsPort = opts.metricsPort ?? (schedule === undefined ? 0 : RECONCILER_METRICS_PORT);
  if (schedule === undefined && metricsPort !== 0) throw new UsageError("reconcile: --metrics-port goes with --schedule or --watch");
  const dryRun = opts.dryRun === true;
  if (dryRun && schedule !== undefined) throw new UsageError("reconcile: --dry-run goes with --once");
  return { schedule, metricsPort, output: opts.output ?? "table", dryRun };
}

type Cron = typeof import("node-cron");

/** node-cron, once `schedule` is known to be a cron expression. */
async function cronFor(schedule: string): Promise<Cron> {
  const cron = await import("node-cron");
  if (!cron.validate(schedule)) throw new UsageError(`reconcile: --schedule ${JSON.stringify(schedule)} is not a cron expression`);
  return cron;
}

interface PassContext {
  policy: Policy;
  log: Logger;
  /** Quartermaster's namespace (the Lease's). */
  namespace: string;
  kubeconfig?: string;
  /** Each request's deadline; undefined: the client's resident default (src/kube/client.ts). */
  requestTimeoutMs?: number;
  mode: PassMode;
  io: CliIo;
}

/** One pass under the Lease (a dry run only reads, so it takes none): its actions, or that the Lease was busy. */
async function leasedPass({ policy, log, namespace, kubeconfig, requestTimeoutMs, mode, io }: PassContext): Promise<() => Promise<PassOutcome>> {
  const [{ connectCluster }, { runPass }, { planTable, planJson }, { acquireLease }, { hostname }] = await Promise.all([
    import("../../kube/cluster.js"),
    import("../../run/pass.js"),
    import("../../reconcile/table.js"),
    import("../../run/lease.js"),
    import("node:os"),
  ]);
  const holder = `${hostname()}-${process.pid}`;
  const { dryRun } = mode;
  return async () => {
    const timeouts = requestTimeoutMs === undefined ? {} : { requestTimeoutMs };
    const cluster = await connectCluster(kubeconfig, timeouts);
    if (dryRun) {
      const report = await runPass({ cluster, policy, log, now: () => new Date(), dryRun, namespace });
      io.stdout(mode.output === "json" ? JSON.stringify(planJson(report.plan), null, 2) : planTable(report.plan));
      return { actions: report };
    }
    const lease = await acquireLease({
      kubeconfig,
      ...timeouts,
      namespace,
      name: "quartermaster-reconciler",
      holder,
      durationSeconds: policy.reconciler.passLeaseSeconds,
      now: () => new Date(),
    });
    if ("busy" in lease) {
      log.info({ holder: lease.busy.holder, until: lease.busy.until.toISOString() }, "reconcile: another instance holds the lease; pass skipped");
      return { leaseBusy: true };
    }
    try {
      const policyReports = policy.reconciler.policyReports
        ? await (await import("../../run/policy-reports.js")).connectPolicyReports(kubeconfig, timeouts)
        : undefined;
      return { actions: await runPass({ cluster, policy, log, now: () => new Date(), dryRun, namespace, policyReports }) };
    } finally {
      await lease.held.release();
    }
  };
}

/** `--once`: one pass; exit 1 when an action failed. */
async function runOnce(pass: () => Promise<PassOutcome>, log: Logger): Promise<number> {
  const outcome = await pass();
  await flushLog(log);
  return "actions" in outcome && outcome.actions.failed.length > 0 ? 1 : 0;
}

/** `--schedule`: passes on the schedule, metrics on their port, until a signal. */
async function runOnSchedule(cron: Cron, schedule: string, pass: () => Promise<PassOutcome>, ctx: PassContext): Promise<number> {
  const { log, io, mode } = ctx;
  const [{ startLoop }, { createReconcilerMetrics }, { startMetricsServer }] = await Promise.all([
    import("../../reconcile/loop.js"),
    import("../../reconcile/metrics.js"),
    import("../../server/serve.js"),
  ]);
  const metrics = mode.metricsPort === 0 ? undefined : createReconcilerMetrics({ processMetrics: true });
  const metricsServer = metrics && (await startMetricsServer({ host: "0.0.0.0", port: mode.metricsPort, registry: metrics.registry, log }));
  const loop = startLoop({
    expression: schedule,
    schedule: (expression, tick) => cron.schedule(expression, tick),
    pass,
    log,
    metrics,
  });
  io.stdout(`quartermaster: reconciling on schedule ${schedule}${metricsServer ? `; metrics http://0.0.0.0:${metricsServer.port}/metrics` : ""}`);
  const signal = await io.shutdown;
  log.info({ signal, passes: loop.stats.started, skipped: loop.stats.skipped }, "stopping: waiting for the pass in flight");
  await loop.stop();
  await metricsServer?.close();
  await flushLog(log);
  return 0;
}

async function reconcileCommand(opts: ReconcileOptions, _args: readonly string[], io: CliIo): Promise<number> {
  if (opts.watch === true) return watchCommand(opts, io);
  const mode = passMode(opts);
  const cron = mode.schedule === undefined ? undefined : await cronFor(mode.schedule);
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  // With --dry-run stdout carries the plan, so the logs go to stderr.
  const log = createLogger(opts.logLevel, mode.dryRun ? 2 : 1);
  // --once is interactive (30 s a request by default); --schedule is resident and keeps the client's default.
  const requestTimeoutMs = opts.requestTimeout ?? (cron ? undefined : INTERACTIVE_REQUEST_TIMEOUT_MS);
  const ctx: PassContext = { policy, log, namespace: await ownNamespace(opts.namespace), kubeconfig: opts.kubeconfig, requestTimeoutMs, mode, io };
  const pass = await leasedPass(ctx);
  if (!cron || mode.schedule === undefined) return runOnce(pass, log);
  return runOnSchedule(cron, mode.schedule, pass, ctx);
}

/** `reconcile --watch`: the resident job controller (src/run/watch.ts) until a signal. */
async function watchCommand(opts: ReconcileOptions, io: CliIo): Promise<number> {
  const others = { once: opts.once, schedule: opts.schedule, "dry-run": opts.dryRun, output: opts.output };
  for (const [flag, value] of Object.entries(others)) {
    if (value !== undefined) throw new UsageError(`reconcile: --${flag} does not go with --watch`);
  }
  const metricsPort = opts.metricsPort ?? RECONCILER_METRICS_PORT;
  const leaseSeconds = opts.leaseSeconds ?? LEASE_SECONDS;
  const resyncSeconds = opts.resyncSeconds ?? RESYNC_SECONDS;
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const log = createLogger(opts.logLevel, 1);
  const namespace = await ownNamespace(opts.namespace);
  const [{ startWatch }, { hostname }, { createWatchMetrics }, { startMetricsServer }] = await Promise.all([
    import("../../run/watch.js"),
    import("node:os"),
    import("../../reconcile/metrics.js"),
    import("../../server/serve.js"),
  ]);
  // The metrics port first, so /healthz answers while the caches sync; /readyz once they have (a standby too).
  const metrics = metricsPort === 0 ? undefined : createWatchMetrics({ processMetrics: true });
  let synced = false;
  const metricsServer = metrics && (await startMetricsServer({ host: "0.0.0.0", port: metricsPort, registry: metrics.registry, log, ready: () => synced }));
  let watcher;
  try {
    watcher = await startWatch({
      kubeconfig: opts.kubeconfig,
      ...(opts.requestTimeout !== undefined ? { requestTimeoutMs: opts.requestTimeout } : {}),
      policy,
      log,
      namespace,
      holder: `${hostname()}-${process.pid}`,
      leaseSeconds,
      resyncSeconds,
      ...(metrics ? { metrics } : {}),
    });
  } catch (err) {
    await metricsServer?.close();
    throw err;
  }
  synced = true;
  io.stdout(
    `quartermaster: job controller watching (lease ${leaseSeconds}s, full pass every ${resyncSeconds}s)${metricsServer ? `; metrics http://0.0.0.0:${metricsServer.port}/metrics` : ""}`,
  );
  const signal = await io.shutdown;
  log.info({ signal, ...watcher.stats }, "stopping: waiting for the work in flight, then releasing the lease");
  await watcher.stop();
  await metricsServer?.close();
  await flushLog(log);
  return 0;
}

export function registerReconcile(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("reconcile")
    .summary("reconcile passes: adoption, cleanup of finished jobs, the GPU device ledger")
    .description(
      `Reconcile passes: adopt and release pods and services, per-replica Services, clean up finished jobs
(CleanPodPolicy, TTL, as each job sets them), write the GPU device ledger; only in opted-in namespaces (never
the protected ones or --namespace); one at a time cluster-wide (a Lease in --namespace). Give exactly one of
--once, --schedule and --watch. --dry-run (with --once) prints the plan and what it skips and why, and changes
nothing (logs go to stderr). With --schedule or --watch, metrics over HTTP on --metrics-port (/metrics, /healthz,
/readyz). With --watch, the resident reconciler: informers on every job kind, the job controller for the kinds
Quartermaster runs (Caffe2Job by default), CleanPodPolicy and TTL on time for every kind, a full pass every
--resync-seconds, one instance acting under the Lease.`,
    )
    .addOption(new Option("--once", "one pass, then exit (the CronJob)"))
    .addOption(new Option("--schedule <cron>", "run passes on this cron schedule (resident)"))
    .addOption(new Option("--dry-run", "with --once: print the plan, change nothing"))
    .addOption(outputOption("reconcile", false))
    .addOption(policyOption())
    .addOption(kubeconfigOption())
    .addOption(requestTimeoutOption("30s with --once, 60s with --schedule or --watch"))
    .addOption(new Option("--namespace <name>", withDefault("Quartermaster's namespace (the Lease)", "the pod's own, else quartermaster")))
    .addOption(logLevelOption())
    .addOption(
      integerOption("--metrics-port <port>", withDefault("with --schedule or --watch: metrics port (0: off)", String(RECONCILER_METRICS_PORT)), { max: 65535 }),
    )
    .addOption(new Option("--watch", "the resident reconciler (informers, work queue, Lease): TTLs and CleanPodPolicy on time"))
    .addOption(integerOption("--lease-seconds <seconds>", withDefault("with --watch: the Lease's duration", String(LEASE_SECONDS)), { min: 2, max: 3600 }))
    .addOption(
      integerOption("--resync-seconds <seconds>", withDefault("with --watch: seconds between full passes", String(RESYNC_SECONDS)), { min: 1, max: 86400 }),
    );
  deps.action(cmd, reconcileCommand);
}

/**
 * @module
 * `quartermaster` commands: one entry each in {@link COMMANDS} (flags, help, the function it runs), parsed and
 * dispatched by commander (./program.ts). Heavy modules (the Kubernetes client, @peculiar/x509) are imported only
 * by the commands that use them, so `serve` starts fast.
 */
import { readFile, mkdir, writeFile, access } from "node:fs/promises";
import { isIP } from "node:net";
import { join, resolve } from "node:path";
import type { LevelWithSilent } from "pino";
import { PolicyError, UsageError, errorMessage } from "../core/errors.js";
import { createLogger, LOG_LEVELS, type Logger } from "../log.js";
import { defaultPolicy } from "../policy/load.js";
import type { Policy } from "../policy/types.js";
import type { PassOutcome } from "../reconcile/loop.js";
import { DNS_1123_LABEL, DNS_SAN } from "../core/names.js";
import type { CliIo } from "./io.js";
import { loadPolicy, loadPolicyOrReport, namespaceFlag, ownNamespace } from "./policy-file.js";
import { runProgram, type CommandSpec, type FlagSpec } from "./program.js";
import { MIGRATE_COMMAND } from "./commands/migrate.js";

type Values = Record<string, unknown>;

function intFlag(values: Record<string, unknown>, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${String(raw)}`);
  return n;
}

function logLevel(values: Record<string, unknown>): LevelWithSilent {
  const level = (values["log-level"] as string | undefined) ?? "info";
  if (!LOG_LEVELS.includes(level as LevelWithSilent)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(", ")}`);
  return level as LevelWithSilent;
}

function policyDefaultsCommand(_values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  io.stdout(JSON.stringify(defaultPolicy(), null, 2));
  return Promise.resolve(0);
}

async function policyCheckCommand(_values: Values, [file]: readonly string[], io: CliIo): Promise<number> {
  if (!file) throw new UsageError("policy check: missing the policy file");
  try {
    await loadPolicy(file, io.cwd);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    io.stderr(err.message);
    return 1;
  }
  io.stdout(`${file}: valid`);
  return 0;
}

const CERTS_DEFAULTS = { secret: "quartermaster-webhook-tls", caSecret: "quartermaster-webhook-ca", webhookConfiguration: "quartermaster" };

/** `certs ensure`: the Secrets and caBundles brought up to date in the cluster (src/certs/ensure.ts). */
async function certsEnsureCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  for (const required of ["service", "namespace"]) {
    if (!values[required]) throw new UsageError(`certs ensure: --${required} is required`);
  }
  checkSanFlags("certs ensure", values);
  const days = intFlag(values, "days", 90, 1, 3650);
  const renewBeforeDays = intFlag(values, "renew-before-days", 30, 0, 3650);
  const caDays = intFlag(values, "ca-days", 1095, 1, 7300);
  const caRenewBeforeDays = intFlag(values, "ca-renew-before-days", 180, 0, 7300);
  if (renewBeforeDays >= days) throw new UsageError("certs ensure: --renew-before-days must be less than --days");
  if (caRenewBeforeDays >= caDays) throw new UsageError("certs ensure: --ca-renew-before-days must be less than --ca-days");
  const overlapHours = intFlag(values, "overlap-hours", 24, 0, 24 * 365);
  const settleSeconds = intFlag(values, "settle-seconds", 5, 0, 600);
  const keyType = keyTypeFlag("certs ensure", values);
  const namespace = values.namespace as string;
  const configs = (values["webhook-configuration"] as string[] | undefined) ?? [CERTS_DEFAULTS.webhookConfiguration];
  const [{ ensureCertificates }, { connectCertStore }] = await Promise.all([import("../certs/ensure.js"), import("../kube/certs.js")]);
  const store = await connectCertStore({ kubeconfig: values.kubeconfig as string | undefined, namespace, mutating: configs, validating: configs });
  const day = 86400_000;
  const steps = await ensureCertificates(store, {
    service: values.service as string,
    namespace,
    servingSecret: (values.secret as string | undefined) ?? CERTS_DEFAULTS.secret,
    caSecret: (values["ca-secret"] as string | undefined) ?? CERTS_DEFAULTS.caSecret,
    dnsNames: (values.dns as string[] | undefined) ?? [],
    ips: (values.ip as string[] | undefined) ?? [],
    days,
    caDays,
    renewBeforeMs: renewBeforeDays * day,
    caRenewBeforeMs: caRenewBeforeDays * day,
    overlapMs: overlapHours * 3600_000,
    settleMs: settleSeconds * 1000,
    keyType,
    dryRun: values["dry-run"] === true,
    now: () => new Date(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  });
  const verb = values["dry-run"] === true ? "would change" : "changed";
  for (const step of steps) io.stdout(`${step.what} ${step.target}: ${step.changed ? verb : "unchanged"}: ${step.detail}`);
  return 0;
}

/** `certs install`: the CA bundle in a file written into every webhook of the webhook configurations. */
async function certsInstallCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  if (!values.ca) throw new UsageError("certs install: --ca is required");
  const bundle = await readFile(resolve(io.cwd, values.ca as string), "utf8");
  const [{ splitPem, sameBundle }, { connectCertStore }] = await Promise.all([import("../certs/plan.js"), import("../kube/certs.js")]);
  const pems = splitPem(bundle);
  if (pems.length === 0) throw new UsageError(`certs install: ${values.ca as string} holds no PEM certificate`);
  const configs = (values["webhook-configuration"] as string[] | undefined) ?? [CERTS_DEFAULTS.webhookConfiguration];
  const store = await connectCertStore({ kubeconfig: values.kubeconfig as string | undefined, namespace: "", mutating: configs, validating: configs });
  for (const config of await store.readWebhookConfigurations()) {
    const stale = config.webhooks.filter((w) => !sameBundle(w.caBundle, pems)).map((w) => w.name);
    if (stale.length > 0) await store.writeCaBundle(config, stale, pems.join(""));
    io.stdout(
      `${config.kind}/${config.name}: ${stale.length > 0 ? `caBundle set (${pems.length} CA(s)) in ${stale.join(", ")}` : "caBundle already up to date"}`,
    );
  }
  return 0;
}

/** --key-type of the certs commands: ecdsa (P-256, the default) or rsa (2048 bits). */
function keyTypeFlag(command: string, values: Record<string, unknown>): "ecdsa" | "rsa" {
  const v = values["key-type"] ?? "ecdsa";
  if (v !== "ecdsa" && v !== "rsa") throw new UsageError(`${command}: --key-type must be ecdsa or rsa, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * --service and --namespace (DNS-1123 labels), --ip (addresses) and --dns (names, a leading `*.` allowed) of
 * the certs commands: a usage error here rather than a library error while signing or a certificate no
 * client accepts.
 */
function checkSanFlags(command: string, values: Record<string, unknown>): void {
  for (const flag of ["service", "namespace"]) {
    if (!DNS_1123_LABEL.test(values[flag] as string))
      throw new UsageError(`${command}: --${flag} must be a DNS-1123 label, got ${JSON.stringify(values[flag])}`);
  }
  for (const ip of (values.ip as string[] | undefined) ?? []) {
    if (!isIP(ip)) throw new UsageError(`${command}: --ip ${JSON.stringify(ip)} is not an IPv4 or IPv6 address`);
  }
  for (const name of (values.dns as string[] | undefined) ?? []) {
    if (name.length > 253 || !DNS_SAN.test(name))
      throw new UsageError(`${command}: --dns ${JSON.stringify(name)} is not a DNS name (lower-case RFC 1123, a leading "*." allowed)`);
  }
}

async function certsGenerateCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  for (const required of ["service", "namespace", "out"]) {
    if (!values[required]) throw new UsageError(`certs generate: --${required} is required`);
  }
  if (Boolean(values["ca-cert"]) !== Boolean(values["ca-key"])) throw new UsageError("certs generate: --ca-cert and --ca-key go together");
  checkSanFlags("certs generate", values);
  const keyType = keyTypeFlag("certs generate", values);
  const { generateCertificates } = await import("../certs/generate.js");
  const ca = values["ca-cert"]
    ? {
        certPem: await readFile(resolve(io.cwd, values["ca-cert"] as string), "utf8"),
        keyPem: await readFile(resolve(io.cwd, values["ca-key"] as string), "utf8"),
      }
    : undefined;
  if (ca) {
    // The checks `certs ensure` makes before it keeps a stored CA (src/certs/plan.ts).
    const { caProblem } = await import("../certs/plan.js");
    const problem = caProblem(ca, new Date());
    if (problem) throw new UsageError(`certs generate: --ca-cert ${values["ca-cert"] as string} with --ca-key ${values["ca-key"] as string}: ${problem}`);
  }
  const certs = await generateCertificates({
    service: values.service as string,
    namespace: values.namespace as string,
    ips: (values.ip as string[] | undefined) ?? [],
    dnsNames: (values.dns as string[] | undefined) ?? [],
    days: intFlag(values, "days", 365, 1, 3650),
    caDays: intFlag(values, "ca-days", 730, 1, 7300),
    ca,
    keyType,
  });
  const out = resolve(io.cwd, values.out as string);
  await writeCertificates(out, certs);
  io.stdout(`wrote ${join(out, "ca.crt")}, ca.key, tls.crt, tls.key (SANs: ${[...certs.dnsNames, ...certs.ips].join(", ")})`);
  return 0;
}

async function writeCertificates(dir: string, certs: { ca: { certPem: string; keyPem: string }; certPem: string; keyPem: string }): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "ca.crt"), certs.ca.certPem);
  await writeFile(join(dir, "ca.key"), certs.ca.keyPem, { mode: 0o600 });
  // Key first, then certificate: a reloading server sees a mismatched pair only briefly and keeps the old one.
  await writeFile(join(dir, "tls.key"), certs.keyPem, { mode: 0o600 });
  await writeFile(join(dir, "tls.crt"), certs.certPem);
}

interface ServeFlags {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  /** Plain HTTP behind a platform that terminates TLS (Knative); no key pair. */
  plainHttp: boolean;
  metricsPort: number;
  clientCaFile?: string;
  /** Offer HTTP/2 by ALPN besides HTTP/1.1. */
  http2: boolean;
  maxConnections: number;
  maxConnectionsPerSource: number;
  maxInflightBodyBytes: number;
  policyFile?: string;
  kubeconfig?: string;
  level: LevelWithSilent;
  drainTimeoutMs: number;
  shutdownDelayMs: number;
  /** How often the device ledger's totals are read for the capacity check; 0: never. */
  ledgerRefreshSeconds: number;
  namespace?: string;
}

/** The flags of `serve` and `dev`; `dev` differs only in its defaults. */
function serveFlagSpecs(dev: boolean): Record<string, FlagSpec> {
  return {
    "tls-cert": {
      type: "string",
      value: "file",
      description: "serving certificate (PEM); reloaded when it changes",
      ...(dev ? { default: "certs/dev/tls.crt" } : {}),
    },
    "tls-key": { type: "string", value: "file", description: "its private key (PEM)", ...(dev ? { default: "certs/dev/tls.key" } : {}) },
    "plain-http": { type: "boolean", description: "serve HTTP: only behind a platform that terminates TLS itself (e.g. Knative)" },
    port: { type: "string", value: "port", description: "webhook port (0: any free port)", default: "8443" },
    host: { type: "string", value: "address", description: "address to listen on", default: dev ? "127.0.0.1" : "0.0.0.0" },
    "metrics-port": { type: "string", value: "port", description: "/metrics, /healthz and /readyz over HTTP (0: any free port)", default: "9090" },
    "client-ca": { type: "string", value: "file", description: "require client certificates signed by this CA (the apiserver's)" },
    http2: { type: "boolean", description: "offer HTTP/2 by ALPN besides HTTP/1.1" },
    "max-connections": { type: "string", value: "n", description: "open connections at most (when full, the least useful one is closed)", default: "1000" },
    "max-connections-per-source": { type: "string", value: "n", description: "open connections at most from one address", default: "250" },
    "max-inflight-body-mib": { type: "string", value: "mib", description: "request bodies held in memory at once, in MiB", default: "32" },
    policy: POLICY_FLAG,
    kubeconfig: KUBECONFIG_FLAG,
    "log-level": LOG_LEVEL_FLAG,
    "drain-timeout-ms": { type: "string", value: "ms", description: "on SIGTERM, how long requests in flight may finish", default: "10000" },
    "shutdown-delay-ms": { type: "string", value: "ms", description: "on SIGTERM, keep serving (unready) this long first", default: "0" },
    "ledger-refresh-seconds": {
      type: "string",
      value: "s",
      description: "how often the capacity check reads the device ledger's totals (0: off)",
      default: dev ? "0" : "60",
    },
    namespace: { type: "string", value: "name", description: "namespace of the device ledger", default: "the pod's own, else quartermaster" },
  };
}

async function runServer(flags: ServeFlags, io: CliIo): Promise<number> {
  const log = createLogger(flags.level);
  const policy = await loadPolicyOrReport(flags.policyFile, io);
  if (!policy) return 1;
  const [{ startServer }, { createAdmissionMetrics }, { createWebhooks }, { createJobReader }] = await Promise.all([
    import("../server/serve.js"),
    import("../server/metrics.js"),
    import("../../webhooks/index.js"),
    import("../kube/jobs.js"),
  ]);
  const capacity =
    flags.ledgerRefreshSeconds > 0
      ? (await import("../kube/capacity.js")).ledgerCapacity({
          kubeconfig: flags.kubeconfig,
          namespace: await ownNamespace(flags.namespace),
          intervalMs: flags.ledgerRefreshSeconds * 1000,
          log,
        })
      : undefined;
  const metrics = createAdmissionMetrics({
    timeoutSeconds: policy.webhook.timeoutSeconds,
    processMetrics: true,
    ledger: capacity && (() => capacity.reading()),
  });
  const jobs = createJobReader({
    kubeconfig: flags.kubeconfig,
    ttlMs: policy.clusterSpec.jobCacheTtlMs,
    observe: (result, seconds) => metrics.jobLookup(result, seconds),
  });
  const webhooks = createWebhooks({ policy, log, jobs, capacity, now: () => new Date() });
  const server = await startServer({
    host: flags.host,
    port: flags.port,
    certFile: resolve(io.cwd, flags.certFile),
    keyFile: resolve(io.cwd, flags.keyFile),
    plainHttp: flags.plainHttp,
    metricsPort: flags.metricsPort,
    clientCaFile: flags.clientCaFile && resolve(io.cwd, flags.clientCaFile),
    http2: flags.http2,
    maxConnections: flags.maxConnections,
    maxConnectionsPerSource: flags.maxConnectionsPerSource,
    maxInflightBodyBytes: flags.maxInflightBodyBytes,
    webhooks,
    metrics,
    log,
    drainTimeoutMs: flags.drainTimeoutMs,
    shutdownDelayMs: flags.shutdownDelayMs,
  });
  io.stdout(
    `quartermaster: serving ${server.url} (${Object.keys(webhooks)
      .map((p) => p.slice(1))
      .join(", ")}); metrics http://${flags.host.includes(":") ? `[${flags.host}]` : flags.host}:${server.metricsPort}/metrics`,
  );
  // Load the Kubernetes client now, off the start-up path, so the first job lookup does not pay for it.
  void jobs.warm().then(() => log.debug("kubernetes client loaded"));
  void capacity?.refresh();
  const signal = await io.shutdown;
  log.info({ signal }, "signal received");
  capacity?.stop();
  await server.close();
  await flushLog(log);
  return 0;
}

function flushLog(log: Logger): Promise<void> {
  return new Promise((done) => log.flush(() => done()));
}

function serveFlags(values: Record<string, unknown>, defaults: Partial<ServeFlags>): ServeFlags {
  const certFile = (values["tls-cert"] as string | undefined) ?? defaults.certFile;
  const keyFile = (values["tls-key"] as string | undefined) ?? defaults.keyFile;
  const plainHttp = values["plain-http"] === true;
  if (plainHttp && (values["tls-cert"] || values["tls-key"])) throw new UsageError("serve: --plain-http takes no --tls-cert or --tls-key");
  if (!plainHttp && (!certFile || !keyFile))
    throw new UsageError("serve: --tls-cert and --tls-key are required (or --plain-http behind a TLS-terminating platform)");
  if (plainHttp && values["client-ca"]) throw new UsageError("serve: --client-ca needs TLS (it takes no --plain-http)");
  const port = intFlag(values, "port", 8443, 0, 65535);
  const metricsPort = intFlag(values, "metrics-port", 9090, 0, 65535);
  if (port !== 0 && port === metricsPort) throw new UsageError(`serve: --port and --metrics-port must differ (both ${port})`);
  return {
    plainHttp,
    host: (values.host as string | undefined) ?? defaults.host ?? "0.0.0.0",
    port,
    metricsPort,
    clientCaFile: values["client-ca"] as string | undefined,
    http2: values.http2 === true,
    maxConnections: intFlag(values, "max-connections", 1000, 1, 1_000_000),
    maxConnectionsPerSource: intFlag(values, "max-connections-per-source", 250, 1, 1_000_000),
    maxInflightBodyBytes: intFlag(values, "max-inflight-body-mib", 32, 8, 4096) * 1024 * 1024,
    certFile: certFile ?? "",
    keyFile: keyFile ?? "",
    policyFile: values.policy as string | undefined,
    kubeconfig: values.kubeconfig as string | undefined,
    level: logLevel(values),
    drainTimeoutMs: intFlag(values, "drain-timeout-ms", 10_000, 0, 600_000),
    shutdownDelayMs: intFlag(values, "shutdown-delay-ms", 0, 0, 600_000),
    ledgerRefreshSeconds: intFlag(values, "ledger-refresh-seconds", defaults.ledgerRefreshSeconds ?? 60, 0, 86_400),
    namespace: values.namespace as string | undefined,
  };
}

async function serveCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  return runServer(serveFlags(values, {}), io);
}

/** `npm start`: development certificates in certs/dev, created on first use, and 127.0.0.1:8443. */
async function devCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  const dir = resolve(io.cwd, "certs/dev");
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  const exists = (file: string): Promise<boolean> =>
    access(file).then(
      () => true,
      () => false,
    );
  if (!(await exists(certFile)) || !(await exists(keyFile))) {
    const { generateCertificates } = await import("../certs/generate.js");
    await writeCertificates(
      dir,
      await generateCertificates({ service: "quartermaster-webhook", namespace: "quartermaster", ips: ["127.0.0.1"], dnsNames: ["localhost"] }),
    );
    io.stdout(`quartermaster: created development certificates in ${dir}`);
  }
  // No cluster in development unless asked for: the capacity check stays off.
  const flags = serveFlags(values, { host: "127.0.0.1", certFile, keyFile, ledgerRefreshSeconds: 0 });
  io.stdout(`quartermaster: CA for clients: ${join(dir, "ca.crt")}`);
  io.stdout(`quartermaster: try  curl --cacert ${join(dir, "ca.crt")} https://127.0.0.1:${flags.port}/readyz`);
  return runServer(flags, io);
}

/** The resident reconciler's default metrics port. */
const RECONCILER_METRICS_PORT = 9091;

// eslint-disable-next-line complexity -- debt: to be split into steps with the commands split (issue 30)
async function reconcileCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  if (values.watch === true) return watchCommand(values, io);
  const schedule = values.schedule as string | undefined;
  if (Boolean(values.once) === (schedule !== undefined)) throw new UsageError("reconcile: give exactly one of --once, --schedule CRON and --watch");
  for (const flag of ["lease-seconds", "resync-seconds"]) {
    if (values[flag] !== undefined) throw new UsageError(`reconcile: --${flag} goes with --watch`);
  }
  // Resident (--schedule): /metrics on 9091 by default (9090 is the webhook's, should both run on one host); 0 turns it off.
  // One pass (--once, the CronJob) has nothing a scrape could catch: its failures show as failed Jobs.
  const metricsPort = intFlag(values, "metrics-port", schedule === undefined ? 0 : RECONCILER_METRICS_PORT, 0, 65535);
  if (schedule === undefined && metricsPort !== 0) throw new UsageError("reconcile: --metrics-port goes with --schedule or --watch");
  const output = (values.output as string | undefined) ?? "table";
  if (output !== "table" && output !== "json") throw new UsageError("reconcile: -o must be table or json");
  const dryRun = values["dry-run"] === true;
  if (dryRun && schedule !== undefined) throw new UsageError("reconcile: --dry-run goes with --once");
  const cron = schedule === undefined ? undefined : await import("node-cron");
  if (cron && schedule && !cron.validate(schedule)) throw new UsageError(`reconcile: --schedule ${JSON.stringify(schedule)} is not a cron expression`);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  // With --dry-run stdout carries the plan, so the logs go to stderr.
  const log = createLogger(logLevel(values), dryRun ? 2 : 1);
  const namespace = await ownNamespace(values.namespace as string | undefined);
  const kubeconfig = values.kubeconfig as string | undefined;
  const [{ connectCluster }, { runPass }, { planTable, planJson }, { acquireLease }, { hostname }] = await Promise.all([
    import("../kube/cluster.js"),
    import("../kube/pass.js"),
    import("../reconcile/table.js"),
    import("../kube/lease.js"),
    import("node:os"),
  ]);
  const holder = `${hostname()}-${process.pid}`;

  /** One pass under the Lease (a dry run only reads, so it takes none): its actions, or that the Lease was busy. */
  const pass = async (): Promise<PassOutcome> => {
    const cluster = await connectCluster(kubeconfig);
    if (dryRun) {
      const report = await runPass({ cluster, policy, log, now: () => new Date(), dryRun, namespace });
      io.stdout(output === "json" ? JSON.stringify(planJson(report.plan), null, 2) : planTable(report.plan));
      return { actions: report };
    }
    const lease = await acquireLease({
      kubeconfig,
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
      const policyReports = policy.reconciler.policyReports ? await (await import("../kube/policy-reports.js")).connectPolicyReports(kubeconfig) : undefined;
      return { actions: await runPass({ cluster, policy, log, now: () => new Date(), dryRun, namespace, policyReports }) };
    } finally {
      await lease.held.release();
    }
  };

  if (!cron || !schedule) {
    const outcome = await pass();
    await flushLog(log);
    return "actions" in outcome && outcome.actions.failed.length > 0 ? 1 : 0;
  }
  const [{ startLoop }, { createReconcilerMetrics }, { startMetricsServer }] = await Promise.all([
    import("../reconcile/loop.js"),
    import("../reconcile/metrics.js"),
    import("../server/serve.js"),
  ]);
  const metrics = metricsPort === 0 ? undefined : createReconcilerMetrics({ processMetrics: true });
  const metricsServer = metrics && (await startMetricsServer({ host: "0.0.0.0", port: metricsPort, registry: metrics.registry, log }));
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

/** `reconcile --watch`: the resident job controller (src/kube/watch.ts) until a signal. */
async function watchCommand(values: Values, io: CliIo): Promise<number> {
  for (const other of ["once", "schedule", "dry-run", "output"]) {
    if (values[other] !== undefined) throw new UsageError(`reconcile: --${other} does not go with --watch`);
  }
  const metricsPort = intFlag(values, "metrics-port", RECONCILER_METRICS_PORT, 0, 65535);
  const leaseSeconds = intFlag(values, "lease-seconds", 15, 2, 3600);
  const resyncSeconds = intFlag(values, "resync-seconds", 300, 1, 86400);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  const log = createLogger(logLevel(values), 1);
  const namespace = await ownNamespace(values.namespace as string | undefined);
  const [{ startWatch }, { hostname }, { createWatchMetrics }, { startMetricsServer }] = await Promise.all([
    import("../kube/watch.js"),
    import("node:os"),
    import("../reconcile/metrics.js"),
    import("../server/serve.js"),
  ]);
  // The metrics port first, so /healthz answers while the caches sync; /readyz once they have (a standby too).
  const metrics = metricsPort === 0 ? undefined : createWatchMetrics({ processMetrics: true });
  let synced = false;
  const metricsServer = metrics && (await startMetricsServer({ host: "0.0.0.0", port: metricsPort, registry: metrics.registry, log, ready: () => synced }));
  let watcher;
  try {
    watcher = await startWatch({
      kubeconfig: values.kubeconfig as string | undefined,
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

async function ledgerCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  const output = (values.output as string | undefined) ?? "table";
  if (output !== "table" && output !== "json") throw new UsageError("ledger: -o must be table or json");
  const namespace = await ownNamespace(values.namespace as string | undefined);
  const [{ readClusterLedger }, { ledgerTable }] = await Promise.all([import("../kube/ledger.js"), import("../reconcile/table.js")]);
  const read = await readClusterLedger(values.kubeconfig as string | undefined, namespace);
  for (const p of read.problems) io.stderr(`quartermaster: ${p}`);
  if (!read.ledger) {
    io.stderr(`quartermaster: no readable device ledger in namespace ${namespace}; the reconciler writes one each pass`);
    return 1;
  }
  io.stdout(output === "json" ? JSON.stringify({ ...read.ledger, corrupt: read.corrupt }, null, 2) : ledgerTable(read.ledger));
  return read.corrupt.length > 0 ? 1 : 0;
}

/**
 * `doctor`: reads the installation and prints findings; the exit code is the worst one's (0 healthy,
 * 1 warnings, 2 critical). A cluster that cannot be read at all is critical: nothing can be vouched for.
 */
async function doctorCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  const output = (values.output as string | undefined) ?? "table";
  if (output !== "table" && output !== "json") throw new UsageError("doctor: -o must be table or json");
  let policy: Policy;
  try {
    policy = await loadPolicy(values.policy as string | undefined, io.cwd);
  } catch (err) {
    if (err instanceof PolicyError) throw new UsageError(err.message);
    throw err;
  }
  const [{ readDoctorSnapshot }, { diagnose, unreachable, findingsTable }] = await Promise.all([import("../kube/doctor.js"), import("../doctor/index.js")]);
  let report;
  try {
    const kubeconfig = values.kubeconfig as string | undefined;
    const namespace = (values.namespace as string | undefined) ?? "quartermaster";
    const snapshot = await readDoctorSnapshot({
      kubeconfig,
      namespace,
      policy,
      now: () => new Date(),
      readLedger: async () => {
        const [{ readClusterLedger }, { ledgerState }] = await Promise.all([import("../kube/ledger.js"), import("../doctor/ledger.js")]);
        return ledgerState(await readClusterLedger(kubeconfig, namespace));
      },
    });
    report = diagnose(snapshot, policy);
  } catch (err) {
    report = unreachable(errorMessage(err));
  }
  io.stdout(output === "json" ? JSON.stringify(report, null, 2) : findingsTable(report));
  return report.exitCode;
}

/** `manifests webhooks`: the webhook configurations rendered from a policy (no cluster access). */
async function manifestsWebhooksCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  // A DNS-1123 label, as a namespace name must be; anything else would only fail at apply time.
  const namespace = namespaceFlag(values.namespace);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  const { webhookConfigurationsYaml } = await import("../manifests/webhooks.js");
  io.stdout((await webhookConfigurationsYaml(policy, { namespace })).trimEnd());
  return 0;
}

/** `manifests confinement`: the reconciler's ValidatingAdmissionPolicy for a policy's job kinds and a namespace. */
async function manifestsConfinementCommand(values: Values, _args: readonly string[], io: CliIo): Promise<number> {
  const namespace = namespaceFlag(values.namespace);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  const { reconcilerConfinementYaml } = await import("../manifests/confinement.js");
  io.stdout((await reconcilerConfinementYaml(policy, namespace)).trimEnd());
  return 0;
}

const POLICY_FLAG: FlagSpec = { type: "string", value: "file", description: "policy file (YAML or JSON)", default: "the built-in policy" };
const KUBECONFIG_FLAG: FlagSpec = { type: "string", value: "file", description: "kubeconfig", default: "$KUBECONFIG, ~/.kube/config, else in-cluster" };
const LOG_LEVEL_FLAG: FlagSpec = { type: "string", value: "level", description: `log level: ${LOG_LEVELS.join(", ")}`, default: "info" };
const OUTPUT_TABLE_JSON: FlagSpec = { type: "string", short: "o", value: "format", description: "table or json", default: "table" };
const WEBHOOK_CONFIGURATION_FLAG: FlagSpec = {
  type: "string",
  multiple: true,
  value: "name",
  description: "Mutating- and ValidatingWebhookConfiguration to keep (repeatable)",
  default: "quartermaster",
};
const SAN_FLAGS: Record<string, FlagSpec> = {
  service: { type: "string", value: "name", description: "the webhook Service (required)" },
  namespace: { type: "string", value: "name", description: "its namespace (required)" },
  ip: { type: "string", multiple: true, value: "address", description: "an IP address SAN (repeatable)" },
  dns: { type: "string", multiple: true, value: "name", description: "a DNS name SAN, a leading *. allowed (repeatable)" },
};

/**
 * Every command, one entry each: adding a command is adding an entry (its logic in a module of its own,
 * imported by `run` when the command runs, so the start of `serve` loads none of it).
 */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "serve",
    summary: "serve the admission webhooks",
    description: `Serve the admission webhooks over HTTPS (--plain-http: over HTTP, only behind a platform that terminates TLS
itself, e.g. Knative); /metrics, /healthz and /readyz over HTTP on --metrics-port. --client-ca: require client
certificates signed by that CA (the apiserver's). The job capacity check reads the device ledger's totals from
--namespace every --ledger-refresh-seconds.`,
    flags: serveFlagSpecs(false),
    run: serveCommand,
  },
  {
    name: "dev",
    summary: "serve on https://127.0.0.1:8443 with development certificates",
    description: "Serve on https://127.0.0.1:8443 with development certificates (created in certs/dev on first use).",
    flags: serveFlagSpecs(true),
    run: devCommand,
  },
  {
    name: "policy check",
    summary: "validate a policy file and print every error",
    args: [{ name: "file", description: "policy file (YAML or JSON)" }],
    run: policyCheckCommand,
  },
  { name: "policy defaults", summary: "print the built-in policy as JSON", run: policyDefaultsCommand },
  {
    name: "policy export-vap",
    summary: "print the pod limits as a ValidatingAdmissionPolicy and its binding",
    description: `Print the pod limits of /validate/pods as a ValidatingAdmissionPolicy and its binding (Kubernetes >= 1.33);
the rules it cannot express are listed in it, and on stderr when the policy uses them.`,
    flags: {
      policy: POLICY_FLAG,
      namespace: { type: "string", value: "name", description: "Quartermaster's namespace (the scope's own)", default: "quartermaster" },
    },
    run: (values, _args, io) => import("./vap.js").then((m) => m.exportVapCommand(values, io)),
  },
  {
    name: "audit",
    summary: "hold what already runs in opted-in namespaces to the policy",
    description: `Hold the pods and training jobs that already run in opted-in namespaces (only --namespace with it) to the
policy: every violation with its rule, mode and field. (reconciler.policyReports writes the same as PolicyReports.)`,
    flags: {
      output: OUTPUT_TABLE_JSON,
      namespace: { type: "string", value: "name", description: "only this namespace" },
      policy: POLICY_FLAG,
      kubeconfig: KUBECONFIG_FLAG,
    },
    after: "Exit codes: 0 nothing breaks a deny rule, 1 something does (or the cluster cannot be read), 2 usage.",
    run: (values, _args, io) => import("./audit.js").then((m) => m.auditCommand(values, io)),
  },
  {
    name: "reconcile",
    summary: "reconcile passes: adoption, cleanup of finished jobs, the GPU device ledger",
    description: `Reconcile passes: adopt and release pods and services, per-replica Services, clean up finished jobs
(CleanPodPolicy, TTL, as each job sets them), write the GPU device ledger; only in opted-in namespaces (never
the protected ones or --namespace); one at a time cluster-wide (a Lease in --namespace). Give exactly one of
--once, --schedule and --watch. --dry-run (with --once) prints the plan and what it skips and why, and changes
nothing (logs go to stderr). With --schedule or --watch, metrics over HTTP on --metrics-port (/metrics, /healthz,
/readyz). With --watch, the resident job controller for the kinds Quartermaster runs (Caffe2Job by default):
informers, a work queue, a full pass every --resync-seconds, one instance acting under the Lease.`,
    flags: {
      once: { type: "boolean", description: "one pass, then exit (the CronJob)" },
      schedule: { type: "string", value: "cron", description: "run passes on this cron schedule (resident)" },
      "dry-run": { type: "boolean", description: "with --once: print the plan, change nothing" },
      output: OUTPUT_TABLE_JSON,
      policy: POLICY_FLAG,
      kubeconfig: KUBECONFIG_FLAG,
      namespace: { type: "string", value: "name", description: "Quartermaster's namespace (the Lease)", default: "the pod's own, else quartermaster" },
      "log-level": LOG_LEVEL_FLAG,
      "metrics-port": {
        type: "string",
        value: "port",
        description: "with --schedule or --watch: metrics port (0: off)",
        default: String(RECONCILER_METRICS_PORT),
      },
      watch: { type: "boolean", description: "the resident job controller (informers, work queue, Lease)" },
      "lease-seconds": { type: "string", value: "seconds", description: "with --watch: the Lease's duration", default: "15" },
      "resync-seconds": { type: "string", value: "seconds", description: "with --watch: seconds between full passes", default: "300" },
    },
    run: reconcileCommand,
  },
  {
    name: "ledger",
    summary: "print the GPU device ledger (checksums verified)",
    description: "Print the GPU device ledger the reconciler keeps in --namespace (checksums verified). Exit 1 if absent or corrupt.",
    flags: {
      output: OUTPUT_TABLE_JSON,
      namespace: { type: "string", value: "name", description: "where the ledger is", default: "the pod's own, else quartermaster" },
      kubeconfig: KUBECONFIG_FLAG,
    },
    run: ledgerCommand,
  },
  {
    name: "doctor",
    summary: "check an installation for what would stop admissions or go stale",
    description: `Check an installation for what would stop admissions or go stale: webhooks and their endpoints, caBundle
against the served certificate, certificate expiry, namespace selectors, side effects, timeouts, the
reconciler's last pass, the ledger, RBAC (docs/operations.md).`,
    flags: {
      output: OUTPUT_TABLE_JSON,
      namespace: { type: "string", value: "name", description: "Quartermaster's namespace", default: "quartermaster" },
      policy: POLICY_FLAG,
      kubeconfig: KUBECONFIG_FLAG,
    },
    after: "Exit codes: 0 healthy, 1 warnings, 2 critical.",
    run: doctorCommand,
  },
  {
    name: "manifests webhooks",
    summary: "print the webhook configurations for a policy",
    description: `Print the Mutating- and ValidatingWebhookConfiguration for the policy (namespaceSelector from the scope,
matchConditions from its GPU patterns, rules for its job kinds); apply with \`| kubectl apply -f -\`.
manifests/base/webhook-configurations.yaml is this for the built-in policy.`,
    flags: { policy: POLICY_FLAG, namespace: { type: "string", value: "name", description: "namespace of the webhook Service", default: "quartermaster" } },
    run: manifestsWebhooksCommand,
  },
  {
    name: "manifests confinement",
    summary: "print the ValidatingAdmissionPolicy confining the reconciler's writes",
    description: `Print the ValidatingAdmissionPolicy and binding that refuse the reconciler's writes (pods, Services, Events,
job kinds, PolicyReports) outside the namespaces in scope; apply with \`| kubectl apply -f -\`.
manifests/base/reconciler-confinement.yaml is this for the built-in policy in namespace quartermaster.`,
    flags: {
      policy: POLICY_FLAG,
      namespace: { type: "string", value: "name", description: "Quartermaster's namespace (the reconciler's ServiceAccount's)", default: "quartermaster" },
    },
    run: manifestsConfinementCommand,
  },
  {
    name: "certs generate",
    summary: "write a CA and a serving certificate for the webhook Service",
    description:
      "Write ca.crt, ca.key, tls.crt and tls.key for the webhook Service. Keys are ECDSA P-256 unless --key-type rsa\n(RSA-2048); a given CA signs with whatever key it has.",
    flags: {
      ...SAN_FLAGS,
      out: { type: "string", value: "dir", description: "directory to write to (required)" },
      days: { type: "string", value: "n", description: "validity of the serving certificate", default: "365" },
      "ca-days": { type: "string", value: "n", description: "validity of a new CA", default: "730" },
      "ca-cert": { type: "string", value: "file", description: "sign with this CA instead of a new one (with --ca-key)" },
      "ca-key": { type: "string", value: "file", description: "its private key" },
      "key-type": { type: "string", value: "type", description: "key of new certificates: ecdsa (P-256) or rsa (2048 bits)", default: "ecdsa" },
    },
    run: certsGenerateCommand,
  },
  {
    name: "certs ensure",
    summary: "create or renew the webhook's CA and serving Secrets when due",
    description: `Create or renew the CA and serving Secrets when due and keep both webhook configurations' caBundle trusting
them (a replaced CA stays in the bundle for the overlap). Run it as a Job and a CronJob
(manifests/overlays/self-managed); a run with nothing due changes nothing. New keys are ECDSA P-256 unless
--key-type rsa; existing ones are kept until their renewal.`,
    flags: {
      ...SAN_FLAGS,
      secret: { type: "string", value: "name", description: "the serving Secret", default: CERTS_DEFAULTS.secret },
      "ca-secret": { type: "string", value: "name", description: "the CA Secret", default: CERTS_DEFAULTS.caSecret },
      "webhook-configuration": WEBHOOK_CONFIGURATION_FLAG,
      days: { type: "string", value: "n", description: "validity of a serving certificate", default: "90" },
      "renew-before-days": { type: "string", value: "n", description: "renew the serving certificate this long before expiry", default: "30" },
      "ca-days": { type: "string", value: "n", description: "validity of a CA", default: "1095" },
      "ca-renew-before-days": { type: "string", value: "n", description: "renew the CA this long before expiry", default: "180" },
      "overlap-hours": { type: "string", value: "n", description: "keep a replaced CA in the caBundle this long", default: "24" },
      "settle-seconds": { type: "string", value: "n", description: "wait after a caBundle change before the serving Secret", default: "5" },
      "key-type": { type: "string", value: "type", description: "key of new certificates: ecdsa (P-256) or rsa (2048 bits)", default: "ecdsa" },
      "dry-run": { type: "boolean", description: "say what would change, change nothing" },
      kubeconfig: KUBECONFIG_FLAG,
    },
    run: certsEnsureCommand,
  },
  {
    name: "certs install",
    summary: "write a CA bundle into every webhook of the webhook configurations",
    description: "Write the CA bundle in --ca into every webhook of the webhook configurations.",
    flags: {
      ca: { type: "string", value: "file", description: "CA bundle (PEM, required)" },
      "webhook-configuration": WEBHOOK_CONFIGURATION_FLAG,
      kubeconfig: KUBECONFIG_FLAG,
    },
    run: certsInstallCommand,
  },
  {
    name: "admit",
    summary: "run objects from files through the webhooks, without a cluster",
    description: `Run pods, pod templates (in Deployments, StatefulSets, Jobs, CronJobs, ...) and training jobs from files
through the same mutating and validating webhooks as the server, without a cluster: prints the outfitted objects
(or their JSON patches) on stdout and every warning and violation, with its field path, on stderr. A training
job among the inputs is what its pods' job lookup finds. Assumes the namespace is opted in.`,
    flags: {
      filename: {
        type: "string",
        short: "f",
        variadic: true,
        value: "file",
        description: "YAML or JSON file (multi-document), or a directory of them (required)",
      },
      policy: POLICY_FLAG,
      output: { type: "string", short: "o", value: "format", description: "yaml, json (a List) or patch (JSON patch per object)", default: "yaml" },
      namespace: { type: "string", short: "n", value: "name", description: "namespace of objects that name none", default: "default" },
      pods: { type: "boolean", description: "also admit every replica pod of each training job, as the training operator creates them" },
    },
    after:
      "Exit codes: 0 every object allowed, 1 something denied (or unreadable input), 2 usage.\nExample: quartermaster admit -f examples/pytorchjob.yaml --pods --policy my-policy.yaml",
    run: (values, args, io) => import("./admit.js").then((m) => m.admitCommand(values, args, io, loadPolicy)),
  },
  {
    name: "test",
    summary: "run declarative policy tests (*.test.yaml) and print a pass/fail table",
    description: `Run the policy tests in the *.test.yaml files under a directory (or one such file): each names resources and a
policy, and what must come of each object (allowed or denied and by which rules, violations, warnings, env
values, tolerations, affinity, labels). The objects go through the same offline pipeline as \`admit\`.
The file format: docs/policy.md, "Policy tests"; examples: examples/policy-tests/.`,
    args: [{ name: "path", description: "directory (searched recursively) or test file" }],
    after: "Exit codes: 0 every expectation holds, 1 one fails or a test file is invalid, 2 usage.",
    run: (values, args, io) => import("./policy-test.js").then((m) => m.policyTestCommand(values, args, io, loadPolicy)),
  },
  MIGRATE_COMMAND,
];

const GROUPS: Record<string, string> = {
  policy: "check and print policies",
  certs: "webhook certificates: generate, ensure (Job/CronJob), install",
  manifests: "render manifests from a policy",
};

/** The package's version: package.json, two levels up from src/cli (three from dist/src/cli). */
async function version(): Promise<string> {
  for (const up of ["../..", "../../.."]) {
    try {
      const pkg = JSON.parse(await readFile(new URL(`${up}/package.json`, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "quartermaster" && pkg.version) return pkg.version;
    } catch {
      // not here; try the next level
    }
  }
  return "unknown";
}

/** Runs one command line; resolves to the process exit code (0 ok, 1 failure, 2 usage). */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const description = "Admission webhooks and reconciler for GPU training clusters on Kubernetes.";
  return runProgram(COMMANDS, argv, io, { name: "quartermaster", version: await version(), description, groups: GROUPS });
}

/**
 * @module
 * `quartermaster serve`: the admission webhooks over HTTPS (or plain HTTP behind a TLS-terminating platform),
 * metrics and probes on their own port, until a signal. Its flags are `dev`'s too (./dev.ts), with other
 * defaults. Everything the server needs is imported when it starts, not with this module: composing the
 * program stays fast.
 */
import { resolve } from "node:path";
import { Option, type Command } from "commander";
import type { LevelWithSilent } from "pino";
import { UsageError } from "../../core/errors.js";
import { createLogger, flushLog } from "../../log.js";
import type { CliDeps } from "../deps.js";
import { integerOption, kubeconfigOption, logLevelOption, policyOption, withDefault } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicyOrReport, ownNamespace } from "../policy-file.js";

/** The flags of `serve` and `dev` as commander parses them. */
export type ServeOptions = {
  tlsCert?: string;
  tlsKey?: string;
  plainHttp?: true;
  port: number;
  host: string;
  metricsPort: number;
  clientCa?: string;
  http2?: true;
  maxConnections: number;
  maxConnectionsPerSource: number;
  maxInflightBodyMib: number;
  policy?: string;
  kubeconfig?: string;
  logLevel: LevelWithSilent;
  drainTimeoutMs: number;
  shutdownDelayMs: number;
  ledgerRefreshSeconds: number;
  namespace?: string;
};

/** What the server starts with: the flags checked together, files still relative to the working directory. */
export interface ServerSettings {
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
export function serveOptions(dev: boolean): Option[] {
  const file = (description: string, devDefault: string): string => (dev ? withDefault(description, devDefault) : description);
  return [
    new Option("--tls-cert <file>", file("serving certificate (PEM); reloaded when it changes", "certs/dev/tls.crt")),
    new Option("--tls-key <file>", file("its private key (PEM)", "certs/dev/tls.key")),
    new Option("--plain-http", "serve HTTP: only behind a platform that terminates TLS itself (e.g. Knative)"),
    integerOption("--port <port>", "webhook port (0: any free port)", { max: 65535, fallback: 8443 }),
    new Option("--host <address>", "address to listen on").default(dev ? "127.0.0.1" : "0.0.0.0", dev ? "127.0.0.1" : "0.0.0.0"),
    integerOption("--metrics-port <port>", "/metrics, /healthz and /readyz over HTTP (0: any free port)", { max: 65535, fallback: 9090 }),
    new Option("--client-ca <file>", "require client certificates signed by this CA (the apiserver's)"),
    new Option("--http2", "offer HTTP/2 by ALPN besides HTTP/1.1"),
    integerOption("--max-connections <n>", "open connections at most (when full, the least useful one is closed)", { min: 1, max: 1_000_000, fallback: 1000 }),
    integerOption("--max-connections-per-source <n>", "open connections at most from one address", { min: 1, max: 1_000_000, fallback: 250 }),
    integerOption("--max-inflight-body-mib <mib>", "request bodies held in memory at once, in MiB", { min: 8, max: 4096, fallback: 32 }),
    policyOption(),
    kubeconfigOption(),
    logLevelOption(),
    integerOption("--drain-timeout-ms <ms>", "on SIGTERM, how long requests in flight may finish", { max: 600_000, fallback: 10_000 }),
    integerOption("--shutdown-delay-ms <ms>", "on SIGTERM, keep serving (unready) this long first", { max: 600_000, fallback: 0 }),
    integerOption("--ledger-refresh-seconds <s>", "how often the capacity check reads the device ledger's totals (0: off)", {
      max: 86_400,
      fallback: dev ? 0 : 60,
    }),
    new Option("--namespace <name>", withDefault("namespace of the device ledger", "the pod's own, else quartermaster")),
  ];
}

/** The server's settings from the flags of `serve` or `dev` (`keyPair`: dev's certificates when none is given). */
export function serverSettings(opts: ServeOptions, keyPair?: { certFile: string; keyFile: string }): ServerSettings {
  const certFile = opts.tlsCert ?? keyPair?.certFile;
  const keyFile = opts.tlsKey ?? keyPair?.keyFile;
  const plainHttp = opts.plainHttp === true;
  if (plainHttp && (opts.tlsCert || opts.tlsKey)) throw new UsageError("serve: --plain-http takes no --tls-cert or --tls-key");
  if (!plainHttp && (!certFile || !keyFile))
    throw new UsageError("serve: --tls-cert and --tls-key are required (or --plain-http behind a TLS-terminating platform)");
  if (plainHttp && opts.clientCa) throw new UsageError("serve: --client-ca needs TLS (it takes no --plain-http)");
  if (opts.port !== 0 && opts.port === opts.metricsPort) throw new UsageError(`serve: --port and --metrics-port must differ (both ${opts.port})`);
  return {
    plainHttp,
    host: opts.host,
    port: opts.port,
    metricsPort: opts.metricsPort,
    clientCaFile: opts.clientCa,
    http2: opts.http2 === true,
    maxConnections: opts.maxConnections,
    maxConnectionsPerSource: opts.maxConnectionsPerSource,
    maxInflightBodyBytes: opts.maxInflightBodyMib * 1024 * 1024,
    certFile: certFile ?? "",
    keyFile: keyFile ?? "",
    policyFile: opts.policy,
    kubeconfig: opts.kubeconfig,
    level: opts.logLevel,
    drainTimeoutMs: opts.drainTimeoutMs,
    shutdownDelayMs: opts.shutdownDelayMs,
    ledgerRefreshSeconds: opts.ledgerRefreshSeconds,
    namespace: opts.namespace,
  };
}

/** Serves until a signal; resolves to the exit code (1: the policy is invalid). */
export async function runServer(flags: ServerSettings, io: CliIo): Promise<number> {
  const log = createLogger(flags.level);
  const policy = await loadPolicyOrReport(flags.policyFile, io);
  if (!policy) return 1;
  const [{ startServer }, { createAdmissionMetrics }, { createWebhooks }, { createJobReader }, { createEventWriter }] = await Promise.all([
    import("../../server/serve.js"),
    import("../../server/metrics.js"),
    import("../../../webhooks/index.js"),
    import("../../kube/jobs.js"),
    import("../../kube/events.js"),
  ]);
  const capacity =
    flags.ledgerRefreshSeconds > 0
      ? (await import("../../run/capacity.js")).ledgerCapacity({
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
  // Events (a refused Kueue admission) go through the same connection settings as the reads, in the background.
  const events = createEventWriter({ kubeconfig: flags.kubeconfig, log });
  const webhooks = createWebhooks({ policy, log, jobs, capacity, events, now: () => new Date() });
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

async function serveCommand(opts: ServeOptions, _args: readonly string[], io: CliIo): Promise<number> {
  return runServer(serverSettings(opts), io);
}

export function registerServe(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("serve")
    .summary("serve the admission webhooks")
    .description(
      `Serve the admission webhooks over HTTPS (--plain-http: over HTTP, only behind a platform that terminates TLS
itself, e.g. Knative); /metrics, /healthz and /readyz over HTTP on --metrics-port. --client-ca: require client
certificates signed by that CA (the apiserver's). The job capacity check reads the device ledger's totals from
--namespace every --ledger-refresh-seconds.`,
    );
  for (const option of serveOptions(false)) cmd.addOption(option);
  deps.action(cmd, serveCommand);
}

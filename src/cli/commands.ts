/**
 * @module
 * `quartermaster` commands: argument parsing and dispatch. Heavy modules (the Kubernetes client,
 * @peculiar/x509) are imported only by the commands that use them, so `serve` starts fast.
 */
import { readFile, mkdir, writeFile, access } from "node:fs/promises";
import { isIP } from "node:net";
import { join, resolve } from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import type { LevelWithSilent } from "pino";
import { PolicyError, UsageError, errorMessage } from "../errors.js";
import { createLogger, LOG_LEVELS, type Logger } from "../log.js";
import { defaultPolicy } from "../policy/load.js";
import type { Policy } from "../policy/types.js";
import type { PassOutcome } from "../reconcile/loop.js";
import type { CliIo } from "./io.js";

export const USAGE = `Usage: quartermaster <command> [options]

Commands:
  serve       (--tls-cert F --tls-key F | --plain-http) [--port 8443] [--host 0.0.0.0] [--policy F] [--kubeconfig F]
              [--metrics-port 9090] [--client-ca F] [--max-connections 1000] [--max-inflight-body-mib 32]
              [--log-level info] [--drain-timeout-ms 10000] [--shutdown-delay-ms 0]
              [--ledger-refresh-seconds 60] [--namespace N] [--http2]
              Serve the admission webhooks over HTTPS (--http2: HTTP/2 offered by ALPN besides HTTP/1.1)
              (--plain-http: over HTTP, only behind a platform
              that terminates TLS itself, e.g. Knative); /metrics, /healthz and /readyz over HTTP on
              --metrics-port (0: any free port). --client-ca: require client certificates signed by F
              (the apiserver's). The job capacity check reads the device ledger's totals from N every
              --ledger-refresh-seconds (0: off).
  dev         [--port 8443] [--policy F]
              Serve on https://127.0.0.1:8443 with development certificates (created in certs/dev on first use).
  policy check F
              Validate a policy file (YAML or JSON) and print every error.
  policy defaults
              Print the built-in policy as JSON.
  reconcile (--once | --schedule CRON [--metrics-port 9091]) [--dry-run] [-o table|json] [--policy F] [--kubeconfig F]
              [--namespace N] [--log-level info]
              Reconcile passes: adopt and release pods and services, per-replica Services, clean up
              finished jobs (CleanPodPolicy, TTL, as each job sets them), write the GPU device ledger; only
              in opted-in namespaces (never the protected ones or N); one at a time cluster-wide (a Lease
              in N, default the pod's own namespace, else quartermaster). --dry-run (with --once) prints
              the plan and what it skips and why, and changes nothing (logs go to stderr). With --schedule,
              pass metrics over HTTP on --metrics-port (/metrics, /healthz, /readyz; 0: off).
  ledger [-o table|json] [--namespace N] [--kubeconfig F]
              Print the GPU device ledger the reconciler keeps in N (checksums verified).
  doctor [-o table|json] [--namespace quartermaster] [--policy F] [--kubeconfig F]
              Check an installation for what would stop admissions or go stale: webhooks and their
              endpoints, caBundle against the served certificate, certificate expiry, namespace selectors,
              side effects, timeouts, the reconciler's last pass, the ledger, RBAC (docs/operations.md).
              Exit 0 healthy, 1 warnings, 2 critical.
  manifests webhooks [--policy F] [--namespace quartermaster]
              Print the Mutating- and ValidatingWebhookConfiguration for the policy (namespaceSelector from
              the scope, matchConditions from its GPU patterns, rules for its job kinds); apply with
              \`| kubectl apply -f -\`. manifests/base/webhook-configurations.yaml is this for the built-in policy.
  certs generate --service S --namespace N --out DIR [--ip IP]... [--dns NAME]... [--days 365]
              [--ca-days 730] [--ca-cert F --ca-key F] [--key-type ecdsa|rsa]
              Write ca.crt, ca.key, tls.crt and tls.key for the webhook Service. Keys are ECDSA P-256
              unless --key-type rsa (RSA-2048); a given CA signs with whatever key it has.
  certs ensure --service S --namespace N [--secret quartermaster-webhook-tls] [--ca-secret quartermaster-webhook-ca]
              [--webhook-configuration quartermaster]... [--ip IP]... [--dns NAME]... [--days 90]
              [--renew-before-days 30] [--ca-days 1095] [--ca-renew-before-days 180] [--overlap-hours 24]
              [--settle-seconds 5] [--key-type ecdsa|rsa] [--dry-run] [--kubeconfig F]
              Create or renew the CA and serving Secrets when due and keep both webhook configurations'
              caBundle trusting them (a replaced CA stays in the bundle for the overlap). Run it as a Job
              and a CronJob (manifests/overlays/self-managed); a run with nothing due changes nothing.
              New keys are ECDSA P-256 unless --key-type rsa; existing ones are kept until renewal.
  certs install --ca F [--webhook-configuration quartermaster]... [--kubeconfig F]
              Write the CA bundle in F into every webhook of the webhook configurations.
`;

type Flags = NonNullable<ParseArgsConfig["options"]>;

function parse(args: string[], options: Flags, positionals = 0): { values: Record<string, unknown>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
  if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument ${parsed.positionals[positionals]}`);
  return parsed as { values: Record<string, unknown>; positionals: string[] };
}

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

/** Reads and checks a policy file, or returns the defaults when `file` is undefined. */
export async function loadPolicy(file: string | undefined, cwd: string): Promise<Policy> {
  if (file === undefined) return defaultPolicy();
  const path = resolve(cwd, file);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new PolicyError(file, [`cannot read: ${errorMessage(err)}`]);
  }
  const { parsePolicy } = await import("../policy/parse.js");
  return parsePolicy(text, file);
}

async function policyCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "defaults") {
    parse(rest, {});
    io.stdout(JSON.stringify(defaultPolicy(), null, 2));
    return 0;
  }
  if (sub !== "check") throw new UsageError("policy: expected 'check F' or 'defaults'");
  const { positionals } = parse(rest, {}, 1);
  const file = positionals[0];
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
async function certsEnsureCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, {
    service: { type: "string" },
    namespace: { type: "string" },
    secret: { type: "string" },
    "ca-secret": { type: "string" },
    "webhook-configuration": { type: "string", multiple: true },
    ip: { type: "string", multiple: true },
    dns: { type: "string", multiple: true },
    days: { type: "string" },
    "renew-before-days": { type: "string" },
    "ca-days": { type: "string" },
    "ca-renew-before-days": { type: "string" },
    "overlap-hours": { type: "string" },
    "settle-seconds": { type: "string" },
    "key-type": { type: "string" },
    "dry-run": { type: "boolean" },
    kubeconfig: { type: "string" },
  });
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
async function certsInstallCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, { ca: { type: "string" }, "webhook-configuration": { type: "string", multiple: true }, kubeconfig: { type: "string" } });
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
    io.stdout(`${config.kind}/${config.name}: ${stale.length > 0 ? `caBundle set (${pems.length} CA(s)) in ${stale.join(", ")}` : "caBundle already up to date"}`);
  }
  return 0;
}

/** --key-type of the certs commands: ecdsa (P-256, the default) or rsa (2048 bits). */
function keyTypeFlag(command: string, values: Record<string, unknown>): "ecdsa" | "rsa" {
  const v = values["key-type"] ?? "ecdsa";
  if (v !== "ecdsa" && v !== "rsa") throw new UsageError(`${command}: --key-type must be ecdsa or rsa, got ${JSON.stringify(v)}`);
  return v;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_NAME = /^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;

/**
 * --service and --namespace (DNS-1123 labels), --ip (addresses) and --dns (names, a leading `*.` allowed) of
 * the certs commands: a usage error here rather than a library error while signing or a certificate no
 * client accepts.
 */
function checkSanFlags(command: string, values: Record<string, unknown>): void {
  for (const flag of ["service", "namespace"]) {
    if (!DNS_LABEL.test(values[flag] as string)) throw new UsageError(`${command}: --${flag} must be a DNS-1123 label, got ${JSON.stringify(values[flag])}`);
  }
  for (const ip of (values.ip as string[] | undefined) ?? []) {
    if (!isIP(ip)) throw new UsageError(`${command}: --ip ${JSON.stringify(ip)} is not an IPv4 or IPv6 address`);
  }
  for (const name of (values.dns as string[] | undefined) ?? []) {
    if (name.length > 253 || !DNS_NAME.test(name)) throw new UsageError(`${command}: --dns ${JSON.stringify(name)} is not a DNS name (lower-case RFC 1123, a leading "*." allowed)`);
  }
}

async function certsCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "ensure") return certsEnsureCommand(rest, io);
  if (sub === "install") return certsInstallCommand(rest, io);
  if (sub !== "generate") throw new UsageError("certs: expected 'generate', 'ensure' or 'install'");
  const { values } = parse(rest, {
    service: { type: "string" },
    namespace: { type: "string" },
    out: { type: "string" },
    ip: { type: "string", multiple: true },
    dns: { type: "string", multiple: true },
    days: { type: "string" },
    "ca-days": { type: "string" },
    "ca-cert": { type: "string" },
    "ca-key": { type: "string" },
    "key-type": { type: "string" },
  });
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

async function writeCertificates(
  dir: string,
  certs: { ca: { certPem: string; keyPem: string }; certPem: string; keyPem: string },
): Promise<void> {
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

const SERVE_FLAGS: Flags = {
  host: { type: "string" },
  port: { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "plain-http": { type: "boolean" },
  "metrics-port": { type: "string" },
  "client-ca": { type: "string" },
  http2: { type: "boolean" },
  "max-connections": { type: "string" },
  "max-inflight-body-mib": { type: "string" },
  policy: { type: "string" },
  kubeconfig: { type: "string" },
  "log-level": { type: "string" },
  "drain-timeout-ms": { type: "string" },
  "shutdown-delay-ms": { type: "string" },
  "ledger-refresh-seconds": { type: "string" },
  namespace: { type: "string" },
};

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
      ? (await import("../kube/capacity.js")).ledgerCapacity({ kubeconfig: flags.kubeconfig, namespace: await ownNamespace(flags.namespace), intervalMs: flags.ledgerRefreshSeconds * 1000, log })
      : undefined;
  const metrics = createAdmissionMetrics({ timeoutSeconds: policy.webhook.timeoutSeconds, processMetrics: true, ledger: capacity && (() => capacity.reading()) });
  const jobs = createJobReader({ kubeconfig: flags.kubeconfig, ttlMs: policy.clusterSpec.jobCacheTtlMs, observe: (result, seconds) => metrics.jobLookup(result, seconds) });
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
    maxInflightBodyBytes: flags.maxInflightBodyBytes,
    webhooks,
    metrics,
    log,
    drainTimeoutMs: flags.drainTimeoutMs,
    shutdownDelayMs: flags.shutdownDelayMs,
  });
  io.stdout(`quartermaster: serving ${server.url} (${Object.keys(webhooks).map((p) => p.slice(1)).join(", ")}); metrics http://${flags.host.includes(":") ? `[${flags.host}]` : flags.host}:${server.metricsPort}/metrics`);
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
  if (!plainHttp && (!certFile || !keyFile)) throw new UsageError("serve: --tls-cert and --tls-key are required (or --plain-http behind a TLS-terminating platform)");
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

async function serveCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, SERVE_FLAGS);
  return runServer(serveFlags(values, {}), io);
}

/** `npm start`: development certificates in certs/dev, created on first use, and 127.0.0.1:8443. */
async function devCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, SERVE_FLAGS);
  const dir = resolve(io.cwd, "certs/dev");
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  const exists = (file: string): Promise<boolean> => access(file).then(() => true, () => false);
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

const SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** Quartermaster's namespace: the flag, else the pod's own (in cluster), else `quartermaster`. */
async function ownNamespace(flag: string | undefined): Promise<string> {
  return flag ?? (await readFile(SA_NAMESPACE_FILE, "utf8").then((s) => s.trim(), () => "quartermaster"));
}

async function reconcileCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, {
    once: { type: "boolean" },
    schedule: { type: "string" },
    "dry-run": { type: "boolean" },
    output: { type: "string", short: "o" },
    policy: { type: "string" },
    kubeconfig: { type: "string" },
    namespace: { type: "string" },
    "log-level": { type: "string" },
    "metrics-port": { type: "string" },
  });
  const schedule = values.schedule as string | undefined;
  if (Boolean(values.once) === (schedule !== undefined)) throw new UsageError("reconcile: give exactly one of --once and --schedule CRON");
  // Resident (--schedule): /metrics on 9091 by default (9090 is the webhook's, should both run on one host); 0 turns it off.
  // One pass (--once, the CronJob) has nothing a scrape could catch: its failures show as failed Jobs.
  const metricsPort = intFlag(values, "metrics-port", schedule === undefined ? 0 : RECONCILER_METRICS_PORT, 0, 65535);
  if (schedule === undefined && metricsPort !== 0) throw new UsageError("reconcile: --metrics-port goes with --schedule");
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
    const lease = await acquireLease({ kubeconfig, namespace, name: "quartermaster-reconciler", holder, durationSeconds: policy.reconciler.passLeaseSeconds, now: () => new Date() });
    if ("busy" in lease) {
      log.info({ holder: lease.busy.holder, until: lease.busy.until.toISOString() }, "reconcile: another instance holds the lease; pass skipped");
      return { leaseBusy: true };
    }
    try {
      return { actions: await runPass({ cluster, policy, log, now: () => new Date(), dryRun, namespace }) };
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
    import("../server/metrics.js"),
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

/** Runs one command line; resolves to the process exit code. */
async function ledgerCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, { output: { type: "string", short: "o" }, namespace: { type: "string" }, kubeconfig: { type: "string" } });
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
async function doctorCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, {
    output: { type: "string", short: "o" },
    namespace: { type: "string" },
    policy: { type: "string" },
    kubeconfig: { type: "string" },
  });
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
async function manifestsWebhooksCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args, { policy: { type: "string" }, namespace: { type: "string" } });
  const namespace = (values.namespace as string | undefined) ?? "quartermaster";
  // A DNS-1123 label, as a namespace name must be; anything else would only fail at apply time.
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) throw new UsageError(`--namespace must be a namespace name (DNS-1123 label), got ${JSON.stringify(namespace)}`);
  const policy = await loadPolicyOrReport(values.policy as string | undefined, io);
  if (!policy) return 1;
  const { webhookConfigurationsYaml } = await import("../manifests/webhooks.js");
  io.stdout((await webhookConfigurationsYaml(policy, { namespace })).trimEnd());
  return 0;
}

async function manifestsCommand(args: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "webhooks") return manifestsWebhooksCommand(rest, io);
  throw new UsageError("manifests: expected 'webhooks'");
}

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case "serve":
        return await serveCommand(args, io);
      case "dev":
        return await devCommand(args, io);
      case "policy":
        return await policyCommand(args, io);
      case "certs":
        return await certsCommand(args, io);
      case "ledger":
        return await ledgerCommand(args, io);
      case "doctor":
        return await doctorCommand(args, io);
      case "reconcile":
        return await reconcileCommand(args, io);
      case "manifests":
        return await manifestsCommand(args, io);
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.stdout(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`quartermaster: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    io.stderr(`quartermaster: ${errorMessage(err)}`);
    return 1;
  }
}

/** The policy at `file` (the built-in one without), or undefined once its problems are written to stderr. */
async function loadPolicyOrReport(file: string | undefined, io: CliIo): Promise<Policy | undefined> {
  try {
    return await loadPolicy(file, io.cwd);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    io.stderr(err.message);
    return undefined;
  }
}

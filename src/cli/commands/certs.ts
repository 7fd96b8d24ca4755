/**
 * @module
 * `quartermaster certs generate|ensure|install`: the webhook's certificates. `generate` writes a CA and a
 * serving certificate as files; `ensure` (a Job and a CronJob) creates or renews the CA and serving Secrets
 * when due and keeps the webhook configurations' caBundle trusting them (src/certs/ensure.ts); `install`
 * writes a CA bundle from a file into the webhook configurations. @peculiar/x509 and the Kubernetes client
 * are imported when a command runs.
 */
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join, resolve } from "node:path";
import { Option, type Command } from "commander";
import { UsageError } from "../../core/errors.js";
import { DNS_1123_LABEL, DNS_SAN } from "../../core/names.js";
import { writeCertificates } from "../cert-files.js";
import type { CliDeps } from "../deps.js";
import { INTERACTIVE_REQUEST_TIMEOUT_MS, collect, integerOption, kubeconfigOption, oneOf, requestTimeoutOption, withDefault } from "../flags.js";
import type { CliIo } from "../io.js";

const CERTS_DEFAULTS = { secret: "quartermaster-webhook-tls", caSecret: "quartermaster-webhook-ca", webhookConfiguration: "quartermaster" };

type KeyType = "ecdsa" | "rsa";

/** The subject alternative names' flags, common to `generate` and `ensure`. */
type SanOptions = { service?: string; namespace?: string; ip?: string[]; dns?: string[] };

type GenerateOptions = SanOptions & { out?: string; days: number; caDays: number; caCert?: string; caKey?: string; keyType: KeyType };

type EnsureOptions = SanOptions & {
  secret: string;
  caSecret: string;
  webhookConfiguration?: string[];
  days: number;
  renewBeforeDays: number;
  caDays: number;
  caRenewBeforeDays: number;
  overlapHours: number;
  settleSeconds: number;
  keyType: KeyType;
  dryRun?: true;
  kubeconfig?: string;
  requestTimeout?: number;
};

type InstallOptions = { ca?: string; webhookConfiguration?: string[]; kubeconfig?: string; requestTimeout?: number };

/** The value of a required flag, else a usage error. */
function required(command: string, flag: string, value: string | undefined): string {
  if (!value) throw new UsageError(`${command}: --${flag} is required`);
  return value;
}

/**
 * --service and --namespace (DNS-1123 labels, both required), --ip (addresses) and --dns (names, a leading
 * `*.` allowed) of the certs commands: a usage error here rather than a library error while signing or a
 * certificate no client accepts.
 */
function sanFlags(command: string, opts: SanOptions): { service: string; namespace: string; ips: string[]; dnsNames: string[] } {
  const names = { service: opts.service, namespace: opts.namespace };
  for (const [flag, value] of Object.entries(names)) {
    if (!DNS_1123_LABEL.test(value ?? "")) throw new UsageError(`${command}: --${flag} must be a DNS-1123 label, got ${JSON.stringify(value)}`);
  }
  const ips = opts.ip ?? [];
  for (const ip of ips) {
    if (!isIP(ip)) throw new UsageError(`${command}: --ip ${JSON.stringify(ip)} is not an IPv4 or IPv6 address`);
  }
  const dnsNames = opts.dns ?? [];
  for (const name of dnsNames) {
    if (name.length > 253 || !DNS_SAN.test(name))
      throw new UsageError(`${command}: --dns ${JSON.stringify(name)} is not a DNS name (lower-case RFC 1123, a leading "*." allowed)`);
  }
  return { service: opts.service ?? "", namespace: opts.namespace ?? "", ips, dnsNames };
}

async function certsGenerateCommand(opts: GenerateOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const command = "certs generate";
  required(command, "service", opts.service);
  required(command, "namespace", opts.namespace);
  const out = resolve(io.cwd, required(command, "out", opts.out));
  if (Boolean(opts.caCert) !== Boolean(opts.caKey)) throw new UsageError("certs generate: --ca-cert and --ca-key go together");
  const sans = sanFlags(command, opts);
  const { generateCertificates } = await import("../../certs/generate.js");
  const ca =
    opts.caCert && opts.caKey
      ? { certPem: await readFile(resolve(io.cwd, opts.caCert), "utf8"), keyPem: await readFile(resolve(io.cwd, opts.caKey), "utf8") }
      : undefined;
  if (ca) {
    // The checks `certs ensure` makes before it keeps a stored CA (src/certs/plan.ts).
    const { caProblem } = await import("../../certs/plan.js");
    const problem = caProblem(ca, new Date());
    if (problem) throw new UsageError(`certs generate: --ca-cert ${opts.caCert} with --ca-key ${opts.caKey}: ${problem}`);
  }
  const certs = await generateCertificates({ ...sans, days: opts.days, caDays: opts.caDays, ca, keyType: opts.keyType });
  await writeCertificates(out, certs);
  io.stdout(`wrote ${join(out, "ca.crt")}, ca.key, tls.crt, tls.key (SANs: ${[...certs.dnsNames, ...certs.ips].join(", ")})`);
  return 0;
}

/** `certs ensure`: the Secrets and caBundles brought up to date in the cluster (src/certs/ensure.ts). */
async function certsEnsureCommand(opts: EnsureOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const command = "certs ensure";
  required(command, "service", opts.service);
  required(command, "namespace", opts.namespace);
  const { service, namespace, ips, dnsNames } = sanFlags(command, opts);
  if (opts.renewBeforeDays >= opts.days) throw new UsageError("certs ensure: --renew-before-days must be less than --days");
  if (opts.caRenewBeforeDays >= opts.caDays) throw new UsageError("certs ensure: --ca-renew-before-days must be less than --ca-days");
  const configs = opts.webhookConfiguration ?? [CERTS_DEFAULTS.webhookConfiguration];
  const [{ ensureCertificates }, { connectCertStore }] = await Promise.all([import("../../certs/ensure.js"), import("../../kube/certs.js")]);
  const store = await connectCertStore({
    kubeconfig: opts.kubeconfig,
    requestTimeoutMs: opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS,
    namespace,
    mutating: configs,
    validating: configs,
  });
  const day = 86400_000;
  const dryRun = opts.dryRun === true;
  const steps = await ensureCertificates(store, {
    service,
    namespace,
    servingSecret: opts.secret,
    caSecret: opts.caSecret,
    dnsNames,
    ips,
    days: opts.days,
    caDays: opts.caDays,
    renewBeforeMs: opts.renewBeforeDays * day,
    caRenewBeforeMs: opts.caRenewBeforeDays * day,
    overlapMs: opts.overlapHours * 3600_000,
    settleMs: opts.settleSeconds * 1000,
    keyType: opts.keyType,
    dryRun,
    now: () => new Date(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  });
  const verb = dryRun ? "would change" : "changed";
  for (const step of steps) io.stdout(`${step.what} ${step.target}: ${step.changed ? verb : "unchanged"}: ${step.detail}`);
  return 0;
}

/** `certs install`: the CA bundle in a file written into every webhook of the webhook configurations. */
async function certsInstallCommand(opts: InstallOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const file = required("certs install", "ca", opts.ca);
  const bundle = await readFile(resolve(io.cwd, file), "utf8");
  const [{ splitPem, sameBundle }, { connectCertStore }] = await Promise.all([import("../../certs/plan.js"), import("../../kube/certs.js")]);
  const pems = splitPem(bundle);
  if (pems.length === 0) throw new UsageError(`certs install: ${file} holds no PEM certificate`);
  const configs = opts.webhookConfiguration ?? [CERTS_DEFAULTS.webhookConfiguration];
  const store = await connectCertStore({
    kubeconfig: opts.kubeconfig,
    requestTimeoutMs: opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS,
    namespace: "",
    mutating: configs,
    validating: configs,
  });
  for (const config of await store.readWebhookConfigurations()) {
    const stale = config.webhooks.filter((w) => !sameBundle(w.caBundle, pems)).map((w) => w.name);
    if (stale.length > 0) await store.writeCaBundle(config, stale, pems.join(""));
    io.stdout(
      `${config.kind}/${config.name}: ${stale.length > 0 ? `caBundle set (${pems.length} CA(s)) in ${stale.join(", ")}` : "caBundle already up to date"}`,
    );
  }
  return 0;
}

/** --service, --namespace, --ip and --dns. */
function sanOptions(): Option[] {
  return [
    new Option("--service <name>", "the webhook Service (required)"),
    new Option("--namespace <name>", "its namespace (required)"),
    new Option("--ip <address>", "an IP address SAN (repeatable)").argParser(collect),
    new Option("--dns <name>", "a DNS name SAN, a leading *. allowed (repeatable)").argParser(collect),
  ];
}

/** --key-type of `command`: ecdsa (P-256, the default) or rsa (2048 bits). */
function keyTypeOption(command: string): Option {
  return new Option("--key-type <type>", "key of new certificates: ecdsa (P-256) or rsa (2048 bits)")
    .argParser(oneOf<KeyType>(["ecdsa", "rsa"], (v) => `${command}: --key-type must be ecdsa or rsa, got ${JSON.stringify(v)}`))
    .default("ecdsa", "ecdsa");
}

function webhookConfigurationOption(): Option {
  const description = withDefault("Mutating- and ValidatingWebhookConfiguration to keep (repeatable)", CERTS_DEFAULTS.webhookConfiguration);
  return new Option("--webhook-configuration <name>", description).argParser(collect);
}

const addOptions = (cmd: Command, options: readonly Option[]): Command => options.reduce((c, o) => c.addOption(o), cmd);

export function registerCerts(program: Command, deps: CliDeps): void {
  const certs = deps.group(program, "certs", "webhook certificates: generate, ensure (Job/CronJob), install");

  const generate = certs
    .command("generate")
    .summary("write a CA and a serving certificate for the webhook Service")
    .description(
      "Write ca.crt, ca.key, tls.crt and tls.key for the webhook Service. Keys are ECDSA P-256 unless --key-type rsa\n(RSA-2048); a given CA signs with whatever key it has.",
    );
  addOptions(generate, [
    ...sanOptions(),
    new Option("--out <dir>", "directory to write to (required)"),
    integerOption("--days <n>", "validity of the serving certificate", { min: 1, max: 3650, fallback: 365 }),
    integerOption("--ca-days <n>", "validity of a new CA", { min: 1, max: 7300, fallback: 730 }),
    new Option("--ca-cert <file>", "sign with this CA instead of a new one (with --ca-key)"),
    new Option("--ca-key <file>", "its private key"),
    keyTypeOption("certs generate"),
  ]);
  deps.action(generate, certsGenerateCommand);

  const ensure = certs
    .command("ensure")
    .summary("create or renew the webhook's CA and serving Secrets when due")
    .description(
      `Create or renew the CA and serving Secrets when due and keep both webhook configurations' caBundle trusting
them (a replaced CA stays in the bundle for the overlap). Run it as a Job and a CronJob
(manifests/overlays/self-managed); a run with nothing due changes nothing. New keys are ECDSA P-256 unless
--key-type rsa; existing ones are kept until their renewal.`,
    );
  addOptions(ensure, [
    ...sanOptions(),
    new Option("--secret <name>", "the serving Secret").default(CERTS_DEFAULTS.secret, CERTS_DEFAULTS.secret),
    new Option("--ca-secret <name>", "the CA Secret").default(CERTS_DEFAULTS.caSecret, CERTS_DEFAULTS.caSecret),
    webhookConfigurationOption(),
    integerOption("--days <n>", "validity of a serving certificate", { min: 1, max: 3650, fallback: 90 }),
    integerOption("--renew-before-days <n>", "renew the serving certificate this long before expiry", { max: 3650, fallback: 30 }),
    integerOption("--ca-days <n>", "validity of a CA", { min: 1, max: 7300, fallback: 1095 }),
    integerOption("--ca-renew-before-days <n>", "renew the CA this long before expiry", { max: 7300, fallback: 180 }),
    integerOption("--overlap-hours <n>", "keep a replaced CA in the caBundle this long", { max: 24 * 365, fallback: 24 }),
    integerOption("--settle-seconds <n>", "wait after a caBundle change before the serving Secret", { max: 600, fallback: 5 }),
    keyTypeOption("certs ensure"),
    new Option("--dry-run", "say what would change, change nothing"),
    kubeconfigOption(),
    requestTimeoutOption(),
  ]);
  deps.action(ensure, certsEnsureCommand);

  const install = certs
    .command("install")
    .summary("write a CA bundle into every webhook of the webhook configurations")
    .description("Write the CA bundle in --ca into every webhook of the webhook configurations.");
  addOptions(install, [new Option("--ca <file>", "CA bundle (PEM, required)"), webhookConfigurationOption(), kubeconfigOption(), requestTimeoutOption()]);
  deps.action(install, certsInstallCommand);
}

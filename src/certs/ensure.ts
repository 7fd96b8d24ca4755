/**
 * @module
 * `quartermaster certs ensure`: brings the CA Secret, the serving Secret and the webhook configurations'
 * caBundles to what `plan.ts` decides, through a `CertStore` (the cluster in src/kube/certs.ts, memory in
 * tests). Safe to run at any time and any number of times (a Job at install, a CronJob after): a run with
 * nothing due changes nothing.
 *
 * Order matters, so that no step can leave the apiserver distrusting what a webhook pod presents:
 * 1. the CA Secret (a new CA is stored before anything is signed with it);
 * 2. the caBundles (the new CA is trusted before any server can present a certificate it issued, and
 *    the old CA stays while the overlap lasts);
 * 3. after `settleMs` when a CA was added, so every apiserver has seen the new bundle, the serving Secret.
 * A run that stops between two steps is completed by the next one.
 */
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, DEFAULT_KEY_TYPE, issueCertificate, serviceDnsNames, type CertificateAuthority, type KeyType } from "./generate.js";
import { decideBundle, decideCa, decideServing, sameBundle, splitPem, type KeyPairPem, type RenewalPolicy } from "./plan.js";

/** A Secret's data, decoded to text; `version` is its resourceVersion (for an optimistic update). */
export interface StoredSecret {
  data: Record<string, string>;
  version?: string;
}

/** One webhook configuration and the caBundle (PEM text, "" when unset) of each of its webhooks. */
export interface StoredWebhookConfiguration {
  kind: "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration";
  name: string;
  webhooks: Array<{ name: string; caBundle: string }>;
}

export interface CertStore {
  readSecret(name: string): Promise<StoredSecret | undefined>;
  /** Creates the Secret (no `previous`) or replaces it, failing if it changed since `previous` was read. */
  writeSecret(name: string, type: string, data: Record<string, string>, previous?: StoredSecret): Promise<void>;
  /** The webhook configurations to keep trusting the CA; a missing one is an error. */
  readWebhookConfigurations(): Promise<StoredWebhookConfiguration[]>;
  /** Sets the caBundle of the named webhooks of one configuration. */
  writeCaBundle(config: Pick<StoredWebhookConfiguration, "kind" | "name">, webhooks: readonly string[], bundle: string): Promise<void>;
}

export interface EnsureOptions extends RenewalPolicy {
  service: string;
  namespace: string;
  /** The serving Secret the webhook pods mount (tls.crt, tls.key, ca.crt). */
  servingSecret: string;
  /** The CA Secret (ca.crt, ca.key), read by this command only. */
  caSecret: string;
  days: number;
  caDays: number;
  /** Wait this long after adding a CA to the caBundles before writing a certificate it issued. */
  settleMs: number;
  dryRun: boolean;
  now: () => Date;
  sleep: (ms: number) => Promise<void>;
  /** Key algorithm of new keys (a new CA's and a new serving certificate's); default ECDSA P-256. */
  keyType?: KeyType;
  /** Certificate generation (the real one unless a test passes its own). */
  generate?: { ca(days: number, now: Date): Promise<CertificateAuthority>; leaf(ca: CertificateAuthority, days: number, now: Date): Promise<KeyPairPem> };
}

/** One line of what a run did (or, dry, would do). */
export interface EnsureStep {
  what: "ca" | "caBundle" | "serving";
  target: string;
  changed: boolean;
  detail: string;
}

const pairFrom = (secret: StoredSecret | undefined, cert: string, key: string): KeyPairPem | undefined =>
  secret?.data[cert] && secret.data[key] ? { certPem: secret.data[cert], keyPem: secret.data[key] } : undefined;

const describe = (pem: string): string => {
  const c = new X509Certificate(pem);
  return `${c.subject.replace(/^CN=/, "")} (until ${new Date(c.validTo).toISOString().slice(0, 10)})`;
};

/** Step 2: each webhook configuration whose caBundles differ from `bundle` gets it; true when a CA was added. */
async function writeBundles(
  store: CertStore,
  configs: Awaited<ReturnType<CertStore["readWebhookConfigurations"]>>,
  bundle: ReturnType<typeof decideBundle>,
  opts: EnsureOptions,
  steps: EnsureStep[],
): Promise<boolean> {
  const bundleText = bundle.pems.join("");
  let added = false;
  for (const config of configs) {
    const stale = config.webhooks.filter((w) => !sameBundle(w.caBundle, bundle.pems));
    const target = `${config.kind}/${config.name}`;
    if (stale.length === 0) {
      steps.push({ what: "caBundle", target, changed: false, detail: `${bundle.pems.length} CA(s), up to date` });
      continue;
    }
    const had = new Set(stale.flatMap((w) => splitPem(w.caBundle)).map((p) => new X509Certificate(p).fingerprint256));
    const adds = bundle.pems.filter((p) => !had.has(new X509Certificate(p).fingerprint256));
    added ||= adds.length > 0;
    if (!opts.dryRun)
      await store.writeCaBundle(
        config,
        stale.map((w) => w.name),
        bundleText,
      );
    const parts = [
      `${bundle.pems.length} CA(s) in ${stale.map((w) => w.name).join(", ")}`,
      ...adds.map((p) => `added ${describe(p)}`),
      ...bundle.dropped.map((d) => `dropped ${d.subject.replace(/^CN=/, "")}: ${d.reason}`),
    ];
    steps.push({ what: "caBundle", target, changed: true, detail: parts.join("; ") });
  }
  return added;
}

export async function ensureCertificates(store: CertStore, opts: EnsureOptions): Promise<EnsureStep[]> {
  const now = opts.now();
  const dnsNames = [...new Set([...serviceDnsNames(opts.service, opts.namespace), ...opts.dnsNames])];
  const policy: RenewalPolicy = { ...opts, dnsNames };
  const keyType = opts.keyType ?? DEFAULT_KEY_TYPE;
  const gen = opts.generate ?? {
    ca: (days: number, at: Date) => createCertificateAuthority("quartermaster-ca", days, at, keyType),
    leaf: (ca: CertificateAuthority, days: number, at: Date) =>
      issueCertificate({
        ca,
        commonName: `${opts.service}.${opts.namespace}.svc`,
        dnsNames,
        ips: [...opts.ips],
        usage: "server",
        days,
        now: at,
        keyType,
        notAfterCap: new Date(new X509Certificate(ca.certPem).validTo),
      }),
  };
  const steps: EnsureStep[] = [];

  const [caSecret, servingSecret, configs] = await Promise.all([
    store.readSecret(opts.caSecret),
    store.readSecret(opts.servingSecret),
    store.readWebhookConfigurations(),
  ]);

  // 1. The CA.
  let ca = pairFrom(caSecret, "ca.crt", "ca.key");
  const caDecision = decideCa(ca, policy, now);
  if (caDecision.action === "replace") {
    ca = await gen.ca(opts.caDays, now);
    if (!opts.dryRun) await store.writeSecret(opts.caSecret, "Opaque", { "ca.crt": ca.certPem, "ca.key": ca.keyPem }, caSecret);
  }
  steps.push({
    what: "ca",
    target: `Secret/${opts.caSecret}`,
    changed: caDecision.action === "replace",
    detail: caDecision.action === "replace" ? `new CA ${describe(ca!.certPem)}: ${caDecision.reason}` : caDecision.reason,
  });
  const currentCa = ca!;

  // 2. The caBundles.
  const serving = pairFrom(servingSecret, "tls.crt", "tls.key");
  const candidates = [...configs.flatMap((c) => c.webhooks.map((w) => w.caBundle)), servingSecret?.data["ca.crt"] ?? ""];
  const bundle = decideBundle({ caPem: currentCa.certPem, candidates, servingCertPem: serving?.certPem }, policy, now);
  const added = await writeBundles(store, configs, bundle, opts, steps);

  // 3. The serving certificate.
  const servingDecision = decideServing(serving, currentCa.certPem, policy, now);
  const caInSecret = servingSecret?.data["ca.crt"] ?? "";
  if (servingDecision.action === "replace" || !sameBundle(caInSecret, [currentCa.certPem])) {
    const pair = servingDecision.action === "replace" ? await gen.leaf(currentCa, opts.days, now) : serving!;
    if (!opts.dryRun) {
      if (added && opts.settleMs > 0) await opts.sleep(opts.settleMs);
      await store.writeSecret(
        opts.servingSecret,
        "kubernetes.io/tls",
        { "tls.crt": pair.certPem, "tls.key": pair.keyPem, "ca.crt": currentCa.certPem },
        servingSecret,
      );
    }
    const detail =
      servingDecision.action === "replace"
        ? `new certificate until ${new X509Certificate(pair.certPem).validTo}: ${servingDecision.reason}`
        : "ca.crt updated to the current CA";
    steps.push({ what: "serving", target: `Secret/${opts.servingSecret}`, changed: true, detail });
  } else {
    steps.push({ what: "serving", target: `Secret/${opts.servingSecret}`, changed: false, detail: servingDecision.reason });
  }
  return steps;
}

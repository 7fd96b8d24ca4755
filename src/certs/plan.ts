/**
 * @module
 * What `quartermaster certs ensure` does, decided without I/O: given the CA, the serving key pair, the
 * webhooks' caBundles and the time, whether to create a CA, issue a serving certificate, and which CAs the
 * caBundle must hold.
 *
 * Rotation never breaks admission:
 * - a new serving certificate is issued well before expiry (`renewBeforeMs`), under the same CA, so the
 *   caBundle does not change and servers pick the new pair up from their Secret volume;
 * - a new CA is created well before the old one expires (`caRenewBeforeMs`); the old CA stays in the caBundle
 *   for `overlapMs` after the new one is issued, and always while the serving certificate in the Secret is
 *   still one it issued, because webhook pods keep presenting the old certificate until their Secret
 *   volume catches up (about a minute) and they reload it.
 */
import { X509Certificate } from "node:crypto";
import { BACKDATE_MS } from "./generate.js";
import { issuedBy, keyMatches, parseCertificate as parse, splitPem, subjectAltNames } from "./x509.js";

export { splitPem } from "./x509.js";

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface RenewalPolicy {
  /** DNS and IP SANs the serving certificate must carry. */
  dnsNames: readonly string[];
  ips: readonly string[];
  /** Issue a new serving certificate once it expires within this long. */
  renewBeforeMs: number;
  /** Create a new CA once the current one expires within this long. */
  caRenewBeforeMs: number;
  /** How long a replaced CA stays in the caBundle after its successor was issued. */
  overlapMs: number;
}

export type CertDecision = { action: "keep"; reason: string } | { action: "replace"; reason: string };

const day = (d: Date): string => d.toISOString().replace(/\.\d+Z$/, "Z");

/** When a certificate was issued: its notBefore plus the back-dating `generate` applies. */
export function issuedAt(cert: X509Certificate): Date {
  return new Date(new Date(cert.validFrom).getTime() + BACKDATE_MS);
}

/**
 * Why `ca` cannot sign certificates at `now`, or undefined when it can: it must parse, be a CA
 * (basicConstraints CA:TRUE), match its key, and be within its validity. `certs ensure` replaces such a CA;
 * `certs generate --ca-cert --ca-key` refuses it.
 */
export function caProblem(ca: KeyPairPem, now: Date): string | undefined {
  const cert = parse(ca.certPem);
  if (!cert) return "the CA certificate does not parse";
  if (!cert.ca) return "the CA certificate is not a CA";
  if (!keyMatches(cert, ca.keyPem)) return "the CA key does not match its certificate";
  const notAfter = new Date(cert.validTo);
  if (notAfter.getTime() <= now.getTime()) return `the CA expired at ${day(notAfter)}`;
  const notBefore = new Date(cert.validFrom);
  if (notBefore.getTime() > now.getTime()) return `the CA is not valid before ${day(notBefore)}`;
  return undefined;
}

/** Keep the CA, or replace it with a new one (missing, unreadable, not a CA, expired or due for renewal). */
export function decideCa(ca: KeyPairPem | undefined, policy: Pick<RenewalPolicy, "caRenewBeforeMs">, now: Date): CertDecision {
  if (!ca) return { action: "replace", reason: "no CA yet" };
  const problem = caProblem(ca, now);
  if (problem) return { action: "replace", reason: problem };
  const notAfter = new Date(new X509Certificate(ca.certPem).validTo);
  if (notAfter.getTime() - now.getTime() <= policy.caRenewBeforeMs) {
    return { action: "replace", reason: `the CA expires at ${day(notAfter)}, within the renew-before window` };
  }
  return { action: "keep", reason: `the CA is valid until ${day(notAfter)}` };
}

/**
 * Keep the serving certificate, or issue a new one under `caPem`: missing, unreadable, key mismatch, not
 * issued by the current CA, a wanted SAN missing, expired or due for renewal.
 */
export function decideServing(serving: KeyPairPem | undefined, caPem: string, policy: RenewalPolicy, now: Date): CertDecision {
  if (!serving) return { action: "replace", reason: "no serving certificate yet" };
  const cert = parse(serving.certPem);
  if (!cert) return { action: "replace", reason: "the serving certificate does not parse" };
  if (!keyMatches(cert, serving.keyPem)) return { action: "replace", reason: "the serving key does not match its certificate" };
  const ca = parse(caPem);
  if (!ca || !issuedBy(cert, ca)) return { action: "replace", reason: "the serving certificate was not issued by the current CA" };
  const have = new Set(subjectAltNames(cert));
  const missing = [...policy.dnsNames.map((d) => `DNS:${d}`), ...policy.ips.map((ip) => `IP Address:${ip}`)].filter((s) => !have.has(s));
  if (missing.length > 0) return { action: "replace", reason: `the serving certificate lacks ${missing.join(", ")}` };
  const notAfter = new Date(cert.validTo);
  if (notAfter.getTime() <= now.getTime()) return { action: "replace", reason: `the serving certificate expired at ${day(notAfter)}` };
  if (notAfter.getTime() - now.getTime() <= policy.renewBeforeMs) {
    return { action: "replace", reason: `the serving certificate expires at ${day(notAfter)}, within the renew-before window` };
  }
  return { action: "keep", reason: `the serving certificate is valid until ${day(notAfter)}` };
}

export interface BundlePlan {
  /** The caBundle every webhook should carry: the current CA first, then the CAs kept for the overlap. */
  pems: string[];
  /** CAs found in a caBundle or the serving Secret that are left out, each with why. */
  dropped: Array<{ subject: string; fingerprint: string; reason: string }>;
}

/**
 * The caBundle: the current CA, plus each other CA found in the current caBundles or the serving Secret
 * that has not expired and is still needed: it issued the serving certificate the Secret holds now (pods
 * may still present it), or the current CA was issued less than `overlapMs` ago.
 */
export function decideBundle(
  input: { caPem: string; candidates: readonly string[]; servingCertPem?: string },
  policy: Pick<RenewalPolicy, "overlapMs">,
  now: Date,
): BundlePlan {
  const current = parse(input.caPem);
  if (!current) throw new Error("decideBundle: the current CA does not parse");
  const serving = input.servingCertPem === undefined ? undefined : parse(input.servingCertPem);
  const overlapEnds = issuedAt(current).getTime() + policy.overlapMs;
  const seen = new Set([current.fingerprint256]);
  const kept: X509Certificate[] = [];
  const dropped: BundlePlan["dropped"] = [];
  for (const pem of input.candidates.flatMap(splitPem)) {
    const cert = parse(pem);
    if (!cert || seen.has(cert.fingerprint256)) continue;
    seen.add(cert.fingerprint256);
    const drop = (reason: string): void => void dropped.push({ subject: cert.subject, fingerprint: cert.fingerprint256, reason });
    if (!cert.ca) drop("not a CA");
    else if (new Date(cert.validTo).getTime() <= now.getTime()) drop(`expired at ${day(new Date(cert.validTo))}`);
    else if (serving && issuedBy(serving, cert)) kept.push(cert);
    else if (now.getTime() < overlapEnds) kept.push(cert);
    else drop(`replaced, and the overlap ended at ${day(new Date(overlapEnds))}`);
  }
  kept.sort((a, b) => new Date(b.validTo).getTime() - new Date(a.validTo).getTime());
  return { pems: [current.toString(), ...kept.map((c) => c.toString())], dropped };
}

/** Whether a caBundle already holds exactly these certificates (order and text around them aside). */
export function sameBundle(bundle: string, pems: readonly string[]): boolean {
  const fingerprints = (list: readonly string[]): string[] => list.map((p) => parse(p)?.fingerprint256 ?? `unparsed:${p}`).sort();
  const a = fingerprints(splitPem(bundle));
  const b = fingerprints(pems.flatMap(splitPem));
  return a.length === b.length && a.every((f, i) => f === b[i]);
}

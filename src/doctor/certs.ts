/**
 * @module
 * Certificate arithmetic for the doctor, with node:crypto's X509Certificate (no I/O): split a PEM
 * bundle, check that a served chain leads to a CA in a webhook's caBundle, that it names the host the
 * apiserver dials, that a Secret's key belongs to its certificate, and how many days are left.
 */
import type { X509Certificate } from "node:crypto";
import { issuedBy, subjectAltNames } from "../certs/x509.js";
import type { Severity } from "./types.js";

// The PEM and key arithmetic is shared with `certs ensure` (src/certs/x509.ts); re-exported for the doctor's checks.
export { keyMatches, parsePemBundle } from "../certs/x509.js";

/** The CN of a certificate's subject (else the whole subject), for messages. */
export function commonName(cert: X509Certificate): string {
  const cn = cert.subject.split("\n").find((l) => l.startsWith("CN="));
  return cn ? cn.slice(3) : cert.subject.replace(/\n/g, ", ");
}

/**
 * Whether `chain` (leaf first, then any intermediates the server sent) leads to one of `roots` by
 * signatures, as the apiserver's TLS client checks it against the caBundle. Validity dates are left to
 * the expiry check.
 */
export function chainsTo(
  chain: readonly X509Certificate[],
  roots: readonly X509Certificate[],
): { ok: true; root: X509Certificate } | { ok: false; reason: string } {
  let current = chain[0];
  if (!current) return { ok: false, reason: "no certificate presented" };
  const rest = chain.slice(1);
  for (let depth = 0; depth < 8; depth++) {
    const root = roots.find((r) => issuedBy(current!, r));
    if (root) return { ok: true, root };
    const next = rest.find((c) => c !== current && issuedBy(current!, c));
    if (!next) break;
    current = next;
  }
  return {
    ok: false,
    reason: `signed by "${current.issuer.replace(/\n/g, ", ")}", which is not in the caBundle (${roots.map((r) => `"${commonName(r)}"`).join(", ")})`,
  };
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** Whether the certificate's subjectAltNames cover `host` (Go's TLS client ignores the CN, so do we). */
export function coversHost(cert: X509Certificate, host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  if (IPV4.test(bare) || bare.includes(":")) return cert.checkIP(bare) !== undefined;
  return cert.checkHost(bare, { subject: "never" }) !== undefined;
}

/** The DNS and IP names a certificate carries, for messages. */
export function altNames(cert: X509Certificate): string {
  return (
    subjectAltNames(cert)
      .map((name) => name.replace(/^(DNS|IP Address):/, ""))
      .join(", ") || "(none)"
  );
}

export function daysLeft(cert: X509Certificate, now: Date): number {
  return (new Date(cert.validTo).getTime() - now.getTime()) / 86_400_000;
}

/** Under 30 days a warning, under 7 (or expired, or not yet valid) critical. */
export const EXPIRY_WARNING_DAYS = 30;
export const EXPIRY_CRITICAL_DAYS = 7;

export function expirySeverity(days: number): Severity {
  if (days < EXPIRY_CRITICAL_DAYS) return "critical";
  if (days < EXPIRY_WARNING_DAYS) return "warning";
  return "ok";
}

/** "in 364 days (2026-05-01)" or "expired 3 days ago (…)". */
export function describeExpiry(cert: X509Certificate, now: Date): string {
  const days = daysLeft(cert, now);
  const date = new Date(cert.validTo).toISOString().slice(0, 10);
  if (days < 0) {
    const ago = Math.floor(-days);
    return ago === 0 ? `expired today (${date})` : `expired ${ago} day${ago === 1 ? "" : "s"} ago (${date})`;
  }
  return `expires in ${Math.floor(days)} day${Math.floor(days) === 1 ? "" : "s"} (${date})`;
}

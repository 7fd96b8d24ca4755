/**
 * @module
 * Certificate arithmetic shared by `certs ensure` (src/certs/plan.ts) and the doctor (src/doctor/certs.ts),
 * with node:crypto's X509Certificate, no I/O: one way to split a PEM bundle, parse a certificate, tell
 * whether one certificate issued another, whether a key belongs to a certificate, and read its SANs. Before
 * this module each side had its own (issue 50), and they disagreed on text around PEM blocks and on how a
 * key was matched.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificates in a PEM bundle, in order, each ending in a newline; text around and between them is ignored. */
export function splitPem(bundle: string): string[] {
  return (bundle.match(PEM_CERT) ?? []).map((pem) => `${pem}\n`);
}

/** A certificate from its PEM, or undefined when it does not parse. */
export function parseCertificate(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

/** Every certificate in a PEM bundle; throws, saying which, if there is none or one does not parse. */
export function parsePemBundle(pem: string): X509Certificate[] {
  const blocks = splitPem(pem);
  if (blocks.length === 0) throw new Error("no PEM certificate in it");
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new Error(`certificate ${i + 1} does not parse: ${(err as Error).message}`);
    }
  });
}

/** Whether `parent` issued `child`: names chain and `parent`'s key verifies `child`'s signature. */
export function issuedBy(child: X509Certificate, parent: X509Certificate): boolean {
  return child.checkIssued(parent) && child.verify(parent.publicKey);
}

/** Whether a PEM private key belongs to the certificate (false when the key does not parse). */
export function keyMatches(cert: X509Certificate, keyPem: string): boolean {
  try {
    return cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

/** A certificate's subjectAltNames as node:crypto spells them: "DNS:x", "IP Address:y". */
export function subjectAltNames(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? "").split(/,\s*/).filter(Boolean);
}

/**
 * @module
 * A CA and a serving certificate for the webhook Service. node-forge builds the X.509 structures
 * (Node's crypto can generate keys but cannot issue certificates); the RSA keys come from Node's native
 * generator through forge, so generation takes milliseconds.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import * as forgeModule from "node-forge";

// node-forge is CommonJS without named-export hints, so under ESM its API sits on `default`.
const forge = (forgeModule as unknown as { default?: typeof forgeModule }).default ?? forgeModule;

/** A 2048-bit RSA key pair from Node's native generator, in forge's form. */
function rsaKeyPair(): { publicKey: forgeModule.pki.rsa.PublicKey; privateKey: forgeModule.pki.rsa.PrivateKey } {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const key = forge.pki.privateKeyFromPem(privateKey.export({ type: "pkcs1", format: "pem" }).toString());
  return { privateKey: key, publicKey: forge.pki.setRsaPublicKey(key.n, key.e) };
}

export interface CertificateAuthority {
  certPem: string;
  keyPem: string;
}

export interface GeneratedCertificates {
  ca: CertificateAuthority;
  certPem: string;
  keyPem: string;
  dnsNames: string[];
  ips: string[];
}

export interface GenerateOptions {
  service: string;
  namespace: string;
  /** Extra IP SANs, e.g. 127.0.0.1 for a webhook the apiserver reaches by URL. */
  ips?: readonly string[];
  /** Extra DNS SANs. */
  dnsNames?: readonly string[];
  /** Validity of the serving certificate, in days. */
  days?: number;
  /** Validity of a new CA, in days. */
  caDays?: number;
  /** Sign with this CA instead of creating one (rotation keeps the CA, so caBundles stay valid). */
  ca?: CertificateAuthority;
  now?: Date;
}

/** The names a client uses to reach Service `service` in `namespace`. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // positive INTEGER
  return bytes.toString("hex");
}

/** Certificates are back-dated by this much, so a peer whose clock runs slightly behind accepts a fresh one. */
export const BACKDATE_MS = 3600_000;

function validity(cert: forgeModule.pki.Certificate, now: Date, days: number, cap?: Date): void {
  cert.validity.notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = now.getTime() + days * 86400_000;
  cert.validity.notAfter = new Date(cap && cap.getTime() < notAfter ? cap.getTime() : notAfter);
}

function newCa(now: Date, days: number, name: string): CertificateAuthority {
  const keys = rsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  validity(cert, now, days);
  const subject = [{ name: "commonName", value: `${name}-${now.toISOString().slice(0, 10)}` }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}

export interface IssueOptions {
  ca: CertificateAuthority;
  commonName: string;
  /** Subject O= values; for client certificates Kubernetes reads them as groups. */
  organizations?: readonly string[];
  dnsNames?: readonly string[];
  ips?: readonly string[];
  usage: "server" | "client";
  days: number;
  now: Date;
  /** Never valid past this (a leaf that outlives its CA is refused once the CA expires). */
  notAfterCap?: Date;
}

/** Issues a leaf certificate signed by `ca`. */
export function issueCertificate(opts: IssueOptions): { certPem: string; keyPem: string } {
  const caCert = forge.pki.certificateFromPem(opts.ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(opts.ca.keyPem);
  const keys = rsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  validity(cert, opts.now, opts.days, opts.notAfterCap);
  cert.setSubject([
    ...(opts.organizations ?? []).map((value) => ({ name: "organizationName", value })),
    { name: "commonName", value: opts.commonName },
  ]);
  cert.setIssuer(caCert.subject.attributes);
  const altNames = [...(opts.dnsNames ?? []).map((value) => ({ type: 2, value })), ...(opts.ips ?? []).map((ip) => ({ type: 7, ip }))];
  cert.setExtensions([
    { name: "basicConstraints", cA: false, critical: true },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    opts.usage === "server" ? { name: "extKeyUsage", serverAuth: true } : { name: "extKeyUsage", clientAuth: true },
    ...(altNames.length > 0 ? [{ name: "subjectAltName", altNames }] : []),
    { name: "subjectKeyIdentifier" },
    { name: "authorityKeyIdentifier", keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}

/** A new self-signed CA named `name-<date>`. */
export function createCertificateAuthority(name: string, days: number, now = new Date()): CertificateAuthority {
  return newCa(now, days, name);
}

export function generateCertificates(opts: GenerateOptions): GeneratedCertificates {
  const now = opts.now ?? new Date();
  const ca = opts.ca ?? newCa(now, opts.caDays ?? 730, "quartermaster-ca");
  const dnsNames = [...new Set([...serviceDnsNames(opts.service, opts.namespace), ...(opts.dnsNames ?? [])])];
  const ips = [...new Set(opts.ips ?? [])];
  const leaf = issueCertificate({
    ca,
    commonName: `${opts.service}.${opts.namespace}.svc`,
    dnsNames,
    ips,
    usage: "server",
    days: opts.days ?? 365,
    now,
    // A given CA may expire before --days is up: a leaf that outlives its CA is refused once the CA expires.
    notAfterCap: opts.ca ? forge.pki.certificateFromPem(opts.ca.certPem).validity.notAfter : undefined,
  });
  return { ca, ...leaf, dnsNames, ips };
}

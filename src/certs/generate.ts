/**
 * @module
 * A CA and a serving certificate for the webhook Service. `@peculiar/x509` builds the X.509 structures
 * (Node's crypto can generate keys and sign, but cannot issue certificates; node-forge, used before, has no
 * elliptic curves); the keys and signatures come from Node's WebCrypto, so generation takes milliseconds.
 *
 * ECDSA P-256 is the default key: a TLS handshake with it costs the server a fraction of an RSA-2048 one
 * (a P-256 signature against an RSA private-key operation), and the certificates are a third the size.
 * RSA-2048 stays available (`keyType: "rsa"`) for clients that cannot verify ECDSA.
 *
 * `@peculiar/x509` and `reflect-metadata` (which it needs loaded first) are imported on first use, so
 * nothing that merely imports this module (the `serve` path never does) pays for them.
 */
import { createPrivateKey, randomBytes, X509Certificate as NodeX509, type KeyObject } from "node:crypto";

type X509Module = typeof import("@peculiar/x509");
let x509Module: Promise<X509Module> | undefined;

/** `@peculiar/x509`, with `reflect-metadata` imported before it (its ASN.1 schemas rely on it). */
function x509(): Promise<X509Module> {
  x509Module ??= import("reflect-metadata").then(() => import("@peculiar/x509"));
  return x509Module;
}

// Node's global WebCrypto (the same object as node:crypto's `webcrypto` since Node 19), typed as the Web
// Crypto API that @peculiar/x509 takes; node:crypto's own declaration of it differs in overloads only.
const subtle: SubtleCrypto = globalThis.crypto.subtle;
const crypto: Crypto = globalThis.crypto;

/** The key algorithms `certs generate --key-type` and `certs ensure --key-type` offer. */
export const KEY_TYPES = ["ecdsa", "rsa"] as const;
export type KeyType = (typeof KEY_TYPES)[number];
/** ECDSA P-256 (see the module comment). */
export const DEFAULT_KEY_TYPE: KeyType = "ecdsa";

const RSA_GEN: RsaHashedKeyGenParams = { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
const EC_GEN: EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };

async function newKeyPair(type: KeyType): Promise<CryptoKeyPair> {
  return await subtle.generateKey(type === "rsa" ? RSA_GEN : EC_GEN, true, ["sign", "verify"]);
}

/**
 * A private key as PEM: RSA as PKCS#1 ("RSA PRIVATE KEY"), EC as SEC 1 ("EC PRIVATE KEY"), the forms
 * openssl, Go's crypto/tls and cert-manager (its default `encoding: PKCS1`) write.
 */
async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await subtle.exportKey("pkcs8", key));
  const object = createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  return object.export({ type: object.asymmetricKeyType === "ec" ? "sec1" : "pkcs1", format: "pem" }).toString();
}

const CURVES: Record<string, string> = { prime256v1: "P-256", secp384r1: "P-384", secp521r1: "P-521" };
const CURVE_HASH: Record<string, string> = { "P-256": "SHA-256", "P-384": "SHA-384", "P-521": "SHA-512" };

/** A CA's private key (any PEM form Node reads) as a WebCrypto signing key, and how it signs. */
async function signingKey(keyPem: string): Promise<{ key: CryptoKey; algorithm: Algorithm | EcdsaParams }> {
  let object: KeyObject;
  try {
    object = createPrivateKey(keyPem);
  } catch (cause) {
    throw new Error(`the CA key is not a PEM private key: ${(cause as Error).message}`, { cause });
  }
  const der = object.export({ type: "pkcs8", format: "der" });
  if (object.asymmetricKeyType === "rsa") {
    const key = await subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
    return { key, algorithm: { name: "RSASSA-PKCS1-v1_5" } };
  }
  if (object.asymmetricKeyType === "ec") {
    const curve = CURVES[object.asymmetricKeyDetails?.namedCurve ?? ""];
    if (!curve) throw new Error(`the CA key's curve ${object.asymmetricKeyDetails?.namedCurve ?? "(unknown)"} is not supported; use P-256, P-384 or P-521`);
    const key = await subtle.importKey("pkcs8", der, { name: "ECDSA", namedCurve: curve }, false, ["sign"]);
    return { key, algorithm: { name: "ECDSA", hash: CURVE_HASH[curve]! } as EcdsaParams };
  }
  throw new Error(`the CA key is ${object.asymmetricKeyType ?? "of an unknown type"}; an RSA or EC (P-256, P-384, P-521) key is needed`);
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
  /** Key algorithm of the new keys (the serving key, and the CA's when one is created); default ECDSA P-256. */
  keyType?: KeyType;
  now?: Date;
}

/** The names a client uses to reach Service `service` in `namespace`. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01; // a positive INTEGER of 16 bytes (no leading zero byte to drop)
  return bytes.toString("hex");
}

/** Certificates are back-dated by this much, so a peer whose clock runs slightly behind accepts a fresh one. */
export const BACKDATE_MS = 3600_000;

/** X.509 times have whole seconds: the validity window, truncated to them. */
function validity(now: Date, days: number, cap?: Date): { notBefore: Date; notAfter: Date } {
  const second = (ms: number): Date => new Date(Math.floor(ms / 1000) * 1000);
  const notAfter = now.getTime() + days * 86400_000;
  return { notBefore: second(now.getTime() - BACKDATE_MS), notAfter: second(cap && cap.getTime() < notAfter ? cap.getTime() : notAfter) };
}

async function newCa(now: Date, days: number, name: string, keyType: KeyType): Promise<CertificateAuthority> {
  const x = await x509();
  const keys = await newKeyPair(keyType);
  const subject = [{ CN: [`${name}-${now.toISOString().slice(0, 10)}`] }];
  const cert = await x.X509CertificateGenerator.create(
    {
      serialNumber: serial(),
      subject,
      issuer: subject,
      ...validity(now, days),
      publicKey: keys.publicKey,
      signingKey: keys.privateKey,
      extensions: [
        new x.BasicConstraintsExtension(true, undefined, true),
        new x.KeyUsagesExtension(x.KeyUsageFlags.keyCertSign | x.KeyUsageFlags.cRLSign | x.KeyUsageFlags.digitalSignature, true),
        await x.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  return { certPem: cert.toString("pem") + "\n", keyPem: await privateKeyPem(keys.privateKey) };
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
  /** Key algorithm of the leaf's key (the CA's key signs whatever it is); default ECDSA P-256. */
  keyType?: KeyType;
}

/** Issues a leaf certificate signed by `ca`. */
export async function issueCertificate(opts: IssueOptions): Promise<{ certPem: string; keyPem: string }> {
  const x = await x509();
  const caCert = new x.X509Certificate(opts.ca.certPem);
  const signer = await signingKey(opts.ca.keyPem);
  const keyType = opts.keyType ?? DEFAULT_KEY_TYPE;
  const keys = await newKeyPair(keyType);
  const altNames = [
    ...(opts.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(opts.ips ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  // The CA's own key identifier when it carries one (a CA from elsewhere may compute it otherwise), else
  // the usual SHA-1 of its public key.
  const caSki = caCert.getExtension(x.SubjectKeyIdentifierExtension);
  const aki = caSki ? new x.AuthorityKeyIdentifierExtension(caSki.keyId) : await x.AuthorityKeyIdentifierExtension.create(caCert.publicKey, false, crypto);
  // keyEncipherment is for RSA key transport only; an EC key signs (ECDHE) and nothing else.
  const keyUsage = x.KeyUsageFlags.digitalSignature | (keyType === "rsa" ? x.KeyUsageFlags.keyEncipherment : 0);
  const cert = await x.X509CertificateGenerator.create(
    {
      serialNumber: serial(),
      subject: [...(opts.organizations ?? []).map((value) => ({ O: [value] })), { CN: [opts.commonName] }],
      issuer: caCert.subjectName, // its encoded form, so issuer and CA subject match byte for byte
      ...validity(opts.now, opts.days, opts.notAfterCap),
      publicKey: keys.publicKey,
      signingKey: signer.key,
      signingAlgorithm: signer.algorithm,
      extensions: [
        new x.BasicConstraintsExtension(false, undefined, true),
        new x.KeyUsagesExtension(keyUsage, true),
        new x.ExtendedKeyUsageExtension([opts.usage === "server" ? x.ExtendedKeyUsage.serverAuth : x.ExtendedKeyUsage.clientAuth]),
        ...(altNames.length > 0 ? [new x.SubjectAlternativeNameExtension(altNames)] : []),
        await x.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        aki,
      ],
    },
    crypto,
  );
  return { certPem: cert.toString("pem") + "\n", keyPem: await privateKeyPem(keys.privateKey) };
}

/** A new self-signed CA named `name-<date>`, with a key of `keyType` (default ECDSA P-256). */
export function createCertificateAuthority(name: string, days: number, now = new Date(), keyType: KeyType = DEFAULT_KEY_TYPE): Promise<CertificateAuthority> {
  return newCa(now, days, name, keyType);
}

export async function generateCertificates(opts: GenerateOptions): Promise<GeneratedCertificates> {
  const now = opts.now ?? new Date();
  const keyType = opts.keyType ?? DEFAULT_KEY_TYPE;
  const ca = opts.ca ?? (await newCa(now, opts.caDays ?? 730, "quartermaster-ca", keyType));
  const dnsNames = [...new Set([...serviceDnsNames(opts.service, opts.namespace), ...(opts.dnsNames ?? [])])];
  const ips = [...new Set(opts.ips ?? [])];
  const leaf = await issueCertificate({
    ca,
    commonName: `${opts.service}.${opts.namespace}.svc`,
    dnsNames,
    ips,
    usage: "server",
    days: opts.days ?? 365,
    now,
    keyType,
    // A given CA may expire before --days is up: a leaf that outlives its CA is refused once the CA expires.
    notAfterCap: opts.ca ? new Date(new NodeX509(opts.ca.certPem).validTo) : undefined,
  });
  return { ca, ...leaf, dnsNames, ips };
}

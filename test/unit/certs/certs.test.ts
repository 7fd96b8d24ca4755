import assert from "node:assert/strict";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { describe, it } from "node:test";
import {
  createCertificateAuthority,
  DEFAULT_KEY_TYPE,
  generateCertificates,
  issueCertificate,
  KEY_TYPES,
  serviceDnsNames,
} from "../../../src/certs/generate.js";

it("ECDSA P-256 is the default key type", async () => {
  assert.equal(DEFAULT_KEY_TYPE, "ecdsa");
  const certs = await generateCertificates({ service: "s", namespace: "n" });
  for (const pem of [certs.certPem, certs.ca.certPem]) {
    const key = new X509Certificate(pem).publicKey;
    assert.equal(key.asymmetricKeyType, "ec");
    assert.equal(key.asymmetricKeyDetails?.namedCurve, "prime256v1");
  }
  assert.match(certs.keyPem, /^-----BEGIN EC PRIVATE KEY-----\n/);
});

/** What each key type's keys and certificates look like. */
const SHAPES = {
  ecdsa: { keyType: "ec", detail: { namedCurve: "prime256v1" }, pem: /^-----BEGIN EC PRIVATE KEY-----\n/ },
  rsa: { keyType: "rsa", detail: { modulusLength: 2048 }, pem: /^-----BEGIN RSA PRIVATE KEY-----\n/ },
} as const;

for (const keyType of KEY_TYPES) {
  describe(`generateCertificates (${keyType})`, async () => {
    const now = new Date("2026-11-22T00:00:00Z");
    const certs = await generateCertificates({ service: "quartermaster-webhook", namespace: "qm", ips: ["127.0.0.1"], days: 90, now, keyType });
    const leaf = new X509Certificate(certs.certPem);
    const ca = new X509Certificate(certs.ca.certPem);
    const shape = SHAPES[keyType];

    it("SANs cover S, S.N, S.N.svc, S.N.svc.cluster.local and the IPs", () => {
      assert.equal(
        leaf.subjectAltName,
        "DNS:quartermaster-webhook, DNS:quartermaster-webhook.qm, DNS:quartermaster-webhook.qm.svc, DNS:quartermaster-webhook.qm.svc.cluster.local, IP Address:127.0.0.1",
      );
      assert.deepEqual(serviceDnsNames("s", "n"), ["s", "s.n", "s.n.svc", "s.n.svc.cluster.local"]);
    });

    it("the leaf is signed by the CA, which is a CA, and the leaf is not", () => {
      assert.ok(leaf.verify(ca.publicKey));
      assert.ok(leaf.checkIssued(ca));
      assert.equal(ca.ca, true);
      assert.equal(leaf.ca, false);
      assert.equal(leaf.issuer, ca.subject);
    });

    it(`keys: ${shape.keyType} ${JSON.stringify(shape.detail)}, written as ${shape.pem.source.slice(1, -2)}`, () => {
      for (const c of [leaf, ca]) {
        assert.equal(c.publicKey.asymmetricKeyType, shape.keyType);
        for (const [k, v] of Object.entries(shape.detail)) assert.equal((c.publicKey.asymmetricKeyDetails as Record<string, unknown>)[k], v);
      }
      assert.match(certs.keyPem, shape.pem);
      assert.match(certs.ca.keyPem, shape.pem);
    });

    it("validity: back-dated an hour, --days long", () => {
      assert.equal(new Date(leaf.validFrom).toISOString(), "2026-11-21T23:00:00.000Z");
      assert.equal(new Date(leaf.validTo).toISOString(), "2027-02-20T00:00:00.000Z");
    });

    it("the key belongs to the certificate", () => {
      assert.ok(leaf.checkPrivateKey(createPrivateKey(certs.keyPem)));
      assert.ok(ca.checkPrivateKey(createPrivateKey(certs.ca.keyPem)));
    });

    it("signing with an existing CA keeps that CA (rotation without a new caBundle)", async () => {
      const again = await generateCertificates({ service: "s", namespace: "n", ca: certs.ca, now, keyType });
      assert.equal(again.ca, certs.ca);
      assert.ok(new X509Certificate(again.certPem).verify(ca.publicKey));
      assert.notEqual(new X509Certificate(again.certPem).serialNumber, leaf.serialNumber);
    });

    it("a client certificate carries its O= groups before its CN", async () => {
      const client = await issueCertificate({ ca: certs.ca, commonName: "admin", organizations: ["system:masters"], usage: "client", days: 1, now, keyType });
      assert.equal(new X509Certificate(client.certPem).subject, "O=system:masters\nCN=admin");
    });
  });
}

describe("a CA of one key type signs leaves of the other", () => {
  for (const [caType, leafType] of [
    ["rsa", "ecdsa"],
    ["ecdsa", "rsa"],
  ] as const) {
    it(`${caType} CA, ${leafType} leaf`, async () => {
      const ca = await createCertificateAuthority("mixed", 30, new Date(), caType);
      const leaf = await issueCertificate({ ca, commonName: "x", usage: "server", days: 1, now: new Date(), keyType: leafType });
      const cert = new X509Certificate(leaf.certPem);
      assert.ok(cert.verify(new X509Certificate(ca.certPem).publicKey));
      assert.equal(cert.publicKey.asymmetricKeyType, SHAPES[leafType].keyType);
    });
  }
  it("a CA key of an unsupported kind is refused with what is supported", async () => {
    const { generateKeyPairSync } = await import("node:crypto");
    const ca = await createCertificateAuthority("ed", 30);
    const ed = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    await assert.rejects(
      issueCertificate({ ca: { certPem: ca.certPem, keyPem: ed }, commonName: "x", usage: "server", days: 1, now: new Date() }),
      /the CA key is ed25519; an RSA or EC/,
    );
  });
});

it("@peculiar/x509 and reflect-metadata stay off the serve path: only src/certs/generate.ts names them, by import() in a function", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const root = join(import.meta.dirname, "../../../src");
  const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => join(root, f));
  const naming = files.filter((f) => /["'](@peculiar\/x509|reflect-metadata)["']/.test(readFileSync(f, "utf8")));
  assert.deepEqual(
    naming.map((f) => f.slice(root.length + 1)),
    ["certs/generate.ts"],
  );
  const text = readFileSync(join(root, "certs/generate.ts"), "utf8");
  assert.doesNotMatch(text, /^import[^(]*["'](@peculiar\/x509|reflect-metadata)["']/m, "no static import");
  assert.match(text, /import\("reflect-metadata"\)\.then\(\(\) => import\("@peculiar\/x509"\)\)/);
});

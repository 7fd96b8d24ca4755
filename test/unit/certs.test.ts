import assert from "node:assert/strict";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { describe, it } from "node:test";
import { generateCertificates, serviceDnsNames } from "../../src/certs/generate.js";

describe("generateCertificates", () => {
  const now = new Date("2026-11-22T00:00:00Z");
  const certs = generateCertificates({ service: "quartermaster-webhook", namespace: "qm", ips: ["127.0.0.1"], days: 90, now });
  const leaf = new X509Certificate(certs.certPem);
  const ca = new X509Certificate(certs.ca.certPem);

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
  });

  it("validity: back-dated an hour, --days long", () => {
    assert.equal(new Date(leaf.validFrom).toISOString(), "2026-11-21T23:00:00.000Z");
    assert.equal(new Date(leaf.validTo).toISOString(), "2027-02-20T00:00:00.000Z");
  });

  it("the key belongs to the certificate", () => {
    assert.ok(leaf.checkPrivateKey(createPrivateKey(certs.keyPem)));
  });

  it("signing with an existing CA keeps that CA (rotation without a new caBundle)", () => {
    const again = generateCertificates({ service: "s", namespace: "n", ca: certs.ca, now });
    assert.equal(again.ca, certs.ca);
    assert.ok(new X509Certificate(again.certPem).verify(ca.publicKey));
    assert.notEqual(new X509Certificate(again.certPem).serialNumber, leaf.serialNumber);
  });
});

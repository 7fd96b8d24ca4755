/**
 * The renewal decisions of `certs ensure` as tables: the CA, the serving certificate, and the caBundle
 * (which CAs stay trusted during a rotation's overlap and which are dropped), for each key type
 * (ECDSA P-256, the default, and RSA-2048); the other key type for the leaf than for the CA changes nothing.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { describe, it } from "node:test";
import {
  createCertificateAuthority,
  issueCertificate,
  KEY_TYPES,
  serviceDnsNames,
  type CertificateAuthority,
  type KeyType,
} from "../../../src/certs/generate.js";
import { decideBundle, decideCa, decideServing, sameBundle, splitPem, type RenewalPolicy } from "../../../src/certs/plan.js";

const DAY = 86400_000;
const NOW = new Date("2026-11-22T12:00:00Z");
const at = (days: number): Date => new Date(NOW.getTime() + days * DAY);
const policy: RenewalPolicy = {
  dnsNames: serviceDnsNames("quartermaster-webhook", "quartermaster"),
  ips: [],
  renewBeforeMs: 30 * DAY,
  caRenewBeforeMs: 180 * DAY,
  overlapMs: 1 * DAY,
};

const COMBINATIONS: Array<[KeyType, KeyType]> = [...KEY_TYPES.map((k): [KeyType, KeyType] => [k, k]), ["ecdsa", "rsa"], ["rsa", "ecdsa"]];

for (const [keyType, leafKeyType] of COMBINATIONS) {
  /** A CA issued `issuedDaysAgo` before NOW, valid `days` from then. */
  const ca = (issuedDaysAgo: number, days: number): Promise<CertificateAuthority> =>
    createCertificateAuthority("qm-test-ca", days, at(-issuedDaysAgo), keyType);
  /** A leaf of the other key type than the CA's: a CA signs whatever key it is given. */
  const leaf = (issuer: CertificateAuthority, issuedDaysAgo: number, days: number, dnsNames = policy.dnsNames) =>
    issueCertificate({
      ca: issuer,
      commonName: "quartermaster-webhook.quartermaster.svc",
      dnsNames,
      usage: "server",
      days,
      now: at(-issuedDaysAgo),
      keyType: leafKeyType,
    });

  const current = await ca(10, 1095);
  const other = await ca(10, 1095);

  describe(`decideCa (${keyType} CA, ${leafKeyType} leaf)`, async () => {
    const cases: Array<{ name: string; ca: Parameters<typeof decideCa>[0]; action: "keep" | "replace"; reason: RegExp }> = [
      { name: "a valid CA far from expiry is kept", ca: current, action: "keep", reason: /valid until 2029-/ },
      { name: "no CA yet (fresh install) → a new one", ca: undefined, action: "replace", reason: /^no CA yet$/ },
      { name: "within the renew-before window → a new one", ca: await ca(1000, 1095), action: "replace", reason: /within the renew-before window/ },
      {
        name: "exactly at the window's edge → a new one",
        ca: await createCertificateAuthority("edge", 180, NOW, keyType),
        action: "replace",
        reason: /within the renew-before window/,
      },
      { name: "expired → a new one", ca: await ca(400, 365), action: "replace", reason: /expired at 2026-10-18T12:00:00Z/ },
      {
        name: "a certificate that does not parse → a new one",
        ca: { certPem: "garbage", keyPem: current.keyPem },
        action: "replace",
        reason: /does not parse/,
      },
      { name: "a key from another CA → a new one", ca: { certPem: current.certPem, keyPem: other.keyPem }, action: "replace", reason: /key does not match/ },
      { name: "a leaf in the CA Secret → a new one", ca: { ...(await leaf(current, 1, 90)) }, action: "replace", reason: /is not a CA/ },
    ];
    for (const tc of cases) {
      it(tc.name, () => {
        const d = decideCa(tc.ca, policy, NOW);
        assert.equal(d.action, tc.action);
        assert.match(d.reason, tc.reason);
      });
    }
  });

  describe(`decideServing (${keyType} CA, ${leafKeyType} leaf)`, async () => {
    const cases: Array<{
      name: string;
      serving: Parameters<typeof decideServing>[0];
      want?: Partial<RenewalPolicy>;
      action: "keep" | "replace";
      reason: RegExp;
    }> = [
      { name: "valid, issued by the current CA, every SAN → kept", serving: await leaf(current, 1, 90), action: "keep", reason: /valid until 2027-02-19/ },
      { name: "no serving certificate yet (fresh install) → issue", serving: undefined, action: "replace", reason: /^no serving certificate yet$/ },
      {
        name: "within the renew-before window → issue",
        serving: await leaf(current, 70, 90),
        action: "replace",
        reason: /expires at 2026-12-12T12:00:00Z, within the renew-before window/,
      },
      { name: "one day outside the window → kept", serving: await leaf(current, 59, 90), action: "keep", reason: /valid until/ },
      { name: "expired → issue", serving: await leaf(current, 100, 90), action: "replace", reason: /expired at 2026-11-12/ },
      {
        name: "issued by another CA (the CA was replaced) → issue",
        serving: await leaf(other, 1, 90),
        action: "replace",
        reason: /not issued by the current CA/,
      },
      {
        name: "a SAN missing → issue",
        serving: await leaf(current, 1, 90, ["quartermaster-webhook"]),
        action: "replace",
        reason: /lacks DNS:quartermaster-webhook.quartermaster, /,
      },
      {
        name: "an IP SAN now wanted → issue",
        serving: await leaf(current, 1, 90),
        want: { ips: ["127.0.0.1"] },
        action: "replace",
        reason: /lacks IP Address:127.0.0.1$/,
      },
      {
        name: "a key that does not belong to it → issue",
        serving: { certPem: (await leaf(current, 1, 90)).certPem, keyPem: current.keyPem },
        action: "replace",
        reason: /key does not match/,
      },
      {
        name: "a certificate that does not parse → issue",
        serving: { certPem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", keyPem: current.keyPem },
        action: "replace",
        reason: /does not parse/,
      },
    ];
    for (const tc of cases) {
      it(tc.name, () => {
        const d = decideServing(tc.serving, current.certPem, { ...policy, ...tc.want }, NOW);
        assert.equal(d.action, tc.action);
        assert.match(d.reason, tc.reason);
      });
    }
  });

  describe(`decideBundle (${keyType} CA, ${leafKeyType} leaf)`, async () => {
    const fresh = await ca(0, 1095); // issued just now: its overlap is on
    const old = await ca(900, 1095); // the CA it replaces, still valid for 195 days
    const expired = await ca(400, 365);
    const oldLeaf = await leaf(old, 30, 90);
    const cn = (pem: string): string => new X509Certificate(pem).fingerprint256;
    const cases: Array<{
      name: string;
      caPem: string;
      candidates: string[];
      serving?: string;
      now?: Date;
      want: string[];
      dropped?: RegExp[];
    }> = [
      { name: "fresh install: the bundle is the new CA alone", caPem: fresh.certPem, candidates: [""], want: [fresh.certPem] },
      {
        name: "bundle already holds the CA: nothing else added",
        caPem: current.certPem,
        candidates: [current.certPem, current.certPem],
        want: [current.certPem],
      },
      {
        name: "CA just rotated: the old CA stays during the overlap (new one first)",
        caPem: fresh.certPem,
        candidates: [old.certPem],
        want: [fresh.certPem, old.certPem],
      },
      {
        name: "overlap over: the old CA is dropped",
        caPem: fresh.certPem,
        candidates: [old.certPem + fresh.certPem],
        now: at(1.01),
        want: [fresh.certPem],
        dropped: [/replaced, and the overlap ended at 2026-11-23T12:00:00Z/],
      },
      {
        name: "overlap over, but the Secret still holds a certificate from the old CA: the old CA stays",
        caPem: fresh.certPem,
        candidates: [old.certPem],
        serving: oldLeaf.certPem,
        now: at(2),
        want: [fresh.certPem, old.certPem],
      },
      {
        name: "an expired CA is dropped even during the overlap",
        caPem: fresh.certPem,
        candidates: [expired.certPem + old.certPem],
        want: [fresh.certPem, old.certPem],
        dropped: [/^expired at 2026-10-18T12:00:00Z/],
      },
      {
        name: "a leaf pasted into a caBundle is dropped",
        caPem: current.certPem,
        candidates: [(await leaf(current, 1, 90)).certPem],
        want: [current.certPem],
        dropped: [/^not a CA$/],
      },
      {
        name: "text around the PEM blocks and duplicates across webhooks are ignored",
        caPem: fresh.certPem,
        candidates: [`# old\n${old.certPem}\ntrailing`, old.certPem, fresh.certPem],
        want: [fresh.certPem, old.certPem],
      },
    ];
    for (const tc of cases) {
      it(tc.name, () => {
        const plan = decideBundle({ caPem: tc.caPem, candidates: tc.candidates, servingCertPem: tc.serving }, policy, tc.now ?? NOW);
        assert.deepEqual(plan.pems.map(cn), tc.want.map(cn));
        assert.equal(plan.dropped.length, tc.dropped?.length ?? 0, JSON.stringify(plan.dropped));
        (tc.dropped ?? []).forEach((re, i) => assert.match(plan.dropped[i]!.reason, re));
      });
    }
  });

  describe(`splitPem and sameBundle (${keyType} CA, ${leafKeyType} leaf)`, async () => {
    it("splits a bundle into its certificates, each ending in a newline", () => {
      assert.deepEqual(
        splitPem(`junk\n${current.certPem}${other.certPem}`).map((p) => new X509Certificate(p).fingerprint256),
        [current, other].map((c) => new X509Certificate(c.certPem).fingerprint256),
      );
      assert.deepEqual(splitPem(""), []);
    });
    it("compares bundles by their certificates, not their text or order", () => {
      assert.ok(sameBundle(`${other.certPem}\n\n${current.certPem}`, [current.certPem, other.certPem]));
      assert.ok(!sameBundle(current.certPem, [current.certPem, other.certPem]));
      assert.ok(!sameBundle("", [current.certPem]));
    });
  });
}

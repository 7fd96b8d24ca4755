/**
 * The doctor's checks of webhook configurations, endpoints, certificates, selectors, side effects and
 * timeouts, as tables over a healthy installation (real certificates) broken one piece at a time; the
 * pure helpers (selectors, certificates) and the output (exit code, table).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createCertificateAuthority, generateCertificates, issueCertificate } from "../../../src/certs/generate.js";
import { chainsTo, coversHost, describeExpiry, expirySeverity, keyMatches, parsePemBundle } from "../../../src/doctor/certs.js";
import { diagnose, exitCode, findingsTable, report, unreachable } from "../../../src/doctor/index.js";
import { requiredAccess } from "../../../src/doctor/rbac.js";
import { excludesByName, selectorMatches } from "../../../src/core/selector.js";
import type { LabelSelector } from "../../../src/core/selector.js";
import type { DoctorSnapshot, DoctorFinding as Finding, Severity, WebhookEntry as Webhook, WebhookConfiguration } from "../../../src/doctor/types.js";
import { readyAddresses } from "../../../src/doctor/webhooks.js";
import { renderWebhookConfigurations } from "../../../src/manifests/webhooks.js";
import { defaultPolicy } from "../../../src/policy/load.js";

/**
 * The built-in policy without GPU device classes: the four webhooks these cases enumerate. With them (the
 * default) the claims webhook joins; "the claims webhook" below shows doctor expecting it.
 */
function policyWithoutDra(): ReturnType<typeof defaultPolicy> {
  const p = defaultPolicy();
  return { ...p, gpu: { ...p.gpu, deviceClasses: [] } };
}

// A healthy installation as the doctor sees it (what src/run/doctor.ts reads), from real certificates.
const NOW = new Date("2026-06-01T12:00:00Z");
const NS = "quartermaster";
const b64 = (s: string): string => Buffer.from(s).toString("base64");

const CA = await createCertificateAuthority("qm-test-ca", 730, NOW);
const SERVING = await generateCertificates({ service: "quartermaster-webhook", namespace: NS, ips: ["127.0.0.1"], ca: CA, days: 365, now: NOW });
const OTHER_CA = await createCertificateAuthority("other-ca", 730, NOW);
const OTHER_SERVICE = await generateCertificates({ service: "webhook", namespace: "other", ca: CA, now: NOW });
const SHORT20_CA = await createCertificateAuthority("short-ca", 20, NOW);
const SHORT20 = await generateCertificates({ service: "quartermaster-webhook", namespace: NS, ca: SHORT20_CA, days: 15, now: NOW });
const SHORT5_CA = await createCertificateAuthority("short-ca", 5, NOW);
const SHORT5 = await generateCertificates({ service: "quartermaster-webhook", namespace: NS, ca: SHORT5_CA, days: 4, now: NOW });
const EXPIRED = await generateCertificates({
  service: "quartermaster-webhook",
  namespace: NS,
  ca: CA,
  days: 30,
  now: new Date(NOW.getTime() - 40 * 86400_000),
});
const NOT_YET = await generateCertificates({ service: "quartermaster-webhook", namespace: NS, ca: CA, days: 30, now: new Date(NOW.getTime() + 2 * 86400_000) });

const PROTECTED = ["kube-system", "kube-public", "kube-node-lease", NS];

/** The configurations as manifests/base registers them (the render of the built-in policy), caBundle filled. */
function configurations(): WebhookConfiguration[] {
  return renderWebhookConfigurations(policyWithoutDra(), { namespace: NS, caBundle: b64(CA.certPem) }).map((c) => structuredClone(c) as WebhookConfiguration);
}

/** Everything in order: 2 ready endpoints, the Secret matching the caBundle, a pass a minute ago, RBAC granted. */
function healthy(): DoctorSnapshot {
  const policy = policyWithoutDra();
  return {
    now: new Date(NOW),
    namespace: NS,
    webhookConfigurations: configurations(),
    services: {
      [`${NS}/quartermaster-webhook`]: {
        service: {
          metadata: { name: "quartermaster-webhook", namespace: NS },
          spec: { ports: [{ name: "https", port: 443, targetPort: "https" }], selector: { "app.kubernetes.io/component": "webhook" } },
        },
        endpointSlices: [
          {
            metadata: { name: "quartermaster-webhook-abcde" },
            endpoints: [
              { addresses: ["10.1.0.5"], conditions: { ready: true } },
              { addresses: ["10.1.1.7"], conditions: { ready: true } },
            ],
            ports: [{ name: "https", port: 8443 }],
          },
        ],
      },
    },
    certificates: {
      [`service:${NS}/quartermaster-webhook`]: [
        { source: "secret", secret: `${NS}/quartermaster-webhook-tls`, certPem: SERVING.certPem, keyPem: SERVING.keyPem },
      ],
    },
    protectedNamespaces: Object.fromEntries(PROTECTED.map((n) => [n, { "kubernetes.io/metadata.name": n }])),
    reconciler: {
      cronJob: {
        metadata: { name: "quartermaster-reconciler", namespace: NS, uid: "cj-uid", creationTimestamp: "2026-05-01T00:00:00Z" },
        spec: { schedule: "*/5 * * * *", startingDeadlineSeconds: 120, jobTemplate: { spec: { activeDeadlineSeconds: 600 } } },
        status: { lastScheduleTime: "2026-06-01T11:55:00Z", lastSuccessfulTime: "2026-06-01T11:55:40Z" },
      },
      jobs: [
        {
          metadata: {
            name: "quartermaster-reconciler-29000000",
            creationTimestamp: "2026-06-01T11:55:00Z",
            ownerReferences: [{ uid: "cj-uid", kind: "CronJob" }],
          },
          status: { conditions: [{ type: "Complete", status: "True" }], completionTime: "2026-06-01T11:55:40Z" },
        },
      ],
    },
    ledger: { generatedAt: new Date("2026-06-01T11:55:39Z"), shards: 2, corrupt: [] },
    access: requiredAccess(policy, NS).map((a) => ({ ...a, allowed: !a.mustNot })),
  };
}

const POLICY = policyWithoutDra();
const MUTATE = "pods.mutate.quartermaster.dev";
const PODS = "pods.validate.quartermaster.dev";
const JOBS = "jobs.validate.quartermaster.dev";
const JMUTATE = "jobs.mutate.quartermaster.dev";
const SERVICE_KEY = `${NS}/quartermaster-webhook`;
const SECRET_EVIDENCE = `service:${NS}/quartermaster-webhook`;

const hooksOf = (s: DoctorSnapshot): Webhook[] => (s.webhookConfigurations as WebhookConfiguration[]).flatMap((c) => c.webhooks ?? []);
const byName = (s: DoctorSnapshot, name: string): Webhook => hooksOf(s).find((h) => h.name === name)!;
const serviceState = (s: DoctorSnapshot) => s.services[SERVICE_KEY] as { service?: any; endpointSlices: any[] };
/** Every finding that is not ok, as "severity check subject", in report order. */
const notOk = (findings: readonly Finding[]): string[] => findings.filter((f) => f.severity !== "ok").map((f) => `${f.severity} ${f.check} ${f.subject}`);

/** Serves `leaf` (signed by `ca`) from the Secret and puts `ca` in every caBundle. */
function withCertificates(s: DoctorSnapshot, ca: { certPem: string }, leaf: { certPem: string; keyPem: string }): void {
  for (const h of hooksOf(s)) h.clientConfig.caBundle = b64(ca.certPem);
  s.certificates[SECRET_EVIDENCE] = [{ source: "secret", secret: `${NS}/quartermaster-webhook-tls`, certPem: leaf.certPem, keyPem: leaf.keyPem }];
}

function toUrl(s: DoctorSnapshot, name: string, url: string): void {
  const h = byName(s, name);
  h.clientConfig = { url, caBundle: h.clientConfig.caBundle };
}

const days = (n: number): Date => new Date(NOW.getTime() + n * 86_400_000);
const SERVING_SUBJECT = 'serving certificate "quartermaster-webhook.quartermaster.svc"';

interface Case {
  name: string;
  breakIt(s: DoctorSnapshot): void;
  /** The findings that are not ok, in report order. */
  want: string[];
  exit: 0 | 1 | 2;
  /** A finding's message, by "check subject". */
  message?: [string, RegExp];
}

const cases: Case[] = [
  { name: "a healthy installation → nothing to report, exit 0", breakIt: () => {}, want: [], exit: 0 },
  {
    name: "the Service's slices hold no endpoint (scaled to zero) → critical for the Fail webhooks, warning for the Ignore one",
    breakIt: (s) => (serviceState(s).endpointSlices[0].endpoints = []),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
    message: [
      `endpoints ${PODS}`,
      /^Service quartermaster\/quartermaster-webhook has no ready endpoint: every request it matches is refused \(failurePolicy Fail\)$/,
    ],
  },
  {
    name: "every endpoint not ready → counted as none, saying how many are not ready",
    breakIt: (s) => serviceState(s).endpointSlices[0].endpoints.forEach((e: any) => (e.conditions.ready = false)),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
    message: [`endpoints ${MUTATE}`, /has no ready endpoint \(2 not ready\): requests it matches skip it \(failurePolicy Ignore\)/],
  },
  {
    name: "a ready condition left unknown (null) → counts as ready, as EndpointSlice consumers do",
    breakIt: (s) => serviceState(s).endpointSlices[0].endpoints.forEach((e: any) => (e.conditions.ready = null)),
    want: [],
    exit: 0,
  },
  {
    name: "the Service does not exist → critical for the Fail webhooks",
    breakIt: (s) => (serviceState(s).service = undefined),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
    message: [`endpoints ${JOBS}`, /^Service quartermaster\/quartermaster-webhook: the Service does not exist/],
  },
  {
    name: "the Service lacks the port the webhooks call → critical",
    breakIt: (s) => (serviceState(s).service.spec.ports[0].port = 8443),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
    message: [`endpoints ${PODS}`, /the Service has no port 443 \(ports: 8443\)/],
  },
  {
    name: "the slices only carry another port name → no ready endpoint for the webhook port",
    breakIt: (s) => (serviceState(s).endpointSlices[0].ports[0].name = "metrics"),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
  },
  {
    name: "the Service cannot be read → endpoints not checked (warning)",
    breakIt: (s) => (s.services[SERVICE_KEY] = { error: "HTTP 403: services is forbidden" }),
    want: [`warning endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `warning endpoints ${PODS}`, `warning endpoints ${JOBS}`],
    exit: 1,
    message: [`endpoints ${PODS}`, /^not checked: Service quartermaster\/quartermaster-webhook could not be read: HTTP 403/],
  },
  {
    name: "an ExternalName Service (the Knative overlay: TLS at Knative's gateway, no Secret) → endpoints and caBundle info, exit 0",
    breakIt: (s) => {
      serviceState(s).service = { metadata: { name: "quartermaster-webhook", namespace: NS }, spec: { type: "ExternalName" } };
      serviceState(s).endpointSlices = [];
      s.certificates[SECRET_EVIDENCE] = [{ source: "secret", secret: `${NS}/quartermaster-webhook-tls`, error: "the Secret does not exist" }];
    },
    want: [
      `info endpoints ${MUTATE}`,
      `info endpoints ${JMUTATE}`,
      `info endpoints ${PODS}`,
      `info endpoints ${JOBS}`,
      `info ca-bundle ${MUTATE}`,
      `info ca-bundle ${JMUTATE}`,
      `info ca-bundle ${PODS}`,
      `info ca-bundle ${JOBS}`,
    ],
    exit: 0,
  },
  {
    name: "an empty caBundle on the Fail webhooks → critical",
    breakIt: (s) => {
      byName(s, PODS).clientConfig.caBundle = "";
      byName(s, JOBS).clientConfig.caBundle = undefined;
    },
    want: [`critical ca-bundle ${PODS}`, `critical ca-bundle ${JOBS}`],
    exit: 2,
    message: [`ca-bundle ${PODS}`, /^caBundle is empty, so the apiserver checks the server against its system roots/],
  },
  {
    name: "a caBundle of another CA → critical under Fail, warning under Ignore, naming both CAs",
    breakIt: (s) => hooksOf(s).forEach((h) => (h.clientConfig.caBundle = b64(OTHER_CA.certPem))),
    want: [`warning ca-bundle ${MUTATE}`, `warning ca-bundle ${JMUTATE}`, `critical ca-bundle ${PODS}`, `critical ca-bundle ${JOBS}`],
    exit: 2,
    message: [
      `ca-bundle ${PODS}`,
      /^caBundle does not verify the certificate in Secret quartermaster\/quartermaster-webhook-tls: signed by "CN=qm-test-ca-2026-06-01", which is not in the caBundle \("other-ca-2026-06-01"\): every request/,
    ],
  },
  {
    name: "a caBundle holding both the old and the new CA (a rotation overlap) → ok",
    breakIt: (s) => hooksOf(s).forEach((h) => (h.clientConfig.caBundle = b64(OTHER_CA.certPem + CA.certPem))),
    want: [],
    exit: 0,
  },
  {
    name: "a caBundle that is not PEM → critical",
    breakIt: (s) => (byName(s, JOBS).clientConfig.caBundle = b64("not a certificate")),
    want: [`critical ca-bundle ${JOBS}`],
    exit: 2,
    message: [`ca-bundle ${JOBS}`, /^caBundle does not parse: no PEM certificate in it/],
  },
  {
    name: "a serving certificate for another Service name → critical: the apiserver dials quartermaster-webhook.quartermaster.svc",
    breakIt: (s) => withCertificates(s, CA, OTHER_SERVICE),
    want: [`warning ca-bundle ${MUTATE}`, `warning ca-bundle ${JMUTATE}`, `critical ca-bundle ${PODS}`, `critical ca-bundle ${JOBS}`],
    exit: 2,
    message: [
      `ca-bundle ${PODS}`,
      /the certificate in Secret quartermaster\/quartermaster-webhook-tls does not name quartermaster-webhook\.quartermaster\.svc \(it names webhook, webhook\.other/,
    ],
  },
  {
    name: "the Secret's tls.key does not belong to its tls.crt → critical: a restarted server cannot load it",
    breakIt: (s) => withCertificates(s, CA, { certPem: SERVING.certPem, keyPem: OTHER_CA.keyPem }),
    want: [`warning ca-bundle ${MUTATE}`, `warning ca-bundle ${JMUTATE}`, `critical ca-bundle ${PODS}`, `critical ca-bundle ${JOBS}`],
    exit: 2,
    message: [`ca-bundle ${JOBS}`, /tls\.key in Secret quartermaster\/quartermaster-webhook-tls does not belong to its tls\.crt/],
  },
  {
    name: "no serving Secret to check against → caBundle not checked (warning)",
    breakIt: (s) => (s.certificates[SECRET_EVIDENCE] = [{ source: "secret", secret: `${NS}/quartermaster-webhook-tls`, error: "the Secret does not exist" }]),
    want: [`warning ca-bundle ${MUTATE}`, `warning ca-bundle ${JMUTATE}`, `warning ca-bundle ${PODS}`, `warning ca-bundle ${JOBS}`],
    exit: 1,
    message: [
      `ca-bundle ${PODS}`,
      /^not checked: no certificate to check the caBundle against \(in Secret quartermaster\/quartermaster-webhook-tls: the Secret does not exist\)/,
    ],
  },
  {
    name: "a URL webhook whose server presents a certificate the caBundle verifies → ok",
    breakIt: (s) => {
      toUrl(s, MUTATE, "https://127.0.0.1:8443/mutate/pods");
      s.certificates["url:https://127.0.0.1:8443/mutate/pods"] = [{ source: "handshake", address: "127.0.0.1:8443", chainPem: [SERVING.certPem, CA.certPem] }];
    },
    want: [],
    exit: 0,
  },
  {
    name: "a URL webhook nobody answers (Ignore) → warning, and its caBundle not checked",
    breakIt: (s) => {
      toUrl(s, MUTATE, "https://127.0.0.1:8443/mutate/pods");
      s.certificates["url:https://127.0.0.1:8443/mutate/pods"] = [
        { source: "handshake", address: "127.0.0.1:8443", error: "connect ECONNREFUSED 127.0.0.1:8443" },
      ];
    },
    want: [`warning endpoints ${MUTATE}`, `warning ca-bundle ${MUTATE}`],
    exit: 1,
    message: [`endpoints ${MUTATE}`, /^no server answers at https:\/\/127\.0\.0\.1:8443\/mutate\/pods \(connect ECONNREFUSED 127\.0\.0\.1:8443\)/],
  },
  {
    name: "a URL webhook by a host name its certificate lacks (Fail) → critical",
    breakIt: (s) => {
      toUrl(s, PODS, "https://webhook.example.internal/validate/pods");
      s.certificates["url:https://webhook.example.internal/validate/pods"] = [
        { source: "handshake", address: "webhook.example.internal:443", chainPem: [SERVING.certPem] },
      ];
    },
    want: [`critical ca-bundle ${PODS}`],
    exit: 2,
    message: [`ca-bundle ${PODS}`, /the certificate served at webhook\.example\.internal:443 does not name webhook\.example\.internal/],
  },
  {
    name: "a CA and serving certificate with 20 and 15 days left → warnings",
    breakIt: (s) => {
      withCertificates(s, SHORT20_CA, SHORT20);
    },
    want: ['warning certificate-expiry CA "short-ca-2026-06-01"', `warning certificate-expiry ${SERVING_SUBJECT}`],
    exit: 1,
    message: [`certificate-expiry ${SERVING_SUBJECT}`, /^expires in 15 days \(2026-06-16\); in Secret quartermaster\/quartermaster-webhook-tls$/],
  },
  {
    name: "a CA and serving certificate with 5 and 4 days left → critical",
    breakIt: (s) => {
      withCertificates(s, SHORT5_CA, SHORT5);
    },
    want: ['critical certificate-expiry CA "short-ca-2026-06-01"', `critical certificate-expiry ${SERVING_SUBJECT}`],
    exit: 2,
  },
  {
    name: "an expired serving certificate → critical, with how long ago",
    breakIt: (s) => withCertificates(s, CA, EXPIRED),
    want: [`critical certificate-expiry ${SERVING_SUBJECT}`],
    exit: 2,
    message: [`certificate-expiry ${SERVING_SUBJECT}`, /^expired 10 days ago \(2026-05-22\)/],
  },
  {
    name: "a serving certificate not valid yet (an issuer's clock ahead) → critical",
    breakIt: (s) => withCertificates(s, CA, NOT_YET),
    want: [`critical certificate-expiry ${SERVING_SUBJECT}`],
    exit: 2,
    message: [`certificate-expiry ${SERVING_SUBJECT}`, /^not valid before 2026-06-03T11:00:00\.000Z/],
  },
  {
    name: "a Fail webhook with an empty namespaceSelector → critical: it matches every protected namespace",
    breakIt: (s) => (byName(s, PODS).namespaceSelector = {}),
    want: [`warning webhook-render ${PODS}`, `critical namespace-selector ${PODS}`],
    exit: 2,
    message: [
      `namespace-selector ${PODS}`,
      /^namespaceSelector \{\} \(every namespace\) matches kube-system, kube-public, kube-node-lease, quartermaster: system pods wait on Quartermaster and are refused when it is down$/,
    ],
  },
  {
    name: "an Ignore webhook without a namespaceSelector → warning",
    breakIt: (s) => delete byName(s, MUTATE).namespaceSelector,
    want: [`warning webhook-render ${MUTATE}`, `warning namespace-selector ${MUTATE}`],
    exit: 1,
  },
  {
    name: "a selector on the opt-in label alone → warning: kube-system is one label away",
    breakIt: (s) => byName(s, PODS).namespaceSelector!.matchExpressions!.pop(),
    want: [`warning webhook-render ${PODS}`, `warning namespace-selector ${PODS}`],
    exit: 1,
    message: [
      `namespace-selector ${PODS}`,
      /^kube-system, kube-public, kube-node-lease, quartermaster are excluded only by labels \(quartermaster\.dev\/enabled In \(true\)\)/,
    ],
  },
  {
    name: "the opt-in label alone and kube-system labelled in → critical for the Fail webhook",
    breakIt: (s) => {
      byName(s, PODS).namespaceSelector!.matchExpressions!.pop();
      s.protectedNamespaces["kube-system"]!["quartermaster.dev/enabled"] = "true";
    },
    want: [`warning webhook-render ${PODS}`, `critical namespace-selector ${PODS}`],
    exit: 2,
    message: [`namespace-selector ${PODS}`, /matches kube-system: system pods wait/],
  },
  {
    name: "matchLabels pinning another namespace's name → excluded by name, ok (but not the policy's scope)",
    breakIt: (s) => (byName(s, PODS).namespaceSelector = { matchLabels: { "kubernetes.io/metadata.name": "team-a" } }),
    want: [`warning webhook-render ${PODS}`],
    exit: 1,
  },
  {
    name: "Quartermaster installed in another namespace the selectors do not exclude → warning for each webhook",
    breakIt: (s) => {
      s.namespace = "qm-system";
      s.reconciler = { cronJob: undefined, jobs: [] };
      s.access = [];
      s.ledger = { unread: "test" };
    },
    want: [
      `warning webhook-render ${MUTATE}`,
      `warning webhook-render ${JMUTATE}`,
      `warning webhook-render ${PODS}`,
      `warning webhook-render ${JOBS}`,
      `warning namespace-selector ${MUTATE}`,
      `warning namespace-selector ${JMUTATE}`,
      `warning namespace-selector ${PODS}`,
      `warning namespace-selector ${JOBS}`,
      "warning reconciler CronJob qm-system/quartermaster-reconciler",
      "info ledger ledger in qm-system",
    ],
    exit: 1,
    message: [`namespace-selector ${JOBS}`, /^qm-system is excluded only by labels/],
  },
  {
    name: "sideEffects Some → warning: dry runs are refused",
    breakIt: (s) => (byName(s, JOBS).sideEffects = "Some"),
    want: [`warning side-effects ${JOBS}`],
    exit: 1,
    message: [`side-effects ${JOBS}`, /refuses dry-run requests/],
  },
  {
    name: "sideEffects NoneOnDryRun → ok",
    breakIt: (s) => (byName(s, JOBS).sideEffects = "NoneOnDryRun"),
    want: [],
    exit: 0,
  },
  {
    name: "timeoutSeconds 10 and unset (the API's default 10) → warnings above the policy's 5",
    breakIt: (s) => {
      byName(s, PODS).timeoutSeconds = 10;
      delete byName(s, JOBS).timeoutSeconds;
    },
    want: [`warning timeout ${PODS}`, `warning timeout ${JOBS}`],
    exit: 1,
    message: [`timeout ${JOBS}`, /^timeoutSeconds 10 is above the policy's webhook\.timeoutSeconds 5/],
  },
  {
    name: "admissionReviewVersions without v1 on a Fail webhook → critical",
    breakIt: (s) => (byName(s, PODS).admissionReviewVersions = ["v1beta1"]),
    want: [`critical webhook-configuration ${PODS}`],
    exit: 2,
    message: [`webhook-configuration ${PODS}`, /admissionReviewVersions \[v1beta1\] lacks v1/],
  },
  {
    name: "failurePolicy left unset → judged as Fail (the v1 default)",
    breakIt: (s) => {
      delete byName(s, MUTATE).failurePolicy;
      serviceState(s).endpointSlices = [];
    },
    want: [`critical endpoints ${MUTATE}`, `warning endpoints ${JMUTATE}`, `critical endpoints ${PODS}`, `critical endpoints ${JOBS}`],
    exit: 2,
  },
  {
    name: "the jobs webhook missing → warning: job limits are not enforced",
    breakIt: (s) => (s.webhookConfigurations as WebhookConfiguration[])[1]!.webhooks!.pop(),
    want: [`warning webhook-configuration ${JOBS}`],
    exit: 1,
    message: [`webhook-configuration ${JOBS}`, /^not registered in any ValidatingWebhookConfiguration: job limits are not enforced$/],
  },
  {
    name: "no webhook configurations at all → a warning for each expected webhook",
    breakIt: (s) => (s.webhookConfigurations = []),
    want: [
      `warning webhook-configuration ${MUTATE}`,
      `warning webhook-configuration ${JMUTATE}`,
      `warning webhook-configuration ${PODS}`,
      `warning webhook-configuration ${JOBS}`,
    ],
    exit: 1,
  },
  {
    name: "webhook configurations that cannot be read → not checked (warning)",
    breakIt: (s) => (s.webhookConfigurations = { error: "HTTP 403: forbidden" }),
    want: ["warning webhook-configuration webhook configurations"],
    exit: 1,
  },
];

describe("doctor: webhooks, endpoints, certificates, selectors", () => {
  for (const c of cases) {
    it(c.name, () => {
      const s = healthy();
      c.breakIt(s);
      const r = diagnose(s, POLICY);
      assert.deepEqual(notOk(r.findings), c.want);
      assert.equal(r.exitCode, c.exit);
      if (c.message) {
        const f = r.findings.find((x) => `${x.check} ${x.subject}` === c.message![0]);
        assert.ok(f, `no finding ${c.message[0]}`);
        assert.match(f.message, c.message[1]);
      }
      for (const f of r.findings)
        assert.equal(f.fix === "", f.severity === "ok" || f.severity === "info", `${f.check} ${f.subject}: a fix exactly when there is something to do`);
    });
  }

  it("a healthy installation reports every check as ok, each webhook once per check", () => {
    const r = diagnose(healthy(), POLICY);
    const count = (check: string): number => r.findings.filter((f) => f.check === check && f.severity === "ok").length;
    for (const check of ["webhook-configuration", "webhook-render", "endpoints", "ca-bundle", "namespace-selector", "side-effects", "timeout"])
      assert.equal(count(check), 4, check);
    assert.equal(count("certificate-expiry"), 2, "the CA once, the serving certificate once");
    assert.equal(count("rbac"), 2);
    assert.equal(r.status, "healthy");
  });

  it("onJobLookupFailure deny → the webhook without its job GET is critical (every training pod refused)", () => {
    const deny = { ...POLICY, clusterSpec: { ...POLICY.clusterSpec, onJobLookupFailure: "deny" as const } };
    const s = healthy();
    s.access = requiredAccess(deny, NS).map((a) => ({ ...a, allowed: !a.mustNot && !(a.serviceAccount.endsWith("webhook") && a.resource === "tfjobs") }));
    assert.deepEqual(notOk(diagnose(s, deny).findings), ["critical rbac ServiceAccount quartermaster/quartermaster-webhook"]);
  });
});

describe("doctor: label selectors", () => {
  const kubeSystem = { "kubernetes.io/metadata.name": "kube-system" };
  const optedIn = { "kubernetes.io/metadata.name": "team-a", "quartermaster.dev/enabled": "true" };
  const matchCases: Array<{ name: string; selector: LabelSelector | undefined; labels: Record<string, string>; want: boolean }> = [
    { name: "no selector → matches everything", selector: undefined, labels: kubeSystem, want: true },
    { name: "empty selector → matches everything", selector: {}, labels: kubeSystem, want: true },
    { name: "matchLabels equal → match", selector: { matchLabels: { "quartermaster.dev/enabled": "true" } }, labels: optedIn, want: true },
    { name: "matchLabels missing → no match", selector: { matchLabels: { "quartermaster.dev/enabled": "true" } }, labels: kubeSystem, want: false },
    {
      name: "In with the value → match",
      selector: { matchExpressions: [{ key: "quartermaster.dev/enabled", operator: "In", values: ["true"] }] },
      labels: optedIn,
      want: true,
    },
    {
      name: "In without the key → no match",
      selector: { matchExpressions: [{ key: "quartermaster.dev/enabled", operator: "In", values: ["true"] }] },
      labels: kubeSystem,
      want: false,
    },
    {
      name: "NotIn without the key → match",
      selector: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["system"] }] },
      labels: kubeSystem,
      want: true,
    },
    {
      name: "NotIn with the value → no match",
      selector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }] },
      labels: kubeSystem,
      want: false,
    },
    {
      name: "Exists → match on the key",
      selector: { matchExpressions: [{ key: "quartermaster.dev/enabled", operator: "Exists" }] },
      labels: optedIn,
      want: true,
    },
    {
      name: "DoesNotExist → no match on the key",
      selector: { matchExpressions: [{ key: "quartermaster.dev/enabled", operator: "DoesNotExist" }] },
      labels: optedIn,
      want: false,
    },
    { name: "an unknown operator → no match", selector: { matchExpressions: [{ key: "a", operator: "Like" }] }, labels: kubeSystem, want: false },
  ];
  for (const c of matchCases) it(`selectorMatches: ${c.name}`, () => assert.equal(selectorMatches(c.selector, c.labels), c.want));

  const nameCases: Array<{ name: string; selector: LabelSelector | undefined; want: boolean }> = [
    { name: "no selector → not excluded", selector: undefined, want: false },
    { name: "opt-in label only → not excluded by name", selector: { matchLabels: { "quartermaster.dev/enabled": "true" } }, want: false },
    {
      name: "name NotIn listing it → excluded",
      selector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }] },
      want: true,
    },
    {
      name: "name NotIn listing others → not excluded",
      selector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-public"] }] },
      want: false,
    },
    {
      name: "name In without it → excluded",
      selector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["team-a"] }] },
      want: true,
    },
    { name: "matchLabels on another name → excluded", selector: { matchLabels: { "kubernetes.io/metadata.name": "team-a" } }, want: true },
    { name: "matchLabels on its own name → not excluded", selector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, want: false },
  ];
  for (const c of nameCases) it(`excludesByName(kube-system): ${c.name}`, () => assert.equal(excludesByName(c.selector, "kube-system"), c.want));
});

describe("doctor: certificates", () => {
  const [ca] = parsePemBundle(CA.certPem);
  const [other] = parsePemBundle(OTHER_CA.certPem);
  const [leaf] = parsePemBundle(SERVING.certPem);

  it("a bundle with two certificates parses into two; text without PEM throws", () => {
    assert.equal(parsePemBundle(CA.certPem + OTHER_CA.certPem).length, 2);
    assert.throws(() => parsePemBundle("hello"), /no PEM certificate/);
  });

  it("chainsTo: the issuing CA verifies, another does not, and none is no certificate", () => {
    assert.equal(chainsTo([leaf!], [other!, ca!]).ok, true);
    const r = chainsTo([leaf!], [other!]);
    assert.equal(r.ok, false);
    assert.equal(chainsTo([], [ca!]).ok, false);
  });

  it("chainsTo: a certificate with the CA's name but another key does not verify (same subject is not enough)", async () => {
    const impostor = await createCertificateAuthority("qm-test-ca", 730, NOW); // same CN, same day: same subject, other key
    const [fake] = parsePemBundle(impostor.certPem);
    assert.equal(fake!.subject, ca!.subject);
    assert.equal(chainsTo([leaf!], [fake!]).ok, false);
  });

  it("coversHost: the Service DNS names and the IP SAN, not others; the CN alone never counts", async () => {
    assert.equal(coversHost(leaf!, "quartermaster-webhook.quartermaster.svc"), true);
    assert.equal(coversHost(leaf!, "127.0.0.1"), true);
    assert.equal(coversHost(leaf!, "10.0.0.1"), false);
    assert.equal(coversHost(leaf!, "webhook.example.internal"), false);
    const cnOnly = await issueCertificate({ ca: CA, commonName: "only-cn.example", usage: "server", days: 1, now: NOW });
    assert.equal(coversHost(parsePemBundle(cnOnly.certPem)[0]!, "only-cn.example"), false);
  });

  it("keyMatches: its own key, not another's, not garbage", () => {
    assert.equal(keyMatches(leaf!, SERVING.keyPem), true);
    assert.equal(keyMatches(leaf!, CA.keyPem), false);
    assert.equal(keyMatches(leaf!, "not a key"), false);
  });

  const severityCases: Array<[number, Severity]> = [
    [365, "ok"],
    [30, "ok"],
    [29.9, "warning"],
    [7, "warning"],
    [6.99, "critical"],
    [0.5, "critical"],
    [-3, "critical"],
  ];
  for (const [d, want] of severityCases) it(`expirySeverity(${d} days) → ${want}`, () => assert.equal(expirySeverity(d), want));

  it("describeExpiry: whole days left or ago, with the date", () => {
    assert.equal(describeExpiry(leaf!, NOW), "expires in 365 days (2027-06-01)");
    assert.equal(describeExpiry(leaf!, days(366)), "expired 1 day ago (2027-06-01)");
    assert.equal(describeExpiry(leaf!, days(365.5)), "expired today (2027-06-01)");
  });
});

describe("doctor: ready endpoints", () => {
  it("addresses of ready endpoints across slices carrying the Service port's name; unnamed ports match unnamed", () => {
    const state = {
      service: { metadata: { name: "s" }, spec: { ports: [{ port: 443 }] } },
      endpointSlices: [
        {
          metadata: { name: "a" },
          endpoints: [{ addresses: ["10.0.0.1"] }, { addresses: ["10.0.0.2"], conditions: { ready: false } }],
          ports: [{ port: 8443 }],
        },
        { metadata: { name: "b" }, endpoints: [{ addresses: ["10.0.0.3"], conditions: { ready: true } }], ports: [{ name: "", port: 8443 }] },
        { metadata: { name: "c" }, endpoints: [{ addresses: ["10.0.0.4"] }], ports: [{ name: "metrics", port: 9090 }] },
        { metadata: { name: "d" }, endpoints: null, ports: null },
      ],
    };
    assert.deepEqual(readyAddresses(state, 443), { addresses: ["10.0.0.1", "10.0.0.3"], notReady: 1 });
  });
});

describe("doctor: exit code and output", () => {
  const f = (severity: Severity): Finding => ({ check: "timeout", severity, subject: "x", message: "m", fix: severity === "ok" ? "" : "do it" });
  const exitCases: Array<[Severity[], 0 | 1 | 2]> = [
    [[], 0],
    [["ok", "info"], 0],
    [["ok", "warning", "info"], 1],
    [["warning", "critical", "ok"], 2],
  ];
  for (const [severities, want] of exitCases) it(`exit code of [${severities.join(", ")}] → ${want}`, () => assert.equal(exitCode(severities.map(f)), want));

  it("the table: aligned columns, each fix under its finding, a summary with the exit code", () => {
    const table = findingsTable(
      report([
        { check: "endpoints", severity: "critical", subject: PODS, message: "no ready endpoint", fix: "scale it up" },
        { check: "timeout", severity: "ok", subject: MUTATE, message: "timeoutSeconds 5", fix: "" },
      ]),
    );
    assert.equal(
      table,
      [
        "SEVERITY  CHECK      SUBJECT                          FINDING",
        "critical  endpoints  pods.validate.quartermaster.dev  no ready endpoint",
        "                                                      fix: scale it up",
        "ok        timeout    pods.mutate.quartermaster.dev    timeoutSeconds 5",
        "",
        "critical (exit 2): critical 1, warning 0, info 0, ok 1",
      ].join("\n"),
    );
  });

  it("a cluster that cannot be read → one critical finding, exit 2", () => {
    const r = unreachable("connect ECONNREFUSED 127.0.0.1:6443");
    assert.equal(r.exitCode, 2);
    assert.deepEqual(notOk(r.findings), ["critical cluster apiserver"]);
  });
});

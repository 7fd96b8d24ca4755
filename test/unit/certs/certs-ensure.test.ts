/**
 * `certs ensure` over an in-memory store through a whole certificate life: fresh install, a run with
 * nothing due, serving-certificate renewal, CA rotation with the old CA kept for the overlap, the old CA
 * dropped after it, and a dry run. The order of the writes is asserted: CA, then caBundles, then the
 * serving Secret (after the settle wait when a CA was added).
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { describe, it } from "node:test";
import { ensureCertificates, type CertStore, type EnsureOptions, type StoredSecret, type StoredWebhookConfiguration } from "../../../src/certs/ensure.js";
import { splitPem } from "../../../src/certs/plan.js";

const DAY = 86400_000;
const START = new Date("2026-11-22T12:00:00Z");

function memoryStore(): CertStore & { log: string[]; secrets: Map<string, StoredSecret>; configs: StoredWebhookConfiguration[] } {
  const secrets = new Map<string, StoredSecret>();
  let version = 0;
  const configs: StoredWebhookConfiguration[] = [
    { kind: "MutatingWebhookConfiguration", name: "quartermaster", webhooks: [{ name: "pods.mutate.quartermaster.dev", caBundle: "" }] },
    {
      kind: "ValidatingWebhookConfiguration",
      name: "quartermaster",
      webhooks: [
        { name: "pods.validate.quartermaster.dev", caBundle: "" },
        { name: "jobs.validate.quartermaster.dev", caBundle: "" },
      ],
    },
  ];
  const log: string[] = [];
  return {
    log,
    secrets,
    configs,
    async readSecret(name) {
      const s = secrets.get(name);
      return s && { data: { ...s.data }, version: s.version };
    },
    async writeSecret(name, type, data, previous) {
      const cur = secrets.get(name);
      if (previous ? cur?.version !== previous.version : cur) throw Object.assign(new Error(`Secret ${name} changed`), { code: 409 });
      secrets.set(name, { data: { ...data }, version: String(++version) });
      log.push(`secret ${name} (${type})`);
    },
    async readWebhookConfigurations() {
      return structuredClone(configs);
    },
    async writeCaBundle(config, webhooks, bundle) {
      const c = configs.find((x) => x.kind === config.kind && x.name === config.name)!;
      for (const w of c.webhooks) if (webhooks.includes(w.name)) w.caBundle = bundle;
      log.push(`caBundle ${config.kind} ${webhooks.join(",")}`);
    },
  };
}

function options(now: () => Date, sleeps: number[], extra: Partial<EnsureOptions> = {}): EnsureOptions {
  return {
    service: "quartermaster-webhook",
    namespace: "quartermaster",
    servingSecret: "quartermaster-webhook-tls",
    caSecret: "quartermaster-webhook-ca",
    dnsNames: [],
    ips: ["127.0.0.1"],
    days: 90,
    caDays: 1095,
    renewBeforeMs: 30 * DAY,
    caRenewBeforeMs: 180 * DAY,
    overlapMs: DAY,
    settleMs: 5000,
    dryRun: false,
    now,
    sleep: async (ms) => void sleeps.push(ms),
    ...extra,
  };
}

const fingerprints = (bundle: string): string[] => splitPem(bundle).map((p) => new X509Certificate(p).fingerprint256);
const fp = (pem: string | undefined): string => new X509Certificate(pem!).fingerprint256;

describe("ensureCertificates through a certificate's life", () => {
  const store = memoryStore();
  let now = START;
  const sleeps: number[] = [];
  const run = (extra: Partial<EnsureOptions> = {}) =>
    ensureCertificates(
      store,
      options(() => now, sleeps, extra),
    );
  const bundles = (): string[][] => store.configs.flatMap((c) => c.webhooks.map((w) => fingerprints(w.caBundle)));
  const secret = (name: string): Record<string, string> => store.secrets.get(name)!.data;
  let firstCa = "";
  /** A new CA's writes, in their order: the CA Secret, both caBundles, then the serving Secret. */
  const NEW_CA_WRITES = [
    "secret quartermaster-webhook-ca (Opaque)",
    "caBundle MutatingWebhookConfiguration pods.mutate.quartermaster.dev",
    "caBundle ValidatingWebhookConfiguration pods.validate.quartermaster.dev,jobs.validate.quartermaster.dev",
    "secret quartermaster-webhook-tls (kubernetes.io/tls)",
  ];

  it("fresh install: CA, then every webhook's caBundle, then (after the settle wait) the serving Secret", async () => {
    const steps = await run();
    assert.deepEqual(store.log, NEW_CA_WRITES);
    assert.deepEqual(sleeps, [5000]);
    assert.deepEqual(
      steps.map((s) => `${s.what} ${s.changed}`),
      ["ca true", "caBundle true", "caBundle true", "serving true"],
    );
    firstCa = secret("quartermaster-webhook-ca")["ca.crt"]!;
    const tls = secret("quartermaster-webhook-tls");
    assert.equal(fp(tls["ca.crt"]), fp(firstCa));
    const leaf = new X509Certificate(tls["tls.crt"]!);
    assert.ok(leaf.checkIssued(new X509Certificate(firstCa)));
    assert.match(leaf.subjectAltName!, /DNS:quartermaster-webhook.quartermaster.svc, .*IP Address:127.0.0.1/);
    assert.deepEqual(bundles(), [[fp(firstCa)], [fp(firstCa)], [fp(firstCa)]]);
  });

  it("run again with nothing due: no writes", async () => {
    store.log.length = 0;
    const steps = await run();
    assert.deepEqual(store.log, []);
    assert.ok(
      steps.every((s) => !s.changed),
      JSON.stringify(steps),
    );
  });

  it("the serving certificate within its renew-before window: a new one under the same CA, caBundles untouched, no wait", async () => {
    store.log.length = 0;
    sleeps.length = 0;
    const before = secret("quartermaster-webhook-tls")["tls.crt"];
    now = new Date(START.getTime() + 65 * DAY);
    await run();
    assert.deepEqual(store.log, ["secret quartermaster-webhook-tls (kubernetes.io/tls)"]);
    assert.deepEqual(sleeps, []);
    const after = new X509Certificate(secret("quartermaster-webhook-tls")["tls.crt"]!);
    assert.notEqual(after.fingerprint256, fp(before));
    assert.ok(after.checkIssued(new X509Certificate(firstCa)));
  });

  let secondCa = "";
  it("the CA within its renew-before window: new CA; the caBundles hold both (new first); the serving Secret follows after the wait", async () => {
    store.log.length = 0;
    now = new Date(START.getTime() + 920 * DAY);
    await run();
    assert.deepEqual(store.log, NEW_CA_WRITES);
    assert.deepEqual(sleeps, [5000]);
    secondCa = secret("quartermaster-webhook-ca")["ca.crt"]!;
    assert.notEqual(fp(secondCa), fp(firstCa));
    assert.deepEqual(bundles(), Array(3).fill([fp(secondCa), fp(firstCa)]));
    assert.ok(new X509Certificate(secret("quartermaster-webhook-tls")["tls.crt"]!).checkIssued(new X509Certificate(secondCa)));
  });

  it("during the overlap a second run changes nothing (the old CA stays)", async () => {
    store.log.length = 0;
    now = new Date(START.getTime() + 920.5 * DAY);
    await run();
    assert.deepEqual(store.log, []);
  });

  it("after the overlap: the old CA is dropped from every caBundle, nothing else changes", async () => {
    store.log.length = 0;
    sleeps.length = 0;
    now = new Date(START.getTime() + 921.1 * DAY);
    const steps = await run();
    assert.deepEqual(store.log, [
      "caBundle MutatingWebhookConfiguration pods.mutate.quartermaster.dev",
      "caBundle ValidatingWebhookConfiguration pods.validate.quartermaster.dev,jobs.validate.quartermaster.dev",
    ]);
    assert.deepEqual(sleeps, [], "dropping a CA needs no wait");
    assert.deepEqual(bundles(), Array(3).fill([fp(secondCa)]));
    assert.match(steps.find((s) => s.what === "caBundle")!.detail, /dropped quartermaster-ca-\d{4}-\d\d-\d\d: replaced, and the overlap ended/);
  });

  it("a deleted serving Secret is re-issued under the same CA, caBundles untouched", async () => {
    store.log.length = 0;
    store.secrets.delete("quartermaster-webhook-tls");
    await run();
    assert.deepEqual(store.log, ["secret quartermaster-webhook-tls (kubernetes.io/tls)"]);
    assert.ok(new X509Certificate(secret("quartermaster-webhook-tls")["tls.crt"]!).checkIssued(new X509Certificate(secondCa)));
  });
});

describe("ensureCertificates --dry-run", () => {
  it("reports the same steps as a real run and writes nothing", async () => {
    const store = memoryStore();
    const sleeps: number[] = [];
    const steps = await ensureCertificates(
      store,
      options(() => START, sleeps, { dryRun: true }),
    );
    assert.deepEqual(
      steps.map((s) => `${s.what} ${s.target} ${s.changed}`),
      [
        "ca Secret/quartermaster-webhook-ca true",
        "caBundle MutatingWebhookConfiguration/quartermaster true",
        "caBundle ValidatingWebhookConfiguration/quartermaster true",
        "serving Secret/quartermaster-webhook-tls true",
      ],
    );
    assert.deepEqual(store.log, []);
    assert.deepEqual(sleeps, []);
  });
});

describe("ensureCertificates with a conflicting writer", () => {
  it("a Secret changed since it was read fails the run (the next run starts from the winner's state)", async () => {
    const store = memoryStore();
    const read = store.readSecret.bind(store);
    store.readSecret = async (name) => {
      const s = await read(name);
      if (name === "quartermaster-webhook-ca") store.secrets.set(name, { data: { "ca.crt": "x", "ca.key": "y" }, version: "race" });
      return s;
    };
    await assert.rejects(
      ensureCertificates(
        store,
        options(() => START, []),
      ),
      /Secret quartermaster-webhook-ca changed/,
    );
  });
});

describe("certs ensure / install flags", () => {
  const cases: Array<[string, string[], RegExp]> = [
    ["ensure without --service", ["certs", "ensure", "--namespace", "qm"], /certs ensure: --service is required/],
    ["ensure without --namespace", ["certs", "ensure", "--service", "s"], /certs ensure: --namespace is required/],
    [
      "renew-before not shorter than the validity",
      ["certs", "ensure", "--service", "s", "--namespace", "n", "--days", "30", "--renew-before-days", "30"],
      /--renew-before-days must be less than --days/,
    ],
    [
      "CA renew-before not shorter than its validity",
      ["certs", "ensure", "--service", "s", "--namespace", "n", "--ca-days", "100", "--ca-renew-before-days", "180"],
      /--ca-renew-before-days must be less than --ca-days/,
    ],
    ["a negative overlap", ["certs", "ensure", "--service", "s", "--namespace", "n", "--overlap-hours=-1"], /--overlap-hours must be an integer from 0/],
    ["install without --ca", ["certs", "install"], /certs install: --ca is required/],
    ["an unknown certs subcommand", ["certs", "rotate"], /certs: expected 'generate', 'ensure' or 'install'/],
  ];
  for (const [name, argv, message] of cases) {
    it(`${name}: usage error (exit 2)`, async () => {
      const { runCli } = await import("../../../src/cli/commands.js");
      const err: string[] = [];
      const code = await runCli(argv, { stdout: () => undefined, stderr: (l) => void err.push(l), cwd: process.cwd(), shutdown: new Promise(() => undefined) });
      assert.equal(code, 2, err.join("\n"));
      assert.match(err.join("\n"), message);
    });
  }
});

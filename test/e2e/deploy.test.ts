/**
 * End to end: what a platform engineer applies, against a real kube-apiserver.
 *
 * 1. Every rendered variant (manifests/base and each overlay) is accepted by a server-side dry-run apply
 *    (kubectl's strict field validation, so unknown fields fail too). CRD-typed objects (cert-manager,
 *    Knative, ...) get minimal CRDs made here from the kinds in the renders, which accept any content: the
 *    apiserver checks their envelope and test/e2e/manifests.test.ts check their schema.
 * 2. The self-managed overlay's certificate rotation under load: `certs ensure`, run with the CronJob's own
 *    arguments as its ServiceAccount, creates the CA and serving Secrets and the caBundles; the Secret is
 *    projected into the webhook server's directory the way kubelet does (a `..data` symlink swap); then,
 *    while pods are created without pause, the serving certificate is renewed, the CA is replaced (both CAs
 *    in the caBundle during the overlap), and the old CA is dropped. No admission fails.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { assertDryRunAccepted, installMinimalCrds } from "./harness/crds.js";
import { ROOT, cli, renderWebhookConfigurations, webhookProcess, type WebhookProcess } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${++seq}`;
const NS = "quartermaster";

type Obj = Record<string, any>;

function variants(): Array<{ name: string; dir: string }> {
  const overlays = join(ROOT, "manifests/overlays");
  return [
    { name: "base", dir: join(ROOT, "manifests/base") },
    ...readdirSync(overlays, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => ({ name: d.name, dir: join(overlays, d.name) })),
  ];
}

/**
 * Mirrors a Secret into `dir` as kubelet does for a Secret volume: each version in a `..<time>` directory,
 * `..data` swapped to it by rename, and `tls.crt` etc. as symlinks through `..data`.
 */
function projectSecret(cp: ControlPlane, name: string, dir: string, pollMs: number): { stop(): void; versions: () => number; ready: Promise<void> } {
  let version = "";
  let versions = 0;
  let stopped = false;
  let resolveReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (resolveReady = r));
  const write = (data: Record<string, string>): void => {
    const ts = join(dir, `..${new Date().toISOString().replace(/[:.]/g, "_")}_${versions}`);
    mkdirSync(ts);
    for (const [k, v] of Object.entries(data)) writeFileSync(join(ts, k), Buffer.from(v, "base64"));
    const tmp = join(dir, "..data_tmp");
    rmSync(tmp, { force: true });
    symlinkSync(ts.slice(dir.length + 1), tmp);
    renameSync(tmp, join(dir, "..data"));
    for (const k of Object.keys(data)) if (!existsSync(join(dir, k))) symlinkSync(join("..data", k), join(dir, k));
    versions++;
  };
  void (async () => {
    while (!stopped) {
      const r = await cp.api("GET", `/api/v1/namespaces/${NS}/secrets/${name}`);
      if (r.status === 200 && r.body.metadata.resourceVersion !== version) {
        version = r.body.metadata.resourceVersion;
        write(r.body.data);
        resolveReady();
      }
      await sleep(pollMs);
    }
  })();
  return { stop: () => void (stopped = true), versions: () => versions, ready };
}

describe("deploying Quartermaster", () => {
  let cp: ControlPlane;
  const rendered = new Map<string, Obj[]>();

  before(async () => {
    cp = await startControlPlane();
    for (const v of variants()) {
      const r = await cp.kubectl(["kustomize", v.dir]);
      assert.equal(r.code, 0, `${v.name}: ${r.stderr}`);
      rendered.set(
        v.name,
        parseAllDocuments(r.stdout)
          .map((d) => d.toJS() as Obj)
          .filter(Boolean),
      );
    }
    await installMinimalCrds(cp, [...rendered.values()].flat());
    // Namespaced objects are dry-run into their namespace, which must exist.
    assert.equal((await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } })).status, 201);
  });

  after(async () => {
    await cp?.stop();
  });

  for (const v of variants()) {
    it(`${v.name}: every object is accepted by a server-side dry-run apply`, async () => {
      const objects = rendered.get(v.name)!;
      const r = await cp.kubectl(["apply", "-k", v.dir, "--dry-run=server"]);
      assertDryRunAccepted(r, objects);
    });
  }

  describe("self-managed certificates: rotation under load", () => {
    let wh: WebhookProcess;
    let projector: ReturnType<typeof projectSecret>;
    let certsArgs: string[];
    let certsKubeconfig: string;

    const createPod = (ns: string, name: string, dryRun = false) =>
      cp.api("POST", `/api/v1/namespaces/${ns}/pods${dryRun ? "?dryRun=All" : ""}`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, labels: { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker" } },
        spec: { restartPolicy: "Never", containers: [{ name: "tensorflow", image: "tensorflow/tensorflow:2.16.1" }] },
      });
    /** `certs ensure` with the CronJob's arguments, as the certs ServiceAccount, plus test-only flags. */
    const ensure = async (...extra: string[]): Promise<string> => {
      const r = await cli([...certsArgs, `--kubeconfig=${certsKubeconfig}`, "--ip=127.0.0.1", ...extra]);
      assert.equal(r.code, 0, `certs ensure ${extra.join(" ")}: ${r.stdout}\n${r.stderr}`);
      return r.stdout;
    };
    const bundles = async (): Promise<string[][]> => {
      const out: string[][] = [];
      for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
        const c = (await cp.api("GET", `/apis/admissionregistration.k8s.io/v1/${kind}/quartermaster`)).body;
        for (const w of c.webhooks) {
          const pem = Buffer.from(w.clientConfig.caBundle ?? "", "base64").toString();
          out.push((pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new X509Certificate(p).fingerprint256));
        }
      }
      return out;
    };
    const reloads = (): number => wh.lines.filter((l) => l.msg === "tls: serving key pair reloaded").length;
    const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> => cp.until(what, cond, ms, 100);

    before(async () => {
      const objects = rendered.get("self-managed")!;
      const own = objects.filter((o) => !/WebhookConfiguration$/.test(o.kind) && o.kind !== "Namespace");
      const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own }));
      assert.equal(applied.code, 0, applied.stderr);
      const cron = objects.find((o) => o.kind === "CronJob" && o.metadata.name === "quartermaster-certs")!;
      certsArgs = cron.spec.jobTemplate.spec.template.spec.containers[0].args;
      certsKubeconfig = (await cp.serviceAccount(NS, cron.spec.jobTemplate.spec.template.spec.serviceAccountName)).kubeconfig;
      const r = await cp.api("POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "team-a", labels: { "quartermaster.dev/enabled": "true" } },
      });
      assert.equal(r.status, 201);
      wh = await webhookProcess({ kubeconfig: cp.kubeconfig });
      // The webhook configurations as a fresh install has them: no caBundle yet, pointed at the local server.
      const configs = await renderWebhookConfigurations(cp, wh.port, "");
      for (const c of configs) for (const w of c.webhooks) delete w.clientConfig.caBundle;
      const cfg = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
      assert.equal(cfg.code, 0, cfg.stderr);
    });

    after(async () => {
      projector?.stop();
      await wh?.stop();
    });

    it("fresh install: certs ensure (the CronJob's args, its ServiceAccount) creates both Secrets and fills both caBundles", async () => {
      const out = await ensure("--days=30", "--renew-before-days=20", "--ca-days=200", "--ca-renew-before-days=100");
      assert.match(out, /^ca Secret\/quartermaster-webhook-ca: changed: new CA/m);
      assert.match(out, /^caBundle MutatingWebhookConfiguration\/quartermaster: changed/m);
      assert.match(out, /^caBundle ValidatingWebhookConfiguration\/quartermaster: changed/m);
      assert.match(out, /^serving Secret\/quartermaster-webhook-tls: changed: new certificate/m);
      const b = await bundles();
      assert.equal(b.length, 5, "one caBundle per webhook of manifests/base (pods and jobs, mutating and validating; claims validating)");
      assert.ok(
        b.every((cas) => cas.length === 1 && cas[0] === b[0]![0]),
        JSON.stringify(b),
      );
      // The Secret volume as kubelet projects it, in the directory the server reads.
      for (const f of ["tls.crt", "tls.key", "ca.crt"]) rmSync(join(wh.certDir, f), { force: true });
      projector = projectSecret(cp, "quartermaster-webhook-tls", wh.certDir, 500);
      await projector.ready;
      await wh.start();
      await until("admission through the new certificates", async () => (await createPod("team-a", unique("probe"), true)).status === 201);
      const again = await ensure("--days=30", "--renew-before-days=20", "--ca-days=200", "--ca-renew-before-days=100");
      assert.ok(
        again
          .split("\n")
          .filter(Boolean)
          .every((l) => l.includes(": unchanged: ")),
        `a second run changed something:\n${again}`,
      );
    });

    it("renewal, CA replacement with overlap, and the old CA dropped, all under load: no admission fails", async () => {
      let stop = false;
      let created = 0;
      const failures: string[] = [];
      const worker = async (): Promise<void> => {
        while (!stop) {
          const r = await createPod("team-a", unique("rot"));
          if (r.status === 201) created++;
          else failures.push(`${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
        }
      };
      const workers = Array.from({ length: 4 }, worker);
      try {
        await sleep(500);
        const firstCa = (await bundles())[0]![0]!;

        // 1. The serving certificate is due (30 days left, renewed 31 days before expiry): same CA.
        let before = reloads();
        const renewed = await ensure("--days=60", "--renew-before-days=31", "--ca-days=200", "--ca-renew-before-days=100");
        assert.match(renewed, /^serving Secret\/quartermaster-webhook-tls: changed: new certificate .*within the renew-before window/m);
        assert.match(renewed, /^caBundle MutatingWebhookConfiguration\/quartermaster: unchanged/m);
        await until("the server to reload the renewed certificate", () => reloads() > before);

        // 2. The CA is due (200 days left, replaced 300 days before expiry): both CAs trusted, then the new pair.
        before = reloads();
        const rotated = await ensure("--days=60", "--renew-before-days=31", "--ca-days=1095", "--ca-renew-before-days=300");
        assert.match(rotated, /^ca Secret\/quartermaster-webhook-ca: changed: new CA .*within the renew-before window/m);
        assert.match(rotated, /^caBundle ValidatingWebhookConfiguration\/quartermaster: changed: 2 CA\(s\)/m);
        assert.match(rotated, /^serving Secret\/quartermaster-webhook-tls: changed: new certificate .*not issued by the current CA/m);
        const during = await bundles();
        assert.ok(
          during.every((s) => s.length === 2 && s[1] === firstCa && s[0] !== firstCa),
          JSON.stringify(during),
        );
        await until("the server to reload the certificate from the new CA", () => reloads() > before);
        await sleep(1000);

        // 3. The overlap is over (0 hours here): the old CA leaves every caBundle.
        const dropped = await ensure("--days=60", "--renew-before-days=31", "--ca-days=1095", "--ca-renew-before-days=300", "--overlap-hours=0");
        assert.match(dropped, /^caBundle MutatingWebhookConfiguration\/quartermaster: changed: 1 CA\(s\) .*dropped quartermaster-ca-/m);
        assert.match(dropped, /^serving Secret\/quartermaster-webhook-tls: unchanged/m);
        const afterDrop = await bundles();
        assert.ok(
          afterDrop.every((s) => s.length === 1 && s[0] === during[0]![0]),
          JSON.stringify(afterDrop),
        );
        await sleep(1500);
      } finally {
        stop = true;
        await Promise.all(workers);
      }
      assert.deepEqual(failures, []);
      assert.ok(created >= 20, `only ${created} pods created during the rotation`);
      assert.ok(projector.versions() >= 3, `the Secret was projected ${projector.versions()} times`);
    });

    it("the caBundle is what admission rests on: `certs install` of a foreign CA refuses training pods; `certs ensure` repairs it", async () => {
      const foreign = join(cp.dir, "foreign-ca.crt");
      const gen = await cli(["certs", "generate", "--service", "x", "--namespace", "y", "--out", join(cp.dir, "foreign")]);
      assert.equal(gen.code, 0, gen.stderr);
      renameSync(join(cp.dir, "foreign", "ca.crt"), foreign);
      const installed = await cli(["certs", "install", `--ca=${foreign}`, `--kubeconfig=${cp.kubeconfig}`]);
      assert.equal(installed.code, 0, installed.stderr);
      assert.match(
        installed.stdout,
        /^MutatingWebhookConfiguration\/quartermaster: caBundle set \(1 CA\(s\)\) in pods.mutate.quartermaster.dev, jobs.mutate.quartermaster.dev$/m,
      );
      await until("the foreign caBundle to refuse training pods", async () => {
        const r = await createPod("team-a", unique("foreign"), true);
        return r.status === 500 && /failed calling webhook "pods\.validate\.quartermaster\.dev".*(x509|certificate)/.test(r.body.message);
      });
      const repaired = await ensure("--days=60", "--renew-before-days=31", "--ca-days=1095", "--ca-renew-before-days=300");
      assert.match(repaired, /^caBundle ValidatingWebhookConfiguration\/quartermaster: changed: 2 CA\(s\)/m);
      await until("admission to recover", async () => (await createPod("team-a", unique("repaired"), true)).status === 201);
    });

    it("the certs ServiceAccount may touch its two Secrets and Quartermaster's webhook configurations, nothing else", async () => {
      const sa = await cp.serviceAccount(NS, "quartermaster-certs");
      const allowed: Array<[string, string]> = [
        ["GET", `/api/v1/namespaces/${NS}/secrets/quartermaster-webhook-tls`],
        ["GET", `/api/v1/namespaces/${NS}/secrets/quartermaster-webhook-ca`],
        ["GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/quartermaster"],
        ["GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/quartermaster"],
      ];
      for (const [method, path] of allowed) assert.equal((await sa.api(method, path)).status, 200, `${method} ${path}`);
      const refused: Array<[string, string]> = [
        ["GET", `/api/v1/namespaces/${NS}/secrets`],
        ["GET", `/api/v1/namespaces/${NS}/secrets/other`],
        ["GET", "/api/v1/namespaces/kube-system/secrets/anything"],
        ["GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"],
        ["GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/someone-elses"],
        ["DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/quartermaster"],
        ["GET", `/api/v1/namespaces/${NS}/pods`],
      ];
      for (const [method, path] of refused) {
        const r = await sa.api(method, path);
        assert.equal(r.status, 403, `${method} ${path} → ${r.status}`);
      }
    });
  });
});

/**
 * End to end: the release build (`npm run release`, release/build.ts) run twice gives the same bytes (SHA256SUMS
 * equal), its image agrees with the Dockerfile (same files under /app, entry point, user), go-containerregistry
 * accepts it (pushed with crane to `crane registry serve` on 127.0.0.1, then `crane validate`), the chart goes to
 * the same registry with `helm push` and comes back from oci:// pinning the image's digest, the image's root
 * filesystem runs its CLI and its server as the non-root user under chroot (the e2e kube-apiserver sends it the
 * admission review of a GPU pod, which comes back outfitted; `doctor` runs from the image against that cluster),
 * and `helm install` from oci:// on a second control plane names the pushed image by digest.
 *
 * With QM_COSIGN_BIN (test/e2e/cosign/build.sh), cosign signs the pushed image by digest with a throwaway key,
 * offline (`--tlog-upload=false`), and `cosign verify --insecure-ignore-tlog` accepts it and refuses another key
 * and an image the key never signed.
 *
 * Needs the tools the build needs (git, GNU tar, gzip, apt-get and dpkg-deb with bookworm lists, npm) and crane
 * (QM_CRANE_BIN, or Go to build it: test/e2e/crane/build.sh); skipped with the reason when one is missing.
 * Slow (two builds: about a minute warm, a few cold); CI runs it with the e2e suite.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { APP_FILES, RUNTIME, USER, parseFinalStage } from "../../release/image.js";
import { ROOT } from "../fixtures/manifests.js";
import { startControlPlane, freePort, type ControlPlane } from "./harness/controlplane.js";
import { applyOwnManifests, createNamespace, renderWebhookConfigurations, servingPair } from "./harness/webhook.js";

const has = (cmd: string): boolean => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const missing = ["git", "tar", "gzip", "apt-get", "dpkg-deb", "npm"].filter((c) => !has(c));
const craneAvailable = (process.env.QM_CRANE_BIN ?? "") !== "" || has("go");
const skip =
  missing.length > 0
    ? `the release build needs ${missing.join(", ")}`
    : craneAvailable
      ? false
      : "crane is needed: set QM_CRANE_BIN or put Go on PATH (test/e2e/crane/build.sh)";

const run = (cmd: string, args: string[], env: Record<string, string> = {}): string =>
  execFileSync(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "inherit"] }).toString();

interface Descriptor {
  digest: string;
}

describe("the release build", { skip }, () => {
  let scratch: string;
  let out1: string;
  let layout: string;
  let crane: string;
  let registry: ChildProcess | undefined;
  let registryHost: string;
  let release: { version: string; image: { archive: string; digest: string }; chart: string };
  let cp: ControlPlane | undefined;
  let cp2: ControlPlane | undefined;
  let server: ChildProcess | undefined;
  const asRoot = process.getuid?.() === 0;
  /** The image's environment, for a process chrooted into its root filesystem. */
  const imageEnv = (): Record<string, string> => Object.fromEntries(RUNTIME.env.map((e) => e.split("=", 2) as [string, string]));
  /** chroot's arguments that run the image's entry point with ARGS as its user. */
  const inImage = (rootfs: string, args: string[]): string[] => [`--userspec=${USER.uid}:${USER.gid}`, rootfs, ...RUNTIME.entrypoint, ...args];

  const blob = (d: Descriptor): Buffer => readFileSync(join(layout, "blobs", "sha256", d.digest.replace(/^sha256:/, "")));

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "qm-release-test-"));
    out1 = join(scratch, "out1");
    run("npm", ["run", "--silent", "release"], { QM_RELEASE_OUT: out1 });
    release = JSON.parse(readFileSync(join(out1, "release.json"), "utf8")) as typeof release;
    layout = join(scratch, "layout");
    mkdirSync(layout);
    run("tar", ["-xf", join(out1, release.image.archive), "-C", layout]);
    crane =
      process.env.QM_CRANE_BIN && process.env.QM_CRANE_BIN !== "" ? process.env.QM_CRANE_BIN : join(run("bash", ["test/e2e/crane/build.sh"]).trim(), "crane");
    const proc = spawn(crane, ["registry", "serve", "--address", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
    registry = proc;
    registryHost = await new Promise<string>((resolve, reject) => {
      let err = "";
      proc.stderr.on("data", (d: Buffer) => {
        err += d.toString();
        const m = /serving on port (\d+)/.exec(err);
        if (m) resolve(`127.0.0.1:${m[1]}`);
      });
      proc.on("exit", (code) => reject(new Error(`crane registry serve exited ${code}: ${err}`)));
    });
  });

  after(async () => {
    registry?.kill();
    server?.kill();
    await cp?.stop();
    await cp2?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it("a second run produces the same bytes (SHA256SUMS equal)", () => {
    const out2 = join(scratch, "out2");
    run("npm", ["run", "--silent", "release"], { QM_RELEASE_OUT: out2 });
    const sums1 = readFileSync(join(out1, "SHA256SUMS"), "utf8");
    assert.equal(readFileSync(join(out2, "SHA256SUMS"), "utf8"), sums1);
    assert.equal(sums1.trim().split("\n").length, 4, sums1);
    execFileSync("sha256sum", ["--check", "--quiet", "SHA256SUMS"], { cwd: out1 });
  });

  it("the image agrees with the Dockerfile: files under /app, entry point, user, command, port", () => {
    const stage = parseFinalStage(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
    const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests: Descriptor[] };
    assert.equal(index.manifests[0]!.digest, release.image.digest);
    const manifest = JSON.parse(blob(index.manifests[0]!).toString()) as { config: Descriptor; layers: Descriptor[] };
    const config = JSON.parse(blob(manifest.config).toString()) as {
      config: { User: string; Entrypoint: string[]; Cmd: string[]; WorkingDir: string; ExposedPorts: Record<string, unknown> };
    };
    assert.equal(config.config.User, stage.user);
    assert.deepEqual(config.config.Entrypoint, stage.entrypoint);
    assert.deepEqual(config.config.Cmd, stage.cmd);
    assert.equal(config.config.WorkingDir, stage.workdir);
    assert.deepEqual(Object.keys(config.config.ExposedPorts), stage.expose);
    // Top-level entries under /app across all layers: exactly the Dockerfile's COPY destinations.
    const listing = manifest.layers.flatMap((l) =>
      execFileSync("tar", ["-tz"], { input: blob(l), maxBuffer: 1 << 28 })
        .toString()
        .trim()
        .split("\n"),
    );
    const underApp = new Set(listing.filter((p) => p.startsWith("app/") && p !== "app/").map((p) => `/app/${p.split("/")[1]}`));
    assert.deepEqual([...underApp].sort(), stage.copies.filter((c) => c.startsWith("/app/")).sort());
    assert.ok(listing.includes(RUNTIME.entrypoint[0]!.slice(1)), "the entry point's node is in a layer");
    assert.ok(listing.includes("app/bin/quartermaster.js"));
    assert.ok(!listing.some((p) => /^(usr\/)?bin\/(ba|da)?sh$/.test(p)), "no shell");
    assert.ok(!listing.some((p) => p.startsWith("app/node_modules/typescript/")), "no dev dependency");
  });

  it("crane pushes the layout to a local registry and go-containerregistry validates it", () => {
    const ref = `${registryHost}/quartermaster:${release.version}`;
    run(crane, ["push", layout, ref, "--insecure"]);
    assert.equal(run(crane, ["digest", ref, "--insecure"]).trim(), release.image.digest);
    assert.match(run(crane, ["validate", "--remote", ref, "--insecure"]), /^PASS/m);
  });

  it(
    "cosign signs the pushed image by digest with a key, offline (no transparency log), and verify fails for another key or image",
    { skip: process.env.QM_COSIGN_BIN ? false : "QM_COSIGN_BIN is unset (test/e2e/cosign/build.sh; not built by .ci/run: docs/release.md, Signatures)" },
    () => {
      const cosign = process.env.QM_COSIGN_BIN!;
      const keys = join(scratch, "keys");
      mkdirSync(keys);
      const env = { COSIGN_PASSWORD: "release-test", HOME: scratch };
      const sh = (args: string[], extra: Record<string, string> = {}): ReturnType<typeof spawnSync> =>
        spawnSync(cosign, args, { cwd: keys, env: { ...process.env, ...env, ...extra } });
      for (const prefix of ["cosign", "other"]) assert.equal(sh(["generate-key-pair", "--output-key-prefix", prefix]).status, 0);
      // The release's image, by the digest release.json names (as pushed by the test above).
      const ref = `${registryHost}/quartermaster@${release.image.digest}`;
      const signed = sh(["sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes", ref]);
      assert.equal(signed.status, 0, signed.stderr.toString());
      const verify = (key: string, target: string): ReturnType<typeof spawnSync> =>
        sh(["verify", "--key", key, "--insecure-ignore-tlog", "--allow-http-registry", target], { COSIGN_PASSWORD: "" });
      const ok = verify("cosign.pub", ref);
      assert.equal(ok.status, 0, ok.stderr.toString());
      const claims = JSON.parse(ok.stdout.toString()) as Array<{ critical: { image: { "docker-manifest-digest": string } } }>;
      assert.equal(claims[0]!.critical.image["docker-manifest-digest"], release.image.digest);
      // Another key does not verify it; nor does the key verify an image it did not sign.
      assert.notEqual(verify("other.pub", ref).status, 0, "verified with another key");
      const unsigned = `${registryHost}/quartermaster-unsigned:1`;
      run(crane, ["copy", `${registryHost}/quartermaster:${release.version}`, unsigned, "--insecure"]);
      run(crane, ["mutate", unsigned, "--label", "tampered=1", "--insecure"]);
      const tampered = verify("cosign.pub", unsigned);
      assert.notEqual(tampered.status, 0, "verified an image the key never signed");
      assert.match(tampered.stderr.toString(), /no (matching )?signatures/);
    },
  );

  it("the chart goes to the registry with helm push and comes back from oci:// pinned to the image's digest", () => {
    const helm = process.env.QM_HELM_BIN;
    if (!helm) return;
    run(helm, ["push", join(out1, release.chart), `oci://${registryHost}/charts`, "--plain-http"]);
    const values = run(helm, ["show", "values", `oci://${registryHost}/charts/quartermaster`, "--version", release.version, "--plain-http"]);
    assert.match(values, new RegExp(`digest: "${release.image.digest}"`));
    const chart = run(helm, ["show", "chart", `oci://${registryHost}/charts/quartermaster`, "--version", release.version, "--plain-http"]);
    assert.match(chart, new RegExp(`^version: ${release.version.replace(/\./g, "\\.")}$`, "m"));
  });

  it(
    "its root filesystem runs the CLI as the non-root user, without a shell (chroot)",
    { skip: process.getuid?.() !== 0 ? "chroot needs root" : false },
    () => {
      const rootfs = join(scratch, "rootfs");
      mkdirSync(rootfs);
      const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests: Descriptor[] };
      const manifest = JSON.parse(blob(index.manifests[0]!).toString()) as { layers: Descriptor[] };
      for (const l of manifest.layers) execFileSync("tar", ["-xz", "--same-owner", "-C", rootfs], { input: blob(l), maxBuffer: 1 << 28 });
      const out = execFileSync("chroot", [`--userspec=${USER.uid}:${USER.gid}`, rootfs, ...RUNTIME.entrypoint, "--help"], {
        env: Object.fromEntries(RUNTIME.env.map((e) => e.split("=", 2) as [string, string])),
        cwd: "/",
      }).toString();
      assert.match(out, /serve/);
      const whoami = execFileSync("chroot", [
        `--userspec=${USER.uid}:${USER.gid}`,
        rootfs,
        RUNTIME.entrypoint[0]!,
        "-p",
        "process.getuid()+' '+require('tls').rootCertificates.length",
      ]).toString();
      assert.match(whoami, /^65532 \d+/);
      assert.deepEqual(APP_FILES.map((f) => f.path).sort(), ["bin", "dist", "node_modules", "package.json"]);
    },
  );
  it(
    "its server, chrooted as the non-root user, outfits a GPU pod for the e2e kube-apiserver; doctor runs from the image",
    { skip: asRoot ? false : "chroot needs root" },
    async () => {
      const root = join(scratch, "rootfs");
      cp = await startControlPlane();
      await applyOwnManifests(cp);
      await createNamespace(cp, "team-a", { "quartermaster.dev/enabled": "true" });
      const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
      // Inside the image's root filesystem, owned by its user: the serving pair and the kubeconfig.
      const etc = join(root, "etc", "quartermaster");
      const gen = await servingPair(join(etc, "tls"));
      assert.equal(gen.code, 0, gen.stderr);
      writeFileSync(join(etc, "kubeconfig"), readFileSync(sa.kubeconfig));
      for (const f of ["", "tls", "tls/tls.crt", "tls/tls.key", "kubeconfig"]) chownSync(join(etc, f), USER.uid, USER.gid);
      const port = await freePort();
      const args = ["serve", "--host", "127.0.0.1", "--port", String(port), "--metrics-port", "0", "--tls-cert", "/etc/quartermaster/tls/tls.crt"];
      args.push("--tls-key", "/etc/quartermaster/tls/tls.key", "--kubeconfig", "/etc/quartermaster/kubeconfig");
      const proc = spawn("chroot", inImage(root, args), { env: imageEnv(), stdio: ["ignore", "pipe", "pipe"] });
      server = proc;
      let log = "";
      proc.stdout.on("data", (d: Buffer) => (log += d.toString()));
      proc.stderr.on("data", (d: Buffer) => (log += d.toString()));
      const caPem = readFileSync(join(etc, "tls", "ca.crt"), "utf8");
      const configs = await renderWebhookConfigurations(cp, port, caPem);
      const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
      assert.equal(applied.code, 0, applied.stderr);
      let n = 0;
      let pod: { metadata: { annotations?: Record<string, string> } } | undefined;
      const api = cp;
      await api.until(
        "a GPU pod outfitted by the image's server",
        async () => {
          const r = await api.api("POST", "/api/v1/namespaces/team-a/pods", {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: `gpu-${++n}` },
            spec: { containers: [{ name: "c", image: "registry.invalid/train:1", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
          });
          pod = r.body as typeof pod;
          return r.status === 201 && pod?.metadata.annotations?.["quartermaster.dev/mutations"] !== undefined;
        },
        60_000,
      );
      assert.match(pod!.metadata.annotations!["quartermaster.dev/mutations"]!, /gpu-tolerations/, log);
      // doctor, run from the image with the same credentials: it reads the install and reports as JSON.
      const doctor = spawnSync("chroot", inImage(root, ["doctor", "-o", "json", "--kubeconfig", "/etc/quartermaster/kubeconfig"]), { env: imageEnv() });
      const report = JSON.parse(doctor.stdout.toString()) as { findings?: unknown[] };
      assert.ok(Array.isArray(report.findings), `${doctor.stdout.toString()}\n${doctor.stderr.toString()}`);
    },
  );
  it(
    "helm install from oci:// on the e2e control plane runs the pushed image by digest; helm uninstall leaves no webhook configuration",
    { skip: process.env.QM_HELM_BIN ? false : "QM_HELM_BIN is unset (test/e2e/helm/build.sh)" },
    async () => {
      const helm = process.env.QM_HELM_BIN!;
      cp2 = await startControlPlane();
      await createNamespace(cp2, "quartermaster", { "quartermaster.dev/enabled": "false" });
      const kube = ["--kubeconfig", cp2.kubeconfig, "-n", "quartermaster", "--no-hooks"];
      const repository = `${registryHost}/quartermaster`;
      run(helm, [
        "install",
        "quartermaster",
        `oci://${registryHost}/charts/quartermaster`,
        "--version",
        release.version,
        "--plain-http",
        ...kube,
        "--set",
        `image.repository=${repository}`,
        "--set",
        "webhook.networkPolicy.apiserverFrom={0.0.0.0/0}",
      ]);
      const deployment = await cp2.api("GET", "/apis/apps/v1/namespaces/quartermaster/deployments/quartermaster-webhook");
      const image = (deployment.body as { spec: { template: { spec: { containers: Array<{ image: string }> } } } }).spec.template.spec.containers[0]!.image;
      assert.equal(image, `${repository}:${release.version}@${release.image.digest}`);
      // The reference the cluster would pull resolves, in the registry, to the released digest.
      assert.equal(run(crane, ["digest", image, "--insecure"]).trim(), release.image.digest);
      run(helm, ["uninstall", "quartermaster", ...kube]);
      for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
        assert.equal((await cp2.api("GET", `/apis/admissionregistration.k8s.io/v1/${kind}/quartermaster`)).status, 404, kind);
      }
    },
  );
});

/**
 * End to end: a new user's path from nothing to a watched install, as the docs write it. The blocks marked
 * ```sh install-step in docs/install.md are run in order, as written, by bash (helm = QM_HELM_BIN, kubectl from
 * QM_K8S_BIN_DIR, `quartermaster` = this checkout's CLI, KUBECONFIG the e2e control plane's), with one
 * substitution: the placeholder REGISTRY becomes the local registry the release was pushed to. The README's
 * install-step commands must each be one of them. Each block is timed and the total must stay ≤ 600 s.
 *
 * What stands in for a cluster: `npm run release` built with the chart naming the local registry (as a release
 * made for REGISTRY would), image and chart pushed to `crane registry serve` behind TLS on 127.0.0.1 (its CA in
 * SSL_CERT_FILE, so the docs need no --plain-http); the e2e control plane with the Deployment, ReplicaSet and Job
 * controllers and `--enable-aggregator-routing` (webhook calls go to the Service's endpoints, there being no
 * kube-proxy); the Prometheus Operator's CRDs as stand-ins accepting any content (test/e2e/harness/crds.ts); and,
 * for the missing kubelet, test/e2e/harness/chroot-kubelet.ts, which runs the chart's pods from the pushed image
 * (`crane export`) under chroot as its user. Then: the dry run of the GPU pod is answered by the webhook
 * (warnings "quartermaster:"), doctor exits 0, the metrics the docs scrape through the apiserver's proxies name
 * every metric the dashboard's PromQL reads (test/fixtures/dashboard.ts) but exactly the job controller's two,
 * which the resident reconciler does not export (docs/install.md says so), and the dashboard saved is the
 * chart's. Not timed: the release build, the registry, the control plane (what a user already has), and the
 * CLI's `npm ci`.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createServer as createTlsServer, type Server } from "node:tls";
import { fileURLToPath } from "node:url";
import { createCertificateAuthority, issueCertificate } from "../../src/certs/generate.js";
import { RUNTIME, USER } from "../../release/image.js";
import { dashboardMetrics, type Dashboard } from "../fixtures/dashboard.js";
import { ROOT } from "../fixtures/manifests.js";
import { startChrootKubelet, type ChrootKubelet } from "./harness/chroot-kubelet.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { installMinimalCrds } from "./harness/crds.js";
import { createAdmissionMetrics } from "../../src/server/metrics.js";
import { createReconcilerMetrics, createWatchMetrics } from "../../src/reconcile/metrics.js";

const BUDGET_SECONDS = 600;
const has = (cmd: string): boolean => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0;
const skip =
  process.getuid?.() !== 0
    ? "the kubelet's stand-in needs root (chroot, ip addr)"
    : !process.env.QM_HELM_BIN || !process.env.QM_CRANE_BIN || !process.env.QM_K8S_BIN_DIR
      ? "needs QM_HELM_BIN, QM_CRANE_BIN and QM_K8S_BIN_DIR (source /tmp/qm-env.sh or .ci/run)"
      : !has("ip")
        ? "needs ip (iproute2) for the pods' addresses"
        : false;

/** A command of a shell block: continuation lines joined, a trailing `# comment` dropped, spaces collapsed. */
export function commands(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) =>
      l
        .replace(/\s{2,}#.*$/, "")
        .replace(/\s+/g, " ")
        .trim(),
    )
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** The ```sh install-step blocks of a Markdown text, in order. */
export function installSteps(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh install-step\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** Metric names an exposition declares (`# TYPE`), each histogram as its _bucket, _sum and _count. */
function declared(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (m[2] === "histogram") for (const s of ["_bucket", "_sum", "_count"]) out.add(m[1]! + s);
    else out.add(m[1]!);
  }
  return out;
}

async function names(registry: { getMetricsAsJSON(): Promise<Array<{ name: string; type: unknown }>> }): Promise<Set<string>> {
  const out = new Set<string>();
  for (const m of await registry.getMetricsAsJSON()) {
    if (String(m.type) === "histogram") for (const s of ["_bucket", "_sum", "_count"]) out.add(m.name + s);
    else out.add(m.name);
  }
  return out;
}

describe("docs/install.md's commands, run as written: from nothing to a watched install", { skip }, () => {
  const doc = readFileSync(join(ROOT, "docs/install.md"), "utf8");
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const steps = installSteps(doc);
  let scratch: string;
  let cp: ControlPlane | undefined;
  let kubelet: ChrootKubelet | undefined;
  let registry: ChildProcess | undefined;
  let tlsFront: Server | undefined;
  let registryHost: string;
  let caFile: string;
  let work: string;
  let bin: string;
  const crane = process.env.QM_CRANE_BIN!;
  const timings: Array<{ step: number; first: string; seconds: number }> = [];
  const outputs: Array<{ stdout: string; stderr: string }> = [];

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "qm-install-docs-"));
    // The registry: crane's, on a free port, behind TLS with a CA of the test's.
    const proc = spawn(crane, ["registry", "serve", "--address", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
    registry = proc;
    const plainPort = await new Promise<number>((resolve, reject) => {
      let err = "";
      proc.stderr.on("data", (d: Buffer) => {
        err += d.toString();
        const m = /serving on port (\d+)/.exec(err);
        if (m) resolve(Number(m[1]));
      });
      proc.on("exit", (code) => reject(new Error(`crane registry serve exited ${code}: ${err}`)));
    });
    const ca = await createCertificateAuthority("qm-install-docs-registry-ca", 1, new Date());
    const cert = await issueCertificate({
      ca,
      commonName: "127.0.0.1",
      dnsNames: ["localhost"],
      ips: ["127.0.0.1"],
      usage: "server",
      days: 1,
      now: new Date(),
    });
    caFile = join(scratch, "registry-ca.crt");
    writeFileSync(caFile, ca.certPem);
    const front = createTlsServer({ cert: cert.certPem, key: cert.keyPem }, (s) => {
      const up = connect(plainPort, "127.0.0.1");
      s.pipe(up).pipe(s);
      up.on("error", () => s.destroy());
      s.on("error", () => up.destroy());
    });
    tlsFront = front;
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    registryHost = `127.0.0.1:${(front.address() as { port: number }).port}`;
    const plain = `127.0.0.1:${plainPort}`;

    // The release, for REGISTRY, pushed there (docs/release.md, "Publishing").
    const out = join(scratch, "out");
    execFileSync("npm", ["run", "--silent", "release"], {
      cwd: ROOT,
      env: { ...process.env, QM_RELEASE_OUT: out, QM_RELEASE_IMAGE_REPOSITORY: `${registryHost}/quartermaster` },
      stdio: ["ignore", "ignore", "inherit"],
    });
    const release = JSON.parse(readFileSync(join(out, "release.json"), "utf8")) as { version: string; image: { archive: string }; chart: string };
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    assert.equal(release.version, pkg.version);
    const layout = join(scratch, "layout");
    mkdirSync(layout);
    execFileSync("tar", ["-xf", join(out, release.image.archive), "-C", layout]);
    execFileSync(crane, ["push", layout, `${plain}/quartermaster:${release.version}`, "--insecure"], { stdio: "ignore" });
    execFileSync(process.env.QM_HELM_BIN!, ["push", join(out, release.chart), `oci://${plain}/charts`, "--plain-http"], { stdio: "ignore" });

    // The cluster: control plane, the controllers that make pods, the Prometheus Operator's kinds, the kubelet's stand-in.
    cp = await startControlPlane({
      controllers: ["deployment-controller", "replicaset-controller", "job-controller"],
      apiserverArgs: ["--enable-aggregator-routing=true"],
    });
    await installMinimalCrds(cp, [
      { apiVersion: "monitoring.coreos.com/v1", kind: "ServiceMonitor", metadata: { namespace: "x" } },
      { apiVersion: "monitoring.coreos.com/v1", kind: "PodMonitor", metadata: { namespace: "x" } },
      { apiVersion: "monitoring.coreos.com/v1", kind: "PrometheusRule", metadata: { namespace: "x" } },
    ]);
    const pods = join(scratch, "pods");
    mkdirSync(pods);
    kubelet = await startChrootKubelet(cp, {
      namespace: "quartermaster",
      dir: pods,
      user: USER,
      entrypoint: RUNTIME.entrypoint,
      env: RUNTIME.env,
      async pull(image) {
        const root = join(scratch, `image-${timings.length}-${Math.random().toString(36).slice(2, 8)}`);
        mkdirSync(root);
        // The reference the pod names, resolved by the registry (through TLS): the image's filesystem, flattened.
        // Asynchronously: the registry's TLS front is served by this process.
        const child = spawn("sh", ["-c", `"$0" export "$1" - | tar -x --same-owner -C "$2"`, crane, image, root], {
          env: { ...process.env, SSL_CERT_FILE: caFile },
          stdio: ["ignore", "ignore", "pipe"],
        });
        let err = "";
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        const code = await new Promise<number | null>((r) => child.on("exit", r));
        if (code !== 0) throw new Error(`crane export ${image}: ${err}`);
        return root;
      },
    });

    // The user's shell: helm, kubectl, quartermaster on PATH; a working directory beside the checkout's examples/.
    bin = join(scratch, "bin");
    mkdirSync(bin);
    symlinkSync(process.env.QM_HELM_BIN!, join(bin, "helm"));
    symlinkSync(join(process.env.QM_K8S_BIN_DIR!, "kubectl"), join(bin, "kubectl"));
    const tsx = fileURLToPath(import.meta.resolve("tsx"));
    writeFileSync(join(bin, "quartermaster"), `#!/bin/sh\nexec "${process.execPath}" --import "${tsx}" "${join(ROOT, "src/cli/main.ts")}" "$@"\n`, {
      mode: 0o755,
    });
    work = join(scratch, "work");
    mkdirSync(work);
    symlinkSync(join(ROOT, "examples"), join(work, "examples"));
  });

  after(async () => {
    await kubelet?.stop();
    await cp?.stop();
    registry?.kill();
    tlsFront?.close();
    if (timings.length > 0) {
      const total = timings.reduce((s, t) => s + t.seconds, 0);
      process.stderr.write(
        `install-docs timings:\n${timings.map((t) => `  step ${t.step} (${t.first}): ${t.seconds.toFixed(1)} s`).join("\n")}\n  total: ${total.toFixed(1)} s\n`,
      );
    }
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it("the docs mark the path, the README's install commands are among its commands, and only REGISTRY is a placeholder", () => {
    assert.ok(steps.length >= 3, `${steps.length} install-step blocks`);
    const all = new Set(steps.flatMap(commands));
    const fromReadme = installSteps(readme).flatMap(commands);
    assert.ok(fromReadme.length > 0, "README.md has no install-step block");
    for (const c of fromReadme) assert.ok(all.has(c), `README.md's "${c}" is not a command of docs/install.md's install steps`);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    for (const c of all) {
      const v = /--version (\S+)/.exec(c);
      if (v) assert.equal(v[1], pkg.version, `"${c}" names another version than package.json's`);
    }
  });

  it(`runs them in order, as written, in ≤ ${BUDGET_SECONDS} s: the webhook answers, doctor exits 0`, { timeout: 900_000 }, async () => {
    const env = {
      PATH: `${bin}:/usr/local/bin:/usr/bin:/bin`,
      HOME: join(scratch, "home"),
      KUBECONFIG: cp!.kubeconfig,
      SSL_CERT_FILE: caFile,
      HELM_CACHE_HOME: join(scratch, "helm-cache"),
      HELM_CONFIG_HOME: join(scratch, "helm-config"),
      HELM_DATA_HOME: join(scratch, "helm-data"),
    };
    for (const [i, block] of steps.entries()) {
      const script = `set -euo pipefail\n${block.replaceAll("REGISTRY", registryHost)}`;
      const t0 = performance.now();
      const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        const child = spawn("bash", ["-c", script], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        child.on("exit", (code) => resolve({ code: code ?? -1, stdout, stderr }));
      });
      timings.push({ step: i + 1, first: commands(block)[0]!.slice(0, 60), seconds: (performance.now() - t0) / 1000 });
      outputs.push(r);
      assert.equal(r.code, 0, `step ${i + 1} failed:\n${block}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}\npods:\n${kubelet!.log()}`);
    }
    const total = timings.reduce((s, t) => s + t.seconds, 0);
    assert.ok(total <= BUDGET_SECONDS, `${total.toFixed(1)} s`);
    // The dry run of the GPU pod went through the webhook (the check step).
    const check = steps.findIndex((b) => b.includes("--dry-run=server"));
    assert.match(outputs[check]!.stderr, /quartermaster:/, outputs[check]!.stderr);
  });

  it("the install is watched: the scraped metrics name every metric the dashboard reads but the job controller's, and the dashboard is the chart's", async () => {
    const scraped = new Set([
      ...declared(readFileSync(join(work, "webhook-metrics.txt"), "utf8")),
      ...declared(readFileSync(join(work, "reconciler-metrics.txt"), "utf8")),
    ]);
    const saved = readFileSync(join(work, "quartermaster-dashboard.json"), "utf8");
    assert.equal(saved, readFileSync(join(ROOT, "charts/quartermaster/dashboards/quartermaster-dashboard.json"), "utf8"));
    const read = dashboardMetrics(JSON.parse(saved) as Dashboard);
    assert.ok(read.length >= 15, read.join(" "));
    // Exactly what only the job controller (reconciler.mode=watch) registers may be absent in resident mode.
    const resident = new Set([
      ...(await names(createAdmissionMetrics({ timeoutSeconds: 5, ledger: () => undefined }).registry)),
      ...(await names(createReconcilerMetrics().registry)),
    ]);
    const watchOnly = [...(await names(createWatchMetrics().registry))].filter((n) => !resident.has(n));
    const absent = read.filter((m) => !scraped.has(m));
    assert.deepEqual(
      absent,
      read.filter((m) => watchOnly.includes(m)),
      `absent from the scrape: ${absent.join(", ")}`,
    );
    assert.deepEqual(absent, ["quartermaster_blocked_gpu_minutes_total", "quartermaster_jobs_blocked"]);
  });
});

/**
 * Quartermaster's webhook server as a real process for the end-to-end tests, with certificates from
 * `quartermaster certs generate`, and its webhook configurations rendered from `manifests/` and pointed
 * at it by URL.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import type { ControlPlane } from "./controlplane.js";
import { freePort } from "./controlplane.js";

export const ROOT = resolve(import.meta.dirname, "../../..");
const CLI = join(ROOT, "src/cli/main.ts");

export interface CliRun {
  child: ChildProcess;
  /** Output so far. */
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when the process has exited (`code` -1 when killed by a signal). */
  done: Promise<{ code: number; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

/** Starts the CLI; the caller may kill it. */
export function spawnCli(args: string[], nodeArgs: string[] = []): CliRun {
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", CLI, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  const out = { stdout: "", stderr: "" };
  child.stdout!.on("data", (c: Buffer) => (out.stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out.stderr += c.toString()));
  const done = new Promise<{ code: number; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((res) =>
    child.on("exit", (code, signal) => res({ code: code ?? -1, signal, ...out })),
  );
  return {
    child,
    get stdout() {
      return out.stdout;
    },
    get stderr() {
      return out.stderr;
    },
    done,
  };
}

/** Runs the CLI to completion. */
export async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await spawnCli(args).done;
  return { code, stdout, stderr };
}

export interface WebhookProcess {
  port: number;
  /** The metrics listener's port (plain HTTP: /metrics, /healthz, /readyz), known once started. */
  metricsPort(): number | undefined;
  certDir: string;
  caPem: string;
  /** Every JSON log line the server printed so far. */
  lines: Array<Record<string, unknown>>;
  /** Admission log lines about the object named `name`. */
  admissions(name: string): Array<Record<string, unknown>>;
  /**
   * The admission log lines about `name` once there are at least `count` (the server logs after answering,
   * so a line can trail the API response by a moment); after `timeoutMs`, whatever there is.
   */
  awaitAdmissions(name: string, count: number, timeoutMs?: number): Promise<Array<Record<string, unknown>>>;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Sends `signal` to the running server without waiting (SIGSTOP/SIGCONT freeze and thaw it). */
  signal(signal: NodeJS.Signals): void;
  /** PID of the running server process, e.g. to sample its RSS. */
  pid(): number | undefined;
}

export interface WebhookProcessOptions {
  kubeconfig?: string;
  policy?: string;
  /** `--log-level` (default info: one line per admission, which `lines` keeps). */
  logLevel?: string;
  /** More `serve` flags, e.g. `["--client-ca", file]`. */
  args?: string[];
  /** `certs generate --key-type` of the serving pair (default: the command's, ECDSA P-256). */
  keyType?: "ecdsa" | "rsa";
  /** More node flags for the server process, e.g. `["--cpu-prof", "--cpu-prof-dir=DIR"]`. */
  nodeArgs?: string[];
  /**
   * Run the built package (`bin/quartermaster.js`, after `npm run build`) as the image does, rather than
   * the sources through tsx: for benchmarks, which measure what ships.
   */
  built?: boolean;
  /**
   * With `built`: the checkout whose built package runs (default this one). bench:e2e measures an older
   * build against today's in the same run this way.
   */
  builtRoot?: string;
}

/** `certs generate` of the webhook's serving pair for 127.0.0.1 into `out` (and its CA, unless `extra` names one). */
export function servingPair(out: string, extra: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  return cli(["certs", "generate", "--service", "quartermaster-webhook", "--namespace", "quartermaster", "--out", out, "--ip", "127.0.0.1", ...extra]);
}

export async function webhookProcess(opts: WebhookProcessOptions = {}): Promise<WebhookProcess> {
  const certDir = mkdtempSync(join(tmpdir(), "qm-e2e-webhook-"));
  const gen = await servingPair(certDir, opts.keyType ? ["--key-type", opts.keyType] : []);
  if (gen.code !== 0) throw new Error(`certs generate failed: ${gen.stderr}`);
  const port = await freePort();
  const lines: Array<Record<string, unknown>> = [];
  let child: ChildProcess | undefined;
  let metricsPort: number | undefined;

  const builtRoot = opts.builtRoot ?? ROOT;
  const entry = opts.built ? [join(builtRoot, "bin/quartermaster.js")] : ["--import", "tsx", CLI];
  // The built entry moved (dist/webhooks/cli.js before issue 50, dist/src/cli/main.js since): an older checkout is built when dist/ is there.
  if (opts.built && !existsSync(join(builtRoot, "dist"))) throw new Error(`webhookProcess({ built: true }): run \`npm run build\` in ${builtRoot} first`);
  const start = async (): Promise<void> => {
    const proc = spawn(
      process.execPath,
      [
        ...(opts.nodeArgs ?? []),
        ...entry,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
        "--metrics-port",
        "0",
        "--tls-cert",
        join(certDir, "tls.crt"),
        "--tls-key",
        join(certDir, "tls.key"),
        ...(opts.kubeconfig ? ["--kubeconfig", opts.kubeconfig] : []),
        ...(opts.policy ? ["--policy", opts.policy] : []),
        ...(opts.logLevel ? ["--log-level", opts.logLevel] : []),
        ...(opts.args ?? []),
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    child = proc;
    let buffer = "";
    let stderr = "";
    const serving = new Promise<void>((res, rej) => {
      proc.stdout!.on("data", (c: Buffer) => {
        buffer += c.toString();
        let nl: number;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (line.startsWith("{")) lines.push(JSON.parse(line) as Record<string, unknown>);
          if (line.includes("quartermaster: serving")) {
            const m = /metrics http:\/\/[^ ]*:(\d+)\/metrics/.exec(line);
            if (m) metricsPort = Number(m[1]);
            res();
          }
        }
      });
      proc.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      proc.once("exit", (code) => rej(new Error(`webhook server exited ${code}: ${stderr}`)));
    });
    await serving;
  };
  const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<void> => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill(signal);
    await exited;
  };
  process.on("exit", () => child?.kill("SIGKILL"));
  const admissions = (name: string): Array<Record<string, unknown>> =>
    lines.filter((l) => l.msg !== undefined && String(l.msg).startsWith("admission") && l.name === name);
  return {
    port,
    metricsPort: () => metricsPort,
    certDir,
    caPem: readFileSync(join(certDir, "ca.crt"), "utf8"),
    lines,
    admissions,
    async awaitAdmissions(name, count, timeoutMs = 5000) {
      const deadline = performance.now() + timeoutMs;
      while (admissions(name).length < count && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      return admissions(name);
    },
    start,
    stop,
    signal(sig) {
      if (child && child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
    pid: () => (child && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
  };
}

/** `kubectl kustomize manifests/base`, parsed. */
export async function renderBase(cp: ControlPlane): Promise<Array<Record<string, any>>> {
  const rendered = await cp.kubectl(["kustomize", join(ROOT, "manifests/base")]);
  if (rendered.code !== 0) throw new Error(`kubectl kustomize manifests/base failed: ${rendered.stderr}`);
  return parseAllDocuments(rendered.stdout).map((d) => d.toJS() as Record<string, any>);
}

/**
 * Applies Quartermaster's own objects from manifests/base for real (namespace, ServiceAccounts, RBAC,
 * workloads), leaving out the webhook configurations, which tests install pointed at a local server.
 */
export async function applyOwnManifests(cp: ControlPlane): Promise<void> {
  const own = (await renderBase(cp)).filter((o) => !/WebhookConfiguration$/.test(String(o.kind)));
  const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own }));
  if (applied.code !== 0) throw new Error(`applying manifests/base failed: ${applied.stderr}`);
}

/**
 * The Mutating/ValidatingWebhookConfigurations exactly as `kubectl kustomize manifests/base` renders
 * them, with each webhook's clientConfig.service replaced by a URL to `port` and the CA in caBundle.
 */
export async function renderWebhookConfigurations(cp: ControlPlane, port: number, caPem: string): Promise<Array<Record<string, any>>> {
  const configs = (await renderBase(cp)).filter((o) => o && /^(Mutating|Validating)WebhookConfiguration$/.test(o.kind));
  if (configs.length !== 2) throw new Error(`expected 2 webhook configurations in manifests/base, found ${configs.length}`);
  for (const config of configs) {
    for (const hook of config.webhooks as Array<Record<string, any>>) {
      const path = hook.clientConfig?.service?.path;
      if (!path) throw new Error(`webhook ${hook.name} has no clientConfig.service.path`);
      hook.clientConfig = { url: `https://127.0.0.1:${port}${path}`, caBundle: Buffer.from(caPem).toString("base64") };
    }
  }
  return configs;
}

/**
 * Quartermaster as its manifests install it, serving from a local process: its own objects applied, the
 * webhook process started as its ServiceAccount with `policy` (YAML text), and the webhook configurations
 * rendered to reach that process (not applied: tests choose which hooks to register).
 */
export async function startOwnWebhook(
  cp: ControlPlane,
  policy: string,
): Promise<{ wh: WebhookProcess; sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>>; configs: Array<Record<string, any>> }> {
  await applyOwnManifests(cp);
  const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");
  const policyFile = join(cp.dir, "policy.yaml");
  writeFileSync(policyFile, policy);
  const wh = await webhookProcess({ kubeconfig: sa.kubeconfig, policy: policyFile });
  await wh.start();
  return { wh, sa, configs: await renderWebhookConfigurations(cp, wh.port, wh.caPem) };
}

/** {@link startOwnWebhook}, and its webhook configurations applied: every hook registered. */
export async function registerOwnWebhook(cp: ControlPlane, policy: string): Promise<WebhookProcess> {
  const own = await startOwnWebhook(cp, policy);
  const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
  if (applied.code !== 0) throw new Error(`applying Quartermaster's webhook configurations: ${applied.stderr}`);
  return own.wh;
}

/**
 * Waits until Quartermaster's pod webhook is called for GPU pods in `namespace` (a webhook configuration takes
 * effect asynchronously): dry-run GPU pods until the server logs one.
 */
export async function waitForPodWebhook(cp: ControlPlane, wh: WebhookProcess, namespace: string): Promise<void> {
  let probes = 0;
  await cp.until("Quartermaster's webhooks to take effect", async () => {
    const name = `probe-${++probes}`;
    await cp.api("POST", `/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name },
      spec: { containers: [{ name: "c", image: "registry.invalid/probe:1", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
    });
    return (await wh.awaitAdmissions(name, 1, 1000)).some((l) => l.webhook === "mutate-pods");
  });
}

/** Installs the project's Kubeflow CRDs and waits until they are established; throws with kubectl's output. */
export async function installKubeflowCrds(cp: ControlPlane): Promise<void> {
  for (const args of [
    ["apply", "-f", join(ROOT, "test/e2e/crds/kubeflow.yaml")],
    ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
  ]) {
    const r = await cp.kubectl(args);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr}`);
  }
}

/** Creates a namespace with `labels`; throws unless it was created. */
export async function createNamespace(cp: ControlPlane, name: string, labels: Record<string, string> = {}): Promise<void> {
  const r = await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } });
  if (r.status !== 201) throw new Error(`creating namespace ${name}: ${r.status} ${JSON.stringify(r.body)}`);
}

/**
 * A control plane (with the garbage collector) ready for the reconciler: the Kubeflow CRDs established,
 * Quartermaster's own manifests applied, the reconciler's ServiceAccount, and `namespace` created, opted in
 * (`quartermaster.dev/enabled: "true"`: the reconciler acts only in namespaces that did).
 */
export async function reconcilerCluster(namespace: string): Promise<{ cp: ControlPlane; sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>> }> {
  const { startControlPlane } = await import("./controlplane.js");
  const cp = await startControlPlane({ controllerManager: true });
  await installKubeflowCrds(cp);
  await applyOwnManifests(cp);
  const sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
  await createNamespace(cp, namespace, { "quartermaster.dev/enabled": "true" });
  return { cp, sa };
}

/**
 * A real control plane on loopback for the end-to-end tests: etcd, kube-apiserver (RBAC, client
 * certificates, service-account keys) and, on request, kube-controller-manager with the garbage
 * collector and namespace controllers (and any more a test names), and kube-scheduler (which binds pods to Node objects; no kubelet is
 * needed for that, see ./nodes.ts for nodes kept Ready). Binaries come from `test/e2e/controlplane/build.sh`
 * (QM_K8S_BIN_DIR). Everything started here is stopped by `stop()`, also when the test process exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCertificateAuthority, issueCertificate } from "../../../src/certs/generate.js";
import { recordWebhookCalls } from "./webhook-calls.js";

export interface ControlPlane {
  dir: string;
  apiUrl: string;
  apiPort: number;
  kubeconfig: string;
  /** PEMs of the cluster CA and the admin (system:masters) client. */
  tls: { ca: string; cert: string; key: string };
  binDir: string;
  /** Admin HTTPS call to the apiserver; the body is JSON. */
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiReply>;
  /**
   * A kubeconfig that authenticates as ServiceAccount `namespace/name` with a TokenRequest token, and an
   * HTTPS caller with that token, so tests prove what the manifests' RBAC allows and refuses.
   */
  serviceAccount(namespace: string, name: string): Promise<{ kubeconfig: string; api: ControlPlane["api"] }>;
  /** Runs kubectl against this cluster. */
  kubectl(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Tails of the component logs, for failure messages. */
  logs(): string;
  /** Polls `cond` every `everyMs` until it holds; after `ms`, fails naming `what`, with the component logs. */
  until(what: string, cond: () => boolean | Promise<boolean>, ms?: number, everyMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface ApiReply {
  status: number;
  body: any;
  headers: Record<string, string | string[] | undefined>;
}

export function binDir(): string {
  const dir = process.env.QM_K8S_BIN_DIR;
  if (!dir) {
    throw new Error(
      "QM_K8S_BIN_DIR is not set: build the control plane first with\n" +
        "  export QM_K8S_BIN_DIR=$(bash test/e2e/controlplane/build.sh)\n" +
        "(needs Go >= 1.24 and the Go module proxy)",
    );
  }
  for (const b of ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"]) {
    // kube-scheduler is checked when a test asks for it: caches built before it joined build.sh lack it.
    if (!existsSync(join(dir, b))) throw new Error(`QM_K8S_BIN_DIR=${dir} has no ${b}: run test/e2e/controlplane/build.sh`);
  }
  return dir;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function kubeconfigYaml(server: string, tls: { ca: string; cert: string; key: string }, user = "admin"): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: local",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${b64(tls.ca)}`,
    "users:",
    `- name: ${user}`,
    "  user:",
    `    client-certificate-data: ${b64(tls.cert)}`,
    `    client-key-data: ${b64(tls.key)}`,
    "contexts:",
    "- name: local",
    `  context: {cluster: local, user: ${user}}`,
    "current-context: local",
    "",
  ].join("\n");
}

export async function startControlPlane(
  opts: {
    controllerManager?: boolean;
    /**
     * More kube-controller-manager controllers besides the garbage collector and the namespace controller
     * (e.g. `job-controller`, which JobSet needs: its Jobs' pods are made by it); implies `controllerManager`.
     */
    controllers?: string[];
    /**
     * More kube-controller-manager flags (e.g. a short `--node-monitor-grace-period` for
     * `node-lifecycle-controller`); implies `controllerManager`.
     */
    controllerManagerArgs?: string[];
    /** Also run kube-scheduler (default profile, leader election off). */
    scheduler?: boolean;
    /** More kube-scheduler flags (e.g. `--kube-api-qps`: its default 50 binds at most ~50 pods a second). */
    schedulerArgs?: string[];
    /** More kube-apiserver flags. */
    apiserverArgs?: string[];
  } = {},
): Promise<ControlPlane> {
  const bins = binDir();
  const dir = mkdtempSync(join(tmpdir(), "qm-e2e-"));
  const pki = join(dir, "pki");
  mkdirSync(pki);
  const now = new Date();
  const ca = await createCertificateAuthority("qm-e2e-cluster-ca", 2, now);
  const serving = await issueCertificate({
    ca,
    commonName: "kube-apiserver",
    dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
    ips: ["127.0.0.1", "10.0.0.1"],
    usage: "server",
    days: 2,
    now,
  });
  const admin = await issueCertificate({ ca, commonName: "admin", organizations: ["system:masters"], usage: "client", days: 2, now });
  const sa = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const files: Record<string, string> = {
    "ca.crt": ca.certPem,
    "apiserver.crt": serving.certPem,
    "apiserver.key": serving.keyPem,
    "sa.key": sa.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    "sa.pub": sa.publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
  for (const [name, pem] of Object.entries(files)) writeFileSync(join(pki, name), pem, { mode: 0o600 });
  const tls = { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem };

  const children: Array<{ name: string; child: ChildProcess; log: string }> = [];
  const run = (name: string, args: string[]): ChildProcess => {
    const log = join(dir, `${name}.log`);
    const child = spawn(join(bins, name), args, { stdio: ["ignore", openSync(log, "a"), openSync(log, "a")] });
    children.push({ name, child, log });
    return child;
  };
  let stopped = false;
  /** The admin caller once the apiserver has answered, for the webhook-call counts read as it stops. */
  let metricsOf: (() => Promise<string>) | undefined;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killAll);
    if (metricsOf && process.env.QM_E2E_WEBHOOK_LOG) {
      const text = await metricsOf().catch(() => undefined);
      if (text !== undefined) recordWebhookCalls(text);
    }
    // Reverse order: controllers, apiserver, then etcd.
    for (const { child } of [...children].reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill("SIGTERM");
      const exited = await Promise.race([new Promise((r) => child.once("exit", () => r(true))), sleep(10_000).then(() => false)]);
      if (!exited) child.kill("SIGKILL");
    }
    rmSync(etcdData, { recursive: true, force: true });
    if (!process.env.QM_E2E_KEEP) rmSync(dir, { recursive: true, force: true });
  };
  const killAll = (): void => {
    for (const { child } of children) if (child.exitCode === null) child.kill("SIGKILL");
  };
  process.on("exit", killAll);

  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const shm = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  const etcdData = mkdtempSync(join(shm, "qm-etcd-"));
  try {
    run("etcd", [
      "--name=e2e",
      `--data-dir=${etcdData}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=e2e=http://127.0.0.1:${peerPort}`,
      "--unsafe-no-fsync=true",
      "--logger=zap",
      "--log-level=warn",
    ]);
    const apiserver = run("kube-apiserver", [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${apiPort}`,
      "--advertise-address=127.0.0.1",
      "--endpoint-reconciler-type=none",
      `--cert-dir=${join(dir, "apiserver-certs")}`,
      `--tls-cert-file=${join(pki, "apiserver.crt")}`,
      `--tls-private-key-file=${join(pki, "apiserver.key")}`,
      `--client-ca-file=${join(pki, "ca.crt")}`,
      `--service-account-issuer=https://127.0.0.1:${apiPort}`,
      `--service-account-key-file=${join(pki, "sa.pub")}`,
      `--service-account-signing-key-file=${join(pki, "sa.key")}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--authorization-mode=RBAC",
      "--allow-privileged=true",
      "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
      // As on clusters that harden ownership (OpenShift, many managed offerings): setting blockOwnerDeletion
      // on an ownerReference needs update on the owner's finalizers (adoption, per-replica Services).
      "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
      ...(opts.apiserverArgs ?? []),
    ]);

    const call =
      (auth: { cert?: string; key?: string; token?: string }) =>
      (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiReply> =>
        new Promise((resolve, reject) => {
          const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
          const req = request(
            {
              host: "127.0.0.1",
              port: apiPort,
              method,
              path,
              ca: tls.ca,
              ...(auth.cert ? { cert: auth.cert, key: auth.key } : {}),
              agent: false,
              headers: {
                accept: "application/json",
                ...(auth.token ? { authorization: `Bearer ${auth.token}` } : {}),
                // content-length: Node sends DELETE bodies unchunked, so without it the server never sees them.
                ...(data ? { "content-type": "application/json", "content-length": String(Buffer.byteLength(data)) } : {}),
                ...headers,
              },
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on("data", (c: Buffer) => chunks.push(c));
              res.on("end", () => {
                const text = Buffer.concat(chunks).toString();
                let parsed: unknown = text;
                try {
                  parsed = JSON.parse(text);
                } catch {
                  /* not JSON: keep the text */
                }
                resolve({ status: res.statusCode ?? 0, body: parsed, headers: res.headers });
              });
            },
          );
          req.on("error", reject);
          req.end(data);
        });
    const api = call({ cert: tls.cert, key: tls.key });

    const deadline = performance.now() + 90_000;
    for (;;) {
      if (apiserver.exitCode !== null) throw new Error(`kube-apiserver exited ${apiserver.exitCode}:\n${tail(join(dir, "kube-apiserver.log"))}`);
      const ready = await api("GET", "/readyz").catch(() => ({ status: 0 }));
      if (ready.status === 200 && (await api("GET", "/api/v1/namespaces/default")).status === 200) break;
      if (performance.now() > deadline) throw new Error(`kube-apiserver not ready after 90 s:\n${tail(join(dir, "kube-apiserver.log"))}`);
      await sleep(100);
    }
    metricsOf = async () => String((await api("GET", "/metrics")).body);

    const kubeconfig = join(dir, "kubeconfig");
    writeFileSync(kubeconfig, kubeconfigYaml(`https://127.0.0.1:${apiPort}`, tls), { mode: 0o600 });
    if (opts.controllerManager || opts.controllers?.length || opts.controllerManagerArgs?.length) {
      run("kube-controller-manager", [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        "--leader-elect=false",
        "--secure-port=0",
        `--controllers=${["garbage-collector-controller", "namespace-controller", ...(opts.controllers ?? [])].join(",")}`,
        ...(opts.controllerManagerArgs ?? []),
      ]);
    }
    if (opts.scheduler) {
      if (!existsSync(join(bins, "kube-scheduler"))) throw new Error(`QM_K8S_BIN_DIR=${bins} has no kube-scheduler: run test/e2e/controlplane/build.sh`);
      run("kube-scheduler", [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        "--leader-elect=false",
        "--secure-port=0",
        ...(opts.schedulerArgs ?? []),
      ]);
    }

    const kubectl = (args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> =>
      new Promise((resolve) => {
        const child = spawn(join(bins, "kubectl"), [`--kubeconfig=${kubeconfig}`, ...args], { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("exit", (code) => resolve({ code: code ?? -1, stdout, stderr }));
        child.stdin.end(stdin ?? "");
      });

    const serviceAccount = async (namespace: string, name: string): Promise<{ kubeconfig: string; api: ControlPlane["api"] }> => {
      const r = await api("POST", `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 3600 },
      });
      if (r.status !== 201) throw new Error(`TokenRequest for ${namespace}/${name}: ${r.status} ${JSON.stringify(r.body)}`);
      const token = r.body.status.token as string;
      const file = join(dir, `kubeconfig-${namespace}-${name}`);
      const b64 = Buffer.from(tls.ca).toString("base64");
      writeFileSync(
        file,
        `apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:${apiPort}\n    certificate-authority-data: ${b64}\nusers:\n- name: ${name}\n  user:\n    token: ${token}\ncontexts:\n- name: local\n  context: {cluster: local, user: ${name}, namespace: ${namespace}}\ncurrent-context: local\n`,
        { mode: 0o600 },
      );
      return { kubeconfig: file, api: call({ token }) };
    };

    const logs = (): string => children.map(({ name, log }) => `--- ${name}\n${tail(log, 15)}`).join("\n");
    return {
      dir,
      serviceAccount,
      apiUrl: `https://127.0.0.1:${apiPort}`,
      apiPort,
      kubeconfig,
      tls,
      binDir: bins,
      api,
      kubectl,
      logs,
      until: async (what, cond, ms = 30_000, everyMs = 200) => {
        const deadline = performance.now() + ms;
        while (!(await cond())) {
          if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}\n${logs()}`);
          await sleep(everyMs);
        }
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

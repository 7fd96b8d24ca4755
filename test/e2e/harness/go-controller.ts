/**
 * @module
 * What the real Go controllers of the conformance suites have in common (training-operator v1.9.4 in
 * `./operator.ts`; JobSet v0.12.0 and the Trainer v2 controller manager v2.3.0 in `./trainer.ts`): a
 * controller-runtime binary started against the e2e control plane with its log in a file, ready once a line
 * of its log says so, stopped by its PID (SIGTERM, then SIGKILL after 10 s; SIGKILL when the test process
 * exits); a serving pair for its webhook server issued by `src/certs/generate.ts` for 127.0.0.1 from a CA of
 * this run; and its webhook configurations pointed by URL at that server, with that CA as `caBundle`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCertificateAuthority, issueCertificate } from "../../../src/certs/generate.js";
import type { ControlPlane } from "./controlplane.js";

type Obj = Record<string, any>;

/** A Go controller process started by {@link startGoController}. */
export interface Controller {
  name: string;
  pid: number;
  /** The tail of its log, for failure messages. */
  logs(lines?: number): string;
  stop(): Promise<void>;
  /** Its webhook server's port (reached on 127.0.0.1). */
  webhookPort: number;
}

export interface GoControllerOptions {
  /** Names the process in messages and its log file (cp.dir/<name>.log). */
  name: string;
  bin: string;
  args: string[];
  /** Joins the test process's environment (KUBECONFIG is the control plane's); `unset` names are removed. */
  env?: NodeJS.ProcessEnv;
  unset?: string[];
  /** Ready once this matches its log so far. */
  ready: RegExp;
  /** What to say when it does not get ready in time (default: "not ready"). */
  notReady?: string;
  webhookPort: number;
  /** Runs once the process has stopped (e.g. to remove a file written for it). */
  cleanup?: () => void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Starts the binary; resolves once `ready` is in its log, throws (the process stopped) if it exits first or after 90 s. */
export async function startGoController(cp: ControlPlane, o: GoControllerOptions): Promise<Controller> {
  const log = join(cp.dir, `${o.name}.log`);
  const env: NodeJS.ProcessEnv = { ...process.env, ...o.env, KUBECONFIG: cp.kubeconfig };
  for (const k of o.unset ?? []) delete env[k];
  const child: ChildProcess = spawn(o.bin, o.args, { env, stdio: ["ignore", openSync(log, "a"), openSync(log, "a")] });
  const tail = (lines = 40): string => {
    try {
      return readFileSync(log, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  };
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const killNow = (): void => {
    if (running()) child.kill("SIGKILL");
  };
  process.on("exit", killNow);
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    process.off("exit", killNow);
    if (running()) {
      child.kill("SIGTERM");
      const exited = await Promise.race([new Promise((r) => child.once("exit", () => r(true))), sleep(10_000).then(() => false)]);
      if (!exited) child.kill("SIGKILL");
    }
    o.cleanup?.();
  };
  const deadline = performance.now() + 90_000;
  for (;;) {
    if (!running()) {
      await stop();
      throw new Error(`${o.name} exited ${child.exitCode ?? child.signalCode}:\n${tail()}`);
    }
    if (o.ready.test(tail(100_000))) break;
    if (performance.now() > deadline) {
      await stop();
      throw new Error(`${o.name} ${o.notReady ?? "not ready"} after 90 s:\n${tail()}`);
    }
    await sleep(200);
  }
  return { name: o.name, pid: child.pid!, logs: tail, stop, webhookPort: o.webhookPort };
}

/**
 * A serving pair for 127.0.0.1 (and `dnsNames`, default localhost) from a fresh CA, written as tls.crt/tls.key
 * into `dir`; returns the CA and the certificate PEMs.
 */
export async function servingPair(dir: string, name: string, dnsNames: string[] = ["localhost"]): Promise<{ caPem: string; certPem: string }> {
  mkdirSync(dir, { recursive: true });
  const now = new Date();
  const ca = await createCertificateAuthority(`qm-conformance-${name}-ca`, 2, now);
  const pair = await issueCertificate({ ca, commonName: dnsNames[0] ?? `${name}.local`, dnsNames, ips: ["127.0.0.1"], usage: "server", days: 2, now });
  writeFileSync(join(dir, "tls.crt"), pair.certPem);
  writeFileSync(join(dir, "tls.key"), pair.keyPem, { mode: 0o600 });
  return { caPem: ca.certPem, certPem: pair.certPem };
}

/**
 * `config` (a Mutating/ValidatingWebhookConfiguration as upstream declares it, changed in place) renamed
 * `name`, each webhook's `clientConfig.service` replaced by a URL to 127.0.0.1:`port` at the service's path,
 * with `caPem` as its caBundle.
 */
export function pointWebhooksAt(config: Obj, name: string, port: number, caPem: string): Obj {
  config.metadata = { name };
  for (const hook of config.webhooks as Obj[]) {
    const path = hook.clientConfig?.service?.path as string | undefined;
    if (!path) throw new Error(`${name}: webhook ${hook.name} has no clientConfig.service.path`);
    hook.clientConfig = { url: `https://127.0.0.1:${port}${path}`, caBundle: Buffer.from(caPem).toString("base64") };
  }
  return config;
}

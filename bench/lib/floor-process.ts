/**
 * The floor webhook (./floor-webhook.mjs) as its own process, serving a Quartermaster process's key pair (so the
 * apiserver trusts it with the same CA bundle); with `upstream`, a Quartermaster server it learns its answers from.
 * bench/e2e and bench/launch register it in place of Quartermaster: what any webhook costs.
 */
import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { freePort } from "../../test/e2e/harness/controlplane.js";

const FLOOR = resolve(import.meta.dirname, "floor-webhook.mjs");

export interface FloorProcess {
  port: number;
  pid(): number | undefined;
  /** Its plain-HTTP metrics (the admission histogram and TLS connections, named as Quartermaster's). */
  metricsPort(): number | undefined;
  stop(): Promise<void>;
}

export async function floorProcess(certs: { certDir: string }, upstream?: { port: number; certDir: string }): Promise<FloorProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      FLOOR,
      join(certs.certDir, "tls.crt"),
      join(certs.certDir, "tls.key"),
      String(port),
      "0",
      ...(upstream ? [String(upstream.port), join(upstream.certDir, "ca.crt")] : []),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  process.on("exit", () => child.kill("SIGKILL")); // never outlive a bench that failed
  const metricsPort = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /metrics http:\/\/[^ ]*:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`floor webhook exited ${code}`)));
  });
  return {
    port,
    pid: () => (child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    metricsPort: () => metricsPort,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

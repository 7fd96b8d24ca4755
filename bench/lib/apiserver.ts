/**
 * What the end-to-end benchmarks (bench/e2e.ts, bench/e2e-vap.ts) share: a pod create through the real
 * kube-apiserver as the harness's admin client, and the CPU seconds of the processes it runs, from /proc.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request, type Agent } from "node:https";
import type { ControlPlane } from "../../test/e2e/harness/controlplane.js";

/** The apiserver's answer to one create: status (0 when the request failed), time and body text. */
export interface Created {
  status: number;
  ms: number;
  text: string;
  /** The transport error, when status is 0. */
  error?: string;
}

/** One pod create in `namespace` as the admin client; a new TLS connection each time unless `agent` keeps them. */
export function createPod(cp: ControlPlane, namespace: string, body: string, agent: Agent | false, dryRun = false): Promise<Created> {
  const started = performance.now();
  return new Promise((resolve) => {
    const failed = (err: Error): void => resolve({ status: 0, ms: performance.now() - started, text: "", error: err.message });
    const req = request(
      {
        host: "127.0.0.1",
        port: cp.apiPort,
        method: "POST",
        path: `/api/v1/namespaces/${namespace}/pods${dryRun ? "?dryRun=All" : ""}`,
        ca: cp.tls.ca,
        cert: cp.tls.cert,
        key: cp.tls.key,
        agent,
        headers: { "content-type": "application/json", accept: "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, text: Buffer.concat(chunks).toString() }));
        res.on("error", failed);
      },
    );
    req.on("error", failed);
    req.end(body);
  });
}

/** CPU seconds (user + system) of a process, from /proc (10 ms ticks). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** This process's child by command name (the harness spawned etcd and kube-apiserver here). */
export function childPid(name: string): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && comm === name.slice(0, 15)) return Number(entry);
    } catch {
      /* gone meanwhile */
    }
  }
  throw new Error(`no child process ${name}`);
}

/**
 * A CPU profile of kube-apiserver over the next `seconds` (Go's pprof, served at /debug/pprof/profile
 * with --profiling, the apiserver's default), written to `file` for `go tool pprof`. Resolves when written.
 */
export function apiserverProfile(cp: ControlPlane, seconds: number, file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: cp.apiPort,
        method: "GET",
        path: `/debug/pprof/profile?seconds=${seconds}`,
        ca: cp.tls.ca,
        cert: cp.tls.cert,
        key: cp.tls.key,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`pprof: ${res.statusCode} ${Buffer.concat(chunks).toString().slice(0, 200)}`));
          writeFileSync(file, Buffer.concat(chunks));
          resolve();
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

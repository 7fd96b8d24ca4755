/**
 * One AdmissionReview POSTed to the bench's webhook server over HTTPS (its certificate's name `qm.bench.svc`),
 * timed from the call to the answer's last byte. Never rejects: a network error is its status (`ECONNRESET`…).
 * The abuse benches' senders and their small reviews all go through it.
 */
import { type Agent, request } from "node:https";

/** The name in the bench servers' certificates. */
export const SERVERNAME = "qm.bench.svc";

export interface Posted {
  ms: number;
  /** The HTTP status, or the error's code. */
  status: string;
  /** The answer's body, when `read` was asked for. */
  body?: Buffer;
}

export function postReview(
  port: number,
  ca: string,
  path: string,
  body: string,
  agent: Agent | false,
  read = false,
  headers: Record<string, string> = {},
): Promise<Posted> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        agent,
        ca,
        servername: SERVERNAME,
        timeout: 30_000,
        headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        if (read) res.on("data", (c: Buffer) => chunks.push(c));
        else res.resume();
        res.on("end", () => resolve({ ms: performance.now() - started, status: String(res.statusCode), ...(read ? { body: Buffer.concat(chunks) } : {}) }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ ms: performance.now() - started, status: err.code ?? err.message }));
    req.end(body);
  });
}

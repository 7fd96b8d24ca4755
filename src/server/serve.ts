/**
 * @module
 * The HTTPS listener around the express app: TLS 1.2+, the key pair hot-reloaded from its files,
 * keep-alive longer than the apiserver's idle connection reuse, and a bounded graceful shutdown.
 */
import { createServer as createPlainServer, type Server as PlainServer } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Webhook } from "../admission/handler.js";
import { createRequestListener } from "./app.js";
import type { AdmissionMetrics } from "./metrics.js";
import { readKeyPair, watchKeyPair } from "./tls.js";

/** The apiserver keeps idle webhook connections for up to 90 s; ours must outlive that (anchors.md §9 item 2). */
export const KEEP_ALIVE_TIMEOUT_MS = 90_000;
/** Must exceed keepAliveTimeout, or Node can cut a reused connection as the next request's headers arrive. */
export const HEADERS_TIMEOUT_MS = 95_000;

export interface ServeOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  /**
   * Plain HTTP, no key pair: only behind a platform that terminates TLS itself and speaks HTTP to the
   * container (Knative's queue-proxy). The apiserver itself only calls webhooks over HTTPS.
   */
  plainHttp?: boolean;
  webhooks: Readonly<Record<string, Webhook>>;
  metrics: AdmissionMetrics;
  log: Logger;
  /** How long shutdown waits for in-flight requests before cutting connections. */
  drainTimeoutMs?: number;
  /** How long to keep serving after shutdown begins, while endpoints stop routing here. */
  shutdownDelayMs?: number;
  tlsPollMs?: number;
}

export interface RunningServer {
  readonly server: Server | PlainServer;
  readonly port: number;
  readonly url: string;
  /** Re-reads the key pair now (the file watch does this by itself). */
  reloadTls(): Promise<void>;
  /** Stops accepting, drains in-flight requests (bounded), and resolves when the listener is closed. */
  close(): Promise<void>;
}

export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  const { log, metrics } = opts;
  if (opts.plainHttp) return startPlainServer(opts);
  const initial = await readKeyPair(opts.certFile, opts.keyFile);
  metrics.certificateLoaded(initial.notAfter);
  let ready = false;
  let draining = false;

  const listener = createRequestListener({
    webhooks: opts.webhooks,
    metrics,
    log,
    ready: () => ready && !draining,
    draining: () => draining,
  });
  const server = createServer(
    { cert: initial.cert, key: initial.key, minVersion: "TLSv1.2", requestTimeout: 120_000 },
    listener,
  );
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.on("tlsClientError", (err) => log.debug({ err }, "tls handshake failed"));

  const watcher = watchKeyPair({
    certFile: opts.certFile,
    keyFile: opts.keyFile,
    initial,
    log,
    pollMs: opts.tlsPollMs,
    onChange(pair) {
      server.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: "TLSv1.2" });
      metrics.certificateLoaded(pair.notAfter);
      log.info({ fingerprint: pair.fingerprint, notAfter: pair.notAfter.toISOString() }, "tls: serving key pair reloaded");
    },
    onError(err) {
      metrics.certificateReloadFailed();
      log.warn({ err }, "tls: key pair not reloaded; still serving the previous one");
    },
  });

  await listen(server, opts);
  ready = true;
  const port = (server.address() as AddressInfo).port;
  const url = `https://${opts.host.includes(":") ? `[${opts.host}]` : opts.host}:${port}`;
  log.info({ url, notAfter: initial.notAfter.toISOString() }, "serving");
  const close = drainer(server, opts, () => {
    draining = true;
  }, () => watcher.close());
  return { server, port, url, reloadTls: () => watcher.check(), close };
}

function listen(server: Server | PlainServer, opts: ServeOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** The same app over plain HTTP (see `ServeOptions.plainHttp`): same timeouts, readiness and drain. */
async function startPlainServer(opts: ServeOptions): Promise<RunningServer> {
  let ready = false;
  let draining = false;
  const listener = createRequestListener({ webhooks: opts.webhooks, metrics: opts.metrics, log: opts.log, ready: () => ready && !draining, draining: () => draining });
  const server = createPlainServer({ requestTimeout: 120_000 }, listener);
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  await listen(server, opts);
  ready = true;
  const port = (server.address() as AddressInfo).port;
  const url = `http://${opts.host.includes(":") ? `[${opts.host}]` : opts.host}:${port}`;
  opts.log.info({ url }, "serving plain HTTP (TLS terminated in front of this process)");
  const close = drainer(server, opts, () => {
    draining = true;
  }, () => undefined);
  return { server, port, url, reloadTls: async () => undefined, close };
}

/** SIGTERM handling: readiness fails at once, serve on for the shutdown delay, then drain (bounded). */
function drainer(server: Server | PlainServer, opts: ServeOptions, startDraining: () => void, stopWatching: () => void): () => Promise<void> {
  const { log } = opts;
  let closing: Promise<void> | undefined;
  return (): Promise<void> => {
    closing ??= (async () => {
      startDraining();
      log.info({ shutdownDelayMs: opts.shutdownDelayMs ?? 0 }, "shutting down: readiness now fails");
      if (opts.shutdownDelayMs) await new Promise((r) => setTimeout(r, opts.shutdownDelayMs));
      stopWatching();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const bound = opts.drainTimeoutMs ?? 10_000;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), bound);
      });
      const cut = await Promise.race([closed.then(() => false), timedOut]);
      clearTimeout(timer);
      if (cut) {
        log.warn({ drainTimeoutMs: bound }, "drain timeout: closing remaining connections");
        server.closeAllConnections();
        await closed;
      }
      log.info("server closed");
    })();
    return closing;
  };
}

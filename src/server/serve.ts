/**
 * @module
 * The listeners: the webhook port over HTTPS (TLS 1.2+ with ECDHE-AEAD suites, the key pair hot-reloaded
 * from its files, optionally the apiserver's client certificate required; HTTP/1.1, and HTTP/2 by ALPN when
 * asked for) and the metrics port over plain HTTP (`/metrics`, `/healthz`, `/readyz`); connection, time and
 * body bounds; a bounded graceful shutdown.
 *
 * HTTP/2 (`http2: true`, `serve --http2`): the apiserver's webhook client (Go's http.Transport as client-go
 * configures it) speaks h2 when the server offers it, and then sends every call to one webhook over one
 * connection, concurrent calls as streams of it: one TLS handshake per apiserver instead of one per
 * concurrent call, and ~0.5 KB less per pod on the wire (HPACK). `node:http2`'s secure server with
 * `allowHTTP1` serves both on the one port, HTTP/1.1 through Node's own HTTP/1 code (the same request
 * listener, timeouts and connection tracking as `node:https`). It is off by default: with keep-alive the
 * apiserver reuses its HTTP/1.1 connections (bench/e2e: no new connection in 400 pods at 1 and 4 clients),
 * so there is no handshake to save, and in bench/e2e (two runs, same-run baseline, rounds interleaved)
 * HTTP/2 cost the apiserver more CPU per pod at 4 clients than HTTP/1.1 did (4.5 and 3.1 ms against
 * 1.2-3.9 ms) with a higher p50.
 */
import { createServer as createPlainServer, type Server as PlainServer } from "node:http";
import { createServer, type Server } from "node:https";
import type { Http2SecureServer, ServerHttp2Session, ServerHttp2Stream } from "node:http2";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import type { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { DEFAULT_CIPHERS, type TlsOptions } from "node:tls";
import type { Logger } from "pino";
import { asHttp2CompatListener } from "../core/boundary.js";
import type { Webhook } from "../admission/handler.js";
import { createBodyParser, type BodyParser } from "./parse.js";
import {
  answerClientError,
  answerExpectation,
  createBodyBudget,
  createMetricsListener,
  createRequestListener,
  MAX_INFLIGHT_BODY_BYTES,
  pathOf,
  type AppOptions,
  type RequestListener,
} from "./app.js";
import type { AdmissionMetrics } from "./metrics.js";
import { KeyPairRefused, readKeyPair, watchKeyPair, type KeyPair, type KeyPairWatcher } from "./tls.js";
import { guardConnections, type Guard, type GuardOptions } from "./connections.js";

/**
 * Idle keep-alive connections are closed after this. The apiserver's webhook client (Go's http.Transport
 * as client-go's SetTransportDefaults configures it) drops idle connections after 90 s: ours outlive that,
 * so it is always the apiserver that closes an idle connection and never races a request it is sending
 * into a connection we are closing.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 95_000;
/**
 * From the first byte of a request (or the connection's opening) to the end of its headers. The apiserver
 * writes a request's headers at once; 20 s only ever cuts a client that trickles them, which would otherwise
 * hold a connection slot and its TLS buffers. Node also times a connection's first request from the
 * connection's start: one that has sent nothing at all is not cut here (`bound`, issue 52), but by the guard's
 * sweep past the client's reuse window.
 * Node 20 times a request from its first byte, so this may be shorter than the keep-alive timeout: an idle
 * keep-alive connection is not cut by it (checked with node 20: only a request under way is timed).
 */
export const HEADERS_TIMEOUT_MS = 20_000;
/**
 * From the first byte of a request to the end of its body. A webhook's timeoutSeconds is at most 30 (the
 * API's maximum; ours is 5), so the apiserver has given up on any request not received in 30 s; the bound
 * keeps a slow upload from holding its part of the in-flight body budget (and memory) for long.
 */
export const REQUEST_TIMEOUT_MS = 30_000;
/** How often Node checks the two timeouts above; its default (30 s) would let them overrun by as much. */
export const CONNECTIONS_CHECK_MS = 2_000;
/** A TLS handshake not done in this time is cut (Node's default is 120 s). */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * Open connections at most. An idle TLS connection costs ~30 KB (5,000 took ~150 MB), so 1,000 bound that
 * to ~30 MB; the apiserver opens one per concurrent call per apiserver instance, tens at most. At the bound
 * a new connection is taken and the one that matters least is closed (`connections.ts`).
 */
export const MAX_CONNECTIONS = 1_000;
/**
 * Open connections at most from one source address: a quarter of the pool, many times what one apiserver
 * instance opens, so one tenant's pod can take no more than that, and the others' evictions fall on it.
 */
export const MAX_CONNECTIONS_PER_SOURCE = 250;
/**
 * Connections in their TLS handshake at most. The apiserver's handshakes take milliseconds, so this many at
 * once are a flood; past it the oldest is closed.
 */
export const MAX_HANDSHAKING = 200;
/**
 * With `--client-ca` a connection is not authenticated until its handshake is done: those connections get a
 * smaller pool and a shorter deadline (the apiserver's handshake, client certificate included, takes
 * milliseconds on a loaded control plane).
 */
export const MAX_HANDSHAKING_CLIENT_CA = 64;
export const HANDSHAKE_TIMEOUT_CLIENT_CA_MS = 3_000;
/**
 * A connection with nothing in flight that has served no admission request for this long is closed,
 * whatever else it sends: a `GET /healthz` each minute kept connections forever (issue 29). The same as the
 * keep-alive timeout, so the apiserver's own idle connections are still its to close.
 */
export const IDLE_USE_TIMEOUT_MS = KEEP_ALIVE_TIMEOUT_MS;

/**
 * HTTP/2 streams open at once on one connection (the SETTINGS the server sends). Go's HTTP/2 server
 * allows 250; the in-flight body budget bounds what they can hold, this bounds the streams themselves.
 */
export const MAX_CONCURRENT_STREAMS = 250;
/** HTTP/2 header list size at most, as HTTP/1.1's header bound (Node's 16 KiB default maxHeaderSize). */
export const MAX_HEADER_LIST_BYTES = 16 * 1024;

/** Open connections at most on the metrics port (Prometheus, kubelet probes). */
export const MAX_METRICS_CONNECTIONS = 64;

/**
 * TLS 1.2 suites: ECDHE key exchange with an AEAD cipher only (AES-GCM, ChaCha20-Poly1305), as Mozilla's
 * "intermediate" profile lists them; no static RSA, CBC, CCM or ARIA. TLS 1.3 suites: Node's own defaults
 * (all AEAD by construction).
 */
export const TLS12_CIPHERS = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
];
export const CIPHERS = [...DEFAULT_CIPHERS.split(":").filter((c) => c.startsWith("TLS_")), ...TLS12_CIPHERS].join(":");
const TLS_CONTEXT = { minVersion: "TLSv1.2", ciphers: CIPHERS, honorCipherOrder: true } as const;

export interface ServeOptions {
  host: string;
  port: number;
  /** Port of the metrics listener (`/metrics`, `/healthz`, `/readyz`, plain HTTP); 0 picks a free one; absent: none. */
  metricsPort?: number;
  certFile: string;
  keyFile: string;
  /**
   * CA bundle (PEM file) that client certificates must chain to. When set, every connection to the
   * webhook port must present one (the apiserver's, from its AdmissionConfiguration kubeconfig).
   */
  clientCaFile?: string;
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
  /** Offer HTTP/2 (ALPN h2) besides HTTP/1.1, from `node:http2` (default false: HTTP/1.1 only, from `node:https`). */
  http2?: boolean;
  /** Open connections at most on the webhook port (default {@link MAX_CONNECTIONS}). */
  maxConnections?: number;
  /** TLS handshake deadline (default {@link HANDSHAKE_TIMEOUT_MS}, {@link HANDSHAKE_TIMEOUT_CLIENT_CA_MS} with a client CA). */
  handshakeTimeoutMs?: number;
  /** Open connections at most from one source address (default {@link MAX_CONNECTIONS_PER_SOURCE}, at most `maxConnections`). */
  maxConnectionsPerSource?: number;
  /** Cap on the body bytes in flight (default {@link MAX_INFLIGHT_BODY_BYTES}). */
  maxInflightBodyBytes?: number;
  /** Wall clock (certificate validity). */
  now?: () => Date;
  /** Parses large bodies off the event loop; one is made (its worker started lazily) when absent. */
  bodyParser?: BodyParser;
  /** Bodies this large or larger are parsed off the event loop (default `OFFLOAD_BYTES`; Infinity: never). */
  offloadBytes?: number;
  /**
   * Start the body parser's worker {@link WARM_BODY_PARSER_AFTER_MS} after listening, off the readiness path, so the
   * first large body does not wait for its boot (~20 ms). Default false: the first large body starts it, and a server
   * sent none does not carry the thread (~5 MiB of RSS; `parse.ts`). Either way it stops after `WORKER_IDLE_MS` idle.
   */
  warmBodyParser?: boolean;
  /** How long after listening the worker is started; default {@link WARM_BODY_PARSER_AFTER_MS}. */
  warmBodyParserAfterMs?: number;
}

/**
 * The body parser's worker starts this long after the server listens, not at once (issue 51, cold start): its boot
 * (a second V8 isolate and Node's bootstrap, tens of ms of CPU) otherwise runs while the first reviews are answered.
 * bench:cold-start, 10 starts each on the loaded 2-core machine, listening to the first answered /mutate/pods:
 * median 303 → 151 ms and 421 → 155 ms in two runs.
 */
export const WARM_BODY_PARSER_AFTER_MS = 1000;

/** What `node:http2`'s server has for its HTTP/1.1 connections (`allowHTTP1`), which its types leave out. */
type Http1Fallback = Pick<Server, "keepAliveTimeout" | "headersTimeout" | "requestTimeout" | "closeIdleConnections">;
/** The webhook port's server: HTTP/2 with HTTP/1.1, HTTPS (HTTP/1.1 only), or plain HTTP. */
export type WebhookServer = (Http2SecureServer & Http1Fallback) | Server | PlainServer;

export interface RunningServer {
  readonly server: WebhookServer;
  readonly port: number;
  readonly url: string;
  /** The metrics listener, when `metricsPort` was given. */
  readonly metricsServer?: PlainServer;
  readonly metricsPort?: number;
  /** Re-reads the key pair now (the file watch does this by itself). */
  reloadTls(): Promise<void>;
  /** Stops accepting, drains in-flight requests (bounded), and resolves when the listener is closed. */
  close(): Promise<void>;
}

/**
 * The bounds every listener gets (see the constants above). Set as properties, which Node's HTTP/1 code
 * reads for each connection: `node:http2`'s server takes none of them as options (it sets its own 60 s
 * headers and 300 s request timeouts, checked every 30 s, for its HTTP/1.1 connections). Connections are
 * bounded by the guard (`connections.ts`), not `maxConnections`, which would refuse the newcomer.
 */
function bound(server: WebhookServer, listener: RequestListener, guard: Omit<GuardOptions, "now" | "sweepMs">): Guard {
  const http1 = server as Server & { connectionsCheckingInterval: number };
  http1.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  http1.headersTimeout = HEADERS_TIMEOUT_MS;
  http1.requestTimeout = REQUEST_TIMEOUT_MS;
  // Read when the server starts listening.
  http1.connectionsCheckingInterval = CONNECTIONS_CHECK_MS;
  server.on("checkContinue", listener.checkContinue);
  server.on("checkExpectation", answerExpectation);
  // Every kind of server is an EventEmitter, and an emitter's `on` takes each event GuardedServer names.
  const events: EventEmitter = server;
  const guarded = guardConnections(events, guard);
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex & { remoteAddress?: string; remotePort?: number }) => {
    // Node times a connection's first request from the connection's start, so an idle connection that has
    // sent nothing yet (one the apiserver dialled as a spare and keeps for up to 90 s) "times out" after
    // HEADERS_TIMEOUT_MS, and a POST it writes as we cut it gets EOF (issue 52). One that received nothing
    // since its handshake or last answer is at rest, not slow: it stays, for the guard's sweep to close past
    // the client's reuse window. Node no longer times it; its next request is timed afresh.
    if (err.code === "ERR_HTTP_REQUEST_TIMEOUT" && guarded.quiet(socket)) return;
    answerClientError(err, socket);
  });
  return guarded;
}

/** The metrics port's guard: every request is use (Prometheus and the kubelet's probes). */
function metricsGuard(metrics?: AdmissionMetrics): Omit<GuardOptions, "now" | "sweepMs"> {
  return {
    limits: { max: MAX_METRICS_CONNECTIONS, perSource: MAX_METRICS_CONNECTIONS, handshaking: MAX_METRICS_CONNECTIONS, idleMs: IDLE_USE_TIMEOUT_MS },
    tls: false,
    isUse: () => true,
    onShed: metrics && ((reason) => metrics.connectionShed("metrics", reason)),
  };
}

/**
 * `requireHostHeader: false`: Node would answer an HTTP/1.1 request without Host with a bare 400 (no
 * Status body); nothing here reads Host, so such a request is served like any other.
 */
const SERVER_OPTIONS = {
  requireHostHeader: false,
  requestTimeout: REQUEST_TIMEOUT_MS,
  headersTimeout: HEADERS_TIMEOUT_MS,
  connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
  keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
};

/** What the probes and the drain read and write while the server runs. */
interface ServingState {
  ready: boolean;
  draining: boolean;
  /** The serving certificate's notAfter, in ms (Infinity over plain HTTP). */
  notAfter: number;
}

/** What the steps of `startServer` share. */
interface Serving {
  opts: ServeOptions;
  now: () => Date;
  state: ServingState;
  listener: RequestListener;
  h2: Http2Tracking;
}

/** The webhook port's server, and the key pair watch behind its TLS (none over plain HTTP). */
interface WebhookPort {
  server: WebhookServer;
  watcher?: KeyPairWatcher;
}

/**
 * Starts the webhook port (TLS, unless `plainHttp`) and the metrics port when asked for, in steps: the listener,
 * the server, the connection guards, the listen, then readiness; and answers how to reach and stop them.
 */
export async function startServer(opts: ServeOptions): Promise<RunningServer> {
  const now = opts.now ?? ((): Date => new Date());
  const state: ServingState = { ready: false, draining: false, notAfter: Infinity };
  const appOptions = appOptionsFor(opts, state, now);
  const parser = appOptions.bodyParser;
  const serving: Serving = { opts, now, state, listener: createRequestListener(appOptions), h2: { sessions: new Set(), sockets: new Set() } };
  const { server, watcher } = opts.plainHttp ? { server: createPlainServer(SERVER_OPTIONS, serving.listener) } : await createTlsServer(serving);
  const webhookGuard = bound(server, serving.listener, webhookGuardOptions(opts));
  opts.metrics.trackConnections(() => webhookGuard.counts());
  const metricsPort = opts.metricsPort !== undefined ? createMetricsPort(appOptions) : undefined;
  const metricsServer = metricsPort?.server;
  const guards = [webhookGuard, ...(metricsPort ? [metricsPort.guard] : [])];
  await listenAll({ opts, server, metricsServer, watcher, guards });
  state.ready = true;
  warmBodyParser(opts, parser);
  const address = logServing(opts, state, server, metricsServer);
  const close = drainer(
    [server, ...(metricsServer ? [metricsServer] : [])],
    serving.h2,
    opts,
    () => {
      state.draining = true;
    },
    () => {
      watcher?.close();
      for (const guard of guards) guard.stop();
    },
  );
  const closeAll = (): Promise<void> => close().then(() => parser.close());
  return { server, close: closeAll, ...address, metricsServer, reloadTls: () => watcher?.check() ?? Promise.resolve() };
}

/** The webhook listener's options: its probes read `state`, its body budget and parser are made here unless given. */
function appOptionsFor(opts: ServeOptions, state: ServingState, now: () => Date): AppOptions & { bodyParser: BodyParser } {
  const { log, metrics } = opts;
  return {
    webhooks: opts.webhooks,
    metrics,
    log,
    ready: () => state.ready && !state.draining,
    draining: () => state.draining,
    certificateExpired: () => now().getTime() > state.notAfter,
    bodyBudget: createBodyBudget(opts.maxInflightBodyBytes ?? MAX_INFLIGHT_BODY_BYTES),
    bodyParser: opts.bodyParser ?? createBodyParser({ log }),
    ...(opts.offloadBytes !== undefined ? { offloadBytes: opts.offloadBytes } : {}),
  };
}

/** The secure context for a key pair: our TLS versions and ciphers, and the client CA when there is one. */
function secureContext(pair: { cert: Buffer; key: Buffer }, clientCa: Buffer | undefined): TlsOptions {
  return { ...TLS_CONTEXT, cert: pair.cert, key: pair.key, ...(clientCa ? { ca: clientCa } : {}) };
}

/** The webhook port over TLS: the key pair read and checked, the server made, the key pair watched. */
async function createTlsServer(serving: Serving): Promise<WebhookPort> {
  const { opts, state } = serving;
  const initial = await readKeyPair(opts.certFile, opts.keyFile);
  const clientCa = opts.clientCaFile ? await readFile(opts.clientCaFile) : undefined;
  opts.metrics.certificateLoaded(initial.notAfter);
  state.notAfter = initial.notAfter.getTime();
  logCertificateValidity(serving, initial);
  const tlsOptions: TlsOptions = {
    ...secureContext(initial, clientCa),
    handshakeTimeout: opts.handshakeTimeoutMs ?? (clientCa ? HANDSHAKE_TIMEOUT_CLIENT_CA_MS : HANDSHAKE_TIMEOUT_MS),
    ...(clientCa ? { requestCert: true, rejectUnauthorized: true } : {}),
  };
  const https = await createHttpsServer(serving, tlsOptions);
  const watcher = watchServingKeyPair(serving, { https, initial, clientCa });
  return { server: https, watcher };
}

/** An expired certificate is an error (readiness fails), one not valid yet a warning. */
function logCertificateValidity({ opts, now }: Serving, initial: KeyPair): void {
  if (now().getTime() > initial.notAfter.getTime())
    opts.log.error({ notAfter: initial.notAfter.toISOString() }, "tls: the serving certificate has expired; readiness fails until a valid one is loaded");
  else if (now().getTime() < initial.notBefore.getTime())
    opts.log.warn({ notBefore: initial.notBefore.toISOString() }, "tls: the serving certificate is not valid yet");
}

/**
 * The TLS server: HTTPS (HTTP/1.1 only), or HTTP/2 with HTTP/1.1 when `http2` is set. `node:http2` is imported only
 * then: loading it (its core, compat layer and nghttp2 bindings) took ~4 ms of a cold start that does not use it.
 */
async function createHttpsServer({ opts, listener, h2 }: Serving, tlsOptions: TlsOptions): Promise<(Http2SecureServer & Http1Fallback) | Server> {
  const { log, metrics } = opts;
  let https: (Http2SecureServer & Http1Fallback) | Server;
  if (opts.http2 !== true) https = createServer({ ...SERVER_OPTIONS, ...tlsOptions }, listener);
  else {
    const http2 = await import("node:http2");
    https = http2.createSecureServer(
      { ...tlsOptions, allowHTTP1: true, settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS, maxHeaderListSize: MAX_HEADER_LIST_BYTES } },
      asHttp2CompatListener(listener),
    ) as Http2SecureServer & Http1Fallback;
    serveHttp2(https, h2, http2.constants.NGHTTP2_CANCEL);
  }
  https.on("tlsClientError", (err) => log.debug({ err }, "tls handshake failed"));
  // How often clients (the apiserver) open connections: each is a handshake, the dearest part of a call.
  https.on("secureConnection", (socket: { alpnProtocol?: string | false }) => metrics.connectionOpened(socket.alpnProtocol === "h2" ? "h2" : "http/1.1"));
  return https;
}

/** Reloads the serving key pair when its files change; a refused one leaves the previous pair serving. */
function watchServingKeyPair(
  { opts, now, state }: Serving,
  { https, initial, clientCa }: { https: (Http2SecureServer & Http1Fallback) | Server; initial: KeyPair; clientCa: Buffer | undefined },
): KeyPairWatcher {
  const { log, metrics } = opts;
  return watchKeyPair({
    certFile: opts.certFile,
    keyFile: opts.keyFile,
    initial,
    log,
    pollMs: opts.tlsPollMs,
    now,
    onChange(pair) {
      https.setSecureContext(secureContext(pair, clientCa));
      metrics.certificateLoaded(pair.notAfter);
      state.notAfter = pair.notAfter.getTime();
      log.info({ fingerprint: pair.fingerprint, notAfter: pair.notAfter.toISOString() }, "tls: serving key pair reloaded");
    },
    onError(err) {
      const reason = err instanceof KeyPairRefused ? err.reason : "unreadable";
      metrics.certificateReloadFailed(reason);
      log.warn({ err, reason }, "tls: key pair not reloaded; still serving the previous one");
    },
  });
}

/** The webhook port's guard: only an admission POST on a webhook path counts as use. */
function webhookGuardOptions(opts: ServeOptions): Omit<GuardOptions, "now" | "sweepMs"> {
  const max = opts.maxConnections ?? MAX_CONNECTIONS;
  const webhookPaths = new Set(Object.keys(opts.webhooks));
  return {
    limits: {
      max,
      perSource: Math.min(max, opts.maxConnectionsPerSource ?? MAX_CONNECTIONS_PER_SOURCE),
      handshaking: Math.min(max, opts.clientCaFile ? MAX_HANDSHAKING_CLIENT_CA : MAX_HANDSHAKING),
      idleMs: IDLE_USE_TIMEOUT_MS,
    },
    tls: !opts.plainHttp,
    isUse: (req) => req.method === "POST" && webhookPaths.has(pathOf(req.url)),
    onShed: (reason) => opts.metrics.connectionShed("webhook", reason),
  };
}

/** The metrics port's server and its guard. */
function createMetricsPort(appOptions: AppOptions): { server: PlainServer; guard: Guard } {
  const metricsListener = createMetricsListener(appOptions);
  const server = createPlainServer(SERVER_OPTIONS, metricsListener);
  return { server, guard: bound(server, metricsListener, metricsGuard(appOptions.metrics)) };
}

/** Listens on both ports; when either fails, everything started is stopped and the error thrown. */
async function listenAll(ports: {
  opts: ServeOptions;
  server: WebhookServer;
  metricsServer: PlainServer | undefined;
  watcher: KeyPairWatcher | undefined;
  guards: Guard[];
}): Promise<void> {
  const { opts, server, metricsServer, watcher, guards } = ports;
  try {
    await listen(server, opts.host, opts.port);
    if (metricsServer) await listen(metricsServer, opts.host, opts.metricsPort!);
  } catch (err) {
    watcher?.close();
    for (const guard of guards) guard.stop();
    server.close();
    metricsServer?.close();
    throw err;
  }
}

function warmBodyParser(opts: ServeOptions, parser: BodyParser): void {
  if (opts.warmBodyParser === true && (opts.offloadBytes ?? 0) !== Infinity) {
    // After the listen callback has run, readiness is true and the first reviews are answered: the ~20 ms boot
    // happens in the worker's own thread, but on a machine of two cores it takes one from the first answers.
    setTimeout(() => parser.warm(), opts.warmBodyParserAfterMs ?? WARM_BODY_PARSER_AFTER_MS).unref();
  }
}

/** Logs where the server listens, and returns its ports and URL. */
function logServing(
  opts: ServeOptions,
  state: ServingState,
  server: WebhookServer,
  metricsServer: PlainServer | undefined,
): { port: number; url: string; metricsPort?: number } {
  const port = (server.address() as AddressInfo).port;
  const metricsPort = metricsServer ? (metricsServer.address() as AddressInfo).port : undefined;
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  const url = `${opts.plainHttp ? "http" : "https"}://${host}:${port}`;
  if (opts.plainHttp) opts.log.info({ url, metricsPort }, "serving plain HTTP (TLS terminated in front of this process)");
  else opts.log.info({ url, metricsPort, notAfter: new Date(state.notAfter).toISOString(), clientCa: opts.clientCaFile !== undefined }, "serving");
  return { port, url, metricsPort };
}

/** What the drain closes on an HTTP/2 server: its sessions (a GOAWAY), and every connection (the cut). */
interface Http2Tracking {
  sessions: Set<ServerHttp2Session>;
  /**
   * Its TLS connections of both protocols: `node:http2`'s server has no `closeAllConnections` for those
   * it serves HTTP/1.1 on.
   */
  sockets: Set<Duplex>;
}

/**
 * The HTTP/2 side of the webhook port: idle sessions closed after the keep-alive timeout (as idle HTTP/1.1
 * connections are), a stream cut once it has been open the request timeout, sessions and connections
 * tracked for the drain.
 */
function serveHttp2(server: Http2SecureServer, { sessions, sockets }: Http2Tracking, cancel: number): void {
  server.on("secureConnection", (socket: Duplex) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  // A session idle this long gets a GOAWAY (`close()`), not node:http2's default for the event (a destroy, no
  // GOAWAY: a request the client sends as the connection drops would get EOF, issue 52). The same event comes
  // for the server's HTTP/1.1 connections (a socket): those are idle keep-alive ones, destroyed as Node would.
  server.setTimeout(KEEP_ALIVE_TIMEOUT_MS);
  server.on("timeout", (idle: ServerHttp2Session | Duplex) => {
    if ("goaway" in idle) idle.close();
    else idle.destroy();
  });
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  // HTTP/1.1's request timeout, per stream: from its opening, the headers, body and answer within it. One
  // timer per stream, cleared when it closes, so an idle server has none.
  server.on("stream", (stream: ServerHttp2Stream) => {
    const timer = setTimeout(() => stream.close(cancel), REQUEST_TIMEOUT_MS);
    timer.unref();
    stream.once("close", () => clearTimeout(timer));
  });
}

function listen(server: WebhookServer, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * SIGTERM handling: readiness fails at once, serve on for the shutdown delay, then drain (bounded). The
 * metrics listener (last in `servers`) closes with the webhook listener, answering probes until then.
 */
function drainer(
  servers: WebhookServer[],
  { sessions, sockets }: Http2Tracking,
  opts: ServeOptions,
  startDraining: () => void,
  stopWatching: () => void,
): () => Promise<void> {
  const { log } = opts;
  let closing: Promise<void> | undefined;
  return (): Promise<void> => {
    closing ??= (async () => {
      startDraining();
      log.info({ shutdownDelayMs: opts.shutdownDelayMs ?? 0 }, "shutting down: readiness now fails");
      if (opts.shutdownDelayMs) await new Promise((r) => setTimeout(r, opts.shutdownDelayMs));
      stopWatching();
      const closed = Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
      for (const server of servers) server.closeIdleConnections();
      // HTTP/2: a GOAWAY; the client opens no new stream on the session, the ones under way finish.
      for (const session of sessions) session.close();
      const limit = opts.drainTimeoutMs ?? 10_000;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), limit);
      });
      const cut = await Promise.race([closed.then(() => false), timedOut]);
      clearTimeout(timer);
      if (cut) {
        log.warn({ drainTimeoutMs: limit }, "drain timeout: closing remaining connections");
        for (const server of servers) (server as Partial<Server>).closeAllConnections?.();
        for (const socket of sockets) socket.destroy();
        await closed;
      }
      log.info("server closed");
    })();
    return closing;
  };
}

/** A metrics listener on its own (the resident reconciler's): `/metrics`, `/healthz`, `/readyz` over plain HTTP. */
export interface MetricsServer {
  readonly port: number;
  /** Readiness fails from now on, connections close; resolves when the listener is closed. */
  close(): Promise<void>;
}

/**
 * Starts the metrics port's listener (the same one the webhook's metrics port uses, with the same bounds)
 * for `registry`. Ready while not closing and `ready()` (default: always).
 */
export async function startMetricsServer(opts: {
  host: string;
  port: number;
  registry: AdmissionMetrics["registry"];
  log: Logger;
  ready?: () => boolean;
}): Promise<MetricsServer> {
  let closing = false;
  const ready = opts.ready ?? ((): boolean => true);
  const listener = createMetricsListener({ metrics: { registry: opts.registry }, log: opts.log, ready: () => !closing && ready(), draining: () => closing });
  const server = createPlainServer(SERVER_OPTIONS, listener);
  const guard = bound(server, listener, metricsGuard());
  await listen(server, opts.host, opts.port);
  return {
    port: (server.address() as AddressInfo).port,
    close() {
      closing = true;
      guard.stop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

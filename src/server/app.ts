/**
 * @module
 * The request listeners: the webhook port's (admission handling: checks, body, review, answer; health and
 * readiness; 404 and 405; the log line and metrics are wrappers around the handler, `admission-handler.ts`) and the metrics port's (`/metrics`, health, readiness), and
 * HTTP error mapping. No listening here (`serve.ts` does that), so tests can mount them on any server.
 *
 * Routing is by exact path and the body is read by hand, without express or body-parser: the checks must
 * happen in a fixed order with fixed answers, all before a byte of the body is read or `100 Continue` is
 * sent (404 for any path but the exact webhook paths, 405, 415 for the media type or a Content-Encoding,
 * 413 for a declared length over the limit, 503 when the in-flight body budget is spent), then 413 as soon
 * as a chunked body passes the limit, 400 for nesting past `MAX_NESTING` and 400 naming the JSON error; the body must be one UTF-8 JSON
 * document with no charset conversion or decoding. Express would add its own answers (case-insensitive
 * and trailing-slash routes, HTML error pages), ~16 MiB of resident memory once loaded (measured with
 * node 20), and per-request prototype setup on the admission hot path (bench/admission).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { Webhook, WebhookResult } from "../admission/handler.js";
import { admissionHandler, withLogging, withMetrics, type AdmissionHandler } from "./admission-handler.js";
import { reviewJson } from "../admission/review.js";
import { ReviewDecodeError, errorMessage } from "../core/errors.js";
import type { AdmissionMetrics } from "./metrics.js";
import { createTurn, type Turn } from "./turn.js";
import {
  BodySyntaxError,
  BodyTooDeepError,
  createBodyParser,
  MAX_NESTING,
  nestedDeeperThan,
  OFFLOAD_BYTES,
  type BodyParser,
  type ParsedBody,
} from "./parse.js";

/**
 * Request body limit. The apiserver caps a request at 3 MiB and sends `object` and `oldObject` for an
 * UPDATE, each of which may approach etcd's 1.5 MiB, plus the envelope: 7 MiB covers both with room.
 */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;

/**
 * Default cap on the body bytes of all requests being read or answered at once. A body is counted from
 * the moment its checks pass until its answer is written; a request that would pass the cap gets 503 with
 * Retry-After before any of its body is read. 32 MiB is four bodies of the 7 MiB limit, or some 3,000
 * ordinary pod reviews (~10 KB) at once; it bounds what bodies can hold in memory (20 uploads of just
 * under 7 MiB held open took ~140 MB before) while the apiserver's real traffic never comes near it.
 */
export const MAX_INFLIGHT_BODY_BYTES = 32 * 1024 * 1024;

/** Seconds a client is asked to wait (Retry-After) when the in-flight body budget is spent. */
export const RETRY_AFTER_SECONDS = 1;

/** The global budget of in-flight body bytes (one per server, shared by every webhook path). */
export interface BodyBudget {
  readonly limit: number;
  /** Bytes counted now. */
  used(): number;
  /** Counts `bytes` if they fit under the limit; false (nothing counted) if not. */
  reserve(bytes: number): boolean;
  release(bytes: number): void;
}

export function createBodyBudget(limit = MAX_INFLIGHT_BODY_BYTES): BodyBudget {
  let used = 0;
  return {
    limit,
    used: () => used,
    reserve(bytes) {
      if (used + bytes > limit) return false;
      used += bytes;
      return true;
    },
    release(bytes) {
      used -= bytes;
    },
  };
}

export interface AppOptions {
  /** Webhooks by path, e.g. `{"/mutate/pods": mutatePods}`. */
  webhooks: Readonly<Record<string, Webhook>>;
  metrics: AdmissionMetrics;
  log: Logger;
  /** True once certificates and policy are loaded and while not draining. */
  ready(): boolean;
  /** True once shutdown began: responses then ask the client to close the connection. */
  draining(): boolean;
  /** True while the served certificate has expired: readiness then fails (the apiserver refuses it anyway). */
  certificateExpired?(): boolean;
  maxBodyBytes?: number;
  /** The in-flight body budget; one of {@link MAX_INFLIGHT_BODY_BYTES} is made per listener when absent. */
  bodyBudget?: BodyBudget;
  /** Clock for durations (seconds, monotonic). */
  now?: () => number;
  /** The turns requests are answered and written in; one is made per listener when absent. */
  turn?: Turn;
  /** Parses bodies of {@link OFFLOAD_BYTES} and more off the event loop (see `parse.ts`); one is made per listener when absent. */
  bodyParser?: BodyParser;
  /** Bodies this large or larger go to `bodyParser` (default {@link OFFLOAD_BYTES}). */
  offloadBytes?: number;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly causes: readonly string[] = [],
    /** Extra response headers (Allow, Retry-After). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  404: "NotFound",
  405: "MethodNotAllowed",
  408: "Timeout",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  417: "ExpectationFailed",
  431: "RequestHeaderFieldsTooLarge",
  500: "InternalError",
  503: "ServiceUnavailable",
};

/**
 * Writes a JSON text. Handed to Node as a string, the body goes out in one write with the head,
 * encoded once on its way into the TLS socket, rather than copied into a Buffer first.
 */
function writeJson(res: ServerResponse, status: number, text: string, close: boolean, extra?: Readonly<Record<string, string>>): void {
  const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...extra };
  // HTTP/2 has no `connection` header (node:http2 drops it with a process warning); a draining server
  // sends its sessions a GOAWAY instead (serve.ts).
  // (`req` may be absent where the listener is mounted on a bare response, as the fuzz suite does.)
  if (close && (res.req as { httpVersionMajor?: number } | undefined)?.httpVersionMajor !== 2) headers.connection = "close";
  res.writeHead(status, headers);
  res.end(text);
}

/** The metav1.Status text of an error: the shape Kubernetes tools already print. */
export function statusText(err: HttpError): string {
  return JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: err.message,
    reason: REASONS[err.status] ?? "Unknown",
    ...(err.causes.length > 0 ? { details: { causes: err.causes.map((message) => ({ message })) } } : {}),
    code: err.status,
  });
}

/** Error bodies are metav1.Status objects. `close` asks the client to close the connection. */
export function sendError(res: ServerResponse, err: HttpError, close: boolean): void {
  writeJson(res, err.status, statusText(err), close || err.status === 413 || err.status === 503, err.headers);
}

/**
 * How long a socket answered by {@link answerClientError} may take to send that answer before it is cut: a
 * peer that reads nothing would otherwise keep the socket, and its connection slot, while the answer waits
 * in the send buffer.
 */
export const CLIENT_ERROR_LINGER_MS = 2_000;

/** Errors of Node's HTTP/1 parser and its header and request timeouts: a request was under way, and can be answered. */
function isHttpRequestError(err: NodeJS.ErrnoException): boolean {
  return typeof err.code === "string" && (err.code.startsWith("HPE_") || err.code === "ERR_HTTP_REQUEST_TIMEOUT");
}

/**
 * The answer to a request Node's HTTP parser refused (malformed, headers too large, header or request
 * timeout), written straight to the socket as Node's default would, but with a metav1.Status body instead
 * of none. Mount it as the server's 'clientError' listener.
 *
 * Every other failure is a connection's, not a request's, and the socket is destroyed at once: a TLS
 * handshake that failed or timed out (an HTTPS server hands its 'tlsClientError' here too), a reset. An
 * answer written into a socket whose handshake never finished is never sent, and its `end()` never
 * completes: 1,000 silent connections held that way locked the port for good (issue 29).
 */
export function answerClientError(err: NodeJS.ErrnoException & { bytesParsed?: number }, socket: Duplex): void {
  if (!isHttpRequestError(err) || !socket.writable || (socket as { _httpMessage?: unknown })._httpMessage) {
    // Not a request's error, or a response is already under way on this connection (or the socket is
    // gone): nothing clean to add.
    socket.destroy();
    return;
  }
  const status = err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
  const message =
    status === 408
      ? "request not received in time"
      : status === 431
        ? "request headers too large"
        : `malformed HTTP request: ${err.code ?? "parse error"}${err.message ? ` (${err.message})` : ""}`;
  const text = statusText(new HttpError(status, message));
  const reason = status === 408 ? "Request Timeout" : status === 431 ? "Request Header Fields Too Large" : "Bad Request";
  const cut = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
  cut.unref();
  socket.once("close", () => clearTimeout(cut));
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    () => socket.destroy(),
  );
}

/** The answer to an `Expect` other than `100-continue` (Node's own is a 417 without a body). */
export function answerExpectation(req: IncomingMessage, res: ServerResponse): void {
  sendError(res, new HttpError(417, `Expect ${JSON.stringify(req.headers.expect ?? "")} is not supported; only 100-continue is`), true);
}

/** A Content-Encoding the body may carry: none, or `identity`. */
function isIdentityEncoding(value: string | undefined): boolean {
  return value === undefined || value.trim() === "" || value.trim().toLowerCase() === "identity";
}

function isJsonContentType(value: string | undefined): boolean {
  if (value === "application/json") return true; // what the apiserver sends: no split per request
  if (!value) return false;
  const [type, ...params] = value.split(";").map((s) => s.trim().toLowerCase());
  if (type !== "application/json") return false;
  return params.every((p) => !p.startsWith("charset=") || p === "charset=utf-8");
}

/**
 * The checks that answer a request before a byte of its body is read (and before `100 Continue`): media
 * type, encoding, declared length, and the in-flight budget, which counts the declared length from here on.
 * Returns the bytes reserved, or the HttpError refusing the request.
 */
function admitBody(req: IncomingMessage, limit: number, budget: BodyBudget): HttpError | number {
  const type = req.headers["content-type"];
  if (!isJsonContentType(type)) return new HttpError(415, `Content-Type must be application/json, got ${JSON.stringify(type ?? "")}`);
  const encoding = req.headers["content-encoding"];
  if (!isIdentityEncoding(encoding)) {
    return new HttpError(415, `Content-Encoding ${JSON.stringify(encoding)} is not supported; send the body unencoded`);
  }
  const declared = Number(req.headers["content-length"]);
  const known = req.headers["content-length"] !== undefined && Number.isFinite(declared);
  if (known && declared > limit) return new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
  // A chunked body reserves as its chunks arrive, but is not started while the budget is spent.
  const reserve = known ? declared : 0;
  if (!budget.reserve(reserve) || (!known && budget.used() >= budget.limit)) return busy(budget);
  return reserve;
}

function busy(budget: BodyBudget): HttpError {
  return new HttpError(503, `too many request bodies in flight (limit ${budget.limit} bytes); retry after ${RETRY_AFTER_SECONDS} s`, [], {
    "retry-after": String(RETRY_AFTER_SECONDS),
  });
}

/** What `readBody` reads, within which bounds, and whom it tells. */
interface ReadBodyOptions {
  req: IncomingMessage;
  res: ServerResponse;
  limit: number;
  budget: BodyBudget;
  reserved: number;
  done: (err: HttpError | undefined, body?: Buffer) => void;
}

/**
 * Reads the whole body, enforcing the limit and the budget while reading, and calls `done` once: with the
 * body, or with the HttpError that refuses it. `reserved` bytes are already counted in the budget; they
 * and any counted while reading are released when the response is done. A callback rather than a promise:
 * the body is complete in the poll phase that read its last chunk, and is queued for answering right
 * there (see `turn.ts`).
 */
function readBody(opts: ReadBodyOptions): void {
  const { req, res, limit, budget, done } = opts;
  let reserved = opts.reserved;
  res.once("close", () => budget.release(reserved));
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const settle = (err: HttpError | undefined, body?: Buffer): void => {
    if (settled) return;
    settled = true;
    done(err, body);
  };
  req.on("data", (chunk: Buffer) => {
    if (settled) return;
    size += chunk.length;
    if (size > limit) return settle(new HttpError(413, `request body exceeds the limit of ${limit} bytes`));
    if (size > reserved) {
      if (!budget.reserve(size - reserved)) return settle(busy(budget));
      reserved = size;
    }
    chunks.push(chunk);
  });
  req.on("end", () => {
    if (size === 0) settle(new HttpError(400, "request body is empty; expected an AdmissionReview"));
    else settle(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
  req.on("error", (err) => settle(new HttpError(400, `reading request body failed: ${errorMessage(err)}`)));
}

/**
 * The answers a document with stand-in arrays decides exactly (`admission/handler.ts`): those decided before
 * any rule looked inside the object, by a guard's skip (a guard reads a stand-in's length and resource names
 * only, and throws where they do not decide) or by the cost bound (the mutating webhook's skip, the
 * validating webhook's denial), which prices a container list by its length before looking inside.
 */
function decidedFromStandIns(result: WebhookResult): boolean {
  return result.decidedBy !== undefined;
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpError(400, `request body is not valid JSON: ${errorMessage(err)}`);
  }
}

/** The handler every webhook path is mounted with: the webhook, its metrics and its log lines. */
export function wireAdmission(webhook: Webhook, opts: Pick<AppOptions, "metrics" | "log">): AdmissionHandler {
  return withMetrics(withLogging(admissionHandler(webhook), opts.log), opts.metrics);
}

/** The answers of one admission path: a body parsed here or in the worker, admitted, answered or refused. */
class Answers {
  constructor(
    readonly handler: AdmissionHandler,
    readonly turn: Turn,
    readonly now: () => number,
    readonly parser: BodyParser,
    readonly log: Logger,
  ) {}

  refuse(res: ServerResponse, err: unknown, close: boolean): void {
    const httpErr =
      err instanceof HttpError
        ? err
        : err instanceof ReviewDecodeError
          ? new HttpError(400, err.message, err.problems)
          : new HttpError(500, `internal error: ${errorMessage(err)}`);
    this.handler.refused(httpErr, err);
    if (!res.headersSent) sendError(res, httpErr, close);
  }

  reply(res: ServerResponse, result: WebhookResult, started: number, close: boolean): void {
    const data = reviewJson(result.review);
    let seconds = 0;
    this.turn.write(
      () => {
        writeJson(res, 200, data, close);
        seconds = this.now() - started;
      },
      () => this.handler.answered(result, seconds),
    );
  }

  answer(res: ServerResponse, bytes: Buffer, started: number, close: boolean): void {
    let body: unknown;
    try {
      body = parseJson(bytes);
    } catch (err) {
      this.refuse(res, err, close);
      return;
    }
    this.admit(res, body, started, close);
  }

  admit(res: ServerResponse, body: unknown, started: number, close: boolean): void {
    let result: WebhookResult | Promise<WebhookResult>;
    try {
      if (this.log.isLevelEnabled("debug")) this.log.debug({ webhook: this.handler.name, body }, "admission request body");
      result = this.handler.admit(body);
    } catch (err) {
      this.refuse(res, err, close);
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => this.reply(res, r, started, close),
        (err: unknown) => this.refuse(res, err, close),
      );
    } else {
      this.reply(res, result, started, close);
    }
  }

  /**
   * A body parsed in the worker. A document with stand-in arrays (see `parse.ts`) is answered from it
   * only when the webhook answers it at once by a guard's skip or by the cost bound, which decide from a
   * stand-in's length and resource names; any other outcome (or StandInUndecided) is dropped and the body
   * parsed again here, so the answer is always the in-thread one.
   */
  answerParsed(res: ServerResponse, bytes: Buffer, parsed: ParsedBody, started: number, close: boolean): void {
    if (!parsed.stubbed) return this.admit(res, parsed.value, started, close);
    let result: WebhookResult | Promise<WebhookResult> | undefined;
    try {
      result = this.handler.admit(parsed.value);
    } catch {
      result = undefined;
    }
    if (result instanceof Promise) result.catch(() => undefined);
    else if (result !== undefined && decidedFromStandIns(result)) return this.reply(res, result, started, close);
    this.handler.parsedAgain();
    this.answer(res, bytes, started, close);
  }

  offload(res: ServerResponse, bytes: Buffer, started: number, close: boolean): void {
    this.parser.parse(bytes).then(
      (parsed) => this.turn.answer(() => this.answerParsed(res, bytes, parsed, started, close)),
      (err: unknown) =>
        this.refuse(
          res,
          err instanceof BodySyntaxError
            ? new HttpError(400, `request body is not valid JSON: ${err.message}`)
            : err instanceof BodyTooDeepError
              ? new HttpError(400, err.message)
              : err,
          close,
        ),
    );
  }
}

/**
 * Answers one admission request for `handler` (a bare webhook is wired with {@link wireAdmission}):
 * checks, body, review, response. The body is read in the poll phase; it is answered and the answer
 * written in the server's turn (see `turn.ts`); the handler hears of the answer after every write.
 */
export function createAdmissionHandler(
  handlerOrWebhook: AdmissionHandler | Webhook,
  opts: AppOptions,
): (req: IncomingMessage, res: ServerResponse, expectsContinue?: boolean) => void {
  const handler = "answered" in handlerOrWebhook ? handlerOrWebhook : wireAdmission(handlerOrWebhook, opts);
  const { log } = opts;
  const turn = opts.turn ?? createTurn(log);
  const limit = opts.maxBodyBytes ?? MAX_BODY_BYTES;
  const budget = opts.bodyBudget ?? createBodyBudget();
  const now = opts.now ?? ((): number => performance.now() / 1000);
  const parser = opts.bodyParser ?? createBodyParser({ log });
  const offloadBytes = opts.offloadBytes ?? OFFLOAD_BYTES;

  const answers = new Answers(handler, turn, now, parser, log);

  return (req, res, expectsContinue = false) => {
    const started = now();
    const close = opts.draining();
    const admitted = admitBody(req, limit, budget);
    if (admitted instanceof HttpError) {
      // The body is not read: the connection is closed after the answer rather than drained.
      answers.refuse(res, admitted, true);
      return;
    }
    if (expectsContinue) res.writeContinue();
    readBody({
      req,
      res,
      limit,
      budget,
      reserved: admitted,
      done: (err, bytes) => {
        if (err) answers.refuse(res, err, close);
        else if (bytes!.length >= offloadBytes) answers.offload(res, bytes!, started, close);
        // The worker's nesting bound, here for a small body, so both paths answer alike (the scan: ~7 µs for the
        // 8 KB training-pod review whose JSON.parse takes ~30 µs; a JSON.parse of a 256 KB body nested 128K
        // deep would hold the event loop ~40 ms, the scan ~1 ms).
        else if (nestedDeeperThan(bytes!, MAX_NESTING)) answers.refuse(res, new HttpError(400, new BodyTooDeepError().message), close);
        else turn.answer(() => answers.answer(res, bytes!, started, close));
      },
    });
  };
}

/** `/healthz` and `/readyz`: plain-text answers, a body only for GET. */
export function sendText(res: ServerResponse, status: number, text: string, head: boolean): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
  res.end(head ? undefined : text);
}

/** The readiness answer: 200 `ok`, or 503 saying why not. */
export function readiness(opts: Pick<AppOptions, "ready" | "draining" | "certificateExpired">): { status: number; text: string } {
  if (opts.draining()) return { status: 503, text: "draining" };
  if (opts.certificateExpired?.()) return { status: 503, text: "serving certificate expired" };
  return opts.ready() ? { status: 200, text: "ok" } : { status: 503, text: "not ready" };
}

export type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** What the health, readiness and refusal answers need. */
type ProbeOptions = Pick<AppOptions, "log" | "ready" | "draining" | "certificateExpired">;

/** The metrics listener's options: any registry (the webhook's, or the resident reconciler's). */
export type MetricsListenerOptions = ProbeOptions & { metrics: { readonly registry: Registry } };

/** A request listener, and the one for the server's 'checkContinue' event (`Expect: 100-continue`). */
export interface RequestListener extends Listener {
  checkContinue: Listener;
}

/** The path of a request URL, without the query. */
export function pathOf(url = "/"): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

/** A request for a path other than a webhook's POST, and the routes that may answer it. */
interface OtherRequest {
  req: IncomingMessage;
  res: ServerResponse;
  path: string;
  opts: ProbeOptions;
  get: ReadonlyMap<string, Listener>;
  post: ReadonlySet<string>;
}

/**
 * Answers `/healthz`, `/readyz` and the routes in `get` for GET and HEAD; 405 for other methods on
 * those paths and the ones in `post`; 404 for every other path.
 */
function answerOthers(request: OtherRequest): void {
  const { req, res, path, opts, get, post } = request;
  const close = opts.draining();
  if (req.method === "GET" || req.method === "HEAD") {
    const head = req.method === "HEAD";
    if (path === "/healthz") return sendText(res, 200, "ok", head);
    if (path === "/readyz") {
      const r = readiness(opts);
      return sendText(res, r.status, r.text, head);
    }
    const route = get.get(path);
    if (route) return route(req, res);
  }
  const allow = post.has(path) ? "POST" : path === "/healthz" || path === "/readyz" || get.has(path) ? "GET, HEAD" : undefined;
  // No body of these requests is read: close the connection after the answer rather than drain it.
  const unread = req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined;
  const err = allow
    ? new HttpError(405, `method ${req.method} is not allowed on ${path}; use ${allow}`, [], { allow })
    : new HttpError(404, `no route for ${req.method} ${path}`);
  opts.log.debug({ method: req.method, path, status: err.status }, "request refused");
  sendError(res, err, close || unread);
}

/**
 * The webhook port's request listener: webhook POSTs on their exact paths, `/healthz` and `/readyz`
 * (GET, HEAD), 405 for other methods on those paths, 404 for everything else (`/MUTATE/pods`,
 * `/mutate/pods/` and `/metrics` included). Its `checkContinue` runs the same checks before sending
 * `100 Continue`, so a refused request never sends its body.
 */
export function createRequestListener(opts: AppOptions): RequestListener {
  opts = {
    ...opts,
    turn: opts.turn ?? createTurn(opts.log),
    bodyBudget: opts.bodyBudget ?? createBodyBudget(),
    bodyParser: opts.bodyParser ?? createBodyParser({ log: opts.log }),
  };
  const direct = new Map(Object.entries(opts.webhooks).map(([path, webhook]) => [path, createAdmissionHandler(wireAdmission(webhook, opts), opts)]));
  const posts = new Set(direct.keys());
  const none = new Map<string, Listener>();
  const handle = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void => {
    const path = pathOf(req.url);
    if (req.method === "POST") {
      const handler = direct.get(path);
      if (handler) return handler(req, res, expectsContinue);
    }
    answerOthers({ req, res, path, opts, get: none, post: posts });
  };
  const listener = ((req, res) => handle(req, res, false)) as RequestListener;
  listener.checkContinue = (req, res) => handle(req, res, true);
  return listener;
}

/**
 * The metrics port's request listener: `/metrics` (Prometheus text), `/healthz` and `/readyz`, all GET
 * or HEAD; 405 and 404 as on the webhook port. A request with `Expect: 100-continue` gets its answer
 * without the `100 Continue` (none of these routes reads a body).
 */
export function createMetricsListener(opts: MetricsListenerOptions): RequestListener {
  const { metrics, log } = opts;
  const get = new Map<string, Listener>([
    [
      "/metrics",
      (req, res) => {
        metrics.registry.metrics().then(
          (text) => {
            res.writeHead(200, { "content-type": metrics.registry.contentType, "content-length": Buffer.byteLength(text) });
            res.end(req.method === "HEAD" ? undefined : text);
          },
          (err: unknown) => {
            log.error({ err }, "collecting metrics failed");
            if (!res.headersSent) sendError(res, new HttpError(500, `collecting metrics failed: ${errorMessage(err)}`), false);
          },
        );
      },
    ],
  ]);
  const posts = new Set<string>();
  const listener = ((req, res) => answerOthers({ req, res, path: pathOf(req.url), opts, get, post: posts })) as RequestListener;
  listener.checkContinue = listener;
  return listener;
}

/**
 * @module
 * The request listener: admission handling (body, review, answer, log line, metrics), health and
 * readiness, and HTTP error mapping; every other route is in the express application of `routes.ts`.
 * No listening here (`serve.ts` does that), so tests can mount it on any server.
 *
 * The request body is read by hand instead of `express.json()`: the checks must happen in a fixed order
 * with fixed answers (415 before any byte is read, 413 as soon as the limit is passed, 400 naming the JSON
 * error), the body must be one UTF-8 JSON document with no charset conversion, and body-parser's
 * per-request type negotiation and decoding cost a measurable share of the admission hot path.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Webhook, WebhookResult } from "../admission/handler.js";
import { reviewJson } from "../admission/review.js";
import { ReviewDecodeError, errorMessage } from "../errors.js";
import type { AdmissionMetrics } from "./metrics.js";
import { createTurn, type Turn } from "./turn.js";

/**
 * Request body limit. The apiserver caps a request at 3 MiB and sends `object` and `oldObject` for an
 * UPDATE, each of which may approach etcd's 1.5 MiB, plus the envelope: 7 MiB covers both with room.
 */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;

export interface AppOptions {
  /** Webhooks by path, e.g. `{"/mutate/pods": mutatePods}`. */
  webhooks: Readonly<Record<string, Webhook>>;
  metrics: AdmissionMetrics;
  log: Logger;
  /** True once certificates and policy are loaded and while not draining. */
  ready(): boolean;
  /** True once shutdown began: responses then ask the client to close the connection. */
  draining(): boolean;
  maxBodyBytes?: number;
  /** Clock for durations (seconds, monotonic). */
  now?: () => number;
  /** The turns requests are answered and written in; one is made per listener when absent. */
  turn?: Turn;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly causes: readonly string[] = [],
  ) {
    super(message);
    this.name = "HttpError";
  }
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  404: "NotFound",
  405: "MethodNotAllowed",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  500: "InternalError",
};

function sendJson(res: ServerResponse, status: number, body: unknown, close: boolean): void {
  writeJson(res, status, JSON.stringify(body), close);
}

/**
 * Writes a JSON text. Handed to Node as a string, the body goes out in one write with the head,
 * encoded once on its way into the TLS socket, rather than copied into a Buffer first.
 */
function writeJson(res: ServerResponse, status: number, text: string, close: boolean): void {
  const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(text) };
  if (close) headers.connection = "close";
  res.writeHead(status, headers);
  res.end(text);
}

/** Error bodies are metav1.Status objects, the shape Kubernetes tools already print. */
export function sendError(res: ServerResponse, err: HttpError, close: boolean): void {
  sendJson(
    res,
    err.status,
    {
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      code: err.status,
      reason: REASONS[err.status] ?? "Unknown",
      message: err.message,
      ...(err.causes.length > 0 ? { details: { causes: err.causes.map((message) => ({ message })) } } : {}),
    },
    close || err.status === 413,
  );
}

function isJsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const [type, ...params] = value.split(";").map((s) => s.trim().toLowerCase());
  if (type !== "application/json") return false;
  return params.every((p) => !p.startsWith("charset=") || p === "charset=utf-8");
}

/**
 * Reads the whole body, enforcing the limit while reading, and calls `done` once: with the body, or
 * with the HttpError that refuses it. A callback rather than a promise: the body is complete in the
 * poll phase that read its last chunk, and is queued for answering right there (see `turn.ts`).
 */
function readBody(req: IncomingMessage, limit: number, done: (err: HttpError | undefined, body?: Buffer) => void): void {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    done(new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`));
    return;
  }
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
    if (size > limit) settle(new HttpError(413, `request body exceeds the limit of ${limit} bytes`));
    else chunks.push(chunk);
  });
  req.on("end", () => {
    if (size === 0) settle(new HttpError(400, "request body is empty; expected an AdmissionReview"));
    else settle(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
  req.on("error", (err) => settle(new HttpError(400, `reading request body failed: ${errorMessage(err)}`)));
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpError(400, `request body is not valid JSON: ${errorMessage(err)}`);
  }
}

/**
 * Answers one admission request for `webhook`: checks, body, review, response, log line, metrics.
 * The body is read in the poll phase; it is answered and the answer written in the server's turn
 * (see `turn.ts`).
 */
export function createAdmissionHandler(webhook: Webhook, opts: AppOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { log, metrics } = opts;
  const turn = opts.turn ?? createTurn(log);
  const limit = opts.maxBodyBytes ?? MAX_BODY_BYTES;
  const now = opts.now ?? ((): number => performance.now() / 1000);

  function refuse(res: ServerResponse, err: unknown, close: boolean): void {
    const httpErr =
      err instanceof HttpError
        ? err
        : err instanceof ReviewDecodeError
          ? new HttpError(400, err.message, err.problems)
          : new HttpError(500, `internal error: ${errorMessage(err)}`);
    if (httpErr.status >= 500) log.error({ err, webhook: webhook.name }, "admission request failed");
    else log.warn({ webhook: webhook.name, status: httpErr.status, reason: httpErr.message }, "admission request refused");
    metrics.rejected(webhook.name, httpErr.status);
    if (!res.headersSent) sendError(res, httpErr, close);
  }

  function reply(res: ServerResponse, result: WebhookResult, started: number, close: boolean): void {
    const data = reviewJson(result.review);
    let seconds = 0;
    turn.write(
      () => {
        writeJson(res, 200, data, close);
        seconds = now() - started;
      },
      () => {
        metrics.observe(webhook.name, result, seconds);
        if (result.outcome === "error" || log.isLevelEnabled("info")) logAdmission(log, webhook, result, seconds);
      },
    );
  }

  function answer(res: ServerResponse, bytes: Buffer, started: number, close: boolean): void {
    let result: WebhookResult | Promise<WebhookResult>;
    try {
      const body = parseJson(bytes);
      if (log.isLevelEnabled("debug")) log.debug({ webhook: webhook.name, body }, "admission request body");
      result = webhook.admit(body);
    } catch (err) {
      refuse(res, err, close);
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => reply(res, r, started, close),
        (err: unknown) => refuse(res, err, close),
      );
    } else {
      reply(res, result, started, close);
    }
  }

  return (req, res) => {
    const started = now();
    const close = opts.draining();
    if (!isJsonContentType(req.headers["content-type"])) {
      refuse(res, new HttpError(415, `Content-Type must be application/json, got ${JSON.stringify(req.headers["content-type"] ?? "")}`), close);
      return;
    }
    readBody(req, limit, (err, bytes) => {
      if (err) refuse(res, err, close);
      else turn.answer(() => answer(res, bytes!, started, close));
    });
  };
}

/** `value` when it is a non-empty string. */
function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function logAdmission(log: Logger, webhook: Webhook, result: WebhookResult, seconds: number): void {
  const r = result.request;
  // The object is the client's: its metadata may hold anything but strings (an object without a
  // toString, say), and the log line must be written all the same.
  const meta = (r.object?.metadata ?? r.oldObject?.metadata) as { name?: unknown; generateName?: unknown } | undefined;
  const generateName = text(meta?.generateName);
  // One flat object (pino leaves out the undefined fields): this line is written for every admission.
  const fields = {
    webhook: webhook.name,
    uid: r.uid,
    kind: r.kind.kind,
    namespace: r.namespace,
    name: text(r.name) ?? text(meta?.name) ?? (generateName ? `${generateName}*` : undefined),
    operation: r.operation,
    dryRun: r.dryRun === true,
    outcome: result.outcome,
    patchOps: result.patchOps,
    warnings: result.warnings,
    deniedRules: result.deniedRules.length > 0 ? result.deniedRules : undefined,
    skipReason: result.skipReason || undefined,
    err: result.error,
    durationMs: Math.round(seconds * 1e6) / 1e3,
  };
  if (result.outcome === "error") {
    log.error(fields, `admission rule failed; ${webhook.failureMode === "allow" ? "allowed" : "denied"}`);
  } else {
    log.info(fields, "admission");
  }
}

/** `/healthz` and `/readyz`: plain-text answers, a body only for GET. */
export function sendText(res: ServerResponse, status: number, text: string, head: boolean): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
  res.end(head ? undefined : text);
}

/** The readiness answer: 200 `ok`, or 503 saying why not. */
export function readiness(opts: Pick<AppOptions, "ready" | "draining">): { status: number; text: string } {
  return opts.ready() ? { status: 200, text: "ok" } : { status: 503, text: opts.draining() ? "draining" : "not ready" };
}

/**
 * The server's request listener: webhook POSTs go straight to their handler and health and readiness
 * are answered here; everything else (metrics, 404 and 405 answers) goes through the express
 * application of `routes.ts`, loaded on the first such request. Why: the admission hot path is all that
 * runs at apiserver rate, and skipping express's router and its per-request request/response prototype
 * setup there measurably raises throughput (bench/admission); and loading express takes ~110 ms of
 * start-up on these machines, which readiness no longer waits for. The answers are the same as
 * through the express routes, which the tests exercise too.
 */
export function createRequestListener(opts: AppOptions): (req: IncomingMessage, res: ServerResponse) => void {
  opts = { ...opts, turn: opts.turn ?? createTurn(opts.log) };
  const direct = new Map(Object.entries(opts.webhooks).map(([path, webhook]) => [path, createAdmissionHandler(webhook, opts)]));
  let app: Promise<(req: IncomingMessage, res: ServerResponse) => void> | undefined;
  const routes = (): Promise<(req: IncomingMessage, res: ServerResponse) => void> =>
    (app ??= import("./routes.js").then((m) => m.createApp(opts)));
  return (req, res) => {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    if (req.method === "POST") {
      const handler = direct.get(path);
      if (handler) {
        handler(req, res);
        return;
      }
    } else if (req.method === "GET" || req.method === "HEAD") {
      if (path === "/healthz") return sendText(res, 200, "ok", req.method === "HEAD");
      if (path === "/readyz") {
        const r = readiness(opts);
        return sendText(res, r.status, r.text, req.method === "HEAD");
      }
    }
    routes().then(
      (handle) => handle(req, res),
      (err: unknown) => {
        opts.log.error({ err }, "loading the HTTP routes failed");
        if (!res.headersSent) sendError(res, new HttpError(500, `internal error: ${errorMessage(err)}`), true);
      },
    );
  };
}

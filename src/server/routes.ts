/**
 * @module
 * The express application: every route, the webhooks included (so tests can mount it on any server).
 * The server's listener (`app.ts`) answers webhook POSTs, `/healthz` and `/readyz` itself and loads
 * this module only for the rest: `/metrics` and the 404 and 405 answers.
 */
import express from "express";
import { HttpError, createAdmissionHandler, readiness, sendError, sendText, type AppOptions } from "./app.js";
import { createTurn } from "./turn.js";

/**
 * The express application: every route, including the webhooks. `createRequestListener` puts a
 * direct dispatch for webhook POSTs in front of it.
 */
export function createApp(opts: AppOptions): express.Express {
  const { metrics } = opts;
  opts = { ...opts, turn: opts.turn ?? createTurn(opts.log) };
  const app = express();
  app.disable("etag");
  app.disable("x-powered-by");

  for (const [path, webhook] of Object.entries(opts.webhooks)) {
    app.post(path, createAdmissionHandler(webhook, opts));
  }

  app.get("/healthz", (req, res) => sendText(res, 200, "ok", req.method === "HEAD"));
  app.get("/readyz", (req, res) => {
    const r = readiness(opts);
    sendText(res, r.status, r.text, req.method === "HEAD");
  });
  app.get("/metrics", async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  const allowedMethods = new Map<string, string>([
    ...Object.keys(opts.webhooks).map((p): [string, string] => [p, "POST"]),
    ["/healthz", "GET, HEAD"],
    ["/readyz", "GET, HEAD"],
    ["/metrics", "GET, HEAD"],
  ]);
  app.use((req, res) => {
    const allow = allowedMethods.get(req.path);
    if (allow) {
      res.setHeader("allow", allow);
      sendError(res, new HttpError(405, `method ${req.method} is not allowed on ${req.path}; use ${allow}`), false);
    } else {
      sendError(res, new HttpError(404, `no route for ${req.method} ${req.path}`), false);
    }
  });
  return app;
}


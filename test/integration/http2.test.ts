/**
 * HTTP/2 beside HTTP/1.1 on the webhook port: ALPN picks the protocol; a client of either gets the same
 * AdmissionReview answers (status, body, content type); a mutation reinvoked over the other protocol
 * changes nothing; shutdown sends HTTP/2 clients a GOAWAY instead of waiting out an idle session; the
 * HTTP/1.1 timeouts still hold on the HTTP/2 server; without `http2: true` (the default) only HTTP/1.1 is
 * offered.
 */
import assert from "node:assert/strict";
import { connect as h2connect, type ClientHttp2Session } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import { after, before, describe, it } from "node:test";
import jsonpatch from "fast-json-patch";
import { defaultPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { call, capturingLogger, startTestServer, type Reply, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, pod, review } from "../fixtures/reviews.js";

const webhooks = () => createWebhooks({ policy: defaultPolicy(), log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() });

/** One request over an HTTP/2 session; the answer in the shape `call` gives for HTTP/1.1. */
function h2call(session: ClientHttp2Session, opts: { method?: string; path: string; body?: string; headers?: Record<string, string> }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": opts.method ?? "POST", ":path": opts.path, ...opts.headers });
    let status = 0;
    let headers: Record<string, string | string[] | undefined> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      headers = h as typeof headers;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      const text = Buffer.concat(chunks).toString();
      resolve({ status, headers, text, json: () => JSON.parse(text) });
    });
    stream.on("error", reject);
    stream.end(opts.body);
  });
}

function openSession(port: number, ca: string): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2connect(`https://127.0.0.1:${port}`, { ca, servername: "localhost" });
    session.once("connect", () => resolve(session));
    session.once("error", reject);
  });
}

/** The protocol ALPN settles on when a client offers `protocols`. */
function alpn(port: number, ca: string, protocols: string[]): Promise<string | false> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, ca, servername: "localhost", ALPNProtocols: protocols }, () => {
      resolve(socket.alpnProtocol ?? false);
      socket.destroy();
    });
    socket.once("error", reject);
  });
}

const json = { "content-type": "application/json" };
const scale = (replicas: number) => ({ apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: "train", namespace: "team-a" }, spec: { replicas } });

/** Requests and what kind of answer each gets (the answers themselves are compared across protocols). */
const CASES: Array<{ name: string; path: string; body: string; method?: string; status: number; check?: (body: any) => void }> = [
  {
    name: "a GPU pod to /mutate/pods → a JSONPatch",
    path: "/mutate/pods",
    body: JSON.stringify(review({ uid: "h2-1", object: pod() })),
    status: 200,
    check: (b) => assert.equal(b.response.patchType, "JSONPatch"),
  },
  {
    name: "a pod with nothing to change → allowed, no patch, no warnings",
    path: "/mutate/pods",
    body: JSON.stringify(review({ uid: "h2-2", object: plainPod() })),
    status: 200,
    check: (b) => assert.deepEqual(b.response, { uid: "h2-2", allowed: true }),
  },
  { name: "a GPU pod to /validate/pods", path: "/validate/pods", body: JSON.stringify(review({ uid: "h2-3", object: pod() })), status: 200 },
  {
    name: "a scale past the Worker cap → denied",
    path: "/validate/jobs",
    body: JSON.stringify(
      review({
        uid: "h2-4",
        kind: { group: "autoscaling", version: "v1", kind: "Scale" },
        resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
        subResource: "scale",
        operation: "UPDATE",
        name: "train",
        object: scale(40),
        oldObject: scale(2),
      }),
    ),
    status: 200,
    check: (b) => assert.equal(b.response.allowed, false),
  },
  { name: "a body that is not JSON → 400 Status", path: "/mutate/pods", body: "{not json", status: 400, check: (b) => assert.equal(b.kind, "Status") },
  { name: "an unknown path → 404 Status", path: "/mutate/nothing", body: "{}", status: 404, check: (b) => assert.equal(b.code, 404) },
  { name: "GET /readyz → ok", path: "/readyz", method: "GET", body: "", status: 200 },
];

describe("HTTP/2 and HTTP/1.1 on the webhook port", () => {
  let t: TestServer;
  let ca: string;
  let session: ClientHttp2Session;
  before(async () => {
    t = await startTestServer(webhooks(), { http2: true });
    ca = t.files.certs.ca.certPem;
    session = await openSession(t.port, ca);
  });
  after(async () => {
    session.close();
    await t.server.close();
  });

  it("ALPN: h2 when offered, http/1.1 otherwise, and a client that offers none gets HTTP/1.1", async () => {
    assert.equal(await alpn(t.port, ca, ["h2", "http/1.1"]), "h2");
    assert.equal(await alpn(t.port, ca, ["http/1.1"]), "http/1.1");
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca })).status, 200);
  });

  for (const c of CASES) {
    it(`${c.name}: the same answer over HTTP/1.1 and HTTP/2`, async () => {
      const headers = c.method === "GET" ? {} : json;
      const [one, two] = await Promise.all([
        call(t.port, { method: c.method, path: c.path, body: c.body || undefined, headers, ca }),
        h2call(session, { method: c.method, path: c.path, body: c.body || undefined, headers }),
      ]);
      assert.equal(one.status, c.status, one.text);
      assert.equal(two.status, c.status, two.text);
      assert.equal(two.headers["content-type"], one.headers["content-type"]);
      assert.equal(two.headers["content-length"], one.headers["content-length"]);
      assert.equal(two.text, one.text);
      if (c.check) c.check(JSON.parse(two.text));
    });
  }

  // Reinvocation: the apiserver may call a mutating webhook again with what it (or another) made; the
  // patched object comes back unchanged, whichever protocol either call took.
  for (const [first, second] of [
    ["HTTP/1.1", "HTTP/2"],
    ["HTTP/2", "HTTP/1.1"],
  ] as const) {
    it(`reinvocation: patched over ${first}, the result sent again over ${second} → no patch`, async () => {
      const send = (proto: string, body: string): Promise<Reply> =>
        proto === "HTTP/2" ? h2call(session, { path: "/mutate/pods", body, headers: json }) : call(t.port, { path: "/mutate/pods", body, headers: json, ca });
      const original = pod();
      const once = (await send(first, JSON.stringify(review({ uid: "re-1", object: original })))).json().response;
      assert.equal(once.patchType, "JSONPatch");
      const patched = jsonpatch.applyPatch(structuredClone(original), JSON.parse(Buffer.from(once.patch, "base64").toString()), true, false).newDocument;
      const twice = (await send(second, JSON.stringify(review({ uid: "re-2", object: patched })))).json().response;
      assert.equal(twice.patch, undefined, JSON.stringify(twice));
      assert.equal(twice.warnings, undefined);
      assert.equal(twice.allowed, true);
    });
  }

  it("many concurrent streams on one session are all answered, each with its own uid", async () => {
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        h2call(session, { path: "/mutate/pods", body: JSON.stringify(review({ uid: `many-${i}`, object: plainPod() })), headers: json }),
      ),
    );
    assert.deepEqual(
      answers.map((a) => a.json().response.uid),
      Array.from({ length: 50 }, (_, i) => `many-${i}`),
    );
  });

  it("quartermaster_tls_connections_total counts handshakes by protocol: one h2 session carries many calls", async () => {
    const count = async (): Promise<Record<string, number>> => {
      const text = await t.metrics.registry.getSingleMetricAsString("quartermaster_tls_connections_total");
      return Object.fromEntries([...text.matchAll(/protocol="([^"]+)"\} (\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
    };
    const before = await count();
    const s = await openSession(t.port, ca);
    for (let i = 0; i < 5; i++) await h2call(s, { method: "GET", path: "/healthz" });
    s.close();
    for (let i = 0; i < 2; i++) await call(t.port, { method: "GET", path: "/healthz", ca });
    const after = await count();
    assert.equal((after.h2 ?? 0) - (before.h2 ?? 0), 1);
    assert.equal((after["http/1.1"] ?? 0) - (before["http/1.1"] ?? 0), 2);
  });

  it("the HTTP/1.1 bounds hold on the HTTP/2 server", () => {
    const s = t.server.server as unknown as { keepAliveTimeout: number; headersTimeout: number; requestTimeout: number; connectionsCheckingInterval: number };
    assert.deepEqual(
      { keepAlive: s.keepAliveTimeout, headers: s.headersTimeout, request: s.requestTimeout, checking: s.connectionsCheckingInterval },
      { keepAlive: 95_000, headers: 20_000, request: 30_000, checking: 2_000 },
    );
  });
});

describe("HTTP/2 shutdown", () => {
  it("close() sends an idle HTTP/2 session a GOAWAY and resolves without waiting out the keep-alive", async () => {
    const t = await startTestServer(webhooks(), { http2: true, drainTimeoutMs: 5_000 });
    const session = await openSession(t.port, t.files.certs.ca.certPem);
    assert.equal((await h2call(session, { method: "GET", path: "/healthz" })).status, 200);
    const goaway = new Promise<void>((resolve) => session.once("goaway", () => resolve()));
    const started = performance.now();
    await t.server.close();
    await goaway;
    assert.ok(performance.now() - started < 4_000, `took ${performance.now() - started} ms`);
    session.destroy();
  });

  it("a stream under way when shutdown begins is answered (with no HTTP/1 `connection` header, which HTTP/2 forbids)", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    // The shutdown delay: readiness fails, requests are still served (answers then ask HTTP/1.1 clients to close).
    const t = await startTestServer(webhooks(), { http2: true, drainTimeoutMs: 5_000, shutdownDelayMs: 300 });
    const session = await openSession(t.port, t.files.certs.ca.certPem);
    const body = JSON.stringify(review({ uid: "in-flight", object: pod() }));
    const closed = t.server.close();
    await new Promise((r) => setTimeout(r, 50));
    // Headers and half the body now, the rest once the drain has begun.
    const stream = session.request({ ":method": "POST", ":path": "/mutate/pods", ...json });
    stream.write(body.slice(0, 50));
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      let status = 0;
      let text = "";
      stream.on("response", (h) => (status = Number(h[":status"])));
      stream.on("data", (c: Buffer) => (text += c.toString()));
      stream.on("end", () => resolve({ status, text }));
      stream.on("error", reject);
    });
    await new Promise((r) => setTimeout(r, 400));
    stream.end(body.slice(50));
    const a = await answer;
    assert.equal(a.status, 200);
    assert.equal(JSON.parse(a.text).response.uid, "in-flight");
    await closed;
    session.destroy();
    await new Promise((r) => setImmediate(r));
    process.off("warning", onWarning);
    assert.deepEqual(warnings, []);
  });
});

describe("without http2 (the default)", () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer(webhooks());
  });
  after(() => t.server.close());

  it("offers no h2: a client offering h2 and http/1.1 gets HTTP/1.1 answers", async () => {
    const ca = t.files.certs.ca.certPem;
    assert.notEqual(await alpn(t.port, ca, ["h2", "http/1.1"]), "h2");
    const r = await call(t.port, { path: "/mutate/pods", body: JSON.stringify(review({ uid: "h1", object: plainPod() })), headers: json, ca });
    assert.deepEqual(r.json().response, { uid: "h1", allowed: true });
  });
});

/**
 * The webhook server under abuse (issue #16): exact paths, Content-Encoding, `Expect: 100-continue` answered
 * only after the checks, metav1.Status bodies for every error (parser errors included), the in-flight body
 * budget, the connection cap, the TLS 1.2 cipher suites and `--client-ca`.
 */
import assert from "node:assert/strict";
import { Agent, createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { connect, type ConnectionOptions, type TLSSocket } from "node:tls";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { issueCertificate, KEY_TYPES, type KeyType } from "../../src/certs/generate.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { call, capturingLogger, makeCerts, plain, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, review } from "../fixtures/reviews.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const webhooks = () => createWebhooks({ policy: defaultPolicy(), log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() });
const reviewText = JSON.stringify(review({ uid: "bounds", object: plainPod() }));

/** A raw TLS connection: write text, read everything the server sends until it closes or `ms` pass. */
function raw(port: number, ca: string, opts: Partial<ConnectionOptions> = {}): Promise<{ socket: TLSSocket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect({ host: "127.0.0.1", port, ca, servername: "localhost", ...opts }, () => resolve({ socket, received: () => text, closed }));
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.on("data", (c: Buffer) => (text += c.toString("latin1")));
    socket.once("error", reject);
  });
}

async function until(cond: () => boolean, ms = 3000): Promise<boolean> {
  const end = performance.now() + ms;
  while (!cond() && performance.now() < end) await sleep(10);
  return cond();
}

/** The Status body of a raw HTTP response text. */
function statusOf(response: string): { code: number; body: any } {
  const code = Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1]);
  const body = response.slice(response.indexOf("\r\n\r\n") + 4);
  return { code, body: JSON.parse(body) };
}

function assertStatus(body: any, code: number, message: RegExp): void {
  assert.equal(body.kind, "Status");
  assert.equal(body.apiVersion, "v1");
  assert.equal(body.status, "Failure");
  assert.equal(body.code, code);
  assert.equal(typeof body.reason, "string");
  assert.match(body.message, message);
}

describe("HTTP bounds on the webhook port", () => {
  let t: TestServer;
  let ca: string;
  before(async () => {
    t = await startTestServer(webhooks());
    ca = t.files.certs.ca.certPem;
  });
  after(() => t.server.close());

  const json = { "content-type": "application/json" };
  const cases: Array<{
    name: string;
    method?: string;
    path: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    status: number;
    reason?: string;
    message?: RegExp;
  }> = [
    { name: "exact path", path: "/mutate/pods", headers: json, body: reviewText, status: 200 },
    {
      name: "upper-case path",
      path: "/MUTATE/pods",
      headers: json,
      body: reviewText,
      status: 404,
      reason: "NotFound",
      message: /no route for POST \/MUTATE\/pods/,
    },
    {
      name: "trailing slash",
      path: "/mutate/pods/",
      headers: json,
      body: reviewText,
      status: 404,
      reason: "NotFound",
      message: /no route for POST \/mutate\/pods\//,
    },
    { name: "double slash", path: "//mutate/pods", headers: json, body: reviewText, status: 404, reason: "NotFound", message: /no route/ },
    { name: "a query is not part of the path", path: "/validate/pods?timeout=5s", headers: json, body: reviewText, status: 200 },
    { name: "/metrics is not on the webhook port", method: "GET", path: "/metrics", status: 404, reason: "NotFound", message: /no route for GET \/metrics/ },
    { name: "GET on a webhook path", method: "GET", path: "/mutate/pods", status: 405, reason: "MethodNotAllowed", message: /use POST/ },
    {
      name: "Content-Encoding gzip",
      path: "/mutate/pods",
      headers: { ...json, "content-encoding": "gzip" },
      body: gzipSync(reviewText),
      status: 415,
      reason: "UnsupportedMediaType",
      message: /Content-Encoding "gzip" is not supported/,
    },
    {
      name: "Content-Encoding br",
      path: "/validate/pods",
      headers: { ...json, "content-encoding": "br" },
      body: reviewText,
      status: 415,
      reason: "UnsupportedMediaType",
      message: /Content-Encoding "br"/,
    },
    {
      name: "Content-Encoding deflate, identity",
      path: "/validate/jobs",
      headers: { ...json, "content-encoding": "deflate, identity" },
      body: reviewText,
      status: 415,
      reason: "UnsupportedMediaType",
      message: /not supported/,
    },
    { name: "Content-Encoding identity", path: "/mutate/pods", headers: { ...json, "content-encoding": "identity" }, body: reviewText, status: 200 },
    {
      name: "a non-JSON media type",
      path: "/mutate/pods",
      headers: { "content-type": "text/plain" },
      body: reviewText,
      status: 415,
      reason: "UnsupportedMediaType",
      message: /Content-Type must be application\/json/,
    },
    { name: "malformed JSON", path: "/mutate/pods", headers: json, body: "{", status: 400, reason: "BadRequest", message: /not valid JSON/ },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.method ?? "POST"} ${c.path} → ${c.status}${c.status === 200 ? "" : " with a Status body"}`, async () => {
      const r = await call(t.port, { method: c.method, path: c.path, headers: c.headers, body: c.body, ca });
      assert.equal(r.status, c.status, r.text);
      if (c.status === 200) {
        assert.equal(r.json().kind, "AdmissionReview");
        return;
      }
      assertStatus(r.json(), c.status, c.message!);
      assert.equal(r.json().reason, c.reason);
    });
  }

  // Requests Node's parser refuses: the answer is written by the 'clientError' listener.
  const parserCases: Array<{ name: string; request: string; status: number; message: RegExp }> = [
    {
      name: "a header line without a colon",
      request: "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
      status: 400,
      message: /malformed HTTP request: HPE_/,
    },
    { name: "an invalid method", request: "P@ST /mutate/pods HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, message: /malformed HTTP request/ },
    {
      name: "a bad Content-Length",
      request: "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
      status: 400,
      message: /malformed HTTP request/,
    },
    {
      name: "headers over Node's 16 KiB",
      request: `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
      status: 431,
      message: /request headers too large/,
    },
  ];
  for (const c of parserCases) {
    it(`parser error, ${c.name} → ${c.status} with a Status body, connection closed`, async () => {
      const conn = await raw(t.port, ca);
      conn.socket.write(c.request);
      await conn.closed;
      const { code, body } = statusOf(conn.received());
      assert.equal(code, c.status, conn.received());
      assertStatus(body, c.status, c.message);
    });
  }

  // Expect: 100-continue: the client waits for `100 Continue` before sending the body; a refused request
  // must get its refusal instead, never a 100 it would answer by uploading the body.
  const expectCases: Array<{ name: string; head: string; status: number }> = [
    {
      name: "declared length over the limit",
      head: "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 8388608\r\n",
      status: 413,
    },
    { name: "wrong media type", head: "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n", status: 415 },
    {
      name: "gzip body",
      head: "POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n",
      status: 415,
    },
    { name: "unknown path", head: "POST /mutate/pods/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n", status: 404 },
  ];
  for (const c of expectCases) {
    it(`Expect: 100-continue, ${c.name} → ${c.status} and no 100 Continue`, async () => {
      const conn = await raw(t.port, ca);
      conn.socket.write(`${c.head}Expect: 100-continue\r\n\r\n`);
      await conn.closed;
      assert.doesNotMatch(conn.received(), /100 Continue/);
      const { code, body } = statusOf(conn.received());
      assert.equal(code, c.status);
      assert.equal(body.code, c.status);
    });
  }

  const rawCases: Array<{ name: string; request: string; status: number; message?: RegExp }> = [
    {
      name: "Expect other than 100-continue",
      request: "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n",
      status: 417,
      message: /Expect "200-ok" is not supported/,
    },
    { name: "no Host header (HTTP/1.1)", request: "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n", status: 404, message: /no route for GET \/nope/ },
  ];
  for (const c of rawCases) {
    it(`${c.name} → ${c.status} with a Status body`, async () => {
      const conn = await raw(t.port, ca);
      conn.socket.write(c.request);
      await conn.closed;
      const { code, body } = statusOf(conn.received());
      assert.equal(code, c.status, conn.received());
      assertStatus(body, c.status, c.message!);
    });
  }

  it("Expect: 100-continue, a good request → 100 Continue, then the body, then 200", async () => {
    const conn = await raw(t.port, ca);
    conn.socket.write(
      `POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(reviewText)}\r\nExpect: 100-continue\r\n\r\n`,
    );
    assert.ok(await until(() => conn.received().includes("100 Continue")), "100 Continue sent");
    assert.doesNotMatch(conn.received(), /HTTP\/1\.1 200/);
    conn.socket.write(reviewText);
    assert.ok(await until(() => /HTTP\/1\.1 200 OK[\s\S]*"AdmissionReview"/.test(conn.received())), conn.received());
    conn.socket.destroy();
  });
});

describe("in-flight body budget", () => {
  it("a body that would pass the budget → 503 with Retry-After before it is read; served again once bodies finish", async (ctx) => {
    const t = await startTestServer(webhooks(), { maxInflightBodyBytes: 100_000 });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    // A slow upload holds 80,000 bytes of the budget: its head and half its body are sent, the rest later.
    const padded = reviewText + " ".repeat(80_000 - Buffer.byteLength(reviewText));
    const slow = await raw(t.port, ca);
    slow.socket.write(`POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 80000\r\n\r\n${padded.slice(0, 40_000)}`);
    await sleep(100);

    // 30,000 more would pass 100,000: refused with its body unread (announced with Expect, so none is sent).
    const refused = await raw(t.port, ca);
    refused.socket.write("POST /validate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 30000\r\nExpect: 100-continue\r\n\r\n");
    await refused.closed;
    assert.doesNotMatch(refused.received(), /100 Continue/);
    assert.match(refused.received(), /^HTTP\/1\.1 503 /);
    assert.match(refused.received(), /\r\nretry-after: 1\r\n/i);
    const { body } = statusOf(refused.received());
    assertStatus(body, 503, /too many request bodies in flight \(limit 100000 bytes\)/);
    assert.equal(body.reason, "ServiceUnavailable");
    // 20,000 bytes of the budget are left: a body that fits is served meanwhile.
    const small = await call(t.port, { path: "/mutate/pods", headers: { "content-type": "application/json" }, body: reviewText, ca });
    assert.equal(small.status, 200, "a body that fits is still served");

    slow.socket.write(padded.slice(40_000));
    assert.ok(await until(() => /HTTP\/1\.1 200/.test(slow.received())), "the slow upload is answered");
    slow.socket.destroy();
    await sleep(50);
    const again = await call(t.port, {
      path: "/validate/pods",
      headers: { "content-type": "application/json", "content-length": "30000" },
      body: reviewText + " ".repeat(30_000 - Buffer.byteLength(reviewText)),
      ca,
    });
    assert.equal(again.status, 200, "the budget is released when the answers are written");
    const metrics = await plain(t.metricsPort, "/metrics");
    assert.match(metrics.text, /quartermaster_admission_errors_total\{webhook="validate-pods",type="503"\} 1/);
  });

  it("a chunked body is refused mid-way (503) when it outgrows the budget", async (ctx) => {
    const t = await startTestServer(webhooks(), { maxInflightBodyBytes: 50_000 });
    ctx.after(() => t.server.close());
    const r = await call(t.port, {
      path: "/mutate/pods",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      body: (write) => {
        for (let i = 0; i < 8; i++) write(Buffer.alloc(10_000, 0x20));
      },
      ca: t.files.certs.ca.certPem,
    }).catch((err: Error) => err);
    // The server answers 503 and closes; depending on timing the client sees the answer or a reset.
    if (!(r instanceof Error)) {
      assert.equal(r.status, 503);
      assertStatus(r.json(), 503, /too many request bodies in flight/);
    }
    const ok = await call(t.port, { path: "/mutate/pods", headers: { "content-type": "application/json" }, body: reviewText, ca: t.files.certs.ca.certPem });
    assert.equal(ok.status, 200, "the budget was released");
  });
});

describe("connection cap", () => {
  it("at maxConnections a new connection is taken and an idle one closed; the others keep working", async (ctx) => {
    const t = await startTestServer(webhooks(), { maxConnections: 2 });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    const agent = new Agent({ keepAlive: true, maxSockets: 2, ca });
    ctx.after(() => agent.destroy());
    const held = await Promise.all([1, 2].map(() => call(t.port, { method: "GET", path: "/healthz", ca, agent })));
    assert.deepEqual(
      held.map((r) => r.status),
      [200, 200],
    );
    const count = (): Promise<number> => new Promise((resolve, reject) => t.server.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    assert.equal(await count(), 2);
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca })).status, 200, "the newcomer is served");
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca, agent })).status, 200, "the agent reconnects");
    assert.ok((await count()) <= 2, "never more than the cap for long");
    const shed = await t.metrics.registry.getSingleMetricAsString("quartermaster_connections_shed_total");
    assert.match(
      shed,
      /quartermaster_connections_shed_total\{port="webhook",reason="(per_source|capacity)"\} [1-9]/,
      "one source at the cap passes its own bound first",
    );
  });
});

/** Per key type: suites a client may not get (each accepted by a server with Node's defaults) and ones it gets. */
const SUITES: Record<KeyType, { weak: Array<[string, string]>; good: string[]; name: RegExp }> = {
  rsa: {
    weak: [
      ["static RSA, AES-GCM", "AES128-GCM-SHA256"],
      ["static RSA, CBC-SHA1", "AES128-SHA"],
      ["ECDHE, CBC-SHA1", "ECDHE-RSA-AES128-SHA"],
      ["ECDHE, CBC-SHA256", "ECDHE-RSA-AES128-SHA256"],
      ["CCM8", "AES128-CCM8"],
      ["CCM", "AES128-CCM"],
      ["ARIA", "ECDHE-ARIA128-GCM-SHA256"],
      ["Camellia", "CAMELLIA128-SHA"],
    ],
    good: ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"],
    name: /TLS_ECDHE_RSA_WITH_/,
  },
  // An ECDSA key has no static-key suites at all: only ECDHE-ECDSA ones, of which CBC, CCM, ARIA and Camellia are out.
  ecdsa: {
    weak: [
      ["ECDHE, CBC-SHA1", "ECDHE-ECDSA-AES128-SHA"],
      ["ECDHE, CBC-SHA256", "ECDHE-ECDSA-AES128-SHA256"],
      ["CCM8", "ECDHE-ECDSA-AES128-CCM8"],
      ["CCM", "ECDHE-ECDSA-AES128-CCM"],
      ["ARIA", "ECDHE-ECDSA-ARIA128-GCM-SHA256"],
      ["Camellia", "ECDHE-ECDSA-CAMELLIA128-SHA256"],
    ],
    good: ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"],
    name: /TLS_ECDHE_ECDSA_WITH_/,
  },
};

for (const keyType of KEY_TYPES) {
  describe(`TLS 1.2 cipher suites (${keyType} key)`, () => {
    let t: TestServer;
    let ca: string;
    let control: ReturnType<typeof createHttpsServer>;
    let controlPort: number;
    before(async () => {
      t = await startTestServer(webhooks(), { files: await makeCerts(undefined, keyType) });
      ca = t.files.certs.ca.certPem;
      // Control: Node's default suites, which accepted all of these (issue #16 item 7). A weak suite this
      // client cannot offer at all would fail there too, and the case would prove nothing.
      control = createHttpsServer({ cert: t.files.certs.certPem, key: t.files.certs.keyPem, minVersion: "TLSv1.2", ciphers: "ALL:@SECLEVEL=0" }, (_req, res) =>
        res.end("ok"),
      );
      await new Promise<void>((r) => control.listen(0, "127.0.0.1", r));
      controlPort = (control.address() as AddressInfo).port;
    });
    after(async () => {
      await t.server.close();
      control.close();
    });

    const handshake = (port: number, ciphers: string, maxVersion: "TLSv1.2" | "TLSv1.3" = "TLSv1.2"): Promise<string> =>
      raw(port, ca, { ciphers: `${ciphers}:@SECLEVEL=0`, maxVersion, minVersion: "TLSv1.2" }).then(({ socket }) => {
        const name = socket.getCipher().standardName;
        socket.destroy();
        return name;
      });

    for (const [name, suite] of SUITES[keyType].weak) {
      it(`a client offering only ${name} (${suite}) fails the handshake`, async () => {
        assert.ok(await handshake(controlPort, suite), "the control server accepts it");
        await assert.rejects(handshake(t.port, suite), /handshake failure|no shared cipher|alert/);
      });
    }
    for (const suite of SUITES[keyType].good) {
      it(`TLS 1.2 with ${suite} works`, async () => {
        assert.match(await handshake(t.port, suite), SUITES[keyType].name);
      });
    }
    it("TLS 1.3 works with Node's suites", async () => {
      const conn = await raw(t.port, ca);
      assert.equal(conn.socket.getProtocol(), "TLSv1.3");
      conn.socket.destroy();
    });
  });
}

const clientCaCase = await (async () => {
  const files = await makeCerts();
  const clientCa = (await makeCerts()).certs.ca; // another CA, as the apiserver's client CA is
  const now = new Date();
  const good = await issueCertificate({ ca: clientCa, commonName: "kube-apiserver", usage: "client", days: 1, now });
  const stranger = await issueCertificate({ ca: files.certs.ca, commonName: "kube-apiserver", usage: "client", days: 1, now });
  return { files, clientCa, good, stranger };
})();

describe("--client-ca", () => {
  const { files, clientCa, good, stranger } = clientCaCase;
  let t: TestServer;
  before(async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const caFile = join(files.dir, "client-ca.crt");
    writeFileSync(caFile, clientCa.certPem);
    t = await startTestServer(webhooks(), { files, clientCaFile: caFile });
  });
  after(() => t.server.close());

  const post = (cert?: { certPem: string; keyPem: string }) =>
    call(t.port, {
      path: "/mutate/pods",
      headers: { "content-type": "application/json" },
      body: reviewText,
      ca: files.certs.ca.certPem,
      agent: new Agent({ ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}), ca: files.certs.ca.certPem }),
    });
  const cases: Array<{ name: string; cert?: { certPem: string; keyPem: string }; ok: boolean }> = [
    { name: "a client certificate signed by the client CA → 200", cert: good, ok: true },
    { name: "no client certificate → refused in the handshake", ok: false },
    { name: "a certificate from another CA → refused in the handshake", cert: stranger, ok: false },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      if (c.ok) assert.equal((await post(c.cert)).status, 200);
      else await assert.rejects(post(c.cert), /certificate|alert|ECONNRESET|socket hang up/);
    });
  }
  it("the metrics port asks for no client certificate", async () => {
    assert.equal((await plain(t.metricsPort, "/readyz")).status, 200);
  });
});

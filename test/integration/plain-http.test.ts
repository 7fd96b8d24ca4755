/**
 * `serve --plain-http` (the Knative overlay): the same webhooks, readiness and drain over plain HTTP, for a
 * platform that terminates TLS in front of the process; and the CLI refuses to mix it with a key pair.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../src/cli/commands.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { createAdmissionMetrics } from "../../src/server/metrics.js";
import { KEEP_ALIVE_TIMEOUT_MS, startServer, type RunningServer } from "../../src/server/serve.js";
import { createWebhooks } from "../../webhooks/index.js";
import { capturingLogger } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, review } from "../fixtures/reviews.js";

function http(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request({ host: "127.0.0.1", port, method, path, agent: false, headers: data ? { "content-type": "application/json" } : {} }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, json: text.startsWith("{") ? JSON.parse(text) : text }));
    });
    req.on("error", reject);
    req.end(data);
  });
}

describe("serve --plain-http", () => {
  let server: RunningServer;
  const { log, lines } = capturingLogger();
  before(async () => {
    server = await startServer({
      host: "127.0.0.1",
      port: 0,
      certFile: "",
      keyFile: "",
      plainHttp: true,
      webhooks: createWebhooks({ policy: defaultPolicy(), log, jobs: fakeJobReader(), now: () => new Date() }),
      metrics: createAdmissionMetrics({ timeoutSeconds: 5 }),
      log,
      shutdownDelayMs: 300,
    });
  });
  after(() => server.close());

  it("listens on http:// with the same keep-alive timeout", () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(server.server.keepAliveTimeout, KEEP_ALIVE_TIMEOUT_MS);
    assert.ok(lines.some((l) => l.msg === "serving plain HTTP (TLS terminated in front of this process)"));
  });

  for (const path of ["/mutate/pods", "/validate/pods", "/validate/jobs", "/mutate/jobs"]) {
    it(`${path}: a review is answered with its uid`, async () => {
      const r = await http(server.port, "POST", path, review({ uid: "plain-1", object: plainPod() }));
      assert.equal(r.status, 200);
      assert.deepEqual(r.json.response, { uid: "plain-1", allowed: true });
    });
  }

  it("/readyz is 200 while serving and 503 once shutdown begins; the listener then closes", async () => {
    assert.equal((await http(server.port, "GET", "/readyz")).status, 200);
    const closed = server.close();
    assert.equal((await http(server.port, "GET", "/readyz")).status, 503);
    await closed;
    await assert.rejects(http(server.port, "GET", "/readyz"), /ECONNREFUSED/);
  });
});

describe("serve flags", () => {
  const io = () => {
    const err: string[] = [];
    return {
      err,
      io: { stdout: () => undefined, stderr: (l: string) => void err.push(l), cwd: process.cwd(), shutdown: new Promise<string>(() => undefined) },
    };
  };
  const cases: Array<[string, string[], RegExp]> = [
    ["--plain-http with a key pair", ["serve", "--plain-http", "--tls-cert", "a", "--tls-key", "b"], /--plain-http takes no --tls-cert or --tls-key/],
    ["neither a key pair nor --plain-http", ["serve"], /--tls-cert and --tls-key are required \(or --plain-http/],
    ["--client-ca with --plain-http", ["serve", "--plain-http", "--client-ca", "ca.crt"], /--client-ca needs TLS/],
    ["the same port for webhooks and metrics", ["serve", "--plain-http", "--port", "9090"], /--port and --metrics-port must differ \(both 9090\)/],
    ["an in-flight budget below one body", ["serve", "--plain-http", "--max-inflight-body-mib", "4"], /max-inflight-body-mib/],
    ["no connections allowed", ["serve", "--plain-http", "--max-connections", "0"], /max-connections/],
  ];
  for (const [name, argv, message] of cases) {
    it(`${name} is a usage error (exit 2)`, async () => {
      const t = io();
      assert.equal(await runCli(argv, t.io), 2);
      assert.match(t.err.join("\n"), message);
    });
  }
});

import assert from "node:assert/strict";
import { Agent } from "node:https";
import { after, before, describe, it } from "node:test";
import { podGuard } from "../../src/admission/guards.js";
import { mutatingWebhook, validatingWebhook, type Webhook } from "../../src/admission/handler.js";
import { createMetricsListener, createRequestListener } from "../../src/server/app.js";
import { createAdmissionMetrics } from "../../src/server/metrics.js";
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from "../../src/server/serve.js";
import { checkPolicy, defaultPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { call, capturingLogger, plain, postJson, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader, job } from "../fixtures/jobs.js";
import { plainPod, pod, review } from "../fixtures/reviews.js";

// Unref'd: the 60 s "never finishes" webhook below must not hold the test process for a minute after it.
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());

function throwing(): Record<string, Webhook> {
  const boom = (): never => {
    throw new Error("rule exploded");
  };
  return {
    "/mutate/broken": mutatingWebhook({ name: "mutate-broken", guard: podGuard(["CREATE"]), mutate: boom }),
    "/validate/broken": validatingWebhook({ name: "validate-broken", guard: podGuard(["CREATE"]), validate: boom }),
  };
}

describe("admission server over HTTPS", () => {
  let t: TestServer;
  let ca: string;
  before(async () => {
    t = await startTestServer({
      ...createWebhooks({ policy: defaultPolicy(), log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() }),
      ...throwing(),
    });
    ca = t.files.certs.ca.certPem;
  });
  after(() => t.server.close());

  it("timeouts: keep-alive past the apiserver's 90 s idle; headers and request timeouts within 15–35 s", () => {
    for (const server of [t.server.server, t.server.metricsServer!]) {
      assert.equal(server.keepAliveTimeout, KEEP_ALIVE_TIMEOUT_MS);
      assert.ok(KEEP_ALIVE_TIMEOUT_MS > 90_000);
      assert.equal(server.headersTimeout, HEADERS_TIMEOUT_MS);
      assert.equal(server.requestTimeout, REQUEST_TIMEOUT_MS);
      for (const ms of [HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS]) assert.ok(ms >= 15_000 && ms <= 35_000, `${ms}`);
    }
  });

  it("refuses TLS 1.1 with a protocol-version alert; TLS 1.2 works", async () => {
    // SECLEVEL=0 lets this client offer TLS 1.1 at all, so the refusal is the server's.
    const agent = (v: "TLSv1.1" | "TLSv1.2"): Agent => new Agent({ maxVersion: v, minVersion: "TLSv1", ciphers: "DEFAULT:@SECLEVEL=0" });
    await assert.rejects(call(t.port, { method: "GET", path: "/healthz", ca, agent: agent("TLSv1.1") }), /alert protocol version/);
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca, agent: agent("TLSv1.2") })).status, 200);
  });

  for (const path of ["/mutate/pods", "/validate/pods", "/validate/jobs", "/mutate/jobs"]) {
    it(`${path}: a valid review → 200, v1 envelope, same uid, no patch`, async () => {
      const r = await postJson(t.port, `${path}?timeout=5s`, review({ uid: "7f0c9a1e-uid-echo", object: plainPod() }), ca);
      assert.equal(r.status, 200);
      assert.equal(r.headers["content-type"], "application/json");
      const body = r.json();
      assert.equal(body.apiVersion, "admission.k8s.io/v1");
      assert.equal(body.kind, "AdmissionReview");
      assert.deepEqual(body.response, { uid: "7f0c9a1e-uid-echo", allowed: true });
    });
  }

  const big = 8 * 1024 * 1024;
  const badInput: Array<{
    name: string;
    method?: string;
    path: string;
    headers?: Record<string, string | number>;
    body?: string | ((write: (c: Buffer) => boolean) => void);
    status: number;
    message: RegExp;
  }> = [
    { name: "unknown path", method: "GET", path: "/nope", status: 404, message: /no route for GET \/nope/ },
    { name: "POST to an unknown path", path: "/mutate/services", status: 404, message: /no route for POST/ },
    { name: "GET on a webhook path", method: "GET", path: "/mutate/pods", status: 405, message: /method GET is not allowed on \/mutate\/pods; use POST/ },
    { name: "PUT on a webhook path", method: "PUT", path: "/validate/jobs", status: 405, message: /use POST/ },
    { name: "POST on /healthz", path: "/healthz", status: 405, message: /use GET, HEAD/ },
    { name: "no Content-Type", path: "/mutate/pods", body: "{}", status: 415, message: /Content-Type must be application\/json, got ""/ },
    { name: "text/plain", path: "/mutate/pods", headers: { "content-type": "text/plain" }, body: "{}", status: 415, message: /got "text\/plain"/ },
    {
      name: "a non-UTF-8 charset",
      path: "/validate/pods",
      headers: { "content-type": "application/json; charset=latin1" },
      body: "{}",
      status: 415,
      message: /charset=latin1/,
    },
    {
      name: "Content-Length over the limit",
      path: "/mutate/pods",
      headers: { "content-type": "application/json", "content-length": big },
      body: "x".repeat(big),
      status: 413,
      message: /request body of 8388608 bytes exceeds the limit of 7340032 bytes/,
    },
    {
      name: "chunked body over the limit",
      path: "/validate/pods",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      body: (write) => {
        for (let i = 0; i < 8; i++) write(Buffer.alloc(1024 * 1024, 0x20));
      },
      status: 413,
      message: /request body exceeds the limit of 7340032 bytes/,
    },
    { name: "empty body", path: "/mutate/pods", headers: { "content-type": "application/json" }, body: "", status: 400, message: /request body is empty/ },
    {
      name: "malformed JSON",
      path: "/mutate/pods",
      headers: { "content-type": "application/json" },
      body: '{"apiVersion": ',
      status: 400,
      message: /request body is not valid JSON: /,
    },
    {
      name: "JSON that is not an object",
      path: "/validate/pods",
      headers: { "content-type": "application/json" },
      body: "[1,2]",
      status: 400,
      message: /body must be a JSON object/,
    },
    {
      name: "not a v1 AdmissionReview",
      path: "/validate/jobs",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ apiVersion: "admission.k8s.io/v1beta1", kind: "AdmissionReview", request: { uid: "u" } }),
      status: 400,
      message:
        /apiVersion: must be "admission.k8s.io\/v1"; request: missing required field 'kind'; request: missing required field 'resource'; request: missing required field 'operation'/,
    },
  ];
  for (const tc of badInput) {
    it(`${tc.name} → ${tc.status} with a message, and the server keeps serving`, async () => {
      const r = await call(t.port, { method: tc.method, path: tc.path, headers: tc.headers, body: tc.body, ca });
      assert.equal(r.status, tc.status, r.text);
      const status = r.json();
      assert.equal(status.kind, "Status");
      assert.equal(status.code, tc.status);
      assert.match(status.message, tc.message);
      if (tc.status === 405) assert.ok(r.headers.allow);
      const health = await call(t.port, { method: "GET", path: "/healthz", ca });
      assert.equal(health.status, 200);
    });
  }

  it("envelope errors are also listed one per cause", async () => {
    const r = await postJson(t.port, "/mutate/pods", { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: 5 } }, ca);
    assert.equal(r.status, 400);
    assert.deepEqual(
      r
        .json()
        .details.causes.map((c: { message: string }) => c.message)
        .sort(),
      [
        "request.uid: must be string",
        "request: missing required field 'kind'",
        "request: missing required field 'operation'",
        "request: missing required field 'resource'",
      ],
    );
  });

  it("a 3 MiB pod review (the apiserver's maximum object) → 200", async () => {
    const p = pod({ labels: { blob: "x" } }) as { metadata: Record<string, unknown> };
    p.metadata.annotations = { blob: "a".repeat(3 * 1024 * 1024) };
    const r = await postJson(t.port, "/mutate/pods", review({ object: p as never, oldObject: p as never, operation: "UPDATE" }), ca);
    assert.equal(r.status, 200);
    assert.equal(r.json().response.allowed, true);
  });

  it("mutating rule throws → allowed with a warning, logged with its error", async () => {
    const r = await postJson(t.port, "/mutate/broken", review({ uid: "m-err" }), ca);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json().response, {
      uid: "m-err",
      allowed: true,
      warnings: ["quartermaster: pod admitted unchanged, mutation failed: rule exploded"],
    });
    const line = t.lines.find((l) => l.uid === "m-err");
    assert.equal(line?.msg, "admission rule failed; allowed");
    assert.equal((line?.err as { message: string }).message, "rule exploded");
  });

  it("validating rule throws → denied with the error", async () => {
    const r = await postJson(t.port, "/validate/broken", review({ uid: "v-err" }), ca);
    assert.equal(r.status, 200);
    const res = r.json().response;
    assert.equal(res.uid, "v-err");
    assert.equal(res.allowed, false);
    assert.equal(res.status.message, "quartermaster: validation failed: rule exploded");
    assert.equal(t.lines.find((l) => l.uid === "v-err")?.msg, "admission rule failed; denied");
  });

  it("one structured log line per admission", async () => {
    await postJson(t.port, "/mutate/pods", review({ uid: "log-1", object: plainPod() }), ca);
    const lines = t.lines.filter((l) => l.uid === "log-1");
    assert.equal(lines.length, 1);
    const l = lines[0]!;
    assert.equal(l.msg, "admission");
    assert.equal(l.webhook, "mutate-pods");
    assert.equal(l.kind, "Pod");
    assert.equal(l.namespace, "team-a");
    assert.equal(l.name, "trainer-worker-0");
    const patched = await postJson(t.port, "/mutate/pods", review({ uid: "log-2" }), ca);
    assert.equal(patched.json().response.patchType, "JSONPatch");
    const p = t.lines.find((x) => x.uid === "log-2");
    assert.equal(p?.outcome, "patched");
    assert.ok((p?.patchOps as number) > 0);
    assert.equal(l.operation, "CREATE");
    assert.equal(l.outcome, "allowed");
    assert.equal(l.patchOps, 0);
    assert.equal(typeof l.durationMs, "number");
    assert.equal(l.body, undefined, "bodies only at debug level");
  });

  it("/metrics (metrics port): latency histogram by webhook, operation and outcome up to the timeout; error counters", async () => {
    const r = await plain(t.metricsPort, "/metrics");
    assert.equal(r.status, 200);
    assert.match(r.text, /quartermaster_admission_duration_seconds_bucket\{le="5",webhook="mutate-pods",operation="CREATE",outcome="allowed"\} [1-9]/);
    assert.doesNotMatch(r.text, /le="10"/);
    assert.match(r.text, /quartermaster_admission_errors_total\{webhook="mutate-pods",type="415"\} [1-9]/);
    assert.match(r.text, /quartermaster_admission_errors_total\{webhook="validate-broken",type="rule"\} 1/);
    assert.match(r.text, /quartermaster_tls_certificate_expiry_timestamp_seconds \d+/);
  });

  it("/readyz → 200 while serving", async () => {
    assert.equal((await call(t.port, { method: "GET", path: "/readyz", ca })).status, 200);
  });
});

describe("/mutate/jobs over HTTPS", () => {
  let t: TestServer;
  let ca: string;
  const policy = checkPolicy(
    {
      jobDefaults: { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running" },
      namespaces: [{ pattern: "research-*", jobDefaults: { ttlSecondsAfterFinished: 600 } }],
    },
    "t",
  );
  before(async () => {
    t = await startTestServer(createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() }));
    ca = t.files.certs.ca.certPem;
  });
  after(() => t.server.close());
  const pytorchReview = (uid: string, o: { namespace?: string; operation?: "CREATE" | "UPDATE"; runPolicy?: Record<string, unknown> } = {}) => {
    const object = job("PyTorchJob", "bert", o.namespace ?? "team-a", { Master: 1, Worker: 2 }, o.runPolicy ? { runPolicy: o.runPolicy } : {});
    return review({
      uid,
      kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
      resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
      namespace: o.namespace ?? "team-a",
      operation: o.operation ?? "CREATE",
      object,
      oldObject: o.operation === "UPDATE" ? object : null,
    });
  };

  it("CREATE → patched with the defaults and a warning per field; logged and counted like every webhook", async () => {
    const r = await postJson(t.port, "/mutate/jobs?timeout=5s", pytorchReview("jd-1", { runPolicy: { cleanPodPolicy: "None" } }), ca);
    assert.equal(r.status, 200);
    const res = r.json().response;
    assert.equal(res.uid, "jd-1");
    assert.equal(res.patchType, "JSONPatch");
    assert.deepEqual(JSON.parse(Buffer.from(res.patch, "base64").toString()), [{ op: "add", path: "/spec/runPolicy/ttlSecondsAfterFinished", value: 86400 }]);
    assert.deepEqual(res.warnings, ["quartermaster: set spec.runPolicy.ttlSecondsAfterFinished=86400 (platform default)"]);
    const line = t.lines.find((l) => l.uid === "jd-1");
    assert.equal(line?.webhook, "mutate-jobs");
    assert.equal(line?.kind, "PyTorchJob");
    assert.equal(line?.outcome, "patched");
    assert.equal(line?.patchOps, 1);
    const metrics = await plain(t.metricsPort, "/metrics");
    assert.match(metrics.text, /quartermaster_admission_duration_seconds_count\{webhook="mutate-jobs",operation="CREATE",outcome="patched"\} 1/);
  });

  it("a namespace's own default is used", async () => {
    const r = await postJson(t.port, "/mutate/jobs", pytorchReview("jd-2", { namespace: "research-a" }), ca);
    assert.deepEqual(JSON.parse(Buffer.from(r.json().response.patch, "base64").toString()), [
      { op: "add", path: "/spec/runPolicy", value: { ttlSecondsAfterFinished: 600, cleanPodPolicy: "Running" } },
    ]);
  });

  it("UPDATE → allowed unchanged (an existing job is never defaulted)", async () => {
    const r = await postJson(t.port, "/mutate/jobs", pytorchReview("jd-3", { operation: "UPDATE" }), ca);
    assert.deepEqual(r.json().response, { uid: "jd-3", allowed: true });
    assert.equal(t.lines.find((l) => l.uid === "jd-3")?.outcome, "skipped");
  });
});

describe("readiness", () => {
  it("/readyz is 503 until ready() holds, then 200", async () => {
    let ready = false;
    const app = createRequestListener({
      webhooks: {},
      metrics: createAdmissionMetrics({ timeoutSeconds: 5 }),
      log: capturingLogger().log,
      ready: () => ready,
      draining: () => false,
    });
    const { createServer } = await import("node:http");
    const server = createServer(app).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const port = (server.address() as { port: number }).port;
    const get = async (): Promise<number> => (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
    assert.equal(await get(), 503);
    ready = true;
    assert.equal(await get(), 200);
    server.close();
  });
});

describe("health and readiness on both ports", () => {
  // The webhook port and the metrics port answer them alike.
  const states: Array<{ name: string; ready: boolean; draining: boolean }> = [
    { name: "ready", ready: true, draining: false },
    { name: "not ready", ready: false, draining: false },
    { name: "draining", ready: false, draining: true },
  ];
  const requests = [
    ["GET", "/healthz"],
    ["HEAD", "/healthz"],
    ["GET", "/readyz"],
    ["HEAD", "/readyz?verbose=1"],
  ] as const;
  for (const state of states) {
    it(`${state.name}: status, content type, length and body are the same on both listeners`, async () => {
      const opts = {
        webhooks: {},
        metrics: createAdmissionMetrics({ timeoutSeconds: 5 }),
        log: capturingLogger().log,
        ready: () => state.ready,
        draining: () => state.draining,
      };
      const { createServer } = await import("node:http");
      const servers = [createServer(createRequestListener(opts)), createServer(createMetricsListener(opts))].map((s) => s.listen(0, "127.0.0.1"));
      try {
        await Promise.all(servers.map((s) => new Promise((r) => s.once("listening", r))));
        for (const [method, path] of requests) {
          const [direct, viaMetrics] = await Promise.all(
            servers.map(async (s) => {
              const r = await fetch(`http://127.0.0.1:${(s.address() as { port: number }).port}${path}`, { method });
              return { status: r.status, type: r.headers.get("content-type"), length: r.headers.get("content-length"), body: await r.text() };
            }),
          );
          assert.deepEqual(direct, viaMetrics, `${method} ${path}`);
          if (path.startsWith("/readyz")) assert.equal(direct!.status, state.ready ? 200 : 503);
        }
      } finally {
        for (const s of servers) s.close();
      }
    });
  }
});

describe("the admission log line", () => {
  // The object is the client's: metadata that is not strings (found by the fuzz test, seed 133991876)
  // must neither break the line nor cost the answer.
  const cases: Array<{ name: string; metadata: string; logged: string | undefined }> = [
    { name: "name from the object", metadata: '{"name":"w-0"}', logged: "w-0" },
    { name: "generateName only → name*", metadata: '{"generateName":"w-"}', logged: "w-*" },
    { name: "generateName an object without toString → no name", metadata: '{"generateName":{"toString":1,"valueOf":1}}', logged: undefined },
    { name: "name an object, generateName a string → name*", metadata: '{"name":{"toString":1},"generateName":"w-"}', logged: "w-*" },
    { name: "name a number → no name", metadata: '{"name":7}', logged: undefined },
  ];
  for (const c of cases) {
    it(`${c.name}: answered, one info line, no error line`, async () => {
      const captured = capturingLogger();
      const webhook = validatingWebhook({ name: "v", guard: () => undefined, validate: () => ({ violations: [], warnings: [] }) });
      const listener = createRequestListener({
        webhooks: { "/v": webhook },
        metrics: createAdmissionMetrics({ timeoutSeconds: 5 }),
        log: captured.log,
        ready: () => true,
        draining: () => false,
      });
      const { createServer } = await import("node:http");
      const server = createServer(listener).listen(0, "127.0.0.1");
      try {
        await new Promise((r) => server.once("listening", r));
        const body = JSON.stringify(review({ name: "", object: { apiVersion: "v1", kind: "Pod", metadata: {} } })).replace(
          '"metadata":{}',
          `"metadata":${c.metadata}`,
        );
        const r = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/v`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        assert.equal(r.status, 200, await r.text());
        await new Promise((done) => setImmediate(done));
        assert.deepEqual(
          captured.lines.filter((l) => (l.level as number) >= 50),
          [],
        );
        const line = captured.lines.find((l) => l.msg === "admission");
        assert.ok(line, "an admission line");
        assert.equal(line.name, c.logged);
      } finally {
        server.close();
      }
    });
  }
});

describe("graceful shutdown", () => {
  const slow = (ms: number): Record<string, Webhook> => ({
    "/slow": validatingWebhook({
      name: "slow",
      guard: () => undefined,
      validate: async () => {
        await sleep(ms);
        return { violations: [], warnings: [] };
      },
    }),
  });

  it("close: in-flight requests finish, readiness fails during the delay, new connections are refused after", async (ctx) => {
    const t = await startTestServer(slow(400), { shutdownDelayMs: 200, drainTimeoutMs: 5000 });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    const inflight = postJson(t.port, "/slow", review({ uid: "inflight" }), ca);
    await sleep(50);
    const closed = t.server.close();
    await sleep(50);
    const ready = await call(t.port, { method: "GET", path: "/readyz", ca });
    assert.equal(ready.status, 503, "readiness fails as soon as shutdown begins");
    assert.equal(ready.text, "draining");
    const r = await inflight;
    assert.equal(r.status, 200);
    assert.equal(r.json().response.uid, "inflight");
    await closed;
    await assert.rejects(call(t.port, { method: "GET", path: "/healthz", ca }), /ECONNREFUSED/);
  });

  it("close is bounded: a request that never finishes is cut at the drain timeout", async (ctx) => {
    const t = await startTestServer(slow(60_000), { drainTimeoutMs: 300 });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    const stuck = postJson(t.port, "/slow", review(), ca).catch((e: Error) => e);
    await sleep(50);
    const started = performance.now();
    await t.server.close();
    const took = performance.now() - started;
    assert.ok(took >= 250 && took < 3000, `closed after ${took} ms`);
    assert.ok((await stuck) instanceof Error, "the stuck request's connection was cut");
  });

  it("keep-alive connections are told to close while draining", async (ctx) => {
    const t = await startTestServer(slow(200), { shutdownDelayMs: 300 });
    ctx.after(() => t.server.close());
    const ca = t.files.certs.ca.certPem;
    const agent = new Agent({ keepAlive: true, ca });
    const first = await postJson(t.port, "/slow", review(), ca, agent);
    assert.notEqual(first.headers.connection, "close");
    const closed = t.server.close();
    const during = await postJson(t.port, "/slow", review(), ca, agent);
    assert.equal(during.status, 200);
    assert.equal(during.headers.connection, "close");
    await closed;
    agent.destroy();
  });
});

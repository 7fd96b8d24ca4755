/**
 * Fuzz: over 100,000 generated requests (fast-check) against the admission server: corpus pods and jobs
 * damaged at random, envelopes with wrong types at every level, truncated and corrupted bodies, huge
 * arrays, deep nesting, unicode, `/`, `~` and `__proto__` keys. Most cases drive the server's admission
 * handler in process (no sockets, the same handler the HTTPS listener dispatches to); a share goes
 * through the real HTTPS server, with other methods and paths too.
 *
 * Every answer must be a well-formed AdmissionReview carrying the request's uid, or a 4xx metav1.Status
 * with a message: no 5xx, no crash, no hang. Every patch must apply to the request object it was
 * computed from, and mutating the patched object again must give no patch.
 *
 *   QM_FUZZ_SEED=<n> replays a run; QM_FUZZ_SCALE=<x> multiplies the case counts (default 1).
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Agent } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import jsonpatch, { type Operation } from "fast-json-patch";
import { pino } from "pino";
import type { Webhook, WebhookResult } from "../../src/admission/handler.js";
import { checkPolicy } from "../../src/policy/load.js";
import { createAdmissionHandler } from "../../src/server/app.js";
import { createAdmissionMetrics } from "../../src/server/metrics.js";
import { createWebhooks } from "../../webhooks/index.js";
import { call, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { WEBHOOK_PATHS, describeCase, fuzzCases, httpOnlyCases, loadCorpus, type FuzzCase } from "./cases.js";
import { ALL_MUTATIONS } from "../fixtures/policies.js";

const SCALE = Number(process.env.QM_FUZZ_SCALE ?? "1");
const SEED = Number(process.env.QM_FUZZ_SEED ?? Date.now() % 2 ** 31);
/** In-process cases, and HTTPS batches of BATCH concurrent cases. */
const IN_PROCESS_RUNS = Math.round(90_000 * SCALE);
const BATCH = 16;
const HTTPS_BATCHES = Math.round(700 * SCALE);
const MIN_CASES = Math.round(100_000 * SCALE);
/** A case that takes this long is a hang (the largest bodies take tens of milliseconds). */
const HANG_MS = 10_000;

const policy = checkPolicy(
  {
    ...structuredClone(ALL_MUTATIONS),
    limits: {
      container: { cpu: "32", memory: "256Gi", gpus: { "nvidia.com/gpu": 8, "nvidia.com/mig-*": 7 } },
      pod: { gpus: 8 },
      job: { gpus: 64, replicas: { Worker: 64, PS: 8 } },
      runPolicy: { maxBackoffLimit: 10, allowedCleanPodPolicies: ["All", "Running"] },
      allowedAccelerators: ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB"],
    },
    jobDefaults: { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", activeDeadlineSeconds: 604800, backoffLimit: 3 },
    namespaces: [{ pattern: "kubeflow*", limits: { pod: { gpus: 16 } }, jobDefaults: { backoffLimit: 10 } }],
  },
  "fuzz",
);

interface Reply {
  status: number;
  contentType: string | undefined;
  text: string;
}

/** What the runs saw, printed at the end. */
const tally = {
  inProcess: 0,
  https: 0,
  byFamily: new Map<string, number>(),
  byStatus: new Map<number, number>(),
  byOutcome: new Map<string, number>(),
  patchesChecked: 0,
  ruleErrors: new Map<string, number>(),
};
const bump = <K>(m: Map<K, number>, k: K): void => void m.set(k, (m.get(k) ?? 0) + 1);

describe("fuzz: the admission server under generated and damaged requests", () => {
  const corpus = loadCorpus();
  const base = createWebhooks({ policy, log: pino({ level: "silent" }), jobs: fakeJobReader(corpus.jobs.map((j) => j.job)), now: () => new Date() });
  // Counts each webhook's outcome, and remembers what rules threw (a failure mode, not a crash).
  const webhooks: Record<string, Webhook> = Object.fromEntries(
    Object.entries(base).map(([path, w]) => [
      path,
      {
        name: w.name,
        failureMode: w.failureMode,
        async admit(body: unknown): Promise<WebhookResult> {
          const r = await w.admit(body);
          bump(tally.byOutcome, `${w.name} ${r.outcome}`);
          if (r.outcome === "error") bump(tally.ruleErrors, `${w.name}: ${r.error instanceof Error ? r.error.message : String(r.error)}`.slice(0, 160));
          return r;
        },
      },
    ]),
  );

  // Error-level lines only: a 5xx or a failing rule logs one; the test fails on the former anyway.
  const errorLines: string[] = [];
  const log = pino({ level: "error" }, new Writable({ write: (c: Buffer, _e, done) => (errorLines.push(c.toString()), done()) }));
  const opts = { webhooks, metrics: createAdmissionMetrics({ timeoutSeconds: 5 }), log, ready: () => true, draining: () => false };
  const handlers = new Map(WEBHOOK_PATHS.map((p) => [p as string, createAdmissionHandler(webhooks[p]!, opts)]));

  /** One request through the admission handler the HTTPS listener dispatches webhook POSTs to, no socket. */
  function inProcess(c: FuzzCase): Promise<Reply> {
    const handler = handlers.get(c.path);
    assert.ok(handler, `no in-process handler for ${c.path}`);
    return new Promise((resolve, reject) => {
      // The parts of IncomingMessage the handler reads; the body arrives in one chunk, as on loopback.
      const req = new EventEmitter() as IncomingMessage;
      Object.assign(req, {
        method: c.method,
        url: c.path,
        headers: { ...(c.contentType === undefined ? {} : { "content-type": c.contentType }), ...c.headers, "content-length": String(c.body.length) },
      });
      process.nextTick(() => {
        if (c.body.length > 0) req.emit("data", c.body);
        req.emit("end");
      });
      let status = 0;
      let contentType: string | undefined;
      const closed: Array<() => void> = [];
      const res = {
        headersSent: false,
        once(event: string, listener: () => void) {
          if (event === "close") closed.push(listener);
          return res;
        },
        writeContinue() {},
        writeHead(s: number, headers: Record<string, string>) {
          status = s;
          contentType = headers["content-type"];
          res.headersSent = true;
          return res;
        },
        end(data?: Buffer | string) {
          resolve({ status, contentType, text: data ? data.toString() : "" });
          for (const listener of closed) listener();
        },
      } as unknown as ServerResponse & { headersSent: boolean };
      try {
        handler(req, res);
      } catch (err) {
        reject(err);
      }
    });
  }

  async function withHangGuard<T>(what: string, p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${HANG_MS} ms: ${what}`)), HANG_MS);
    });
    try {
      return await Promise.race([p, hang]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The body the case sent, parsed, when it was JSON at all. */
  function sent(c: FuzzCase): any {
    try {
      return JSON.parse(c.body.toString("utf8"));
    } catch {
      return undefined;
    }
  }

  /**
   * The answer is a well-formed AdmissionReview for the request's uid (200) or a metav1.Status with a
   * message (4xx); for a mutation, its patch applies and re-mutating the result gives no patch.
   */
  async function check(c: FuzzCase, reply: Reply): Promise<void> {
    try {
      await checkReply(c, reply);
    } catch (err) {
      // The whole body, for a replay with curl or a debugger; the report shows its first bytes.
      const file = join(tmpdir(), `qm-fuzz-failure-${SEED}.body`);
      writeFileSync(file, c.body);
      throw new Error(`${(err as Error).message}\n(body written to ${file})`, { cause: err });
    }
  }

  async function checkReply(c: FuzzCase, reply: Reply): Promise<void> {
    const ctx = (): string => `${describeCase(c)}\n→ ${reply.status} ${reply.text.slice(0, 500)}`;
    bump(tally.byFamily, c.family);
    bump(tally.byStatus, reply.status);
    assert.ok(reply.status === 200 || (reply.status >= 400 && reply.status < 500), `status ${reply.status}: ${ctx()}`);
    // Exact paths: only the three webhook paths (a query aside) are ever answered with a review.
    if (reply.status === 200 && c.method === "POST")
      assert.ok((WEBHOOK_PATHS as readonly string[]).includes(c.path.split("?")[0]!), `200 on ${c.path}: ${ctx()}`);
    // A body in any Content-Encoding but identity is refused unread (415) on a webhook path.
    const encoding = c.headers?.["content-encoding"]?.trim().toLowerCase();
    if (encoding && encoding !== "identity" && c.method === "POST" && (WEBHOOK_PATHS as readonly string[]).includes(c.path.split("?")[0]!))
      assert.equal(reply.status, 415, ctx());
    // HEAD has no body; GET /healthz, /readyz and /metrics answer in text.
    if (c.method === "HEAD" || (c.method === "GET" && reply.status === 200)) return;
    assert.match(reply.contentType ?? "", /^application\/json/, ctx());
    const body = JSON.parse(reply.text);
    if (reply.status !== 200) {
      assert.equal(body.kind, "Status", ctx());
      assert.equal(body.code, reply.status, ctx());
      assert.ok(typeof body.message === "string" && body.message.length > 0, ctx());
      return;
    }
    assert.equal(body.apiVersion, "admission.k8s.io/v1", ctx());
    assert.equal(body.kind, "AdmissionReview", ctx());
    const res = body.response;
    const parsed = sent(c);
    const request = parsed?.request;
    assert.ok(request && typeof request.uid === "string", `200 for a body without a request uid: ${ctx()}`);
    assert.equal(res.uid, request.uid, ctx());
    assert.equal(typeof res.allowed, "boolean", ctx());
    assert.equal(res.patch === undefined, res.patchType === undefined, `patch and patchType go together: ${ctx()}`);
    if (!res.allowed) {
      assert.equal(res.patch, undefined, ctx());
      assert.equal(typeof res.status?.code, "number", ctx());
      assert.ok(typeof res.status.message === "string" && res.status.message.length > 0, ctx());
    }
    if (res.warnings !== undefined) {
      assert.ok(Array.isArray(res.warnings) && res.warnings.length <= 10, ctx());
      assert.equal(new Set(res.warnings).size, res.warnings.length, `duplicate warnings: ${ctx()}`);
      // 120 characters, counted as code points (an emoji is one character, two UTF-16 units).
      for (const w of res.warnings) assert.ok(typeof w === "string" && [...w].length <= 120, `warning ${JSON.stringify(w)}: ${ctx()}`);
    }
    if (res.patch === undefined) return;
    assert.ok(c.path.toLowerCase().startsWith("/mutate/"), `patch from a validating webhook: ${ctx()}`);
    assert.equal(res.patchType, "JSONPatch", ctx());
    const ops = JSON.parse(Buffer.from(res.patch, "base64").toString()) as Operation[];
    assert.ok(Array.isArray(ops) && ops.length > 0, `empty patch sent: ${ctx()}`);
    // A fresh parse of the body is the request object as the apiserver holds it; apply to it in place.
    const original = sent(c).request.object; // a second parse: applyPatch works in place
    let patchedObject: Record<string, unknown>;
    try {
      patchedObject = jsonpatch.applyPatch(original, ops, true, true).newDocument;
    } catch (err) {
      assert.fail(`patch does not apply: ${(err as Error).message}\npatch: ${JSON.stringify(ops).slice(0, 500)}\n${ctx()}`);
    }
    // The webhook that answered (express also routes `/MUTATE/PODS/` and query strings to it).
    const again = await (base[c.path.split("?")[0]!.toLowerCase().replace(/\/+$/, "")] ?? base["/mutate/pods"]!).admit({
      ...parsed,
      request: { ...request, uid: `${request.uid}-again`, object: patchedObject },
    });
    assert.equal(
      again.review.response?.patch,
      undefined,
      `re-mutating the patched object changed it again: ${again.review.response?.patch ? Buffer.from(again.review.response.patch, "base64").toString().slice(0, 500) : ""}\n${ctx()}`,
    );
    tally.patchesChecked++;
  }

  let t: TestServer;
  let agent: Agent;
  before(async () => {
    t = await startTestServer(webhooks);
    agent = new Agent({ keepAlive: true, maxSockets: BATCH });
  });
  after(async () => {
    agent?.destroy();
    await t?.server.close();
    const fmt = (m: Map<unknown, number>): string =>
      [...m]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}: ${v}`)
        .join(", ");
    console.log(
      `fuzz: ${tally.inProcess + tally.https} cases (${tally.inProcess} in process, ${tally.https} over HTTPS), seed ${SEED}\n` +
        `  by family: ${fmt(tally.byFamily)}\n  by HTTP status: ${fmt(tally.byStatus)}\n  by outcome: ${fmt(tally.byOutcome)}\n` +
        `  patches applied and re-mutated: ${tally.patchesChecked}\n` +
        `  rules that threw (answered by the failure mode): ${tally.ruleErrors.size === 0 ? "none" : `\n    ${fmt(tally.ruleErrors).split(", ").join("\n    ")}`}`,
    );
  });

  it(`${IN_PROCESS_RUNS} cases through the admission handler in process`, { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fuzzCases(corpus), async (c) => {
        const reply = await withHangGuard(describeCase(c), inProcess(c));
        tally.inProcess++;
        await check(c, reply);
      }),
      { numRuns: IN_PROCESS_RUNS, seed: SEED, includeErrorInReport: true },
    );
  });

  it(`${HTTPS_BATCHES * BATCH} cases through the real HTTPS server, ${BATCH} at a time`, { timeout: 300_000 }, async () => {
    const ca = t.files.certs.ca.certPem;
    const anyCase = fc.oneof({ weight: 9, arbitrary: fuzzCases(corpus) }, { weight: 1, arbitrary: httpOnlyCases(corpus) });
    await fc.assert(
      fc.asyncProperty(fc.array(anyCase, { minLength: BATCH, maxLength: BATCH }), async (cases) => {
        await Promise.all(
          cases.map(async (c) => {
            const r = await withHangGuard(
              describeCase(c),
              call(t.port, {
                method: c.method,
                path: c.path,
                // An explicit length: Node's client sends a DELETE or OPTIONS body without one otherwise,
                // which no server can delimit on a kept-alive connection.
                headers: {
                  ...(c.contentType === undefined ? {} : { "content-type": c.contentType }),
                  ...c.headers,
                  ...(c.body.length > 0 ? { "content-length": c.body.length } : {}),
                },
                body: c.body,
                ca,
                agent,
              }),
            ).catch((err: Error) => {
              const file = join(tmpdir(), `qm-fuzz-failure-${SEED}.body`);
              writeFileSync(file, c.body);
              throw new Error(`${err.message}: ${describeCase(c)}\n(body written to ${file})`, { cause: err });
            });
            tally.https++;
            await check(c, { status: r.status, contentType: r.headers["content-type"] as string | undefined, text: r.text });
          }),
        );
      }),
      { numRuns: HTTPS_BATCHES, seed: SEED + 1, includeErrorInReport: true },
    );
    assert.equal((await call(t.port, { method: "GET", path: "/healthz", ca })).status, 200, "the server still answers");
  });

  it(`ran at least ${MIN_CASES} cases, with no 5xx and no error log line but failing rules`, () => {
    const total = tally.inProcess + tally.https;
    assert.ok(total >= MIN_CASES, `only ${total} cases ran`);
    assert.ok(tally.https >= total / 20, `only ${tally.https} of ${total} cases went over HTTPS`);
    assert.equal([...tally.byStatus.keys()].filter((s) => s >= 500).length, 0);
    const unexpected = errorLines.filter((l) => !l.includes("admission rule failed"));
    assert.deepEqual(unexpected.slice(0, 5), []);
  });
});

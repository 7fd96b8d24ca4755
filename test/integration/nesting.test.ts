/**
 * Issue 29, item 5: nesting is bounded before any parse (`MAX_NESTING` in `src/server/parse.ts`). A body
 * nested deeper is answered 400 with a message saying so, from the worker for a large body (never parsed
 * again on the main thread) and in-thread for a small one; the server goes on answering.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { checkPolicy } from "../../src/policy/load.js";
import { silentLogger } from "../../src/log.js";
import { createBodyParser, MAX_NESTING, OFFLOAD_BYTES } from "../../src/server/parse.js";
import { createWebhooks } from "../../webhooks/index.js";
import { gpuJob } from "../fixtures/array-work.js";
import { call, postJson, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, review } from "../fixtures/reviews.js";

const policy = checkPolicy({ limits: { container: { cpu: "4", memory: "16Gi" } } }, "strict");
const padding = (large: boolean) => (large ? "x".repeat(OFFLOAD_BYTES) : "x");

/** A pod review with `depth` levels of arrays under one annotation-free field (the review, its request and the pod add 3). */
function nested(depth: number, large: boolean, uid: string): string {
  const pod = { ...plainPod(), metadata: { name: "deep", namespace: "team-a", annotations: { "example.com/pad": padding(large) } }, deep: "DEEP" };
  return JSON.stringify(review({ uid, object: pod })).replace('"DEEP"', `${"[".repeat(depth)}${"]".repeat(depth)}`);
}

const DEEP = /^request body is nested deeper than 1000 levels/;

/** The bodies: their total nesting counts the three objects around the arrays. */
const CASES: Array<{ name: string; body: () => string; status: number; message?: RegExp }> = [
  { name: "3.5M nested arrays, 6.7 MiB (issue 29): 400 from the worker", body: () => nested(3_500_000, false, "huge"), status: 400, message: DEEP },
  { name: "1,001 levels, large (worker): 400", body: () => nested(MAX_NESTING - 2, true, "w1001"), status: 400, message: DEEP },
  { name: "1,001 levels, small (in-thread): 400", body: () => nested(MAX_NESTING - 2, false, "s1001"), status: 400, message: DEEP },
  { name: "exactly 1,000 levels, large (worker): answered", body: () => nested(MAX_NESTING - 3, true, "w1000"), status: 200 },
  { name: "exactly 1,000 levels, small (in-thread): answered", body: () => nested(MAX_NESTING - 3, false, "s1000"), status: 200 },
];

describe("nesting bounded before parsing (issue 29, item 5)", () => {
  let t: TestServer;
  before(async () => {
    const webhooks = createWebhooks({ policy, log: silentLogger(), jobs: fakeJobReader([gpuJob(2, 2)]), now: () => new Date() });
    t = await startTestServer(webhooks, { bodyParser: createBodyParser({ log: silentLogger() }) });
  });
  after(() => t.server.close());

  for (const c of CASES) {
    for (const path of ["/mutate/pods", "/validate/pods"]) {
      it(`${path}: ${c.name}`, async () => {
        const body = c.body();
        const started = performance.now();
        const [got, small] = await Promise.all([
          call(t.port, { path, body, headers: { "content-type": "application/json" }, ca: t.files.certs.ca.certPem }),
          postJson(t.port, "/validate/pods", review({ uid: "small", object: plainPod() }), t.files.certs.ca.certPem),
        ]);
        assert.equal(got.status, c.status, got.text.slice(0, 300));
        if (c.message) {
          assert.equal(JSON.parse(got.text).kind, "Status");
          assert.match(JSON.parse(got.text).message, c.message);
        } else {
          assert.equal(JSON.parse(got.text).response.allowed, true);
        }
        // The server keeps serving: a small review sent alongside gets its normal answer, and one after.
        assert.deepEqual(small.json().response, { uid: "small", allowed: true });
        const after = await postJson(t.port, "/validate/pods", review({ uid: "after", object: plainPod() }), t.files.certs.ca.certPem);
        assert.deepEqual(after.json().response, { uid: "after", allowed: true });
        assert.ok(performance.now() - started < 5000);
      });
    }
  }
});

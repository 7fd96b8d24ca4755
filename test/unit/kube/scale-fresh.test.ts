/**
 * Issue 29, item 4: `/scale` is checked against the job as it is now. With `job.gpus: 64`, a scale to 60
 * workers was admitted within the job cache's window after the job's per-worker GPUs were raised. Now the
 * scale path reads the job fresh (the reader's `fresh`, bypassing the cache), and a Scale whose
 * `metadata.resourceVersion` is not the job's current one is denied with 409 Conflict, so the client retries.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { silentLogger } from "../../../src/log.js";
import { cachedJobReader } from "../../../src/kube/jobs.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";
import { gpuJob, scale, scaleReview } from "../../fixtures/array-work.js";

const policy = checkPolicy({ limits: { container: { cpu: "4", memory: "16Gi" }, job: { gpus: 64 } } }, "strict");

const at = (job: KubeObject, resourceVersion: string): KubeObject => deepFreeze({ ...job, metadata: { ...(job.metadata as object), resourceVersion } });
/** Cached (stale): 2 workers of 1 GPU at resourceVersion 100. Current: per-worker GPUs raised to 8, at 101. */
const stale = at(gpuJob(2, 1), "100");
const raised = at(gpuJob(2, 8), "101");

function scaleTo(replicas: number, resourceVersion?: string) {
  const s = scale(replicas);
  const object = resourceVersion === undefined ? s : deepFreeze({ ...s, metadata: { ...(s.metadata as object), resourceVersion } });
  return scaleReview(replicas, { object });
}

const GPUS = /job total of 488 nvidia\.com\/gpu exceeds the per-job limit of 64|488/;

describe("/scale against the job as it is now (issue 29, item 4)", () => {
  const cases: Array<{
    name: string;
    cached: KubeObject;
    current: KubeObject;
    rv?: string;
    outcome: string;
    code?: number;
    reason?: string;
    message?: RegExp;
  }> = [
    {
      name: "scale to 60 at the current resourceVersion, cache stale (1 GPU/worker), job now 8 GPU/worker → denied 403",
      cached: stale,
      current: raised,
      rv: "101",
      outcome: "denied",
      code: 403,
      reason: "Forbidden",
      message: GPUS,
    },
    {
      name: "scale to 60 carrying the stale resourceVersion → denied 409 Conflict",
      cached: stale,
      current: raised,
      rv: "100",
      outcome: "denied",
      code: 409,
      reason: "Conflict",
      message: /resourceVersion 100 .*current .*101.*retry/,
    },
    {
      name: "scale to 60 without a resourceVersion (unconditional) → checked against the fresh job: denied 403",
      cached: stale,
      current: raised,
      outcome: "denied",
      code: 403,
      reason: "Forbidden",
      message: GPUS,
    },
    { name: "scale to 60, job unchanged (1 GPU/worker, 61 GPUs) → allowed", cached: stale, current: stale, rv: "100", outcome: "allowed" },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const jobs = fakeJobReader([c.cached], [c.current]);
      const res = await createWebhooks({ policy, log: silentLogger(), jobs, now: () => new Date() })["/validate/jobs"]!.admit(scaleTo(60, c.rv));
      assert.equal(res.outcome, c.outcome, res.review.response?.status?.message);
      assert.equal(jobs.freshReads, 1, "read fresh");
      assert.equal(jobs.reads, 0, "not through the cache");
      if (c.code !== undefined) {
        const status = res.review.response!.status!;
        assert.equal(status.code, c.code);
        assert.equal(status.reason, c.reason);
        assert.match(status.message!, c.message!);
      }
    });
  }
});

describe("cachedJobReader.fresh", () => {
  it("bypasses a cached answer within the TTL, and refreshes the cache with its own", async () => {
    let stored = stale;
    let gets = 0;
    const reader = cachedJobReader(async () => async () => (gets++, stored), { ttlMs: 5000, now: () => 0 });
    const kind = kindOf("PyTorchJob");
    assert.equal(await reader.get(kind, "team-a", "train"), stale);
    stored = raised;
    assert.equal(await reader.get(kind, "team-a", "train"), stale, "the cache, within its window");
    assert.equal(await reader.fresh!(kind, "team-a", "train"), raised);
    assert.equal(gets, 2);
    assert.equal(reader.peek!(kind, "team-a", "train"), raised, "the cache holds the fresh answer");
    assert.equal(await reader.get(kind, "team-a", "train"), raised);
    assert.equal(gets, 2);
  });
});

describe("cachedJobReader.fresh under concurrency (a launch's DRA pods reading their claim template)", () => {
  it("fresh reads begun after the first answer compare metadata against it, even while others are in flight", async () => {
    const counts = { whole: 0, metadata: 0 };
    const stored = deepFreeze({ ...stale, metadata: { ...(stale.metadata as object), uid: "u-1" } });
    const pending: Array<() => void> = [];
    // Every read answers only when the test says (the apiserver's latency), in order.
    const later = <T>(v: T): Promise<T> => new Promise((r) => pending.push(() => r(v)));
    const get = Object.assign(async () => (counts.whole++, later(stored)), {
      metadata: async () => (counts.metadata++, later({ metadata: stored.metadata } as KubeObject)),
    });
    const reader = cachedJobReader(async () => get, { ttlMs: 5000, now: () => 0 });
    const kind = kindOf("PyTorchJob");
    const read = () => reader.fresh!(kind, "team-a", "train");
    const settle = async () => {
      await new Promise((r) => setImmediate(r));
      pending.shift()!();
      await new Promise((r) => setImmediate(r));
    };
    // Two begun together (no copy yet: both whole), the first answers while the second is in flight; then three
    // more begun: each finds the second in flight, now with the first's answer to compare: metadata alone.
    const first = [read(), read()];
    await settle();
    const next = [read(), read(), read()];
    while (pending.length > 0) await settle();
    for (const answer of await Promise.all([...first, ...next])) assert.equal(answer, stored);
    assert.deepEqual(counts, { whole: 2, metadata: 3 });
  });
});

describe("cachedJobReader.fresh with `since`: a read begun after the caller's question answers it", () => {
  it("shares a read begun after `since` (in flight or done), never one begun before it", async () => {
    let reads = 0;
    let version = 1;
    const pending: Array<() => void> = [];
    const get = async () => {
      reads++;
      const v = version;
      return new Promise<KubeObject>((r) =>
        pending.push(() => r(deepFreeze({ ...stale, metadata: { name: "train", uid: "u-1", resourceVersion: String(v) } }))),
      );
    };
    const reader = cachedJobReader(async () => get, { ttlMs: 5000, now: () => 0 });
    const kind = kindOf("PyTorchJob");
    const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // A read in flight, begun before review A's question: A does not share it (the change may have come between).
    const early = reader.fresh!(kind, "team-a", "train");
    await wait(2);
    const sinceA = reader.began!();
    await wait(2);
    version = 2; // the change, after A's question
    const a = reader.fresh!(kind, "team-a", "train", sinceA);
    await wait(2);
    assert.equal(reads, 2, "A reads again: the read in flight began before its question");
    // Review B asked before A's read began: it shares A's read, in flight; review C asked after it began: a read of its own.
    const sinceC = reader.began!();
    const b = reader.fresh!(kind, "team-a", "train", sinceA);
    const c = reader.fresh!(kind, "team-a", "train", sinceC);
    await wait(1);
    assert.equal(reads, 3, "B shares A's read; C reads again");
    while (pending.length > 0) pending.shift()!();
    const [ve, va, vb, vc] = (await Promise.all([early, a, b, c])).map((o) => (o!.metadata as { resourceVersion: string }).resourceVersion);
    assert.deepEqual([ve, va, vb, vc], ["1", "2", "2", "2"]);
    // Done reads answer too: D asked before C's read began gets its answer with no read.
    const d = await reader.fresh!(kind, "team-a", "train", sinceA);
    assert.equal((d!.metadata as { resourceVersion: string }).resourceVersion, "2");
    assert.equal(reads, 3);
  });
});

/**
 * One review's reads never queue another's (issue 46 finding 2: one review naming 20,000 claims made 20,005 GETs on
 * the webhook's one client over 18–21 s; meanwhile another tenant's pod lost its TF_CONFIG, and a pod over its cap
 * was admitted because a read that failed counted as zero). Here:
 * - a review naming more than MAX_CLAIM_NAMES distinct claims and templates is refused at its field, with the fix,
 *   before any read (the mutating webhook admits it unchanged with a warning);
 * - a review's reads are at most 8 in flight, all reviews' at most 32;
 * - reviews take turns: a 1-claim review started after reviews with thousands of reads completes after O(1) reads;
 * - a read shed by the webhook's own backlog (its review's time ran out, or the queue was full) is unknown: refused
 *   under a GPU cap (gpu-unknown), never counted as zero.
 * The "apiserver" is a fake serving the one client's requests in arrival order, a few per tick.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_CLAIM_NAMES, readClaims } from "../../../src/admission/claims.js";
import { readPool, ReadShed } from "../../../src/admission/read-pool.js";
import type { KubeObject, ObjectKind } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

const NS = "team-a";

/** A claim of one NIC: no GPU, so a pod naming only such claims is admitted wherever they are read. */
const nicClaim = (name: string): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaim",
  metadata: { name, namespace: NS },
  spec: { devices: { requests: [{ name: "nic", exactly: { deviceClassName: "nic.example.com", count: 1 } }] } },
});

/**
 * The webhook's one client and the apiserver behind it: requests answered in arrival order, `perTick` per
 * event-loop turn (`stalled`: none). Counts what is in flight and the order each name was served in.
 */
function fifoApiserver(perTick = 4, stalled = false) {
  const waiting: Array<{ name: string; resolve: (o: KubeObject | undefined) => void }> = [];
  const servedAt = new Map<string, number>();
  const s = { served: 0, inFlight: 0, maxInFlight: 0, servedAt };
  let scheduled = false;
  const tick = (): void => {
    scheduled = false;
    for (let i = 0; i < perTick && waiting.length > 0; i++) {
      const w = waiting.shift()!;
      s.served++;
      s.inFlight--;
      servedAt.set(w.name, s.served);
      w.resolve(nicClaim(w.name));
    }
    if (waiting.length > 0) schedule();
  };
  const schedule = (): void => {
    if (stalled || scheduled) return;
    scheduled = true;
    setImmediate(tick);
  };
  const reader = {
    get(_kind: ObjectKind, _namespace: string, name: string): Promise<KubeObject | undefined> {
      s.inFlight++;
      s.maxInFlight = Math.max(s.maxInFlight, s.inFlight);
      return new Promise((resolve) => {
        waiting.push({ name, resolve });
        schedule();
      });
    },
  };
  return { stats: s, reader };
}

const podNaming = (pod: string, claims: readonly string[]): KubeObject =>
  deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: pod, namespace: NS },
    spec: {
      resourceClaims: claims.map((c, i) => ({ name: `c${i}`, resourceClaimName: c })),
      containers: [{ name: "c", image: "x", resources: { claims: [{ name: "c0" }] } }],
    },
  });
/** A pod's CREATE (`review`'s defaults) in {@link NS}. */
const podReview = (object: KubeObject) => review({ namespace: NS, object: object });
const names = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

const uncapped = checkPolicy({}, "uncapped");
const capped = checkPolicy({ limits: { pod: { gpus: 8 } }, clusterSpec: { jobLookupTimeoutMs: 100 } }, "capped");

type Causes = Array<{ field?: string; message?: string; reason?: string }>;

describe("distinct claim names per review: refused past MAX_CLAIM_NAMES at the field, before any read", () => {
  const pytorchJob = (master: number, worker: number): KubeObject =>
    deepFreeze({
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "pj", namespace: NS },
      spec: {
        pytorchReplicaSpecs: Object.fromEntries(
          (
            [
              ["Master", master],
              ["Worker", worker],
            ] as const
          ).map(([type, n]) => [
            type,
            {
              replicas: 1,
              template: {
                spec: {
                  resourceClaims: names(`${type}`, n).map((c, i) => ({ name: `c${i}`, resourceClaimName: c })),
                  containers: [{ name: "pytorch", image: "x", resources: { claims: [{ name: "c0" }], limits: { "nvidia.com/gpu": 1 } } }],
                },
              },
            },
          ]),
        ),
      },
    });
  const jobReview = (object: KubeObject) =>
    review({
      kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
      resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
      operation: "CREATE",
      namespace: NS,
      object,
    });
  const cases: Array<{
    name: string;
    path: "/validate/pods" | "/validate/jobs" | "/mutate/pods";
    body: ReturnType<typeof review>;
    allowed: boolean;
    reads: number;
    field?: string;
    message?: RegExp;
    warning?: RegExp;
  }> = [
    {
      name: `a pod naming ${MAX_CLAIM_NAMES} claims → read, admitted`,
      path: "/validate/pods",
      body: podReview(podNaming("at-cap", names("claim", MAX_CLAIM_NAMES))),
      allowed: true,
      reads: MAX_CLAIM_NAMES,
    },
    {
      name: "a pod with 300 entries naming one claim → one read, admitted (distinct names count)",
      path: "/validate/pods",
      body: podReview(
        podNaming(
          "one-shared",
          Array.from({ length: 300 }, () => "shared"),
        ),
      ),
      allowed: true,
      reads: 1,
    },
    {
      name: `a pod naming ${MAX_CLAIM_NAMES + 1} claims → refused at spec.resourceClaims, nothing read`,
      path: "/validate/pods",
      body: podReview(podNaming("over-cap", names("claim", MAX_CLAIM_NAMES + 1))),
      allowed: false,
      reads: 0,
      field: "spec.resourceClaims",
      message: new RegExp(`${MAX_CLAIM_NAMES + 1} distinct ResourceClaims and ResourceClaimTemplates named, over the ${MAX_CLAIM_NAMES}.*name at most`),
    },
    {
      name: "a pod naming 20,000 claims → refused, nothing read",
      path: "/validate/pods",
      body: podReview(podNaming("wide", names("claim", 20_000))),
      allowed: false,
      reads: 0,
      field: "spec.resourceClaims",
      message: /20000 distinct/,
    },
    {
      name: "a PyTorchJob whose Master and Worker name 70 each → refused at the Worker template, where the bound was passed",
      path: "/validate/jobs",
      body: jobReview(pytorchJob(70, 70)),
      allowed: false,
      reads: 0,
      field: "spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims",
      message: /140 distinct/,
    },
    {
      name: "a queued batch Job naming 129 claims → refused at spec.template.spec.resourceClaims, nothing read",
      path: "/validate/jobs",
      body: review({
        kind: { group: "batch", version: "v1", kind: "Job" },
        resource: { group: "batch", version: "v1", resource: "jobs" },
        operation: "CREATE",
        namespace: NS,
        object: deepFreeze({
          apiVersion: "batch/v1",
          kind: "Job",
          metadata: { name: "batch", namespace: NS, labels: { "kueue.x-k8s.io/queue-name": "q" } },
          spec: {
            template: {
              spec: {
                resourceClaims: names("claim", MAX_CLAIM_NAMES + 1).map((c, i) => ({ name: `c${i}`, resourceClaimName: c })),
                containers: [{ name: "c", image: "x", resources: { claims: [{ name: "c0" }], limits: { "nvidia.com/gpu": 1 } } }],
              },
            },
          },
        }),
      }),
      allowed: false,
      reads: 0,
      field: "spec.template.spec.resourceClaims",
      message: /129 distinct/,
    },
    {
      name: "a pod naming 20,000 claims through /mutate/pods → admitted unchanged with a warning, nothing read",
      path: "/mutate/pods",
      body: podReview(podNaming("wide-m", names("claim", 20_000))),
      allowed: true,
      reads: 0,
      warning: new RegExp(`claims not read: 20000 names, over the ${MAX_CLAIM_NAMES}`),
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const api = fifoApiserver(64);
      const hooks = createWebhooks({ policy: uncapped, log: capturingLogger().log, jobs: api.reader, now: () => new Date() });
      const response = (await hooks[tc.path]!.admit(tc.body)).review.response!;
      assert.equal(response.allowed, tc.allowed, JSON.stringify(response.status)?.slice(0, 500));
      assert.equal(api.stats.served, tc.reads);
      if (tc.field) {
        const causes = (response.status?.details?.causes ?? []) as Causes;
        assert.equal(causes.length, 1, JSON.stringify(causes).slice(0, 500));
        assert.equal(causes[0]!.field, tc.field);
        assert.match(causes[0]!.message ?? "", tc.message!);
      }
      if (tc.warning) assert.match((response.warnings ?? []).join("\n"), tc.warning);
    });
});

describe("reads per review bounded, reviews served in turn", () => {
  it("one pod naming 100 claims: at most 8 of its reads in flight", async () => {
    const api = fifoApiserver(2);
    const hooks = createWebhooks({ policy: uncapped, log: capturingLogger().log, jobs: api.reader, now: () => new Date() });
    const response = (await hooks["/validate/pods"]!.admit(podReview(podNaming("p", names("claim", 100))))).review.response!;
    assert.equal(response.allowed, true);
    assert.equal(api.stats.served, 100);
    assert.ok(api.stats.maxInFlight <= 8, `${api.stats.maxInFlight} in flight`);
  });

  it("50 pods of 128 claims each, then a pod of 1 claim: it is served within the first ~40 reads, at most 32 in flight", async () => {
    const api = fifoApiserver(4);
    const hooks = createWebhooks({ policy: uncapped, log: capturingLogger().log, jobs: api.reader, now: () => new Date() });
    const validate = hooks["/validate/pods"]!;
    const big = Array.from({ length: 50 }, (_, i) => validate.admit(podReview(podNaming(`big-${i}`, names(`big-${i}`, 128)))));
    const small = await validate.admit(podReview(podNaming("small", ["small-0"])));
    assert.equal(small.review.response!.allowed, true);
    const at = api.stats.servedAt.get("small-0")!;
    assert.ok(at <= 40, `the small review's read was the ${at}th of ${api.stats.served} served`);
    await Promise.all(big);
    assert.equal(api.stats.served, 50 * 128 + 1);
    assert.ok(api.stats.maxInFlight <= 32, `${api.stats.maxInFlight} in flight`);
  });

  it("a review of 20,000 names (past any cap, read through the pool) and one of 1 started after: the small one after O(1) reads", async () => {
    const api = fifoApiserver(8);
    const pool = readPool(api.reader);
    const wide = [{ resourceClaims: names("wide", 20_000).map((c, i) => ({ name: `c${i}`, resourceClaimName: c })), containers: [] }];
    const one = [{ resourceClaims: [{ name: "c0", resourceClaimName: "one" }], containers: [] }];
    const reviews = [pool.review(60_000), pool.review(60_000)];
    const bigRead = readClaims(wide, NS, reviews[0]!, 60_000, { max: Infinity });
    const smallRead = await readClaims(one, NS, reviews[1]!, 60_000);
    assert.equal(smallRead.failures.length, 0);
    const at = api.stats.servedAt.get("one")!;
    assert.ok(at <= 16, `served ${at}th`);
    // Past its own queue's 512 waiting, the wide review's reads are shed: unknown (known.unreadable), not absent.
    const done = await bigRead;
    assert.equal(done.known.claims.size + done.failures.length, 20_000);
    assert.equal(done.known.claims.size, 8 + 512);
    assert.equal(done.known.unreadable?.claims.size, 20_000 - 520);
    assert.match(done.failures[0]!, /not read, the review already had 512 reads waiting/);
    // The wide review's 8, and the small one's.
    assert.ok(api.stats.maxInFlight <= 9, `${api.stats.maxInFlight} in flight`);
    for (const r of reviews) r.release(); // as the handler does once it answers: their 60 s timers end
  });
});

describe("a read the webhook's own backlog did not make is unknown, not zero", () => {
  it("pool: a read waiting past its review's time, or past a full queue, is rejected with ReadShed", async () => {
    const api = fifoApiserver(1, true);
    const pool = readPool(api.reader, { global: 1, perReview: 1, perReviewQueued: 2, maxQueued: 3 });
    const kind = { kind: "ResourceClaim", group: "resource.k8s.io", version: "v1", plural: "resourceclaims" };
    const a = pool.review(30);
    const first = a.get(kind, NS, "x");
    const waited = a.get(kind, NS, "y");
    const queuedToo = a.get(kind, NS, "z");
    const full = a.get(kind, NS, "full");
    const b = pool.review(30);
    const third = b.get(kind, NS, "w");
    const pastPool = b.get(kind, NS, "v");
    const [w, q, f, t, p] = await Promise.allSettled([waited, queuedToo, full, third, pastPool]);
    const why = (r: PromiseSettledResult<unknown> | undefined): string =>
      r?.status === "rejected" && r.reason instanceof ReadShed ? r.reason.message : `not shed: ${r?.status}`;
    assert.match(why(f), /already had 2 reads waiting/);
    assert.match(why(p), /the webhook had 3 reads waiting \(its own backlog\)/);
    assert.match(why(w), /not read within the review's 30 ms/);
    assert.match(why(q), /not read within the review's 30 ms/);
    assert.match(why(t), /not read within the review's 30 ms/);
    void first; // never answered: the stalled apiserver
  });

  it("pool: reviews naming many claims fill the backlog, and another review's job lookup is still read (not shed)", async () => {
    const api = fifoApiserver(1, true);
    const pool = readPool(api.reader, { global: 1, perReview: 2, perReviewQueued: 4, maxQueued: 8 });
    const kind = { kind: "ResourceClaim", group: "resource.k8s.io", version: "v1", plural: "resourceclaims" };
    const heavy = [pool.review(500), pool.review(500), pool.review(500)];
    const flood = heavy.flatMap((r, i) => Array.from({ length: 5 }, (_, j) => r.get(kind, NS, `c-${i}-${j}`)));
    for (const p of flood) p.catch(() => undefined);
    assert.ok(pool.load().queued >= 8, `backlog ${pool.load().queued}`);
    const light = pool.review(500);
    const lookup = light.get({ kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs" }, NS, "llm");
    const more = heavy[0]!.get(kind, NS, "one-more");
    const [l, m] = await Promise.allSettled([Promise.race([lookup, new Promise((r) => setTimeout(() => r("queued"), 20))]), more]);
    assert.equal(m.status, "rejected", "the heavy review's next read is shed");
    assert.ok(m.status === "rejected" && m.reason instanceof ReadShed);
    assert.notEqual(l.status, "rejected", "the light review's read waits its turn instead");
    for (const r of [...heavy, light]) r.release();
  });

  it("a pod capped at 8 GPUs whose claim read is shed behind a stalled backlog → refused (gpu-unknown) at spec.resourceClaims[0]", async () => {
    const api = fifoApiserver(1, true);
    const hooks = createWebhooks({ policy: capped, log: capturingLogger().log, jobs: api.reader, now: () => new Date() });
    const validate = hooks["/validate/pods"]!;
    // Four reviews fill the pool's 32 slots; their reads never come back.
    for (let i = 0; i < 4; i++) void validate.admit(podReview(podNaming(`hog-${i}`, names(`hog-${i}`, 64))));
    const response = (await validate.admit(podReview(podNaming("victim", ["eight-gpus"])))).review.response!;
    assert.equal(response.allowed, false);
    const causes = (response.status?.details?.causes ?? []) as Causes;
    assert.equal(causes[0]!.field, "spec.resourceClaims[0]");
    assert.match(causes[0]!.message ?? "", /could not be read \(.*(not read within|timed out).*\)/);
  });
});

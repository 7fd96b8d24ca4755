/**
 * The resident reconciler's verdicts as what it writes (src/explain/blocked.ts, issue 49): which Event a job gets
 * given what the previous ticks saw (a table), the per-tick bound, the gauge of jobs per reason (running and
 * finished left out, namespaces capped), the GPU-minutes blocked, and the GPUs a job asks.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  BLOCKED_EVENT,
  RUNNING_EVENT,
  accrueGpuMinutes,
  blockedGauge,
  decideEvent,
  eventObject,
  jobGpus,
  planTick,
  type BlockedBounds,
  type JobTrack,
  type TickJob,
} from "../../../src/explain/blocked.js";
import type { Reason, Verdict } from "../../../src/explain/types.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { job as trainingJob, pod } from "../../fixtures/explain.js";

const policy = defaultPolicy();
const pytorch = policy.jobKinds.find((k) => k.kind === "PyTorchJob")!;
const B: BlockedBounds = { settleMs: 10_000, perJobMs: 60_000, perTick: 20, refreshMs: 3_000_000, maxAccrualMs: 60_000 };
const T0 = 1_000_000_000;

const verdict = (reason: Reason): Verdict => ({
  job: "PyTorchJob/llm",
  reason,
  summary: `summary of ${reason}`,
  evidence: [{ object: "Pod team-a/llm-worker-0", text: `evidence of ${reason}` }],
  next: `next step for ${reason}`,
  also: [],
});

const tickJob = (reason: Reason, over: Partial<TickJob> = {}): TickJob => ({
  uid: "uid-llm",
  namespace: "team-a",
  name: "llm",
  kind: pytorch,
  verdict: verdict(reason),
  gpus: new Map([["nvidia.com/gpu", 16]]),
  ...over,
});

describe("blocked: which Event a job's verdict gets", () => {
  const cases: Array<{ name: string; prev?: JobTrack; reason: Reason; at: number; want?: { type: string; reason: string; message: RegExp } }> = [
    { name: "a blocked reason seen for the first time waits for settleMs", reason: "untolerated-taint", at: T0 },
    {
      name: "... and once it has held settleMs, a Warning naming the reason, the next step and explain",
      prev: { reason: "untolerated-taint", since: T0 },
      reason: "untolerated-taint",
      at: T0 + 10_000,
      want: {
        type: "Warning",
        reason: BLOCKED_EVENT,
        message:
          /^untolerated-taint: summary of untolerated-taint \(Pod team-a\/llm-worker-0: evidence.*\)\. Next: next step for untolerated-taint\. Evidence: quartermaster explain pytorchjob\/llm -n team-a$/,
      },
    },
    {
      name: "the same reason, already said: nothing",
      prev: { reason: "untolerated-taint", since: T0, announced: "untolerated-taint", announcedAt: T0 + 10_000 },
      reason: "untolerated-taint",
      at: T0 + 600_000,
    },
    {
      name: "blocked, pending a moment, blocked for the reason said: nothing",
      prev: { reason: "pending", since: T0 + 500_000, announced: "no-gpu-shape", announcedAt: T0 },
      reason: "no-gpu-shape",
      at: T0 + 700_000,
    },
    {
      name: "the same reason after refreshMs: said again (the apiserver dropped the last one)",
      prev: { reason: "untolerated-taint", since: T0, announced: "untolerated-taint", announcedAt: T0 },
      reason: "untolerated-taint",
      at: T0 + 3_000_000,
      want: { type: "Warning", reason: BLOCKED_EVENT, message: /^untolerated-taint:/ },
    },
    {
      name: "a new reason within perJobMs of the last Event waits",
      prev: { reason: "no-gpu-shape", since: T0 - 60_000, announced: "untolerated-taint", announcedAt: T0 - 30_000 },
      reason: "no-gpu-shape",
      at: T0,
    },
    {
      name: "a new reason past perJobMs and settled: its Warning",
      prev: { reason: "no-gpu-shape", since: T0 - 60_000, announced: "untolerated-taint", announcedAt: T0 - 60_000 },
      reason: "no-gpu-shape",
      at: T0,
      want: { type: "Warning", reason: BLOCKED_EVENT, message: /^no-gpu-shape: .*Next: next step for no-gpu-shape/ },
    },
    { name: "pending (no cause found) gets no Warning", prev: { reason: "pending", since: T0 - 600_000 }, reason: "pending", at: T0 },
    {
      name: "running after a Warning: the Normal Event, naming what it was",
      prev: { reason: "untolerated-taint", since: T0 - 120_000, announced: "untolerated-taint", announcedAt: T0 - 90_000 },
      reason: "running",
      at: T0,
      want: { type: "Normal", reason: RUNNING_EVENT, message: /^summary of running; blocked before \(untolerated-taint, said 1m30s ago\)$/ },
    },
    { name: "running without a Warning before: nothing", prev: { reason: "pending", since: T0 - 60_000 }, reason: "running", at: T0 },
    {
      name: "running, its Normal Event written: nothing more",
      prev: { reason: "running", since: T0 - 120_000, announced: "running", announcedAt: T0 - 90_000 },
      reason: "running",
      at: T0,
    },
    {
      name: "finished after a Warning: nothing",
      prev: { reason: "untolerated-taint", since: T0 - 120_000, announced: "untolerated-taint", announcedAt: T0 - 90_000 },
      reason: "finished",
      at: T0,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decideEvent(c.prev, tickJob(c.reason), c.at, B);
      assert.equal(d.track.reason, c.reason);
      if (!c.want) return assert.equal(d.announce, undefined, JSON.stringify(d.announce));
      assert.ok(d.announce, "an Event");
      assert.equal(d.announce.event.type, c.want.type);
      assert.equal(d.announce.event.reason, c.want.reason);
      assert.match(d.announce.event.message, c.want.message);
      assert.equal(d.announce.track.announced, c.reason);
      assert.equal(d.announce.track.announcedAt, c.at);
      // Without the Event written, the track keeps what was said before.
      assert.equal(d.track.announced, c.prev?.announced);
    });
  }

  it("keeps since while the reason holds and restarts it when it changes", () => {
    assert.equal(decideEvent({ reason: "no-gpu-shape", since: T0 }, tickJob("no-gpu-shape"), T0 + 5000, B).track.since, T0);
    assert.equal(decideEvent({ reason: "no-gpu-shape", since: T0 }, tickJob("untolerated-taint"), T0 + 5000, B).track.since, T0 + 5000);
  });

  it("the Event is a core/v1 Event on the job, from the reconciler, at most 1024 characters", () => {
    const long = tickJob("no-gpu-shape", { verdict: { ...verdict("no-gpu-shape"), next: "x".repeat(3000) } });
    const d = decideEvent({ reason: "no-gpu-shape", since: T0 }, long, T0 + 10_000, B);
    const e = eventObject(long, d.announce!.event, new Date(T0)) as Record<string, any>;
    assert.deepEqual(e.involvedObject, { apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "llm", namespace: "team-a", uid: "uid-llm" });
    assert.equal(e.metadata.namespace, "team-a");
    assert.equal(e.type, "Warning");
    assert.equal(e.source.component, "quartermaster-reconciler");
    assert.equal(e.message.length, 1024);
  });
});

describe("blocked: one tick", () => {
  const many = (n: number, reason: Reason): TickJob[] =>
    Array.from({ length: n }, (_, i) => tickJob(reason, { uid: `uid-${i}`, name: `job-${i}`, namespace: i % 2 ? "team-a" : "team-b" }));

  it("writes at most perTick Events a tick; the rest on the next tick, none twice", () => {
    const jobs = many(30, "untolerated-taint");
    const first = planTick({ previous: new Map(), jobs, nowMs: T0, lastMs: undefined, bounds: B });
    assert.equal(first.announce.length, 0, "nothing settled yet");
    const second = planTick({ previous: first.tracks, jobs, nowMs: T0 + 10_000, lastMs: T0, bounds: B });
    assert.equal(second.announce.length, 20);
    assert.equal(second.deferred, 10);
    for (const a of second.announce) second.tracks.set(a.job.uid, a.track);
    const third = planTick({ previous: second.tracks, jobs, nowMs: T0 + 20_000, lastMs: T0 + 10_000, bounds: B });
    assert.equal(third.announce.length, 10);
    assert.deepEqual(
      third.announce.map((a) => a.job.uid).sort(),
      jobs
        .slice(20)
        .map((j) => j.uid)
        .sort(),
    );
  });

  it("an Event the writer dropped (its track not updated) is tried again next tick", () => {
    const jobs = [tickJob("no-gpu-shape")];
    const previous = new Map([["uid-llm", { reason: "no-gpu-shape" as Reason, since: T0 }]]);
    const t1 = planTick({ previous, jobs, nowMs: T0 + 10_000, lastMs: T0, bounds: B });
    assert.equal(t1.announce.length, 1);
    const t2 = planTick({ previous: t1.tracks, jobs, nowMs: T0 + 20_000, lastMs: T0 + 10_000, bounds: B });
    assert.equal(t2.announce.length, 1);
  });

  it("forgets a job gone since the last tick", () => {
    const previous = new Map([["gone", { reason: "queued" as Reason, since: T0 }]]);
    const t = planTick({ previous, jobs: [tickJob("running")], nowMs: T0, lastMs: undefined, bounds: B });
    assert.deepEqual([...t.tracks.keys()], ["uid-llm"]);
  });
});

describe("blocked: quartermaster_jobs_blocked", () => {
  it("counts the jobs held back per namespace, kind and reason; running and finished not, pending yes", () => {
    const rows = blockedGauge([
      tickJob("untolerated-taint"),
      tickJob("untolerated-taint", { uid: "2" }),
      tickJob("no-gpu-shape", { uid: "3", namespace: "team-b" }),
      tickJob("pending", { uid: "4" }),
      tickJob("running", { uid: "5" }),
      tickJob("finished", { uid: "6" }),
    ]);
    const text = rows.map((r) => `${r.namespace}/${r.kind}/${r.reason}=${r.jobs}`).sort();
    assert.deepEqual(text, ["team-a/PyTorchJob/pending=1", "team-a/PyTorchJob/untolerated-taint=2", "team-b/PyTorchJob/no-gpu-shape=1"]);
  });

  it("names the namespaces with most blocked jobs, at most cap, the rest as other", () => {
    const jobs = [
      tickJob("queued", { uid: "1", namespace: "a" }),
      tickJob("queued", { uid: "2", namespace: "b" }),
      tickJob("queued", { uid: "3", namespace: "b" }),
      tickJob("queued", { uid: "4", namespace: "c" }),
      tickJob("running", { uid: "5", namespace: "d" }),
    ];
    const text = blockedGauge(jobs, 2)
      .map((r) => `${r.namespace}=${r.jobs}`)
      .sort();
    assert.deepEqual(text, ["a=1", "b=2", "other=1"]);
  });
});

describe("blocked: GPU-minutes", () => {
  const prev = new Map<string, JobTrack>([
    ["uid-llm", { reason: "untolerated-taint", since: T0 }],
    ["uid-run", { reason: "running", since: T0 }],
  ]);
  const jobs = [tickJob("running"), tickJob("running", { uid: "uid-run" }), tickJob("queued", { uid: "uid-new" })];

  it("charges the GPUs a job asks × the minutes since the last tick to the reason it had then", () => {
    assert.deepEqual(accrueGpuMinutes(prev, jobs, T0, T0 + 30_000, 60_000), [{ reason: "untolerated-taint", resource: "nvidia.com/gpu", minutes: 8 }]);
  });
  it("at most maxAccrualMs a tick, nothing on the first tick", () => {
    assert.deepEqual(accrueGpuMinutes(prev, jobs, T0, T0 + 3_600_000, 60_000), [{ reason: "untolerated-taint", resource: "nvidia.com/gpu", minutes: 16 }]);
    assert.deepEqual(accrueGpuMinutes(prev, jobs, undefined, T0 + 30_000, 60_000), []);
  });
});

describe("blocked: the GPUs a job asks", () => {
  it("a training job: replicas × its template's GPUs, whatever its pods", () => {
    assert.deepEqual([...jobGpus(trainingJob({ replicas: 3 }), pytorch, [], policy.gpu)], [["nvidia.com/gpu", 24]]);
  });
  it("a kind without templates read here: what its live pods ask", () => {
    const pods = [pod({ name: "a", gpus: 4 }), pod({ name: "b", gpus: 4 }), pod({ name: "c", gpus: 4, phase: "Succeeded" })];
    assert.deepEqual([...jobGpus(trainingJob(), undefined, pods, policy.gpu)], [["nvidia.com/gpu", 8]]);
  });
});

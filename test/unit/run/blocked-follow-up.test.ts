/**
 * The reads for the jobs the reconciler's caches cannot explain (src/run/blocked-follow-up.ts, issue 49): bounded
 * per tick and fair, the controller's Deployment read once per kind, a failed or late read left unread (never
 * "no Events"), and the verdict over the cached job with what was read: controller-error from the operator's
 * Events, no-controller from its Deployment, as `quartermaster explain` judges from the API.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { cachedEvidence, nodeEntriesFromCaches } from "../../../src/explain/cached.js";
import { knownKinds } from "../../../src/explain/kinds.js";
import { explainJob } from "../../../src/explain/verdict.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { followUp, type TickEntry } from "../../../src/run/blocked.js";
import type { TickJob } from "../../../src/explain/blocked.js";
import { FollowUps, type FollowUp } from "../../../src/run/blocked-follow-up.js";
import { NOW, event, job, node } from "../../fixtures/explain.js";

const policy = defaultPolicy();
const known = knownKinds(policy);
const pytorch = known.find((k) => k.kind === "PyTorchJob")!;
const own = known.find((k) => k.deployment === "quartermaster-reconciler");
const settings = { gpu: policy.gpu, acceleratorLabel: policy.accelerator.nodeLabel, graceSeconds: 120 };

/** A fake API: answers per path prefix, counting the GETs. */
function api(answers: { events?: unknown; deployments?: unknown } = {}) {
  const calls: string[] = [];
  const get = async (path: string): Promise<unknown> => {
    calls.push(path);
    const a = path.includes("/events") ? answers.events : path.includes("/deployments") ? answers.deployments : undefined;
    if (a instanceof Error) throw a;
    if (a === "never") return new Promise(() => undefined);
    return a;
  };
  return { get, calls };
}

const deployment = (ready: number) => ({
  items: [{ metadata: { name: "training-operator", namespace: "kubeflow" }, spec: { replicas: 1 }, status: { readyReplicas: ready } }],
});
const jobsOf = (n: number) => Array.from({ length: n }, (_, i) => ({ uid: `u${i}`, namespace: "team-a", kind: pytorch }));

describe("FollowUps", () => {
  it("reads at most perTick jobs a tick, those read longest ago first, each at most every everyMs", async () => {
    let now = 0;
    const a = api({ events: { items: [] }, deployments: deployment(1) });
    const f = new FollowUps({ get: a.get, now: () => now, perTick: 3, everyMs: 9000 });
    assert.deepEqual(await f.refresh(jobsOf(5)), ["u0", "u1", "u2"]);
    now = 1000;
    assert.deepEqual(await f.refresh(jobsOf(5)), ["u3", "u4"], "the ones not read yet, then nothing read within everyMs");
    now = 10_000;
    assert.deepEqual(await f.refresh(jobsOf(5)), ["u0", "u1", "u2"]);
    assert.equal(a.calls.filter((c) => c.includes("/events")).length, 8);
    assert.match(
      a.calls.find((c) => c.includes("/events"))!,
      /namespaces\/team-a\/events\?fieldSelector=involvedObject\.uid%3Du0%2Ctype%3DWarning&limit=100/,
    );
  });

  it("reads the kind's Deployment once for all its jobs within controllerMs", async () => {
    const a = api({ events: { items: [] }, deployments: deployment(0) });
    const f = new FollowUps({ get: a.get, now: () => 0, perTick: 8 });
    await f.refresh(jobsOf(6));
    assert.equal(a.calls.filter((c) => c.includes("/deployments")).length, 1);
    assert.deepEqual(f.get("u5")!.controller, {
      name: "training-operator",
      state: "not-running",
      detail: "Deployment kubeflow/training-operator: 0 of 1 ready",
    });
  });

  it("the kinds Quartermaster runs: this process is their controller, nothing read", async () => {
    assert.ok(own, "the policy has a kind of Quartermaster's own job controller");
    const a = api({ events: { items: [] } });
    const f = new FollowUps({ get: a.get, now: () => 0 });
    await f.refresh([{ uid: "c", namespace: "team-a", kind: own }]);
    assert.equal(f.get("c")!.controller!.state, "running");
    assert.equal(a.calls.filter((c) => c.includes("/deployments")).length, 0);
  });

  it("a read that fails is left unread, never an empty list or an absent controller", async () => {
    const f = new FollowUps({ get: api({ events: new Error("forbidden"), deployments: new Error("forbidden") }).get, now: () => 0 });
    await f.refresh(jobsOf(1));
    assert.deepEqual(f.get("u0"), {});
  });

  it("a read that does not answer within the deadline: the tick goes on, nothing recorded", async () => {
    const f = new FollowUps({ get: api({ events: "never", deployments: "never" }).get, now: () => 0, deadlineMs: 50 });
    const started = Date.now();
    await f.refresh(jobsOf(2));
    assert.ok(Date.now() - started < 2000);
    assert.deepEqual(f.get("u0"), {});
  });

  it("follows a LIST's continue for the job's Warnings, at most 4 pages: the newest (last) one is read", async () => {
    for (const pages of [2, 6]) {
      const asked: string[] = [];
      const get = async (path: string): Promise<unknown> => {
        if (path.includes("/deployments")) return deployment(1);
        asked.push(path);
        const n = asked.length;
        return {
          metadata: n < pages ? { continue: `page-${n + 1}` } : {},
          items: [event(n === pages ? "FailedCreatePod" : "BackOff", `warning of page ${n}`)],
        };
      };
      const f = new FollowUps({ get, now: () => 0, perTick: 8 });
      await f.refresh(jobsOf(1));
      const read = f.get("u0")!.events!;
      assert.equal(asked.length, Math.min(pages, 4), `${pages} pages: ${asked.length} read`);
      assert.match(asked[1]!, /&continue=page-2$/);
      assert.equal(read.length, Math.min(pages, 4));
      if (pages === 2) assert.equal((read.at(-1) as { reason?: string }).reason, "FailedCreatePod", "the last page's Warning is read");
    }
  });

  it("forgets a job no longer wanting reads", async () => {
    const f = new FollowUps({ get: api({ events: { items: [] }, deployments: deployment(1) }).get, now: () => 0 });
    await f.refresh(jobsOf(2));
    await f.refresh(jobsOf(1));
    assert.equal(f.get("u1"), undefined);
    assert.ok(f.get("u0"));
  });
});

describe("the cached verdict with what was read", () => {
  const nodes = [node("gpu-a")];
  const ledger = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, [], policy.gpu) };
  const verdict = (read?: FollowUp, theJob: KubeObject = job()) =>
    explainJob(cachedEvidence({ kind: pytorch, job: theJob, pods: [], ...(read ? { read } : {}) }, nodes, ledger, settings), NOW);
  const CASES: Array<{ name: string; read?: FollowUp; reason: string; summary?: RegExp }> = [
    { name: "nothing read: a job with no pods and a status is pending", reason: "pending" },
    {
      name: "the operator's FailedCreate on the job → controller-error",
      read: {
        events: [event("FailedCreatePod", 'Error creating: pods "llm-worker-0" is forbidden: exceeded quota: no-pods')],
        controller: { name: "training-operator", state: "running" },
      },
      reason: "controller-error",
      summary: /FailedCreatePod: Error creating/,
    },
    {
      name: "the operator's Deployment 0 of 1 ready → no-controller",
      read: { events: [], controller: { name: "training-operator", state: "not-running", detail: "Deployment kubeflow/training-operator: 0 of 1 ready" } },
      reason: "no-controller",
    },
    {
      name: "the Deployment found ready and no warning → still pending",
      read: { events: [event("SuccessfulCreatePod", "Created pod", { type: "Normal" })], controller: { name: "training-operator", state: "running" } },
      reason: "pending",
    },
  ];
  for (const c of CASES)
    it(c.name, () => {
      const v = verdict(c.read);
      assert.equal(v.reason, c.reason, JSON.stringify(v));
      if (c.summary) assert.match(v.summary, c.summary);
    });
});

describe("followUp: which jobs keep their reads", () => {
  it("a read that turns the verdict into one wanting no read (refused) keeps it: no flap back to pending", async () => {
    let now = 0;
    const a = api({ events: { items: [event("KueueAdmissionRefused", "refused")] }, deployments: deployment(1) });
    const f = new FollowUps({ get: a.get, now: () => now, perTick: 8, everyMs: 9000 });
    const pending = { reason: "pending", summary: "cached" } as TickJob["verdict"];
    const refused = { reason: "refused", summary: "read" } as TickJob["verdict"];
    /** The tick's entry as tickJobs makes it: the verdict with the job's read so far, else the caches'. */
    const entry = (): TickEntry => {
      const judge = (read?: FollowUp): TickJob["verdict"] => (read ? refused : pending);
      const job = { uid: "u0", namespace: "team-a", name: "llm", verdict: judge(f.get("u0")) } as TickJob;
      return { job, known: pytorch, cached: pending, judge };
    };
    const reasons: string[] = [];
    for (const at of [0, 1000, 2000, 12_000]) {
      now = at;
      const e = entry();
      await followUp([e], f);
      reasons.push(e.job.verdict.reason);
    }
    assert.deepEqual(reasons, ["refused", "refused", "refused", "refused"]);
  });

  it("a job the caches settle is judged by them alone, its read dropped", async () => {
    const a = api({ events: { items: [] }, deployments: deployment(1) });
    const f = new FollowUps({ get: a.get, now: () => 0, perTick: 8 });
    await f.refresh(jobsOf(1));
    const running = { reason: "running", summary: "cached" } as TickJob["verdict"];
    const e: TickEntry = {
      job: { uid: "u0", namespace: "team-a", name: "llm", verdict: { reason: "pending", summary: "old read" } } as TickJob,
      known: pytorch,
      cached: running,
      judge: () => ({ reason: "pending", summary: "with the old read" }) as TickJob["verdict"],
    };
    await followUp([e], f);
    assert.equal(e.job.verdict.reason, "running");
    assert.equal(f.get("u0"), undefined);
  });
});

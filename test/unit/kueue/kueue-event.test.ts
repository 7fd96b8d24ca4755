/**
 * Issue 33, never strand an admitted job: when `/validate/jobs` refuses Kueue's admission UPDATE, a Warning Event
 * on the job says why (`KueueAdmissionRefused`, the refusal's text), written in the background through
 * `deps.events`: exactly one per refusal, none for an admitted UPDATE or a dry run, and a failing writer never
 * changes the answer. Then the writer itself (src/kube/events.ts): bounded, deduplicated, failures logged
 * rate-limited.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KUEUE_QUEUE_NAME } from "../../../src/kueue/admission.js";
import type { KubeObject } from "../../../src/core/kube.js";
import type { EventWriter } from "../../../src/admission/events.js";
import { backgroundEventWriter } from "../../../src/kube/events.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { KUEUE_ADMISSION_REFUSED, WEBHOOK_EVENT_SOURCE } from "../../../src/admission/events.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

type Obj = Record<string, unknown>;
const PRODUCT = "nvidia.com/gpu.product";

/** A queued, suspended PyTorchJob (Master and one Worker, 8 GPUs each). */
function queued(): Obj {
  const template = (): Obj => ({
    spec: {
      containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/gpu": "8" }, requests: { "nvidia.com/gpu": "8" } } }],
      tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "bert", namespace: "team-a", uid: "uid-bert", resourceVersion: "10", labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } },
    spec: {
      runPolicy: { suspend: true },
      pytorchReplicaSpecs: { Master: { replicas: 1, template: template() }, Worker: { replicas: 1, template: template() } },
    },
  };
}

/** `job` as Kueue's admission leaves it: unsuspended, the flavor's node labels in every template's nodeSelector. */
function admitted(job: Obj, product: string): Obj {
  const j = structuredClone(job) as { metadata: Obj; spec: { runPolicy: Obj; pytorchReplicaSpecs: Record<string, { template: { spec: Obj } }> } };
  j.spec.runPolicy.suspend = false;
  for (const r of Object.values(j.spec.pytorchReplicaSpecs)) r.template.spec.nodeSelector = { [PRODUCT]: product };
  j.metadata.resourceVersion = "11";
  return j as unknown as Obj;
}

/** A writer recording what it is given; `fail`: it throws instead. */
function fakeWriter(fail = false): EventWriter & { written: KubeObject[] } {
  const written: KubeObject[] = [];
  return {
    written,
    write(event) {
      if (fail) throw new Error("apiserver down");
      written.push(event);
    },
  };
}

const allowA100 = { limits: { allowedAccelerators: ["A100-SXM4-80GB"] } };

/** The refusal's Event is written after the answer, once the job has been read fresh: let that happen. */
const settled = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

async function update(now: Obj, events: EventWriter, o: { dryRun?: boolean; old?: Obj; stored?: Obj[] } = {}) {
  const kind = kindOf("PyTorchJob");
  const { log, lines } = capturingLogger();
  const hooks = createWebhooks({
    policy: checkPolicy(allowA100, "kueue"),
    log,
    // The job as the cluster has it (a review's object is only what its caller says).
    jobs: fakeJobReader((o.stored ?? [o.old ?? queued()]) as KubeObject[]),
    events,
    now: () => new Date("2026-11-29T16:00:00.123Z"),
  });
  const res = await hooks["/validate/jobs"]!.admit(
    review({
      kind: { group: kind.group, version: kind.version, kind: kind.kind },
      resource: { group: kind.group, version: kind.version, resource: kind.plural },
      operation: "UPDATE",
      namespace: "team-a",
      name: "bert",
      object: deepFreeze(structuredClone(now)),
      oldObject: deepFreeze(structuredClone(o.old ?? queued())),
      dryRun: o.dryRun ?? false,
    }),
  );
  await settled();
  return { response: res.review.response!, lines };
}

describe("/validate/jobs: an Event on the job when Kueue's admission is refused", () => {
  it("refused (the flavor's node labels select H100, not allowed) → exactly one Warning Event with the refusal's text", async () => {
    const events = fakeWriter();
    const { response } = await update(admitted(queued(), "H100-SXM5-80GB"), events);
    assert.equal(response.allowed, false);
    assert.equal(events.written.length, 1);
    const e = events.written[0]!;
    assert.deepEqual(
      { ...e, message: undefined },
      {
        apiVersion: "v1",
        kind: "Event",
        metadata: { generateName: "bert.", namespace: "team-a" },
        involvedObject: { apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "bert", namespace: "team-a", uid: "uid-bert" },
        reason: KUEUE_ADMISSION_REFUSED,
        message: undefined,
        type: "Warning",
        source: { component: WEBHOOK_EVENT_SOURCE },
        firstTimestamp: "2026-11-29T16:00:00Z",
        lastTimestamp: "2026-11-29T16:00:00Z",
        count: 1,
      },
    );
    assert.match(
      String(e.message),
      /^Quartermaster refused Kueue's admission of the job: spec\.pytorchReplicaSpecs\.Master\.template\.spec\.nodeSelector\[nvidia\.com\/gpu\.product\]: the node labels Kueue wrote \(nvidia\.com\/gpu\.product=H100-SXM5-80GB\) at admission from queue gpu-queue: accelerator H100-SXM5-80GB is not allowed/,
    );
    // The same text as the refusal.
    for (const cause of response.status?.details?.causes ?? []) assert.ok(String(e.message).includes(`${cause.field}: ${cause.message}`), cause.field);
  });

  it("admitted (an allowed flavor) → no Event", async () => {
    const events = fakeWriter();
    const { response } = await update(admitted(queued(), "A100-SXM4-80GB"), events);
    assert.equal(response.allowed, true);
    assert.deepEqual(events.written, []);
  });

  it("a refused UPDATE that is not Kueue's admission → no Event", async () => {
    const events = fakeWriter();
    const now = admitted(queued(), "H100-SXM5-80GB");
    (now.metadata as Obj).labels = { [KUEUE_QUEUE_NAME]: "gpu-queue", edited: "yes" };
    const { response } = await update(now, events);
    assert.equal(response.allowed, false);
    assert.deepEqual(events.written, []);
  });

  it("a dry run → refused the same, no Event (sideEffects NoneOnDryRun)", async () => {
    const events = fakeWriter();
    const { response } = await update(admitted(queued(), "H100-SXM5-80GB"), events, { dryRun: true });
    assert.equal(response.allowed, false);
    assert.deepEqual(events.written, []);
  });

  // Issue 46, finding 5: an unauthenticated caller could have the webhook write an Event of its choosing into any
  // namespace. The Event is written only for an object the cluster has, with the review's uid.
  it("a review of a job the cluster does not have (spoofed) → refused the same, no Event", async () => {
    const events = fakeWriter();
    const { response, lines } = await update(admitted(queued(), "H100-SXM5-80GB"), events, { stored: [] });
    assert.equal(response.allowed, false);
    assert.deepEqual(events.written, []);
    assert.ok(lines.some((l) => /Event not written: PyTorchJob team-a\/bert not found/.test(JSON.stringify(l))));
  });

  it("a review whose uid is not the stored job's → no Event", async () => {
    const events = fakeWriter();
    const other = structuredClone(queued());
    (other.metadata as Obj).uid = "uid-someone-else";
    const { response } = await update(admitted(queued(), "H100-SXM5-80GB"), events, { stored: [other] });
    assert.equal(response.allowed, false);
    assert.deepEqual(events.written, []);
  });

  it("a writer that throws → the same answer, the failure logged", async () => {
    const ok = await update(admitted(queued(), "H100-SXM5-80GB"), fakeWriter());
    const failing = await update(admitted(queued(), "H100-SXM5-80GB"), fakeWriter(true));
    assert.deepEqual(failing.response, { ...ok.response, uid: failing.response.uid });
    assert.ok(failing.lines.some((l) => /Event not written/.test(JSON.stringify(l))));
  });
});

describe("backgroundEventWriter", () => {
  const event = (uid: string, message = "m"): KubeObject => ({
    kind: "Event",
    metadata: { namespace: "team-a" },
    involvedObject: { kind: "PyTorchJob", namespace: "team-a", name: uid, uid },
    reason: KUEUE_ADMISSION_REFUSED,
    message,
  });
  const settle = () => new Promise((r) => setTimeout(r, 10));

  it("posts in the background with the bound; the same Event within the window once; another message or job again", async () => {
    let t = 0;
    const posted: Array<[string, number]> = [];
    const w = backgroundEventWriter(() => Promise.resolve((ns, _e, timeoutMs) => (posted.push([ns, timeoutMs]), Promise.resolve({}))), {
      log: capturingLogger().log,
      timeoutMs: 1234,
      now: () => t,
    });
    w.write(event("a"));
    w.write(event("a"));
    w.write(event("a", "other"));
    w.write(event("b"));
    await settle();
    assert.deepEqual(posted, [
      ["team-a", 1234],
      ["team-a", 1234],
      ["team-a", 1234],
    ]);
    t = 60_000; // past the window: written again
    w.write(event("a"));
    await settle();
    assert.equal(posted.length, 4);
  });

  it("failures: never thrown; logged at once, then at most one line per interval with the count; a failed Event may be tried again", async () => {
    let t = 0;
    let calls = 0;
    const { log, lines } = capturingLogger();
    const w = backgroundEventWriter(() => Promise.resolve(() => (calls++, Promise.reject(new Error("HTTP 403: events is forbidden")))), {
      log,
      now: () => t,
      logEveryMs: 1000,
    });
    for (let i = 0; i < 5; i++) w.write(event(`j${i}`));
    await settle();
    w.write(event("j0"));
    await settle();
    assert.equal(calls, 6, "not deduplicated after a failure");
    const logged = () => lines.filter((l) => /Events not written/.test(JSON.stringify(l)));
    assert.equal(logged().length, 1);
    t = 1000;
    w.write(event("x"));
    await settle();
    assert.equal(logged().length, 2);
    assert.match(JSON.stringify(logged()[1]), /"failed":6/);
  });

  it("at most maxInFlight outstanding: more are dropped and counted", async () => {
    const pending: Array<() => void> = [];
    const { log, lines } = capturingLogger();
    const w = backgroundEventWriter(() => Promise.resolve(() => new Promise<unknown>((r) => pending.push(() => r({})))), { log, maxInFlight: 2 });
    for (let i = 0; i < 4; i++) w.write(event(`j${i}`));
    await settle();
    assert.equal(pending.length, 2);
    assert.ok(lines.some((l) => /more than 2 Events in flight/.test(JSON.stringify(l))));
    for (const p of pending) p();
  });
});

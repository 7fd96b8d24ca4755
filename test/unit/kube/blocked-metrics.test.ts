/**
 * What the resident reconciler's verdicts export and how their Events are bounded (issue 49): the series of
 * `quartermaster_jobs_blocked` replaced each tick (a job that runs leaves its reason's series), GPU-minutes added
 * per reason and resource, Events counted by result; and the bounded writer saying whether it took an Event.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Registry } from "prom-client";
import type { KubeObject } from "../../../src/core/kube.js";
import { backgroundEventWriter } from "../../../src/kube/events.js";
import { silentLogger } from "../../../src/log.js";
import { createWatchMetrics } from "../../../src/reconcile/metrics.js";

async function series(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values)
    out[
      Object.entries(v.labels)
        .map(([k, x]) => `${k}=${x}`)
        .join(",")
    ] = v.value;
  return out;
}

describe("metrics: the verdicts on jobs", () => {
  it("quartermaster_jobs_blocked holds the last tick's rows only", async () => {
    const m = createWatchMetrics();
    m.blocked.jobs([
      { namespace: "team-a", kind: "PyTorchJob", reason: "untolerated-taint", jobs: 2 },
      { namespace: "team-b", kind: "TFJob", reason: "no-gpu-shape", jobs: 1 },
    ]);
    assert.deepEqual(await series(m.registry, "quartermaster_jobs_blocked"), {
      "namespace=team-a,kind=PyTorchJob,reason=untolerated-taint": 2,
      "namespace=team-b,kind=TFJob,reason=no-gpu-shape": 1,
    });
    m.blocked.jobs([{ namespace: "team-b", kind: "TFJob", reason: "no-gpu-shape", jobs: 1 }]);
    assert.deepEqual(await series(m.registry, "quartermaster_jobs_blocked"), { "namespace=team-b,kind=TFJob,reason=no-gpu-shape": 1 });
  });

  it("quartermaster_blocked_gpu_minutes_total adds up per reason and resource", async () => {
    const m = createWatchMetrics();
    m.blocked.gpuMinutes([{ reason: "queued", resource: "nvidia.com/gpu", minutes: 4 }]);
    m.blocked.gpuMinutes([
      { reason: "queued", resource: "nvidia.com/gpu", minutes: 2.5 },
      { reason: "no-gpu-shape", resource: "amd.com/gpu", minutes: 1 },
    ]);
    assert.deepEqual(await series(m.registry, "quartermaster_blocked_gpu_minutes_total"), {
      "reason=queued,resource=nvidia.com/gpu": 6.5,
      "reason=no-gpu-shape,resource=amd.com/gpu": 1,
    });
  });

  it("quartermaster_blocked_events_total by type and result", async () => {
    const m = createWatchMetrics();
    m.blocked.event("Warning", "sent");
    m.blocked.event("Warning", "deferred", 3);
    m.blocked.event("Normal", "dropped");
    assert.deepEqual(await series(m.registry, "quartermaster_blocked_events_total"), {
      "type=Warning,result=sent": 1,
      "type=Warning,result=deferred": 3,
      "type=Normal,result=dropped": 1,
    });
  });
});

describe("backgroundEventWriter says whether it took the Event", () => {
  const event = (uid: string): KubeObject => ({
    kind: "Event",
    metadata: { namespace: "team-a" },
    involvedObject: { kind: "PyTorchJob", namespace: "team-a", name: uid, uid },
    reason: "QuartermasterBlocked",
    message: "m",
  });
  it("true when sent or sent within the window; false when dropped for the bound in flight", () => {
    const pending: Array<() => void> = [];
    const w = backgroundEventWriter(() => Promise.resolve(() => new Promise<unknown>((r) => pending.push(() => r({})))), {
      log: silentLogger(),
      maxInFlight: 1,
    });
    assert.equal(w.write(event("a")), true);
    assert.equal(w.write(event("a")), true, "the same Event within the window: already sent");
    assert.equal(w.write(event("b")), false, "one in flight already");
  });
});

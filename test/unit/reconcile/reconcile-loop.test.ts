import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "../../../src/log.js";
import { decideLease } from "../../../src/reconcile/lease.js";
import { startLoop } from "../../../src/reconcile/loop.js";

describe("decideLease", () => {
  const now = new Date("2026-11-22T01:00:00Z");
  const ago = (s: number) => new Date(now.getTime() - s * 1000);
  const cases: Array<[string, Parameters<typeof decideLease>[0], unknown]> = [
    ["no lease → create it", undefined, { take: true, create: true }],
    ["released (no holder) → take", { renewTime: ago(5), durationSeconds: 600 }, { take: true, create: false }],
    ["held by me → take (renew)", { holder: "me", renewTime: ago(5), durationSeconds: 600 }, { take: true, create: false }],
    [
      "held by another, renewed 5 s ago → wait",
      { holder: "pod-b", renewTime: ago(5), durationSeconds: 600 },
      { take: false, holder: "pod-b", until: new Date(ago(5).getTime() + 600_000) },
    ],
    [
      "held by another, exactly at expiry → still wait",
      { holder: "pod-b", renewTime: ago(600), durationSeconds: 600 },
      { take: false, holder: "pod-b", until: now },
    ],
    ["held by another, expired → take over", { holder: "pod-b", renewTime: ago(601), durationSeconds: 600 }, { take: true, create: false }],
  ];
  for (const [name, lease, want] of cases) it(name, () => assert.deepEqual(decideLease(lease, "me", now), want));
});

describe("startLoop", () => {
  it("never overlaps passes: ticks during a pass are skipped; stop waits for the pass in flight", async () => {
    const ticks: Array<() => void> = [];
    let stopped = false;
    let active = 0;
    let maxActive = 0;
    let release: () => void = () => undefined;
    const loop = startLoop({
      expression: "* * * * * *",
      schedule: (_e, tick) => {
        ticks.push(tick);
        return { stop: () => (stopped = true) };
      },
      pass: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise<void>((r) => (release = r));
        active--;
      },
      log: silentLogger(),
    });
    ticks[0]!();
    ticks[0]!();
    ticks[0]!();
    assert.deepEqual(loop.stats, { started: 1, skipped: 2 });
    let done = false;
    const stopping = loop.stop().then(() => (done = true));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(stopped, true);
    assert.equal(done, false, "stop waits for the running pass");
    release();
    await stopping;
    assert.equal(maxActive, 1);
  });

  it("a failing pass is logged and the next tick runs", async () => {
    const ticks: Array<() => void> = [];
    let calls = 0;
    const loop = startLoop({
      expression: "x",
      schedule: (_e, tick) => (ticks.push(tick), { stop: () => undefined }),
      pass: async () => {
        calls++;
        throw new Error("apiserver down");
      },
      log: silentLogger(),
    });
    ticks[0]!();
    await new Promise((r) => setTimeout(r, 10));
    ticks[0]!();
    await loop.stop();
    assert.equal(calls, 2);
  });
});

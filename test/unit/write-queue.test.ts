/**
 * The write queue of the admission server: answers computed in one event-loop turn are written together
 * after it, in order, with their bookkeeping after all the writes; a failing step stops no other.
 */
import assert from "node:assert/strict";
import { stat } from "node:fs";
import { describe, it } from "node:test";
import { createWriteQueue } from "../../src/server/app.js";
import { capturingLogger } from "../fixtures/https.js";

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("createWriteQueue", () => {
  it("defers writes to the end of the turn, then runs them in order, bookkeeping after every write", async () => {
    const queue = createWriteQueue(capturingLogger().log);
    const steps: string[] = [];
    queue(() => steps.push("write 1"), () => steps.push("then 1"));
    queue(() => steps.push("write 2"));
    queue(() => steps.push("write 3"), () => steps.push("then 3"));
    assert.deepEqual(steps, [], "nothing is written while the turn computes answers");
    await turn();
    assert.deepEqual(steps, ["write 1", "write 2", "write 3", "then 1", "then 3"]);
  });

  it("a lone answer queued from I/O (as a request body's end is) goes out in the same turn, before timers", async () => {
    const queue = createWriteQueue(capturingLogger().log);
    const steps: string[] = [];
    await new Promise<void>((resolve) =>
      stat(import.meta.filename, () => {
        setTimeout(() => (steps.push("timer"), resolve()), 0);
        queue(() => steps.push("write"));
      }),
    );
    assert.deepEqual(steps, ["write", "timer"]);
  });

  it("answers queued while a batch is written go out in the next batch", async () => {
    const queue = createWriteQueue(capturingLogger().log);
    const steps: string[] = [];
    queue(() => {
      steps.push("write 1");
      queue(() => steps.push("write 2"));
    });
    await turn();
    assert.deepEqual(steps, ["write 1"]);
    await turn();
    assert.deepEqual(steps, ["write 1", "write 2"]);
  });

  it("a step that throws is logged and the others still run", async () => {
    const { log, lines } = capturingLogger();
    const queue = createWriteQueue(log);
    const steps: string[] = [];
    queue(() => {
      throw new Error("socket gone");
    }, () => steps.push("then 1"));
    queue(() => steps.push("write 2"));
    await turn();
    assert.deepEqual(steps, ["write 2", "then 1"]);
    assert.equal(lines.filter((l) => l.msg === "writing an admission answer failed").length, 1);
  });
});

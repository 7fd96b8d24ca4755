/**
 * The admission server's turns (`src/server/turn.ts`): requests read in a poll phase are answered
 * together after it, then all the answers are written, then the bookkeeping runs; a failing step stops
 * no other; an answer that finishes later is written in a later turn.
 */
import assert from "node:assert/strict";
import { stat } from "node:fs";
import { describe, it } from "node:test";
import { createTurn } from "../../../src/server/turn.js";
import { capturingLogger } from "../../fixtures/https.js";

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("createTurn", () => {
  it("answers, then writes, then bookkeeping, each stage in the order queued", async () => {
    const turn = createTurn(capturingLogger().log);
    const steps: string[] = [];
    for (const n of [1, 2, 3]) {
      turn.answer(() => {
        steps.push(`answer ${n}`);
        turn.write(() => steps.push(`write ${n}`), n === 2 ? undefined : () => steps.push(`then ${n}`));
      });
    }
    assert.deepEqual(steps, [], "nothing runs while the poll phase reads requests");
    await nextTurn();
    assert.deepEqual(steps, ["answer 1", "answer 2", "answer 3", "write 1", "write 2", "write 3", "then 1", "then 3"]);
  });

  it("a lone request read from I/O is answered and written in the same turn, before timers", async () => {
    const turn = createTurn(capturingLogger().log);
    const steps: string[] = [];
    await new Promise<void>((resolve) =>
      stat(import.meta.filename, () => {
        setTimeout(() => (steps.push("timer"), resolve()), 0);
        turn.answer(() => turn.write(() => steps.push("write")));
      }),
    );
    assert.deepEqual(steps, ["write", "timer"]);
  });

  it("an answer that finishes later (I/O) is written in a later turn", async () => {
    const turn = createTurn(capturingLogger().log);
    const steps: string[] = [];
    let finish: () => void = () => assert.fail("never answered");
    turn.answer(() => {
      finish = () => turn.write(() => steps.push("late write"));
    });
    turn.answer(() => turn.write(() => steps.push("write")));
    await nextTurn();
    assert.deepEqual(steps, ["write"]);
    finish();
    await nextTurn();
    assert.deepEqual(steps, ["write", "late write"]);
  });

  it("a step that throws is logged with its stage and the others still run", async () => {
    const { log, lines } = capturingLogger();
    const turn = createTurn(log);
    const steps: string[] = [];
    turn.answer(() => {
      throw new Error("bug");
    });
    turn.write(
      () => {
        throw new Error("socket gone");
      },
      () => steps.push("then 1"),
    );
    turn.write(() => steps.push("write 2"));
    await nextTurn();
    assert.deepEqual(steps, ["write 2", "then 1"]);
    assert.deepEqual(
      lines.filter((l) => l.msg === "admission turn step failed").map((l) => l.stage),
      ["answer", "write"],
    );
  });
});

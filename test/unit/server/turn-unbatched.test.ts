/** The turns switched off (bench/admission --unbatched): every step runs at once, where it is queued. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createTurn } from "../../../src/server/turn.js";
import { silentLogger } from "../../../src/log.js";

describe("createTurn({ batched: false })", () => {
  it("runs answers, writes and their bookkeeping at once, in order, and a throwing step stops no other", () => {
    const turn = createTurn(silentLogger(), { batched: false });
    const seen: string[] = [];
    turn.answer(() => {
      seen.push("answer");
      turn.write(
        () => seen.push("write"),
        () => seen.push("then"),
      );
      seen.push("after write");
    });
    turn.answer(() => {
      throw new Error("boom");
    });
    turn.write(() => seen.push("write 2"));
    assert.deepEqual(seen, ["answer", "write", "then", "after write", "write 2"]);
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { stdTimeFunctions } from "pino";
import { isoTimeOncePerMs } from "../../src/log.js";

describe("isoTimeOncePerMs", () => {
  it("writes what pino's isoTime writes, for each millisecond the clock reads", () => {
    const readings = [Date.UTC(2026, 10, 22, 6, 0, 0, 1), Date.UTC(2026, 10, 22, 6, 0, 0, 1), Date.UTC(2026, 10, 22, 6, 0, 0, 2), 0];
    let i = 0;
    const time = isoTimeOncePerMs(() => readings[i++]!);
    for (const ms of readings) {
      const realNow = Date.now;
      Date.now = () => ms;
      try {
        assert.equal(time(), stdTimeFunctions.isoTime());
      } finally {
        Date.now = realNow;
      }
    }
  });
});

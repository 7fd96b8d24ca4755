import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pino, stdTimeFunctions } from "pino";
import { FLUSH_MS, batchedDestination, isoTimeOncePerMs } from "../../../src/log.js";

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

describe("batchedDestination", () => {
  /** A destination over a fake fd: `plan` says what each write call does (bytes taken, or an error code). */
  function fake(plan: Array<number | string> = []) {
    const writes: string[] = [];
    let taken = Buffer.alloc(0);
    const turns: Array<() => void> = [];
    const dest = batchedDestination(7, {
      schedule: (fn) => void turns.push(fn),
      write: (fd, data, offset) => {
        assert.equal(fd, 7);
        const step = plan.shift();
        if (typeof step === "string") throw Object.assign(new Error(step), { code: step });
        const n = Math.min(step ?? Infinity, data.length - offset);
        writes.push(data.subarray(offset, offset + n).toString("utf8"));
        taken = Buffer.concat([taken, data.subarray(offset, offset + n)]);
        return n;
      },
    });
    const endTurn = (): void => {
      for (const fn of turns.splice(0)) fn();
    };
    return { dest, writes, endTurn, bytes: () => taken.toString("utf8") };
  }

  const cases: Array<{ name: string; plan?: Array<number | string>; lines: string[]; writes: number; out?: string }> = [
    { name: "one turn's lines → one write after the turn", lines: ["a\n", "b\n", "c\n"], writes: 1 },
    { name: "a short write → the rest written next, in order", plan: [3, 2], lines: ["hello\n", "world\n"], writes: 3 },
    { name: "EAGAIN (full non-blocking pipe) → retried until written", plan: ["EAGAIN", 4], lines: ["retry me\n"], writes: 2 },
    { name: "multi-byte characters split by a short write → bytes intact", plan: [2], lines: ["é€😀\n"], writes: 2 },
    { name: "EPIPE (reader gone) → logging ends, nothing thrown", plan: ["EPIPE"], lines: ["lost\n"], writes: 0, out: "" },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const f = fake(c.plan);
      for (const l of c.lines) f.dest.write(l);
      assert.equal(f.writes.length, 0, "nothing is written during the turn");
      f.endTurn();
      assert.equal(f.writes.length, c.writes);
      assert.equal(f.bytes(), c.out ?? c.lines.join(""));
    });
  }

  it("after EPIPE, later lines are dropped without a write", () => {
    const f = fake(["EPIPE"]);
    f.dest.write("a\n");
    f.endTurn();
    f.dest.write("b\n");
    f.endTurn();
    assert.deepEqual(f.writes, []);
  });

  it("any other write error is thrown", () => {
    const f = fake(["EBADF"]);
    f.dest.write("a\n");
    assert.throws(() => f.endTurn(), /EBADF/);
  });

  it("64 KiB waiting → written at once, without waiting for the turn", () => {
    const f = fake();
    const line = `${"x".repeat(1023)}\n`;
    for (let i = 0; i < 64; i++) f.dest.write(line);
    assert.equal(f.writes.length, 1);
    assert.equal(f.bytes().length, 64 * 1024);
    f.endTurn();
    assert.equal(f.writes.length, 1, "the end of the turn finds nothing left");
  });

  it("flush(cb) writes at once, then calls back", () => {
    const f = fake();
    f.dest.write("now\n");
    let called = false;
    f.dest.flush(() => (called = true));
    assert.equal(f.bytes(), "now\n");
    assert.ok(called);
  });

  it("under pino: each line a JSON object, written after the turn", () => {
    const f = fake();
    const log = pino({ base: undefined, timestamp: false }, f.dest);
    log.info({ webhook: "mutate-pods", ops: 3 }, "admission");
    log.warn("second");
    assert.equal(f.bytes(), "");
    f.endTurn();
    const lines = f
      .bytes()
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => [l.msg, l.level]),
      [
        ["admission", 30],
        ["second", 40],
      ],
    );
    assert.equal(lines[0]!.ops, 3);
  });
});

describe("batchedDestination on a real file", () => {
  it("writes the lines of FLUSH_MS to the descriptor together, after the turn and not before", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-log-"));
    const file = join(dir, "out.log");
    const fd = openSync(file, "w");
    try {
      const dest = batchedDestination(fd);
      dest.write("one\n");
      dest.write("twö\n");
      assert.equal(readFileSync(file, "utf8"), "");
      await new Promise((r) => setImmediate(r));
      dest.write("three\n");
      assert.equal(readFileSync(file, "utf8"), "", "not written at the end of the turn: a write per turn is a write per request under load");
      await new Promise((r) => setTimeout(r, FLUSH_MS + 5));
      assert.equal(readFileSync(file, "utf8"), "one\ntwö\nthree\n");
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

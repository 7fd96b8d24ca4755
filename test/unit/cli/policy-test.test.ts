/**
 * `quartermaster test`: the shipped examples pass (so `npm test` runs them), a fixture of wrong expectations
 * fails row by row with what did not hold, and invalid test files are reported with file and field path.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";
import { contains, parseTests } from "../../../src/cli/policy-test.js";

const ROOT = resolve(import.meta.dirname, "../../..");

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: ROOT, shutdown: new Promise(() => undefined) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

/** The table's rows as [result, test, resource], each with the detail lines under it. */
function rows(stdout: string): Array<{ result: string; resource: string; test: string; details: string[] }> {
  const out: Array<{ result: string; resource: string; test: string; details: string[] }> = [];
  for (const line of stdout.split("\n").slice(1, -1)) {
    const detail = /^ {8}- (.*)$/.exec(line);
    if (detail) out.at(-1)!.details.push(detail[1]!);
    else {
      const m = /^(\S+)\s+(.+?)\s{2,}(\S+)$/.exec(line);
      assert.ok(m, `not a row: ${line}`);
      out.push({ result: m[1]!, test: m[2]!, resource: m[3]!, details: [] });
    }
  }
  return out;
}

describe("quartermaster test", () => {
  it("examples/policy-tests: every expectation holds (exit 0)", async () => {
    const r = await cli(["test", "examples/policy-tests"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const table = rows(r.stdout);
    assert.ok(table.length >= 10, r.stdout);
    assert.deepEqual([...new Set(table.map((t) => t.result))], ["pass"]);
    // A limit, a mutation and a training job's env are among them.
    for (const want of ["limits.test.yaml", "outfitting.test.yaml", "pytorchjob.test.yaml"])
      assert.ok(
        table.some((t) => t.test.includes(want)),
        want,
      );
    assert.match(r.stdout, /^\d+ passed, 0 failed$/m);
  });

  it("a single test file", async () => {
    const r = await cli(["test", "examples/policy-tests/pytorchjob.test.yaml"]);
    assert.equal(r.code, 0, r.stdout);
    assert.equal(rows(r.stdout).length, 4);
  });

  it("test/fixtures/policy-tests/failing: each wrong expectation fails with what did not hold (exit 1)", async () => {
    const r = await cli(["test", "test/fixtures/policy-tests/failing"]);
    assert.equal(r.code, 1);
    const table = rows(r.stdout);
    const expected: Array<[string, string, RegExp | undefined]> = [
      ["pass", "Pod/one-gpu", undefined],
      ["FAIL", "Pod/eight-gpus", /^expected allowed, got denied by container-limits \(\[container-limits\] spec\.containers\[0\]/],
      ["FAIL", "Pod/one-gpu", /^expected denied by container-limits, got allowed$/],
      ["FAIL", "Pod/on-t4", /^expected denied by container-limits, got denied by accelerator-allowed/],
      ["FAIL", "Pod/eight-gpus", /^no violation \{"field":"spec\.containers\[1\]/],
      ["FAIL", "Pod/one-gpu", /^no warning containing "placed on nodes with"/],
      ["FAIL", "Pod/mnist-ddp-worker-1", /^container pytorch: env RANK: expected "1", got "2"$/],
      ["FAIL", "Pod/mnist-ddp-worker-0", /^no container "trainer"/],
      ["FAIL", "Pod/one-gpu", /^no toleration \{"key":"nvidia\.com\/gpu","operator":"Equal"\}/],
      ["FAIL", "Pod/on-h100", /^affinity does not contain/],
      ["FAIL", "Pod/one-gpu", /^annotation quartermaster\.dev\/mutations: expected unset, got "resources,gpu-tolerations"$/],
      ["FAIL", "PyTorchJob/mnist-ddp", /is a training job: check env, tolerations and affinity on its pods/],
      ["FAIL", "Pod/nope", /^no Pod\/nope among the results/],
    ];
    assert.deepEqual(
      table.map((t) => [t.result, t.resource]),
      expected.map(([result, resource]) => [result, resource]),
    );
    expected.forEach(([, , detail], i) => {
      if (detail) assert.match(table[i]!.details[0] ?? "", detail);
      else assert.deepEqual(table[i]!.details, []);
    });
    // An env value that must be unset, and one that is right, in the same row.
    assert.ok(table[6]!.details.includes('container pytorch: env WORLD_SIZE: expected unset, got "3"'));
    assert.equal(table[6]!.details.length, 2);
    assert.match(r.stdout, /^1 passed, 12 failed$/m);
  });

  it("test/fixtures/policy-tests/invalid: each bad file is an error naming file and field (exit 1)", async () => {
    const r = await cli(["test", "test/fixtures/policy-tests/invalid"]);
    assert.equal(r.code, 1);
    const table = rows(r.stdout);
    assert.deepEqual(
      table.map((t) => t.result),
      ["ERROR", "ERROR", "ERROR"],
    );
    const F = "test/fixtures/policy-tests/invalid/fields.test.yaml";
    assert.deepEqual(table[0]!.details, [
      `${F}: (document): unknown field 'polcy'`,
      `${F}: expect[0].allowed: must be boolean`,
      `${F}: expect[0].env.main.RANK: must be string,null`,
      `${F}: expect[1].resource: must be Kind/name or Kind/namespace/name`,
    ]);
    assert.match(table[1]!.details[0]!, /^cannot read not-there\.yaml: no such file$/);
    assert.match(table[2]!.details[0]!, /^test\/fixtures\/policy-tests\/invalid\/syntax\.test\.yaml: line \d+: /);
    assert.match(r.stdout, /0 passed, 0 failed, 3 could not run$/);
  });

  it("a path that does not exist, and a directory without tests: exit 1 with a message", async () => {
    const missing = await cli(["test", "no/such/dir"]);
    assert.deepEqual([missing.code, /cannot read no\/such\/dir/.test(missing.stderr)], [1, true]);
    const empty = await cli(["test", mkdtempSync(join(tmpdir(), "qm-tests-"))]);
    assert.equal(empty.code, 1);
    assert.match(empty.stderr, /no \*\.test\.yaml files/);
  });

  it("a file with no test, and one without expectations, are errors", () => {
    assert.deepEqual(parseTests("", "e.test.yaml"), []);
    const [t] = parseTests("apiVersion: quartermaster.dev/v1alpha1\nkind: PolicyTest\nname: x\nresources: [a.yaml]\nexpect: []\n", "x.test.yaml");
    assert.deepEqual(t!.problems, ["x.test.yaml: expect: must NOT have fewer than 1 items"]);
    const [u] = parseTests("apiVersion: quartermaster.dev/v1alpha1\nkind: PolicyTest\nname: x\nexpect: [{resource: Pod/a}]\n", "y.test.yaml");
    assert.ok(
      u!.problems.some((p) => /missing required field 'resources'/.test(p)),
      u!.problems.join("\n"),
    );
  });
});

describe("contains: what an expectation's tolerations and affinity mean", () => {
  const cases: Array<[string, unknown, unknown, boolean]> = [
    ["equal scalars", "a", "a", true],
    ["different scalars", "a", "b", false],
    ["a mapping with more fields", { a: 1, b: 2 }, { a: 1 }, true],
    ["a missing field", { a: 1 }, { b: 1 }, false],
    ["list items in any order", [{ k: "x" }, { k: "y" }], [{ k: "y" }], true],
    ["a list item that is not there", [{ k: "x" }], [{ k: "z" }], false],
    ["a list where a mapping is expected", [1], { a: 1 }, false],
    ["nested lists", { terms: [{ exprs: [{ key: "a", values: ["1", "2"] }] }] }, { terms: [{ exprs: [{ key: "a", values: ["2"] }] }] }, true],
    ["nothing where something is expected", undefined, { a: 1 }, false],
  ];
  for (const [name, actual, expected, want] of cases) it(name, () => assert.equal(contains(actual, expected), want));
});

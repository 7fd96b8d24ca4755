/**
 * The flag parsers of src/cli/flags.ts (commander's `argParser`): each value checked where commander parses
 * it, a bad one refused with `InvalidArgumentError` and, on the command line, a usage error (exit 2) whose
 * message names the flag and what it takes, followed by the command's usage.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InvalidArgumentError } from "commander";
import { integer, oneOf } from "../../../src/cli/flags.js";
import { runCli } from "../../../src/cli/commands.js";

describe("integer(flag, min, max)", () => {
  const port = integer("--port", 0, 65535);
  const cases: Array<{ name: string; value: string; want: number | RegExp }> = [
    { name: "a port", value: "8443", want: 8443 },
    { name: "the lowest", value: "0", want: 0 },
    { name: "the highest", value: "65535", want: 65535 },
    { name: "leading zeros", value: "08443", want: 8443 },
    { name: "a word", value: "abc", want: /^--port must be an integer from 0 to 65535, got abc$/ },
    { name: "a fraction", value: "1.5", want: /got 1\.5$/ },
    { name: "above the range", value: "70000", want: /got 70000$/ },
    { name: "below the range", value: "-1", want: /got -1$/ },
    { name: "empty", value: "", want: /must be an integer/ },
    { name: "padded", value: " 12", want: /must be an integer/ },
    { name: "hexadecimal", value: "0x10", want: /must be an integer/ },
    { name: "an exponent", value: "1e3", want: /must be an integer/ },
    { name: "beyond a safe integer", value: "9007199254740993", want: /must be an integer/ },
  ];
  for (const c of cases) {
    it(`${c.name}: ${JSON.stringify(c.value)}`, () => {
      if (typeof c.want === "number") return assert.equal(port(c.value), c.want);
      assert.throws(
        () => port(c.value),
        (err: unknown) => err instanceof InvalidArgumentError && c.want instanceof RegExp && c.want.test(err.message),
      );
    });
  }
});

describe("oneOf(choices, message)", () => {
  const keyType = oneOf(["ecdsa", "rsa"], (v) => `--key-type must be ecdsa or rsa, got ${JSON.stringify(v)}`);
  it("a choice is itself", () => assert.equal(keyType("rsa"), "rsa"));
  it("anything else is refused with the message", () =>
    assert.throws(
      () => keyType("dsa"),
      (err: unknown) => err instanceof InvalidArgumentError && err.message === '--key-type must be ecdsa or rsa, got "dsa"',
    ));
});

describe("a refused value on the command line: exit 2, the parser's message, the usage", () => {
  const cases: Array<{ name: string; args: string[]; stderr: RegExp }> = [
    { name: "serve --port abc", args: ["serve", "--port", "abc"], stderr: /^quartermaster: --port must be an integer from 0 to 65535, got abc\n/ },
    { name: "serve --port 1.5", args: ["serve", "--port", "1.5"], stderr: /^quartermaster: --port must be an integer from 0 to 65535, got 1\.5\n/ },
    { name: "dev --metrics-port 65536", args: ["dev", "--metrics-port", "65536"], stderr: /^quartermaster: --metrics-port must be an integer from 0 to 65535/ },
    {
      name: "serve --max-inflight-body-mib 4",
      args: ["serve", "--max-inflight-body-mib", "4"],
      stderr: /^quartermaster: --max-inflight-body-mib must be an integer from 8 to 4096, got 4/,
    },
    { name: "serve --log-level loud", args: ["serve", "--log-level", "loud"], stderr: /^quartermaster: --log-level must be one of fatal, error, warn/ },
    {
      name: "reconcile --resync-seconds 0",
      args: ["reconcile", "--watch", "--resync-seconds", "0"],
      stderr: /--resync-seconds must be an integer from 1 to 86400/,
    },
    {
      name: "certs ensure --settle-seconds 601",
      args: ["certs", "ensure", "--settle-seconds", "601"],
      stderr: /--settle-seconds must be an integer from 0 to 600/,
    },
    {
      name: "certs generate --key-type dsa",
      args: ["certs", "generate", "--key-type", "dsa"],
      stderr: /^quartermaster: certs generate: --key-type must be ecdsa or rsa/,
    },
    { name: "doctor -o yaml", args: ["doctor", "-o", "yaml"], stderr: /^quartermaster: doctor: -o must be table or json/ },
    { name: "admit -o table", args: ["admit", "-o", "table"], stderr: /^quartermaster: admit: -o must be yaml, json or patch/ },
    {
      name: "manifests webhooks --namespace Bad_NS",
      args: ["manifests", "webhooks", "--namespace", "Bad_NS"],
      stderr: /^quartermaster: --namespace must be a namespace name \(DNS-1123 label\), got "Bad_NS"/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(c.args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: process.cwd(), shutdown: new Promise(() => undefined) });
      const stderr = err.join("\n");
      assert.equal(code, 2, stderr);
      assert.deepEqual(out, []);
      assert.match(stderr, c.stderr);
      assert.match(stderr, /Usage: quartermaster /);
    });
  }
});

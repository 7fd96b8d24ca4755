/**
 * The serve bundle's program (src/cli/serve-cli.ts: `serve` alone) answers `serve`'s command lines as the whole
 * program does (src/cli/commands.ts): the same output, errors and exit codes, for lines that stop before serving.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";
import type { CliIo } from "../../../src/cli/io.js";
import { runServeCli } from "../../../src/cli/serve-cli.js";

async function run(cli: typeof runCli, argv: string[]): Promise<{ code: number; stdout: string[]; stderr: string[] }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const io: CliIo = { stdout: (l) => stdout.push(l), stderr: (l) => stderr.push(l), cwd: process.cwd(), shutdown: new Promise(() => undefined) };
  const code = await cli(argv, io);
  return { code, stdout, stderr };
}

describe("serve alone answers as the whole program", () => {
  const CASES: Array<[string, string[], number]> = [
    ["help", ["serve", "--help"], 0],
    ["an unknown flag", ["serve", "--bogus"], 2],
    ["a mistyped flag (a suggestion)", ["serve", "--prot", "8443"], 2],
    ["a flag's value refused", ["serve", "--port", "eighty"], 2],
    ["no certificate", ["serve"], 2],
    ["--plain-http with a certificate", ["serve", "--plain-http", "--tls-cert", "a.pem"], 2],
    ["the same port twice", ["serve", "--tls-cert", "a", "--tls-key", "b", "--port", "9000", "--metrics-port", "9000"], 2],
    ["an argument it does not take", ["serve", "extra"], 2],
  ];
  for (const [name, argv, code] of CASES)
    it(name, async () => {
      const whole = await run(runCli, argv);
      const alone = await run(runServeCli, argv);
      assert.equal(whole.code, code, JSON.stringify(whole));
      assert.deepEqual(alone, whole);
      assert.ok(whole.stdout.length + whole.stderr.length > 0, "something was said");
    });
});

/**
 * The command line on commander: every command's `--help` (exit 0, its flags listed), `--version`, and
 * suggestions for mistyped commands and flags (exit 2, usage on stderr).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { COMMANDS } from "../../../src/cli/command-list.js";
import { runCli } from "../../../src/cli/commands.js";

const ROOT = resolve(import.meta.dirname, "../../..");

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: ROOT, shutdown: new Promise(() => undefined) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

describe("quartermaster <command> --help", () => {
  for (const spec of COMMANDS) {
    const words = spec.name.split(" ");
    for (const [how, argv] of [
      ["--help", [...words, "--help"]],
      ["-h", [...words, "-h"]],
      // commander's help command takes one word: `quartermaster certs help ensure`.
      ["help", [...words.slice(0, -1), "help", words.at(-1)!]],
    ] as const) {
      it(`${spec.name} ${how}: exit 0, usage and every flag on stdout`, async () => {
        const r = await cli([...argv]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, "");
        assert.match(r.stdout, new RegExp(`^Usage: quartermaster ${spec.name}\\b`));
        for (const flag of Object.keys(spec.flags ?? {})) assert.ok(r.stdout.includes(`--${flag}`), `--${flag} missing from the help of ${spec.name}`);
      });
    }
  }

  for (const group of [...new Set(COMMANDS.filter((c) => c.name.includes(" ")).map((c) => c.name.split(" ")[0]!))]) {
    it(`${group} --help lists its subcommands`, async () => {
      const r = await cli([group, "--help"]);
      assert.equal(r.code, 0, r.stderr);
      for (const c of COMMANDS.filter((c) => c.name.startsWith(`${group} `))) assert.ok(r.stdout.includes(c.name.split(" ")[1]!), `${c.name} missing`);
    });
  }

  it("--help and help list every command; no command at all is a usage error", async () => {
    for (const argv of [["--help"], ["help"]]) {
      const r = await cli(argv);
      assert.equal(r.code, 0, r.stderr);
      for (const c of COMMANDS) assert.ok(r.stdout.includes(`  ${c.name.split(" ")[0]!}`), `${c.name} missing from ${argv.join(" ")}`);
    }
    const none = await cli([]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /Usage: quartermaster/);
  });

  it("--version and -V print the package's version, then the commit and build date", async () => {
    const { version } = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")) as { version: string };
    for (const flag of ["--version", "-V"]) {
      const r = await cli([flag]);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /^\S+ \(commit \S+, built \S+\)$/);
      assert.equal(r.stdout.split(" ")[0], version);
    }
  });
});

describe("usage errors: exit 2 with a message (and a suggestion when something close exists)", () => {
  const cases: Array<{ name: string; args: string[]; stderr: RegExp[] }> = [
    { name: "a mistyped command", args: ["doctr"], stderr: [/unknown command 'doctr'/, /Did you mean doctor\?/, /Usage: quartermaster/] },
    {
      name: "a mistyped subcommand",
      args: ["certs", "ensur"],
      stderr: [/certs: expected 'generate', 'ensure' or 'install', not 'ensur'/, /Did you mean ensure\?/],
    },
    { name: "a mistyped policy subcommand", args: ["policy", "chek", "p.yaml"], stderr: [/Did you mean check\?/] },
    {
      name: "a mistyped flag",
      args: ["doctor", "--namspace", "x"],
      stderr: [/unknown option '--namspace'/, /Did you mean --namespace\?/, /Usage: quartermaster doctor/],
    },
    { name: "a mistyped flag of serve", args: ["serve", "--tls-crt", "a.pem"], stderr: [/Did you mean --tls-cert\?/] },
    { name: "a flag without its dash", args: ["reconcile", "--once", "--dryrun"], stderr: [/Did you mean --dry-run\?/] },
    { name: "an unknown command with nothing close", args: ["frobnicate"], stderr: [/unknown command 'frobnicate'/] },
    { name: "a missing argument", args: ["policy", "check"], stderr: [/missing required argument 'file'/] },
    { name: "an extra argument", args: ["doctor", "now"], stderr: [/too many arguments/] },
    { name: "a flag without its value", args: ["ledger", "-o"], stderr: [/option '-o, --output <format>' argument missing/] },
    {
      name: "a check in the command itself",
      args: ["ledger", "-o", "yaml"],
      stderr: [/^quartermaster: ledger: -o must be table or json/, /Usage: quartermaster ledger/],
    },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.args.join(" ")}`, async () => {
      const r = await cli(c.args);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, "");
      for (const re of c.stderr) assert.match(r.stderr, re);
    });
  }
});

/**
 * @module
 * The command-line program on commander, composed of one module per command (`src/cli/commands/<name>.ts`,
 * each registering its command with its typed flags, help and the function it runs), with per-command
 * `--help`, `--version`, suggestions for mistyped commands and flags, and Quartermaster's exit codes: 0 ok,
 * 1 failure, 2 usage (commander's own errors, a value a flag's parser refused and a {@link UsageError} thrown
 * by a command alike). Commander is told never to exit the process: runs are plain calls, so tests run
 * commands in-process.
 *
 * The command modules import their heavy modules (the Kubernetes client, @peculiar/x509, yaml, ajv) with
 * `import()` when they run, so composing the program loads none of them and `serve` starts fast
 * (test/unit/project/cli-startup.test.ts).
 */
import { Command, CommanderError, type Option, type OptionValues } from "commander";
import { UsageError, errorMessage } from "../core/errors.js";
import type { CliDeps, CommandRun } from "./deps.js";
import type { CliIo } from "./io.js";

export interface ProgramOptions {
  name: string;
  version: string;
  description: string;
}

/** One command's module: registers its command (and subcommands) on the program. */
export type CommandModule = (program: Command, deps: CliDeps) => void;

/** Wide enough for the flag descriptions, fixed so help reads the same in a terminal, a pipe and a test. */
const HELP_WIDTH = 110;

/**
 * commander's preamble when a flag's parser refused its value; the parser's own message (src/cli/flags.ts)
 * names the flag and what it takes, so it stands alone.
 */
const REFUSED_VALUE = /^error: option '.*?' argument '.*?' is invalid\. /s;

/** A usage error as Quartermaster prints it: `quartermaster: ...`. */
function usageLine(s: string): string {
  return s.replace(REFUSED_VALUE, "quartermaster: ").replace(/^error: /, "quartermaster: ");
}

/** Where a run ends: the command's exit code, or undefined when commander ended it (help, version, usage). */
interface RunState {
  code?: number;
  /** Something went to stderr through commander: the help it printed was for an error. */
  errorOutput: boolean;
}

/** The program with every command, and what each command (by its commander object) runs. */
function build(
  opts: ProgramOptions,
  io: CliIo,
  state: RunState,
  modules: readonly CommandModule[],
): { program: Command; runs: Map<Command, CommandRun<never>> } {
  const out = (s: string): void => io.stdout(s.replace(/\n$/, ""));
  const err = (s: string): void => {
    state.errorOutput = true;
    io.stderr(s.replace(/\n$/, ""));
  };
  const program = new Command(opts.name)
    .description(opts.description)
    .version(opts.version, "-V, --version", "print the version")
    .helpOption("-h, --help", "print help for the command")
    .helpCommand("help [command]", "print help for a command")
    .exitOverride()
    .showHelpAfterError(true)
    .showSuggestionAfterError(true)
    .configureHelp({ helpWidth: HELP_WIDTH })
    .configureOutput({
      writeOut: out,
      writeErr: err,
      getOutHelpWidth: () => HELP_WIDTH,
      getErrHelpWidth: () => HELP_WIDTH,
      outputError: (s, write) => write(usageLine(s)),
    });
  const runs = new Map<Command, CommandRun<never>>();

  const deps: CliDeps = {
    action<T extends OptionValues>(cmd: Command, run: CommandRun<T>): void {
      runs.set(cmd, run);
      cmd.action(async () => {
        try {
          state.code = await run(cmd.opts<T>(), cmd.args, io);
        } catch (e) {
          if (e instanceof UsageError) cmd.error(`error: ${e.message}`, { exitCode: 2, code: "quartermaster.usage" });
          throw e;
        }
      });
    },
    group(parent, name, summary) {
      const found = parent.commands.find((c) => c.name() === name);
      if (found) return found;
      const cmd = parent.command(name).summary(summary).description(summary);
      // A mistyped subcommand: say which ones there are (commander adds the suggestion).
      cmd.configureOutput({
        outputError: (s, write) => {
          const m = /^error: unknown command '([^']*)'/.exec(s);
          if (!m) return write(usageLine(s));
          const names = cmd.commands.map((c) => `'${c.name()}'`).filter((n) => n !== "'help'");
          const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names.join("");
          write(`quartermaster: ${name}: expected ${list}, not '${m[1]}'${s.slice(m[0].length)}`);
        },
      });
      return cmd;
    },
  };
  for (const register of modules) register(program, deps);
  return { program, runs };
}

/** Runs one command line against the program of `modules`; resolves to the process exit code. */
export async function runProgram(argv: readonly string[], io: CliIo, opts: ProgramOptions, modules: readonly CommandModule[]): Promise<number> {
  const state: RunState = { errorOutput: false };
  const { program } = build(opts, io, state, modules);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return state.code ?? 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === "commander.helpDisplayed" || e.code === "commander.version") return 0;
      // `help` alone prints to stdout (0); help printed because no command was given goes to stderr (usage).
      if (e.code === "commander.help") return state.errorOutput ? 2 : 0;
      return 2;
    }
    io.stderr(`quartermaster: ${errorMessage(e)}`);
    return 1;
  }
}

/** One command as the program has it: the words that select it, its flags by long name, what it runs. */
export interface CommandEntry {
  /** `serve`, `policy check`. */
  name: string;
  summary: string;
  flags: Readonly<Record<string, Option>>;
  run: CommandRun<never>;
}

/** Every command that runs something (the groups `policy`, `certs`, `manifests` are not), in the order of `--help`. */
export function listCommands(opts: ProgramOptions, modules: readonly CommandModule[]): CommandEntry[] {
  const silent: CliIo = { stdout: () => undefined, stderr: () => undefined, cwd: ".", shutdown: new Promise(() => undefined) };
  const { program, runs } = build(opts, silent, { errorOutput: false }, modules);
  const entries: CommandEntry[] = [];
  const walk = (cmd: Command, words: string[]): void => {
    const run = runs.get(cmd);
    if (run) {
      const flags = Object.fromEntries(cmd.options.flatMap((o) => (o.long ? [[o.long.slice(2), o] as const] : [])));
      entries.push({ name: words.join(" "), summary: cmd.summary(), flags, run });
    }
    for (const sub of cmd.commands) walk(sub, [...words, sub.name()]);
  };
  for (const cmd of program.commands) walk(cmd, [cmd.name()]);
  return entries;
}

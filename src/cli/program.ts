/**
 * @module
 * The command-line surface on commander: every command is one {@link CommandSpec} (a name such as `serve` or
 * `policy check`, its flags and arguments, its help and the function it runs), and {@link runProgram} turns a
 * list of them into a program with per-command `--help`, `--version`, suggestions for mistyped commands and
 * flags, and Quartermaster's exit codes: 0 ok, 1 failure, 2 usage (commander's own errors and a
 * {@link UsageError} thrown by a command alike). Commander is told never to exit the process: runs are plain
 * calls, so tests run commands in-process.
 *
 * A command's `run` gets its flags keyed by their long names (`values["tls-cert"]`, as node:util's parseArgs
 * gives them) and its arguments in order; defaults stay in the commands (the help only shows them), so a
 * flag not given is undefined.
 */
import { Command, CommanderError, Option } from "commander";
import { UsageError, errorMessage } from "../core/errors.js";
import type { CliIo } from "./io.js";

export interface FlagSpec {
  type: "string" | "boolean";
  /** The one-letter alias, e.g. `o` for `-o`. */
  short?: string;
  /** May be given more than once; the values come as an array. */
  multiple?: boolean;
  /** Takes every value up to the next flag (`-f a.yaml b.yaml`), and may be repeated; the values come as an array. */
  variadic?: boolean;
  /** The value's name in the help (`--port <n>`); default `value`. */
  value?: string;
  description: string;
  /** Shown in the help only; the command applies it. */
  default?: string;
}

export interface ArgSpec {
  name: string;
  description: string;
  /** Default true. */
  required?: boolean;
  /** Takes every remaining argument (last only). */
  variadic?: boolean;
}

export interface CommandSpec {
  /** The words that select it: `serve`, `policy check`. The group words (`policy`) need no entry of their own. */
  name: string;
  /** One line for the list of commands. */
  summary: string;
  /** What `--help` says after the usage line; default the summary. */
  description?: string;
  args?: readonly ArgSpec[];
  flags?: Readonly<Record<string, FlagSpec>>;
  /** Shown after the flags in `--help` (examples, exit codes). */
  after?: string;
  run(values: Record<string, unknown>, positionals: readonly string[], io: CliIo): Promise<number>;
}

export interface ProgramOptions {
  name: string;
  version: string;
  description: string;
  /** One-line summaries of the groups (`policy`, `certs`), shown in the list of commands. */
  groups?: Readonly<Record<string, string>>;
}

/** Wide enough for the flag descriptions, fixed so help reads the same in a terminal, a pipe and a test. */
const HELP_WIDTH = 110;

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

function option(long: string, flag: FlagSpec): Option {
  const names = `${flag.short ? `-${flag.short}, ` : ""}--${long}`;
  const value = flag.type === "string" ? ` <${flag.value ?? "value"}${flag.variadic ? "..." : ""}>` : "";
  const description = flag.default === undefined ? flag.description : `${flag.description} (default: ${flag.default})`;
  const o = new Option(`${names}${value}`, description);
  return flag.multiple ? o.argParser(collect) : o;
}

/** The flags a command was given, keyed by long name; commander keys them in camelCase. */
function valuesOf(cmd: Command): Record<string, unknown> {
  const opts: Record<string, unknown> = cmd.opts();
  const values: Record<string, unknown> = {};
  for (const o of cmd.options) {
    const v = opts[o.attributeName()];
    if (v !== undefined && o.long) values[o.long.slice(2)] = v;
  }
  return values;
}

/** Where a run ends: the command's exit code, or undefined when commander ended it (help, version, usage). */
interface RunState {
  code?: number;
  /** Something went to stderr through commander: the help it printed was for an error. */
  errorOutput: boolean;
}

function build(specs: readonly CommandSpec[], opts: ProgramOptions, io: CliIo, state: RunState): Command {
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
    .configureOutput({ writeOut: out, writeErr: err, getOutHelpWidth: () => HELP_WIDTH, getErrHelpWidth: () => HELP_WIDTH });
  const groups = new Map<string, Command>([["", program]]);

  /** The command for a group path ("" the program, "policy", ...), made on first use. */
  const group = (path: string): Command => {
    const found = groups.get(path);
    if (found) return found;
    const words = path.split(" ");
    const parent = group(words.slice(0, -1).join(" "));
    const cmd = parent
      .command(words.at(-1)!)
      .summary(opts.groups?.[path] ?? "")
      .description(opts.groups?.[path] ?? "");
    // A mistyped subcommand: say which ones there are (commander adds the suggestion).
    cmd.configureOutput({
      outputError: (s, write) => {
        const m = /^error: unknown command '([^']*)'/.exec(s);
        if (!m) return write(s.replace(/^error: /, "quartermaster: "));
        const names = cmd.commands.map((c) => `'${c.name()}'`).filter((n) => n !== "'help'");
        const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names.join("");
        write(`quartermaster: ${path}: expected ${list}, not '${m[1]}'${s.slice(m[0].length)}`);
      },
    });
    groups.set(path, cmd);
    return cmd;
  };
  program.configureOutput({ outputError: (s, write) => write(s.replace(/^error: /, "quartermaster: ")) });

  for (const spec of specs) {
    const words = spec.name.split(" ");
    const parent = group(words.slice(0, -1).join(" "));
    const cmd = parent
      .command(words.at(-1)!)
      .summary(spec.summary)
      .description(spec.description ?? spec.summary);
    for (const a of spec.args ?? []) {
      const name = `${a.name}${a.variadic ? "..." : ""}`;
      cmd.argument(a.required === false ? `[${name}]` : `<${name}>`, a.description);
    }
    for (const [long, flag] of Object.entries(spec.flags ?? {})) cmd.addOption(option(long, flag));
    if (spec.after) cmd.addHelpText("after", `\n${spec.after}`);
    cmd.action(async (...args: unknown[]) => {
      // commander passes the arguments, then the options object, then the command.
      const positionals = args.slice(0, -2).flatMap((a) => (a === undefined ? [] : Array.isArray(a) ? (a as string[]) : [String(a)]));
      try {
        state.code = await spec.run(valuesOf(cmd), positionals, io);
      } catch (e) {
        if (e instanceof UsageError) cmd.error(`error: ${e.message}`, { exitCode: 2, code: "quartermaster.usage" });
        throw e;
      }
    });
  }
  return program;
}

/** Runs one command line against `specs`; resolves to the process exit code. */
export async function runProgram(specs: readonly CommandSpec[], argv: readonly string[], io: CliIo, opts: ProgramOptions): Promise<number> {
  const state: RunState = { errorOutput: false };
  const program = build(specs, opts, io, state);
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

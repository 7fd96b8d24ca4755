/**
 * @module
 * What a command's module gets from the program (./program.ts) when it registers its command on commander:
 * each `src/cli/commands/<name>.ts` exports `register<Name>(program, deps)`, which adds the command with its
 * flags, help and the function it runs.
 */
import type { Command, OptionValues } from "commander";
import type { CliIo } from "./io.js";

/**
 * What a command runs: its flags as commander parsed them (typed by the command), its arguments in order,
 * and the io; resolves to the exit code (0 ok, 1 failure). A `UsageError` it throws is a usage error (exit 2,
 * the message and the command's usage on stderr).
 */
export type CommandRun<T extends OptionValues> = (opts: T, args: readonly string[], io: CliIo) => Promise<number>;

export interface CliDeps {
  /** Makes `cmd` run `run` when it is chosen. */
  action<T extends OptionValues>(cmd: Command, run: CommandRun<T>): void;
  /**
   * The group command `name` under `program` (`policy`, `certs`, `manifests`) with its one-line `summary`,
   * made on first use; a mistyped subcommand of it is answered with the ones there are.
   */
  group(program: Command, name: string, summary: string): Command;
}

/** The flags of a command that takes none. */
export type NoFlags = Record<string, never>;

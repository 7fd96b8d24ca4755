/**
 * @module
 * `quartermaster`: one command line run against the program with every command (./command-modules.ts: one
 * module each under src/cli/commands/).
 */
import { COMMAND_MODULES } from "./command-modules.js";
import type { CliIo } from "./io.js";
import { runWith } from "./program-run.js";

export { DESCRIPTION, NAME } from "./program-run.js";

/** Runs one command line; resolves to the process exit code (0 ok, 1 failure, 2 usage). */
export function runCli(argv: string[], io: CliIo): Promise<number> {
  return runWith(COMMAND_MODULES, argv, io);
}

/**
 * @module
 * `quartermaster serve` as the serve bundle runs it (release/bundle.ts): the program with the `serve` command alone,
 * so the bundle holds serve's code and no other command's. It parses and answers `serve`'s flags, help and errors
 * exactly as the whole program does (test/unit/cli/serve-cli.test.ts compares the two).
 */
import { registerServe } from "./commands/serve.js";
import type { CliIo } from "./io.js";
import { runWith } from "./program-run.js";

/** Runs `serve ...` (argv from `serve` on); resolves to the process exit code. */
export function runServeCli(argv: string[], io: CliIo): Promise<number> {
  return runWith([registerServe], argv, io);
}

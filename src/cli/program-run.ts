/**
 * @module
 * One command line run against a program of some commands (./program.ts): every command for `quartermaster`
 * (./commands.ts), `serve` alone in the serve bundle (./serve-cli.ts). Heavy modules (the Kubernetes client,
 * @peculiar/x509) are imported only by the commands that use them, when they run, so `serve` starts fast.
 */
import { findPackage } from "./build-info.js";
import type { CliIo } from "./io.js";
import { runProgram, type CommandModule, type ProgramOptions } from "./program.js";

export const NAME = "quartermaster";
export const DESCRIPTION = "Admission webhooks and reconciler for GPU training clusters on Kubernetes.";

/**
 * The package's version; for `--version` alone, with the commit and build date (`version` prints everything),
 * read only then: other commands (`serve`) start without asking git.
 */
async function version(argv: readonly string[]): Promise<string> {
  const pkg = await findPackage(NAME);
  const v = pkg?.version ?? "unknown";
  if (!pkg || !(argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V"))) return v;
  const { readBuildInfo, OWN_BUILD_INFO } = await import("./build-info.js");
  const info = await readBuildInfo({ file: OWN_BUILD_INFO, root: pkg.root });
  return `${v} (commit ${info.commit}, built ${info.buildDate})`;
}

/** Runs one command line against a program of `modules`; resolves to the process exit code (0 ok, 1 failure, 2 usage). */
export async function runWith(modules: readonly CommandModule[], argv: string[], io: CliIo): Promise<number> {
  const opts: ProgramOptions = { name: NAME, version: await version(argv), description: DESCRIPTION };
  return runProgram(argv, io, opts, modules);
}

/**
 * @module
 * `quartermaster`: one command line run against the program (./program.ts), which composes the commands of
 * src/cli/commands/, one module each. Heavy modules (the Kubernetes client, @peculiar/x509) are imported only
 * by the commands that use them, when they run, so `serve` starts fast.
 */
import { readFile } from "node:fs/promises";
import type { CliIo } from "./io.js";
import { runProgram, type ProgramOptions } from "./program.js";

export const NAME = "quartermaster";
export const DESCRIPTION = "Admission webhooks and reconciler for GPU training clusters on Kubernetes.";

/** The package's version: package.json, two levels up from src/cli (three from dist/src/cli). */
async function version(): Promise<string> {
  for (const up of ["../..", "../../.."]) {
    try {
      const pkg = JSON.parse(await readFile(new URL(`${up}/package.json`, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === NAME && pkg.version) return pkg.version;
    } catch {
      // not here; try the next level
    }
  }
  return "unknown";
}

/** Runs one command line; resolves to the process exit code (0 ok, 1 failure, 2 usage). */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const opts: ProgramOptions = { name: NAME, version: await version(), description: DESCRIPTION };
  return runProgram(argv, io, opts);
}

/**
 * @module
 * `quartermaster serve` as the serve bundle runs it (release/bundle.ts): the program with the `serve` command alone,
 * so the bundle holds serve's code and no other command's. It parses and answers `serve`'s flags, help and errors
 * exactly as the whole program does (test/unit/cli/serve-cli.test.ts compares the two).
 */
import { registerServe } from "./commands/serve.js";
import type { CliIo } from "./io.js";
import { runWith } from "./program-run.js";
import type { ServeModules } from "./serve-modules.js";
import { createEventWriter } from "../kube/events.js";
import { createJobReader } from "../kube/jobs.js";
import { ledgerCapacity } from "../run/capacity.js";
import { createAdmissionMetrics } from "../server/metrics.js";
import { startServer } from "../server/serve.js";
import { createWebhooks } from "../../webhooks/index.js";

/** What `serve` runs, imported with this module (./serve-modules.ts says why). */
const MODULES: ServeModules = { startServer, createAdmissionMetrics, createWebhooks, createJobReader, createEventWriter, ledgerCapacity };

/** Runs `serve ...` (argv from `serve` on); resolves to the process exit code. */
export function runServeCli(argv: string[], io: CliIo): Promise<number> {
  return runWith([(program, deps) => registerServe(program, deps, () => Promise.resolve(MODULES))], argv, io);
}

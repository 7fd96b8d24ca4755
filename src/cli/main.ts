/**
 * @module
 * The process entry point of `quartermaster`: every command (./commands.ts), run on this process (./process-io.ts).
 */
import { runCli } from "./commands.js";
import { runProcess } from "./process-io.js";

await runProcess(runCli);

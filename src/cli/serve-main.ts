/**
 * @module
 * The serve bundle's entry point (release/bundle.ts; bin/quartermaster.js runs it for `serve`): the program with
 * `serve` alone (./serve-cli.ts), run on this process (./process-io.ts).
 */
import { runProcess } from "./process-io.js";
import { runServeCli } from "./serve-cli.js";

await runProcess(runServeCli);

/**
 * @module
 * The process entry point of `quartermaster`: wires argv, stdio and signals to the commands.
 * Nothing else in the project touches `process`.
 */
import { runCli } from "./commands.js";

const shutdown = new Promise<string>((resolve) => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve(signal));
});

const code = await runCli(process.argv.slice(2), {
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
  cwd: process.cwd(),
  stdin: async () => {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  },
  shutdown,
});
process.exitCode = code;
// A served process ends here after draining; anything still holding the loop must not keep it alive.
if (code !== 0 || ["serve", "dev", "reconcile"].includes(process.argv[2] ?? "")) setTimeout(() => process.exit(code), 100).unref();

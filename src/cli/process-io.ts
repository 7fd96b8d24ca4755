/**
 * @module
 * How an entry point runs a command line in this process: argv, stdio and signals wired to a {@link CliIo}, the exit
 * code set, and a served process ended once it has drained. The two entry points (./main.ts, every command, and
 * ./serve-main.ts, the serve bundle's) are this; nothing else in the project touches `process`.
 */
import type { CliIo } from "./io.js";

/** Runs `run` on this process's command line (from the command on) and sets the exit code it resolves to. */
export async function runProcess(run: (argv: string[], io: CliIo) => Promise<number>): Promise<void> {
  const shutdown = new Promise<string>((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve(signal));
  });
  const code = await run(process.argv.slice(2), {
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
}

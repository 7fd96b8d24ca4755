/**
 * @module
 * What a command may touch, passed in by the entry point so commands run the same in tests.
 */
export interface CliIo {
  stdout(line: string): void;
  stderr(line: string): void;
  cwd: string;
  /** The whole of standard input (`-f -`); absent where there is none to read. */
  stdin?: () => Promise<string>;
  /** Resolves with the signal name when the process is asked to stop (SIGTERM, SIGINT). */
  shutdown: Promise<string>;
}

/**
 * The command line of Quartermaster's `serve` as the benchmarks run it (bench/admission, bench/cold-start): the
 * built package's `bin/quartermaster.js serve`, as the image runs it, on 127.0.0.1 and a port of the bench's
 * choosing, metrics on any free port, job lookups against the stand-in apiserver's kubeconfig (./job-api.ts).
 */
import { join } from "node:path";

export interface ServeArgs {
  /** The package whose bin/quartermaster.js runs (the checkout, or another build to compare with). */
  root: string;
  port: number;
  certFile: string;
  keyFile: string;
  kubeconfig: string;
  /** Node's own flags, before the script (`--cpu-prof`, say). */
  nodeFlags?: readonly string[];
  /** More flags of `serve`, after the common ones. */
  serveFlags?: readonly string[];
}

/** node's arguments for `serve` (the node binary not included). */
export function serveArgs(a: ServeArgs): string[] {
  return [
    ...(a.nodeFlags ?? []),
    join(a.root, "bin/quartermaster.js"),
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    String(a.port),
    "--tls-cert",
    a.certFile,
    "--tls-key",
    a.keyFile,
    "--metrics-port",
    "0",
    "--kubeconfig",
    a.kubeconfig,
    ...(a.serveFlags ?? []),
  ];
}

/** `--node-flags "a b"` as a list. */
export const nodeFlagList = (flags: string): string[] => flags.split(" ").filter(Boolean);

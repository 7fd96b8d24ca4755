/**
 * @module
 * `quartermaster ledger`: the GPU device ledger the reconciler keeps, read from the cluster with its
 * checksums verified. Exit 1 when it is absent or corrupt.
 */
import type { Command } from "commander";
import type { CliDeps } from "../deps.js";
import {
  INTERACTIVE_REQUEST_TIMEOUT_MS,
  kubeconfigOption,
  namespaceOption,
  outputOption,
  requestTimeoutOption,
  waitingLine,
  type TableOrJson,
} from "../flags.js";
import type { CliIo } from "../io.js";
import { ownNamespace } from "../policy-file.js";

type LedgerOptions = { output: TableOrJson; namespace?: string; kubeconfig?: string; requestTimeout?: number };

async function ledgerCommand(opts: LedgerOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const namespace = await ownNamespace(opts.namespace);
  const [{ readClusterLedger }, { ledgerTable }, { settledUsage }] = await Promise.all([
    import("../../kube/ledger.js"),
    import("../../reconcile/table.js"),
    import("../../ledger/compute.js"),
  ]);
  const requestTimeoutMs = opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS;
  io.stderr(waitingLine("ledger", `reading the device ledger in namespace ${namespace} from the cluster`, requestTimeoutMs));
  const read = await readClusterLedger(opts.kubeconfig, namespace, { requestTimeoutMs });
  for (const p of read.problems) io.stderr(`quartermaster: ${p}`);
  if (!read.ledger) {
    io.stderr(`quartermaster: no readable device ledger in namespace ${namespace}; the reconciler writes one each pass`);
    return 1;
  }
  // Every job's GPU-seconds as of the ledger's time (a steady job's are stored as of an earlier one, see Usage.since).
  const ledger = settledUsage(read.ledger);
  io.stdout(opts.output === "json" ? JSON.stringify({ ...ledger, corrupt: read.corrupt }, null, 2) : ledgerTable(ledger));
  return read.corrupt.length > 0 ? 1 : 0;
}

export function registerLedger(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("ledger")
    .summary("print the GPU device ledger (checksums verified)")
    .description("Print the GPU device ledger the reconciler keeps in --namespace (checksums verified). Exit 1 if absent or corrupt.")
    .addOption(outputOption("ledger"))
    .addOption(namespaceOption("where the ledger is", "the pod's own, else quartermaster"))
    .addOption(kubeconfigOption())
    .addOption(requestTimeoutOption());
  deps.action(cmd, ledgerCommand);
}

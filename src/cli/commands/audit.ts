/**
 * @module
 * `quartermaster audit [-o table|json] [--namespace N] [--policy F] [--kubeconfig F]`: the pods and training
 * jobs that already run in opted-in namespaces held to the policy (src/reconcile/audit.ts), each violation
 * with its rule, enforcement mode and field path. Read-only. Exit 0 when nothing breaks a rule in `deny`
 * mode, 1 when something does (or the policy is invalid), 2 for a usage error.
 */
import { Option, type Command } from "commander";
import { createLogger } from "../../log.js";
import type { CliDeps } from "../deps.js";
import { INTERACTIVE_REQUEST_TIMEOUT_MS, kubeconfigOption, outputOption, policyOption, requestTimeoutOption, waitingLine, type TableOrJson } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicyOrReport, ownNamespace } from "../policy-file.js";

type AuditOptions = {
  output: TableOrJson;
  /** Audit only this namespace. */
  namespace?: string;
  policy?: string;
  kubeconfig?: string;
  requestTimeout?: number;
};

/** The audit, printed; resolves to the exit code. */
async function auditCommand(opts: AuditOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await loadPolicyOrReport(opts.policy, io);
  if (!policy) return 1;
  const [{ connectPolicyReports, auditCluster }, { auditTable }] = await Promise.all([
    import("../../run/policy-reports.js"),
    import("../../reconcile/audit.js"),
  ]);
  const own = await ownNamespace();
  const requestTimeoutMs = opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS;
  io.stderr(waitingLine("audit", "reading pods and training jobs from the cluster", requestTimeoutMs));
  // stdout carries the result: logs (job kinds not installed) go to stderr.
  const log = createLogger("warn", 2);
  const result = await auditCluster({
    client: await connectPolicyReports(opts.kubeconfig, { requestTimeoutMs }),
    policy,
    ownNamespace: own,
    log,
    ...(opts.namespace !== undefined ? { only: opts.namespace } : {}),
  });
  if (result.outOfScope) {
    io.stderr(`quartermaster: audit: ${result.outOfScope}`);
    return 1;
  }
  io.stdout(opts.output === "json" ? JSON.stringify({ namespaces: result.namespaces, objects: result.entries }, null, 2) : auditTable(result.entries));
  return result.entries.some((e) => e.violations.some((v) => v.mode === "deny")) ? 1 : 0;
}

export function registerAudit(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("audit")
    .summary("hold what already runs in opted-in namespaces to the policy")
    .description(
      `Hold the pods and training jobs that already run in opted-in namespaces (only --namespace with it) to the
policy: every violation with its rule, mode and field. (reconciler.policyReports writes the same as PolicyReports.)`,
    )
    .addOption(outputOption("audit"))
    .addOption(new Option("--namespace <name>", "only this namespace"))
    .addOption(policyOption())
    .addOption(kubeconfigOption())
    .addOption(requestTimeoutOption())
    .addHelpText("after", "\nExit codes: 0 nothing breaks a deny rule, 1 something does (or the cluster cannot be read), 2 usage.");
  deps.action(cmd, auditCommand);
}

/**
 * @module
 * `quartermaster audit [-o table|json] [--namespace N] [--policy F] [--kubeconfig F]`: the pods and training
 * jobs that already run in opted-in namespaces held to the policy (src/reconcile/audit.ts), each violation
 * with its rule, enforcement mode and field path. Read-only. Exit 0 when nothing breaks a rule in `deny`
 * mode, 1 when something does (or the policy is invalid), 2 for a usage error.
 */
import { PolicyError, UsageError } from "../core/errors.js";
import { createLogger } from "../log.js";
import type { Policy } from "../policy/types.js";
import type { CliIo } from "./io.js";
import { loadPolicy, ownNamespace } from "./policy-file.js";

export interface AuditCliOptions {
  output: "table" | "json";
  /** Audit only this namespace. */
  namespace?: string;
  policy?: string;
  kubeconfig?: string;
}

/** `quartermaster audit`, its flags parsed by the command line (src/cli/commands.ts). */
export async function auditCommand(values: Record<string, unknown>, io: CliIo): Promise<number> {
  const output = (values.output as string | undefined) ?? "table";
  if (output !== "table" && output !== "json") throw new UsageError("audit: -o must be table or json");
  return audit(
    {
      output,
      namespace: values.namespace as string | undefined,
      policy: values.policy as string | undefined,
      kubeconfig: values.kubeconfig as string | undefined,
    },
    io,
  );
}

/** The audit, printed; resolves to the exit code. */
export async function audit(opts: AuditCliOptions, io: CliIo): Promise<number> {
  let policy: Policy;
  try {
    policy = await loadPolicy(opts.policy, io.cwd);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    io.stderr(err.message);
    return 1;
  }
  const [{ connectPolicyReports, auditCluster }, { auditTable }] = await Promise.all([import("../kube/policy-reports.js"), import("../reconcile/audit.js")]);
  const own = await ownNamespace();
  // stdout carries the result: logs (job kinds not installed) go to stderr.
  const log = createLogger("warn", 2);
  const result = await auditCluster({
    client: await connectPolicyReports(opts.kubeconfig),
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

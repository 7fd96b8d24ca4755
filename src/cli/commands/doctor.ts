/**
 * @module
 * `quartermaster doctor`: reads the installation and prints findings (src/doctor); the exit code is the worst
 * one's (0 healthy, 1 warnings, 2 critical). A cluster that cannot be read at all is critical: nothing can be
 * vouched for. An invalid --policy is a usage error.
 */
import { Option, type Command } from "commander";
import { PolicyError, UsageError, errorMessage } from "../../core/errors.js";
import type { Policy } from "../../policy/types.js";
import type { CliDeps } from "../deps.js";
import { INTERACTIVE_REQUEST_TIMEOUT_MS, kubeconfigOption, outputOption, policyOption, requestTimeoutOption, waitingLine, type TableOrJson } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicy } from "../policy-file.js";

type DoctorOptions = { output: TableOrJson; namespace: string; policy?: string; kubeconfig?: string; requestTimeout?: number };

/** The policy to check the installation against; its problems are a usage error (exit 2). */
async function doctorPolicy(file: string | undefined, cwd: string): Promise<Policy> {
  try {
    return await loadPolicy(file, cwd);
  } catch (err) {
    if (err instanceof PolicyError) throw new UsageError(err.message);
    throw err;
  }
}

async function doctorCommand(opts: DoctorOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const policy = await doctorPolicy(opts.policy, io.cwd);
  const [{ readDoctorSnapshot }, { diagnose, unreachable, findingsTable }] = await Promise.all([
    import("../../run/doctor.js"),
    import("../../doctor/index.js"),
  ]);
  const { kubeconfig, namespace } = opts;
  const requestTimeoutMs = opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS;
  io.stderr(waitingLine("doctor", `reading the installation in namespace ${namespace} from the cluster`, requestTimeoutMs));
  let report;
  try {
    const snapshot = await readDoctorSnapshot({
      kubeconfig,
      requestTimeoutMs,
      namespace,
      policy,
      now: () => new Date(),
      readLedger: async () => {
        const [{ readClusterLedger }, { ledgerState }] = await Promise.all([import("../../kube/ledger.js"), import("../../doctor/ledger.js")]);
        return ledgerState(await readClusterLedger(kubeconfig, namespace, { requestTimeoutMs }));
      },
    });
    report = diagnose(snapshot, policy);
  } catch (err) {
    report = unreachable(errorMessage(err));
  }
  io.stdout(opts.output === "json" ? JSON.stringify(report, null, 2) : findingsTable(report));
  return report.exitCode;
}

export function registerDoctor(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("doctor")
    .summary("check an installation for what would stop admissions or go stale")
    .description(
      `Check an installation for what would stop admissions or go stale: webhooks and their endpoints, caBundle
against the served certificate, certificate expiry, namespace selectors, side effects, timeouts, the
reconciler's last pass, the ledger, RBAC, and with Kueue its quotas, webhooks and flavors (docs/operations.md).`,
    )
    .addOption(outputOption("doctor"))
    .addOption(new Option("--namespace <name>", "Quartermaster's namespace").default("quartermaster", "quartermaster"))
    .addOption(policyOption())
    .addOption(kubeconfigOption())
    .addOption(requestTimeoutOption())
    .addHelpText("after", "\nExit codes: 0 healthy, 1 warnings, 2 critical.");
  deps.action(cmd, doctorCommand);
}

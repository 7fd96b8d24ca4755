/**
 * @module
 * `quartermaster explain <kind>/<name>`: why a job is not running (issue 49). Reads the job's evidence from the
 * API (src/run/explain-read.ts) and prints the verdict (src/explain/verdict.ts): one main reason, the evidence,
 * the next step, and the other reasons that hold. Exit 0 when the job runs or has finished, 1 when it is held
 * back (or not found), 2 for a usage error (an unknown kind).
 */
import { Option, type Command } from "commander";
import { UsageError } from "../../core/errors.js";
import type { CliDeps } from "../deps.js";
import { INTERACTIVE_REQUEST_TIMEOUT_MS, kubeconfigOption, oneOf, policyOption, requestTimeoutOption, waitingLine } from "../flags.js";
import type { CliIo } from "../io.js";
import { loadPolicy } from "../policy-file.js";

type Output = "table" | "json" | "yaml";
type ExplainOptions = { output: Output; namespace: string; ledgerNamespace: string; policy?: string; kubeconfig?: string; requestTimeout?: number };

async function explainCommand(opts: ExplainOptions, args: readonly string[], io: CliIo): Promise<number> {
  const target = args[0] ?? "";
  const slash = target.indexOf("/");
  if (slash <= 0 || slash === target.length - 1) throw new UsageError(`explain: name the job as <kind>/<name>, got ${JSON.stringify(target)}`);
  const policy = await loadPolicy(opts.policy, io.cwd);
  const [{ knownKinds, resolveKind }, { explainJob, isBlocked }, { verdictText }, { restClient }, { readExplainEvidence }] = await Promise.all([
    import("../../explain/kinds.js"),
    import("../../explain/verdict.js"),
    import("../../explain/format.js"),
    import("../../kube/rest.js"),
    import("../../run/explain-read.js"),
  ]);
  const kind = resolveKind(target.slice(0, slash), knownKinds(policy));
  if ("problem" in kind) throw new UsageError(`explain: ${kind.problem}`);
  const requestTimeoutMs = opts.requestTimeout ?? INTERACTIVE_REQUEST_TIMEOUT_MS;
  const rest = await restClient(opts.kubeconfig, { requestTimeoutMs });
  if (!rest) {
    io.stderr("quartermaster: explain reads the API with a plain client: this kubeconfig needs an exec or auth-provider plugin it does not run");
    return 1;
  }
  io.stderr(waitingLine("explain", `reading ${target} in namespace ${opts.namespace} and its pods, nodes and queue from the cluster`, requestTimeoutMs));
  const read = await readExplainEvidence({
    rest,
    policy,
    kind,
    namespace: opts.namespace,
    name: target.slice(slash + 1),
    ledgerNamespace: opts.ledgerNamespace,
  });
  for (const p of read.problems) io.stderr(`quartermaster: ${p}`);
  const verdict = explainJob(read.evidence, new Date());
  if (opts.output === "json") io.stdout(JSON.stringify(verdict, null, 2));
  else if (opts.output === "yaml") io.stdout((await import("yaml")).stringify(verdict).trimEnd());
  else io.stdout(verdictText(verdict));
  return isBlocked(verdict.reason) ? 1 : 0;
}

export function registerExplain(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("explain")
    .argument("<kind/name>", "the job, e.g. pytorchjob/llm, jobset/train, job/prep, trainjob/llm")
    .summary("say why a job is not running: one reason, its evidence and the next step")
    .description(
      `Say why a job is not running: one main reason (refused, queued, inadmissible, no-controller, controller-error,
phantom-reservation, stale-node, untolerated-taint, no-matching-node, no-gpu-shape, dra-unsatisfiable,
gang-partial, warned, running, finished), the evidence (objects, numbers, messages) and the next step, read from
the API (docs/explain.md). Kinds: the policy's job kinds, batch Job, JobSet and TrainJob, case-insensitive.`,
    )
    .addOption(new Option("-n, --namespace <name>", "the job's namespace").default("default", "default"))
    .addOption(
      new Option("-o, --output <format>", "table, json or yaml")
        .argParser(oneOf<Output>(["table", "json", "yaml"], () => "explain: -o must be table, json or yaml"))
        .default("table", "table"),
    )
    .addOption(new Option("--ledger-namespace <name>", "where the device ledger is").default("quartermaster", "quartermaster"))
    .addOption(policyOption())
    .addOption(kubeconfigOption())
    .addOption(requestTimeoutOption())
    .addHelpText("after", "\nExit codes: 0 running or finished, 1 held back or not found, 2 usage.");
  deps.action(cmd, explainCommand);
}

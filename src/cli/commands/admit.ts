/**
 * @module
 * `quartermaster admit -f FILE...`: objects from files through the webhooks, without a cluster (../admit.ts,
 * imported when the command runs: it brings the webhooks and the YAML parser).
 */
import { Option, type Command } from "commander";
import type { AdmitCliOptions } from "../admit-command.js";
import type { CliDeps } from "../deps.js";
import { oneOf, policyOption } from "../flags.js";
import type { CliIo } from "../io.js";

async function admitFilesCommand(opts: AdmitCliOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const { admitCommand } = await import("../admit-command.js");
  return admitCommand(opts, io);
}

export function registerAdmit(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("admit")
    .summary("run objects from files through the webhooks, without a cluster")
    .description(
      `Run pods, pod templates (in Deployments, StatefulSets, Jobs, CronJobs, ...) and training jobs from files
through the same mutating and validating webhooks as the server, without a cluster: prints the outfitted objects
(or their JSON patches) on stdout and every warning and violation, with its field path, on stderr. A training
job among the inputs is what its pods' job lookup finds. Assumes the namespace is opted in.`,
    )
    .addOption(new Option("-f, --filename <file...>", "YAML or JSON file (multi-document), or a directory of them (required)"))
    .addOption(policyOption())
    .addOption(
      new Option("-o, --output <format>", "yaml, json (a List) or patch (JSON patch per object)")
        .argParser(oneOf<AdmitCliOptions["output"]>(["yaml", "json", "patch"], () => "admit: -o must be yaml, json or patch"))
        .default("yaml", "yaml"),
    )
    .addOption(new Option("-n, --namespace <name>", "namespace of objects that name none").default("default", "default"))
    .addOption(new Option("--strict", "an unknown kind or an apiVersion/kind mismatch fails the run (exit 1); a warning otherwise"))
    .addOption(new Option("--pods", "also admit every replica pod of each training job, as the training operator creates them"))
    .addHelpText(
      "after",
      "\nExit codes: 0 every object allowed, 1 something denied (or unreadable input), 2 usage.\nExample: quartermaster admit -f examples/pytorchjob.yaml --pods --policy my-policy.yaml",
    );
  deps.action(cmd, admitFilesCommand);
}

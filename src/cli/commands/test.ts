/**
 * @module
 * `quartermaster test PATH`: declarative policy tests (*.test.yaml) through `admit`'s offline pipeline, a
 * pass/fail table (../policy-test.ts, imported when the command runs: it brings ajv and the webhooks).
 */
import type { Command } from "commander";
import type { CliDeps, NoFlags } from "../deps.js";
import type { CliIo } from "../io.js";

async function policyTestsCommand(_opts: NoFlags, [target]: readonly string[], io: CliIo): Promise<number> {
  const { policyTestCommand } = await import("../policy-test.js");
  return policyTestCommand(target, io);
}

export function registerTest(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("test")
    .summary("run declarative policy tests (*.test.yaml) and print a pass/fail table")
    .description(
      `Run the policy tests in the *.test.yaml files under a directory (or one such file): each names resources and a
policy, and what must come of each object (allowed or denied and by which rules, violations, warnings, env
values, tolerations, affinity, labels). The objects go through the same offline pipeline as \`admit\`.
The file format: docs/policy.md, "Policy tests"; examples: examples/policy-tests/.`,
    )
    .argument("<path>", "directory (searched recursively) or test file")
    .addHelpText("after", "\nExit codes: 0 every expectation holds, 1 one fails or a test file is invalid, 2 usage.");
  deps.action(cmd, policyTestsCommand);
}

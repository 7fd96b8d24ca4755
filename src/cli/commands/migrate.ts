/**
 * @module
 * `quartermaster migrate -f job.yaml`: v1 TFJob / PyTorchJob / XGBoostJob / JAXJob in, Kubeflow Trainer v2
 * objects out (src/migrate/), as YAML on stdout (or `-o <file>`), each job's objects headed by a
 * `# not carried over` comment block, and the same table on stderr. Reads the input the way `admit` does
 * (YAML 1.1 as kubectl, multi-document, Lists). Its modules are loaded only when it runs.
 *
 * Exit codes: 0 every job migrated (whatever was not carried is in the table), 1 an input is not a job it takes
 * or cannot be read, 2 usage.
 */
import { Option, type Command } from "commander";
import type { CliDeps } from "../deps.js";
import type { CliIo } from "../io.js";
import { UsageError } from "../../core/errors.js";

interface MigrateOptions {
  filename?: string[];
  output?: string;
}

async function migrateCommand(values: MigrateOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const files = values.filename ?? [];
  if (files.length === 0) throw new UsageError("migrate: -f <file> is required");
  const [fs, path, yaml, admit, m, r] = await Promise.all([
    import("node:fs/promises"),
    import("node:path"),
    import("yaml"),
    import("../admit-input.js"),
    import("../../migrate/migrate.js"),
    import("../../migrate/render.js"),
  ]);
  const out: string[] = [];
  let failed = false;
  for (const file of files) {
    let text: string;
    try {
      text = await fs.readFile(path.resolve(io.cwd, file), "utf8");
    } catch (err) {
      io.stderr(`quartermaster: ${file}: cannot read: ${(err as Error).message}`);
      failed = true;
      continue;
    }
    let objects;
    try {
      objects = admit.parseObjects(text, file);
    } catch (err) {
      io.stderr(`quartermaster: ${(err as Error).message}`);
      failed = true;
      continue;
    }
    for (const { source, object } of objects) {
      if (!m.isMigratable(object)) {
        io.stderr(`quartermaster: ${source}: ${String(object.apiVersion)} ${String(object.kind)} is not a v1 TFJob, PyTorchJob, XGBoostJob or JAXJob`);
        failed = true;
        continue;
      }
      let migration;
      try {
        migration = m.migrate(object);
      } catch (err) {
        io.stderr(`quartermaster: ${source}: ${(err as Error).message}`);
        failed = true;
        continue;
      }
      const name = `${String(object.kind)} ${String((object.metadata as { name?: string } | undefined)?.name)}`;
      const table = r.notCarriedLines(name, migration.notCarried);
      for (const line of table) io.stderr(line);
      const docs = migration.objects.map((o) => yaml.stringify(o, { lineWidth: 0 }).trimEnd());
      out.push([...table.map((l) => `# ${l}`), docs.join("\n---\n")].join("\n"));
    }
  }
  const yamlText = out.length ? `${out.join("\n---\n")}\n` : "";
  const target = values.output;
  if (target) await fs.writeFile(path.resolve(io.cwd, target), yamlText);
  else if (yamlText) io.stdout(yamlText.trimEnd());
  return failed ? 1 : 0;
}

export function registerMigrate(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("migrate")
    .summary("turn v1 training jobs (TFJob, PyTorchJob, XGBoostJob, JAXJob) into Kubeflow Trainer v2 TrainJobs")
    .description(
      `Turn training-operator v1 jobs into Kubeflow Trainer v2 TrainJobs (trainer.kubeflow.org/v1alpha1), printed as YAML:
PyTorchJob, XGBoostJob and JAXJob on the upstream runtimes torch-distributed, xgboost-distributed and
jax-distributed; a TFJob with a TrainingRuntime of its own (<job>-tensorflow) whose pods Quartermaster gives
TF_CONFIG. What a TrainJob cannot carry (per-replica templates, restartPolicy, runPolicy fields without a
TrainJob meaning, ...) is listed on stderr and in a "# not carried over" comment above each job's objects.`,
    )
    .addOption(new Option("-f, --filename <file...>", "YAML or JSON file of v1 jobs (multi-document; required)"))
    .addOption(new Option("-o, --output <file>", "write the YAML to this file instead of stdout"))
    .addHelpText(
      "after",
      "\nExit codes: 0 every job migrated, 1 an input is not a v1 job it takes (or unreadable), 2 usage.\nExample: quartermaster migrate -f tfjob.yaml > trainjob.yaml",
    );
  deps.action(cmd, migrateCommand);
}

/**
 * @module
 * `quartermaster version`: this build (version, commit, build date; src/cli/build-info.ts) and the versions of
 * Kubernetes, the training operator, Trainer, JobSet and Kueue it supports (src/core/supported.ts).
 */
import type { Command } from "commander";
import type { SupportedVersions } from "../../core/supported.js";
import type { BuildInfo } from "../build-info.js";
import type { CliDeps } from "../deps.js";
import { outputOption, type TableOrJson } from "../flags.js";
import type { CliIo } from "../io.js";

export interface VersionReport {
  version: string;
  commit: string;
  buildDate: string;
  /** Where commit and build date came from: `build` (build-info.json), `git` (a checkout), `none`. */
  buildInfo: BuildInfo["source"];
  supported: SupportedVersions;
}

/** The report of a build, pure. */
export function versionReport(version: string, info: BuildInfo, supported: SupportedVersions): VersionReport {
  return { version, commit: info.commit, buildDate: info.buildDate, buildInfo: info.source, supported };
}

/** The report as `key: value` lines, aligned. */
export function versionTable(r: VersionReport): string {
  const k = r.supported.kubernetes;
  const date = r.buildInfo === "build" ? r.buildDate : `${r.buildDate} (running from source)`;
  const rows: Array<[string, string]> = [
    ["version", r.version],
    ["commit", r.commit],
    ["build date", date],
    ["kubernetes", `${k.from} to ${k.to} (tested: ${k.tested.join(", ")})`],
    ["training-operator", r.supported.trainingOperator],
    ["trainer", r.supported.trainer],
    ["jobset", r.supported.jobset],
    ["kueue", r.supported.kueue],
  ];
  const width = Math.max(...rows.map(([key]) => key.length)) + 2;
  return rows.map(([key, value]) => `${`${key}:`.padEnd(width)}${value}`).join("\n");
}

async function versionCommand(opts: { output: TableOrJson }, _args: readonly string[], io: CliIo): Promise<number> {
  const [{ findPackage, readBuildInfo, OWN_BUILD_INFO, UNKNOWN }, { SUPPORTED_VERSIONS }] = await Promise.all([
    import("../build-info.js"),
    import("../../core/supported.js"),
  ]);
  const pkg = await findPackage("quartermaster");
  const info: BuildInfo = pkg ? await readBuildInfo({ file: OWN_BUILD_INFO, root: pkg.root }) : { commit: UNKNOWN, buildDate: UNKNOWN, source: "none" };
  const report = versionReport(pkg?.version ?? UNKNOWN, info, SUPPORTED_VERSIONS);
  io.stdout(opts.output === "json" ? JSON.stringify(report, null, 2) : versionTable(report));
  return 0;
}

export function registerVersion(program: Command, deps: CliDeps): void {
  const version = program
    .command("version")
    .summary("print the version, commit, build date and supported Kubernetes, Trainer, JobSet, Kueue versions")
    .description(
      `Print this build's version, commit and build date (from build-info.json, written by npm run build; from git
in a checkout running from source; else unknown) and the versions it supports: Kubernetes, the Kubeflow training
operator, Trainer, JobSet and Kueue. --version prints the first three on one line.`,
    )
    .addOption(outputOption("version"));
  deps.action(version, versionCommand);
}

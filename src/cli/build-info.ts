/**
 * @module
 * Which build this is: the commit and build date, from `build-info.json` written by `npm run build`
 * (src/cli/write-build-info.ts: the commit from `QM_BUILD_COMMIT` or git, the date from `SOURCE_DATE_EPOCH` so a
 * release rebuilt from the same commit is byte-identical, else the clock), or, in a checkout running from
 * source, the commit from git. Git is asked only in the package's own checkout (its root has `.git`, so an
 * installed package never reports the commit of the project around it), with a time limit: a missing, slow or
 * refusing git gives "unknown", never a hang or an error.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const UNKNOWN = "unknown";
export const BUILD_INFO_FILE = "build-info.json";

export interface BuildInfo {
  commit: string;
  /** ISO 8601 UTC, or "unknown" when running from source. */
  buildDate: string;
  /** Where commit and date came from: the build's file, git in a checkout, or nowhere. */
  source: "build" | "git" | "none";
}

/** git's answer (trimmed), or undefined on any failure, including not answering within `timeoutMs`. */
export function gitOutput(dir: string, args: readonly string[], opts: { git?: string; timeoutMs?: number } = {}): Promise<string | undefined> {
  if (!existsSync(join(dir, ".git"))) return Promise.resolve(undefined);
  return new Promise((done) => {
    execFile(opts.git ?? "git", ["-C", dir, ...args], { timeout: opts.timeoutMs ?? 2000, killSignal: "SIGKILL", windowsHide: true }, (err, stdout) =>
      done(err ? undefined : stdout.trim() || undefined),
    );
  });
}

const isCommit = (s: string | undefined): s is string => s !== undefined && /^[0-9a-f]{7,64}$/.test(s);

/** The package's root and version: package.json two levels up from src/cli, three from dist/src/cli. */
export async function findPackage(name: string): Promise<{ root: string; version: string } | undefined> {
  for (const up of ["../..", "../../.."]) {
    const root = new URL(`${up}/`, import.meta.url);
    try {
      const pkg = JSON.parse(await readFile(new URL("package.json", root), "utf8")) as { name?: string; version?: string };
      if (pkg.name === name && pkg.version) return { root: fileURLToPath(root), version: pkg.version };
    } catch {
      // not here; try the next level
    }
  }
  return undefined;
}

/** This build's build-info.json: dist/build-info.json for the compiled code; in a checkout, a file never written. */
export const OWN_BUILD_INFO = fileURLToPath(new URL(`../../${BUILD_INFO_FILE}`, import.meta.url));

/** A build-info.json as written, or undefined when absent or not one. */
async function readFileInfo(file: string): Promise<Omit<BuildInfo, "source"> | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, "utf8"));
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== "object") return undefined;
  const { commit, buildDate } = parsed as Record<string, unknown>;
  return { commit: typeof commit === "string" && commit ? commit : UNKNOWN, buildDate: typeof buildDate === "string" && buildDate ? buildDate : UNKNOWN };
}

export interface BuildInfoSources {
  /** The build-info.json of this build (next to the compiled code). */
  file: string;
  /** The package's root: git is asked there, if it is a checkout. */
  root: string;
  git?: string;
  timeoutMs?: number;
}

/** This build's info: the build's file, else git in a checkout (no build date), else unknown. */
export async function readBuildInfo(src: BuildInfoSources): Promise<BuildInfo> {
  const built = await readFileInfo(src.file);
  if (built) return { ...built, source: "build" };
  const commit = await gitOutput(src.root, ["rev-parse", "HEAD"], src);
  return isCommit(commit) ? { commit, buildDate: UNKNOWN, source: "git" } : { commit: UNKNOWN, buildDate: UNKNOWN, source: "none" };
}

/** An ISO 8601 UTC date to the second. */
export function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/**
 * The build's info, written to `file`: the commit from `QM_BUILD_COMMIT` (a build without .git: the Dockerfile,
 * a release from a tarball) or git, the date from `SOURCE_DATE_EPOCH` (seconds; reproducible builds) or `now`.
 */
export async function writeBuildInfo(
  src: BuildInfoSources & { env: Readonly<Record<string, string | undefined>>; now: () => Date },
): Promise<Omit<BuildInfo, "source">> {
  const given = src.env.QM_BUILD_COMMIT?.trim();
  const commit = given || (await gitOutput(src.root, ["rev-parse", "HEAD"], src));
  const epoch = src.env.SOURCE_DATE_EPOCH?.trim();
  if (epoch && !/^\d+$/.test(epoch)) throw new Error(`SOURCE_DATE_EPOCH must be whole seconds since 1970, got ${JSON.stringify(epoch)}`);
  const info = { commit: commit || UNKNOWN, buildDate: isoSeconds(epoch ? new Date(Number(epoch) * 1000) : src.now()) };
  await writeFile(src.file, JSON.stringify(info, null, 2) + "\n");
  return info;
}

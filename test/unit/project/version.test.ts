/**
 * `quartermaster version` and where its commit and build date come from (src/cli/build-info.ts): a checkout
 * running from source (git), a build with the info injected (QM_BUILD_COMMIT, SOURCE_DATE_EPOCH), no git, a git
 * that fails or never answers (unknown, never a hang). The supported versions it prints are the ones CI builds
 * (test/e2e/<tool>/build.sh).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { readBuildInfo, writeBuildInfo, type BuildInfo } from "../../../src/cli/build-info.js";
import { runCli } from "../../../src/cli/commands.js";
import { SUPPORTED_VERSIONS } from "../../../src/core/supported.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const TMP = mkdtempSync(join(tmpdir(), "qm-version-"));
after(() => rmSync(TMP, { recursive: true, force: true }));

const HEAD = execFileSync("git", ["-C", ROOT, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
const COMMIT = "0123456789abcdef0123456789abcdef01234567";

/** A directory that looks like a checkout (has .git), and a fake git that does `script`. */
function fakeGit(name: string, script: string): { root: string; git: string } {
  const root = join(TMP, name);
  mkdirSync(join(root, ".git"), { recursive: true });
  const git = join(root, "git");
  writeFileSync(git, `#!/bin/sh\n${script}\n`);
  chmodSync(git, 0o755);
  return { root, git };
}

describe("build info", () => {
  const missing = join(TMP, "no-build-info.json");
  const notACheckout = join(TMP, "plain");
  mkdirSync(notACheckout, { recursive: true });
  const garbage = join(TMP, "garbage.json");
  writeFileSync(garbage, "not json");

  const reads: Array<{ name: string; read: () => Promise<BuildInfo>; want: BuildInfo }> = [
    {
      name: "a checkout running from source: git's HEAD, no build date",
      read: () => readBuildInfo({ file: missing, root: ROOT }),
      want: { commit: HEAD, buildDate: "unknown", source: "git" },
    },
    {
      name: "an unreadable build-info.json in a checkout: git's HEAD",
      read: () => readBuildInfo({ file: garbage, root: ROOT }),
      want: { commit: HEAD, buildDate: "unknown", source: "git" },
    },
    {
      name: "not a checkout (an installed package): git is not asked, unknown",
      read: () => readBuildInfo({ file: missing, root: notACheckout, git: "/nonexistent/git" }),
      want: { commit: "unknown", buildDate: "unknown", source: "none" },
    },
    {
      name: "no git binary: unknown",
      read: () => readBuildInfo({ file: missing, root: ROOT, git: join(TMP, "no-such-git") }),
      want: { commit: "unknown", buildDate: "unknown", source: "none" },
    },
    {
      name: "git refuses (dubious ownership, exit 128): unknown",
      read: () => readBuildInfo({ file: missing, ...fakeGit("refusing", "echo 'fatal: detected dubious ownership' >&2; exit 128") }),
      want: { commit: "unknown", buildDate: "unknown", source: "none" },
    },
    {
      name: "git never answers: unknown after the time limit, no hang",
      read: () => readBuildInfo({ file: missing, ...fakeGit("hanging", "exec sleep 60"), timeoutMs: 300 }),
      want: { commit: "unknown", buildDate: "unknown", source: "none" },
    },
    {
      name: "git prints something that is not a commit: unknown",
      read: () => readBuildInfo({ file: missing, ...fakeGit("odd", "echo HEAD") }),
      want: { commit: "unknown", buildDate: "unknown", source: "none" },
    },
  ];
  for (const c of reads) {
    it(c.name, { timeout: 20_000 }, async () => assert.deepEqual(await c.read(), c.want));
  }

  it("a build with the info injected (QM_BUILD_COMMIT, SOURCE_DATE_EPOCH) writes it, byte-identical on a rebuild, and reads it back", async () => {
    const file = join(TMP, "build-info.json");
    const env = { QM_BUILD_COMMIT: COMMIT, SOURCE_DATE_EPOCH: "1764892800" };
    const now = () => new Date("2030-01-01T00:00:00Z");
    await writeBuildInfo({ file, root: notACheckout, env, now });
    const first = readFileSync(file, "utf8");
    await writeBuildInfo({ file, root: notACheckout, env, now: () => new Date("2031-01-01T00:00:00Z") });
    assert.equal(readFileSync(file, "utf8"), first);
    assert.deepEqual(await readBuildInfo({ file, root: ROOT }), { commit: COMMIT, buildDate: "2025-12-05T00:00:00Z", source: "build" });
  });

  it("a build in a checkout without QM_BUILD_COMMIT: git's HEAD and the clock", async () => {
    const file = join(TMP, "build-info-git.json");
    await writeBuildInfo({ file, root: ROOT, env: {}, now: () => new Date("2030-01-02T03:04:05.678Z") });
    assert.deepEqual(await readBuildInfo({ file, root: notACheckout }), { commit: HEAD, buildDate: "2030-01-02T03:04:05Z", source: "build" });
  });

  it("a build without git or QM_BUILD_COMMIT (a container build): commit unknown, still a date", async () => {
    const file = join(TMP, "build-info-none.json");
    await writeBuildInfo({ file, root: notACheckout, env: {}, now: () => new Date("2030-01-02T03:04:05Z") });
    assert.deepEqual(await readBuildInfo({ file, root: ROOT }), { commit: "unknown", buildDate: "2030-01-02T03:04:05Z", source: "build" });
  });

  it("a SOURCE_DATE_EPOCH that is not whole seconds is refused", async () => {
    await assert.rejects(
      writeBuildInfo({ file: join(TMP, "x.json"), root: notACheckout, env: { SOURCE_DATE_EPOCH: "yesterday" }, now: () => new Date() }),
      /SOURCE_DATE_EPOCH/,
    );
  });
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: ROOT, shutdown: new Promise(() => undefined) });
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

describe("quartermaster version", () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

  it("-o json: the package's version, this checkout's commit, and the supported versions", async () => {
    const r = await cli(["version", "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { version, commit: HEAD, buildDate: "unknown", buildInfo: "git", supported: SUPPORTED_VERSIONS });
  });

  it("the table names each version", async () => {
    const r = await cli(["version"]);
    assert.equal(r.code, 0, r.stderr);
    for (const line of [
      new RegExp(`^version: +${version.replaceAll(".", "\\.")}$`, "m"),
      new RegExp(`^commit: +${HEAD}$`, "m"),
      /^build date: +unknown \(running from source\)$/m,
      /^kubernetes: +1\.30 to 1\.37 \(tested: v1\.30\.14, v1\.37\.2\)$/m,
      /^training-operator: +v1\.9\.4$/m,
      /^trainer: +v2\.3\.0$/m,
      /^jobset: +v0\.12\.0$/m,
      /^kueue: +v0\.19\.2$/m,
    ])
      assert.match(r.stdout, line);
  });

  it("the supported versions are the ones CI builds (test/e2e/<tool>/build.sh)", () => {
    const pinned = (script: string, variable: string): string => {
      const m = new RegExp(`^${variable}=(\\S+)`, "m").exec(readFileSync(join(ROOT, "test/e2e", script, "build.sh"), "utf8"));
      assert.ok(m, `${variable} in test/e2e/${script}/build.sh`);
      return m[1]!;
    };
    const cases: Array<[string, string, string]> = [
      ["training-operator", SUPPORTED_VERSIONS.trainingOperator, pinned("operator", "OPERATOR_VERSION")],
      ["trainer", SUPPORTED_VERSIONS.trainer, pinned("trainer", "TRAINER_VERSION")],
      ["jobset", SUPPORTED_VERSIONS.jobset, pinned("jobset", "JOBSET_VERSION")],
      ["kueue", SUPPORTED_VERSIONS.kueue, pinned("kueue", "KUEUE_VERSION")],
      ["kubernetes oldest", SUPPORTED_VERSIONS.kubernetes.tested[0]!, pinned("controlplane", "OLDEST")],
      ["kubernetes newest", SUPPORTED_VERSIONS.kubernetes.tested.at(-1)!, pinned("controlplane", "NEWEST")],
    ];
    for (const [name, have, want] of cases) assert.equal(have, want, name);
    const minor = (v: string) => v.replace(/^v(\d+\.\d+)\..*$/, "$1");
    assert.equal(SUPPORTED_VERSIONS.kubernetes.from, minor(SUPPORTED_VERSIONS.kubernetes.tested[0]!));
    assert.equal(SUPPORTED_VERSIONS.kubernetes.to, minor(SUPPORTED_VERSIONS.kubernetes.tested.at(-1)!));
  });
});

/**
 * README.md and every document under docs/ say only what the repository has: each repository path they name
 * exists (globs and `{a,b}` expanded), each relative link and its `#anchor` resolve, each `"Section"` they send
 * the reader to in another document is a heading there, each `npm run X` is a script of package.json, and each
 * `quartermaster ...` command line names a real command and only its flags (the program's own list,
 * src/cli/command-list.ts). And README.md stays a front page: at most 400 lines, Quick start in its first
 * screen. (What the examples themselves do is test/unit/project/examples.test.ts.)
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, it } from "node:test";
import { COMMANDS } from "../../../src/cli/command-list.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { ROOT } from "../../fixtures/manifests.js";

const README = "README.md";
const DOCS = [
  README,
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
].sort();
const text = (doc: string): string => readFileSync(join(ROOT, doc), "utf8");

/**
 * Named by the docs but made by a command, not committed: `npm start` makes certs/dev (.gitignore), and
 * docs/operations.md's `certs generate --out certs/` writes the pair and its CA there; `npm run release` writes
 * release/out (docs/release.md).
 */
const GENERATED = ["release/out", "certs/dev", "certs/tls.crt", "certs/tls.key", "certs/ca.crt", "certs/ca.key"];
const MAX_README_LINES = 400;
/** The first screen of a terminal or a repository page. */
const FIRST_SCREEN_LINES = 40;

/** The repository's top-level folders: a path the docs name starts with one of them. */
const TOP = readdirSync(ROOT).filter((f) => !["node_modules", "dist", ".git"].includes(f) && statSync(join(ROOT, f)).isDirectory());
// Not preceded by a path or word character: `kubeflow/trainer/manifests/base/runtimes` (upstream's) is not ours.
const PATH = new RegExp(`(?<![\\w./@~$-])(?:${TOP.map((t) => t.replace(".", "\\.")).join("|")})/(?:[\\w.*-]|\\{[\\w.,-]+\\}|/)*`, "g");

/** `a/{b,c}/d` → `a/b/d`, `a/c/d`. */
function expandBraces(path: string): string[] {
  const m = /\{([^}]*)\}/.exec(path);
  if (!m) return [path];
  return m[1]!.split(",").flatMap((alt) => expandBraces(path.slice(0, m.index) + alt + path.slice(m.index + m[0].length)));
}

/** Whether a path with `*` in its segments matches something in the repository. */
function globExists(path: string): boolean {
  const walk = (dir: string, segments: string[]): boolean => {
    if (segments.length === 0) return true;
    const [seg, ...rest] = segments as [string, ...string[]];
    if (seg === "") return walk(dir, rest);
    if (!seg.includes("*")) return existsSync(join(dir, seg)) && walk(join(dir, seg), rest);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) return false;
    const re = new RegExp(`^${seg.replace(/[.+?^$()[\]\\|]/g, "\\$&").replace(/\*/g, ".*")}$`);
    return readdirSync(dir).some((f) => re.test(f) && walk(join(dir, f), rest));
  };
  return walk(ROOT, path.split("/"));
}

/** Each repository path a document names that is not there. */
function missingPaths(doc: string): string[] {
  const missing = new Set<string>();
  for (const m of text(doc).matchAll(PATH)) {
    const path = m[0].replace(/[.-]+$/, "");
    if (GENERATED.some((g) => path === g || path.startsWith(`${g}/`))) continue;
    // The reader's own files in an example (`src/mutate/my-change.ts`, `my-quartermaster/`).
    if (path.split("/").some((s) => s.startsWith("my-"))) continue;
    if (!expandBraces(path).every(globExists)) missing.add(path);
  }
  return [...missing];
}

/** GitHub's anchor of a heading. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");

/** The headings of a document, without `#` marks and backticks, outside fenced code blocks. */
function headings(doc: string): string[] {
  let fenced = false;
  const out: string[] = [];
  for (const line of text(doc).split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    else if (!fenced && /^#{1,6} /.test(line)) out.push(line.replace(/^#+ /, "").replace(/`/g, ""));
  }
  return out;
}

/** Broken relative links (`[x](docs/y.md#z)`, `[x](#z)`). */
function brokenLinks(doc: string): string[] {
  const broken: string[] = [];
  for (const m of text(doc).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    // A URL, or not a link at all: `[a-z]([-a-z0-9]*[a-z0-9])?` in a regular expression the text quotes.
    if (/^[a-z]+:/.test(target) || /[[\]*?]/.test(target)) continue;
    const [file, anchor] = target.split("#") as [string, string | undefined];
    const path = file === "" ? doc : relative(ROOT, join(ROOT, dirname(doc), file));
    if (!existsSync(join(ROOT, path))) broken.push(`${target}: no ${path}`);
    else if (anchor && path.endsWith(".md") && !headings(path).some((h) => slug(h) === anchor)) broken.push(`${target}: no heading #${anchor} in ${path}`);
  }
  return broken;
}

/** `docs/x.md`, "Section" (or `docs/x.md` ("Section")): the section must be a heading of docs/x.md. */
function brokenSectionReferences(doc: string): string[] {
  const broken: string[] = [];
  for (const m of text(doc).matchAll(/((?:docs\/[\w-]+|README)\.md)`?\)?,?\s*\(?"([^"]+)"/g)) {
    const [target, section] = [m[1]!, m[2]!.replace(/`/g, "").replace(/\s+/g, " ")];
    if (!existsSync(join(ROOT, target))) broken.push(`${target}: no such document`);
    else if (!headings(target).some((h) => h.toLowerCase().startsWith(section.toLowerCase()))) broken.push(`${target}: no section "${section}"`);
  }
  return broken;
}

/** Every `npm run <script>` (and `npm test` / `npm start`) a document names that package.json does not have. */
function unknownScripts(doc: string): string[] {
  const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  const named = [
    ...[...text(doc).matchAll(/\bnpm run((?:\s+--?[\w-]+)*)\s+([\w:.-]+)/g)].map((m) => m[2]!),
    ...[...text(doc).matchAll(/\bnpm (test|start)\b/g)].map((m) => m[1]!),
  ];
  return [...new Set(named.filter((s) => !(s in scripts)))];
}

/** The command lines of a document that start with `quartermaster `: in fenced blocks and in `inline code`. */
function commandLines(doc: string): string[] {
  const lines: string[] = [];
  const segments = (line: string): string[] =>
    line
      .replace(/\s#(\s.*)?$/, "")
      .split(/\s(?:&&|\|\||;|>|2>)\s|\s\\?\|\s(?=[a-z])/)
      .map((s) =>
        s
          .trim()
          .replace(/^\$\s+/, "")
          .replace(/^npx\s+/, ""),
      );
  let fenced = false;
  let picture = false;
  for (const line of text(doc).split("\n")) {
    if (line.startsWith("```")) {
      fenced = !fenced;
      // ```text: a picture or an output, no commands.
      picture = fenced && line.trim() === "```text";
      continue;
    }
    if (picture) continue;
    if (fenced) {
      // A synopsis continues a command on indented lines of `[--flag ...]` or `(--a | --b)`.
      if (/^\s+[[(]/.test(line) && lines.length > 0) lines[lines.length - 1] += ` ${segments(line)[0]}`;
      else lines.push(...segments(line).filter((s) => s.startsWith("quartermaster ")));
    } else {
      for (const m of line.matchAll(/`([^`]+)`/g)) lines.push(...segments(m[1]!).filter((s) => s.startsWith("quartermaster ")));
    }
  }
  return lines;
}

const GROUPS = new Set(COMMANDS.filter((c) => c.name.includes(" ")).map((c) => c.name.split(" ")[0]!));
const ANY_COMMAND_FLAGS = new Set(["--help", "-h"]);

/** What is wrong with one `quartermaster ...` line, or undefined. */
function commandProblem(line: string): string | undefined {
  const tokens = line.split(/\s+/).slice(1);
  const first = tokens[0] ?? "";
  // `quartermaster <command> --help`, `quartermaster help <command>`, `quartermaster …` (elided).
  if (first.startsWith("<") || first === "help" || /^(…|\.\.\.)$/.test(first)) return undefined;
  if (first.startsWith("-")) return ["--version", "-V", "--help", "-h"].includes(first) ? undefined : `unknown program flag ${first}`;
  const word = (t: string | undefined): string | undefined => (t && /^[a-z][a-z0-9-]*$/.test(t) ? t : /^([a-z][a-z0-9-]*)\|/.exec(t ?? "")?.[1]);
  const w1 = word(tokens[0]);
  const w2 = word(tokens[1]);
  let entry = COMMANDS.find((c) => c.name === `${w1} ${w2}`) ?? COMMANDS.find((c) => c.name === w1);
  if (!entry) {
    if (w1 && GROUPS.has(w1) && (w2 === undefined || w2 === "help")) return undefined;
    return `no command ${[w1, w2].filter(Boolean).join(" ")}`;
  }
  const short = new Set(Object.values(entry.flags).flatMap((o) => (o.short ? [o.short] : [])));
  for (const t of tokens.slice(entry.name.split(" ").length)) {
    if (t === "--") break;
    const flag = /^[[(]*(--[a-z][\w-]*|-[a-zA-Z])(?![\w-])/.exec(t)?.[1];
    if (!flag || ANY_COMMAND_FLAGS.has(flag)) continue;
    if (flag.startsWith("--") ? !(flag.slice(2) in entry.flags) : !short.has(flag)) return `${entry.name} has no flag ${flag}`;
  }
  entry = undefined;
  return entry;
}

describe("README.md and docs/", () => {
  it("documents checked", () => {
    assert.ok(DOCS.includes(README) && DOCS.length >= 8, DOCS.join(", "));
  });

  for (const doc of DOCS) {
    describe(doc, () => {
      it("every repository path it names exists", () => {
        assert.deepEqual(missingPaths(doc), []);
      });

      it("every relative link and anchor resolves", () => {
        assert.deepEqual(brokenLinks(doc), []);
      });

      it('every "Section" of another document it sends the reader to is a heading there', () => {
        assert.deepEqual(brokenSectionReferences(doc), []);
      });

      it("every `npm run` script it names is in package.json", () => {
        assert.deepEqual(unknownScripts(doc), []);
      });

      it("every `quartermaster` command line names a real command and its real flags", () => {
        const lines = commandLines(doc);
        assert.deepEqual(
          lines.flatMap((l) => {
            const p = commandProblem(l);
            return p ? [`${p}: ${l}`] : [];
          }),
          [],
        );
      });
    });
  }

  it("they are read: the checks find paths and command lines to check", () => {
    const paths = DOCS.flatMap((d) => [...text(d).matchAll(PATH)]).length;
    const commands = DOCS.flatMap(commandLines).length;
    assert.ok(paths > 300 && commands > 40, `${paths} paths, ${commands} command lines`);
  });

  it("docs/http.md's route table has every path the server serves", () => {
    const webhooks = createWebhooks({ policy: defaultPolicy(), log: capturingLogger().log, jobs: fakeJobReader([]), now: () => new Date(0) });
    const routes = text("docs/http.md").split("\n## Routes")[1]!.split("\n## ")[0]!;
    const rows = routes.split("\n").filter((l) => l.startsWith("| "));
    const missing = [...Object.keys(webhooks), "/healthz", "/readyz", "/metrics"].filter((p) => !rows.some((r) => r.includes(`\`${p}\``)));
    assert.deepEqual(missing, []);
  });

  it(`README.md is a front page: at most ${MAX_README_LINES} lines`, () => {
    const lines = text(README).split("\n").length - 1;
    assert.ok(lines <= MAX_README_LINES, `README.md has ${lines} lines; move detail to docs/`);
  });

  it("README.md has Quick start, with how to run it and how to test it, in its first screen", () => {
    const lines = text(README).split("\n");
    const at = lines.findIndex((l) => /^## Quick start/.test(l));
    assert.ok(at >= 0 && at < FIRST_SCREEN_LINES, `## Quick start at line ${at + 1}`);
    const screen = lines.slice(at, FIRST_SCREEN_LINES).join("\n");
    assert.match(screen, /npm ci && npm start/);
    assert.match(screen, /^npm test\b/m);
  });

  describe("the checks themselves find what is wrong", () => {
    const cases: Array<{ name: string; line: string; problem: RegExp | undefined }> = [
      { name: "a real command and flags", line: "quartermaster admit -f x.yaml -n team-a --pods -o patch", problem: undefined },
      { name: "a subcommand", line: "quartermaster policy export-vap [--policy F] [--namespace N]", problem: undefined },
      { name: "a group's help", line: "quartermaster certs help ensure", problem: undefined },
      { name: "a command that does not exist", line: "quartermaster frobnicate", problem: /no command frobnicate/ },
      { name: "a subcommand that does not exist", line: "quartermaster policy lint F", problem: /no command policy lint/ },
      { name: "a flag the command does not have", line: "quartermaster ledger --watch", problem: /ledger has no flag --watch/ },
      { name: "a short flag the command does not have", line: "quartermaster doctor -f x", problem: /doctor has no flag -f/ },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const p = commandProblem(c.line);
        if (c.problem) assert.match(p ?? "(none)", c.problem);
        else assert.equal(p, undefined);
      });
    }

    it("a path that is not in the repository, and one of upstream's that is not ours", () => {
      assert.deepEqual(
        ["manifests/base/runtimes", "test/e2e/{trainer,nothing}/build.sh", "test/e2e/nothing*.test.ts", "docs/x.md"].filter(
          (p) => !expandBraces(p).every(globExists),
        ),
        ["manifests/base/runtimes", "test/e2e/{trainer,nothing}/build.sh", "test/e2e/nothing*.test.ts", "docs/x.md"],
      );
      assert.deepEqual(
        [..."kubeflow/trainer/manifests/base/runtimes and `manifests/base`".matchAll(PATH)].map((m) => m[0]),
        ["manifests/base"],
      );
    });
  });
});

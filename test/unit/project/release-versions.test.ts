/**
 * One version names a release (CHANGELOG.md's preamble): package.json's, the chart's `version` and `appVersion`,
 * the image tag in every manifest under manifests/ and in the chart's values, and the top entry of CHANGELOG.md
 * (with its Upgrading section). A release bumps them together or this fails, naming the one left behind.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import { parse as parseYaml } from "yaml";

const ROOT = resolve(import.meta.dirname, "../../..");
const read = (file: string): string => readFileSync(join(ROOT, file), "utf8");
const VERSION = (JSON.parse(read("package.json")) as { version: string }).version;

/** Every .yaml file under `dir`, recursively. */
function yamlFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The tag of an image reference (`registry:5000/org/quartermaster:0.1.0@sha256:…`): after `:` in its last path part. */
export function imageTag(ref: string): string | undefined {
  const last = ref
    .replace(/@sha256:[0-9a-f]{64}$/, "")
    .split("/")
    .at(-1)!;
  return last.includes(":") ? last.slice(last.indexOf(":") + 1) : undefined;
}

/** `image:` values naming the quartermaster image (any registry, optional digest): [file, tag or "(none)"]. */
function manifestImageTags(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const file of yamlFiles("manifests")) {
    for (const m of read(file).matchAll(/^\s*-?\s*image:\s*["']?(\S*?)["']?\s*$/gm)) {
      const ref = m[1]!;
      const name = ref.replace(/@.*$/, "").split("/").at(-1)!.split(":")[0];
      if (name === "quartermaster") out.push([file, imageTag(ref) ?? "(none)"]);
    }
  }
  return out;
}

/** The first `## [x.y.z] - date` entry of CHANGELOG.md (an `[Unreleased]` heading above it is skipped), and its text. */
function topChangelogEntry(): { version: string; date: string; body: string } | undefined {
  const text = read("CHANGELOG.md");
  const heads = [...text.matchAll(/^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?\s*$/gm)].filter((m) => m[1] !== "Unreleased");
  const first = heads[0];
  if (!first) return undefined;
  const start = first.index + first[0].length;
  const next = text.slice(start).search(/^## \[/m);
  return { version: first[1]!, date: first[2] ?? "", body: text.slice(start, next < 0 ? undefined : start + next) };
}

describe("the release's version, everywhere it is named", () => {
  const chart = parseYaml(read("charts/quartermaster/Chart.yaml")) as { version: string; appVersion: string };
  const values = parseYaml(read("charts/quartermaster/values.yaml")) as { image: { tag: string } };
  const top = topChangelogEntry();
  const cases: Array<[string, string | undefined]> = [
    ["charts/quartermaster/Chart.yaml version", chart.version],
    ["charts/quartermaster/Chart.yaml appVersion", chart.appVersion],
    ["charts/quartermaster/values.yaml image.tag", values.image.tag],
    ["CHANGELOG.md's top entry", top?.version],
    ...manifestImageTags().map(([file, tag]): [string, string] => [`image tag in ${file}`, tag]),
  ];

  it("image tags are read from any registry, with or without a digest", () => {
    const digest = `@sha256:${"a".repeat(64)}`;
    const table: Array<[string, string | undefined]> = [
      ["quartermaster:0.1.0", "0.1.0"],
      ["registry.example.com/quartermaster:0.1.0", "0.1.0"],
      [`127.0.0.1:5000/qm/quartermaster:0.2.0${digest}`, "0.2.0"],
      [`127.0.0.1:5000/quartermaster${digest}`, undefined],
      ["quartermaster", undefined],
    ];
    for (const [ref, tag] of table) assert.equal(imageTag(ref), tag, ref);
  });

  it(`package.json's version ${VERSION} is a semantic version`, () => {
    assert.match(VERSION, /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
  });

  for (const [where, version] of cases) {
    it(`${where} is ${VERSION}`, () => assert.equal(version, VERSION));
  }

  it("the manifests name the image at least in the webhook and the reconciler", () => {
    const files = new Set(manifestImageTags().map(([file]) => file));
    for (const f of ["manifests/base/webhook-deployment.yaml", "manifests/base/reconciler.yaml"]) assert.ok(files.has(f), f);
  });

  it("CHANGELOG.md's top entry has a date and says what an upgrade must do", () => {
    assert.ok(top, "CHANGELOG.md has a `## [x.y.z] - YYYY-MM-DD` entry");
    assert.match(top.date, /^\d{4}-\d{2}-\d{2}$/);
    assert.match(top.body, /^### Upgrading$/m);
  });
});

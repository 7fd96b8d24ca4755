/**
 * The image's Node.js: one LTS major in every stage, one that package.json's engines allow. The rest of the
 * image (stages, user, entry point) is checked against the rendered manifests in test/e2e/manifests.test.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { APP_FILES, NODE, RUNTIME, parseFinalStage } from "../../../release/image.js";
import { ROOT } from "../../fixtures/manifests.js";

/** Node.js lines and their end of life (github.com/nodejs/Release, schedule.json). Odd majors are never LTS. */
const LTS_END_OF_LIFE: Record<number, string> = { 20: "2026-04-30", 22: "2027-04-30", 24: "2028-04-30" };
/** The day this was last reviewed: the image must be on a line still supported then. */
const REVIEWED = "2026-11-25";

describe("the image's Node.js", () => {
  const text = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const froms = [...text.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]!);
  const majors = froms.map((image) => {
    const m = /^node:(\d+)-/.exec(image) ?? /^gcr\.io\/distroless\/nodejs(\d+)-/.exec(image);
    assert.ok(m, `${image}: not a node or distroless/nodejs image`);
    return Number(m[1]);
  });

  it("every stage has the same major, an LTS line supported on the review date", () => {
    assert.equal(new Set(majors).size, 1, froms.join(", "));
    const eol = LTS_END_OF_LIFE[majors[0]!];
    assert.ok(eol, `Node.js ${majors[0]} is not an LTS line in the table`);
    assert.ok(eol > REVIEWED, `Node.js ${majors[0]} reached end of life on ${eol}`);
  });

  it("the Dockerfile says why that version", () => {
    assert.match(text, new RegExp(`Node\\.js ${majors[0]} in every stage: an LTS line, supported until`));
  });

  it("package.json's engines allow it", () => {
    const engines = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
    const min = /^>=(\d+)/.exec(engines);
    assert.ok(min && majors[0]! >= Number(min[1]), `engines ${engines}`);
  });
});

/**
 * The release build (release/build.ts) assembles the image without Docker from release/image.ts: its runtime
 * settings and /app contents must be the Dockerfile's final stage. test/e2e/release.test.ts checks the built image
 * the same way.
 */
describe("the released image agrees with the Dockerfile", () => {
  const stage = parseFinalStage(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
  const cases: Array<{ name: string; dockerfile: unknown; release: unknown }> = [
    { name: "user", dockerfile: stage.user, release: RUNTIME.user },
    { name: "entry point", dockerfile: stage.entrypoint, release: RUNTIME.entrypoint },
    { name: "command", dockerfile: stage.cmd, release: RUNTIME.cmd },
    { name: "working directory", dockerfile: stage.workdir, release: RUNTIME.workdir },
    { name: "exposed ports", dockerfile: stage.expose, release: RUNTIME.exposedPorts },
    {
      name: "files under /app",
      dockerfile: stage.copies.filter((c) => c.startsWith("/app/")).sort(),
      release: APP_FILES.map((f) => `/app/${f.path}`).sort(),
    },
    { name: "Node.js major", dockerfile: /^gcr\.io\/distroless\/nodejs(\d+)-/.exec(stage.from)?.[1], release: NODE.version.split(".")[0] },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(c.release, c.dockerfile));
  }
});

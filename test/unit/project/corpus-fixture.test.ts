/**
 * The corpus the corpus suites read is in the repository (test/fixtures/corpus), so a clean clone's `npm test`
 * runs them, and every file in it is accounted for: named in SOURCES.md with its repository, commit and license,
 * under a license NOTICE covers, and no file SOURCES.md names is missing.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { CORPUS_DIR, CORPUS_SKIP } from "../../fixtures/corpus.js";
import { ROOT } from "../../fixtures/manifests.js";

const DIR = join(ROOT, "test/fixtures/corpus");
const SUBDIRS = ["manifests", "admissionreview"];
/** The licenses NOTICE covers: the text of one kept in LICENSES/, the other by its URI (CC-BY-4.0, section 3(a)(1)(C)). */
const LICENSES = new Set(["Apache-2.0", "CC-BY-4.0"]);

interface Row {
  file: string;
  repository: string;
  license: string;
}

/** The table rows of SOURCES.md whose first cell is a file: `| \`file\` | repository | path | commit | license | ...`. */
function sourceRows(): Row[] {
  const rows: Row[] = [];
  for (const line of readFileSync(join(DIR, "SOURCES.md"), "utf8").split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const file = /^`([^`]+\.(?:ya?ml|jsonc?))`$/.exec(cells[1] ?? "")?.[1];
    if (file) rows.push({ file, repository: cells[2]!, license: cells[5]! });
  }
  return rows;
}

describe("test/fixtures/corpus", () => {
  it("is what the corpus suites read unless QM_CORPUS_DIR says otherwise", { skip: process.env.QM_CORPUS_DIR ? "QM_CORPUS_DIR is set" : false }, () => {
    assert.equal(relative(ROOT, CORPUS_DIR), "test/fixtures/corpus");
    assert.equal(CORPUS_SKIP, false);
  });

  const rows = sourceRows();
  const files = SUBDIRS.flatMap((sub) => readdirSync(join(DIR, sub)).map((f) => ({ sub, f })));

  it("SOURCES.md names every file, and every file it names is there", () => {
    assert.ok(files.length > 40 && rows.length === files.length, `${files.length} files, ${rows.length} rows`);
    const named = new Set(rows.map((r) => r.file));
    assert.deepEqual(
      files.filter(({ f }) => !named.has(f)).map(({ sub, f }) => `${sub}/${f}`),
      [],
    );
    const present = new Set(files.map(({ f }) => f));
    assert.deepEqual(
      rows.filter((r) => !present.has(r.file)).map((r) => r.file),
      [],
    );
  });

  it("every file is under a license NOTICE covers, and NOTICE names its repository", () => {
    const notice = readFileSync(join(DIR, "NOTICE"), "utf8");
    readFileSync(join(DIR, "LICENSES/Apache-2.0.txt"), "utf8");
    for (const r of rows) {
      assert.ok(LICENSES.has(r.license), `${r.file}: license ${r.license}`);
      if (r.repository !== "same") {
        const repo = r.repository.split(" ")[0]!;
        assert.ok(notice.includes(repo), `NOTICE does not name ${repo} (${r.file})`);
      }
    }
  });
});

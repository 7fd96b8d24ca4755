/**
 * What the `serve` bundle (release/bundle.ts) leaves out of a cold start (issue 51): modules `serve` never runs
 * are not loaded when it starts. @opentelemetry/api and prom-client's Pushgateway (which requires node:zlib, http
 * and https at once) are stand-ins that say why when used; node:http2 is imported only for `serve --http2`.
 * Checked on the bundle's text, built into a temporary directory from this checkout.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { bundleServe } from "../../../release/bundle.js";

const ROOT = resolve(import.meta.dirname, "../../..");

describe("the serve bundle leaves out what serve never runs", () => {
  const out = mkdtempSync(join(tmpdir(), "qm-bundle-"));
  let text = "";
  let inputs: string[] = [];
  before(async () => {
    inputs = await bundleServe(ROOT, out);
    text = readdirSync(out)
      .filter((f) => f.endsWith(".mjs"))
      .map((f) => readFileSync(join(out, f), "utf8"))
      .join("\n");
  });
  after(() => rmSync(out, { recursive: true, force: true }));

  const CASES: Array<{ name: string; absent: RegExp; present?: RegExp }> = [
    {
      name: "prom-client's Pushgateway: its stand-in, no zlib",
      absent: /gzipSync|__require\("zlib"\)|from"node:zlib"/,
      present: /a Pushgateway is not in Quartermaster's serve bundle/,
    },
    { name: "node:http2: imported only when serving HTTP/2", absent: /from\s*"node:http2"|__require\("(node:)?http2"\)/, present: /import\("node:http2"\)/ },
    { name: "@opentelemetry/api: its stand-in", absent: /node_modules\/@opentelemetry\/api/, present: /exemplars are off in Quartermaster/ },
  ];
  for (const c of CASES)
    it(c.name, () => {
      assert.ok(text.length > 100_000, "the bundle was written");
      assert.doesNotMatch(text, c.absent);
      if (c.present) assert.match(text, c.present);
    });

  it("the Dockerfile's build stage copies every file of release/ the bundle reads (its stand-ins), and the script", () => {
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    const buildStage = /^FROM\s+\S+\s+AS\s+build\b([\s\S]*?)(?=^FROM\s)/m.exec(dockerfile)?.[1] ?? "";
    // `COPY a b ./dest/`: every word but the last is a source, a file or a directory.
    const sources = [...buildStage.matchAll(/^COPY\s+(?!--from)(.+)$/gm)].flatMap((m) => m[1]!.trim().split(/\s+/).slice(0, -1));
    const copied = (file: string) => sources.some((s) => file === s || file.startsWith(`${s.replace(/\/$/, "")}/`));
    const needed = ["release/bundle.ts", ...inputs.filter((f) => f.startsWith("release/"))];
    assert.ok(needed.includes("release/no-otel.ts") && needed.includes("release/no-pushgateway.ts"), needed.join(", "));
    assert.deepEqual(
      needed.filter((f) => !copied(f)),
      [],
      `the Dockerfile's build stage copies ${sources.join(", ")}`,
    );
  });
});

/**
 * What the `serve` bundle (release/bundle.ts) leaves out of a cold start (issue 51): modules `serve` never runs
 * are not loaded when it starts. @opentelemetry/api and prom-client's Pushgateway (which requires node:zlib, http
 * and https at once) are stand-ins that say why when used; node:http2 is imported only for `serve --http2`.
 * Checked on the bundle's text, built into a temporary directory from this checkout.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { spawn } from "node:child_process";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { bundleServe } from "../../../release/bundle.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const MODULE_LOG = join(ROOT, "test/fixtures/module-log/register.mjs");

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
    // On Node.js 22+ an ESM import of node:http reads its lazy WebSocket exports, which load undici (~35 ms a start).
    { name: "node:http: required, never imported as ESM", absent: /from\s*"(node:)?http"|import\("(node:)?http"\)/, present: /\("node:http"\)/ },
  ];
  for (const c of CASES)
    it(c.name, () => {
      assert.ok(text.length > 100_000, "the bundle was written");
      assert.doesNotMatch(text, c.absent);
      if (c.present) assert.match(text, c.present);
    });

  it("serve starts without loading yaml, the policy's validator or the ledger's (a kubeconfig, --policy and a ledger index need them, not a start)", async () => {
    const log = join(out, "modules.log");
    const child = spawn(
      process.execPath,
      ["--import", MODULE_LOG, join(out, "main.mjs"), "serve", "--plain-http", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"],
      {
        env: { PATH: process.env.PATH, HOME: out, QM_MODULE_LOG: log },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      let stdout = "";
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on("data", (d: Buffer) => {
          stdout += d.toString();
          if (stdout.includes("serving ")) resolve();
        });
        child.once("exit", (code) => reject(new Error(`serve exited (${code}) before serving: ${stdout}`)));
      });
    } finally {
      child.kill("SIGTERM");
    }
    const chunks = readFileSync(log, "utf8")
      .split("\n")
      .filter((url) => url.startsWith("file:") && url.endsWith(".mjs") && !url.includes("module-log"))
      .map((url) => fileURLToPath(url));
    assert.ok(chunks.length > 5, `the log names the bundle's chunks: ${chunks.join(", ")}`);
    const loaded = (marker: RegExp) => chunks.filter((f) => marker.test(readFileSync(f, "utf8"))).map((f) => basename(f));
    assert.deepEqual(loaded(/"node_modules\/yaml\//), [], "yaml (~160 KB) is not loaded by a start without a kubeconfig");
    assert.deepEqual(loaded(/function checkPolicy\(/), [], "the policy's checker and validator are not loaded without --policy");
    assert.deepEqual(loaded(/function readIndex\(/), [], "the ledger's index validator and model wait for a first index (src/run/ledger-index.ts)");
    assert.deepEqual(loaded(/"node_modules\/fast-json-patch\//), [], "fast-json-patch applies patches for admit and the tests; serve only makes them");
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

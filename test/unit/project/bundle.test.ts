/**
 * What the `serve` bundle (release/bundle.ts) leaves out of a cold start (issue 51): one file with `serve` alone, no
 * other command; modules `serve` runs only for a kubeconfig, a --policy file or a ledger index are not evaluated
 * when it starts (a bundle instrumented to say so, started); @opentelemetry/api and prom-client's Pushgateway
 * (which requires node:zlib, http and https at once) are stand-ins that say why when used; node:http2 is imported
 * only for `serve --http2`, node:http with `require`. Built into a temporary directory from this checkout.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Plugin } from "esbuild";
import { bundleServe } from "../../../release/bundle.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const PRELOAD = join(ROOT, "test/fixtures/evaluated/preload.mjs");

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
    {
      name: "one file, serve's program alone: no other command's code",
      absent: /function registerAdmit\(|function registerReconcile\(|function registerDoctor\(/,
      present: /function registerServe\(/,
    },
    // On Node.js 22+ an ESM import of node:http reads its lazy WebSocket exports, which load undici (~35 ms a start).
    { name: "node:http: required, never imported as ESM", absent: /from\s*"(node:)?http"|import\("(node:)?http"\)/, present: /\("node:http"\)/ },
  ];
  for (const c of CASES)
    it(c.name, () => {
      assert.ok(text.length > 100_000, "the bundle was written");
      assert.doesNotMatch(text, c.absent);
      if (c.present) assert.match(text, c.present);
    });

  it("serve starts without evaluating yaml, the policy's checker, the ledger index's code or fast-json-patch", async () => {
    // A second bundle whose watched modules say when they are evaluated: each appends its name to a global list, which
    // a preload writes out when the process exits. serve.ts is evaluated at every start: it shows the marks work.
    const WATCHED: Record<string, string> = {
      "node_modules/yaml/dist/index.js": "yaml",
      "src/policy/load.ts": "the policy's checker",
      "src/run/ledger-index.ts": "the ledger index's code",
      "node_modules/fast-json-patch/index.js": "fast-json-patch",
      "src/server/serve.ts": "serve.ts",
    };
    const marked = join(out, "marked");
    const mark: Plugin = {
      name: "mark-evaluated",
      setup(b) {
        b.onLoad({ filter: /(yaml[\\/]dist[\\/]index|policy[\\/]load|run[\\/]ledger-index|fast-json-patch[\\/]index|server[\\/]serve)\.[jt]s$/ }, (args) => {
          const name = Object.entries(WATCHED).find(([path]) => args.path.endsWith(path))?.[1];
          if (name === undefined) return undefined;
          const contents = `${readFileSync(args.path, "utf8")}\n;globalThis.__qmEvaluated?.push(${JSON.stringify(name)});\n`;
          return { contents, loader: args.path.endsWith(".ts") ? "ts" : "js" };
        });
      },
    };
    await bundleServe(ROOT, marked, [mark]);
    const log = join(out, "evaluated.json");
    const child = spawn(
      process.execPath,
      ["--import", PRELOAD, join(marked, "serve.mjs"), "serve", "--plain-http", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0"],
      {
        env: { PATH: process.env.PATH, HOME: out, QM_EVALUATED: log },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const exited = new Promise((resolve) => child.once("exit", resolve));
    let stdout = "";
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve, reject) => {
      // A start that hangs fails the test (and is stopped) instead of hanging it.
      timer = setTimeout(() => reject(new Error(`not serving within 30 s: ${stdout}`)), 30_000);
      child.stdout!.on("data", (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes("serving ")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`serve exited (${code}) before serving: ${stdout}`)));
    }).finally(() => {
      clearTimeout(timer);
      child.kill("SIGTERM");
    });
    await exited;
    const evaluated = JSON.parse(readFileSync(log, "utf8")) as string[];
    assert.deepEqual(evaluated, ["serve.ts"], "evaluated by a start without a kubeconfig, --policy or a ledger index");
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

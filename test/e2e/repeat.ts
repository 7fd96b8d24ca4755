/**
 * `npm run test:e2e:repeat -- [--runs 5] [files…]` (issue 52): the e2e suite run N times in a row, and the
 * apiserver's own count of its calls to Quartermaster's webhooks that got no answer or failed, per run and per
 * suite file (./harness/webhook-calls.ts; every control plane records its counts as it stops). Exit 1 when a run
 * fails a test or any call failed, except in the suites that take the webhook away on purpose (`EXPECTED`).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { failedCalls, type WebhookCalls } from "./harness/webhook-calls.js";

/**
 * Suites whose webhook is stopped, unreachable or made to fail on purpose (fail-closed and fail-open checks,
 * outages): their failed calls are the point of the test and are listed, not counted.
 */
const EXPECTED = new Set<string>([]);

const ROOT = resolve(import.meta.dirname, "../..");
const { values, positionals } = parseArgs({ options: { runs: { type: "string", default: "5" } }, allowPositionals: true });
const runs = Number(values.runs);
const files = positionals.length
  ? positionals
  : readdirSync(join(ROOT, "test/e2e"))
      .filter((f) => f.endsWith(".test.ts"))
      .sort()
      .map((f) => join("test/e2e", f));

const dir = mkdtempSync(join(tmpdir(), "qm-e2e-repeat-"));
let bad = 0;
for (let run = 1; run <= runs; run++) {
  const log = join(dir, `run-${run}.jsonl`);
  const started = performance.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", "--test-reporter=tap", ...files], {
    cwd: ROOT,
    env: { ...process.env, QM_E2E_WEBHOOK_LOG: log },
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
  });
  const out = `${r.stdout.toString()}${r.stderr.toString()}`;
  const records = existsSync(log)
    ? readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as WebhookCalls & { suite: string })
    : [];
  const calls = records.reduce((n, c) => n + c.calls, 0);
  const failing = records.filter((c) => failedCalls(c) > 0);
  const counted = failing.filter((c) => !EXPECTED.has(relative(ROOT, c.suite)));
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  console.log(
    `run ${run}/${runs}: exit ${r.status}, ${minutes} min, ${records.length} control planes, ${calls} webhook calls, ` +
      `${counted.reduce((n, c) => n + failedCalls(c), 0)} failed (${failing.length - counted.length} control planes failing on purpose)`,
  );
  for (const c of failing)
    console.log(
      `  ${relative(ROOT, c.suite)}${EXPECTED.has(relative(ROOT, c.suite)) ? " (on purpose)" : ""}: ` +
        `unanswered ${JSON.stringify(c.unanswered)}, calling errors ${JSON.stringify(c.callErrors)}, failed open ${JSON.stringify(c.failedOpen)}`,
    );
  if (r.status !== 0) {
    const failures = out.split("\n").filter((l) => /^\s*not ok|Error: |failed calling webhook/.test(l));
    console.log(failures.slice(0, 40).join("\n"));
  }
  if (r.status !== 0 || counted.length > 0) bad++;
}
console.log(`${runs - bad} of ${runs} runs clean; logs in ${dir}`);
process.exitCode = bad > 0 ? 1 : 0;

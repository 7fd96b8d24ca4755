/**
 * The apiserver's failed calls to Quartermaster's webhooks over whole runs of the e2e suite (issue 52): every
 * control plane records its counts as it stops (./harness/webhook-calls.ts, QM_E2E_WEBHOOK_LOG), and this sums
 * them per run and per suite file.
 *
 *   npm run test:e2e:repeat -- [--runs 5] [files…]   the suite N times in a row
 *   node --import tsx test/e2e/repeat.ts --log FILE    one run's log, as .ci/run writes it
 *
 * Each run's TAP output is kept beside its log (run-N.tap). Exit 1 when a run fails a test or a suite has more failed calls than it makes on purpose (`ON_PURPOSE`).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { failedCalls, type WebhookCalls } from "./harness/webhook-calls.js";

/**
 * The failed calls a suite makes on purpose, all its control planes together: the webhook stopped (admission's
 * "webhook server down", failing closed for validation and open for mutation), a foreign caBundle (deploy's
 * `certs install`), and faults.test.ts's outages. Any more is a call lost for nothing.
 */
const ON_PURPOSE: ReadonlyMap<string, number> = new Map([
  ["admission.test.ts", 2],
  ["deploy.test.ts", 2],
  ["faults.test.ts", 5],
]);

type Record_ = WebhookCalls & { suite: string };

function readLog(file: string): Record_[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record_);
}

/** Prints one run's counts; true when no suite failed more calls than on purpose. */
function summarize(label: string, records: Record_[]): boolean {
  const bySuite = new Map<string, { failed: number; detail: string[] }>();
  let calls = 0;
  for (const r of records) {
    calls += r.calls;
    const n = failedCalls(r);
    if (n === 0) continue;
    const s = bySuite.get(basename(r.suite)) ?? { failed: 0, detail: [] };
    s.failed += n;
    s.detail.push(`unanswered ${JSON.stringify(r.unanswered)}, calling errors ${JSON.stringify(r.callErrors)}, failed open ${JSON.stringify(r.failedOpen)}`);
    bySuite.set(basename(r.suite), s);
  }
  const over = [...bySuite].filter(([suite, s]) => s.failed > (ON_PURPOSE.get(suite) ?? 0));
  const lost = over.reduce((n, [suite, s]) => n + s.failed - (ON_PURPOSE.get(suite) ?? 0), 0);
  console.log(`${label}: ${records.length} control planes, ${calls} webhook calls, ${lost} failed for nothing`);
  for (const [suite, s] of bySuite) console.log(`  ${suite}: ${s.failed} failed (${ON_PURPOSE.get(suite) ?? 0} on purpose): ${s.detail.join("; ")}`);
  return over.length === 0;
}

const ROOT = resolve(import.meta.dirname, "../..");
const { values, positionals } = parseArgs({ options: { runs: { type: "string", default: "5" }, log: { type: "string" } }, allowPositionals: true });

if (values.log !== undefined) {
  process.exitCode = summarize(`webhook calls (${values.log})`, readLog(values.log)) ? 0 : 1;
} else {
  const runs = Number(values.runs);
  const files = positionals.length
    ? positionals
    : readdirSync(join(ROOT, "test/e2e"))
        .filter((f) => f.endsWith(".test.ts"))
        .sort()
        .map((f) => join("test/e2e", f));
  const dir = mkdtempSync(join(tmpdir(), "qm-e2e-repeat-"));
  let clean = 0;
  for (let run = 1; run <= runs; run++) {
    const log = join(dir, `run-${run}.jsonl`);
    const started = performance.now();
    const r = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", "--test-reporter=tap", ...files], {
      cwd: ROOT,
      env: { ...process.env, QM_E2E_WEBHOOK_LOG: log },
      stdio: ["ignore", "pipe", "pipe"],
      maxBuffer: 256 * 1024 * 1024,
    });
    const minutes = ((performance.now() - started) / 60_000).toFixed(1);
    writeFileSync(join(dir, `run-${run}.tap`), `${r.stdout.toString()}${r.stderr.toString()}`);
    const ok = summarize(`run ${run}/${runs}: exit ${r.status}, ${minutes} min`, readLog(log));
    if (r.status !== 0) {
      const out = `${r.stdout.toString()}${r.stderr.toString()}`;
      console.log(
        out
          .split("\n")
          .filter((l) => /^\s*not ok|failed calling webhook/.test(l))
          .slice(0, 40)
          .join("\n"),
      );
    }
    if (ok && r.status === 0) clean++;
  }
  console.log(`${clean} of ${runs} runs clean; logs in ${dir}`);
  process.exitCode = clean === runs ? 0 : 1;
}

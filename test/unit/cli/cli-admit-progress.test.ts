/**
 * `quartermaster admit` on a large input tells its progress on stderr (reading, then admitting), at most one line
 * per interval, and never on a small input nor on stdout; the output is the same with or without it. The clock and
 * the thresholds are the command's parameter (src/cli/admit.ts PROGRESS), so a few hundred objects stand for a
 * 50 MB file here (bench/admit-large.ts runs the real thing).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { admitCommand, PROGRESS, type AdmitCliOptions, type ProgressOptions } from "../../../src/cli/admit-command.js";
import { runCli } from "../../../src/cli/commands.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const OBJECTS = 300;

/** OBJECTS documents: GPU pods, and a PyTorchJob every tenth. */
function bigInput(): string {
  const dir = mkdtempSync(join(tmpdir(), "qm-admit-progress-"));
  const docs: string[] = [];
  for (let i = 0; i < OBJECTS; i++) {
    docs.push(
      i % 10 === 9
        ? `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: job-${i}, namespace: team-a}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: img, resources: {limits: {nvidia.com/gpu: "1"}}}]}}}
    Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: img, resources: {limits: {nvidia.com/gpu: "1"}}}]}}}
`
        : `apiVersion: v1
kind: Pod
metadata: {name: pod-${i}, namespace: team-a}
spec:
  containers: [{name: main, image: img, resources: {limits: {nvidia.com/gpu: "1"}}}]
`,
    );
  }
  const file = join(dir, "big.yaml");
  writeFileSync(file, docs.join("---\n"));
  return file;
}

const FILE = bigInput();

/** A clock that moves `step` ms at each reading. */
const ticking = (step: number): (() => number) => {
  let t = 0;
  return () => (t += step);
};

async function admit(progress: ProgressOptions, output: AdmitCliOptions["output"] = "yaml"): Promise<{ code: number; stdout: string[]; stderr: string[] }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const io = { stdout: (l: string) => stdout.push(l), stderr: (l: string) => stderr.push(l), cwd: ROOT, shutdown: new Promise<string>(() => undefined) };
  const code = await admitCommand({ filename: [FILE], output, namespace: "default" }, io, progress);
  return { code, stdout, stderr };
}

const isProgress = (l: string): boolean => l.startsWith("quartermaster: admit:");
const READING = /^quartermaster: admit: reading .*big\.yaml: \d{1,3}% of \d+ MB, [\d,]+ objects$/;
const ADMITTING = new RegExp(`^quartermaster: admit: [\\d,]+ of ${OBJECTS} objects \\(\\d{1,3}%\\)$`);
const QUIET: ProgressOptions = { ...PROGRESS, minBytes: Infinity, minObjects: Infinity };

describe("admit: progress on stderr for a large input", () => {
  it("a large file: lines while reading, then while admitting, at most one per interval; stdout and the report as without", async () => {
    // Every object a large input; the clock moves 300 ms a reading, a line is due every 1000 ms.
    const loud = await admit({ minBytes: 1, minObjects: 1, everyMs: 1000, now: ticking(300) });
    const quiet = await admit(QUIET);
    const lines = loud.stderr.filter(isProgress);
    assert.ok(
      lines.some((l) => READING.test(l)),
      lines.join("\n"),
    );
    assert.ok(
      lines.some((l) => ADMITTING.test(l)),
      lines.join("\n"),
    );
    for (const l of lines) assert.ok(READING.test(l) || ADMITTING.test(l), l);
    // Reading first, then admitting; the counts only go up.
    const firstAdmitting = lines.findIndex((l) => ADMITTING.test(l));
    assert.ok(lines.slice(firstAdmitting).every((l) => ADMITTING.test(l)));
    const counts = lines.slice(firstAdmitting).map((l) => Number(/admit: ([\d,]+) of/.exec(l)![1]!.replaceAll(",", "")));
    assert.deepEqual(
      counts,
      [...counts].sort((a, b) => a - b),
    );
    // One line per 1000 ms of a clock read ~2 × OBJECTS times (once per document read, once per object admitted).
    assert.ok(lines.length <= Math.ceil((2 * OBJECTS * 300) / 1000) + 2, String(lines.length));
    assert.ok(lines.length >= 10, String(lines.length));
    assert.equal(loud.stdout.filter(isProgress).length, 0);
    assert.deepEqual(loud.stdout, quiet.stdout);
    assert.deepEqual(
      loud.stderr.filter((l) => !isProgress(l)),
      quiet.stderr,
    );
    assert.equal(loud.code, quiet.code);
    assert.match(loud.stderr.at(-1)!, new RegExp(`^${OBJECTS} objects: ${OBJECTS} allowed, 0 denied$`));
  });

  it("many objects from files under the size: only the admitting lines", async () => {
    const r = await admit({ minBytes: Infinity, minObjects: OBJECTS, everyMs: 1000, now: ticking(300) });
    const lines = r.stderr.filter(isProgress);
    assert.ok(lines.length > 0);
    assert.ok(
      lines.every((l) => ADMITTING.test(l)),
      lines.join("\n"),
    );
  });

  it("a run shorter than the interval says nothing", async () => {
    const r = await admit({ minBytes: 1, minObjects: 1, everyMs: 1000, now: () => 0 });
    assert.equal(r.stderr.filter(isProgress).length, 0);
  });

  it("json and patch output are unchanged by it", async () => {
    for (const output of ["json", "patch"] as const) {
      const loud = await admit({ minBytes: 1, minObjects: 1, everyMs: 1000, now: ticking(300) }, output);
      assert.ok(loud.stderr.some(isProgress));
      assert.deepEqual(loud.stdout, (await admit(QUIET, output)).stdout);
      JSON.parse(loud.stdout.join("\n"));
    }
  });

  it("the defaults: a small input (examples/) gets no progress line", async () => {
    assert.ok(PROGRESS.minBytes >= 1024 * 1024 && PROGRESS.minObjects >= 1000 && PROGRESS.everyMs >= 1000);
    const stdout: string[] = [];
    const stderr: string[] = [];
    const code = await runCli(["admit", "-f", "examples", "-f", FILE], {
      stdout: (l) => stdout.push(l),
      stderr: (l) => stderr.push(l),
      cwd: ROOT,
      shutdown: new Promise(() => undefined),
    });
    assert.equal(code, 0, stderr.join("\n"));
    assert.equal([...stdout, ...stderr].filter(isProgress).length, 0);
  });
});

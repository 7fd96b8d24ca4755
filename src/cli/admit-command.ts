/**
 * @module
 * `quartermaster admit`: the command around the offline pipeline (./admit.ts): reads the inputs (./admit-input.ts),
 * admits each in turn, writes each result as it is admitted (YAML, JSON or a report), progress on stderr for big
 * inputs, and names kinds that are not what they seem (`Deploymnet`, apps/v1 Pod).
 */
import { stringify } from "yaml";
import { UsageError } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import { headOf, InputError, readInputs } from "./admit-input.js";
import { QUEUED_WORKLOAD_KINDS } from "../core/job-shapes.js";
import { admitEach, type Admitted } from "./admit.js";
import type { CliIo } from "./io.js";
import { loadPolicy } from "./policy-file.js";

/** `Pod team-a/gpu-smoke (examples/gpu-pod.yaml#1)`. */
export function describeAdmitted(a: Admitted): string {
  return `${a.kind} ${a.namespace}/${a.name} (${a.from ? `replica of ${a.from} in ` : ""}${a.source})`;
}

/** The report for people: one line per object, then its warnings and violations, indented. */
export function reportLines(results: readonly Admitted[]): string[] {
  const report = reporter();
  for (const a of results) report.add(a);
  return report.lines();
}

/** {@link reportLines} built one result at a time (the lines kept, not the results). */
function reporter(): { add(a: Admitted): void; lines(): string[]; denied(): number } {
  const lines: string[] = [];
  let count = 0;
  let denied = 0;
  let skipped = 0;
  return {
    add(a) {
      count++;
      if (!a.allowed) denied++;
      if (a.skipped) skipped++;
      const verdict = a.skipped
        ? `not admitted: ${a.skipped}`
        : a.allowed
          ? `allowed${a.patch.length > 0 ? `, outfitted (${a.patch.length} patch operation${a.patch.length === 1 ? "" : "s"})` : ", unchanged"}`
          : `DENIED by ${a.deniedRules.join(", ")}`;
      lines.push(`${describeAdmitted(a)}: ${verdict}`);
      for (const w of a.warnings) lines.push(`  warning: ${w}`);
      for (const v of a.violations) lines.push(`  violation [${v.rule}] ${v.field || "(object)"}: ${v.message}`);
    },
    lines: () => [
      ...lines,
      `${count} object${count === 1 ? "" : "s"}: ${count - denied - skipped} allowed, ${denied} denied${skipped ? `, ${skipped} not admitted` : ""}`,
    ],
    denied: () => denied,
  };
}

/** The workload kinds every cluster serves, with their one apiVersion (k8s.io/api). */
const BUILT_IN_KINDS: ReadonlyArray<{ apiVersion: string; kind: string }> = [
  ...["Pod", "PodTemplate", "ReplicationController", "ConfigMap", "Secret", "Service", "Namespace"].map((kind) => ({ apiVersion: "v1", kind })),
  ...["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"].map((kind) => ({ apiVersion: "apps/v1", kind })),
  ...["Job", "CronJob"].map((kind) => ({ apiVersion: "batch/v1", kind })),
];

/**
 * Edit distance of two short names, for "did you mean": hand-written because it is ten lines over kind names
 * and no dependency of the project offers one.
 */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * What is wrong with an object's apiVersion and kind, as the apiserver would refuse it: a kind that is a typo of
 * a known one (`Deploymnet`), or a known kind under another apiVersion (`apps/v1` `Pod`). Undefined when nothing
 * is, or the kind is simply one Quartermaster does not admit (a ConfigMap, a CRD of another project).
 */
export function kindProblem(object: KubeObject, jobKinds: ReadonlyArray<{ group: string; version: string; kind: string }>): string | undefined {
  const known = [
    ...BUILT_IN_KINDS,
    ...jobKinds.map((k) => ({ apiVersion: `${k.group}/${k.version}`, kind: k.kind })),
    ...QUEUED_WORKLOAD_KINDS.map((k) => ({ apiVersion: `${k.group}/${k.version}`, kind: k.kind })),
  ];
  const { apiVersion, kind } = object as { apiVersion: string; kind: string };
  const same = known.filter((k) => k.kind === kind);
  if (same.length > 0)
    return same.some((k) => k.apiVersion === apiVersion)
      ? undefined
      : `apiVersion ${apiVersion} has no kind ${kind} (${kind} is ${[...new Set(same.map((k) => k.apiVersion))].join(" or ")}): fix apiVersion or kind`;
  const near = known.find((k) => k.apiVersion === apiVersion && editDistance(k.kind.toLowerCase(), kind.toLowerCase()) <= 2);
  return near ? `unknown kind ${kind} in ${apiVersion}: did you mean ${near.kind}?` : undefined;
}

/** The flags of `admit` as commander parses them (src/cli/commands/admit.ts). */
export type AdmitCliOptions = {
  filename?: string[];
  policy?: string;
  output: "yaml" | "json" | "patch";
  namespace: string;
  pods?: true;
  /** Unknown kinds and apiVersion/kind mismatches fail the run (exit 1) instead of being warned about. */
  strict?: true;
};

/**
 * When `admit` tells its progress on stderr: while it reads a file (or stdin) of at least `minBytes`, and while it
 * admits at least `minObjects` objects or objects read from that many bytes; at most one line per `everyMs`
 * (by `now`, milliseconds), the first `everyMs` after the start, so a run that ends sooner says nothing.
 */
export interface ProgressOptions {
  minBytes: number;
  minObjects: number;
  everyMs: number;
  now: () => number;
}

export const PROGRESS: ProgressOptions = { minBytes: 4 * 1024 * 1024, minObjects: 10_000, everyMs: 2000, now: () => performance.now() };

const count = (n: number): string => n.toLocaleString("en-US");
const percent = (done: number, total: number): string => `${Math.floor((100 * done) / Math.max(total, 1))}%`;

/** A line at most every `everyMs`: `tick(line)` writes the line (made only then) when its time has come. */
function throttle(p: ProgressOptions, write: (line: string) => void): (line: () => string) => void {
  let next = p.now() + p.everyMs;
  return (line) => {
    const now = p.now();
    if (now < next) return;
    next = now + p.everyMs;
    write(`quartermaster: admit: ${line()}`);
  };
}

/**
 * Writes the lines `JSON.stringify(items, null, 2)` would write for an array nested `depth` levels deep (its items
 * indented by 2 × (depth + 1) spaces) after `key` (`  "items": `), one item at a time: `add` each, then `end`.
 * Holds one item back, to know whether a comma follows it.
 */
function jsonArrayLines(write: (line: string) => void, depth: number, key = ""): { add(item: unknown): void; end(): void } {
  const indent = " ".repeat(2 * (depth + 1));
  let held: string | undefined;
  return {
    add(item) {
      write(held === undefined ? `${key}[` : `${held},`);
      held = indent + JSON.stringify(item, null, 2).replaceAll("\n", `\n${indent}`);
    },
    end() {
      if (held === undefined) write(`${key}[]`);
      else write(`${held}\n${" ".repeat(2 * depth)}]`);
    },
  };
}

/** Each result onto `report` and, as `-o` says, onto stdout (`write`) as soon as it comes. */
async function writeResults(
  output: AdmitCliOptions["output"],
  results: AsyncIterable<Admitted>,
  write: (line: string) => void,
  report: ReturnType<typeof reporter>,
): Promise<void> {
  if (output === "yaml") {
    let first = true;
    for await (const a of results) {
      report.add(a);
      if (!first) write("---");
      first = false;
      // YAML 1.1 quoting (`"yes"`, `"on"`, `"0777"`), so kubectl reads back the strings that were written.
      write(stringify(a.object, { lineWidth: 0, version: "1.1" }).trimEnd());
    }
    return;
  }
  // JSON.stringify of a List (`json`) or of an array of patches (`patch`), written an item at a time.
  if (output === "json") ["{", '  "apiVersion": "v1",', '  "kind": "List",'].forEach(write);
  const items = output === "json" ? jsonArrayLines(write, 1, '  "items": ') : jsonArrayLines(write, 0);
  for await (const a of results) {
    report.add(a);
    items.add(output === "json" ? a.object : { object: `${a.kind} ${a.namespace}/${a.name}`, source: a.source, patch: a.patch });
  }
  items.end();
  if (output === "json") write("}");
}

/**
 * `admit -f FILE...`: the outfitted objects (or patches) on stdout, the report on stderr; exit 1 when anything is
 * denied. Each object is written as soon as it is admitted (the output is what one write of them all would be);
 * large inputs get progress lines on stderr ({@link PROGRESS}).
 */
export async function admitCommand(opts: AdmitCliOptions, io: CliIo, progress: ProgressOptions = PROGRESS): Promise<number> {
  const files = opts.filename ?? [];
  if (files.length === 0) throw new UsageError("admit: give the objects with -f FILE (a file or a directory; repeatable)");
  const output = opts.output;
  const policy = await loadPolicy(opts.policy, io.cwd);
  const tell = throttle(progress, (line) => io.stderr(line));
  let largeFile = false;
  const inputs = await readInputs(files, io.cwd, {
    flag: "-f",
    ...(io.stdin ? { stdin: io.stdin } : {}),
    onSkip: (message) => io.stderr(`quartermaster: warning: ${message}`),
    hold: true,
    onDocument: (name, done, total, objects) => {
      if (total < progress.minBytes) return;
      largeFile = true;
      tell(() => `reading ${name}: ${percent(done, total)} of ${(total / 1024 / 1024).toFixed(0)} MB, ${count(objects)} objects`);
    },
  });
  if (inputs.length === 0) throw new InputError(`admit: no objects in ${files.join(", ")}`);
  const kindProblems = inputs.flatMap((i) => {
    const problem = kindProblem(headOf(i), policy.jobKinds);
    return problem ? [`${i.source}: ${problem}`] : [];
  });
  for (const p of kindProblems) io.stderr(`quartermaster: ${opts.strict ? "" : "warning: "}${p}`);
  const total = inputs.length;
  const large = largeFile || total >= progress.minObjects;
  let admitted = 0;
  const onInput = (): void => {
    admitted++;
    if (large) tell(() => `${count(admitted)} of ${count(total)} objects (${percent(admitted, total)})`);
  };
  const report = reporter();
  // Given away: admitEach lets go of each input once it is written out.
  const results = admitEach(inputs, { policy, namespace: opts.namespace, pods: opts.pods === true }, onInput);
  await writeResults(output, results, (line) => io.stdout(line), report);
  for (const line of report.lines()) io.stderr(line);
  return report.denied() > 0 || (opts.strict && kindProblems.length > 0) ? 1 : 0;
}

/**
 * @module
 * `quartermaster test DIR`: declarative policy tests, as `kyverno test` and `gator verify` run them. Each
 * `*.test.yaml` under DIR (or the file given) holds one or more `PolicyTest` documents (schema in
 * src/policy/test-schema.ts): resources, a policy, and per object the expected outcome (allowed or denied and by
 * which rules, violations, warnings, env values, tolerations, affinity, labels). The objects go through
 * `admit`'s offline pipeline (./admit.ts: the server's own webhooks); the result is a pass/fail table.
 *
 * The schema is compiled with ajv when the command runs (no process start pays for it: only `test` loads
 * this module).
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { Ajv } from "ajv";
import { LineCounter } from "yaml";
import type { KubeObject } from "../core/kube.js";
import { PolicyError, UsageError, errorMessage } from "../core/errors.js";
import type { Policy } from "../policy/types.js";
import { describeSchemaErrors } from "../core/schema.js";
import { admitObjects, templatesIn, type Admitted } from "./admit.js";
import { InputError, readInputs, type InputObject } from "./admit-input.js";
import { manifestValue, parseManifestDocuments } from "./manifest-yaml.js";
import type { CliIo } from "./io.js";
import { loadPolicy } from "./policy-file.js";
import { POLICY_TEST_SCHEMA } from "../policy/test-schema.js";

type Nullable = Record<string, string | null>;

export interface Expectation {
  resource: string;
  allowed?: boolean;
  deniedBy?: string[];
  violations?: Array<{ field?: string; rule?: string; message?: string }>;
  warnings?: string[];
  env?: Record<string, Nullable>;
  tolerations?: Array<Record<string, unknown>>;
  affinity?: Record<string, unknown>;
  nodeSelector?: Record<string, string>;
  labels?: Nullable;
  annotations?: Nullable;
}

export interface PolicyTest {
  apiVersion: string;
  kind: string;
  name: string;
  description?: string;
  policy?: string;
  namespace?: string;
  resources?: string[];
  objects?: KubeObject[];
  pods?: boolean;
  expect: Expectation[];
}

export interface Row {
  /** `file: name` (or the file alone when it could not be read). */
  test: string;
  /** The expectation's `resource`, or `-` for a test that could not run. */
  resource: string;
  result: "pass" | "fail" | "error";
  /** What did not hold (fail), or what is wrong with the test (error). */
  details: string[];
}

/** `*.test.yaml` and `*.test.yml` under `target` (a directory, searched recursively) or `target` itself. */
export async function testFiles(target: string): Promise<string[]> {
  if (!(await stat(target)).isDirectory()) return [target];
  const out: string[] = [];
  for (const entry of (await readdir(target, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(target, entry.name);
    if (entry.isDirectory()) out.push(...(await testFiles(path)));
    else if (/\.test\.ya?ml$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** Every test in one file's text, or the problems that keep each document from being one (file, document, field path). */
export function parseTests(text: string, name: string): Array<{ test?: PolicyTest; problems: string[]; where: string }> {
  const validate = new Ajv({ allErrors: true, strict: true, strictRequired: false }).compile(POLICY_TEST_SCHEMA);
  const lineCounter = new LineCounter();
  const docs = parseManifestDocuments(text, lineCounter);
  const out: Array<{ test?: PolicyTest; problems: string[]; where: string }> = [];
  docs.forEach((doc, i) => {
    const where = docs.length > 1 ? `${name}#${i + 1}` : name;
    if (doc.errors.length > 0) {
      out.push({ where, problems: doc.errors.map((e) => `${where}: line ${lineCounter.linePos(e.pos[0]).line}: ${e.message.split("\n")[0]}`) });
      return;
    }
    let value: unknown;
    try {
      value = manifestValue(doc);
    } catch (err) {
      out.push({ where, problems: [`${where}: ${errorMessage(err)}`] });
      return;
    }
    if (value === null || value === undefined) return;
    if (!validate(value)) {
      const problems = describeSchemaErrors(validate.errors).map((p) =>
        p.replace(/(\.resource): must match pattern .*$/, "$1: must be Kind/name or Kind/namespace/name"),
      );
      out.push({ where, problems: problems.map((p) => `${where}: ${p}`) });
      return;
    }
    out.push({ where, test: value, problems: [] });
  });
  return out;
}

/**
 * Whether `actual` holds everything in `expected`: mappings field by field (more fields are fine), lists
 * item by item (each expected item in some actual item, any order), anything else equal. Written here because
 * the comparison tests need is this one-sided containment, which deep-equality helpers do not offer.
 */
export function contains(actual: unknown, expected: unknown): boolean {
  if (Array.isArray(expected)) return Array.isArray(actual) && expected.every((e) => actual.some((a) => contains(a, e)));
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => contains((actual as Record<string, unknown>)[k], v));
  }
  return actual === expected;
}

const show = (v: unknown): string => JSON.stringify(v) ?? "undefined";

/** The metadata and spec of a pod, or of the pod a template stamps out. */
type PodView = { metadata: Record<string, unknown>; spec: Record<string, unknown> };

/** The pod a result stands for: the pod itself, or the (first) outfitted template of an object holding templates. */
function podOf(r: Admitted): PodView | string {
  if (r.role === "pod") return { metadata: (r.object.metadata ?? {}) as Record<string, unknown>, spec: (r.object.spec ?? {}) as Record<string, unknown> };
  if (r.role === "templates") {
    const t = templatesIn(r.object)[0]!.template;
    return { metadata: (t.metadata ?? {}) as Record<string, unknown>, spec: (t.spec ?? {}) as Record<string, unknown> };
  }
  if (r.role === "job") return `${r.kind}/${r.name} is a training job: check env, tolerations and affinity on its pods (Pod/${r.name}-<type>-<index>)`;
  return `${r.kind}/${r.name} has no pod template`;
}

function checkMap(what: string, actual: Record<string, unknown> | undefined, expected: Nullable, fails: string[]): void {
  for (const [k, v] of Object.entries(expected)) {
    const got = actual?.[k];
    if (v === null ? got !== undefined : got !== v)
      fails.push(`${what} ${k}: expected ${v === null ? "unset" : show(v)}, got ${got === undefined ? "unset" : show(got)}`);
  }
}

/** What does not hold of `e`'s verdict for result `r`: allowed or denied, by which rules, violations, warnings. */
function verdictFailures(e: Expectation, r: Admitted): string[] {
  const fails: string[] = [];
  const denial = (): string => (r.violations.length > 0 ? ` (${r.violations.map((v) => `[${v.rule}] ${v.field}: ${v.message}`).join("; ")})` : "");
  if (e.allowed !== undefined && e.allowed !== r.allowed)
    fails.push(`expected ${e.allowed ? "allowed" : "denied"}, got ${r.allowed ? "allowed" : `denied by ${r.deniedRules.join(", ")}${denial()}`}`);
  if (e.deniedBy) {
    const want = [...e.deniedBy].sort();
    const got = [...r.deniedRules].sort();
    if (show(want) !== show(got))
      fails.push(`expected denied by ${want.join(", ") || "nothing"}, got ${got.length > 0 ? `denied by ${got.join(", ")}${denial()}` : "allowed"}`);
  }
  for (const v of e.violations ?? []) {
    const hit = r.violations.some(
      (x) =>
        (v.field === undefined || x.field === v.field) &&
        (v.rule === undefined || x.rule === v.rule) &&
        (v.message === undefined || x.message.includes(v.message)),
    );
    if (!hit)
      fails.push(
        `no violation ${show(v)}; violations: ${r.violations.length > 0 ? r.violations.map((x) => `[${x.rule}] ${x.field}: ${x.message}`).join("; ") : "none"}`,
      );
  }
  for (const w of e.warnings ?? []) {
    if (!r.warnings.some((x) => x.includes(w)))
      fails.push(`no warning containing ${show(w)}; warnings: ${r.warnings.length > 0 ? r.warnings.map(show).join(", ") : "none"}`);
  }
  return fails;
}

/** What does not hold of `e`'s env values in `pod`'s containers. */
function envFailures(env: Record<string, Nullable>, pod: PodView, fails: string[]): void {
  for (const [name, vars] of Object.entries(env)) {
    const containers = [
      ...((pod.spec.initContainers ?? []) as Array<Record<string, unknown>>),
      ...((pod.spec.containers ?? []) as Array<Record<string, unknown>>),
    ];
    const c = containers.find((x) => x.name === name);
    if (!c) {
      fails.push(`no container ${show(name)} (containers: ${containers.map((x) => String(x.name)).join(", ")})`);
      continue;
    }
    const values = Object.fromEntries(
      ((c.env ?? []) as Array<{ name: string; value?: string; valueFrom?: unknown }>).map((x) => [x.name, x.value ?? (x.valueFrom ? "(valueFrom)" : "")]),
    );
    checkMap(`container ${name}: env`, values, vars, fails);
  }
}

/** What does not hold of `e`'s pod expectations (env, tolerations, affinity, nodeSelector, labels, annotations) for result `r`. */
function podFailures(e: Expectation, r: Admitted): string[] {
  const podChecks = e.env || e.tolerations || e.affinity || e.nodeSelector || e.labels || e.annotations;
  if (!podChecks) return [];
  const pod = podOf(r);
  if (typeof pod === "string") return [pod];
  const fails: string[] = [];
  if (e.env) envFailures(e.env, pod, fails);
  if (e.tolerations) {
    const have = (pod.spec.tolerations ?? []) as unknown[];
    for (const t of e.tolerations) if (!contains(have, [t])) fails.push(`no toleration ${show(t)}; tolerations: ${show(have)}`);
  }
  if (e.affinity && !contains(pod.spec.affinity, e.affinity))
    fails.push(`affinity does not contain ${show(e.affinity)}; affinity: ${show(pod.spec.affinity ?? null)}`);
  if (e.nodeSelector) checkMap("nodeSelector", pod.spec.nodeSelector as Record<string, unknown> | undefined, e.nodeSelector, fails);
  if (e.labels) checkMap("label", pod.metadata.labels as Record<string, unknown> | undefined, e.labels, fails);
  if (e.annotations) checkMap("annotation", pod.metadata.annotations as Record<string, unknown> | undefined, e.annotations, fails);
  return fails;
}

/** What does not hold of `e` for result `r` (empty: it passes). */
export function check(e: Expectation, r: Admitted): string[] {
  return [...verdictFailures(e, r), ...podFailures(e, r)];
}

/** The result an expectation names (`Kind/name` or `Kind/namespace/name`), or why there is none. */
function find(resource: string, results: readonly Admitted[]): Admitted | string {
  const parts = resource.split("/");
  const [kind, namespace, name] = parts.length === 3 ? parts : [parts[0], undefined, parts[1]];
  const hits = results.filter((r) => r.kind === kind && r.name === name && (namespace === undefined || r.namespace === namespace));
  if (hits.length === 1) return hits[0]!;
  if (hits.length > 1) return `${resource} is ambiguous: it is in ${hits.map((h) => h.namespace).join(", ")}; write Kind/namespace/name`;
  return `no ${resource} among the results (${results.map((r) => `${r.kind}/${r.namespace}/${r.name}`).join(", ")})`;
}

/** Runs one test: its rows, one per expectation, or one error row when it cannot run. */
async function runTest(test: PolicyTest, label: string, dir: string): Promise<Row[]> {
  const error = (details: string[]): Row[] => [{ test: label, resource: "-", result: "error", details }];
  let policy: Policy;
  try {
    policy = await loadPolicy(test.policy, dir);
  } catch (err) {
    if (err instanceof PolicyError) return error([err.message]);
    throw err;
  }
  const inputs: InputObject[] = [];
  try {
    inputs.push(...(await readInputs(test.resources ?? [], dir)));
  } catch (err) {
    if (err instanceof InputError) return error([err.message]);
    throw err;
  }
  (test.objects ?? []).forEach((object, i) => inputs.push({ source: `objects[${i}]`, object }));
  const results = await admitObjects(inputs, { policy, namespace: test.namespace, pods: test.pods ?? true });
  return test.expect.map((e) => {
    const r = find(e.resource, results);
    if (typeof r === "string") return { test: label, resource: e.resource, result: "fail", details: [r] };
    const fails = check(e, r);
    return { test: label, resource: e.resource, result: fails.length === 0 ? "pass" : "fail", details: fails };
  });
}

/** Runs every test under `target` (resolved against `cwd`); names in the rows are relative to `cwd`. */
export async function runPolicyTests(target: string, cwd: string): Promise<Row[]> {
  const rows: Row[] = [];
  for (const file of await testFiles(resolve(cwd, target))) {
    const name = relative(cwd, file) || file;
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      rows.push({ test: name, resource: "-", result: "error", details: [`${name}: cannot read: ${errorMessage(err)}`] });
      continue;
    }
    const tests = parseTests(text, name);
    if (tests.length === 0) rows.push({ test: name, resource: "-", result: "error", details: [`${name}: no PolicyTest in the file`] });
    for (const t of tests) {
      if (!t.test) rows.push({ test: t.where, resource: "-", result: "error", details: t.problems });
      else rows.push(...(await runTest(t.test, `${t.where}: ${t.test.name}`, dirname(file))));
    }
  }
  return rows;
}

/** The pass/fail table, what failed under each row, and a summary line. */
export function resultTable(rows: readonly Row[]): string[] {
  const label = { pass: "pass", fail: "FAIL", error: "ERROR" } as const;
  const widths = [6, Math.max(4, ...rows.map((r) => r.test.length)), Math.max(8, ...rows.map((r) => r.resource.length))];
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i < cells.length - 1 ? c.padEnd(widths[i]!) : c))
      .join("  ")
      .trimEnd();
  const out = [line(["RESULT", "TEST", "RESOURCE"])];
  for (const r of rows) {
    out.push(line([label[r.result], r.test, r.resource]));
    for (const d of r.details) out.push(`        - ${d}`);
  }
  const count = (k: Row["result"]): number => rows.filter((r) => r.result === k).length;
  out.push(`${count("pass")} passed, ${count("fail")} failed${count("error") ? `, ${count("error")} could not run` : ""}`);
  return out;
}

/** `test DIR`: exit 0 when every expectation holds, 1 when one fails or a test cannot run. */
export async function policyTestCommand(target: string | undefined, io: CliIo): Promise<number> {
  if (!target) throw new UsageError("test: give a directory of *.test.yaml files, or one such file");
  try {
    await stat(resolve(io.cwd, target));
  } catch (err) {
    io.stderr(`quartermaster: test: cannot read ${target}: ${errorMessage(err)}`);
    return 1;
  }
  const rows = await runPolicyTests(target, io.cwd);
  if (rows.length === 0) {
    io.stderr(`quartermaster: test: no *.test.yaml files in ${target}`);
    return 1;
  }
  for (const l of resultTable(rows)) io.stdout(l);
  return rows.every((r) => r.result === "pass") ? 0 : 1;
}

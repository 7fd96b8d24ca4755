/**
 * Issue 29 item 7: `admit` and `test` read manifests as kubectl does (sigs.k8s.io/yaml, go-yaml v2: YAML 1.1).
 * `<<` merge keys are merged (YAML 1.2 kept them literal: a pod kubectl sees with 9 GPUs was "allowed" offline);
 * YAML 1.1 scalars as go-yaml v2 reads them; aliases bounded by what they expand to, not by their count (99
 * aliases of a 1 MB node were built into ~100 MB; 500 aliases of a small one were refused).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { LineCounter } from "yaml";
import { parseObjects } from "../../../src/cli/admit-input.js";
import { runCli } from "../../../src/cli/commands.js";
import { expandedSize, MAX_EXPANDED_BYTES, parseManifestDocuments } from "../../../src/cli/manifest-yaml.js";
import { parseTests } from "../../../src/cli/policy-test.js";

const HEAD = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
const dataOf = (text: string): unknown => parseObjects(HEAD + text, "x.yaml")[0]!.object.data;

/** A pod whose second container takes its resources from an anchor through a merge key. */
const MERGED_POD = `apiVersion: v1
kind: Pod
metadata: {name: merged, namespace: team-a}
spec:
  containers:
  - name: a
    image: img
    resources: &small {limits: {nvidia.com/gpu: "1"}}
  - name: b
    image: img
    resources:
      <<: {limits: {nvidia.com/gpu: "9"}}
`;

describe("manifests read as kubectl reads them (YAML 1.1, go-yaml v2)", () => {
  const cases: Array<[string, string, unknown]> = [
    ["a merge key is merged", "data:\n  base: &b {x: '1', q: '2'}\n  m:\n    <<: *b\n    q: '3'\n", { base: { x: "1", q: "2" }, m: { x: "1", q: "3" } }],
    [
      "a merge key of several: the first wins, explicit keys over all",
      "data:\n  a: &a {x: '1', q: '1'}\n  b: &b {q: '2', z: '2'}\n  m:\n    <<: [*a, *b]\n    z: '3'\n",
      { a: { x: "1", q: "1" }, b: { q: "2", z: "2" }, m: { x: "1", q: "1", z: "3" } },
    ],
    ["a merge key of an inline mapping", "data:\n  m: {<<: {x: '1'}, q: '2'}\n", { m: { x: "1", q: "2" } }],
    [
      "YAML 1.1 booleans: yes/no/on/off/y/n",
      "data: {a: yes, b: No, c: on, d: OFF, e: y, f: n, g: 'yes'}\n",
      { a: true, b: false, c: true, d: false, e: true, f: false, g: "yes" },
    ],
    ['a bare `y` key is the boolean true (go-yaml v2 too; JSON key "true")', "data: {y: '1', 'n': '2'}\n", { true: "1", n: "2" }],
    ["YAML 1.1 numbers: octal, binary, underscores", "data: {a: 0777, b: 0b101, c: 1_000, d: 0x1F}\n", { a: 511, b: 5, c: 1000, d: 31 }],
    [
      "no sexagesimal numbers and no timestamps (go-yaml v2 keeps them strings)",
      "data: {a: 1:20, b: 2001-12-14, c: 2001-12-14T21:59:43Z}\n",
      { a: "1:20", b: "2001-12-14", c: "2001-12-14T21:59:43Z" },
    ],
    [
      "500 aliases of a small node: allowed (no count bound)",
      `data:\n  a: &a v\n${Array.from({ length: 500 }, (_, i) => `  k${i}: *a\n`).join("")}`,
      Object.fromEntries([["a", "v"], ...Array.from({ length: 500 }, (_, i) => [`k${i}`, "v"])]),
    ],
  ];
  for (const [name, text, want] of cases) it(name, () => assert.deepEqual(dataOf(text), want));

  const big = "x".repeat(1_000_000);
  const refused: Array<[string, string, RegExp]> = [
    [
      "the issue's bomb: 99 aliases of a 1 MB scalar",
      `data:\n  a: &a ${big}\n${Array.from({ length: 99 }, (_, i) => `  k${i}: *a\n`).join("")}`,
      /^x\.yaml#1: YAML aliases expand this document to about 100000\d+ bytes, over the limit of 3145728 \(the apiserver's 3 MiB request limit\): refused without expanding it/,
    ],
    [
      "nested aliases (10^30 leaves): measured without expanding",
      `data:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n${Array.from({ length: 29 }, (_, i) => `  a${i + 1}: &a${i + 1} [${Array(10).fill(`*a${i}`).join(", ")}]\n`).join("")}`,
      /^x\.yaml#1: YAML aliases expand this document to more than 10\^15 bytes/,
    ],
    ["an alias inside the node it names", "data: &a [*a]\n", /^x\.yaml#1: an alias refers to a node that contains it \(anchor "a"\)/],
  ];
  for (const [name, text, message] of refused) {
    it(`${name} → refused with a clear error`, () => {
      const t0 = Date.now();
      assert.throws(
        () => parseObjects(HEAD + text, "x.yaml"),
        (err: Error) => err.name === "InputError" && message.test(err.message),
      );
      assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
    });
  }

  it("just under and just over the limit: the expanded size decides, with the limit at 3 MiB", () => {
    assert.equal(MAX_EXPANDED_BYTES, 3 * 1024 * 1024);
    const mb = "x".repeat(1024 * 1024 - 10);
    const two = `data:\n  a: &a ${mb}\n  b: *a\n`; // ~2 MiB expanded
    const four = `data:\n  a: &a ${mb}\n  b: *a\n  c: *a\n  d: *a\n`; // ~4 MiB
    assert.equal(Object.keys(dataOf(two) as object).length, 2);
    assert.throws(() => dataOf(four), /YAML aliases expand this document/);
    const size = (text: string): number => expandedSize(parseManifestDocuments(HEAD + text, new LineCounter())[0]!).bytes;
    assert.ok(size(four) > MAX_EXPANDED_BYTES && size(two) < MAX_EXPANDED_BYTES);
  });

  it("a large document without aliases (2.4 MB: under the apiserver's 3 MiB request limit) is not refused by the alias bound", () => {
    const text = `data:\n${Array.from({ length: 2 }, (_, i) => `  k${i}: ${"y".repeat(1_200_000)}\n`).join("")}`;
    assert.equal(Object.keys(dataOf(text) as object).length, 2);
  });

  it("policy tests (`quartermaster test` files) are read the same way", () => {
    const [t] = parseTests(
      "apiVersion: quartermaster.dev/v1alpha1\nkind: PolicyTest\nname: &n x\nresources: [a.yaml]\nexpect: [{resource: Pod/a, <<: {allowed: yes}}]\n",
      "x.test.yaml",
    );
    assert.deepEqual(t!.problems, []);
    assert.deepEqual((t!.test as unknown as { expect: unknown[] }).expect, [{ resource: "Pod/a", allowed: true }]);
    const [bomb] = parseTests(
      `apiVersion: quartermaster.dev/v1alpha1\nkind: PolicyTest\nname: &n ${big}\nresources: [${Array(5).fill("*n").join(", ")}]\nexpect: []\n`,
      "b.test.yaml",
    );
    assert.match(bomb!.problems[0]!, /^b\.test\.yaml: YAML aliases expand this document/);
  });
});

describe("quartermaster admit: a merge key seen as kubectl sees it", () => {
  const dir = mkdtempSync(join(tmpdir(), "qm-merge-"));
  writeFileSync(join(dir, "pod.yaml"), MERGED_POD);
  writeFileSync(join(dir, "limits.yaml"), "limits:\n  container:\n    gpus: {nvidia.com/gpu: 8}\n");
  it("the 9 GPUs merged into container b → denied offline, as in the cluster", async () => {
    const err: string[] = [];
    const code = await runCli(["admit", "-f", join(dir, "pod.yaml"), "--policy", join(dir, "limits.yaml")], {
      stdout: () => undefined,
      stderr: (l) => err.push(l),
      cwd: dir,
      shutdown: new Promise(() => undefined),
    });
    assert.equal(code, 1, err.join("\n"));
    assert.match(err.join("\n"), /violation \[container-limits\] spec\.containers\[1\]\.resources\.limits\[nvidia\.com\/gpu\]: 9 exceeds/);
  });
  it("-o yaml quotes what YAML 1.1 would read as another type, so kubectl reads back strings", async () => {
    const pod = `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a, labels: {a: "yes", b: "on", c: "0777"}}\nspec: {containers: [{name: m, image: img}]}\n`;
    writeFileSync(join(dir, "labels.yaml"), pod);
    const out: string[] = [];
    const code = await runCli(["admit", "-f", join(dir, "labels.yaml")], {
      stdout: (l) => out.push(l),
      stderr: () => undefined,
      cwd: dir,
      shutdown: new Promise(() => undefined),
    });
    assert.equal(code, 0);
    assert.match(out.join("\n"), /a: "yes"\n\s+b: "on"\n\s+c: "0777"/);
    assert.deepEqual((parseObjects(out.join("\n"), "o.yaml")[0]!.object.metadata as { labels?: unknown }).labels, { a: "yes", b: "on", c: "0777" });
  });
});

/**
 * The generated manifests (src/manifests/generate.ts) are committed as rendered, and a ConfigMap that only
 * carries the ledger's label is not the ledger's. The reconciler's ConfigMap grants in every kustomize render
 * are checked in test/e2e/manifests-render.test.ts (rendering needs kubectl).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readLedgerConfigMaps } from "../../../src/kube/ledger.js";
import { generatedManifests } from "../../../src/manifests/generate.js";
import { isLedgerConfigMapName, ledgerConfigMapNames, MAX_LEDGER_SHARDS, shardName } from "../../../src/ledger/shards.js";
import { ROOT } from "../../fixtures/manifests.js";

describe("generated manifests", () => {
  it("every generated manifest is committed as rendered (run npm run generate)", async () => {
    for (const [file, text] of Object.entries(await generatedManifests())) assert.equal(readFileSync(join(ROOT, file), "utf8"), text, file);
  });

  it("the ledger's names: the index and shards 0 … MAX_LEDGER_SHARDS-1, and nothing else", () => {
    const names = ledgerConfigMapNames();
    assert.equal(names.length, MAX_LEDGER_SHARDS + 1);
    assert.equal(names[0], "quartermaster-ledger");
    assert.equal(names.at(-1), shardName(MAX_LEDGER_SHARDS - 1));
    const cases: Array<[string, boolean]> = [
      ["quartermaster-ledger", true],
      ["quartermaster-ledger-0", true],
      [shardName(MAX_LEDGER_SHARDS - 1), true],
      [shardName(MAX_LEDGER_SHARDS), false],
      ["quartermaster-ledger-01", false],
      ["quartermaster-ledger-x", false],
      ["quartermaster-policy-5h7k2", false],
      ["quartermaster-ledger-0-extra", false],
    ];
    for (const [name, want] of cases) assert.equal(isLedgerConfigMapName(name), want, name);
    for (const n of names) assert.ok(isLedgerConfigMapName(n), n);
  });
});

describe("the ledger's ConfigMaps as read", () => {
  it("a ConfigMap with the ledger's label under another name is not the ledger's (never rewritten or deleted)", async () => {
    const cm = (name: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, uid: `uid-${name}`, resourceVersion: "1" },
      data: { "shard.json": "{}" },
    });
    const names = ["quartermaster-ledger", "quartermaster-ledger-0", "quartermaster-policy-abc12", "unrelated", shardName(MAX_LEDGER_SHARDS)];
    const read = await readLedgerConfigMaps({ listConfigMaps: async () => names.map(cm) }, "quartermaster");
    assert.deepEqual([...read.keys()], ["quartermaster-ledger", "quartermaster-ledger-0"]);
  });
});

/**
 * docs/architecture.md's picture of the allowed edges is ROOMS (.dependency-cruiser.cjs) as
 * test/tools/layers-picture.ts renders it: a room or an edge added to the rules and not to the document fails here.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { layersPicture, loadRooms, ROOT, type Room } from "../../tools/layers-picture.js";

/** The picture between the markers of docs/architecture.md, fences stripped. */
function documented(): string {
  const doc = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
  const m = /<!-- layers-picture:[^\n]*-->\n```mermaid\n([\s\S]*?)```\n([\s\S]*?)<!-- \/layers-picture -->/.exec(doc);
  assert.ok(m, "docs/architecture.md has no layers-picture block");
  return `${m[1]}${m[2]}`;
}

describe("the layers picture in docs/architecture.md", () => {
  it("is ROOMS as rendered (node --import tsx test/tools/layers-picture.ts)", () => {
    assert.equal(documented(), layersPicture(loadRooms()));
  });

  const rooms = (): Record<string, Room> => structuredClone(loadRooms());
  const cases: Array<{ name: string; change: (r: Record<string, Room>) => void }> = [
    { name: "an edge added to a room", change: (r) => r.kube?.may?.push("reconcile") },
    { name: "an edge removed", change: (r) => r.run?.may?.splice(r.run.may.indexOf("kube"), 1) },
    { name: "a room added", change: (r) => (r.extra = { paths: ["src/extra/"], may: ["core"] }) },
    { name: "a room's path changed", change: (r) => r.run?.paths.splice(0, 1, "src/drivers/") },
  ];
  for (const c of cases) {
    it(`differs when ROOMS changes: ${c.name}`, () => {
      const changed = rooms();
      c.change(changed);
      assert.notEqual(layersPicture(changed), documented());
    });
  }
});

/**
 * @module
 * The picture of the allowed edges in docs/architecture.md ("Layers"), rendered from `ROOMS` in
 * .dependency-cruiser.cjs: `node --import tsx test/tools/layers-picture.ts` prints it, and
 * test/unit/project/layers-picture.test.ts fails when the document's copy differs.
 *
 * An arrow A → B means A may import B. Only the arrows no path of other arrows implies are drawn (a transitive
 * reduction), so the picture stays readable; where following arrows would reach a room the rules forbid, the line
 * under the picture says so.
 */
import { createRequire } from "node:module";
import { join } from "node:path";

export interface Room {
  paths: string[];
  /** The rooms it may import besides itself; null: anything (the test and bench helpers). */
  may: string[] | null;
}

export const ROOT = join(import.meta.dirname, "../..");

/** `ROOMS` as the rules file declares it. */
export function loadRooms(): Record<string, Room> {
  const config = createRequire(import.meta.url)(join(ROOT, ".dependency-cruiser.cjs")) as { ROOMS: Record<string, Room> };
  return config.ROOMS;
}

/** A room's path pattern as a reader would write it: `src/generated/*-validator.ts`. */
const plainPath = (p: string): string =>
  p
    .replace(/\[a-z-\]\+/g, "*")
    .replace(/\\\./g, ".")
    .replace(/\$$/, "");

/** What `from` reaches along arrows (not itself unless by a cycle). */
function reach(edges: Map<string, Set<string>>, from: string): Set<string> {
  const seen = new Set<string>();
  const todo = [...(edges.get(from) ?? [])];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    if (seen.has(next)) continue;
    seen.add(next);
    todo.push(...(edges.get(next) ?? []));
  }
  return seen;
}

/** The mermaid picture (without the fence) and the lines naming what arrows would wrongly imply. */
export function layersPicture(rooms: Record<string, Room>): string {
  const names = Object.keys(rooms).filter((n) => rooms[n]?.may !== null);
  const may = new Map(names.map((n) => [n, new Set(rooms[n]?.may ?? [])]));
  const drawn = new Map<string, Set<string>>();
  for (const [from, targets] of may) {
    // Keep from → to unless another allowed room of `from` reaches `to`.
    const kept = [...targets].filter((to) => ![...targets].some((via) => via !== to && reach(may, via).has(to)));
    drawn.set(from, new Set(kept));
  }
  const lines = ["flowchart TD"];
  for (const n of names) lines.push(`  ${n}["${n}<br/>${(rooms[n]?.paths ?? []).map(plainPath).join(" ")}"]`);
  for (const [from, targets] of drawn) for (const to of targets) lines.push(`  ${from} --> ${to}`);
  const notes: string[] = [];
  for (const [from, targets] of may) {
    const implied = [...reach(drawn, from)].filter((to) => !targets.has(to) && to !== from);
    if (implied.length > 0) notes.push(`${from} may not import ${implied.sort().join(", ")}`);
  }
  const harness = Object.keys(rooms).filter((n) => rooms[n]?.may === null);
  const footer = [
    "",
    `Not by way of the arrows: ${notes.length > 0 ? notes.join("; ") : "none"}.`,
    `Anything: ${harness.map((n) => `${n} (${(rooms[n]?.paths ?? []).join(" ")})`).join(", ")}.`,
  ];
  return [...lines, ...footer].join("\n") + "\n";
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(layersPicture(loadRooms()));

// The baseline of bench/scale.ts: a bare paginated LIST of the objects a reconcile pass reads, and nothing else.
// Usage: node bare-list.mjs URL CA_FILE TOKEN_FILE PAGE_SIZE PATH... ; prints {ms, objects, bytes, requests}.
// A `||` between paths separates phases: the LISTs of one phase run at once, phases one after another (as the
// pass reads: each job kind in turn, then the rest together). Each page is read whole and JSON-decoded (what
// any client must do), then dropped; keep-alive connections.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";

const [url, caFile, tokenFile, pageSize, ...paths] = process.argv.slice(2);
const { hostname, port } = new URL(url);
const ca = readFileSync(caFile, "utf8");
const token = readFileSync(tokenFile, "utf8").trim();
const agent = new Agent({ keepAlive: true });

const get = (path) =>
  new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, ca, agent, headers: { authorization: `Bearer ${token}`, accept: "application/json" } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks);
        if (res.statusCode === 404) return resolve({ items: [], bytes: text.length, metadata: {} });
        if (res.statusCode !== 200) return reject(new Error(`${path}: ${res.statusCode} ${text.toString().slice(0, 200)}`));
        resolve({ ...JSON.parse(text.toString()), bytes: text.length });
      });
    });
    req.on("error", reject);
    req.end();
  });

const started = performance.now();
let objects = 0;
let bytes = 0;
let requests = 0;
const listAll = async (path) => {
  let cont;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const page = await get(`${path}${sep}limit=${pageSize}${cont ? `&continue=${encodeURIComponent(cont)}` : ""}`);
    requests++;
    objects += page.items?.length ?? 0;
    bytes += page.bytes;
    cont = page.metadata?.continue;
  } while (cont);
};
const phases = [[]];
for (const p of paths) {
  if (p === "||") phases.push([]);
  else phases.at(-1).push(p);
}
for (const phase of phases) await Promise.all(phase.map(listAll));
agent.destroy();
process.stdout.write(JSON.stringify({ ms: Math.round(performance.now() - started), objects, bytes, requests }) + "\n");

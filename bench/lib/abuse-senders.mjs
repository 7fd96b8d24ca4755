// The hostile senders of `npm run bench:abuse -- --only-senders` (bench/abuse-senders.ts), in a process of their own
// so that encrypting their bodies does not hold the driver's event loop, where the other tenants' reviews are timed.
// argv[2]: JSON {port, caFile, bodies: [{name, path, file}], senders, seconds, maxPerSender}. Each sender posts the
// bodies in turn (sender i starting at body i) on its own keep-alive connection (127.0.0.1), the next as soon as the
// answer is in, until `seconds` have passed or it sent `maxPerSender`. Prints "ready" once the bodies are read,
// then one JSON line: {byName: {name: {ms: [answer times], statuses: {code: count}}}}.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";

const cfg = JSON.parse(process.argv[2]);
const ca = readFileSync(cfg.caFile, "utf8");
const bodies = cfg.bodies.map((b) => ({ ...b, body: readFileSync(b.file) }));
const byName = Object.fromEntries(bodies.map((b) => [b.name, { ms: [], statuses: {} }]));

function once(agent, b) {
  const out = byName[b.name];
  const count = (k) => (out.statuses[k] = (out.statuses[k] ?? 0) + 1);
  return new Promise((resolve) => {
    const started = performance.now();
    const req = request(
      {
        host: "127.0.0.1",
        port: cfg.port,
        path: b.path,
        method: "POST",
        agent,
        ca,
        servername: "qm.bench.svc",
        timeout: 30_000,
        headers: { "content-type": "application/json", "content-length": b.body.length },
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          out.ms.push(performance.now() - started);
          count(String(res.statusCode));
          resolve();
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err) => (count(err.code ?? err.message), resolve()));
    req.end(b.body);
  });
}

process.stdout.write("ready\n");
const end = performance.now() + cfg.seconds * 1000;
await Promise.all(
  Array.from({ length: cfg.senders }, async (_, s) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < cfg.maxPerSender && performance.now() < end; i++) await once(agent, bodies[(s + i) % bodies.length]);
    agent.destroy();
  }),
);
process.stdout.write(`${JSON.stringify({ byName })}\n`);

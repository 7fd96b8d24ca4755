// The deep senders of `npm run bench:abuse -- --only-deep` (bench/abuse-deep.ts), in a process of their own so
// that encrypting megabytes of body does not hold the driver's event loop, where the small reviews are timed.
// argv[2]: JSON {port, caFile, bodyFile, senders, seconds, maxPerSender}. Each sender posts the body to
// /validate/pods on its own keep-alive connection (127.0.0.1), the next as soon as the answer is in, until
// `seconds` have passed or it sent `maxPerSender`. Prints "ready" once the body is read, then one JSON line:
// {ms: [answer times], statuses: {code: count}}.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";

const cfg = JSON.parse(process.argv[2]);
const ca = readFileSync(cfg.caFile, "utf8");
const body = readFileSync(cfg.bodyFile);
const ms = [];
const statuses = {};
const count = (k) => (statuses[k] = (statuses[k] ?? 0) + 1);

function once(agent) {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = request(
      { host: "127.0.0.1", port: cfg.port, path: "/validate/pods", method: "POST", agent, ca, servername: "qm.bench.svc", timeout: 30_000, headers: { "content-type": "application/json", "content-length": body.length } },
      (res) => {
        res.resume();
        res.on("end", () => {
          ms.push(performance.now() - started);
          count(String(res.statusCode));
          resolve();
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err) => (count(err.code ?? err.message), resolve()));
    req.end(body);
  });
}

process.stdout.write("ready\n");
const end = performance.now() + cfg.seconds * 1000;
await Promise.all(
  Array.from({ length: cfg.senders }, async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < cfg.maxPerSender && performance.now() < end; i++) await once(agent);
    agent.destroy();
  }),
);
process.stdout.write(`${JSON.stringify({ ms, statuses })}\n`);

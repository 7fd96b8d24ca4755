// The floor bench/e2e measures Quartermaster's webhooks against: bare node:https that reads the body,
// parses the review and answers it, with no routing, checks, rules, logging or metrics library.
//
//   node floor-webhook.mjs CERT KEY PORT METRICS_PORT [UPSTREAM_PORT UPSTREAM_CA]
//
// Without an upstream it answers every review `allowed` with its uid and nothing else. With one (a
// Quartermaster webhook server on 127.0.0.1), the first review of each kind (path, replica type and index)
// is passed to it and its answer kept as a template; every later review of that kind gets the template with
// its own uid. So, once warmed up, the apiserver gets Quartermaster's very answers (the same patch to
// apply, the same warnings) from a server that does no work for them: the difference between the two is
// what Quartermaster's own work costs.
//
// METRICS_PORT serves, over plain HTTP, the two series bench/e2e reads from Quartermaster's metrics,
// measured the same way: quartermaster_admission_duration_seconds (from the request event to the answer
// handed to the socket) and quartermaster_tls_connections_total.
import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, request } from "node:https";

const [certFile, keyFile, port, metricsPort, upstreamPort, upstreamCa] = process.argv.slice(2);
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Per webhook name: count, sum and the cumulative-to-be bucket counts. */
const histograms = new Map();
let connections = 0;
/** Answer templates by kind: the answer split at its uid. */
const templates = new Map();

function observe(path, seconds) {
  const name = path.slice(1).replace("/", "-"); // "/mutate/pods" -> "mutate-pods", as Quartermaster names it
  let h = histograms.get(name);
  if (!h) histograms.set(name, (h = { count: 0, sum: 0, buckets: BUCKETS.map(() => 0) }));
  h.count++;
  h.sum += seconds;
  const i = BUCKETS.findIndex((b) => seconds <= b);
  if (i >= 0) h.buckets[i]++;
}

function ask(path, body) {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: Number(upstreamPort), path, method: "POST", ca: readFileSync(upstreamCa), headers: { "content-type": "application/json", "content-length": body.length } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString()) : reject(new Error(`upstream ${res.statusCode}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: "TLSv1.2" }, (req, res) => {
  const started = performance.now();
  if (req.method === "GET") return res.end("ok");
  const path = req.url.split("?")[0]; // the apiserver adds ?timeout=10s
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    const review = JSON.parse(bytes.toString());
    const uid = review.request.uid;
    const send = (text) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
      observe(path, (performance.now() - started) / 1000);
    };
    if (!upstreamPort) return send(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, allowed: true } }));
    const labels = review.request.object?.metadata?.labels ?? {};
    const kind = `${path} ${labels["training.kubeflow.org/replica-type"] ?? ""} ${labels["training.kubeflow.org/replica-index"] ?? ""}`;
    const template = templates.get(kind);
    if (template) return send(template.join(uid));
    ask(req.url, bytes).then(
      (text) => {
        templates.set(kind, text.split(uid));
        send(text);
      },
      (err) => {
        res.writeHead(500).end(String(err));
      },
    );
  });
});
server.keepAliveTimeout = 90_000;
server.on("secureConnection", () => connections++);

const metrics = createHttpServer((req, res) => {
  const lines = [];
  for (const [name, h] of histograms) {
    let cumulative = 0;
    BUCKETS.forEach((b, i) => lines.push(`quartermaster_admission_duration_seconds_bucket{le="${b}",webhook="${name}"} ${(cumulative += h.buckets[i])}`));
    lines.push(`quartermaster_admission_duration_seconds_bucket{le="+Inf",webhook="${name}"} ${h.count}`);
    lines.push(`quartermaster_admission_duration_seconds_sum{webhook="${name}"} ${h.sum}`);
    lines.push(`quartermaster_admission_duration_seconds_count{webhook="${name}"} ${h.count}`);
  }
  lines.push(`quartermaster_tls_connections_total{protocol="http/1.1"} ${connections}`);
  res.end(lines.join("\n") + "\n");
});

server.listen(Number(port), "127.0.0.1", () =>
  metrics.listen(Number(metricsPort), "127.0.0.1", () => process.stdout.write(`serving https://127.0.0.1:${server.address().port} metrics http://127.0.0.1:${metrics.address().port}\n`)),
);
process.on("SIGTERM", () => {
  metrics.close();
  server.close(() => process.exit(0));
  server.closeAllConnections();
});

// The floor the admission server is measured against: bare node:https that reads the body, parses the
// review and answers allowed with its uid. Nothing else: no routing, checks, logging or metrics.
// With a fourth argument (a file holding a response with the uid written as __UID__) it answers that
// response instead: the floor for an answer of the same size as Quartermaster's (patch and warnings).
import { readFileSync } from "node:fs";
import { createServer } from "node:https";

const [certFile, keyFile, port = "0", responseFile] = process.argv.slice(2);
const template = responseFile ? readFileSync(responseFile, "utf8").split("__UID__") : undefined;
const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: "TLSv1.2" }, (req, res) => {
  if (req.method === "GET") return res.end("ok"); // readiness probe
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const review = JSON.parse(Buffer.concat(chunks).toString());
    const body = template
      ? template.join(review.request.uid)
      : JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: review.request.uid, allowed: true } });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 90_000;
server.listen(Number(port), "127.0.0.1", () => process.stdout.write(`serving https://127.0.0.1:${server.address().port}\n`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));

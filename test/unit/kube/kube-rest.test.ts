/**
 * The webhook's plain-GET client (src/kube/rest.ts): credentials from a kubeconfig as client-node reads
 * them, 404 as "not there", other statuses as errors carrying the code, and the configurations it leaves
 * to client-node. The job reader and the ledger capacity read through it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { issueCertificate } from "../../../src/certs/generate.js";
import { createJobReader } from "../../../src/kube/jobs.js";
import { ledgerCapacity } from "../../../src/run/capacity.js";
import { CHECKSUM_KEY, INDEX_KEY, shardLedger } from "../../../src/ledger/shards.js";
import { RestError, restClient } from "../../../src/kube/rest.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { capturingLogger, makeCerts } from "../../fixtures/https.js";
import { oneNodeLedger } from "../../fixtures/ledgers.js";

const dir = mkdtempSync(join(tmpdir(), "qm-rest-"));
const seen: Array<{ path: string; auth?: string; clientCert?: string; method?: string; body?: string; type?: string }> = [];

/** The data of the ledger index ConfigMap in namespace `ledgered`; undefined: not there (404). */
let ledgerIndexData: Record<string, string> | undefined;

function handler(req: IncomingMessage, res: ServerResponse): void {
  if (req.method === "POST") {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ path: req.url!, auth: req.headers.authorization, method: "POST", body, type: req.headers["content-type"] });
      const send = (status: number, out: unknown): void => void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(out));
      if (req.url === "/api/v1/namespaces/team-a/events") return send(201, { ...(JSON.parse(body) as object), metadata: { name: "e1", namespace: "team-a" } });
      if (req.url === "/api/v1/namespaces/locked/events") return send(403, { kind: "Status", code: 403, message: "events is forbidden" });
      if (req.url === "/api/v1/namespaces/gone/events") return send(404, { kind: "Status", code: 404, message: 'namespaces "gone" not found' });
      send(500, {});
    });
    return;
  }
  const peer = (req.socket as { getPeerCertificate?: () => { subject?: { CN?: string } } }).getPeerCertificate?.();
  seen.push({ path: req.url!, auth: req.headers.authorization, clientCert: peer?.subject?.CN });
  const send = (status: number, body: unknown): void => void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  if (req.url === "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm")
    return send(200, { apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", metadata: { name: "llm", namespace: "team-a" } });
  if (req.url === "/api/v1/namespaces/quartermaster/configmaps/forbidden")
    return send(403, { kind: "Status", code: 403, message: 'configmaps "forbidden" is forbidden' });
  if (req.url === "/api/v1/namespaces/quartermaster/configmaps/empty") return send(200, { kind: "ConfigMap" });
  if (req.url === "/api/v1/namespaces/ledgered/configmaps/quartermaster-ledger" && ledgerIndexData)
    return send(200, { kind: "ConfigMap", data: ledgerIndexData });
  send(404, { kind: "Status", code: 404, message: "not found" });
}

const plain = createHttpServer(handler).listen(0, "127.0.0.1");
const certs = await makeCerts();
const client = await issueCertificate({ ca: certs.certs.ca, commonName: "quartermaster-webhook", usage: "client", days: 1, now: new Date() });
const tls = createHttpsServer(
  { cert: certs.certs.certPem, key: certs.certs.keyPem, ca: certs.certs.ca.certPem, requestCert: true, rejectUnauthorized: true },
  handler,
).listen(0, "127.0.0.1");
before(() => Promise.all([plain, tls].map((s) => (s.listening ? undefined : new Promise((r) => s.once("listening", r))))));
after(() => {
  plain.close();
  tls.close();
});
const port = (s: { address(): unknown }): number => (s.address() as AddressInfo).port;

function kubeconfig(name: string, cluster: string, user: string): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: ${cluster}}]\nusers: [{name: u, user: ${user}}]\n`,
  );
  return file;
}

describe("restClient", () => {
  it("reads a kubeconfig written as JSON, and a YAML flow mapping that starts with a brace as YAML", async () => {
    const server = `http://127.0.0.1:${port(plain)}`;
    const json = join(dir, "json.kubeconfig");
    writeFileSync(
      json,
      JSON.stringify({
        "current-context": "c",
        contexts: [{ name: "c", context: { cluster: "k", user: "u" } }],
        clusters: [{ name: "k", cluster: { server } }],
        users: [{ name: "u", user: { token: "from-json" } }],
      }),
    );
    const flow = join(dir, "flow.kubeconfig");
    writeFileSync(
      flow,
      `{current-context: c, contexts: [{name: c, context: {cluster: k, user: u}}], clusters: [{name: k, cluster: {server: "${server}"}}], users: [{name: u, user: {token: from-yaml}}]}\n`,
    );
    for (const [file, token] of [
      [json, "from-json"],
      [flow, "from-yaml"],
    ] as const) {
      const rest = (await restClient(file))!;
      await rest.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm");
      assert.equal(seen.at(-1)?.auth, `Bearer ${token}`, file);
    }
    writeFileSync(json, "{not json: [");
    await assert.rejects(restClient(json), /json\.kubeconfig.*Flow sequence/s, "malformed text is refused with the YAML parser's message");
    // A key written twice: JSON.parse would keep the last; yaml (as client-node's parser and kubectl) refuses the file.
    // Its first value ends in an escaped backslash, its note holds a colon and an escaped quote: strings are skipped whole.
    writeFileSync(json, `{"current-context": "c\\\\", "current-context": "d", "contexts": [], "note": "a:b\\"c"}`);
    await assert.rejects(restClient(json), /json\.kubeconfig.*Map keys must be unique/s, "a duplicate key is refused, not read last-wins");
  });

  it("token kubeconfig over HTTP: GET with the bearer token; 404 → undefined; 403 → RestError with the code and message", async () => {
    const rest = (await restClient(kubeconfig("token.yaml", `{server: "http://127.0.0.1:${port(plain)}"}`, "{token: abc}")))!;
    assert.deepEqual(await rest.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm"), {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "llm", namespace: "team-a" },
    });
    assert.equal(seen.at(-1)!.auth, "Bearer abc");
    assert.equal(await rest.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/gone"), undefined);
    const err = await rest.get("/api/v1/namespaces/quartermaster/configmaps/forbidden").catch((e: unknown) => e);
    assert.ok(err instanceof RestError);
    assert.equal(err.code, 403);
    assert.match(err.message, /HTTP 403: configmaps "forbidden" is forbidden/);
  });

  it("POST: the JSON body with its content type and the bearer token; the created object back; 403 and 404 → RestError", async () => {
    const rest = (await restClient(kubeconfig("post.yaml", `{server: "http://127.0.0.1:${port(plain)}"}`, "{token: abc}")))!;
    const event = { apiVersion: "v1", kind: "Event", reason: "KueueAdmissionRefused" };
    assert.deepEqual(await rest.post("/api/v1/namespaces/team-a/events", event), { ...event, metadata: { name: "e1", namespace: "team-a" } });
    assert.deepEqual(
      { ...seen.at(-1), body: JSON.parse(seen.at(-1)!.body!) as unknown },
      { path: "/api/v1/namespaces/team-a/events", auth: "Bearer abc", method: "POST", body: event, type: "application/json" },
    );
    for (const [ns, code] of [
      ["locked", 403],
      ["gone", 404],
    ] as const) {
      const err = await rest.post(`/api/v1/namespaces/${ns}/events`, event).catch((e: unknown) => e);
      assert.ok(err instanceof RestError, String(err));
      assert.equal(err.code, code);
      assert.match(err.message, new RegExp(`^POST /api/v1/namespaces/${ns}/events: HTTP ${code}`));
    }
  });

  it("client certificate and CA from files relative to the kubeconfig; tokenFile re-read for each request", async () => {
    writeFileSync(join(dir, "ca.crt"), certs.certs.ca.certPem);
    writeFileSync(join(dir, "client.crt"), client.certPem);
    writeFileSync(join(dir, "client.key"), client.keyPem);
    writeFileSync(join(dir, "token"), "first\n");
    const file = kubeconfig(
      "tls.yaml",
      `{server: "https://127.0.0.1:${port(tls)}", certificate-authority: ca.crt, tls-server-name: localhost}`,
      "{client-certificate: client.crt, client-key: client.key, tokenFile: token}",
    );
    const rest = (await restClient(file))!;
    await rest.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm");
    assert.deepEqual(seen.at(-1), {
      path: "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm",
      auth: "Bearer first",
      clientCert: "quartermaster-webhook",
    });
    writeFileSync(join(dir, "token"), "rotated\n");
    await rest.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm");
    assert.equal(seen.at(-1)!.auth, "Bearer rotated");
  });

  it("inline *-data fields", async () => {
    const b64 = (s: string): string => Buffer.from(s).toString("base64");
    const file = kubeconfig(
      "inline.yaml",
      `{server: "https://127.0.0.1:${port(tls)}", certificate-authority-data: ${b64(certs.certs.ca.certPem)}, tls-server-name: localhost}`,
      `{client-certificate-data: ${b64(client.certPem)}, client-key-data: ${b64(client.keyPem)}}`,
    );
    assert.ok(await (await restClient(file))!.get("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm"));
  });

  it("a server certificate the CA did not sign is refused", async () => {
    const other = (await makeCerts()).certs.ca.certPem;
    writeFileSync(join(dir, "other-ca.crt"), other);
    const file = kubeconfig("wrong-ca.yaml", `{server: "https://127.0.0.1:${port(tls)}", certificate-authority: other-ca.crt}`, "{token: x}");
    await assert.rejects((await restClient(file))!.get("/x"), /self.signed|unable to verify|certificate/);
  });

  const leftToClientNode: Array<[string, string, string]> = [
    ["an exec plugin", `{server: "https://127.0.0.1:1"}`, "{exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}}"],
    ["an auth-provider", `{server: "https://127.0.0.1:1"}`, "{auth-provider: {name: oidc}}"],
    ["basic auth", `{server: "https://127.0.0.1:1"}`, "{username: a, password: b}"],
    ["a proxy", `{server: "https://127.0.0.1:1", proxy-url: "http://proxy:3128"}`, "{token: x}"],
  ];
  for (const [name, cluster, user] of leftToClientNode) {
    it(`a kubeconfig with ${name} is left to client-node (undefined)`, async () => {
      assert.equal(await restClient(kubeconfig(`${name.replace(/\W/g, "_")}.yaml`, cluster, user)), undefined);
    });
  }
});

describe("readers over restClient", () => {
  it("the ledger capacity: a good index gives capacity (its code loaded on first read), a corrupt one is warned and none, a gone one none", async () => {
    const ledger = oneNodeLedger();
    const { index } = shardLedger(ledger, 900_000);
    const { log, lines } = capturingLogger();
    const cap = ledgerCapacity({ kubeconfig: file, namespace: "ledgered", intervalMs: 3_600_000, log });
    try {
      ledgerIndexData = { [INDEX_KEY]: index.text, [CHECKSUM_KEY]: index.sha256 };
      await cap.refresh();
      assert.equal(cap.current()?.total("nvidia.com/gpu"), 8);
      assert.equal(cap.reading()?.index.counts.nodes, 1);
      ledgerIndexData = { [INDEX_KEY]: index.text.replace('"nodes":1', '"nodes":2'), [CHECKSUM_KEY]: index.sha256 };
      await cap.refresh();
      assert.equal(cap.current(), undefined, "a corrupt index: no capacity");
      assert.ok(
        lines.some((l) => String(l.msg).includes("fails its checksum")),
        JSON.stringify(lines),
      );
      ledgerIndexData = { [INDEX_KEY]: index.text, [CHECKSUM_KEY]: index.sha256 };
      await cap.refresh();
      assert.equal(cap.current()?.total("nvidia.com/gpu"), 8, "read again");
      ledgerIndexData = undefined;
      await cap.refresh();
      assert.equal(cap.current(), undefined, "the index is gone: no capacity");
      assert.equal(cap.reading(), undefined);
    } finally {
      cap.stop();
      ledgerIndexData = undefined;
    }
  });

  let file: string;
  before(() => {
    file = kubeconfig("readers.yaml", `{server: "http://127.0.0.1:${port(plain)}"}`, "{token: r}");
  });

  it("the job reader GETs the job's path; a missing job is undefined", async () => {
    const kinds = defaultPolicy().jobKinds;
    const pytorch = kinds.find((k) => k.kind === "PyTorchJob")!;
    const reader = createJobReader({ kubeconfig: file, ttlMs: 60_000 });
    const job = await reader.get(pytorch, "team-a", "llm");
    assert.equal((job?.metadata as { name?: string } | undefined)?.name, "llm");
    assert.equal(await reader.get(pytorch, "team-a", "missing"), undefined);
  });

  it("the ledger capacity reads its ConfigMap; a forbidden read is logged, not thrown", async () => {
    const { log, lines } = capturingLogger();
    const cap = ledgerCapacity({ kubeconfig: file, namespace: "quartermaster", intervalMs: 3_600_000, log });
    await cap.refresh();
    cap.stop();
    assert.equal(cap.current(), undefined, "no ledger index yet");
    assert.ok(
      seen.some(
        (s) =>
          s.path === "/api/v1/namespaces/quartermaster/configmaps/quartermaster-ledger-index" ||
          s.path.startsWith("/api/v1/namespaces/quartermaster/configmaps/"),
      ),
    );
    assert.deepEqual(
      lines.filter((l) => (l.level as number) >= 50),
      [],
    );
  });
});

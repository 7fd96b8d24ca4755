/**
 * API failures read like kubectl's: KubeApiError from the apiserver's Status (message, reason, what to do),
 * ClusterConnectionError when nothing answers; never the response headers. The classes as tables, then
 * through a real client-node client against a local HTTP server standing in for the apiserver, and the CLI.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";
import { ClusterConnectionError, KubeApiError, errorMessage, type KubeStatus } from "../../../src/core/errors.js";
import { kubeClient, statusOf } from "../../../src/kube/client.js";

const notFoundNamespace: KubeStatus = {
  kind: "Status",
  status: "Failure",
  message: 'namespaces "quartermaster" not found',
  reason: "NotFound",
  details: { name: "quartermaster", kind: "namespaces" },
  code: 404,
};

describe("KubeApiError", () => {
  const cases: Array<{ name: string; status: number; body: string; message: RegExp; reason: string; not?: RegExp }> = [
    {
      name: "a missing namespace → kubectl's message and what to do",
      status: 404,
      body: JSON.stringify(notFoundNamespace),
      message: /^namespaces "quartermaster" not found \(NotFound\): create it \(kubectl create namespace quartermaster\) or pass --namespace/,
      reason: "NotFound",
    },
    {
      name: "another object not found → the message, no namespace advice",
      status: 404,
      body: JSON.stringify({ kind: "Status", message: 'configmaps "x" not found', reason: "NotFound", details: { name: "x", kind: "configmaps" } }),
      message: /^configmaps "x" not found \(NotFound\)$/,
      reason: "NotFound",
    },
    {
      name: "forbidden → the message and a grant to ask for",
      status: 403,
      body: JSON.stringify({
        kind: "Status",
        message: 'leases.coordination.k8s.io is forbidden: User "bob" cannot create resource "leases"',
        reason: "Forbidden",
      }),
      message:
        /^leases\.coordination\.k8s\.io is forbidden: User "bob" cannot create resource "leases" \(Forbidden\): the user or ServiceAccount lacks this permission/,
      reason: "Forbidden",
    },
    {
      name: "unauthorized → log in again",
      status: 401,
      body: JSON.stringify({ kind: "Status", message: "Unauthorized", reason: "Unauthorized" }),
      message: /^Unauthorized \(Unauthorized\): the credentials in the kubeconfig were refused/,
      reason: "Unauthorized",
    },
    {
      name: "a conflict → the message alone",
      status: 409,
      body: JSON.stringify({ kind: "Status", message: "the object has been modified", reason: "Conflict" }),
      message: /^the object has been modified \(Conflict\)$/,
      reason: "Conflict",
    },
    {
      name: "a proxy's HTML page → status, request and the start of the body, collapsed",
      status: 502,
      body: `<html>\n<body>Bad Gateway</body>\n${"x".repeat(500)}</html>`,
      message:
        /^GET https:\/\/k8s\.example:6443\/api\/v1\/namespaces failed with HTTP 502: <html> <body>Bad Gateway<\/body> x+ \(HTTP 502\): the apiserver failed to answer/,
      reason: "HTTP 502",
    },
    {
      name: "an empty body → the status alone",
      status: 500,
      body: "",
      message: /^GET https:\/\/k8s\.example:6443\/api\/v1\/namespaces failed with HTTP 500 \(HTTP 500\)/,
      reason: "HTTP 500",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const err = KubeApiError.fromResponse(c.status, c.body, { method: "GET", url: "https://k8s.example:6443/api/v1/namespaces?limit=500" });
      assert.match(err.message, c.message);
      assert.equal(err.reason, c.reason);
      assert.equal(err.code, c.status);
      assert.equal(statusOf(err), c.status);
      assert.ok(err.message.length < 500, "bounded");
      assert.doesNotMatch(err.message, /limit=500|Headers|HTTP-Code/);
    });
  }
});

describe("ClusterConnectionError", () => {
  const cases: Array<{ name: string; cause: unknown; message: RegExp }> = [
    {
      name: "connection refused",
      cause: Object.assign(new Error("request to https://127.0.0.1:6443/api failed, reason: connect ECONNREFUSED 127.0.0.1:6443"), { code: "ECONNREFUSED" }),
      message: /^cannot reach the cluster at https:\/\/127\.0\.0\.1:6443: connection refused \(ECONNREFUSED\); check your kubeconfig/,
    },
    {
      name: "unknown host",
      cause: Object.assign(new Error("getaddrinfo ENOTFOUND k8s.invalid"), { code: "ENOTFOUND" }),
      message: /: host name not found \(ENOTFOUND\); check your kubeconfig/,
    },
    {
      name: "an untrusted certificate",
      cause: Object.assign(new Error("self-signed certificate"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" }),
      message: /self-signed and not trusted by the kubeconfig's certificate-authority/,
    },
    { name: "anything else → its own message", cause: new Error("socket hang up"), message: /: socket hang up; check your kubeconfig/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const err = new ClusterConnectionError("https://127.0.0.1:6443", c.cause);
      assert.match(err.message, c.message);
      assert.equal(statusOf(err), undefined, "no HTTP status");
      assert.equal(err.cause, c.cause);
    });
  }
});

describe("client-node clients made by kubeClient", () => {
  let server: Server;
  let url: string;
  let dir: string;
  const kubeconfigFor = (serverUrl: string, name: string): string => {
    const file = join(dir, name);
    writeFileSync(
      file,
      [
        "apiVersion: v1",
        "kind: Config",
        `clusters: [{name: c, cluster: {server: "${serverUrl}", insecure-skip-tls-verify: true}}]`,
        "users: [{name: u, user: {token: t}}]",
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
      ].join("\n"),
    );
    return file;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "qm-kube-errors-"));
    server = createServer((req, res) => {
      if (req.url?.startsWith("/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases")) {
        res.writeHead(404, { "content-type": "application/json", "x-secret-header": "do-not-print", "audit-id": "abc" });
        res.end(JSON.stringify(notFoundNamespace));
        return;
      }
      if (req.url?.startsWith("/api/v1/namespaces/quartermaster/configmaps")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ kind: "ConfigMapList", apiVersion: "v1", metadata: {}, items: [] }));
        return;
      }
      res.writeHead(403, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", message: `forbidden: ${req.url}`, reason: "Forbidden" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  it("a refused call throws KubeApiError with the Status's message, never the headers", async () => {
    const { k8s, kc } = await kubeClient(kubeconfigFor(url, "ok.yaml"));
    const api = kc.makeApiClient(k8s.CoordinationV1Api);
    const err = await api.readNamespacedLease({ namespace: "quartermaster", name: "x" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof KubeApiError, String(err));
    assert.equal(statusOf(err), 404);
    assert.match(err.message, /^namespaces "quartermaster" not found \(NotFound\): create it/);
    assert.doesNotMatch(err.message, /do-not-print|audit-id|Headers/);
  });

  it("a successful call still returns its object", async () => {
    const { k8s, kc } = await kubeClient(kubeconfigFor(url, "ok.yaml"));
    const list = await kc.makeApiClient(k8s.CoreV1Api).listNamespacedConfigMap({ namespace: "quartermaster" });
    assert.deepEqual(list.items, []);
  });

  it("a server that is not there throws ClusterConnectionError naming its URL", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const { k8s, kc } = await kubeClient(kubeconfigFor(`http://127.0.0.1:${port}`, "down.yaml"));
    const err = await kc
      .makeApiClient(k8s.CoreV1Api)
      .listNamespacedConfigMap({ namespace: "q" })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof ClusterConnectionError, String(err));
    assert.match(
      errorMessage(err),
      new RegExp(`^cannot reach the cluster at http://127\\.0\\.0\\.1:${port}: connection refused \\(ECONNREFUSED\\); check your kubeconfig`),
    );
  });

  it("the CLI prints it like kubectl: `reconcile --once` in a namespace that does not exist", async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(["reconcile", "--once", "--kubeconfig", kubeconfigFor(url, "ok.yaml"), "--namespace", "quartermaster", "--log-level", "silent"], {
      stdout: (l) => out.push(l),
      stderr: (l) => err.push(l),
      cwd: dir,
      shutdown: new Promise(() => {}),
    });
    assert.notEqual(code, 0);
    const text = err.join("\n");
    assert.match(text, /namespaces "quartermaster" not found \(NotFound\): create it \(kubectl create namespace quartermaster\) or pass --namespace/);
    assert.doesNotMatch(text, /do-not-print|audit-id|Headers|HTTP-Code/);
  });
});

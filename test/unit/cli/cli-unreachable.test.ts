/**
 * Issue 48, "never hangs": every command that reads the cluster, against every way a cluster can be missing or
 * broken, ends within its --request-timeout + 2 s, non-zero, with the message docs/cli.md shows. Servers are plain
 * HTTP on 127.0.0.1 (the kubeconfig allows it with insecure-skip-tls-verify); the CLI runs in-process (runCli).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";

const DOCS = readFileSync(resolve(import.meta.dirname, "../../../docs/cli.md"), "utf8");
const dir = mkdtempSync(join(tmpdir(), "qm-unreachable-"));

async function run(args: string[]): Promise<{ code: number; text: string; ms: number }> {
  const lines: string[] = [];
  const started = performance.now();
  const code = await runCli(args, { stdout: (l) => lines.push(l), stderr: (l) => lines.push(l), cwd: dir, shutdown: new Promise(() => {}) });
  return { code, text: lines.join("\n"), ms: performance.now() - started };
}

const kubeconfig = (name: string, server: string): string => {
  const file = join(dir, name);
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]\n` +
      `contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n`,
  );
  return file;
};

const listen = (s: Server | TcpServer): Promise<number> => new Promise((ok) => s.listen(0, "127.0.0.1", () => ok((s.address() as { port: number }).port)));

const sockets = new Set<Socket>();
const track = (s: Server | TcpServer): Server | TcpServer => s.on("connection", (c: Socket) => void sockets.add(c));
/** Accepts TCP, sends nothing. */
const silent = track(createTcpServer(() => undefined));
/** Sends a LIST's headers and the start of its body, then nothing. */
const stalling = track(
  createHttpServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"kind":"List","apiVersion":"v1","metadata":{},"items":[{"metadata":');
  }),
);
/** Refuses everything as RBAC would. */
const forbidding = track(
  createHttpServer((_req, res) => {
    res.writeHead(403, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        kind: "Status",
        status: "Failure",
        message: 'configmaps is forbidden: User "alice" cannot list resource "configmaps"',
        reason: "Forbidden",
        code: 403,
      }),
    );
  }),
);

/** Each way to fail: the --kubeconfig it runs with (undefined: none anywhere) and what the output must say. */
const cases: Array<{ name: string; kubeconfig: () => string | undefined; says: RegExp; docs: string }> = [];

before(async () => {
  const [silentPort, stallPort, forbidPort] = [await listen(silent), await listen(stalling), await listen(forbidding)];
  const refused = createTcpServer();
  const refusedPort = await listen(refused);
  await new Promise((ok) => refused.close(ok));
  const empty = join(dir, "empty");
  writeFileSync(empty, "\n");
  const malformed = join(dir, "malformed");
  writeFileSync(malformed, "apiVersion: v1\nclusters:\n  - name: c\n   cluster: {server: x\n");
  const timeout = "did not answer within 1s (--request-timeout); is the cluster reachable?";
  cases.push(
    {
      name: "no kubeconfig",
      kubeconfig: () => undefined,
      says: /no kubeconfig: set KUBECONFIG, pass --kubeconfig, or run in a cluster/,
      docs: "no kubeconfig: set KUBECONFIG",
    },
    {
      name: "an empty kubeconfig",
      kubeconfig: () => empty,
      says: new RegExp(`kubeconfig ${empty} is empty: write one there`),
      docs: "is empty: write one there",
    },
    {
      name: "a malformed kubeconfig",
      kubeconfig: () => malformed,
      // client-node's js-yaml ("bad indentation … (4:4)") or, for explain's plain client (src/kube/rest.ts), yaml's words.
      says: new RegExp(`kubeconfig ${malformed} is not a valid kubeconfig: (bad indentation .*\\(4:4\\)|.* at line 4, column 1:)`),
      docs: "is not a valid kubeconfig:",
    },
    {
      name: "a refused connection",
      kubeconfig: () => kubeconfig("refused", `http://127.0.0.1:${refusedPort}`),
      says: new RegExp(`cannot reach the cluster at http://127.0.0.1:${refusedPort}: connection refused \\(ECONNREFUSED\\)`),
      docs: "connection refused (ECONNREFUSED)",
    },
    {
      name: "a silent server",
      kubeconfig: () => kubeconfig("silent", `http://127.0.0.1:${silentPort}`),
      says: new RegExp(`the API server at http://127.0.0.1:${silentPort} ${timeout.replace(/[()?]/g, "\\$&")}`),
      docs: "(--request-timeout); is the cluster reachable?",
    },
    {
      name: "a server that stalls mid-LIST",
      kubeconfig: () => kubeconfig("stall", `http://127.0.0.1:${stallPort}`),
      says: new RegExp(`the API server at http://127.0.0.1:${stallPort} ${timeout.replace(/[()?]/g, "\\$&")}`),
      docs: "(--request-timeout); is the cluster reachable?",
    },
    {
      name: "a 403",
      kubeconfig: () => kubeconfig("forbid", `http://127.0.0.1:${forbidPort}`),
      says: /configmaps is forbidden: User "alice"/,
      docs: "is forbidden",
    },
  );
});

after(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all([silent, stalling, forbidding].map((s) => new Promise((ok) => s.close(ok))));
});

/** Every command that reads the cluster, with the flags it needs to get there. */
const COMMANDS: string[][] = [
  ["doctor"],
  ["ledger"],
  ["audit"],
  ["reconcile", "--once", "--dry-run"],
  ["certs", "ensure", "--service", "quartermaster", "--namespace", "quartermaster", "--dry-run"],
  ["explain", "job/train"],
];

describe("cluster commands against a missing or broken cluster (--request-timeout 1s)", () => {
  const env = { KUBECONFIG: process.env.KUBECONFIG, HOME: process.env.HOME };
  before(() => {
    // No kubeconfig anywhere unless --kubeconfig names one: $KUBECONFIG unset, a HOME without ~/.kube.
    delete process.env.KUBECONFIG;
    process.env.HOME = dir;
  });
  after(() => {
    for (const [k, v] of Object.entries(env))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  });

  it("every case, every command: ends within 3 s, non-zero, with the message", async () => {
    const failures: string[] = [];
    for (const c of cases) {
      for (const command of COMMANDS) {
        const file = c.kubeconfig();
        const r = await run([...command, "--request-timeout", "1s", ...(file ? ["--kubeconfig", file] : [])]);
        const label = `${command.join(" ")} with ${c.name}`;
        if (r.code === 0) failures.push(`${label}: exit 0`);
        if (r.ms > 3000) failures.push(`${label}: took ${Math.round(r.ms)} ms`);
        if (!c.says.test(r.text)) failures.push(`${label}: no ${c.says} in:\n${r.text}`);
        if (/Cannot read properties|TypeError|ENOENT: no such file/.test(r.text)) failures.push(`${label}: a JavaScript error or a bare errno:\n${r.text}`);
      }
    }
    assert.deepEqual(failures, []);
  });

  it("docs/cli.md shows each message", () => {
    for (const c of cases) assert.ok(DOCS.includes(c.docs), `docs/cli.md does not show "${c.docs}" (${c.name})`);
  });

  it("says on stderr what it waits for, and for how long", async () => {
    const r = await run(["ledger", "--namespace", "q", "--request-timeout", "1s", "--kubeconfig", cases[4]!.kubeconfig()!]);
    assert.match(r.text, /quartermaster: ledger: reading the device ledger in namespace q from the cluster \(each request up to 1s, --request-timeout\)/);
  });

  it("--request-timeout takes kubectl's durations and refuses anything else (usage, exit 2)", async () => {
    const r = await run(["ledger", "--request-timeout", "soon"]);
    assert.equal(r.code, 2);
    assert.match(r.text, /--request-timeout must be a duration such as 30s, 1m or 500ms \(0 for none\), got soon/);
  });
});

/**
 * bench/abuse --soak: abusive clients beside an apiserver-like prober (issue 29, items 1 and 2).
 *
 *   npm run bench:abuse -- --soak [--soak-seconds 60]
 *
 * The webhook server runs in a child process (this file with `--serve`: the default bounds, HTTP/2 offered,
 * a metrics port) so its resident memory is its own. Five seconds of the prober alone give the baseline;
 * then, for `--soak-seconds`, tenants from their own loopback addresses hold connections the ways that
 * locked the port out before, each reopening at once whatever the server closes:
 *
 * | tenant             | source      | holds                                                            |
 * |--------------------|-------------|------------------------------------------------------------------|
 * | silent TCP         | 127.0.0.2   | 400 connections that send nothing (over the per-source bound)    |
 * | slow handshake     | 127.0.0.3-4 | 2 × 150 connections that send half a ClientHello and wait        |
 * | handshake, silence | 127.0.0.5   | 250 finished TLS handshakes, then nothing                        |
 * | request, then idle | 127.0.0.6   | 250 keep-alive connections after one admission request each     |
 * | periodic /healthz  | 127.0.0.7   | 250 keep-alive connections, a `GET /healthz` on each every 5 s    |
 * | HTTP/2 sessions    | 127.0.0.8   | 150 idle HTTP/2 sessions                                         |
 *
 * 1,700 connections against the default bounds (1,000 open, 250 per address, 200 handshaking), so every
 * bound is passed all the time. The prober is the apiserver (127.0.0.1): a
 * keep-alive pool posting a small `/validate/pods` review every 50 ms, plus one new connection every
 * second (what the apiserver opens after a restart or when its pool grows). Prints probes sent and
 * refused (the target is 0), probe latency alone and under abuse (p50/p99, and the ratio), the server's
 * RSS (alone, peak under abuse, at the end), and the connections the server shed, by reason, from its
 * `/metrics`. Bounded: 5 s + `--soak-seconds` of traffic, ~1,700 sockets.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { Agent, request } from "node:https";
import { connect as h2connect, type ClientHttp2Session } from "node:http2";
import { connect as tcpConnect, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { createAdmissionMetrics } from "../src/server/metrics.js";
import { MAX_CONNECTIONS, startServer } from "../src/server/serve.js";
import { silentLogger } from "../src/log.js";
import { defaultPolicy } from "../src/policy/load.js";
import { createWebhooks } from "../webhooks/index.js";
import { reviewOf } from "../test/fixtures/array-work.js";
import { SERVERNAME } from "./lib/post.js";

/** The name the bench certificate carries (bench/abuse.ts issues it for service qm in namespace bench). */
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The server side: the default bounds, HTTP/2 offered, a metrics port. */
export async function serveSoak(certFile: string, keyFile: string): Promise<void> {
  const policy = defaultPolicy();
  const webhooks = createWebhooks({ policy, log: silentLogger(), jobs: { get: async () => undefined }, now: () => new Date() });
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    metricsPort: 0,
    http2: true,
    certFile,
    keyFile,
    webhooks,
    metrics: createAdmissionMetrics({ timeoutSeconds: 10 }),
    log: silentLogger(),
  });
  process.stdout.write(`${JSON.stringify({ port: server.port, metricsPort: server.metricsPort })}\n`);
  for await (const _ of createInterface({ input: process.stdin })); // until the driver closes stdin
  await server.close();
}

interface Target {
  port: number;
  ca: string;
}

/** One tenant: keeps `count` connections open from `source`, reopening each as soon as it closes. */
interface Tenant {
  name: string;
  source: string;
  count: number;
  open(t: Target, source: string): Socket | TLSSocket | ClientHttp2Session;
}

const review = JSON.stringify(
  reviewOf(
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "probe", namespace: "team-a" },
      spec: { containers: [{ name: "a", image: "nginx", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] },
    },
    { uid: "probe" },
  ),
);
const post = (path: string, body: string): string =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const tls = (t: Target, source: string): TLSSocket =>
  tlsConnect({ host: "127.0.0.1", port: t.port, ca: t.ca, servername: SERVERNAME, ALPNProtocols: ["http/1.1"], ...{ localAddress: source } });

const TENANTS: Tenant[] = [
  { name: "silent TCP", source: "127.0.0.2", count: 400, open: (t, source) => tcpConnect({ host: "127.0.0.1", port: t.port, localAddress: source }) },
  ...["127.0.0.3", "127.0.0.4"].map((source): Tenant => ({
    name: "slow handshake",
    source,
    count: 150,
    open: (t, from) => {
      const s = tcpConnect({ host: "127.0.0.1", port: t.port, localAddress: from });
      // A TLS record header announcing 512 bytes of ClientHello, and only the first few of them.
      s.on("connect", () => s.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03])));
      return s;
    },
  })),
  { name: "handshake, then silence", source: "127.0.0.5", count: 250, open: tls },
  {
    name: "one request, then idle",
    source: "127.0.0.6",
    count: 250,
    open: (t, source) => {
      const s = tls(t, source);
      s.on("secureConnect", () => s.write(post("/validate/pods", review)));
      s.resume();
      return s;
    },
  },
  {
    name: "periodic /healthz",
    source: "127.0.0.7",
    count: 250,
    open: (t, source) => {
      const s = tls(t, source);
      const ask = (): void => void s.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      s.on("secureConnect", ask);
      const timer = setInterval(ask, 5_000);
      s.on("close", () => clearInterval(timer));
      s.resume();
      return s;
    },
  },
  {
    name: "HTTP/2 sessions",
    source: "127.0.0.8",
    count: 150,
    open: (t, source) =>
      h2connect(`https://127.0.0.1:${t.port}`, {
        createConnection: () =>
          tlsConnect({ host: "127.0.0.1", port: t.port, ca: t.ca, servername: SERVERNAME, ALPNProtocols: ["h2"], ...{ localAddress: source } }),
      }),
  },
];

/** Keeps a tenant's connections open until `stop()`; counts how often the server closed one. */
function hold(tenant: Tenant, t: Target): { stop(): void; closed(): number } {
  let stopped = false;
  let closed = 0;
  const live = new Set<{ destroy(): void; close?(): void }>();
  const one = (): void => {
    if (stopped) return;
    const c = tenant.open(t, tenant.source);
    live.add(c);
    c.on("error", () => {});
    c.on("close", () => {
      live.delete(c);
      if (stopped) return;
      closed++;
      setTimeout(one, 200);
    });
  };
  for (let i = 0; i < tenant.count; i++) setTimeout(one, i * 2);
  return {
    stop() {
      stopped = true;
      for (const c of live) c.destroy();
    },
    closed: () => closed,
  };
}

interface Probes {
  sent: number;
  refused: Map<string, number>;
  ms: number[];
}

/** The apiserver: a keep-alive pool posting every 50 ms, and one new connection per second. */
function probe(t: Target, until: () => boolean): Promise<Probes> {
  const out: Probes = { sent: 0, refused: new Map(), ms: [] };
  const pool = new Agent({ keepAlive: true, maxSockets: 4, ca: t.ca });
  const once = (agent: Agent | false): Promise<void> =>
    new Promise((resolve) => {
      out.sent++;
      const started = performance.now();
      const fail = (why: string): void => {
        out.refused.set(why, (out.refused.get(why) ?? 0) + 1);
        resolve();
      };
      const req = request(
        {
          host: "127.0.0.1",
          port: t.port,
          path: "/validate/pods",
          method: "POST",
          agent,
          ca: t.ca,
          servername: SERVERNAME,
          timeout: 10_000,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(review) },
        },
        (res) => {
          res.resume();
          res.on("end", () => {
            if (res.statusCode === 200) (out.ms.push(performance.now() - started), resolve());
            else fail(`HTTP ${res.statusCode}`);
          });
        },
      );
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
      req.end(review);
    });
  return (async () => {
    const pending: Promise<void>[] = [];
    for (let i = 0; !until(); i++) {
      pending.push(once(pool));
      if (i % 20 === 0) pending.push(once(false));
      await sleep(50);
    }
    await Promise.all(pending);
    pool.destroy();
    return out;
  })();
}

const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;
const rssMiB = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    httpGet({ host: "127.0.0.1", port, path: "/metrics" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks).toString()));
    }).on("error", reject);
  });
}

/** The driver: starts the server (`script --serve soak`), runs both phases, prints the figures. */
export async function soak(script: string, cert: string, key: string, ca: string, seconds: number): Promise<void> {
  const child = spawn(process.execPath, ["--import", "tsx", script, "--serve", "soak", "--cert", cert, "--key", key], { stdio: ["pipe", "pipe", "inherit"] });
  try {
    const first = await createInterface({ input: child.stdout! })[Symbol.asyncIterator]().next();
    const { port, metricsPort } = JSON.parse(String(first.value)) as { port: number; metricsPort: number };
    const t: Target = { port, ca };
    const pid = child.pid!;

    let end = Date.now() + 5_000;
    const alone = await probe(t, () => Date.now() > end);
    const rssAlone = rssMiB(pid);

    const held = TENANTS.map((tenant) => hold(tenant, t));
    let peak = rssAlone;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 1_000);
    end = Date.now() + seconds * 1_000;
    const abused = await probe(t, () => Date.now() > end);
    clearInterval(sampler);
    const shedText = await scrape(metricsPort);
    const closedBy = TENANTS.map((tenant, i) => [`${tenant.name} (${tenant.source})`, held[i]!.closed()] as const);
    for (const h of held) h.stop();
    await sleep(1_000);
    const rssEnd = rssMiB(pid);

    const refusedOf = (p: Probes): string =>
      p.refused.size === 0 ? "0" : `${[...p.refused.values()].reduce((a, b) => a + b, 0)} (${[...p.refused].map(([k, v]) => `${k} ${v}`).join(", ")})`;
    const shed = [...shedText.matchAll(/^quartermaster_connections_shed_total\{port="webhook",reason="(\w+)"\} (\d+)/gm)]
      .map(([, r, n]) => `${r} ${n}`)
      .join(", ");
    console.log(`soak: ${TENANTS.reduce((n, x) => n + x.count, 0)} abusive connections held against a ${MAX_CONNECTIONS}-connection bound for ${seconds} s`);
    console.table([
      {
        phase: "prober alone (5 s)",
        probes: alone.sent,
        refused: refusedOf(alone),
        p50: `${quantile(alone.ms, 0.5).toFixed(1)} ms`,
        p99: `${quantile(alone.ms, 0.99).toFixed(1)} ms`,
        "server RSS": `${rssAlone.toFixed(0)} MiB`,
      },
      {
        phase: `under abuse (${seconds} s)`,
        probes: abused.sent,
        refused: refusedOf(abused),
        p50: `${quantile(abused.ms, 0.5).toFixed(1)} ms`,
        p99: `${quantile(abused.ms, 0.99).toFixed(1)} ms`,
        "server RSS": `peak ${peak.toFixed(0)} MiB, ${rssEnd.toFixed(0)} MiB after`,
      },
    ]);
    console.log(
      `p99 under abuse / alone: ${(quantile(abused.ms, 0.99) / quantile(alone.ms, 0.99)).toFixed(2)}×; RSS peak / alone: ${(peak / rssAlone).toFixed(2)}×`,
    );
    console.log(`server shed: ${shed || "nothing"}`);
    console.log(`tenants' connections closed by the server: ${closedBy.map(([n, c]) => `${n} ${c}`).join("; ")}`);
    if (abused.refused.size > 0) process.exitCode = 1;
  } finally {
    child.stdin!.end();
    child.kill();
  }
}

/**
 * bench/abuse: a tenant's oversized pod against the admission server (issue 16, item 1).
 *
 *   npm run bench:abuse [-- --sizes 10000,20000,40000 --skip-before]
 *   npm run bench:abuse -- --soak [--soak-seconds 60]    (abusive connections: bench/abuse-soak.ts)
 *   npm run bench:abuse -- --only-deep [--deep-seconds 15 --deep-senders 4 --baseline-seconds 5 --small-clients 2]
 *                                                         (deeply nested bodies: bench/abuse-deep.ts)
 *   npm run bench:abuse -- --only-senders [--senders-seconds 5 --senders 4 --baseline-seconds 5 --small-clients 2]
 *                                                         [--server-cpu-prof DIR] [--pin]
 *                                                         (runtime patches, wide runtimes, 20,000 claim names, Event
 *                                                          spoofing; other tenants' p99 beside them: bench/abuse-senders.ts)
 *
 * For each size n, a pod of n containers (each needing its resources defaulted) is posted to
 * `/mutate/pods` and, 20 ms later, a small `/validate/pods` review: prints the time to answer each,
 * and the longest event-loop stall of the server meanwhile. Three servers run one after the other, each
 * in a child process of its own (this file with `--serve`): "before" rebuilds the pipeline as it was (no
 * cost bound; resources replaced one container at a time, copying the list each time), "in-thread" is the
 * current pipeline with every body parsed on the event loop, and "after" is the current server (bodies
 * of 256 KiB and more parsed in a worker thread, `src/server/parse.ts`). Also prints the pipeline alone (no bound) per size, and the most expensive review the
 * bound still admits. Bounded: one request per size and server; "before" takes ~20 s at 40k. On "after" the
 * first large body starts the worker (its stall is included).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { withKey } from "../src/core/copy.js";
import { generateCertificates } from "../src/certs/generate.js";
import { mutatingWebhook, type Webhook } from "../src/admission/handler.js";
import { podGuard } from "../src/admission/guards.js";
import { MAX_REVIEW_COST, specsCost } from "../src/core/cost.js";
import type { KubeObject } from "../src/core/kube.js";
import { createAdmissionMetrics } from "../src/server/metrics.js";
import { startServer } from "../src/server/serve.js";
import { silentLogger } from "../src/log.js";
import { defaultPolicy } from "../src/policy/load.js";
import { mutatePod, POD_MUTATIONS, type Mutation, type Pod } from "../src/mutate/index.js";
import { defaultContainerResources, defaultResources } from "../src/mutate/resources.js";
import { createWebhooks } from "../webhooks/index.js";
import { reviewOf, widePod } from "../test/fixtures/array-work.js";
import { serveSoak, soak } from "./abuse-soak.js";
import { deep } from "./abuse-deep.js";
import { abuseSenders, serveSenders } from "./abuse-senders.js";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "10000,20000,40000" },
    "skip-before": { type: "boolean", default: false },
    soak: { type: "boolean", default: false },
    "soak-seconds": { type: "string", default: "60" },
    "only-deep": { type: "boolean", default: false },
    "deep-seconds": { type: "string", default: "15" },
    "deep-senders": { type: "string", default: "4" },
    "baseline-seconds": { type: "string", default: "5" },
    "small-clients": { type: "string", default: "2" },
    "only-senders": { type: "boolean", default: false },
    "senders-seconds": { type: "string", default: "5" },
    senders: { type: "string", default: "4" },
    "server-cpu-prof": { type: "string" },
    pin: { type: "boolean", default: false },
    serve: { type: "string" },
    cert: { type: "string" },
    key: { type: "string" },
  },
});

// ---- the server side (child process) -------------------------------------------------------------

/** The resources mutation as it was before issue 16: each changed container copied the whole list. */
const quadraticResources: Mutation = {
  ...defaultResources,
  mutate(pod, { policy }) {
    let next = pod;
    for (const list of ["initContainers", "containers"] as const) {
      (pod.spec?.[list] ?? []).forEach((c, i) => {
        const d = defaultContainerResources(c, policy);
        if (d === c) return;
        const items = [...(next.spec?.[list] ?? [])];
        items[i] = d;
        next = withKey(next, "spec", withKey(next.spec, list, items));
      });
    }
    return next;
  },
};

async function serve(mode: string, certFile: string, keyFile: string): Promise<void> {
  if (mode === "soak") return serveSoak(certFile, keyFile);
  if (mode === "senders") return serveSenders(certFile, keyFile);
  const policy = defaultPolicy();
  const deps = { policy, log: silentLogger(), jobs: { get: async () => undefined }, now: () => new Date() };
  const webhooks: Record<string, Webhook> = createWebhooks(deps);
  if (mode === "before") {
    const old = POD_MUTATIONS.map((m) => (m === defaultResources ? quadraticResources : m));
    webhooks["/mutate/pods"] = mutatingWebhook({
      name: "mutate-pods",
      guard: podGuard(["CREATE"]),
      mutate: (request) => {
        const out = mutatePod(request.object as Pod, { policy, namespace: request.namespace ?? "" }, old);
        return { object: out.pod as KubeObject, warnings: out.warnings };
      },
    });
  }
  // "before" and "in-thread" parse every body on the event loop, as before large bodies went to a worker.
  const offloadBytes = mode === "after" ? undefined : Infinity;
  const server = await startServer({
    host: "127.0.0.1",
    port: 0,
    certFile,
    keyFile,
    webhooks,
    ...(offloadBytes !== undefined ? { offloadBytes } : {}),
    metrics: createAdmissionMetrics({ timeoutSeconds: 10 }),
    log: silentLogger(),
  });
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === "reset") (loop.reset(), process.stdout.write("{}\n"));
    if (line === "stall") process.stdout.write(`${JSON.stringify({ stallMs: loop.max / 1e6 })}\n`);
  }
  await server.close();
}

// ---- the driver ----------------------------------------------------------------------------------

interface Child {
  proc: ChildProcess;
  port: number;
  ask(line: string): Promise<Record<string, number>>;
}

async function startChild(mode: string, cert: string, key: string): Promise<Child> {
  const proc = spawn(process.execPath, ["--import", "tsx", import.meta.filename, "--serve", mode, "--cert", cert, "--key", key], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, number>> => JSON.parse(String((await lines.next()).value)) as Record<string, number>;
  const { port } = await next();
  return { proc, port: port!, ask: (line) => (proc.stdin!.write(`${line}\n`), next()) };
}

function post(port: number, ca: string, path: string, body: string): Promise<{ ms: number; json: Record<string, any> }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, method: "POST", ca, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ ms: performance.now() - started, json: JSON.parse(Buffer.concat(chunks).toString()) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const fmt = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

async function drive(): Promise<void> {
  const sizes = values.sizes!.split(",").map(Number);
  const dir = mkdtempSync(join(tmpdir(), "qm-abuse-"));
  const certs = await generateCertificates({ service: "qm", namespace: "bench", ips: ["127.0.0.1"] });
  const cert = join(dir, "tls.crt");
  const key = join(dir, "tls.key");
  writeFileSync(cert, certs.certPem);
  writeFileSync(key, certs.keyPem);
  const ca = certs.ca.certPem;
  if (values.soak) return soak(import.meta.filename, cert, key, ca, Number(values["soak-seconds"]));
  if (values["only-senders"]) {
    return abuseSenders({
      script: import.meta.filename,
      cert,
      key,
      ca,
      dir,
      baselineSeconds: Number(values["baseline-seconds"]),
      sendersSeconds: Number(values["senders-seconds"]),
      senders: Number(values.senders),
      smallClients: Number(values["small-clients"]),
      ...(values["server-cpu-prof"] ? { serverCpuProf: values["server-cpu-prof"] } : {}),
      pin: values.pin,
    });
  }
  if (values["only-deep"]) {
    return deep({
      script: import.meta.filename,
      cert,
      key,
      ca,
      dir,
      baselineSeconds: Number(values["baseline-seconds"]),
      deepSeconds: Number(values["deep-seconds"]),
      deepSenders: Number(values["deep-senders"]),
      smallClients: Number(values["small-clients"]),
    });
  }
  const small = JSON.stringify(
    reviewOf(
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "small", namespace: "team-a" },
        spec: { containers: [{ name: "a", image: "nginx", resources: { requests: { cpu: "100m", memory: "64Mi" } } }] },
      },
      { uid: "small" },
    ),
  );

  // The pipeline alone, no bound: linear now (the "after" column's work had the bound not stopped it).
  const policy = defaultPolicy();
  console.log("pipeline alone (mutatePod, no cost bound):");
  for (const n of sizes) {
    const pod = widePod({ containers: n }) as Pod;
    const t = performance.now();
    mutatePod(pod, { policy, namespace: "team-a" });
    console.log(`  n=${n}: ${fmt(performance.now() - t)}`);
  }
  // The most expensive pod the bound admits: one GPU per container (2 items, 7 passes).
  let n = 1;
  while (!specsCost([widePod({ containers: n + 1 }).spec], POD_MUTATIONS.length, policy.gpu.resources).over) n++;
  const edge = JSON.stringify(reviewOf(widePod({ containers: n })));

  const modes = values["skip-before"] ? ["in-thread", "after"] : ["before", "in-thread", "after"];
  const rows: Array<Record<string, string>> = [];
  for (const mode of modes) {
    const child = await startChild(mode, cert, key);
    try {
      await post(child.port, ca, "/validate/pods", small); // warm: TLS, JIT
      const alone: number[] = [];
      for (let i = 0; i < 5; i++) alone.push((await post(child.port, ca, "/validate/pods", small)).ms);
      const aloneMs = alone.sort((a, b) => a - b)[2]!;
      if (mode === "after") {
        await child.ask("reset");
        const r = await post(child.port, ca, "/mutate/pods", edge);
        const { stallMs } = await child.ask("stall");
        console.log(
          `most expensive admitted pod (${n} GPU containers, cost ≤ ${MAX_REVIEW_COST}): ${r.json.response.patch ? "patched" : "not patched"} in ${fmt(r.ms)}, longest server stall ${fmt(stallMs!)}`,
        );
      }
      for (const size of sizes) {
        const body = JSON.stringify(reviewOf(widePod({ containers: size })));
        await child.ask("reset");
        const big = post(child.port, ca, "/mutate/pods", body);
        await sleep(20);
        const meanwhile = await post(child.port, ca, "/validate/pods", small);
        const b = await big;
        const { stallMs } = await child.ask("stall");
        rows.push({
          server: mode,
          n: String(size),
          body: `${(body.length / 2 ** 20).toFixed(1)} MiB`,
          "/mutate/pods": `${fmt(b.ms)} (${b.json.response.patch ? "patched" : "unchanged"})`,
          "small meanwhile": fmt(meanwhile.ms),
          "vs alone": `${(meanwhile.ms / aloneMs).toFixed(1)}× (${fmt(aloneMs)})`,
          "longest stall": fmt(stallMs!),
        });
      }
    } finally {
      child.proc.stdin!.end();
      child.proc.kill();
    }
  }
  console.table(rows);
}

if (values.serve) await serve(values.serve, values.cert!, values.key!);
else await drive();

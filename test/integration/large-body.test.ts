/**
 * Large bodies (256 KiB and more) are parsed in a worker thread (`src/server/parse.ts`): each review
 * gets the very answer a server parsing it in-thread gives, and is parsed again on the main thread only
 * where the worker's document (long arrays as stand-ins) cannot decide it; small bodies never start the
 * worker, and a worker that dies fails only the request it held (a 500 Status), the next one is answered.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { checkPolicy } from "../../src/policy/load.js";
import { silentLogger } from "../../src/log.js";
import { standInNames } from "../../src/core/stand-in.js";
import { LABEL_JOB_NAME } from "../../src/core/keys.js";
import { createBodyParser, OFFLOAD_BYTES, WORKER_SOURCE, type BodyParser } from "../../src/server/parse.js";
import { createWebhooks } from "../../webhooks/index.js";
import { gpuJob, reviewOf, wideJob, widePod } from "../fixtures/array-work.js";
import { call, capturingLogger, postJson, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, review } from "../fixtures/reviews.js";

const policy = checkPolicy({ limits: { container: { cpu: "4", memory: "16Gi" }, job: { gpus: 16, replicas: { Worker: 4 } } } }, "strict");
const webhooks = () => createWebhooks({ policy, log: silentLogger(), jobs: fakeJobReader([gpuJob(2, 2)]), now: () => new Date() });

const bigAnnotation = { ...plainPod(), metadata: { name: "annotated", namespace: "team-a", annotations: { "example.com/blob": "x".repeat(300_000) } } };
const longEnv = widePod({ containers: 1, env: 12_000, name: "long-env" });

/** A pod with no label (so the pod webhooks' guards look at its containers' resources) and `gpuAt` the one container asking for a GPU. */
function unlabelled(o: Parameters<typeof widePod>[0] & { gpuAt?: number }) {
  const pod = widePod({ gpu: false, ...o });
  if (o.gpuAt !== undefined)
    (pod.spec as { containers: Array<Record<string, unknown>> }).containers[o.gpuAt]!.resources = { requests: { cpu: "1" }, limits: { "nvidia.com/gpu": "1" } };
  return pod;
}
const POD_PATHS = ["/mutate/pods", "/validate/pods"];
const labelled = (pod: ReturnType<typeof widePod>) => ({ ...pod, metadata: { ...(pod.metadata as object), labels: { [LABEL_JOB_NAME]: "train" } } });
/** wideJob's PyTorchJob with a Master of `master` containers after its Worker of `worker`. */
function twoTypeJob(worker: number, master: number) {
  const job = wideJob(worker) as { spec: { pytorchReplicaSpecs: Record<string, unknown> } };
  const m = wideJob(master) as { spec: { pytorchReplicaSpecs: Record<string, unknown> } };
  job.spec.pytorchReplicaSpecs.Master = { ...(m.spec.pytorchReplicaSpecs.Worker as object), replicas: 1 };
  return job as unknown as ReturnType<typeof wideJob>;
}

/** A pod naming `entries` ResourceClaims, `distinct` of them distinct (issue 46); `pad` bytes of annotation to be large. */
function namingClaims(entries: number, distinct: number, pad = 0) {
  return {
    ...plainPod(),
    metadata: { name: "claims", namespace: "team-a", ...(pad > 0 ? { annotations: { "example.com/blob": "x".repeat(pad) } } : {}) },
    spec: {
      resourceClaims: Array.from({ length: entries }, (_, i) => ({ name: `c${i}`, resourceClaimName: `claim-${i % distinct}` })),
      containers: [{ name: "c", image: "x", resources: { claims: [{ name: "c0" }] } }],
    },
  };
}

/** A PyTorchJob whose Master and Worker templates name `master` and `worker` distinct claims (their names apart). */
function jobNamingClaims(master: number, worker: number) {
  const job = structuredClone(gpuJob(1, 1)) as { spec: { pytorchReplicaSpecs: Record<string, { template: { spec: Record<string, unknown> } }> } };
  const types = job.spec.pytorchReplicaSpecs;
  types.Master = structuredClone(types.Worker!);
  for (const [type, n] of [
    ["Master", master],
    ["Worker", worker],
  ] as const)
    types[type]!.template.spec.resourceClaims = Array.from({ length: n }, (_, i) => ({ name: `c${i}`, resourceClaimName: `${type}-${i}` }));
  return job as unknown as ReturnType<typeof gpuJob>;
}
const PYTORCHJOB = { resource: "pytorchjobs", kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" } };

/**
 * Large reviews, each with the paths it goes to and whether the body is parsed again on the main thread
 * (`parsedAgain`, default false): only when the worker's document, its long arrays stand-ins, cannot decide.
 */
const CASES: Array<{ name: string; paths: string[]; body: () => string; parsedAgain?: boolean | string[] }> = [
  // widePod has no label: the guards decide from the stand-in's length and resource names (a GPU: a training pod).
  {
    name: "40,000 GPU containers, no label (over the cost bound)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(widePod({ containers: 40_000 }), { uid: "wide" })),
  },
  {
    name: "a job with 20,000 containers (over the validating webhook's cost bound; the job defaults have none: parsed again)",
    paths: ["/mutate/jobs", "/validate/jobs"],
    body: () =>
      JSON.stringify(reviewOf(wideJob(20_000), { uid: "job", resource: "pytorchjobs", kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" } })),
    parsedAgain: ["/mutate/jobs"],
  },
  {
    name: "600 GPU containers (long array, under the bound: parsed again in-thread, patched)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(widePod({ containers: 600, env: 20 }), { uid: "600" })),
    parsedAgain: true,
  },
  {
    name: "12,000 env entries in one container (long array, under the bound: parsed again in-thread)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(longEnv, { uid: "env" })),
    parsedAgain: true,
  },
  { name: "a 300 KB annotation (no long array)", paths: POD_PATHS, body: () => JSON.stringify(review({ uid: "annotated", object: bigAnnotation })) },
  // Label-less wide pods that are no training pod (issue 29): skipped by the guards, decided from the stand-ins.
  {
    name: "40,000 containers, no label, no GPU (over the cost bound: skipped, not a training pod)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 40_000 }), { uid: "web-40k" })),
  },
  {
    name: "3,000 containers, no label, no GPU, 8 env each (over the cost bound: skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 3_000, env: 8 }), { uid: "web-3k" })),
  },
  {
    name: "300 containers, no label, no GPU, 40 env each (under the cost bound: skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 300, env: 40 }), { uid: "web-300" })),
  },
  {
    name: "100 containers (no stand-in), 400 env each, no label, no GPU (skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 100, env: 400 }), { uid: "env-100" })),
  },
  {
    name: "3,000 init containers, no label, no GPU (skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 1, initContainers: 3_000, env: 4 }), { uid: "init-3k" })),
  },
  // One GPU among thousands, in the stand-in's names: a training pod, over the cost bound, as in-thread.
  {
    name: "3,000 containers, no label, one GPU at 2,999 (over the cost bound)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 3_000, env: 8, gpuAt: 2_999 }), { uid: "one-gpu" })),
  },
  {
    name: "300 containers, no label, one GPU (under the cost bound: parsed again, the rules run)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 300, env: 40, gpuAt: 7 }), { uid: "one-gpu-300" })),
    parsedAgain: true,
  },
  // More distinct resource names than a stand-in keeps: the guards cannot tell, the body is parsed again.
  {
    name: "3,000 containers with 3,000 distinct resource names, no label, no GPU (parsed again: skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 3_000, env: 2, distinctResources: true }), { uid: "names" })),
    parsedAgain: true,
  },
  // Over the bound only once a stand-in's entries would be counted: pricing cannot tell at which count, parsed again.
  {
    name: "1,000 init containers and 2,000 containers, job-labelled (parsed again: the bound is passed inside the init containers)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(labelled(widePod({ containers: 2_000, initContainers: 1_000, env: 3 })), { uid: "init-entries" })),
    parsedAgain: true,
  },
  {
    name: "a job of 1,000 Worker and 3,000 Master containers (parsed again: the bound is passed inside the Workers)",
    paths: ["/validate/jobs"],
    body: () =>
      JSON.stringify(
        reviewOf(twoTypeJob(1_000, 3_000), { uid: "job-entries", resource: "pytorchjobs", kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" } }),
      ),
    parsedAgain: true,
  },
  {
    name: "40,000 containers, no label, no GPU, as a DELETE (not handled: skipped)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(unlabelled({ containers: 40_000 }), { uid: "delete", operation: "DELETE" })),
  },
  {
    // Past MAX_NESTING: refused before any parse, by the worker and in-thread alike (issue 29).
    name: "5,000 levels of nesting (refused, 400, on both)",
    paths: ["/mutate/pods", "/validate/pods"],
    body: () => JSON.stringify(review({ uid: "deep", object: { ...bigAnnotation, deep: "DEEP" } })).replace('"DEEP"', `${"[".repeat(5000)}${"]".repeat(5000)}`),
  },
  { name: "not JSON", paths: ["/validate/pods"], body: () => `{"apiVersion": ${" ".repeat(OFFLOAD_BYTES)} nope}` },
  // Issue 46: more claim names than one review may read, decided from the names the stand-in carries (refused by
  // /validate/pods, admitted unchanged by /mutate/pods); within the bound, the claims are read: parsed again.
  {
    name: "a pod naming 20,000 distinct claims (over the claim-name bound: the stand-in's count decides)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(namingClaims(20_000, 20_000), { uid: "claims-20k" })),
  },
  {
    name: "a pod naming 200 distinct claims in 300 entries (over the bound: the stand-in's names decide)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(namingClaims(300, 200, 300_000), { uid: "claims-200" })),
  },
  {
    name: "a pod naming 100 distinct claims in 20,000 entries (within the bound: parsed again, the claims read)",
    paths: POD_PATHS,
    body: () => JSON.stringify(reviewOf(namingClaims(20_000, 100), { uid: "claims-100" })),
    parsedAgain: true,
  },
  {
    name: "a PyTorchJob whose Worker names 20,000 claims (over the bound at the Worker template; /mutate/jobs parsed again)",
    paths: ["/validate/jobs", "/mutate/jobs"],
    body: () => JSON.stringify(reviewOf(jobNamingClaims(0, 20_000), { uid: "job-claims", ...PYTORCHJOB })),
    parsedAgain: ["/mutate/jobs"],
  },
  {
    name: "a PyTorchJob whose Master and Worker name 5,000 claims each (the count across two stand-ins: parsed again)",
    paths: ["/validate/jobs"],
    body: () => JSON.stringify(reviewOf(jobNamingClaims(5_000, 5_000), { uid: "job-claims-2", ...PYTORCHJOB })),
    parsedAgain: true,
  },
];

const post = (t: TestServer, path: string, body: string) =>
  call(t.port, { path, body, headers: { "content-type": "application/json" }, ca: t.files.certs.ca.certPem });

describe("large bodies parsed in a worker", () => {
  let inThread: TestServer;
  let offloaded: TestServer;
  let parser: BodyParser;
  before(async () => {
    parser = createBodyParser({ log: silentLogger() });
    inThread = await startTestServer(webhooks(), { offloadBytes: Infinity });
    offloaded = await startTestServer(webhooks(), { bodyParser: parser });
  });
  after(async () => {
    await inThread.server.close();
    await offloaded.server.close();
  });

  it("small reviews do not start the worker", async () => {
    for (const path of ["/mutate/pods", "/validate/pods"]) {
      const r = await postJson(offloaded.port, path, review({ uid: "small", object: plainPod() }), offloaded.files.certs.ca.certPem);
      assert.equal(r.status, 200);
    }
    assert.equal(parser.running(), false);
  });

  /** The offloaded server's count of bodies parsed again on the main thread, by webhook. */
  const parsedAgain = async (webhook: string): Promise<number> => {
    const metric = offloaded.metrics.registry.getSingleMetric("quartermaster_admission_bodies_parsed_again_total");
    const values = (await metric!.get()).values;
    return values.find((v) => v.labels.webhook === webhook)?.value ?? 0;
  };
  const WEBHOOK: Record<string, string> = {
    "/mutate/pods": "mutate-pods",
    "/validate/pods": "validate-pods",
    "/mutate/jobs": "mutate-jobs",
    "/validate/jobs": "validate-jobs",
  };

  for (const c of CASES) {
    const again = (path: string): boolean => (Array.isArray(c.parsedAgain) ? c.parsedAgain.includes(path) : c.parsedAgain === true);
    it(`${c.name}: the in-thread answer, parsed again on the main thread ${c.paths.filter(again).length} of ${c.paths.length} times`, async () => {
      const body = c.body();
      assert.ok(Buffer.byteLength(body) >= OFFLOAD_BYTES, "the body is large enough to be offloaded");
      for (const path of c.paths) {
        const before = await parsedAgain(WEBHOOK[path]!);
        const [want, got] = await Promise.all([post(inThread, path, body), post(offloaded, path, body)]);
        assert.equal(got.status, want.status, path);
        assert.equal(got.text, want.text, path);
        assert.equal((await parsedAgain(WEBHOOK[path]!)) - before, again(path) ? 1 : 0, `${path}: parsed again on the main thread`);
      }
      assert.equal(parser.running(), true);
    });
  }

  it("the worker's document has the long arrays as stand-ins of the same length", async () => {
    const parsed = await parser.parse(Buffer.from(JSON.stringify(reviewOf(widePod({ containers: 1000 })))));
    const containers = (parsed.value as { request: { object: { spec: { containers: unknown[] } } } }).request.object.spec.containers;
    assert.equal(parsed.stubbed, true);
    assert.equal(containers.length, 1000);
    assert.equal(0 in containers, false);
    // It carries the distinct resource names of its elements, for the guards (core/stand-in.ts).
    assert.deepEqual(standInNames(containers), ["nvidia.com/gpu"]);
    const names = await parser.parse(Buffer.from(JSON.stringify(reviewOf(widePod({ containers: 300, gpu: false, distinctResources: true })))));
    assert.equal(
      standInNames((names.value as { request: { object: { spec: { containers: unknown[] } } } }).request.object.spec.containers),
      null,
      "more than STUB_ITEMS names: none kept",
    );
    // An own "__proto__" key holding a long array stays an own key (a stand-in), the prototype untouched.
    const proto = await parser.parse(Buffer.from(`{"spec":{"__proto__":[${Array(300).fill("1").join(",")}]}}`));
    const spec = (proto.value as { spec: Record<string, unknown> }).spec;
    assert.equal(Object.getPrototypeOf(spec), Object.prototype);
    assert.equal((Object.getOwnPropertyDescriptor(spec, "__proto__")?.value as unknown[]).length, 300);
    const small = await parser.parse(Buffer.from(JSON.stringify(reviewOf(widePod({ containers: 3 })))));
    assert.equal(small.stubbed, false);
    assert.deepEqual(small.value, reviewOf(widePod({ containers: 3 })));
  });
});

describe("the worker started eagerly", () => {
  const immediate = () => new Promise((r) => setTimeout(r, 5));
  const CASES: Array<{ name: string; opts: { warmBodyParser?: boolean; warmBodyParserAfterMs?: number; offloadBytes?: number }; running: boolean }> = [
    {
      name: "warmBodyParserAfterMs 0: started right after listening, before any large body",
      opts: { warmBodyParser: true, warmBodyParserAfterMs: 0 },
      running: true,
    },
    { name: "warmBodyParser true: not yet started at the first answer (it starts 1 s after listening)", opts: { warmBodyParser: true }, running: false },
    { name: "warmBodyParser false: started by the first large body only", opts: { warmBodyParser: false }, running: false },
    { name: "by default: started by the first large body only", opts: {}, running: false },
    {
      name: "offloading off (offloadBytes Infinity): never started",
      opts: { warmBodyParser: true, warmBodyParserAfterMs: 0, offloadBytes: Infinity },
      running: false,
    },
  ];
  for (const c of CASES) {
    it(c.name, async () => {
      const parser = createBodyParser({ log: silentLogger() });
      const t = await startTestServer(webhooks(), { bodyParser: parser, ...c.opts });
      try {
        // Ready without waiting for the worker: the server answers at once.
        const r = await postJson(t.port, "/validate/pods", review({ uid: "small", object: plainPod() }), t.files.certs.ca.certPem);
        assert.equal(r.status, 200);
        await immediate();
        assert.equal(parser.running(), c.running);
        if (c.running) {
          const body = CASES_BODY();
          const got = await post(t, "/validate/pods", body);
          assert.equal(got.status, 200);
          assert.equal(JSON.parse(got.text).response.uid, "wide");
        }
      } finally {
        await t.server.close();
      }
      assert.equal(parser.running(), false, "closing the server stops the worker");
      parser.warm();
      assert.equal(parser.running(), false, "a closed parser is not warmed again");
    });
  }
});

const CASES_BODY = () => JSON.stringify(reviewOf(widePod({ containers: 40_000 }), { uid: "wide" }));

describe("a worker with nothing to parse", () => {
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  // Holds the worker's thread ~300 ms before parsing a body carrying "slow-me" (listeners run in order), else the real worker.
  const slow = `require("node:worker_threads").parentPort.on("message", (m) => { if (new TextDecoder().decode(m.body).includes("slow-me")) { const until = Date.now() + 300; while (Date.now() < until); } });\n${WORKER_SOURCE}`;
  const body = (uid: string) => Buffer.from(JSON.stringify(reviewOf(widePod({ containers: 1000 }), { uid })));
  const uidOf = (p: { value: unknown }) => (p.value as { request: { uid: string } }).request.uid;

  it("stops after its idle time, quietly, and the next body starts another", { timeout: 10_000 }, async () => {
    const { log, lines } = capturingLogger();
    const parser = createBodyParser({ log, idleMs: 50 });
    try {
      assert.equal(uidOf(await parser.parse(body("first"))), "first");
      assert.equal(parser.running(), true);
      await pause(300);
      assert.equal(parser.running(), false, "stopped after 50 ms without a body");
      assert.equal(uidOf(await parser.parse(body("second"))), "second");
      assert.equal(parser.running(), true);
      assert.ok(!lines.some((l) => /worker stopped/.test(String(l.msg)) && Number(l.level) >= 50), "an idle stop is not logged as a crash");
    } finally {
      await parser.close();
    }
  });

  it("is not stopped while it parses, however long", { timeout: 10_000 }, async () => {
    const parser = createBodyParser({ log: silentLogger(), idleMs: 20, workerSource: slow });
    try {
      // The idle time passes ~15 times over while this body is in the worker.
      const [a, b] = await Promise.all([parser.parse(body("slow-me")), parser.parse(body("after"))]);
      assert.deepEqual([uidOf(a), uidOf(b)], ["slow-me", "after"]);
      assert.equal(parser.running(), true);
      await pause(200);
      assert.equal(parser.running(), false);
    } finally {
      await parser.close();
    }
  });

  // 2^31 ms and more: setTimeout would fire after 1 ms.
  for (const idleMs of [Infinity, 2 ** 31, 1e12]) {
    it(`idleMs ${idleMs} keeps it`, { timeout: 10_000 }, async () => {
      const parser = createBodyParser({ log: silentLogger(), idleMs });
      try {
        await parser.parse(body("kept"));
        await pause(200);
        assert.equal(parser.running(), true);
      } finally {
        await parser.close();
      }
    });
  }
});

describe("a worker that dies", () => {
  let t: TestServer;
  const { log, lines } = capturingLogger();
  before(async () => {
    // Exits on a body carrying "crash-me", else the real worker.
    const crashing = `require("node:worker_threads").parentPort.on("message", (m) => { if (new TextDecoder().decode(m.body).includes("crash-me")) process.exit(3); });\n${WORKER_SOURCE}`;
    t = await startTestServer(webhooks(), { bodyParser: createBodyParser({ log, workerSource: crashing }) });
  });
  after(() => t.server.close());

  it("fails the request it held with a 500 Status; the next large and small reviews are answered", async () => {
    const wide = reviewOf(widePod({ containers: 40_000 }), { uid: "crash-me" });
    const crashed = await postJson(t.port, "/validate/pods", wide, t.files.certs.ca.certPem);
    assert.equal(crashed.status, 500);
    assert.equal(crashed.json().kind, "Status");
    assert.match(crashed.json().message, /body parser worker stopped/);
    const next = await postJson(t.port, "/validate/pods", { ...wide, request: { ...(wide.request as object), uid: "next" } }, t.files.certs.ca.certPem);
    assert.equal(next.status, 200);
    assert.equal(next.json().response.uid, "next");
    assert.equal(next.json().response.allowed, false);
    const small = await postJson(t.port, "/validate/pods", review({ uid: "small", object: plainPod() }), t.files.certs.ca.certPem);
    assert.deepEqual(small.json().response, { uid: "small", allowed: true });
    assert.ok(lines.some((l) => l.msg === "body parser worker stopped; the next large body starts a new one"));
  });
});

/**
 * Issue 45 findings 4 and 5, issue 46 finding 1: ONE model of the pods Kubeflow Trainer v2.3.0 makes of a TrainJob
 * and its runtime (src/kinds/trainjob-runtime.ts trainJobModel), read by the caps, Kueue's pod sets and the Kueue
 * outfitter alike; the runtime read fresh on a TrainJob's CREATE and unsuspend, an unsuspend judged like a CREATE;
 * the runtimes checked themselves; runtime patches over the CRD's limit refused before any merge, the merge linear.
 * Upstream rules: kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go (newRuntimeInfo,
 * mergeRuntimePatches), pkg/util/trainingruntime (MergeResourceRequirements), pkg/runtime/framework/plugins/
 * (torch, mpi, plainml EnforceMLPolicy; jobset builder.go, jobset.go SyncParallelCount).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { effectivePodGpuNanos } from "../../../src/core/gpu.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { trainerNodeTemplate } from "../../../src/mutate/trainjob-outfit.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { trainJobReplicas } from "../../../src/kinds/trainjob-runtime.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { jobPodSets } from "../../../src/validate/queue-capacity.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { trainJob, upstream } from "../../fixtures/trainer-v2.js";

const TJ = kindOf("TrainJob");
const GPU = "nvidia.com/gpu";
type Obj = Record<string, unknown>;
type Policy = ReturnType<typeof checkPolicy>;

interface JobOpts {
  name: string;
  trainer?: boolean;
  parallelism?: number;
  replicas?: number;
  containers?: Array<{ name: string; resources?: Obj }>;
}

/** A ClusterTrainingRuntime named `name` with the given replicated Jobs and mlPolicy. */
function runtime(name: string, jobs: JobOpts[], mlPolicy: Obj | null = { numNodes: 1, torch: {} }, kind = "ClusterTrainingRuntime"): KubeObject {
  return deepFreeze({
    apiVersion: "trainer.kubeflow.org/v1alpha1",
    kind,
    metadata: { name, namespace: kind === "ClusterTrainingRuntime" ? "" : "team-a" },
    spec: {
      ...(mlPolicy ? { mlPolicy } : {}),
      template: {
        spec: {
          replicatedJobs: jobs.map((j) => ({
            name: j.name,
            ...(j.replicas !== undefined ? { replicas: j.replicas } : {}),
            template: {
              ...(j.trainer ? { metadata: { labels: { "trainer.kubeflow.org/trainjob-ancestor-step": "trainer" } } } : {}),
              spec: {
                ...(j.parallelism !== undefined ? { parallelism: j.parallelism } : {}),
                template: { spec: { containers: (j.containers ?? [{ name: "node" }]).map((c) => ({ image: "img", ...c })) } },
              },
            },
          })),
        },
      },
    },
  });
}

/** A runtime whose trainer Job `node` asks for `gpus` per pod (limits), plus cpu. */
const gpuNode = (gpus: number | string, name = "gpu-rt", more: Obj = {}): KubeObject =>
  runtime(name, [
    { name: "node", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: String(gpus), cpu: "1", ...more }, requests: { cpu: "1" } } }] },
  ]);

const onRuntime = (rt: KubeObject, trainer: Obj, spec: Obj = {}): KubeObject =>
  trainJob("tj", trainer, {
    spec: { runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: String(rt.kind), name: String((rt.metadata as Obj).name) }, ...spec },
  });

const ctxOf = (policy: Policy, namespace = "team-a") => ({ policy, namespace, limits: effectiveLimits(policy, namespace) });
const defaults = checkPolicy({}, "defaults");
/** GPUs per pod of each Job, as the caps (and Kueue's pod sets) count them. */
const gpusPerPod = (job: KubeObject, rt: KubeObject | undefined): Record<string, string> =>
  Object.fromEntries(
    trainJobReplicas(job, rt).map((r) => [r.type, String(effectivePodGpuNanos(r.template.spec ?? { containers: [] }, defaults.gpu).get(GPU) ?? 0n)]),
  );
const counts = (job: KubeObject, rt: KubeObject | undefined): Record<string, unknown> =>
  Object.fromEntries(trainJobReplicas(job, rt).map((r) => [r.type, r.replicas]));
const nodeResources = (job: KubeObject, rt: KubeObject, type = "node"): unknown =>
  trainJobReplicas(job, rt)
    .find((r) => r.type === type)!
    .template.spec!.containers.find((c) => c.name === "node")!.resources;

/** A runtime patch of manager `m` for the Job `job`: `pod` the pod template patch, `jobMeta` the Job's metadata. */
const patch = (m: string, job: string, pod: Obj, jobMeta?: Obj): Obj => ({
  manager: m,
  trainingRuntimeSpec: {
    template: { spec: { replicatedJobs: [{ name: job, template: { ...(jobMeta ? { metadata: jobMeta } : {}), spec: { template: pod } } }] } },
  },
});

const nano = (n: number): string => String(BigInt(n) * 1_000_000_000n);

describe("trainJobModel: what Trainer v2.3.0 makes of a TrainJob and its runtime", () => {
  const mpi = (runLauncherAsNode: boolean) =>
    runtime(
      "mpi",
      [
        { name: "node", containers: [{ name: "node", resources: { limits: { [GPU]: "2" } } }] },
        { name: "launcher", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "1" } } }] },
      ],
      { numNodes: 1, mpi: { runLauncherAsNode } },
    );
  const cases: Array<{
    name: string;
    job: KubeObject;
    runtime: KubeObject;
    counts: Record<string, unknown>;
    gpus: Record<string, string>;
    resources?: unknown;
  }> = [
    {
      name: "the red team's attack: cpu-only resourcesPerNode keeps the runtime's 4 GPUs (merged key by key), on 100 nodes",
      job: onRuntime(gpuNode(4), { numNodes: 100, resourcesPerNode: { limits: { cpu: "2" } } }),
      runtime: gpuNode(4),
      counts: { node: 100 },
      gpus: { node: nano(4) },
      resources: { limits: { [GPU]: "4", cpu: "2" }, requests: { cpu: "1" } },
    },
    {
      name: "resourcesPerNode with requests only: the runtime's limits kept, requests merged",
      job: onRuntime(gpuNode(4), { numNodes: 2, resourcesPerNode: { requests: { memory: "1Gi" } } }),
      runtime: gpuNode(4),
      counts: { node: 2 },
      gpus: { node: nano(4) },
      resources: { limits: { [GPU]: "4", cpu: "1" }, requests: { cpu: "1", memory: "1Gi" } },
    },
    {
      name: "resourcesPerNode's GPU key replaces the runtime's; its other keys kept",
      job: onRuntime(gpuNode(4), { numNodes: 2, resourcesPerNode: { limits: { [GPU]: "1" } } }),
      runtime: gpuNode(4),
      counts: { node: 2 },
      gpus: { node: nano(1) },
      resources: { limits: { [GPU]: "1", cpu: "1" }, requests: { cpu: "1" } },
    },
    {
      name: "numNodes goes to the trainer-labelled Job, whatever its name; a Job named node without the label keeps its parallelism and resources",
      job: onRuntime(
        runtime("named", [
          { name: "trainer", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "1" } } }] },
          { name: "node", parallelism: 2, containers: [{ name: "node", resources: { limits: { [GPU]: "8" } } }] },
        ]),
        { numNodes: 5, resourcesPerNode: { limits: { [GPU]: "2" } } },
      ),
      runtime: runtime("named", [
        { name: "trainer", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "1" } } }] },
        { name: "node", parallelism: 2, containers: [{ name: "node", resources: { limits: { [GPU]: "8" } } }] },
      ]),
      counts: { trainer: 5, node: 2 },
      gpus: { trainer: nano(2), node: nano(8) },
    },
    {
      name: "no numNodes: the runtime's mlPolicy.numNodes for the trainer Job, replicas × parallelism for another",
      job: onRuntime(
        runtime(
          "r",
          [
            { name: "node", trainer: true },
            { name: "init", replicas: 2, parallelism: 3 },
          ],
          { numNodes: 4, torch: {} },
        ),
        {},
      ),
      runtime: runtime(
        "r",
        [
          { name: "node", trainer: true },
          { name: "init", replicas: 2, parallelism: 3 },
        ],
        { numNodes: 4, torch: {} },
      ),
      counts: { node: 4, init: 6 },
      gpus: { node: "0", init: "0" },
    },
    {
      name: "no mlPolicy (plainml): numNodes still counts, resourcesPerNode is not merged",
      job: onRuntime(runtime("plain", [{ name: "node", trainer: true }], null), { numNodes: 3, resourcesPerNode: { limits: { [GPU]: "8" } } }),
      runtime: runtime("plain", [{ name: "node", trainer: true }], null),
      counts: { node: 3 },
      gpus: { node: "0" },
    },
    {
      name: "MPI with runLauncherAsNode: the Job named node gets numNodes − 1 and resourcesPerNode; the launcher too",
      job: onRuntime(mpi(true), { numNodes: 4, resourcesPerNode: { limits: { [GPU]: "4" } } }),
      runtime: mpi(true),
      counts: { node: 3, launcher: 1 },
      gpus: { node: nano(4), launcher: nano(4) },
    },
    {
      name: "MPI without runLauncherAsNode: node gets numNodes but not resourcesPerNode (unlabelled); the launcher does",
      job: onRuntime(mpi(false), { numNodes: 4, resourcesPerNode: { limits: { [GPU]: "4" } } }),
      runtime: mpi(false),
      counts: { node: 4, launcher: 1 },
      gpus: { node: nano(2), launcher: nano(4) },
    },
    {
      name: "a runtime patch that labels another Job trainer: that Job becomes a trainer (resourcesPerNode, replicas 1), the first keeps numNodes",
      job: onRuntime(
        runtime("two", [
          { name: "node", trainer: true },
          { name: "eval", replicas: 3 },
        ]),
        { numNodes: 2, resourcesPerNode: { limits: { [GPU]: "1" } } },
        { runtimePatches: [patch("example.io/a", "eval", {}, { labels: { "trainer.kubeflow.org/trainjob-ancestor-step": "trainer" } })] },
      ),
      runtime: runtime("two", [
        { name: "node", trainer: true },
        { name: "eval", replicas: 3 },
      ]),
      counts: { node: 2, eval: 1 },
      gpus: { node: nano(1), eval: nano(1) },
    },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      assert.deepEqual(counts(tc.job, tc.runtime), tc.counts);
      assert.deepEqual(gpusPerPod(tc.job, tc.runtime), tc.gpus);
      if (tc.resources) assert.deepEqual(nodeResources(tc.job, tc.runtime), tc.resources);
    });

  it("runtime patches by strategic merge, several in order: maps merged, tolerations replaced, keyed lists merged by key", () => {
    const rt = runtime("p", [{ name: "node", trainer: true, containers: [{ name: "node" }, { name: "sidecar" }] }]);
    const job = onRuntime(
      rt,
      { numNodes: 1 },
      {
        runtimePatches: [
          patch("example.io/a", "node", {
            metadata: { annotations: { a: "1" } },
            spec: {
              nodeSelector: { zone: "a", pool: "x" },
              tolerations: [{ key: "first", operator: "Exists" }],
              volumes: [{ name: "v1", emptyDir: {} }],
              containers: [{ name: "sidecar", env: [{ name: "E", value: "1" }] }],
            },
          }),
          patch("example.io/b", "node", {
            metadata: { annotations: { b: "2" } },
            spec: {
              nodeSelector: { zone: "b" },
              tolerations: [{ key: "second", operator: "Exists" }],
              volumes: [
                { name: "v1", configMap: { name: "c" } },
                { name: "v2", emptyDir: {} },
              ],
              containers: [
                {
                  name: "sidecar",
                  env: [
                    { name: "E", value: "2" },
                    { name: "F", value: "3" },
                  ],
                },
              ],
            },
          }),
        ],
      },
    );
    const [node] = trainJobReplicas(job, rt);
    const spec = node!.template.spec!;
    assert.deepEqual(node!.template.metadata?.annotations, { a: "1", b: "2" });
    assert.deepEqual(spec.nodeSelector, { zone: "b", pool: "x" });
    assert.deepEqual(spec.tolerations, [{ key: "second", operator: "Exists" }]);
    assert.deepEqual(spec.volumes, [
      { name: "v1", emptyDir: {}, configMap: { name: "c" } },
      { name: "v2", emptyDir: {} },
    ]);
    assert.deepEqual(
      spec.containers.map((c) => [c.name, c.image, c.env]),
      [
        ["node", "img", undefined],
        [
          "sidecar",
          "img",
          [
            { name: "E", value: "2" },
            { name: "F", value: "3" },
          ],
        ],
      ],
    );
  });

  it("the runtime and the TrainJob are not changed (the model works on copies)", () => {
    const rt = gpuNode(4);
    const job = onRuntime(
      rt,
      { numNodes: 2, resourcesPerNode: { limits: { cpu: "2" } } },
      { runtimePatches: [patch("example.io/a", "node", { spec: { nodeSelector: { a: "b" } } })] },
    );
    const before = JSON.stringify([rt, job]);
    trainJobReplicas(job, rt);
    assert.equal(JSON.stringify([rt, job]), before);
  });

  it("a patch with a __proto__ key (a review's text through JSON.parse) changes no object but its own", () => {
    const rt = gpuNode(1);
    const job = JSON.parse(
      JSON.stringify(onRuntime(rt, { numNodes: 1 }, { runtimePatches: [patch("example.io/a", "node", { spec: { nodeSelector: { a: "b" } } })] })).replace(
        '"nodeSelector"',
        '"__proto__":{"polluted":"yes","spec":{"x":1}},"constructor":{"prototype":{"polluted":"yes"}},"nodeSelector"',
      ),
    ) as KubeObject;
    assert.ok(JSON.stringify(job).includes("__proto__"));
    trainJobReplicas(job, rt);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal((Object.prototype as unknown as Record<string, unknown>).spec, undefined);
  });

  it("5,000 runtime patches merge in linear time (issue 46: the hand-made merge held the event loop 26 s)", () => {
    const rt = gpuNode(1);
    const runtimePatches = Array.from({ length: 5000 }, (_, i) =>
      patch(`example.io/m${i}`, "node", {
        spec: { volumes: Array.from({ length: 10 }, (_, k) => ({ name: `v${i}-${k}`, emptyDir: {} })), tolerations: [{ key: `t${i}`, operator: "Exists" }] },
      }),
    );
    const job = onRuntime(rt, { numNodes: 1 }, { runtimePatches });
    const start = performance.now();
    const [node] = trainJobReplicas(job, rt);
    const ms = performance.now() - start;
    assert.equal(node!.template.spec!.volumes!.length, 50_000);
    assert.ok(ms < 500, `took ${ms.toFixed(0)} ms`);
  });
});

describe("the outfitter and the caps read the same model", () => {
  const cases: Array<{ name: string; job: KubeObject; runtime: KubeObject }> = [
    {
      name: "cpu-only resourcesPerNode on a 4-GPU runtime",
      job: onRuntime(gpuNode(4), { numNodes: 100, resourcesPerNode: { limits: { cpu: "2" } } }),
      runtime: gpuNode(4),
    },
    {
      name: "resourcesPerNode's GPUs replacing the runtime's",
      job: onRuntime(gpuNode(4), { numNodes: 2, resourcesPerNode: { limits: { [GPU]: "1" } } }),
      runtime: gpuNode(4),
    },
    { name: "requests only", job: onRuntime(gpuNode(8), { resourcesPerNode: { requests: { [GPU]: "2" } } }), runtime: gpuNode(8) },
    {
      name: "a trainer Job not named node",
      job: onRuntime(runtime("named", [{ name: "trainer", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "3" } } }] }]), {
        numNodes: 2,
      }),
      runtime: runtime("named", [{ name: "trainer", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "3" } } }] }]),
    },
    { name: "upstream example 02 on torch-distributed", job: upstream("02-runtime-patches.yaml"), runtime: upstream("torch_distributed.yaml") },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const node = trainerNodeTemplate(tc.job, tc.runtime)!;
      const outfit = effectivePodGpuNanos(node.template.spec!, defaults.gpu);
      const caps = trainJobReplicas(tc.job, tc.runtime).find((r) => r.type === node.name)!;
      assert.deepEqual(outfit, effectivePodGpuNanos(caps.template.spec!, defaults.gpu));
      const podSet = jobPodSets(tc.job, TJ, ctxOf(defaults), tc.runtime).find((p) => p.name === node.name)!;
      assert.deepEqual(podSet.gpus, outfit);
    });
});

describe("the caps on the model", () => {
  const cap8 = checkPolicy({ limits: { job: { gpus: 8 } } }, "cap8");
  const brief = (job: KubeObject, rt: KubeObject | undefined, policy: Policy) =>
    validateJob(job, TJ, ctxOf(policy), rt).violations.map((v) => `${v.rule} ${v.field}${v.value !== undefined ? ` ${v.value}` : ""}`);

  it("the red team's attack: 100 nodes × 4 runtime GPUs with a cpu-only resourcesPerNode under an 8-GPU cap → job-gpus, 400", () => {
    const job = onRuntime(gpuNode(4), { numNodes: 100, resourcesPerNode: { limits: { cpu: "2" } } });
    assert.deepEqual(brief(job, gpuNode(4), cap8), ["job-gpus spec.trainer.numNodes 400"]);
  });

  const gpuPatch = (resources: Obj) => ({
    runtimePatches: [patch("example.io/a", "node", { spec: { containers: [{ name: "node", resources } as Obj] } })],
  });
  const cases: Array<{ name: string; job: KubeObject; runtime: KubeObject; policy: Policy; want: string[] }> = [
    {
      name: "a patch carrying container resources (not in v2.3.0's ContainerPatch) under a GPU cap → gpu-unknown at it",
      job: onRuntime(gpuNode(1), { numNodes: 2 }, gpuPatch({ limits: { [GPU]: "8" } })),
      runtime: gpuNode(1),
      policy: cap8,
      want: ["gpu-unknown spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources"],
    },
    {
      name: "the same without any GPU cap → admitted",
      job: onRuntime(gpuNode(1), { numNodes: 2 }, gpuPatch({ limits: { [GPU]: "8" } })),
      runtime: gpuNode(1),
      policy: defaults,
      want: [],
    },
    {
      name: "a cpu-only patch on a TrainJob asking for no GPUs, under a GPU cap → admitted",
      job: onRuntime(runtime("cpu", [{ name: "node", trainer: true }]), { numNodes: 2 }, gpuPatch({ limits: { cpu: "8" } })),
      runtime: runtime("cpu", [{ name: "node", trainer: true }]),
      policy: cap8,
      want: [],
    },
    {
      name: "a patch's parallelism under a GPU cap, on a GPU TrainJob → gpu-unknown at it",
      job: onRuntime(
        gpuNode(1),
        { numNodes: 2 },
        {
          runtimePatches: [
            {
              manager: "example.io/a",
              trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name: "node", template: { spec: { parallelism: 50 } } }] } } },
            },
          ],
        },
      ),
      runtime: gpuNode(1),
      policy: cap8,
      want: ["gpu-unknown spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.parallelism"],
    },
    {
      name: "runtimePatches not a list, under a GPU cap → gpu-unknown at spec.runtimePatches",
      job: onRuntime(gpuNode(1), { numNodes: 2 }, { runtimePatches: { manager: "x" } }),
      runtime: gpuNode(1),
      policy: cap8,
      want: ["gpu-unknown spec.runtimePatches"],
    },
  ];
  for (const tc of cases) it(tc.name, () => assert.deepEqual(brief(tc.job, tc.runtime, tc.policy), tc.want));
});

describe("/validate/jobs: the runtime read fresh, unsuspend judged like CREATE, runtimes checked, patches bounded", () => {
  const cap16 = checkPolicy({ limits: { job: { gpus: 16 } } }, "cap16");
  const jobReview = (object: KubeObject, oldObject?: KubeObject) =>
    review({
      kind: { group: TJ.group, version: TJ.version, kind: TJ.kind },
      resource: { group: TJ.group, version: TJ.version, resource: TJ.plural },
      operation: oldObject ? "UPDATE" : "CREATE",
      namespace: "team-a",
      object,
      oldObject: oldObject ?? null,
    });
  const admit = async (policy: Policy, reader: ReturnType<typeof fakeJobReader>, body: unknown) => {
    const res = await createWebhooks({ policy, log: capturingLogger().log, jobs: reader, now: () => new Date() })["/validate/jobs"]!.admit(body);
    return {
      decidedBy: res.decidedBy?.kind,
      allowed: res.review.response?.allowed,
      causes: (res.review.response?.status?.details?.causes ?? []).map((c: { field?: string; message?: string }) => c.field),
      message: res.review.response?.status?.message ?? "",
    };
  };
  // The attack: the runtime edited from 1 to 8 GPUs per node while the cache still holds the old one.
  const stale = gpuNode(1, "edited");
  const edited = gpuNode(8, "edited");
  const job = (suspend?: boolean) => onRuntime(stale, { numNodes: 8 }, suspend === undefined ? {} : { suspend });

  const cases: Array<{ name: string; body: () => unknown; allowed: boolean; freshReads: number }> = [
    { name: "CREATE: the runtime read fresh → 8 × 8 over the 16 cap → denied", body: () => jobReview(job(true)), allowed: false, freshReads: 1 },
    { name: "unsuspend (true → false): fresh, judged like CREATE → denied", body: () => jobReview(job(false), job(true)), allowed: false, freshReads: 1 },
    { name: "unsuspend (true → unset) → denied", body: () => jobReview(job(), job(true)), allowed: false, freshReads: 1 },
    {
      name: "another UPDATE of a suspended TrainJob (a label): cached runtime, only what it makes worse → allowed",
      body: () => jobReview(onRuntime(stale, { numNodes: 8 }, { suspend: true }), job(true)),
      allowed: true,
      freshReads: 0,
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const reader = fakeJobReader([stale], [edited]);
      const out = await admit(cap16, reader, tc.body());
      assert.equal(out.allowed, tc.allowed, out.message);
      if (!tc.allowed) assert.deepEqual(out.causes, ["spec.trainer.numNodes"]);
      assert.equal(reader.freshReads, tc.freshReads);
    });

  it("17 runtime patches: refused at spec.runtimePatches before any merge (the CRD's MaxItems is 16)", async () => {
    const runtimePatches = Array.from({ length: 17 }, (_, i) => patch(`example.io/m${i}`, "node", { spec: { nodeSelector: { a: String(i) } } }));
    const out = await admit(cap16, fakeJobReader([stale]), jobReview(onRuntime(stale, { numNodes: 1 }, { runtimePatches })));
    assert.equal(out.allowed, false);
    assert.deepEqual(out.causes, ["spec.runtimePatches"]);
    assert.match(out.message, /17 runtime patches, over the 16/);
  });

  it("16 runtime patches: checked (the CRD's own limit is admitted)", async () => {
    const runtimePatches = Array.from({ length: 16 }, (_, i) => patch(`example.io/m${i}`, "node", { spec: { nodeSelector: { a: String(i) } } }));
    const out = await admit(cap16, fakeJobReader([stale]), jobReview(onRuntime(stale, { numNodes: 1 }, { runtimePatches })));
    assert.equal(out.allowed, true, out.message);
  });

  it("5,000 runtime patches: answered in under 50 ms by the cost bound (their count alone), at spec.runtimePatches", async () => {
    const runtimePatches = Array.from({ length: 5000 }, (_, i) =>
      patch(`example.io/m${i}`, "node", { spec: { tolerations: Array.from({ length: 20 }, (_, k) => ({ key: `t${k}`, operator: "Exists" })) } }),
    );
    const body = jobReview(onRuntime(stale, { numNodes: 1 }, { runtimePatches }));
    const reader = fakeJobReader([stale]);
    await admit(cap16, reader, body); // warm-up: module loading is not the review's
    const start = performance.now();
    const out = await admit(cap16, reader, body);
    const ms = performance.now() - start;
    assert.equal(out.allowed, false);
    assert.deepEqual(out.causes, ["spec.runtimePatches"]);
    assert.match(out.message, /5000 runtime patches, over the 16/);
    assert.equal(out.decidedBy, "cost-bound");
    assert.ok(ms < 50, `took ${ms.toFixed(1)} ms`);
  });

  it("a runtime too large to check with the TrainJob → review-cost at spec.runtimeRef", async () => {
    const big = runtime("big", [{ name: "node", trainer: true, containers: Array.from({ length: 1500 }, (_, i) => ({ name: i === 0 ? "node" : `c${i}` })) }], {
      numNodes: 1,
      torch: {},
    });
    const out = await admit(cap16, fakeJobReader([big]), jobReview(onRuntime(big, { numNodes: 1 })));
    assert.equal(out.allowed, false);
    assert.deepEqual(out.causes, ["spec.runtimeRef"]);
  });

  const runtimeReview = (object: KubeObject, operation: "CREATE" | "UPDATE" = "CREATE", oldObject?: KubeObject) =>
    review({
      kind: { group: "trainer.kubeflow.org", version: "v1alpha1", kind: String(object.kind) },
      resource: { group: "trainer.kubeflow.org", version: "v1alpha1", resource: `${String(object.kind).toLowerCase()}s` },
      operation,
      ...(object.kind === "TrainingRuntime" ? { namespace: "team-a" } : {}),
      object,
      oldObject: oldObject ?? null,
    });
  // Top-level: 4 GPUs per pod, 4 cpu and 16Gi a container; team-a may have 8 GPUs.
  const podCaps = checkPolicy(
    { limits: { container: { cpu: "4", memory: "16Gi" }, pod: { gpus: 4 } }, namespaces: [{ pattern: "team-a", limits: { pod: { gpus: 8 } } }] },
    "pod-caps",
  );
  const rtCases: Array<{ name: string; body: unknown; allowed: boolean; causes?: string[] }> = [
    {
      name: "a ClusterTrainingRuntime of 8 GPUs per pod over the top-level per-pod cap of 4 → denied at its node template",
      body: runtimeReview(gpuNode(8, "cluster")),
      allowed: false,
      causes: ["spec.template.spec.replicatedJobs[0].template.spec.template.spec"],
    },
    { name: "a ClusterTrainingRuntime of 4 GPUs per pod → allowed", body: runtimeReview(gpuNode(4, "cluster")), allowed: true },
    {
      name: "a TrainingRuntime of 8 in team-a, whose own per-pod cap is 8 → allowed (its namespace's limits)",
      body: runtimeReview(
        runtime("ns", [{ name: "node", trainer: true, containers: [{ name: "node", resources: { limits: { [GPU]: "8" } } }] }], null, "TrainingRuntime"),
      ),
      allowed: true,
    },
    {
      // Review finding: the cpu and memory caps are for pods, a runtime is held to the GPU limits alone.
      name: "a CPU-only ClusterTrainingRuntime of 32 cpu and 128Gi, over the container caps → allowed (GPU limits only)",
      body: runtimeReview(
        runtime("cpu-only", [{ name: "node", trainer: true, containers: [{ name: "node", resources: { limits: { cpu: "32", memory: "128Gi" } } }] }]),
      ),
      allowed: true,
    },
    {
      name: "a ClusterTrainingRuntime edited from 1 to 8 GPUs per pod → denied (the UPDATE makes it worse)",
      body: runtimeReview(gpuNode(8, "cluster"), "UPDATE", gpuNode(1, "cluster")),
      allowed: false,
      causes: ["spec.template.spec.replicatedJobs[0].template.spec.template.spec"],
    },
  ];
  for (const tc of rtCases)
    it(tc.name, async () => {
      const out = await admit(podCaps, fakeJobReader([]), tc.body);
      assert.equal(out.allowed, tc.allowed, out.message);
      if (tc.causes) assert.deepEqual(out.causes, tc.causes);
    });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1NodeSelectorRequirement, V1Pod } from "@kubernetes/client-node";
import { applyPatch, createPatch } from "../../../src/admission/patch.js";
import { placeOnAccelerator } from "../../../src/mutate/accelerator.js";
import { addGpuTolerations } from "../../../src/mutate/gpu-tolerations.js";
import { mutatePod, POD_MUTATIONS } from "../../../src/mutate/index.js";
import { placeInterruptible } from "../../../src/mutate/interruptible.js";
import { defaultResources } from "../../../src/mutate/resources.js";
import { isExtendedResource } from "../../../src/core/gpu.js";
import type { Mutation, MutationContext } from "../../../src/mutate/types.js";
import { container, ctx, testPod } from "../../fixtures/pods.js";
import { deepFreeze } from "../../fixtures/reviews.js";

interface Case {
  name: string;
  given: V1Pod;
  want: V1Pod | "unchanged";
  ctx?: MutationContext;
}

/** Runs a table: each case exactly, then reinvocation (the mutation on its own output changes nothing). */
function table(m: Mutation, cases: Case[]): void {
  describe(m.name, () => {
    for (const tc of cases) {
      const c = tc.ctx ?? ctx();
      it(tc.name, () => {
        const got = m.mutate(tc.given, c);
        if (tc.want === "unchanged") assert.equal(got, tc.given, "a no-op returns the same reference");
        else assert.deepEqual(got, tc.want);
      });
      it(`${tc.name} (reinvocation: no further change)`, () => {
        const once = deepFreeze(m.mutate(tc.given, c));
        assert.equal(m.mutate(once, c), once);
      });
    }
  });
}

const gpu = (n = "1", name = "nvidia.com/gpu") => container({ name: "trainer", limits: { [name]: n }, requests: { [name]: n, cpu: "1", memory: "1Gi" } });
const tol = (key: string) => ({ key, operator: "Exists", effect: "NoSchedule" });

table(addGpuTolerations, [
  { name: "pod without GPU requests → unchanged", given: testPod(), want: "unchanged" },
  {
    name: "limits-only nvidia.com/gpu → toleration added",
    given: testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "2" } })] } }),
    want: testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "2" } })], tolerations: [tol("nvidia.com/gpu")] } }),
  },
  {
    name: "GPU in an init container only → toleration added",
    given: testPod({ spec: { initContainers: [gpu()] } }),
    want: testPod({ spec: { initContainers: [gpu()], tolerations: [tol("nvidia.com/gpu")] } }),
  },
  {
    name: "MIG slice → its own toleration plus the nvidia.com/gpu one the policy maps to MIG",
    given: testPod({ spec: { containers: [gpu("1", "nvidia.com/mig-1g.5gb")] } }),
    want: testPod({ spec: { containers: [gpu("1", "nvidia.com/mig-1g.5gb")], tolerations: [tol("nvidia.com/mig-1g.5gb"), tol("nvidia.com/gpu")] } }),
  },
  {
    name: "two resources → sorted order (amd.com/gpu before nvidia.com/gpu)",
    given: testPod({ spec: { containers: [gpu("1"), gpu("1", "amd.com/gpu")] } }),
    want: testPod({ spec: { containers: [gpu("1"), gpu("1", "amd.com/gpu")], tolerations: [tol("amd.com/gpu"), tol("nvidia.com/gpu")] } }),
  },
  {
    name: "zero GPUs still count (names, not quantities, trigger)",
    given: testPod({ spec: { containers: [gpu("0")] } }),
    want: testPod({ spec: { containers: [gpu("0")], tolerations: [tol("nvidia.com/gpu")] } }),
  },
  {
    name: "an equal toleration already present → not duplicated, others preserved",
    given: testPod({ spec: { containers: [gpu()], tolerations: [{ key: "x", operator: "Equal", value: "y" }, tol("nvidia.com/gpu")] } }),
    want: "unchanged",
  },
  {
    name: "custom taint mapped by the policy → added too",
    ctx: ctx({ gpu: { resources: [{ pattern: "nvidia.com/gpu", tolerations: [{ key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" }] }] } }),
    given: testPod({ spec: { containers: [gpu()] } }),
    want: testPod({
      spec: { containers: [gpu()], tolerations: [tol("nvidia.com/gpu"), { key: "sku", operator: "Equal", value: "gpu", effect: "NoSchedule" }] },
    }),
  },
  {
    name: "a resource outside the GPU patterns (example.com/fpga) → unchanged",
    given: testPod({ spec: { containers: [gpu("1", "example.com/fpga")] } }),
    want: "unchanged",
  },
]);

const acc = { "quartermaster.dev/accelerator": "A100-SXM4-40GB" };
const inA100 = { key: "nvidia.com/gpu.product", operator: "In", values: ["A100-SXM4-40GB"] };
const required = (...terms: V1NodeSelectorRequirement[][]) => ({
  nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms.map((matchExpressions) => ({ matchExpressions })) } },
});

table(placeOnAccelerator, [
  { name: "no annotations → unchanged", given: testPod({ spec: { containers: [gpu()] } }), want: "unchanged" },
  { name: "accelerator annotation but no GPU limit → unchanged", given: testPod({ annotations: acc }), want: "unchanged" },
  {
    name: "GPU only in requests of an init container → unchanged (limits of regular containers count)",
    given: testPod({ annotations: acc, spec: { initContainers: [gpu()] } }),
    want: "unchanged",
  },
  {
    name: "accelerator → required expression in a new term",
    given: testPod({ annotations: acc, spec: { containers: [gpu()] } }),
    want: testPod({ annotations: acc, spec: { containers: [gpu()], affinity: required([inA100]) } }),
  },
  {
    name: "existing terms → ANDed into every term; preferred terms untouched",
    given: testPod({
      annotations: acc,
      spec: {
        containers: [gpu()],
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] },
                { matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] },
              ],
            },
            preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "spot", operator: "Exists" }] } }],
          },
        },
      },
    }),
    want: testPod({
      annotations: acc,
      spec: {
        containers: [gpu()],
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }, inA100] },
                { matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }, inA100] },
              ],
            },
            preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "spot", operator: "Exists" }] } }],
          },
        },
      },
    }),
  },
  {
    name: "partition 1g.5gb on an explicit partitionNodeLabel with tolerations on → expression and Equal toleration",
    ctx: ctx({ accelerator: { addTolerations: true, partitionNodeLabel: "nvidia.com/mig.config" } }),
    given: testPod({ annotations: { "quartermaster.dev/gpu-partition": "1g.5gb" }, spec: { containers: [gpu()] } }),
    want: testPod({
      annotations: { "quartermaster.dev/gpu-partition": "1g.5gb" },
      spec: {
        containers: [gpu()],
        affinity: required([{ key: "nvidia.com/mig.config", operator: "In", values: ["1g.5gb"] }]),
        tolerations: [{ key: "nvidia.com/mig.config", operator: "Equal", value: "1g.5gb", effect: "NoSchedule" }],
      },
    }),
  },
  {
    name: "partition none on an explicit partitionNodeLabel → DoesNotExist on it",
    ctx: ctx({ accelerator: { partitionNodeLabel: "nvidia.com/mig.config" } }),
    given: testPod({ annotations: { "quartermaster.dev/gpu-partition": "none" }, spec: { containers: [gpu()] } }),
    want: testPod({
      annotations: { "quartermaster.dev/gpu-partition": "none" },
      spec: { containers: [gpu()], affinity: required([{ key: "nvidia.com/mig.config", operator: "DoesNotExist" }]) },
    }),
  },
  {
    name: "an accelerator that is not a label value → unchanged",
    given: testPod({ annotations: { "quartermaster.dev/accelerator": "A100 80GB" }, spec: { containers: [gpu()] } }),
    want: "unchanged",
  },
]);

const interruptiblePolicy = {
  interruptible: {
    tolerations: [{ key: "x/interruptible", operator: "Exists", effect: "NoSchedule" }],
    nodeRequirement: { key: "x/interruptible", operator: "In", values: ["true"] },
    nonInterruptibleNodeRequirement: { key: "x/interruptible", operator: "DoesNotExist" },
  },
};
table(placeInterruptible, [
  {
    name: "default policy (nothing configured) → unchanged",
    given: testPod({ annotations: { "quartermaster.dev/interruptible": "true" } }),
    want: "unchanged",
  },
  {
    name: "interruptible → tolerations and requirement (Flyte's test vector: same term)",
    ctx: ctx(interruptiblePolicy),
    given: testPod({
      annotations: { "quartermaster.dev/interruptible": "true" },
      spec: { affinity: required([{ key: "node selector requirement", operator: "In", values: ["exists"] }]) },
    }),
    want: testPod({
      annotations: { "quartermaster.dev/interruptible": "true" },
      spec: {
        affinity: required([
          { key: "node selector requirement", operator: "In", values: ["exists"] },
          { key: "x/interruptible", operator: "In", values: ["true"] },
        ]),
        tolerations: [{ key: "x/interruptible", operator: "Exists", effect: "NoSchedule" }],
      },
    }),
  },
  {
    name: "not interruptible → the non-interruptible requirement",
    ctx: ctx(interruptiblePolicy),
    given: testPod(),
    want: testPod({ spec: { affinity: required([{ key: "x/interruptible", operator: "DoesNotExist" }]) } }),
  },
]);

const res = (requests?: Record<string, string>, limits?: Record<string, string>, name = "main") => container({ name, requests, limits });
table(defaultResources, [
  { name: "requests already set → unchanged", given: testPod({ spec: { containers: [res({ cpu: "2", memory: "1Gi" })] } }), want: "unchanged" },
  {
    name: "no resources → policy default requests (cpu 1, memory 1Gi)",
    given: testPod(),
    want: testPod({ spec: { containers: [res({ cpu: "1", memory: "1Gi" })] } }),
  },
  {
    name: "limits only → requests from the limits, not from the default",
    given: testPod({ spec: { containers: [res(undefined, { cpu: "500m", memory: "256Mi" })] } }),
    want: testPod({ spec: { containers: [res({ cpu: "500m", memory: "256Mi" }, { cpu: "500m", memory: "256Mi" })] } }),
  },
  {
    name: "a zero limit is no source: the default is used, and no zero entry is written",
    given: testPod({ spec: { containers: [res({ memory: "1Gi" }, { cpu: "0" })] } }),
    want: testPod({ spec: { containers: [res({ memory: "1Gi", cpu: "1" }, { cpu: "0" })] } }),
  },
  {
    name: "bare gpu → renamed to nvidia.com/gpu, limit filled from the request",
    given: testPod({ spec: { containers: [res({ cpu: "1", memory: "1Gi", gpu: "2" })] } }),
    want: testPod({ spec: { containers: [res({ cpu: "1", memory: "1Gi", "nvidia.com/gpu": "2" }, { "nvidia.com/gpu": "2" })] } }),
  },
  {
    name: "bare gpu beside an explicit nvidia.com/gpu → the explicit value wins, gpu dropped",
    given: testPod({ spec: { containers: [res({ cpu: "1", memory: "1Gi", gpu: "2", "nvidia.com/gpu": "1" }, { "nvidia.com/gpu": "1" })] } }),
    want: testPod({ spec: { containers: [res({ cpu: "1", memory: "1Gi", "nvidia.com/gpu": "1" }, { "nvidia.com/gpu": "1" })] } }),
  },
  {
    name: "init containers and native sidecars are defaulted too",
    given: testPod({ spec: { initContainers: [{ ...res(), restartPolicy: "Always" }], containers: [res({ cpu: "1", memory: "1Gi" })] } }),
    want: testPod({
      spec: { initContainers: [{ ...res({ cpu: "1", memory: "1Gi" }), restartPolicy: "Always" }], containers: [res({ cpu: "1", memory: "1Gi" })] },
    }),
  },
  {
    name: "limitsFromRequests: memory limit from its request; a set limit is never raised or lowered",
    ctx: ctx({ resources: { limitsFromRequests: ["memory", "cpu"] } }),
    given: testPod({ spec: { containers: [res({ cpu: "1", memory: "2Gi" }, { cpu: "4" })] } }),
    want: testPod({ spec: { containers: [res({ cpu: "1", memory: "2Gi" }, { cpu: "4", memory: "2Gi" })] } }),
  },
]);

describe("isExtendedResource", () => {
  const cases: Array<[string, boolean]> = [
    ["nvidia.com/gpu", true],
    ["nvidia.com/mig-1g.5gb", true],
    ["cpu", false],
    ["hugepages-2Mi", false],
    ["kubernetes.io/x", false],
    ["foo.kubernetes.io/x", false],
    ["requests.nvidia.com/gpu", false],
  ];
  for (const [n, want] of cases) it(`${n} → ${want}`, () => assert.equal(isExtendedResource(n), want));
});

describe("mutatePod pipeline", () => {
  const trainer = testPod({ annotations: acc, spec: { containers: [container({ name: "trainer", limits: { gpu: "1" } })] } });

  it("runs every mutation in order, records them, warns once each", () => {
    const out = mutatePod(trainer, ctx());
    assert.deepEqual(out.applied, ["resources", "gpu-tolerations", "accelerator"]);
    assert.equal(out.pod.metadata?.annotations?.["quartermaster.dev/mutations"], "resources,gpu-tolerations,accelerator");
    assert.equal(out.warnings.length, 3);
    assert.ok(
      out.warnings.every((w) => w.length <= 120 && w.startsWith("quartermaster: ")),
      JSON.stringify(out.warnings),
    );
    assert.deepEqual(out.pod.spec?.containers[0]?.resources, {
      requests: { "nvidia.com/gpu": "1", cpu: "1", memory: "1Gi" },
      limits: { "nvidia.com/gpu": "1" },
    });
    assert.deepEqual(out.pod.spec?.tolerations, [tol("nvidia.com/gpu")]);
  });

  it("reinvocation: the pipeline on its own output changes nothing and warns nothing", () => {
    const once = deepFreeze(mutatePod(trainer, ctx()).pod);
    const twice = mutatePod(once, ctx());
    assert.equal(twice.pod, once);
    assert.deepEqual(twice.applied, []);
    assert.deepEqual(twice.warnings, []);
  });

  it("the diff touches only what changed: untouched subtrees keep their identity", () => {
    const out = mutatePod(trainer, ctx()).pod;
    assert.equal(out.metadata?.name, trainer.metadata?.name);
    const ops = createPatch(trainer, out);
    assert.ok(ops.every((o) => !o.path.startsWith("/apiVersion") && !o.path.startsWith("/metadata/name")));
    assert.deepEqual(applyPatch(trainer, ops), out);
  });

  it("advice: accelerator asked without a GPU limit → a warning and no change", () => {
    const out = mutatePod(testPod({ annotations: acc, spec: { containers: [res({ cpu: "1", memory: "1Gi" })] } }), ctx());
    assert.deepEqual(out.applied, []);
    assert.deepEqual(out.warnings, ["quartermaster: quartermaster.dev/accelerator ignored: no container has a GPU limit"]);
  });

  it("advice: an invalid accelerator value → named in a warning", () => {
    const out = mutatePod(testPod({ annotations: { "quartermaster.dev/accelerator": "A100 80GB" }, spec: { containers: [gpu()] } }), ctx());
    assert.ok(out.warnings.includes("quartermaster: quartermaster.dev/accelerator=A100 80GB ignored: not a valid label value"), JSON.stringify(out.warnings));
  });

  it("a later webhook's change then reinvocation: only the missing part is added, names merged", () => {
    const once = mutatePod(trainer, ctx()).pod;
    const other = deepFreeze({ ...once, spec: { ...once.spec!, initContainers: [container({ name: "mesh-init", limits: { "amd.com/gpu": "1" } })] } });
    const again = mutatePod(other, ctx());
    assert.deepEqual(again.applied, ["resources", "gpu-tolerations"]);
    assert.equal(again.pod.metadata?.annotations?.["quartermaster.dev/mutations"], "resources,gpu-tolerations,accelerator");
  });

  it("every mutation has a distinct name", () => {
    assert.equal(new Set(POD_MUTATIONS.map((m) => m.name)).size, POD_MUTATIONS.length);
  });
});

import { injectClusterSpec } from "../../../src/mutate/cluster-spec.js";
import { addTrainingLabels } from "../../../src/mutate/training-labels.js";
import { job, topology, fakeJobReader } from "../../fixtures/jobs.js";
import { mutatePods } from "../../../webhooks/mutate-pods.js";
import { capturingLogger } from "../../fixtures/https.js";
import { review } from "../../fixtures/reviews.js";
import { checkPolicy } from "../../../src/policy/load.js";

const tfjob = job("TFJob", "mnist", "team-a", { Chief: 1, Worker: 2, PS: 1 });
const withTopo = (type: string, i: number, extra: Record<string, unknown> = {}): MutationContext => ({ ...ctx(extra), topology: topology(tfjob, type, i) });
const tfConfig =
  '{"cluster":{"chief":["mnist-chief-0.team-a.svc:2222"],"ps":["mnist-ps-0.team-a.svc:2222"],"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}';
const tfContainers = (env?: Array<{ name: string; value: string }>) => [
  { name: "sidecar", image: "busybox" },
  { name: "tensorflow", image: "tf", ...(env ? { env } : {}) },
];

table(injectClusterSpec, [
  { name: "no topology → unchanged", given: testPod({ spec: { containers: tfContainers() } }), want: "unchanged" },
  {
    name: "TF worker-1 → TF_CONFIG on the tensorflow container only",
    ctx: withTopo("Worker", 1),
    given: testPod({ spec: { containers: tfContainers() } }),
    want: testPod({ spec: { containers: tfContainers([{ name: "TF_CONFIG", value: tfConfig }]) } }),
  },
  {
    name: "TF_CONFIG already set (the training operator ran) → never overwritten",
    ctx: withTopo("Worker", 1),
    given: testPod({ spec: { containers: tfContainers([{ name: "TF_CONFIG", value: "{}" }]) } }),
    want: "unchanged",
  },
  {
    name: "clusterSpec disabled → unchanged",
    ctx: withTopo("Worker", 1, { clusterSpec: { enabled: false } }),
    given: testPod({ spec: { containers: tfContainers() } }),
    want: "unchanged",
  },
  { name: "no container named tensorflow → unchanged", ctx: withTopo("Worker", 1), given: testPod(), want: "unchanged" },
  {
    name: "PyTorch → every container, the user's own variables kept",
    ctx: { ...ctx(), topology: topology(job("PyTorchJob", "pt", "team-a", { Worker: 2 }), "Worker", 1) },
    given: testPod({
      spec: {
        containers: [
          { name: "pytorch", image: "x", env: [{ name: "PET_NNODES", value: "9" }] },
          { name: "side", image: "y" },
        ],
      },
    }),
    want: testPod({
      spec: {
        containers: [
          {
            name: "pytorch",
            image: "x",
            env: [
              { name: "PET_NNODES", value: "9" },
              { name: "PYTHONUNBUFFERED", value: "1" },
              { name: "PET_NPROC_PER_NODE", value: "auto" },
            ],
          },
          {
            name: "side",
            image: "y",
            env: [
              { name: "PYTHONUNBUFFERED", value: "1" },
              { name: "PET_NPROC_PER_NODE", value: "auto" },
              { name: "PET_NNODES", value: "2" },
            ],
          },
        ],
      },
    }),
  },
]);

describe("own __proto__ keys (JSON from a hostile or broken client) survive every mutation", () => {
  // JSON.parse makes "__proto__" an own key; a copy that sets it instead of defining it would drop it
  // and the diff would emit an operation on __proto__, which the apiserver's patcher refuses.
  const raw = `{"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p","labels":{"__proto__":"x","app":"a"},"annotations":{"__proto__":"y","quartermaster.dev/accelerator":"A100-SXM4-40GB"}},
    "spec":{"__proto__":{"weird":true},"containers":[
      {"name":"pytorch","image":"i","__proto__":"c","resources":{"limits":{"nvidia.com/gpu":"1","__proto__":"1"},"requests":{"__proto__":"2"}}},
      {"name":"side","image":"s"}]}}`;
  it("the patch touches no __proto__ key, applies, and the pod keeps them all", () => {
    const pod = JSON.parse(raw) as V1Pod;
    assert.ok(Object.prototype.hasOwnProperty.call(pod.metadata!.labels, "__proto__"), "the fixture has own __proto__ keys");
    const topo = topology(job("PyTorchJob", "pt", "team-a", { Master: 1, Worker: 2 }), "Worker", 0);
    const out = mutatePod(pod, { ...ctx(), topology: topo }).pod;
    const ops = createPatch(JSON.parse(raw) as object, out);
    assert.ok(ops.length > 0);
    assert.deepEqual(
      ops.filter((o) => o.path.includes("__proto__")),
      [],
    );
    const applied = applyPatch(JSON.parse(raw) as object, ops) as V1Pod;
    for (const o of [out.metadata!.labels!, out.metadata!.annotations!, out.spec!, out.spec!.containers[0]!, applied.metadata!.labels!]) {
      assert.ok(Object.prototype.hasOwnProperty.call(o, "__proto__"));
      assert.equal(Object.getPrototypeOf(o), Object.prototype);
    }
  });
});

describe("cluster-spec: the spec remembered between mutate and advise", () => {
  // The last topology's spec is kept; any other topology, namespace or cluster domain recomputes it.
  const tfEnv = (pod: V1Pod) => pod.spec!.containers[1]!.env?.find((e) => e.name === "TF_CONFIG")?.value ?? "";
  const given = testPod({ spec: { containers: tfContainers() } });
  // A job stored without a namespace: the admission's namespace names the hosts.
  const stored = job("TFJob", "mnist", "team-a", { Chief: 1, Worker: 2, PS: 1 });
  const nsLess = { ...stored, metadata: { name: "mnist" } };
  const t1 = topology(nsLess, "Worker", 1);
  const steps: Array<{ name: string; ctx: MutationContext; task: string; host: string }> = [
    { name: "worker-1", ctx: { ...ctx(), topology: t1 }, task: '"task":{"type":"worker","index":1}', host: "mnist-worker-0.team-a.svc:2222" },
    {
      name: "same topology, another namespace",
      ctx: { ...ctx(), namespace: "team-b", topology: t1 },
      task: '"task":{"type":"worker","index":1}',
      host: "mnist-worker-0.team-b.svc:2222",
    },
    {
      name: "same topology and namespace, another cluster domain",
      ctx: { ...ctx({ clusterSpec: { clusterDomain: "cluster.local" } }), namespace: "team-b", topology: t1 },
      task: '"task":{"type":"worker","index":1}',
      host: "mnist-worker-0.team-b.svc.cluster.local:2222",
    },
    {
      name: "another topology",
      ctx: { ...ctx(), topology: topology(nsLess, "Chief", 0) },
      task: '"task":{"type":"chief","index":0}',
      host: "mnist-worker-0.team-a.svc:2222",
    },
  ];
  it("interleaved admissions each get their own TF_CONFIG and advice", () => {
    for (const round of [1, 2]) {
      for (const step of steps) {
        const out = injectClusterSpec.mutate(given, step.ctx);
        assert.ok(tfEnv(out).includes(step.task), `${step.name}, round ${round}: ${tfEnv(out)}`);
        assert.ok(tfEnv(out).includes(step.host), `${step.name}, round ${round}: ${tfEnv(out)}`);
        assert.deepEqual(injectClusterSpec.advise!(out, step.ctx), [], step.name);
      }
    }
  });
});

const kf = (o: Record<string, string>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [`training.kubeflow.org/${k}`, v]));
table(addTrainingLabels, [
  { name: "no topology → unchanged", given: testPod(), want: "unchanged" },
  {
    name: "TF chief-0 → the four labels and job-role master",
    ctx: withTopo("Chief", 0),
    given: testPod(),
    want: testPod({
      labels: kf({ "operator-name": "tfjob-controller", "job-name": "mnist", "replica-type": "chief", "replica-index": "0", "job-role": "master" }),
    }),
  },
  {
    name: "TF worker-1 → no job-role; a label the pod has is kept",
    ctx: withTopo("Worker", 1),
    given: testPod({ labels: { ...kf({ "job-name": "custom" }), app: "x" } }),
    want: testPod({
      labels: { ...kf({ "job-name": "custom" }), app: "x", ...kf({ "operator-name": "tfjob-controller", "replica-type": "worker", "replica-index": "1" }) },
    }),
  },
]);

describe("mutate-pods webhook: topology", () => {
  const owned = (name: string) => ({
    ...testPod({ spec: { containers: tfContainers() } }),
    metadata: {
      name,
      namespace: "team-a",
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true }],
    },
  });
  const deps = (extra: Record<string, unknown> = {}, jobs = fakeJobReader([tfjob])) => ({
    policy: Object.keys(extra).length ? checkPolicy(extra, "t") : ctx().policy,
    log: capturingLogger().log,
    jobs,
    now: () => new Date(),
  });

  it("an owned replica gets labels and TF_CONFIG through the job read", async () => {
    const res = await mutatePods(deps()).admit(review({ object: owned("mnist-worker-1") as never }));
    const ops = JSON.parse(Buffer.from(res.review.response!.patch!, "base64").toString()) as Array<{ path: string; value: unknown }>;
    const mutated = applyPatch(owned("mnist-worker-1") as V1Pod, ops as never);
    assert.equal(mutated.spec?.containers[1]?.env?.[0]?.value, tfConfig);
    assert.equal(mutated.metadata?.labels?.["training.kubeflow.org/replica-type"], "worker");
  });

  it("job not readable → admitted without a cluster spec, with a warning saying why", async () => {
    const res = await mutatePods(deps({}, fakeJobReader())).admit(review({ object: owned("mnist-worker-1") as never }));
    assert.equal(res.review.response?.allowed, true);
    assert.equal(res.review.response?.warnings?.[0], "quartermaster: no cluster spec: job team-a/mnist (TFJob) not found");
  });

  it("job not readable and onJobLookupFailure deny → denied with the reason", async () => {
    const res = await mutatePods(deps({ clusterSpec: { onJobLookupFailure: "deny" } }, fakeJobReader())).admit(
      review({ object: owned("mnist-worker-1") as never }),
    );
    assert.equal(res.outcome, "denied");
    assert.equal(res.review.response?.allowed, false);
    assert.match(res.review.response?.status?.message ?? "", /metadata\.ownerReferences: cannot outfit the pod: job team-a\/mnist \(TFJob\) not found/);
  });
});

describe("malformed shapes the apiserver would refuse: left untouched, and a second run changes nothing", () => {
  // The apiserver refuses a pod whose env or tolerations is not a list after the webhooks ran, so the
  // mutations leave such a value exactly as it came (the fuzz seed 397869332 found a string env that
  // cluster-spec concatenated onto as a string, growing it on every run).
  const pytorch = { ...ctx(), topology: topology(job("PyTorchJob", "pt", "team-a", { Worker: 2 }), "Worker", 1) };
  const long = "1".padEnd(200, "0");
  const gpuPod = (spec: Record<string, unknown>, annotations?: Record<string, string>): V1Pod =>
    JSON.parse(
      JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "team-a", ...(annotations ? { annotations } : {}) }, spec }),
    ) as V1Pod;
  const trainer = (extra: Record<string, unknown>) => ({ name: "pytorch", image: "i", resources: { limits: { "nvidia.com/gpu": "1" } }, ...extra });
  const withInterruptible = { ...ctx(interruptiblePolicy), topology: pytorch.topology };
  const plain = (extra: Record<string, unknown>) => ({ name: "pytorch", image: "i", ...extra });
  const required = (terms: unknown) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } });
  const accel = { "quartermaster.dev/accelerator": "A100-SXM4-40GB" };
  const cases: Array<{ name: string; given: V1Pod; path: (p: V1Pod) => unknown; warns?: RegExp; ctx?: MutationContext }> = [
    {
      name: "env a long string (fuzz seed 397869332)",
      given: gpuPod({ containers: [trainer({ env: long })] }),
      path: (p) => p.spec!.containers[0]!.env,
      warns: /env is not a list/,
    },
    { name: "env a short string", given: gpuPod({ containers: [trainer({ env: "x" })] }), path: (p) => p.spec!.containers[0]!.env, warns: /env is not a list/ },
    {
      name: "env an object",
      given: gpuPod({ containers: [trainer({ env: { name: "A", value: "1" } })] }),
      path: (p) => p.spec!.containers[0]!.env,
      warns: /env is not a list/,
    },
    { name: "env a number", given: gpuPod({ containers: [trainer({ env: 7 })] }), path: (p) => p.spec!.containers[0]!.env, warns: /env is not a list/ },
    {
      name: "tolerations a long string",
      given: gpuPod({ containers: [trainer({})], tolerations: long }),
      path: (p) => p.spec!.tolerations,
      warns: /tolerations is not a list/,
    },
    {
      name: "tolerations a short string",
      given: gpuPod({ containers: [trainer({})], tolerations: "x" }),
      path: (p) => p.spec!.tolerations,
      warns: /tolerations is not a list/,
    },
    {
      name: "tolerations an object",
      given: gpuPod({ containers: [trainer({})], tolerations: { key: "a" } }),
      path: (p) => p.spec!.tolerations,
      warns: /tolerations is not a list/,
    },
    {
      name: "an interruptible pod's tolerations a long string",
      given: gpuPod({ containers: [trainer({})], tolerations: long }, { "quartermaster.dev/interruptible": "true" }),
      path: (p) => p.spec!.tolerations,
      warns: /tolerations is not a list/,
    },
    {
      name: "an interruptible pod without GPUs, its tolerations a string (the policy's tolerations)",
      ctx: withInterruptible,
      given: gpuPod({ containers: [plain({})], tolerations: long }, { "quartermaster.dev/interruptible": "true" }),
      path: (p) => p.spec!.tolerations,
      warns: /no interruptible tolerations added: spec.tolerations is not a list/,
    },
    {
      name: "required nodeSelectorTerms a string (accelerator)",
      given: gpuPod({ containers: [trainer({})], affinity: required(long) }, accel),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "required nodeSelectorTerms an object (accelerator)",
      given: gpuPod({ containers: [trainer({})], affinity: required({ matchExpressions: [] }) }, accel),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "a term's matchExpressions a string (accelerator)",
      given: gpuPod({ containers: [trainer({})], affinity: required([{ matchExpressions: long }]) }, accel),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "a term that is a string (accelerator)",
      given: gpuPod({ containers: [trainer({})], affinity: required([long]) }, accel),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "an expression that is null (accelerator)",
      given: gpuPod({ containers: [trainer({})], affinity: required([{ matchExpressions: [null] }]) }, accel),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "required nodeSelectorTerms a string (interruptible)",
      ctx: withInterruptible,
      given: gpuPod({ containers: [plain({})], affinity: required(long) }, { "quartermaster.dev/interruptible": "true" }),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "a term's matchExpressions an object (interruptible)",
      ctx: withInterruptible,
      given: gpuPod({ containers: [plain({})], affinity: required([{ matchExpressions: { key: "k" } }]) }),
      path: (p) => p.spec!.affinity,
    },
    {
      name: "a container that is an empty string (fuzz seed 1: resources made it an object, cluster-spec then filled it)",
      given: gpuPod({ containers: [""] }),
      path: (p) => p.spec!.containers,
    },
    {
      name: "a container that is null, an init container that is a number",
      given: gpuPod({ containers: [null, trainer({})], initContainers: [7] }),
      path: (p) => [p.spec!.containers[0], p.spec!.initContainers],
    },
    {
      name: "an env entry that is null: the variables appended once",
      given: gpuPod({ containers: [plain({ env: [null] })] }),
      path: (p) => p.spec!.containers[0]!.env![0],
    },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const given = deepFreeze(tc.given);
      const c = tc.ctx ?? pytorch;
      const once = mutatePod(given, c);
      assert.deepEqual(tc.path(once.pod), tc.path(given), "the malformed value is left as it came");
      if (tc.warns)
        assert.ok(
          once.warnings.some((w) => tc.warns!.test(w)),
          `a warning says so: ${once.warnings.join(" | ")}`,
        );
      const twice = mutatePod(deepFreeze(once.pod), c);
      assert.equal(twice.pod, once.pod, "reinvocation changes nothing");
      assert.deepEqual(createPatch(once.pod as object, twice.pod), []);
    });
  }
});

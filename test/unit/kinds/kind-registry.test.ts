/**
 * A job-kind shape is one entry (src/kinds/<shape>.ts plus a line in `KIND_SHAPES`), and the caps, the outfitting,
 * the device ledger's count and the webhook configurations pick a kind of it up through the registry (issue 45:
 * "a test-only kind ... added in one file plus one registry line"). Here a test-only shape, `flat` (framework
 * `example`: `ExampleJob` with `spec.replicas` and one `spec.template`, labelled by its own controller), stands in
 * for the next one. The test adds it the way a test can without changing the built-in list: the policy carries the
 * registry (`Policy.kindShapes`, set by code only; a policy file cannot name a framework the built-in registry
 * lacks, the schema's enum is `frameworkNames()`), and `policy.jobKinds` gets the kind, as a policy file would.
 *
 * What does not take the injected registry (it asks the built-in one, so a built-in shape added to `KIND_SHAPES`
 * reaches it and a test-only one does not): the reconciler's pass (src/reconcile/plan.ts and what it calls for a
 * job: claim.ts, finished.ts, services.ts, job-controller.ts, template-guard.ts), `/mutate/jobs` and the rest of
 * `/validate/jobs` beyond `validateJob` (webhooks/: job defaults, Kueue's templates, the scale subresource, the cost
 * bound), `doctor`, `explain` and `admit`. Each asks `jobShape(kind)` or `labelScheme(kind)` from a function that is
 * given a kind but no policy, so passing the registry there is a parameter through each of those call chains (some
 * ten modules): left for when a second registry is wanted outside tests. Two things are still not in the adapter:
 * the framework's facts (default container and port, the cluster-spec env: `FRAMEWORKS` and `clusterSpec` in
 * src/mutate/frameworks.ts, which answer "none" for a framework that is not built in), and the raw readers of
 * `layout`/`replicaSpecsField` (the cost bound's `jobTemplateSpecs`, the Kueue template outfitter), which know the
 * `map` and `single` layouts only.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { isObject } from "../../../src/core/object.js";
import { frameworkNames, KIND_SHAPES, labelScheme, type KindShape, type LabelScheme } from "../../../src/kinds/index.js";
import { renderWebhookConfigurations, trainingPodExpression } from "../../../src/manifests/webhooks.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { JobKind, Policy } from "../../../src/policy/types.js";
import { buildLedger } from "../../../src/ledger/compute.js";
import { lookupTopology } from "../../../src/membership/lookup.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { node, nodeLease } from "../../fixtures/cluster.js";
import { fakeJobReader } from "../../fixtures/jobs.js";

const JOB_LABEL = "example.com/job-name";
const INDEX_LABEL = "example.com/replica-index";
const nameOf = (job: KubeObject): string => String((job.metadata as { name?: string } | undefined)?.name ?? "");
const specOf = (job: KubeObject): Record<string, unknown> => (isObject(job.spec) ? job.spec : {});

/** The one file of a new shape: its label scheme and its descriptor. */
const EXAMPLE_SCHEME: LabelScheme = {
  name: "example",
  key: { label: JOB_LABEL, value: nameOf },
  selector: (job) => ({ [JOB_LABEL]: nameOf(job) }),
  replicaTypeLabel: "example.com/replica-type",
  replicaIndexLabel: INDEX_LABEL,
  services: false,
  podLabels: [JOB_LABEL],
  claimed: true,
};
const FLAT: KindShape = {
  defaultController: "operator",
  frameworks: { example: { replicaSpecsField: "template", labelScheme: EXAMPLE_SCHEME } },
  shape: {
    name: "flat",
    layout: "single",
    specsField: () => "spec.template",
    specsHint: "spec.template",
    replicas: (job) => {
      const spec = specOf(job);
      if (!isObject(spec.template)) return [];
      return [
        {
          type: "Worker",
          spec: { replicas: spec.replicas, template: spec.template },
          path: "spec",
          replicasField: "spec.replicas",
          templateField: "spec.template",
        },
      ];
    },
    kubeflowPodLabels: false,
    scaleSubresource: true,
    fixedReplicaType: "Worker",
    objectName: (_ns, job, _type, index) => `${job}-${index}`,
    nameHints: { shorten: "shorten the job name", service: () => "" },
    namedContainer: false,
    restartPolicyFromTemplate: true,
    v1Shape: false,
    runPolicy: () => ({ fields: {}, at: () => undefined }),
    finishedConditions: ["Complete", "Failed"],
    completionTime: () => undefined,
    managedElsewhere: () => undefined,
    jobGpusField: () => "spec.replicas",
    singleReplicaStatus: true,
  },
};
/** The one registry line. */
const kindShapes: readonly KindShape[] = [...KIND_SHAPES, FLAT];

const EXAMPLE_JOB: JobKind = { kind: "ExampleJob", group: "example.com", version: "v1", plural: "examplejobs", framework: "example" };
const builtIn = checkPolicy({ limits: { job: { gpus: 8 } } }, "kinds");
const policy: Policy = { ...builtIn, jobKinds: [...builtIn.jobKinds, EXAMPLE_JOB], kindShapes };

const GPU = "nvidia.com/gpu";
function exampleJob(replicas: number, gpus: number): KubeObject {
  const resources = { limits: { [GPU]: String(gpus) }, requests: { [GPU]: String(gpus) } };
  return {
    apiVersion: "example.com/v1",
    kind: "ExampleJob",
    metadata: { name: "train", namespace: "team-a", uid: "uid-train" },
    spec: { replicas, template: { spec: { containers: [{ name: "main", image: "img", resources }] } } },
  };
}
/** A pod of the job as its controller makes it: its scheme's labels, the job as controller (unless `owned` is false). */
function examplePod(index: number, gpus: number, owned = true): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `train-${index}`,
      namespace: "team-a",
      uid: `uid-train-${index}`,
      labels: { [JOB_LABEL]: "train", [INDEX_LABEL]: String(index) },
      ...(owned ? { ownerReferences: [{ apiVersion: "example.com/v1", kind: "ExampleJob", name: "train", uid: "uid-train", controller: true }] } : {}),
    },
    spec: { nodeName: "a", containers: [{ name: "main", image: "img", resources: { limits: { [GPU]: String(gpus) } } }] },
    status: { phase: "Running" },
  };
}

describe("a job-kind shape added as one entry", () => {
  it("the built-in registry is the schema's frameworks: a policy file cannot name the test-only one", () => {
    assert.deepEqual(frameworkNames(), ["tensorflow", "pytorch", "mxnet", "xgboost", "paddle", "jax", "caffe2", "trainer"]);
    assert.deepEqual(frameworkNames(kindShapes).at(-1), "example");
    assert.throws(() => checkPolicy({ jobKinds: [EXAMPLE_JOB] }, "file"), /jobKinds\[0\]\.framework/);
    assert.throws(() => labelScheme(EXAMPLE_JOB), /no job-kind shape serves framework "example"/);
    assert.equal(labelScheme(EXAMPLE_JOB, kindShapes), EXAMPLE_SCHEME);
  });

  it("caps: 3 replicas × 4 GPUs is over an 8-GPU job cap, at the shape's field", () => {
    const ctx = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };
    const found = validateJob(exampleJob(3, 4), EXAMPLE_JOB, ctx);
    assert.deepEqual(
      found.violations.map((v) => [v.rule, v.field, v.value]),
      [["job-gpus", "spec.replicas", 12]],
    );
    assert.deepEqual(validateJob(exampleJob(2, 4), EXAMPLE_JOB, ctx).violations, []);
    // The same policy without the registry line does not know the kind.
    const withoutLine = { ...ctx, policy: { ...policy, kindShapes: undefined } };
    assert.throws(() => validateJob(exampleJob(3, 4), EXAMPLE_JOB, withoutLine), /no job-kind shape serves framework "example"/);
  });

  it("outfitting: its pod's replica is read by its label scheme, and it gets GPU tolerations but no Kubeflow labels", async () => {
    const pod = examplePod(2, 4);
    const found = await lookupTopology(pod, "team-a", policy, fakeJobReader([exampleJob(3, 4)]));
    assert.equal(found.kind, "found");
    const topology = found.kind === "found" ? found.topology : undefined;
    assert.deepEqual([topology?.kind.kind, topology?.replicaType, topology?.index], ["ExampleJob", "Worker", 2]);
    const out = mutatePod(pod, { policy, namespace: "team-a", ...(topology ? { topology } : {}) });
    assert.ok(out.applied.includes("gpu-tolerations"), out.applied.join(","));
    assert.ok(!out.applied.includes("training-labels") && !out.applied.includes("cluster-spec"), out.applied.join(","));
    assert.deepEqual(
      (out.pod.spec?.tolerations ?? []).map((t) => t.key),
      [GPU],
    );
    assert.deepEqual(Object.keys(out.pod.metadata?.labels ?? {}).sort(), [JOB_LABEL, INDEX_LABEL]);
    // Beyond its scheme's bounds the replica is refused, as for any kind.
    const beyond = await lookupTopology(examplePod(3, 4), "team-a", policy, fakeJobReader([exampleJob(3, 4)]));
    assert.deepEqual(beyond, { kind: "failed", reason: "ExampleJob train: replica index 3 is beyond the 3 Worker replicas" });
  });

  it("ledger: a pod its key label names is counted to the job, with or without the job as controller", () => {
    const input = {
      nodes: [node("a", { [GPU]: "8" })],
      nodeLeases: [nodeLease("a", new Date("2026-11-22T11:59:55Z"))],
      pods: [examplePod(0, 4, false), examplePod(1, 2)] as unknown as KubeObject[],
      jobs: new Set(["team-a/train"]),
    };
    const now = new Date("2026-11-22T12:00:00Z");
    assert.deepEqual(buildLedger(input, now, policy).jobs["team-a/train"]?.[GPU]?.allocated, 6);
    // Without the registry line only the pod the job controls is the job's (an ExampleJob is still a policy kind):
    // the label names no job to the built-in schemes.
    assert.deepEqual(buildLedger(input, now, { ...policy, kindShapes: undefined }).jobs["team-a/train"]?.[GPU]?.allocated, 2);
  });

  it("manifests: the job webhooks' rules name its resource (and /scale), the pod webhooks' condition its label", () => {
    const [mutating, validating] = renderWebhookConfigurations(policy, { namespace: "quartermaster" });
    const rulesOf = (c: typeof mutating, name: string) => c.webhooks.find((w) => w.name === name)?.rules ?? [];
    const example = (rules: ReturnType<typeof rulesOf>) => rules.filter((r) => r.apiGroups.includes("example.com")).flatMap((r) => r.resources);
    assert.deepEqual(example(rulesOf(mutating, "jobs.mutate.quartermaster.dev")), ["examplejobs"]);
    assert.deepEqual(example(rulesOf(validating, "jobs.validate.quartermaster.dev")), ["examplejobs", "examplejobs/scale"]);
    const condition = `'${JOB_LABEL}' in object.metadata.?labels.orValue({})`;
    assert.ok(trainingPodExpression(policy).includes(condition));
    assert.ok(!trainingPodExpression(builtIn).includes(condition));
    const pods = mutating.webhooks.find((w) => w.name === "pods.mutate.quartermaster.dev");
    assert.ok(pods?.matchConditions?.some((c) => c.expression.includes(condition)));
  });
});

/**
 * A GPU vendor is one entry (src/vendors/<vendor>.ts plus a line in `VENDORS`), and everything that counts or
 * outfits GPUs picks it up through the policy made from the entries: the caps, the outfitting (tolerations), the
 * device ledger's count, the webhooks' match conditions, and the GPU-looking names. Here a test-only vendor
 * stands in for the next one (issue 45: "a test-only vendor added in one file plus one registry line").
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import { effectivePodGpus } from "../../../src/core/gpu.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { trainingPodExpression } from "../../../src/manifests/webhooks.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { defaultDeviceClasses, defaultGpuResources, looksLikeGpu, VENDORS, type GpuVendor } from "../../../src/vendors/index.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { container, ctx as mutationCtx, testPod } from "../../fixtures/pods.js";

/** The one file of a new vendor. */
const EXAMPLE_TPU: GpuVendor = {
  name: "Example",
  domain: "accel.example.com",
  resources: [{ pattern: "accel.example.com/chip" }, { pattern: "accel.example.com/slice-*", partitionOf: "accel.example.com/chip" }],
  deviceClasses: [{ name: "chip.accel.example.com", resourceName: "accel.example.com/chip" }],
  draAttributes: { product: "model" },
  productNodeLabel: "accel.example.com/model",
};
/** The one registry line. */
const vendors: readonly GpuVendor[] = [...VENDORS, EXAMPLE_TPU];

const policy = checkPolicy(
  { gpu: { resources: defaultGpuResources(vendors), deviceClasses: defaultDeviceClasses(vendors) }, limits: { job: { gpus: 4 } } },
  "vendors",
);
const chips = (n: string): Record<string, string> => ({ "accel.example.com/chip": n });

describe("a vendor added as one entry", () => {
  it("the built-in vendors are the policy's defaults", () => {
    const builtIn = checkPolicy({}, "built-in");
    assert.deepEqual(builtIn.gpu.resources, defaultGpuResources());
    assert.deepEqual(builtIn.gpu.deviceClasses, defaultDeviceClasses());
  });

  it("caps: a job of 2 × 4 chips is over a 4-GPU job cap", () => {
    const j = structuredClone(job("PyTorchJob", "chips", "team-a", { Master: 1, Worker: 1 })) as KubeObject;
    const specs = (j.spec as { pytorchReplicaSpecs: Record<string, { template: { spec: V1PodSpec } }> }).pytorchReplicaSpecs;
    for (const r of Object.values(specs)) r.template.spec.containers[0]!.resources = { limits: chips("4"), requests: chips("4") };
    const found = validateJob(j, kindOf("PyTorchJob"), { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") });
    assert.deepEqual(
      found.violations.filter((v) => v.rule === "job-gpus").map((v) => v.value),
      [8],
    );
  });

  it("outfitting: its pods tolerate its taint, and a partition the whole chip's", () => {
    const pod = testPod({ spec: { containers: [container({ limits: { "accel.example.com/slice-2c": "1" } })] } });
    const out = mutatePod(pod, mutationCtx({ gpu: { resources: defaultGpuResources(vendors), deviceClasses: defaultDeviceClasses(vendors) } }));
    assert.deepEqual((out.pod.spec?.tolerations ?? []).map((t) => t.key).sort(), ["accel.example.com/chip", "accel.example.com/slice-2c"]);
  });

  it("ledger: its requests are counted", () => {
    const spec = testPod({ spec: { containers: [container({ limits: chips("3") })] } }).spec!;
    assert.deepEqual([...effectivePodGpus(spec, policy.gpu)], [["accel.example.com/chip", 3]]);
  });

  it("manifests: the webhooks' match condition sends its pods", () => {
    const text = trainingPodExpression(policy);
    assert.ok(text.includes("r == 'accel.example.com/chip'") && text.includes("r.startsWith('accel.example.com/slice-')"), text);
  });

  it("its DeviceClass looks like a GPU (a policy that leaves it out refuses it under a cap)", () => {
    assert.equal(looksLikeGpu("chip.accel.example.com"), false);
    assert.equal(looksLikeGpu("chip.accel.example.com", vendors), true);
  });
});

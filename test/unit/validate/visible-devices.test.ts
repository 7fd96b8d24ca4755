// A container that sets a vendor's visible-devices variable (`NVIDIA_VISIBLE_DEVICES=all`) gets GPUs from the node's
// container runtime whatever its resources say (red team: admitted as 0 GPUs under a cap). Under a GPU cap it is
// refused (gpu-unknown) at the env entry, pods and job templates alike; values that expose no device pass, and with no
// GPU cap nothing is refused.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";

const NS = "team-a";
const ctxOf = (limits: Record<string, unknown>) => {
  const policy = checkPolicy({ limits }, "visible-devices");
  return { policy, namespace: NS, limits: effectiveLimits(policy, NS) };
};
const CAPPED = { pod: { gpus: 8 } };

const container = (env: unknown[], gpus?: number): V1Container =>
  ({ name: "c", image: "x", env, ...(gpus ? { resources: { limits: { "nvidia.com/gpu": String(gpus) } } } : {}) }) as V1Container;
const pod = (c: V1Container, init = false): V1Pod => ({
  metadata: { name: "p", namespace: NS },
  spec: init ? { initContainers: [c], containers: [container([])] } : { containers: [c] },
});

describe("a vendor's visible-devices variable in a pod spec: GPUs no cap counts (gpu-unknown)", () => {
  const cases: Array<{ name: string; pod: V1Pod; limits?: Record<string, unknown>; field?: string; message?: RegExp }> = [
    {
      name: "NVIDIA_VISIBLE_DEVICES=all, no GPU asked: refused at the env entry",
      pod: pod(
        container([
          { name: "A", value: "1" },
          { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
        ]),
      ),
      field: "spec.containers[0].env[1]",
      message: /NVIDIA_VISIBLE_DEVICES=all asks NVIDIA's container runtime for GPUs outside the container's resources.*ask for nvidia\.com\/gpu/,
    },
    {
      name: "NVIDIA_VISIBLE_DEVICES=0,1: refused",
      pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "0,1" }])),
      field: "spec.containers[0].env[0]",
    },
    {
      name: "NVIDIA_VISIBLE_DEVICES=all beside a 1-GPU request (it overrides the device plugin's): refused",
      pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }], 1)),
      field: "spec.containers[0].env[0]",
    },
    {
      name: "from a ConfigMap (valueFrom): not readable here, refused",
      pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", valueFrom: { configMapKeyRef: { name: "gpus", key: "visible" } } }])),
      field: "spec.containers[0].env[0]",
      message: /NVIDIA_VISIBLE_DEVICES from valueFrom \(not readable here\)/,
    },
    {
      name: "in an init container: refused there",
      pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }]), true),
      field: "spec.initContainers[0].env[0]",
    },
    {
      name: "AMD_VISIBLE_DEVICES=all: refused, naming amd.com/gpu",
      pod: pod(container([{ name: "AMD_VISIBLE_DEVICES", value: "all" }])),
      field: "spec.containers[0].env[0]",
      message: /AMD's container runtime.*ask for amd\.com\/gpu/,
    },
    { name: "NVIDIA_VISIBLE_DEVICES=void: exposes none, admitted", pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "void" }])) },
    { name: "NVIDIA_VISIBLE_DEVICES=none: exposes none, admitted", pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "none" }])) },
    { name: "NVIDIA_VISIBLE_DEVICES empty: exposes none, admitted", pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "" }])) },
    { name: "another variable's name (lower case): not the runtime's, admitted", pod: pod(container([{ name: "nvidia_visible_devices", value: "all" }])) },
    { name: "no GPU cap: admitted", pod: pod(container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }])), limits: {} },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const found = validatePod(tc.pod, ctxOf(tc.limits ?? CAPPED)).violations;
      if (!tc.field) return assert.deepEqual(found, []);
      assert.equal(found.length, 1, JSON.stringify(found));
      assert.equal(found[0]!.rule, "gpu-unknown");
      assert.equal(found[0]!.field, tc.field);
      if (tc.message) assert.match(found[0]!.message, tc.message);
    });

  it("a job's template: refused at the template's env entry", () => {
    const job: KubeObject = {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name: "tf", namespace: NS },
      spec: {
        tfReplicaSpecs: {
          Worker: {
            replicas: 2,
            template: { spec: { containers: [{ ...container([{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }]), name: "tensorflow" }] } },
          },
        },
      },
    };
    const kind = { kind: "TFJob", group: "kubeflow.org", version: "v1", plural: "tfjobs", framework: "tensorflow" as const };
    const found = validateJob(job, kind, ctxOf(CAPPED)).violations.filter((v) => v.rule === "gpu-unknown");
    assert.deepEqual(
      found.map((v) => v.field),
      ["spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0]"],
    );
  });
});

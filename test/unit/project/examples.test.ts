/**
 * The files in examples/ that README.md, docs/deploy.md and docs/operations.md use do what those documents say: the GPU pod is
 * outfitted (warnings, the mutations annotation) and allowed; the PyTorchJob passes /validate/jobs and its
 * replica pods get PyTorch's distributed environment; the install overlay's policy is valid. (That the install
 * overlay renders with the image replaced is checked with kubectl in test/e2e/manifests-render.test.ts.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import type { KubeObject } from "../../../src/core/kube.js";
import { loadPolicy } from "../../../src/cli/policy-file.js";
import { applyPatch } from "../../../src/admission/patch.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { corpusPods } from "../../fixtures/corpus.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { capturingLogger } from "../../fixtures/https.js";
import { ROOT } from "../../fixtures/manifests.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

const example = (file: string): KubeObject => parse(readFileSync(join(ROOT, "examples", file), "utf8")) as KubeObject;
const NS = "team-a";

describe("examples/", () => {
  const job = { ...example("pytorchjob.yaml"), metadata: { name: "mnist-ddp", namespace: NS, uid: "uid-mnist-ddp" } };
  const webhooks = createWebhooks({
    policy: defaultPolicy(),
    log: capturingLogger().log,
    jobs: fakeJobReader([job]),
    now: () => new Date("2026-11-25T00:00:00Z"),
  });

  async function outfit(object: KubeObject): Promise<{ mutated: KubeObject; warnings: string[] }> {
    const first = await webhooks["/mutate/pods"]!.admit(review({ object: deepFreeze(object), namespace: NS }));
    const ops = first.review.response?.patch ? JSON.parse(Buffer.from(first.review.response.patch, "base64").toString()) : [];
    const mutated = applyPatch(object, ops) as KubeObject;
    const allowed = await webhooks["/validate/pods"]!.admit(review({ object: deepFreeze(mutated), namespace: NS }));
    assert.equal(allowed.review.response?.allowed, true, JSON.stringify(allowed.review.response?.status));
    return { mutated, warnings: first.review.response?.warnings ?? [] };
  }

  it("gpu-pod.yaml: warnings `quartermaster: …` and the mutations annotation; allowed", async () => {
    const { mutated, warnings } = await outfit({ ...example("gpu-pod.yaml"), metadata: { name: "gpu-smoke", namespace: NS } });
    assert.ok(warnings.length > 0 && warnings.every((w) => w.startsWith("quartermaster: ")), JSON.stringify(warnings));
    const record = (mutated.metadata as { annotations?: Record<string, string> }).annotations?.["quartermaster.dev/mutations"] ?? "";
    assert.match(record, /gpu-tolerations/);
  });

  it("pytorchjob.yaml: allowed by /validate/jobs", async () => {
    const r = await webhooks["/validate/jobs"]!.admit(
      review({
        object: deepFreeze(job),
        namespace: NS,
        kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
        resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
      }),
    );
    assert.equal(r.review.response?.allowed, true, JSON.stringify(r.review.response?.status));
  });

  it("pytorchjob.yaml: every replica pod gets MASTER_ADDR, WORLD_SIZE and its RANK", async () => {
    const pods = corpusPods([{ file: "pytorchjob.yaml", object: job }]);
    assert.equal(pods.length, 3);
    const ranks: string[] = [];
    for (const { pod } of pods) {
      const { mutated } = await outfit(pod);
      const env = Object.fromEntries(
        ((mutated.spec as { containers: Array<{ env?: Array<{ name: string; value?: string }> }> }).containers[0]!.env ?? []).map((e) => [e.name, e.value]),
      );
      assert.equal(env.MASTER_ADDR, "mnist-ddp-master-0");
      assert.equal(env.WORLD_SIZE, "3");
      ranks.push(env.RANK!);
    }
    assert.deepEqual(ranks.sort(), ["0", "1", "2"]);
  });

  it("install/policy.yaml is a valid policy", async () => {
    await loadPolicy(join(ROOT, "examples/install/policy.yaml"), ROOT);
  });
});

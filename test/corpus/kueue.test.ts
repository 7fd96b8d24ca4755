/**
 * Issue 33 over the corpus (test/fixtures/corpus): every Kubeflow v1 training job, given the label `kueue.x-k8s.io/queue-name`,
 * through `/mutate/jobs` at CREATE: the patch applies, mutating the result again gives no patch, and every pod
 * the training operator would make from the result gets no further change to its resources, affinity,
 * nodeSelector or tolerations from `/mutate/pods`. Then Kueue's admission of it (suspend true → false, a flavor's
 * node labels and toleration merged into each template, as kueue `pkg/podset/podset.go` Merge does) is told
 * apart by `kueueAdmissionOnly` and not refused by `/validate/jobs`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import { KUEUE_QUEUE_NAME, kueueAdmissionOnly } from "../../src/kueue/admission.js";
import { applyPatch } from "../../src/admission/patch.js";
import type { KubeObject } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import { jobShape } from "../../src/kinds/index.js";
import { createWebhooks } from "../../webhooks/index.js";
import { CORPUS_SKIP, corpusJobs, corpusObjects, corpusPods } from "../fixtures/corpus.js";
import { capturingLogger } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { ALL_MUTATIONS } from "../fixtures/policies.js";
import { deepFreeze, review } from "../fixtures/reviews.js";

const policy = checkPolicy(ALL_MUTATIONS, "corpus kueue");
const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date("2026-11-29T00:00:00Z") });
type Obj = Record<string, unknown>;
const clone = <T>(o: T): T => JSON.parse(JSON.stringify(o)) as T;
const patchOf = (r: { review: { response?: { patch?: string } } }): Parameters<typeof applyPatch>[1] =>
  r.review.response?.patch ? JSON.parse(Buffer.from(r.review.response.patch, "base64").toString()) : [];

const FLAVOR = {
  nodeLabels: { "example.com/pool": "gpu-a" },
  toleration: { key: "example.com/pool", operator: "Equal", value: "gpu-a", effect: "NoSchedule" },
};

/** The job as Kueue's webhook leaves it at CREATE: queued and suspended. */
function queuedJob(job: KubeObject): KubeObject {
  const j = clone(job) as Obj & { metadata: Obj; spec: Obj };
  j.metadata.labels = { ...(j.metadata.labels as Obj | undefined), [KUEUE_QUEUE_NAME]: "corpus-queue" };
  j.spec.runPolicy = { ...(j.spec.runPolicy as Obj | undefined), suspend: true };
  return deepFreeze(j);
}

const jobs = corpusJobs(corpusObjects()).filter(({ kind }) => jobShape(kind).layout === "map");

describe("corpus jobs queued in Kueue", { skip: CORPUS_SKIP }, () => {
  it("has the jobs it should", () => assert.ok(jobs.length >= 10, `only ${jobs.length} jobs`));

  for (const { file, job: raw, kind } of jobs) {
    const name = `${file.split("/").pop()}#${kind.kind}/${String((raw.metadata as Obj).name)}`;
    it(`${name}: outfitted at the job, idempotent, its pods unchanged further, Kueue's admission not refused`, async () => {
      const job = queuedJob(raw);
      const namespace = String((job.metadata as Obj).namespace);
      const jobReview = (object: KubeObject, operation: "CREATE" | "UPDATE", oldObject: KubeObject | null = null) =>
        review({
          kind: { group: kind.group, version: kind.version, kind: kind.kind },
          resource: { group: kind.group, version: kind.version, resource: kind.plural },
          operation,
          namespace,
          name: String((object.metadata as Obj).name),
          object,
          oldObject,
        });
      const res = await hooks["/mutate/jobs"]!.admit(jobReview(job, "CREATE"));
      assert.notEqual(res.outcome, "error", String(res.error));
      const mutated = deepFreeze(applyPatch(job, patchOf(res)) as KubeObject);
      const again = await hooks["/mutate/jobs"]!.admit(jobReview(mutated, "CREATE"));
      assert.equal(again.review.response?.patch, undefined, "mutating the result again changes nothing");

      const withJob = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader([mutated]), now: () => new Date() });
      for (const { source, pod } of corpusPods([{ file, object: mutated }])) {
        const out = await withJob["/mutate/pods"]!.admit(
          review({
            kind: { group: "", version: "v1", kind: "Pod" },
            resource: { group: "", version: "v1", resource: "pods" },
            operation: "CREATE",
            namespace,
            object: deepFreeze(pod),
            oldObject: null,
          }),
        );
        assert.notEqual(out.outcome, "error", String(out.error));
        const before = pod.spec as V1PodSpec;
        const after = (applyPatch(pod, patchOf(out)) as { spec: V1PodSpec }).spec;
        for (const list of ["containers", "initContainers"] as const)
          (before[list] ?? []).forEach((c, i) => assert.deepEqual(after[list]?.[i]?.resources, c.resources, `${source}: ${list}[${i}].resources`));
        for (const f of ["affinity", "nodeSelector", "tolerations"] as const) assert.deepEqual(after[f], before[f], `${source}: ${f}`);
      }

      // Kueue's admission: suspend false, the flavor merged into every template.
      const admitted = clone(mutated) as Obj & { spec: Obj & { runPolicy: Obj } };
      admitted.spec.runPolicy.suspend = false;
      for (const r of jobShape(kind).replicas(admitted, kind)) {
        const spec = r.spec.template?.spec;
        if (!spec) continue;
        spec.nodeSelector = { ...spec.nodeSelector, ...FLAVOR.nodeLabels };
        spec.tolerations = [...(spec.tolerations ?? []), FLAVOR.toleration];
      }
      const frozen = deepFreeze(admitted);
      assert.ok(kueueAdmissionOnly(mutated, frozen, kind), "told apart as Kueue's admission");
      const validated = await hooks["/validate/jobs"]!.admit(jobReview(frozen, "UPDATE", mutated));
      assert.notEqual(validated.outcome, "denied", JSON.stringify(validated.review.response?.status?.message));
    });
  }
});

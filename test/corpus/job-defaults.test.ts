/**
 * Every training job of the corpus (test/fixtures/corpus) through `/mutate/jobs` with every default configured: the patch
 * applies, fills exactly the runPolicy fields the manifest leaves unset (what it sets is kept), the warnings
 * name each (a job queued in Kueue also gets its templates outfitted, `kueue.test.ts`), mutating the result again gives no patch, `/validate/jobs` admits the result, an UPDATE is
 * never patched, and Caffe2Job is left alone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { queueNameOf } from "../../src/kueue/admission.js";
import { applyPatch } from "../../src/admission/patch.js";
import type { KubeObject } from "../../src/core/kube.js";
import { JOB_DEFAULT_FIELDS } from "../../src/mutate/job-defaults.js";
import { checkPolicy } from "../../src/policy/load.js";
import { replicaSpecsField } from "../../src/kinds/index.js";
import { createWebhooks } from "../../webhooks/index.js";
import { CORPUS_SKIP, corpusObjects } from "../fixtures/corpus.js";
import { capturingLogger } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { deepFreeze, review } from "../fixtures/reviews.js";

const defaults = { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", activeDeadlineSeconds: 604800, backoffLimit: 3 } as const;
const policy = checkPolicy({ jobDefaults: defaults }, "corpus job defaults");
const webhooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date("2026-11-22T00:00:00Z") });
const mutate = webhooks["/mutate/jobs"]!;
const validate = webhooks["/validate/jobs"]!;

const kindOf = (object: KubeObject) => policy.jobKinds.find((k) => k.group === String(object.apiVersion).split("/")[0] && k.kind === object.kind);
const jobs = corpusObjects().filter(({ object }) => kindOf(object) !== undefined);

function jobReview(object: KubeObject, operation: "CREATE" | "UPDATE") {
  const kind = kindOf(object)!;
  const [group, version] = String(object.apiVersion).split("/");
  return review({
    kind: { group: group!, version: version!, kind: kind.kind },
    resource: { group: group!, version: version!, resource: kind.plural },
    operation,
    namespace: String((object.metadata as { namespace?: string } | undefined)?.namespace ?? "default"),
    object: deepFreeze(structuredClone(object)),
    oldObject: operation === "UPDATE" ? object : null,
  });
}

const patchOf = (r: { review: { response?: { patch?: string } } }) =>
  r.review.response?.patch ? JSON.parse(Buffer.from(r.review.response.patch, "base64").toString()) : [];

describe("corpus jobs through /mutate/jobs", { skip: CORPUS_SKIP }, () => {
  it("has the jobs it should, Caffe2Job among them", () => {
    assert.ok(jobs.length >= 15, `only ${jobs.length} jobs`);
    assert.ok(
      jobs.some(({ object }) => object.kind === "Caffe2Job"),
      "a Caffe2Job",
    );
  });

  for (const { file, object } of jobs) {
    const name = String((object.metadata as { name?: string } | undefined)?.name);
    it(`${file}#${String(object.kind)}/${name}: unset fields filled and named, set ones kept, idempotent, admitted`, async () => {
      const res = await mutate.admit(jobReview(object, "CREATE"));
      assert.notEqual(res.outcome, "error", String(res.error));
      const mutated = applyPatch(object, patchOf(res)) as KubeObject;
      const before = ((object.spec as { runPolicy?: Record<string, unknown> }).runPolicy ?? {}) as Record<string, unknown>;
      const after = (mutated.spec as { runPolicy?: Record<string, unknown> }).runPolicy;
      if (object.kind === "Caffe2Job") {
        assert.equal(res.review.response?.patch, undefined, "Caffe2Job has no runPolicy: unchanged");
        assert.equal(after, undefined);
      } else {
        const want = JOB_DEFAULT_FIELDS.filter((f) => before[f] == null);
        assert.deepEqual(after, { ...before, ...Object.fromEntries(want.map((f) => [f, defaults[f]])) });
        // A job queued in Kueue also has its templates outfitted (test/corpus/kueue.test.ts): those warnings name
        // its templates and come after the defaults'.
        const queued = queueNameOf(object) !== undefined;
        const warnings = res.review.response?.warnings ?? [];
        assert.deepEqual(
          queued ? warnings.filter((w) => !w.includes("(queued job: ")) : warnings,
          want.map((f) => `quartermaster: set spec.runPolicy.${f}=${defaults[f]} (platform default)`),
        );
        // Nothing but spec.runPolicy changed (and a queued job's replica templates).
        const field = replicaSpecsField(kindOf(object)!);
        const rest = (j: KubeObject) => ({ ...j, spec: { ...(j.spec as object), runPolicy: null, ...(queued ? { [field]: null } : {}) } });
        assert.deepEqual(rest(mutated), rest(object));
      }
      const again = await mutate.admit(jobReview(mutated, "CREATE"));
      assert.equal(again.review.response?.patch, undefined, "re-mutating the result yields no patch");
      const v = await validate.admit(jobReview(mutated, "CREATE"));
      assert.equal(v.review.response?.allowed, true, JSON.stringify(v.review.response?.status));
      const update = await mutate.admit(jobReview(object, "UPDATE"));
      assert.equal(update.outcome, "skipped");
      assert.equal(update.review.response?.patch, undefined, "an UPDATE is never defaulted");
    });
  }
});

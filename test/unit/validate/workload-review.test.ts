/**
 * The decisions of `/validate/jobs` on batch Jobs and JobSets as pure functions (src/validate/workload-review.ts,
 * moved out of webhooks/validate-workloads.ts, issue 50): called with a review and the reads, no webhook, no
 * reader. test/unit/validate/validate-workloads.test.ts drives the same decisions through the webhook.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { QUEUED_WORKLOAD_KINDS } from "../../../src/core/job-shapes.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { KUEUE_QUEUE_NAME } from "../../../src/kueue/admission.js";
import { checkPolicy } from "../../../src/policy/load.js";
import {
  decideWorkloadReview,
  demandUnchanged,
  workloadReviewCost,
  workloadReviewTemplates,
  type ReviewedWorkload,
} from "../../../src/validate/workload-review.js";

const JOB = QUEUED_WORKLOAD_KINDS.find((k) => k.kind === "Job")!;
const policy = checkPolicy({ limits: { job: { gpus: 8 } } }, "workload-review");
const NO_CLAIMS = { claims: { claims: new Map(), templates: new Map() } };

/** A batch Job of `parallelism` pods of `gpus` GPUs each. */
function job(o: { parallelism: number; gpus: number; suspend?: boolean; labels?: Record<string, string>; nodeSelector?: Record<string, string> }): KubeObject {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: "train", namespace: "team-a", ...(o.labels ? { labels: o.labels } : {}) },
    spec: {
      parallelism: o.parallelism,
      completions: o.parallelism,
      ...(o.suspend !== undefined ? { suspend: o.suspend } : {}),
      template: {
        spec: {
          restartPolicy: "Never",
          ...(o.nodeSelector ? { nodeSelector: o.nodeSelector } : {}),
          containers: [{ name: "main", image: "img", resources: { limits: { "nvidia.com/gpu": String(o.gpus) } } }],
        },
      },
    },
  };
}

const create = (object: KubeObject): ReviewedWorkload => ({ operation: "CREATE", object, namespace: "team-a" });
const update = (oldObject: KubeObject, object: KubeObject): ReviewedWorkload => ({ operation: "UPDATE", object, oldObject, namespace: "team-a" });
const rules = (r: ReviewedWorkload) => decideWorkloadReview(r, JOB, policy, NO_CLAIMS).result.violations.map((v) => `${v.rule} at ${v.field}`);

const OVER = job({ parallelism: 4, gpus: 4 }); // 16 GPUs at once, over the cap of 8
const QUEUE = { [KUEUE_QUEUE_NAME]: "team-a" };

describe("batch workload reviews, decided without the webhook", () => {
  const cases: Array<{ name: string; review: ReviewedWorkload; unchanged: boolean; refused: string[]; admission?: boolean }> = [
    { name: "CREATE over the job cap", review: create(OVER), unchanged: false, refused: ["job-gpus at spec.parallelism"] },
    { name: "CREATE within the cap", review: create(job({ parallelism: 2, gpus: 4 })), unchanged: false, refused: [] },
    {
      name: "UPDATE that only labels an over-cap Job: not checked",
      review: update(OVER, { ...OVER, metadata: { ...(OVER.metadata as object), labels: { team: "a" } } }),
      unchanged: true,
      refused: [],
    },
    {
      name: "UPDATE that keeps an over-cap Job as bad: not worse",
      review: update(OVER, job({ parallelism: 4, gpus: 3 })),
      unchanged: false,
      refused: [],
    },
    {
      name: "UPDATE that makes a Job over the cap: worse",
      review: update(job({ parallelism: 2, gpus: 4 }), OVER),
      unchanged: false,
      refused: ["job-gpus at spec.parallelism"],
    },
    {
      name: "unsuspend of an over-cap Job: judged as a CREATE",
      review: update(job({ parallelism: 4, gpus: 4, suspend: true }), job({ parallelism: 4, gpus: 4, suspend: false })),
      unchanged: false,
      refused: ["job-gpus at spec.parallelism"],
    },
    {
      name: "Kueue's admission of a queued over-cap Job: its other violations only warned",
      review: update(
        job({ parallelism: 4, gpus: 4, suspend: true, labels: QUEUE }),
        job({ parallelism: 4, gpus: 4, suspend: false, labels: QUEUE, nodeSelector: { "cloud.google.com/gke-nodepool": "a100" } }),
      ),
      unchanged: false,
      refused: [],
      admission: false,
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      assert.equal(demandUnchanged(c.review, JOB), c.unchanged);
      assert.deepEqual(rules(c.review), c.refused);
      if (c.admission !== undefined) assert.equal(decideWorkloadReview(c.review, JOB, policy, NO_CLAIMS).refusedAdmission, c.admission);
    });

  it("an UPDATE that cannot change the GPUs is priced at nothing; a CREATE at its templates", () => {
    const big = job({ parallelism: 4, gpus: 4 });
    assert.equal(workloadReviewCost(update(big, { ...big, metadata: { ...(big.metadata as object), labels: { a: "b" } } }), JOB, policy).items, 0);
    assert.ok(workloadReviewCost(create(big), JOB, policy).items > 0);
    // An UPDATE that changes them is priced on both objects.
    assert.equal(workloadReviewCost(update(big, job({ parallelism: 2, gpus: 4 })), JOB, policy).items, 2 * workloadReviewCost(create(big), JOB, policy).items);
  });

  it("the templates whose claims are read: the new object's and the old one's, with their fields", () => {
    const t = workloadReviewTemplates(update(OVER, job({ parallelism: 1, gpus: 1 })), JOB);
    assert.equal(t.specs.length, 2);
    assert.deepEqual(t.fields, ["spec.template.spec", "spec.template.spec"]);
  });
});

/**
 * Every real manifest and AdmissionReview of the corpus (test/fixtures/corpus) through the webhooks: the guarantees
 * that hold for any input (patch applies, re-mutation is a no-op, default policy admits real jobs).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Pod as PodModel } from "kubernetes-models/v1/Pod";
import { applyPatch } from "../../src/admission/patch.js";
import type { KubeObject } from "../../src/core/kube.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { CORPUS_SKIP, corpusJobs, corpusObjects, corpusPods, corpusReviews } from "../fixtures/corpus.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { call, capturingLogger, startTestServer, type TestServer } from "../fixtures/https.js";
import { deepFreeze, review } from "../fixtures/reviews.js";

const policy = defaultPolicy();
const reader = fakeJobReader(corpusJobs().map((j) => j.job));
const webhooks = createWebhooks({ policy, log: capturingLogger().log, jobs: reader, now: () => new Date("2026-11-22T00:00:00Z") });
const mutate = webhooks["/mutate/pods"]!;
const validatePods = webhooks["/validate/pods"]!;
const validateJobs = webhooks["/validate/jobs"]!;

const pods = corpusPods();
const jobKinds = new Set(policy.jobKinds.map((k) => `${k.group}/${k.kind}`));
const jobs = corpusObjects().filter(({ object }) => jobKinds.has(`${String(object.apiVersion).split("/")[0]}/${String(object.kind)}`));

describe("corpus", { skip: CORPUS_SKIP }, () => {
  it("has the pods and jobs it should", () => {
    assert.ok(pods.length >= 70, `only ${pods.length} pods`);
    assert.ok(jobs.length >= 15, `only ${jobs.length} jobs`);
  });

  for (const { source, pod } of pods) {
    it(`pod ${source}: mutation patch applies, re-mutation is a no-op, validation allows`, async () => {
      const object = deepFreeze(structuredClone(pod));
      const ns = ((object.metadata as { namespace?: string }).namespace ?? "default") as string;
      const first = await mutate.admit(review({ object, namespace: ns }));
      assert.notEqual(first.outcome, "error", String(first.error));
      const ops = first.review.response?.patch ? JSON.parse(Buffer.from(first.review.response.patch, "base64").toString()) : [];
      const mutated = applyPatch(object, ops) as KubeObject;
      // The result is still a valid Pod (type-level schema of the Kubernetes API), whatever the input was.
      new PodModel(JSON.parse(JSON.stringify(mutated)) as never).validate();
      const owned = ((object.metadata as { ownerReferences?: unknown[] }).ownerReferences ?? []).length > 0;
      if (owned) {
        // A replica of a Kubeflow job: its job was found, it is labelled, and it has its cluster spec or a reason why not.
        const record = String((mutated.metadata as { annotations?: Record<string, string> }).annotations?.["quartermaster.dev/mutations"] ?? "");
        const warnings = first.review.response?.warnings ?? [];
        assert.ok(!warnings.some((w) => w.includes("not found")), JSON.stringify(warnings));
        assert.ok(
          record.includes("cluster-spec") || warnings.some((w) => w.startsWith("quartermaster: no cluster spec: ")),
          `${record} ${JSON.stringify(warnings)}`,
        );
      }
      const again = await mutate.admit(review({ object: deepFreeze(mutated), namespace: ns }));
      assert.equal(again.review.response?.patch, undefined, "re-mutating the result yields no patch");
      const v = await validatePods.admit(review({ object: deepFreeze(mutated), namespace: ns }));
      assert.equal(v.review.response?.allowed, true, JSON.stringify(v.review.response?.status));
    });
  }

  for (const { file, object } of jobs) {
    const [group, version] = String(object.apiVersion).split("/");
    const kind = String(object.kind);
    it(`job ${file}#${kind}: the default policy admits it on CREATE and UPDATE`, async () => {
      for (const operation of ["CREATE", "UPDATE"] as const) {
        const res = await validateJobs.admit(
          review({
            kind: { group: group!, version: version!, kind },
            resource: { group: group!, version: version!, resource: `${kind.toLowerCase()}s` },
            operation,
            object: deepFreeze(structuredClone(object)),
            oldObject: operation === "UPDATE" ? object : null,
          }),
        );
        assert.notEqual(res.outcome, "skipped", res.skipReason);
        assert.equal(res.review.response?.allowed, true, JSON.stringify(res.review.response?.status));
      }
    });
  }
});

describe("corpus AdmissionReviews over HTTPS", { skip: CORPUS_SKIP }, () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer(webhooks);
  });
  after(() => t.server.close());

  for (const { file, text } of corpusReviews()) {
    it(`${file}: a 400 with a message unless it is a v1 request, which is answered with its uid`, async () => {
      let parsed: Record<string, unknown> | undefined;
      try {
        parsed = JSON.parse(text) as Record<string, unknown>;
      } catch {
        parsed = undefined;
      }
      const ca = t.files.certs.ca.certPem;
      const r = await call(t.port, { path: "/validate/pods", body: text, headers: { "content-type": "application/json" }, ca });
      const isV1Request = parsed?.apiVersion === "admission.k8s.io/v1" && parsed.request !== undefined;
      assert.equal(r.status, isV1Request ? 200 : 400, r.text);
      assert.ok(r.json().message || r.json().response);
      if (parsed && parsed.uid && parsed.operation) {
        // A bare AdmissionRequest (a test fixture of another project): wrapped in the envelope it is admitted.
        const wrapped = JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: parsed });
        for (const path of ["/mutate/pods", "/validate/pods"]) {
          const w = await call(t.port, { path, body: wrapped, headers: { "content-type": "application/json" }, ca });
          assert.equal(w.status, 200, w.text);
          assert.equal(w.json().response.uid, parsed.uid);
        }
      }
    });
  }
});

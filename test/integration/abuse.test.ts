/**
 * Issue 16 through the HTTPS server: a 40,000-container pod is answered (admitted unchanged with a
 * warning, or denied) while a small review sent meanwhile gets its normal answer; `/scale` and
 * `pods/resize` reach the rules. Latency figures are bench/abuse's, not asserted here.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { checkPolicy } from "../../src/policy/load.js";
import { silentLogger } from "../../src/log.js";
import { createWebhooks } from "../../webhooks/index.js";
import { gpuJob, reviewOf, scale, widePod } from "../fixtures/array-work.js";
import { postJson, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { plainPod, review } from "../fixtures/reviews.js";

const policy = checkPolicy({ limits: { container: { cpu: "4", memory: "16Gi" }, job: { gpus: 16, replicas: { Worker: 4 } } } }, "strict");

describe("abuse through the server", () => {
  let t: TestServer;
  let ca: string;
  before(async () => {
    t = await startTestServer(createWebhooks({ policy, log: silentLogger(), jobs: fakeJobReader([gpuJob(2, 2)]), now: () => new Date() }));
    ca = t.files.certs.ca.certPem;
  });
  after(() => t.server.close());

  it("a 40,000-container pod to /mutate/pods and /validate/pods, a small /validate/pods meanwhile: all answered", async () => {
    const huge = reviewOf(widePod({ containers: 40_000 }));
    const [mutated, validated, small] = await Promise.all([
      postJson(t.port, "/mutate/pods", huge, ca),
      postJson(t.port, "/validate/pods", huge, ca),
      postJson(t.port, "/validate/pods", review({ uid: "small-1", object: plainPod() }), ca),
    ]);
    assert.equal(mutated.status, 200);
    assert.equal(mutated.json().response.allowed, true);
    assert.equal(mutated.json().response.patch, undefined);
    assert.match(mutated.json().response.warnings[0], /admitted unchanged: too large to check/);
    assert.equal(validated.json().response.allowed, false);
    assert.equal(validated.json().response.status.details.causes[0].field, "spec");
    assert.deepEqual(small.json().response, { uid: "small-1", allowed: true });
  });

  it("kubectl scale past the Worker cap: denied at spec.replicas", async () => {
    const r = await postJson(
      t.port,
      "/validate/jobs",
      review({
        kind: { group: "autoscaling", version: "v1", kind: "Scale" },
        resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
        subResource: "scale",
        operation: "UPDATE",
        name: "train",
        object: scale(40),
        oldObject: scale(2),
      }),
      ca,
    );
    const response = r.json().response;
    assert.equal(response.allowed, false);
    assert.deepEqual(
      response.status.details.causes.map((c: { field: string }) => c.field),
      ["spec.replicas", "spec.replicas"],
    );
    assert.match(response.status.message, /40 exceeds the limit of 4 Worker replicas.*the job requests 82 GPUs in all, over the per-job limit of 16/);
  });

  it("pods/resize past the cpu limit: denied as on CREATE", async () => {
    const pod = (cpu: string) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "team-a" },
      spec: { containers: [{ name: "m", image: "i", resources: { limits: { cpu } } }] },
    });
    const r = await postJson(
      t.port,
      "/validate/pods",
      review({ subResource: "resize", operation: "UPDATE", name: "p", object: pod("16"), oldObject: pod("2") }),
      ca,
    );
    const response = r.json().response;
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status.details.causes, [
      { reason: "FieldValueForbidden", field: "spec.containers[0].resources.limits[cpu]", message: "16 exceeds the per-container limit of 4" },
    ]);
  });
});

/**
 * Enforcement modes over HTTPS (issue 19): a `warn` violation comes back as an allowed response carrying the
 * warning; an `audit` one is allowed, logged with its rule and field (at warn level, so even a server logging
 * only warnings records it) and counted in quartermaster_policy_violations_total{rule,mode}; `deny` unchanged.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { checkPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { capturingLogger, plain, postJson, startTestServer, type TestServer } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { pod, review } from "../fixtures/reviews.js";

describe("/validate/pods under enforcement modes, over HTTPS", () => {
  let t: TestServer;
  let ca: string;
  const policy = checkPolicy(
    {
      limits: { container: { gpus: { "nvidia.com/gpu": 4 } } },
      enforcement: {
        namespaces: [
          { pattern: "warn-*", mode: "warn" },
          { pattern: "audit-*", rules: { "container-limits": "audit" } },
        ],
      },
    },
    "t",
  );
  before(async () => {
    t = await startTestServer(createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() }));
    ca = t.files.certs.ca.certPem;
  });
  after(() => t.server.close());
  const gpuReview = (uid: string, namespace: string) =>
    review({ uid, namespace, object: pod({ namespace, spec: { containers: [{ name: "c", image: "i", resources: { limits: { "nvidia.com/gpu": "8" } } }] } }) });
  const FIELD = "spec.containers[0].resources.limits[nvidia.com/gpu]";

  it("deny → 403 as before", async () => {
    const res = (await postJson(t.port, "/validate/pods", gpuReview("m-deny", "prod"), ca)).json().response;
    assert.equal(res.allowed, false);
    assert.equal(res.status.code, 403);
    assert.deepEqual(
      res.status.details.causes.map((c: { field: string }) => c.field),
      [FIELD],
    );
  });

  it("warn → allowed, with a warning naming the rule and the field (first: warnings are cut at 120 characters; the log has it all)", async () => {
    const res = (await postJson(t.port, "/validate/pods", gpuReview("m-warn", "warn-1"), ca)).json().response;
    assert.equal(res.allowed, true);
    assert.deepEqual(res.warnings, [`quartermaster: container-limits (warn): ${FIELD}: 8 exceeds the per-containe…`]);
    const line = t.lines.find((l) => l.uid === "m-warn");
    assert.deepEqual(line?.admittedViolations, [
      { rule: "container-limits", mode: "warn", field: FIELD, message: "8 exceeds the per-container limit of 4", value: 8 },
    ]);
  });

  it("audit → allowed without a warning; logged at warn level with rule and field; counted", async () => {
    const res = (await postJson(t.port, "/validate/pods", gpuReview("m-audit", "audit-1"), ca)).json().response;
    assert.deepEqual(res, { uid: "m-audit", allowed: true });
    const line = t.lines.find((l) => l.uid === "m-audit");
    assert.equal(line?.level, 40);
    assert.equal(line?.msg, "admission: policy violations admitted (audit)");
    assert.deepEqual(line?.admittedViolations, [
      { rule: "container-limits", mode: "audit", field: FIELD, message: "8 exceeds the per-container limit of 4", value: 8 },
    ]);
    const metrics = (await plain(t.metricsPort, "/metrics")).text;
    for (const mode of ["deny", "warn", "audit"]) {
      assert.match(metrics, new RegExp(`quartermaster_policy_violations_total\\{webhook="validate-pods",rule="container-limits",mode="${mode}"\\} 1`));
    }
    assert.match(metrics, /quartermaster_admission_denials_total\{webhook="validate-pods",rule="container-limits"\} 1\n/);
  });
});

/**
 * The e2e suites' count of failed webhook calls (test/e2e/harness/webhook-calls.ts, issue 52) reads the apiserver's
 * metrics as kube-apiserver v1.37.2 writes them: a failed call is counted, another webhook's is not.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { failedCalls, webhookCalls } from "../../e2e/harness/webhook-calls.js";

const METRICS = [
  "# HELP apiserver_admission_webhook_request_total [ALPHA] Admission webhook request total",
  'apiserver_admission_webhook_request_total{code="200",name="pods.mutate.quartermaster.dev",operation="CREATE",rejected="false",type="admit"} 41',
  'apiserver_admission_webhook_request_total{code="0",name="pods.validate.quartermaster.dev",operation="CREATE",rejected="true",type="validating"} 1',
  'apiserver_admission_webhook_request_total{code="200",name="pods.validate.quartermaster.dev",operation="CREATE",rejected="false",type="validating"} 40',
  'apiserver_admission_webhook_request_total{code="0",name="validate.kyverno.svc",operation="CREATE",rejected="true",type="validating"} 7',
  'apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="pods.validate.quartermaster.dev",operation="CREATE",rejection_code="0",type="validating"} 1',
  'apiserver_admission_webhook_rejection_count{error_type="no_error",name="pods.validate.quartermaster.dev",operation="CREATE",rejection_code="403",type="validating"} 3',
  'apiserver_admission_webhook_fail_open_count{name="jobs.mutate.quartermaster.dev",type="admit"} 2',
  'apiserver_admission_webhook_admission_duration_seconds_count{name="pods.validate.quartermaster.dev",operation="CREATE",rejected="true",type="validating"} 41',
].join("\n");

describe("webhook-call counts from the apiserver's metrics", () => {
  it("counts Quartermaster's calls, the unanswered, the calling errors and the failed-open, by webhook", () => {
    assert.deepEqual(webhookCalls(METRICS), {
      calls: 82,
      unanswered: { "pods.validate.quartermaster.dev": 1 },
      callErrors: { "pods.validate.quartermaster.dev": 1 },
      failedOpen: { "jobs.mutate.quartermaster.dev": 2 },
    });
    assert.equal(failedCalls(webhookCalls(METRICS)), 4);
  });

  it("a run with every call answered counts no failure", () => {
    const clean = METRICS.split("\n")
      .filter((l) => !/code="0"|calling_webhook_error|fail_open/.test(l))
      .join("\n");
    assert.equal(failedCalls(webhookCalls(clean)), 0);
  });
});

/**
 * The apiserver's own count of its calls to Quartermaster's webhooks (issue 52): how many got no answer
 * (`apiserver_admission_webhook_request_total{code="0"}`: EOF, reset, refused, timed out), how many failed to be
 * made (`apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error"}`) and how many failed open
 * (`apiserver_admission_webhook_fail_open_count`). Read from the apiserver's `/metrics` before a control plane
 * stops; with QM_E2E_WEBHOOK_LOG set, `./controlplane.ts` appends each control plane's counts there as a JSON
 * line, which `test/e2e/repeat.ts` sums over whole runs of the e2e suite.
 */
import { appendFileSync } from "node:fs";

export interface WebhookCalls {
  /** Every call to a `*.quartermaster.dev` webhook. */
  calls: number;
  /** Calls the webhook never answered (code 0), by webhook name. */
  unanswered: Record<string, number>;
  /** Calls that failed to be made or read (calling_webhook_error), by webhook name. */
  callErrors: Record<string, number>;
  /** Calls that failed and were ignored (failurePolicy Ignore), by webhook name. */
  failedOpen: Record<string, number>;
}

const OURS = /name="([^"]*\.quartermaster\.dev)"/;

/** One sample line's labels and value, or undefined for any other line. */
function sample(line: string, metric: string): { name: string; labels: string; value: number } | undefined {
  if (!line.startsWith(`${metric}{`)) return undefined;
  const end = line.lastIndexOf("}");
  const name = OURS.exec(line.slice(0, end))?.[1];
  if (name === undefined) return undefined;
  return { name, labels: line.slice(metric.length + 1, end), value: Number(line.slice(line.lastIndexOf(" ") + 1)) };
}

/** The counts in an apiserver's `/metrics` text. */
export function webhookCalls(metrics: string): WebhookCalls {
  const out: WebhookCalls = { calls: 0, unanswered: {}, callErrors: {}, failedOpen: {} };
  const add = (into: Record<string, number>, name: string, n: number): void => {
    if (n > 0) into[name] = (into[name] ?? 0) + n;
  };
  for (const line of metrics.split("\n")) {
    const req = sample(line, "apiserver_admission_webhook_request_total");
    if (req) {
      out.calls += req.value;
      if (/(^|,)code="0"/.test(req.labels)) add(out.unanswered, req.name, req.value);
      continue;
    }
    const rej = sample(line, "apiserver_admission_webhook_rejection_count");
    if (rej && rej.labels.includes('error_type="calling_webhook_error"')) add(out.callErrors, rej.name, rej.value);
    const open = sample(line, "apiserver_admission_webhook_fail_open_count");
    if (open) add(out.failedOpen, open.name, open.value);
  }
  return out;
}

/** The number of failed calls of every kind. */
export function failedCalls(c: WebhookCalls): number {
  const total = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
  return total(c.unanswered) + total(c.callErrors) + total(c.failedOpen);
}

/** Appends one control plane's counts to QM_E2E_WEBHOOK_LOG (when set), naming the test file that ran it. */
export function recordWebhookCalls(metrics: string): void {
  const file = process.env.QM_E2E_WEBHOOK_LOG;
  if (!file) return;
  const calls = webhookCalls(metrics);
  const suite = process.argv.find((a) => a.endsWith(".test.ts")) ?? process.argv[1] ?? "?";
  appendFileSync(file, `${JSON.stringify({ suite, at: new Date().toISOString(), ...calls })}\n`);
}

/**
 * @module
 * Applies the job controller's decisions (`src/reconcile/job-controller.ts`) for the jobs of kinds Quartermaster
 * controls, job by job (`width` jobs at a time), each in upstream's order: the restart counter first (a merge
 * patch of the job's annotation with its resourceVersion as precondition: a conflict means the job changed
 * since it was listed, and its deletes wait for the next pass, so a restart is never counted twice), then the
 * deletes (uid preconditions), then the creates, then the status (a merge patch of the status subresource),
 * then the Events. Every create and delete is recorded in `expectations` before it is sent and forgotten when
 * it fails, so a listing that does not show it yet never makes the controller send it again.
 *
 * Events per object as training-operator's pod and service control write them (`pkg/controller.v1/control/
 * pod_control.go`, `service_control.go`): SuccessfulCreatePod "Created pod: <name>", FailedCreatePod "Error
 * creating: <err>", SuccessfulDeletePod "Deleted pod: <name>", FailedDeletePod "Error deleting: <err>", and
 * the Service equivalents; then the decision's own (JobRestarting, JobSucceeded, JobFailed, ...).
 */
import type { Logger } from "pino";
import { errorMessage } from "../core/errors.js";
import type { Expectations } from "../reconcile/expectations.js";
import { ANNOTATION_RESTARTS, jobEvent, type JobEvent } from "../reconcile/job-controller.js";
import type { ControllerPlan } from "../reconcile/plan.js";
import type { Cluster } from "../kube/cluster.js";

export interface ControllerReport {
  applied: string[];
  skipped: Array<{ action: string; why: string }>;
  failed: Array<{ action: string; error: string }>;
  events: number;
}

export interface ApplyControllerOptions {
  cluster: Pick<Cluster, "createPod" | "createService" | "delete" | "patchJobStatus" | "patchJobAnnotations" | "createEvent">;
  plans: readonly ControllerPlan[];
  expectations?: Expectations;
  now: () => Date;
  log: Logger;
  /** Jobs worked on at once. */
  width: number;
  /** Write Events (policy `reconciler.events`). */
  events: boolean;
}

/** Runs `fn` over `items` with at most `width` in flight; `fn` never throws. */
async function inParallel<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, width), items.length) }, worker));
}

const VERB: Record<"Pod" | "Service", string> = { Pod: "pod", Service: "service" };

/** One job's application: the options, the report filed into, the plan, and the Events its writes earn. */
interface JobApply {
  opts: ApplyControllerOptions;
  report: ControllerReport;
  plan: ControllerPlan;
  jobId: string;
  events: JobEvent[];
}

export async function applyJobControllers(opts: ApplyControllerOptions): Promise<ControllerReport> {
  const report: ControllerReport = { applied: [], skipped: [], failed: [], events: 0 };
  // Per-job isolation: an exception applying one job is recorded for it, and the other jobs still proceed.
  const isolated = async (plan: ControllerPlan): Promise<void> => {
    try {
      await applyOne(opts, report, plan);
    } catch (err) {
      report.failed.push({ action: `apply ${plan.kind.kind} ${plan.namespace}/${plan.name}`, error: errorMessage(err) });
      opts.log.error({ err, job: `${plan.kind.kind} ${plan.namespace}/${plan.name}` }, "job controller: applying this job failed; the other jobs go on");
    }
  };
  await inParallel(
    opts.plans.filter((p) => p.decision.creates.length + p.decision.deletes.length > 0 || p.decision.status || p.decision.events.length > 0),
    opts.width,
    isolated,
  );
  return report;
}

/** One job, in upstream's order: restart counter, deletes, creates, status, Events. */
async function applyOne(opts: ApplyControllerOptions, report: ControllerReport, plan: ControllerPlan): Promise<void> {
  const { decision: d, kind, namespace, name } = plan;
  const job: JobApply = { opts, report, plan, jobId: `${kind.kind} ${namespace}/${name}`, events: [] };
  let resourceVersion = plan.resourceVersion;
  let deletes = d.deletes;
  if (d.restarts !== undefined) {
    const r = await countRestarts(job, d.restarts);
    if (r === "patched")
      resourceVersion = undefined; // changed by this patch: the status patch goes without a precondition
    else deletes = [];
    if (r === "gone") return;
  }
  await Promise.all(deletes.map((x) => deleteOne(job, x)));
  await Promise.all(d.creates.map((c) => createOne(job, c)));
  if (d.status) await patchStatus(job, d.status, resourceVersion);
  if (opts.events) await recordEvents(job);
}

/** The restart counter: a merge patch of the job's annotation, its resourceVersion the precondition. */
async function countRestarts(job: JobApply, restarts: number): Promise<"patched" | "conflict" | "gone" | "failed"> {
  const { cluster } = job.opts;
  const { kind, namespace, name } = job.plan;
  const action = `patch ${kind.kind} ${namespace}/${name} (${ANNOTATION_RESTARTS}=${restarts})`;
  try {
    const r = await cluster.patchJobAnnotations(kind, namespace, name, { [ANNOTATION_RESTARTS]: String(restarts) }, job.plan.resourceVersion);
    if (r === "patched") job.report.applied.push(action);
    else job.report.skipped.push({ action, why: r === "gone" ? "the job is gone" : "the job changed since it was listed; restarts wait for the next pass" });
    return r;
  } catch (err) {
    job.report.failed.push({ action, error: errorMessage(err) });
    return "failed";
  }
}

async function deleteOne(job: JobApply, x: ControllerPlan["decision"]["deletes"][number]): Promise<void> {
  const { cluster, expectations, log } = job.opts;
  const { uid } = job.plan;
  const key = `${x.kind}/${x.name}`;
  const action = `delete ${x.kind} ${x.namespace}/${x.name}`;
  expectations?.expectDelete(uid, x.namespace, key, x.uid, job.opts.now());
  try {
    const r = await cluster.delete(x);
    if (r === "changed") {
      expectations?.forget(uid, key);
      job.report.skipped.push({ action, why: "the object was replaced (uid changed)" });
      return;
    }
    job.report.applied.push(action);
    if (r === "deleted")
      job.events.push({ type: "Normal", reason: `SuccessfulDelete${x.kind}`, message: `Deleted ${VERB[x.kind as "Pod" | "Service"]}: ${x.name}` });
    log.info({ job: job.jobId, action, reason: x.reason }, "job controller: delete");
  } catch (err) {
    expectations?.forget(uid, key);
    job.report.failed.push({ action, error: errorMessage(err) });
    job.events.push({ type: "Warning", reason: `FailedDelete${x.kind}`, message: `Error deleting: ${errorMessage(err)}` });
  }
}

async function createOne(job: JobApply, c: ControllerPlan["decision"]["creates"][number]): Promise<void> {
  const { cluster, expectations, log } = job.opts;
  const { uid } = job.plan;
  const key = `${c.kind}/${c.name}`;
  const action = `create ${c.kind} ${c.namespace}/${c.name}`;
  expectations?.expectCreate(uid, c.namespace, key, job.opts.now());
  log.info({ job: job.jobId, action, reason: c.reason }, "job controller: create");
  try {
    const r = c.kind === "Pod" ? await cluster.createPod(c.namespace, c.body) : await cluster.createService(c.namespace, c.body);
    if (r === "exists") {
      log.info({ job: job.jobId, action }, "job controller: create found it existing (409)");
      job.report.skipped.push({ action, why: "already exists (409)" });
      return;
    }
    job.report.applied.push(action);
    job.events.push({ type: "Normal", reason: `SuccessfulCreate${c.kind}`, message: `Created ${VERB[c.kind]}: ${c.name}` });
  } catch (err) {
    // Nothing will appear: the next pass may create it again.
    expectations?.forget(uid, key);
    log.warn({ job: job.jobId, action, err: errorMessage(err) }, "job controller: create failed");
    job.report.failed.push({ action, error: errorMessage(err) });
    job.events.push({ type: "Warning", reason: `FailedCreate${c.kind}`, message: `Error creating: ${errorMessage(err)}` });
  }
}

async function patchStatus(job: JobApply, status: Record<string, unknown>, resourceVersion: string | undefined): Promise<void> {
  const { kind, namespace, name } = job.plan;
  const action = `patch ${kind.kind}/status ${namespace}/${name}`;
  try {
    const r = await job.opts.cluster.patchJobStatus(kind, namespace, name, status, resourceVersion);
    if (r === "patched") job.report.applied.push(action);
    else job.report.skipped.push({ action, why: r === "gone" ? "the job is gone" : "the job changed since it was listed; the next pass writes its status" });
  } catch (err) {
    job.report.failed.push({ action, error: errorMessage(err) });
  }
}

async function recordEvents(job: JobApply): Promise<void> {
  const { cluster, log } = job.opts;
  const { kind, namespace, name, uid } = job.plan;
  const at = job.opts.now();
  for (const e of [...job.events, ...job.plan.decision.events]) {
    try {
      await cluster.createEvent(namespace, jobEvent({ namespace, name, uid }, kind, e, at));
      job.report.events++;
    } catch (err) {
      // An Event is a courtesy: its failure is logged, never the pass's.
      log.warn({ err, job: job.jobId, reason: e.reason }, "job controller: could not record an Event");
    }
  }
}

/** Describes a plan's actions the way the pass summary tallies them (`verb Kind namespace/name`). */
export function describeControllerPlan(plan: ControllerPlan): string[] {
  const d = plan.decision;
  return [
    ...d.deletes.map((x) => `delete ${x.kind} ${x.namespace}/${x.name}`),
    ...d.creates.map((c) => `create ${c.kind} ${c.namespace}/${c.name}`),
    ...(d.status ? [`patch ${plan.kind.kind}/status ${plan.namespace}/${plan.name}`] : []),
  ];
}

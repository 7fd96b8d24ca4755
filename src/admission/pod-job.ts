/**
 * @module
 * Reading the job a DRA pod's GPUs count against (`src/membership/owner.ts` says which: its training job, its batch
 * Job, or that Job's JobSet) through a review's reader, for `/validate/pods` to judge the job's GPUs with the claims as
 * they are now. Why: a ResourceClaimTemplate is its own object, so it can be deleted and created again asking more
 * after the job naming it was admitted (red team, issue 45's caps: 8 pods × 1 GPU admitted, then 8 × 8 made from the
 * same job), and the pod is where those GPUs are finally taken.
 *
 * The job may come from the reader's cache (its spec is judged at its own reviews; a copy a few seconds old is the job
 * its controller made the pod from); an absence, or a copy of another uid (the job deleted and made again under its
 * name), is read again fresh before it is believed, since either would let the pod pass as a job's pod that has no job.
 * A pod whose controller is gone (absent, or another object of the name: a different uid) has no job to cap: the
 * garbage collector deletes it, and it holds its own claims only.
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import { QUEUED_WORKLOAD_KINDS } from "../core/job-shapes.js";
import { readJob, type JobReadResult } from "../membership/lookup.js";
import { controllerOf, jobOwnerKind, otherUid, podOwnerKind, type CapOwnerKind, type ControllerRef } from "../membership/owner.js";
import type { JobReader } from "../membership/types.js";
import type { Pod } from "../core/kube.js";
import type { Policy } from "../policy/types.js";

export type PodJobRead =
  | { kind: "none" }
  | { kind: "found"; job: KubeObject; owner: CapOwnerKind; /** `TFJob team/a`, `JobSet team/a (the controller of Job team/a-node-0)` */ what: string }
  | { kind: "failed"; reason: string };

const NONE: PodJobRead = Object.freeze({ kind: "none" });

const apiOf = (owner: CapOwnerKind): ObjectKind => ("training" in owner ? owner.training : owner.workload);

/**
 * The controller as read (cached; an absence, or another object of its name, re-read fresh), or why not; `undefined`:
 * gone, or not the object the ref names.
 */
async function readController(
  ref: ControllerRef,
  api: ObjectKind,
  namespace: string,
  reader: JobReader,
  timeoutMs: number,
): Promise<KubeObject | undefined | string> {
  const read = (fresh: boolean) => readJob({ kind: api, namespace, name: ref.name, jobs: reader, timeoutMs, ...(fresh ? { fresh } : {}) });
  const notIt = (r: JobReadResult): boolean => r.kind === "missing" || (r.kind === "found" && otherUid(r.job, ref.uid) !== undefined);
  let got = await read(false);
  // A cached copy may be older than the pod's controller: a job deleted and made again under its name is another uid
  // in the cache for up to its TTL, and believing it would leave the new job's pods uncapped.
  if (notIt(got)) got = await read(true);
  if (got.kind === "failed") return got.reason;
  return got.kind === "found" && otherUid(got.job, ref.uid) === undefined ? got.job : undefined;
}

/**
 * The job `pod` counts against, read through `reader` within `timeoutMs` a read; `none` for a pod no job makes (no
 * controller, one that is not a job, or one gone).
 */
export async function readPodJob(
  pod: Pod,
  namespace: string,
  policy: Pick<Policy, "jobKinds" | "kindShapes">,
  reader: JobReader,
  timeoutMs: number,
): Promise<PodJobRead> {
  const ref = controllerOf(pod);
  const owner = ref && podOwnerKind(ref, policy);
  if (!ref || !owner) return NONE;
  const what = (kind: string, name: string) => `${kind} ${namespace}/${name}`;
  const direct = await readController(ref, apiOf(owner), namespace, reader, timeoutMs);
  if (typeof direct === "string") return { kind: "failed", reason: direct };
  if (!direct) return NONE;
  const up = "workload" in owner && owner.workload === QUEUED_WORKLOAD_KINDS[0] ? jobOwnerKind(direct) : undefined;
  if (!up) return { kind: "found", job: direct, owner, what: what(ref.kind, ref.name) };
  // A JobSet's Job: the JobSet holds every replicated Job as the controllers run them (a gone JobSet: the Job alone).
  const jobset = await readController(up.ref, up.kind, namespace, reader, timeoutMs);
  if (typeof jobset === "string") return { kind: "failed", reason: jobset };
  if (!jobset) return { kind: "found", job: direct, owner, what: what(ref.kind, ref.name) };
  return {
    kind: "found",
    job: jobset,
    owner: { workload: up.kind },
    what: `${what(up.ref.kind, up.ref.name)} (the controller of Job ${namespace}/${ref.name})`,
  };
}

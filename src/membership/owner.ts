/**
 * @module
 * Whose GPU cap a pod's devices count against: the object that makes the pod and its siblings from one template, by
 * the chain of controller ownerReferences upstream's controllers write. A training job of a v1 kind owns its pods
 * (training-operator v1.9.4 `pkg/controller.v1/common/pod.go`); a batch Job owns its pods (kubernetes
 * `pkg/controller/job`), and a JobSet owns its Jobs (sigs.k8s.io/jobset `pkg/controller/jobset_controller.go`), so a
 * JobSet's pod (a TrainJob's too: Trainer makes the JobSet) is capped with its JobSet, which holds every replicated Job
 * as the controllers will run it. Pure: the reads are `src/admission/pod-job.ts`'s.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { QUEUED_WORKLOAD_KINDS, workloadTemplateSpecs, type QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject } from "../core/object.js";
import { jobShape } from "../kinds/index.js";
import type { JobKind, Policy } from "../policy/types.js";

/** An object's controller: its ownerReference with `controller: true` (at most one, the apiserver's rule). */
export interface ControllerRef {
  kind: string;
  group: string;
  name: string;
  uid?: string;
}

export function controllerOf(obj: unknown): ControllerRef | undefined {
  const refs = isObject(obj) && isObject(obj.metadata) ? obj.metadata.ownerReferences : undefined;
  if (!Array.isArray(refs)) return undefined;
  const ref = refs.find((r): r is Record<string, unknown> => isObject(r) && r.controller === true);
  if (!ref || typeof ref.kind !== "string" || typeof ref.name !== "string" || typeof ref.apiVersion !== "string") return undefined;
  const group = ref.apiVersion.includes("/") ? ref.apiVersion.split("/")[0]! : "";
  return { kind: ref.kind, group, name: ref.name, ...(typeof ref.uid === "string" ? { uid: ref.uid } : {}) };
}

/**
 * The uid of `obj` when it is another object than the controller of uid `uid` names (the job deleted and made again
 * under its name); undefined when it is that one, or either has no uid to tell.
 */
export function otherUid(obj: KubeObject, uid: string | undefined): string | undefined {
  const own = (obj.metadata as { uid?: unknown } | undefined)?.uid;
  return uid !== undefined && typeof own === "string" && own !== uid ? own : undefined;
}

/** What a controller is, as the caps know it: a training job kind of the policy, or a batch Job or JobSet. */
export type CapOwnerKind = { training: JobKind } | { workload: QueuedWorkloadKind };

const [BATCH_JOB, JOBSET] = QUEUED_WORKLOAD_KINDS as [QueuedWorkloadKind, QueuedWorkloadKind];

const isWorkload = (ref: ControllerRef, kind: QueuedWorkloadKind): boolean => ref.kind === kind.kind && ref.group === kind.group;

/**
 * The kind of a pod's controller whose caps the pod counts against, or undefined: a training job kind of the policy
 * that owns pods itself (not a TrainJob: its pods are its JobSet's Jobs'), or a batch Job (then maybe its JobSet's,
 * {@link jobOwnerKind}).
 */
export function podOwnerKind(ref: ControllerRef, policy: Pick<Policy, "jobKinds" | "kindShapes">): CapOwnerKind | undefined {
  const kind = policy.jobKinds.find((k) => k.kind === ref.kind && k.group === ref.group);
  if (kind) return jobShape(kind, policy.kindShapes).layout === "runtime" ? undefined : { training: kind };
  return isWorkload(ref, BATCH_JOB) ? { workload: BATCH_JOB } : undefined;
}

/** A batch Job's controller when it is a JobSet (the JobSet is then what the Job's pods count against). */
export function jobOwnerKind(job: KubeObject): { ref: ControllerRef; kind: QueuedWorkloadKind } | undefined {
  const ref = controllerOf(job);
  return ref && isWorkload(ref, JOBSET) ? { ref, kind: JOBSET } : undefined;
}

/** The pod templates of a capping owner (each replica type's, each replicated Job's): the claims they name are its pods'. */
export function ownerTemplateSpecs(job: KubeObject, owner: CapOwnerKind, policy: Pick<Policy, "kindShapes">): V1PodSpec[] {
  if ("workload" in owner) return workloadTemplateSpecs(job, owner.workload);
  return jobShape(owner.training, policy.kindShapes)
    .replicas(job, owner.training)
    .flatMap((r) => (isObject(r.spec.template?.spec) ? [r.spec.template.spec as V1PodSpec] : []));
}

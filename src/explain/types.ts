/**
 * @module
 * `quartermaster explain` (issue 49): the evidence snapshot one job is judged on, and the verdict. The snapshot is
 * what the API (src/run/explain-read.ts) or a cache gives; the verdict (./verdict.ts) is a pure function of it and
 * the time, so every reason is a table test and the same verdict can be computed from either source.
 */
import type { GpuCatalog } from "../core/gpu.js";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import type { NodeEntry } from "../ledger/compute.js";

/**
 * The main reasons, in the order a verdict picks its main one: the first that holds is the verdict, the others
 * that hold are `also`. Causes come before the symptoms they explain (a missing controller before the reservation
 * it leaves with no pods, a pod's scheduling cause before the gang it leaves half placed), and whatever stops a job
 * at an earlier layer (admission, queue, controller) before the later ones (scheduler, devices, nodes). A warning
 * is the main reason only of a job nothing else explains; a running job is `running`, its warnings in `also`.
 */
export const REASONS = [
  "not-found",
  "finished",
  "refused",
  "inadmissible",
  "queued",
  "no-controller",
  "controller-error",
  "phantom-reservation",
  "stale-node",
  "untolerated-taint",
  "no-matching-node",
  "no-gpu-shape",
  "dra-unsatisfiable",
  "gang-partial",
  "warned",
  "pending",
  "running",
] as const;

export type Reason = (typeof REASONS)[number];

/** Whether the kind's controller is there: a Deployment found ready, found not ready, not found, or not looked for. */
export type ControllerState = "running" | "not-running" | "absent" | "unknown";

/** What is known of the job's kind: the registry's facts and what the API says of its CRD and controller. */
export interface KindFacts {
  kind: string;
  group: string;
  version: string;
  plural: string;
  /** Condition types that, with status True, mean the job has finished. */
  finishedConditions: readonly string[];
  /** The policy's entry, for a training-job kind (its replicas are counted from it). */
  jobKind?: JobKind;
  /** Whether `<group>/<version>` is served (discovery answered). */
  served: boolean;
  controller: { name: string; state: ControllerState; detail?: string };
}

/** One result of Quartermaster's PolicyReport (src/reconcile/policy-reports.ts) about the job or one of its pods. */
export interface PolicyResult {
  rule: string;
  result: string;
  message: string;
  field?: string;
  mode?: string;
  /** `<Kind>/<name>` of the object the result is about. */
  object: string;
  uid: string;
}

/** Kueue's visibility API's answer for the workload (kueue `apis/visibility/v1beta1` PendingWorkload). */
export interface PendingPosition {
  inClusterQueue?: number;
  inLocalQueue?: number;
}

/** The settings the verdict reads from the policy. */
export interface ExplainSettings {
  gpu: GpuCatalog;
  /** The node label naming a node's accelerator (policy `accelerator.nodeLabel`): a shape is (accelerator, resource). */
  acceleratorLabel: string;
  /** Seconds a state may last before it counts (a reservation with no pods yet, a job with no status yet). */
  graceSeconds: number;
}

/** Everything one verdict is computed from. Lists are what the reader found (bounded; empty when none). */
export interface ExplainEvidence {
  /** `<namespace>/<name>` asked for. */
  ref: { namespace: string; name: string };
  /** The job; absent when the API has none of that name. */
  job?: KubeObject;
  kind: KindFacts;
  pods: KubeObject[];
  /** Events whose involvedObject is the job or one of its pods. */
  events: KubeObject[];
  policyResults: PolicyResult[];
  /** Kueue's Workload of the job, its queues, and its position when the visibility API gave one. */
  workload?: KubeObject;
  localQueue?: KubeObject;
  clusterQueue?: KubeObject;
  position?: PendingPosition;
  /** Whether Kueue's API is served at all (a queue name on a cluster without Kueue is its own finding). */
  kueueServed: boolean;
  nodes: KubeObject[];
  /** The device ledger's nodes (free GPUs per node and resource, staleness), when a ledger was read. */
  ledger?: { generatedAt: string; nodes: NodeEntry[] };
  /** ResourceClaims of the job's pods, and the ResourceSlices published (DRA). */
  claims: KubeObject[];
  slices: KubeObject[];
  settings: ExplainSettings;
  /**
   * What the source did not read at all (the resident reconciler's caches, src/explain/cached.ts): the verdict
   * draws no conclusion from its absence. Absent: everything above was read (`quartermaster explain`).
   */
  unread?: readonly Unread[];
}

/**
 * Evidence a source may not have: Kueue's objects (Workload, queues), Events, PolicyReports, DRA's claims and
 * slices, the controllers' Deployments. Only `kueue` changes a verdict (a queue name with no queue read is not
 * `inadmissible`); the others only leave out the reasons that rest on them.
 */
export type Unread = "kueue" | "events" | "policy-reports" | "dra" | "controllers";

/** One piece of evidence: the object it is about and what it says (numbers and messages quoted). */
export interface EvidenceItem {
  object: string;
  text: string;
}

export interface Finding {
  reason: Reason;
  summary: string;
  evidence: EvidenceItem[];
  /** The concrete next step. */
  next: string;
}

export interface Verdict extends Finding {
  job: string;
  /** The other reasons that hold, in order. */
  also: Finding[];
}

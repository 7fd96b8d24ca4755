/**
 * @module
 * The kinds `explain` knows: every job kind of the policy, plus batch Job, JobSet and TrainJob (the kinds Kueue
 * queues that make GPU pods), each with the conditions that mean it finished and the Deployment of the controller
 * that runs it, as the upstream manifests name it, so the reader can say whether that controller is there.
 */
import { QUEUED_WORKLOAD_KINDS, TRAINER } from "../core/job-shapes.js";
import type { JobKind, Policy } from "../policy/types.js";
import { controllerOf as runBy, jobShape } from "../kinds/index.js";

export interface KnownKind {
  kind: string;
  group: string;
  version: string;
  plural: string;
  finishedConditions: readonly string[];
  jobKind?: JobKind;
  /**
   * The controller's Deployment name (kubeflow/training-operator `manifests/base`: training-operator; kubeflow/trainer
   * `manifests/base/manager`: kubeflow-trainer-controller-manager; kubernetes-sigs/jobset `config/default`:
   * jobset-controller-manager; Quartermaster's chart: quartermaster-reconciler); undefined for a controller that
   * is no Deployment (batch Job: kube-controller-manager).
   */
  deployment?: string;
  controllerName: string;
}

function controllerOf(kind: JobKind): { deployment: string; controllerName: string } {
  const by = runBy(kind);
  if (by === "quartermaster") return { deployment: "quartermaster-reconciler", controllerName: "Quartermaster's job controller (reconcile --watch)" };
  if (kind.framework === "trainer") return { deployment: "kubeflow-trainer-controller-manager", controllerName: "the Kubeflow Trainer controller" };
  return { deployment: "training-operator", controllerName: "the Kubeflow training-operator" };
}

/** Every kind `explain` can be asked about, the policy's first. */
export function knownKinds(policy: Pick<Policy, "jobKinds">): KnownKind[] {
  const out: KnownKind[] = policy.jobKinds.map((k) => ({
    kind: k.kind,
    group: k.group,
    version: k.version,
    plural: k.plural,
    finishedConditions: jobShape(k).finishedConditions,
    jobKind: k,
    ...controllerOf(k),
  }));
  for (const w of QUEUED_WORKLOAD_KINDS) {
    const batch = w.group === "batch";
    out.push({
      kind: w.kind,
      group: w.group,
      version: w.version,
      plural: w.plural,
      // batch/v1 JobConditionType Complete/Failed; JobSet's JobSetCompleted/JobSetFailed are "Completed"/"Failed".
      finishedConditions: batch ? ["Complete", "Failed"] : ["Completed", "Failed"],
      ...(batch
        ? { controllerName: "kube-controller-manager's job controller" }
        : { deployment: "jobset-controller-manager", controllerName: "the JobSet controller" }),
    });
  }
  if (!out.some((k) => k.group === TRAINER.group && k.kind === "TrainJob"))
    out.push({
      kind: "TrainJob",
      group: TRAINER.group,
      version: TRAINER.version,
      plural: "trainjobs",
      finishedConditions: TRAINER.finishedConditions,
      deployment: "kubeflow-trainer-controller-manager",
      controllerName: "the Kubeflow Trainer controller",
    });
  return out;
}

/**
 * The kind `name` names, case-insensitively: its kind (`pytorchjob`), plural (`pytorchjobs`), or either with its
 * group (`pytorchjobs.kubeflow.org`, as kubectl takes them). Several kinds of one name (a batch Job and a kind named
 * Job elsewhere) need the group.
 */
export function resolveKind(name: string, kinds: readonly KnownKind[]): KnownKind | { problem: string } {
  const n = name.toLowerCase();
  const hits = kinds.filter((k) => [k.kind, k.plural, `${k.kind}.${k.group}`, `${k.plural}.${k.group}`].some((s) => s.toLowerCase() === n));
  if (hits.length === 1) return hits[0]!;
  if (hits.length > 1) return { problem: `${name} is ambiguous: ${hits.map((k) => `${k.plural}.${k.group}`).join(", ")}` };
  return { problem: `unknown kind ${name}; known: ${kinds.map((k) => k.kind).join(", ")}` };
}

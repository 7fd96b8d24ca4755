/**
 * @module
 * The Kubeflow labels of a replica pod (training-operator `common/pod.go` createNewPod): operator-name,
 * job-name, replica-type (lower case), replica-index, and `job-role: master` on the pods each framework
 * calls master. Only missing labels are added; a value the pod has is kept. Not on a TrainJob's pods (its
 * shape's `kubeflowPodLabels`): JobSet labels those.
 */
import { copyOf, withKey } from "../core/copy.js";
import { LABEL_JOB_NAME, LABEL_JOB_ROLE, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE } from "../core/keys.js";
import { jobShape, operatorName } from "../kinds/index.js";
import { isMasterRole } from "./frameworks.js";
import type { Mutation } from "./types.js";

export const addTrainingLabels: Mutation = {
  name: "training-labels",
  mutate(pod, { topology, policy }) {
    if (!topology || !jobShape(topology.kind, policy.kindShapes).kubeflowPodLabels) return pod;
    const jobName = String((topology.job.metadata as { name?: string } | undefined)?.name ?? "").replace(/\//g, "-");
    const wanted: Record<string, string> = {};
    const operator = operatorName(topology.kind, policy.kindShapes);
    if (operator) wanted[LABEL_OPERATOR_NAME] = operator;
    wanted[LABEL_JOB_NAME] = jobName;
    wanted[LABEL_REPLICA_TYPE] = topology.replicaType.toLowerCase();
    wanted[LABEL_REPLICA_INDEX] = String(topology.index);
    if (isMasterRole(topology)) wanted[LABEL_JOB_ROLE] = "master";
    const labels = pod.metadata?.labels ?? {};
    const missing = Object.entries(wanted).filter(([k]) => labels[k] === undefined);
    if (missing.length === 0) return pod;
    const next = copyOf(labels);
    for (const [k, v] of missing) next[k] = v;
    return withKey(pod, "metadata", withKey(pod.metadata, "labels", next));
  },
  explain(before, after) {
    const had = before.metadata?.labels ?? {};
    const added = Object.keys(after.metadata?.labels ?? {}).filter((k) => had[k] === undefined);
    return `quartermaster: added labels ${added.map((k) => k.replace("training.kubeflow.org/", "")).join(", ")}`;
  },
};

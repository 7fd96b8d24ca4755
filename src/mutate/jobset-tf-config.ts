/**
 * @module
 * TF_CONFIG for the pods of a TensorFlow TrainJob (Kubeflow Trainer v2 has no TensorFlow runtime:
 * kubeflow/trainer#2699), computed from its JobSet, in exactly the v1 operator's format for the equivalent
 * TFJob (`tfConfigJson` in frameworks.ts, shared with TFJob pods): same key order, same bytes, `"environment":
 * "cloud"`, the same isDistributed rule. Only the hostnames differ. Pure: the JobSet is looked up by the webhook
 * (webhooks/mutate-pods.ts) and handed in as `ctx.jobSet`.
 *
 * The cluster: one key per replicatedJob named as a TF task type (chief, evaluator, master, ps, worker: the
 * replica types a TFJob may have; Trainer's initializer replicatedJobs are not in it), sorted as Go sorts a map,
 * each listing `replicas × pods per Job` addresses, Job by Job, pod by pod. The pods' names are as JobSet and the
 * Job controller set them:
 * - Job `<jobset>-<replicatedJob>-<jobIndex>` (sigs.k8s.io/jobset v0.12.0 `pkg/util/placement/placement.go`
 *   GenJobName); an Indexed Job's pod gets hostname `<job>-<completionIndex>` (Kubernetes' Job controller), so
 *   `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>` (placement.go GenPodName);
 * - subdomain `spec.network.subdomain`, else the JobSet's name (jobset `pkg/controllers/jobset_controller.go`
 *   GetSubdomain, set on the pod template only when `network.enableDNSHostnames`, which JobSet's webhook
 *   defaults to true: `pkg/webhooks/jobset_webhook.go`), with a headless Service of that name;
 * - the address `<hostname>.<subdomain>.<namespace>.svc[.<clusterDomain>]:<port>`: the pod's fully qualified
 *   DNS name, laid out like v1's `<pod>.<namespace>.svc[.<clusterDomain>]` (which named the per-pod Service);
 *   JobSet's own coordinator endpoint (GetCoordinatorEndpoint) and Trainer's PET_MASTER_ADDR use the
 *   namespace-relative `<hostname>.<subdomain>`, which resolves only inside the namespace.
 *   Trainer lists its nodes' endpoints the same way, `<trainjob>-<replicatedJob>-<replica>-<pod>.<subdomain>`
 *   (kubeflow/trainer v2.3.0 `pkg/runtime/framework/plugins/jobset/jobset.go`, the PodSets' Endpoints).
 * The port: the container's port named `tfjob-port` in that replicatedJob's pod template, else 2222 (as v1).
 * The task: the pod's replicatedJob and `jobIndex × pods per Job + completionIndex`.
 *
 * Wiring: the pod webhook's matchConditions (src/manifests/webhooks.ts trainingPodExpression) match the
 * `jobset.sigs.k8s.io/jobset-name` label, so CPU-only TF pods (a PS) reach it too, and the webhook's ClusterRole
 * (manifests/base/rbac.yaml, the chart) has `get` on `jobsets.jobset.x-k8s.io`. Proven against the real Trainer
 * v2.3.0, JobSet v0.12.0 and training-operator v1.9.4 by test/conformance/trainer-tfconfig.test.ts (the same
 * bytes as the operator's TF_CONFIG for the same topology, hostnames mapped).
 *
 * TF_CONFIG goes to the container named `node` (Trainer's trainer container, kubeflow/trainer
 * `pkg/constants` Node), else the first named `tensorflow` (v1's), and never over a TF_CONFIG already set.
 */
import type { V1Container } from "@kubernetes/client-node";
import type { KubeObject, Pod } from "../core/kube.js";
import { isTfJobSet, jobSetPlace } from "../membership/jobset.js";
import { MAX_JOB_REPLICAS } from "../membership/ceiling.js";
import { withEnv } from "./cluster-spec.js";
import { FRAMEWORKS } from "../kinds/frameworks.js";
import { goJson, TF_DISTRIBUTED_TYPES, tfConfigJson } from "./frameworks.js";
import { mapContainers } from "./pod.js";
import type { Mutation } from "./types.js";

/** The containers TF_CONFIG goes to, in order of preference. */
export const TF_CONTAINERS = ["node", FRAMEWORKS.tensorflow.container] as const;

interface ReplicatedJob {
  name?: unknown;
  replicas?: unknown;
  template?: {
    spec?: {
      parallelism?: unknown;
      completions?: unknown;
      template?: { spec?: { containers?: Array<{ name?: string; ports?: Array<{ name?: string; containerPort?: number }> }> } };
    };
  };
}

interface JobSetSpec {
  replicatedJobs?: unknown;
  network?: { enableDNSHostnames?: unknown; subdomain?: unknown };
}

const count = (v: unknown, fallback: number): number => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : fallback);

/** Pods per Job of a replicatedJob: `completions` (an Indexed Job's pod count), else `parallelism`, else 1. */
function podsPerJob(r: ReplicatedJob): number {
  const spec = r.template?.spec;
  return count(spec?.completions, count(spec?.parallelism, 1));
}

function portOf(r: ReplicatedJob): number {
  const containers = r.template?.spec?.template?.spec?.containers ?? [];
  for (const name of TF_CONTAINERS) {
    const port = containers.find((c) => c?.name === name)?.ports?.find((p) => p?.name === FRAMEWORKS.tensorflow.portName)?.containerPort;
    if (typeof port === "number") return port;
  }
  return FRAMEWORKS.tensorflow.port;
}

export type JobSetTfConfig = { tfConfig: string; hostname: string; subdomain: string } | { skip: string };

/**
 * The TF_CONFIG of `pod`, a pod of the TensorFlow JobSet `jobSet` in `namespace`, or why it gets none.
 * Checks that the JobSet is labelled tensorflow and is the pod's, and that the pod is one the cluster lists.
 */
// eslint-disable-next-line complexity -- a list of independent checks, each answering why not
export function jobSetTfConfig(jobSet: KubeObject, pod: Pod, namespace: string, clusterDomain: string): JobSetTfConfig {
  const meta = (jobSet.metadata ?? {}) as { name?: string; namespace?: string };
  const name = String(meta.name ?? "");
  if (!isTfJobSet(jobSet)) return { skip: `JobSet ${name} is not labelled trainer.kubeflow.org/framework: tensorflow` };
  const place = jobSetPlace(pod);
  if ("problem" in place) return { skip: place.problem };
  const spec = (jobSet.spec ?? {}) as JobSetSpec;
  if (spec.network?.enableDNSHostnames === false) return { skip: `JobSet ${name} has network.enableDNSHostnames false: its pods have no DNS names` };
  const subdomain = typeof spec.network?.subdomain === "string" && spec.network.subdomain !== "" ? spec.network.subdomain : name;
  const rjobs = (Array.isArray(spec.replicatedJobs) ? spec.replicatedJobs : []) as ReplicatedJob[];
  const tf = rjobs.filter((r): r is ReplicatedJob & { name: string } => typeof r?.name === "string" && TF_DISTRIBUTED_TYPES.includes(r.name));
  const sizes = tf.map((r) => ({ r, jobs: count(r.replicas, 1), pods: podsPerJob(r) }));
  const total = sizes.reduce((n, s) => n + s.jobs * s.pods, 0);
  if (total > MAX_JOB_REPLICAS) return { skip: `the JobSet has ${total} TensorFlow pods in all, over Quartermaster's ceiling of ${MAX_JOB_REPLICAS} per job` };
  // isDistributed (training-operator tensorflow/util.go): a single TF pod gets no TF_CONFIG, as a 1-replica TFJob.
  if (total === 1) return { skip: "a TensorFlow JobSet with a single pod is not distributed" };
  const mine = sizes.find((s) => s.r.name === place.replicatedJob);
  if (!mine) return { skip: `replicatedJob ${place.replicatedJob} is not a TensorFlow task type (${TF_DISTRIBUTED_TYPES.join(", ")})` };
  if (place.jobIndex >= mine.jobs || place.completionIndex >= mine.pods) {
    return { skip: `pod ${place.jobIndex}/${place.completionIndex} is beyond replicatedJob ${mine.r.name} (${mine.jobs} Jobs of ${mine.pods} pods)` };
  }
  const hostname = `${name}-${place.replicatedJob}-${place.jobIndex}-${place.completionIndex}`;
  if (pod.spec?.hostname !== undefined && pod.spec.hostname !== hostname)
    return { skip: `the pod's hostname ${pod.spec.hostname} is not JobSet's ${hostname}` };
  if (pod.spec?.subdomain !== undefined && pod.spec.subdomain !== subdomain)
    return { skip: `the pod's subdomain ${pod.spec.subdomain} is not JobSet's ${subdomain}` };
  const suffix = `.${subdomain}.${meta.namespace ?? namespace}.svc${clusterDomain ? `.${clusterDomain}` : ""}`;
  const cluster: Record<string, string[]> = {};
  for (const { r, jobs, pods } of [...sizes].sort((a, b) => (a.r.name < b.r.name ? -1 : 1))) {
    const port = portOf(r);
    const hosts: string[] = [];
    for (let j = 0; j < jobs; j++) for (let p = 0; p < pods; p++) hosts.push(`${name}-${r.name}-${j}-${p}${suffix}:${port}`);
    cluster[r.name] = hosts;
  }
  const task = { type: place.replicatedJob, index: place.jobIndex * mine.pods + place.completionIndex };
  return { tfConfig: tfConfigJson(goJson(cluster), task), hostname, subdomain };
}

/** The index of the container TF_CONFIG goes to, or -1. */
function targetIndex(containers: readonly V1Container[]): number {
  for (const name of TF_CONTAINERS) {
    const i = containers.findIndex((c) => c?.name === name);
    if (i >= 0) return i;
  }
  return -1;
}

export const injectJobSetTfConfig: Mutation = {
  name: "jobset-tf-config",
  mutate(pod, ctx) {
    if (!ctx.jobSet || !ctx.policy.clusterSpec.enabled) return pod;
    const spec = jobSetTfConfig(ctx.jobSet, pod, ctx.namespace, ctx.policy.clusterSpec.clusterDomain);
    if ("skip" in spec) return pod;
    const i = targetIndex(pod.spec?.containers ?? []);
    if (i < 0) return pod;
    const vars = [{ name: "TF_CONFIG", value: spec.tfConfig }];
    return mapContainers(pod, ["containers"], (c, _list, j) => (j === i ? withEnv(c, vars) : c));
  },
  explain() {
    return "quartermaster: TrainJob TensorFlow cluster spec set: TF_CONFIG";
  },
  advise(pod, ctx) {
    if (!ctx.jobSet || !ctx.policy.clusterSpec.enabled) return [];
    const spec = jobSetTfConfig(ctx.jobSet, pod, ctx.namespace, ctx.policy.clusterSpec.clusterDomain);
    if ("skip" in spec) return [`quartermaster: no TF_CONFIG: ${spec.skip}`];
    if (targetIndex(pod.spec?.containers ?? []) < 0) return [`quartermaster: no TF_CONFIG: no container is named ${TF_CONTAINERS.join(" or ")}`];
    return [];
  },
};

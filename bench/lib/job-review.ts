/**
 * A training-job AdmissionReview for the job webhooks' benchmarks: the CREATE of the PyTorchJob whose worker
 * `pod-review.ts` is (its replica templates are that pod's spec), without a runPolicy, as kubectl sends it.
 */
import { podReview } from "./pod-review.js";

export function jobReview(uid = "5b1c9e3a-7d2f-4e6a-8b0c-1d2e3f4a5b6c"): Record<string, unknown> {
  const pod = (podReview().request as { object: { spec: Record<string, unknown> } }).object;
  const podSpec = pod.spec;
  const template = (restartPolicy: string) => ({
    metadata: { labels: { "app.kubernetes.io/part-of": "llm-pretrain" } },
    spec: { ...podSpec, restartPolicy },
  });
  const job = {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "llm-pretrain", namespace: "team-nlp", labels: { "app.kubernetes.io/part-of": "llm-pretrain" } },
    spec: {
      nprocPerNode: "8",
      pytorchReplicaSpecs: {
        Master: { replicas: 1, restartPolicy: "OnFailure", template: template("OnFailure") },
        Worker: { replicas: 7, restartPolicy: "OnFailure", template: template("OnFailure") },
      },
    },
  };
  const gvk = { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" };
  const gvr = { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name: "llm-pretrain",
      namespace: "team-nlp",
      operation: "CREATE",
      userInfo: { username: "alice@example.com", groups: ["ml-team", "system:authenticated"] },
      object: job,
      oldObject: null,
      dryRun: false,
      options: { kind: "CreateOptions", apiVersion: "meta.k8s.io/v1", fieldManager: "kubectl-create" },
    },
  };
}

/**
 * @module
 * The versions Quartermaster supports and is tested against, as data: `quartermaster version` prints them, and
 * test/unit/project/version.test.ts holds them to the versions CI builds (test/e2e/<tool>/build.sh) and README's
 * "Supported versions", so the three cannot drift apart.
 */

export interface SupportedVersions {
  /** Kubernetes minor versions, inclusive, and the patch releases CI runs (oldest and newest). */
  kubernetes: { from: string; to: string; tested: readonly string[] };
  /** Kubeflow training operator (kubeflow.org/v1 job kinds), the release the conformance suite runs. */
  trainingOperator: string;
  /** Kubeflow Trainer v2 (TrainJob, trainer.kubeflow.org/v1alpha1). */
  trainer: string;
  /** JobSet, which Trainer v2 runs its TrainJobs through. */
  jobset: string;
  /** Kueue (kueue.x-k8s.io/v1beta2), for queued jobs and the ledger per ResourceFlavor. */
  kueue: string;
}

export const SUPPORTED_VERSIONS: SupportedVersions = {
  kubernetes: { from: "1.30", to: "1.37", tested: ["v1.30.14", "v1.37.2"] },
  trainingOperator: "v1.9.4",
  trainer: "v2.3.0",
  jobset: "v0.12.0",
  kueue: "v0.19.2",
};

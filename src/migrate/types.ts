/**
 * @module
 * What `quartermaster migrate` produces: the Trainer v2 objects for one v1 job, and what could not be carried.
 */
import type { KubeObject } from "../core/kube.js";

/** One thing of the v1 job that the TrainJob does not carry (or carries with another meaning). */
export interface NotCarried {
  /** Where it is in the v1 job: `spec.runPolicy.ttlSecondsAfterFinished`, `spec.pytorchReplicaSpecs.Worker.template`. */
  field: string;
  /** The value, shortened, when it helps. */
  value?: string;
  /** Why it is not carried, and what to do instead. */
  reason: string;
}

export interface Migration {
  /** The objects to apply, in order: the runtime the job needs when it is not an upstream one, then the TrainJob. */
  objects: KubeObject[];
  notCarried: NotCarried[];
}

export const TRAINER_API = "trainer.kubeflow.org/v1alpha1";
/** The manager named in the runtimePatches `migrate` writes (TrainJob `spec.runtimePatches[].manager`). */
export const MIGRATE_MANAGER = "quartermaster.dev/migrate";

/**
 * @module
 * A TrainJob's bare `gpu` in `spec.trainer.resourcesPerNode`, renamed to the policy's GPU resource by the
 * pods' rule (`./resources.ts`: an explicit value of that resource wins), on CREATE by `/mutate/jobs`.
 *
 * Why on the job and not, as for v1 kinds, on its pods: a v1 operator makes the pods from its replica
 * templates itself, so `/mutate/pods` renames `gpu` before the apiserver validates them. A TrainJob's
 * resources go into its JobSet's Jobs first, and the apiserver refuses a Job whose pod template asks for
 * `gpu` ("must be a standard resource type or fully qualified"): the JobSet controller's Job creates fail and
 * no pod is ever made (seen with the real Trainer v2.3.0 and JobSet v0.12.0, test/conformance/trainer.test.ts).
 * A runtime's own templates are its author's (a cluster administrator's) and are not changed; runtimePatches
 * carry no resources (Trainer v2.3.0's ContainerPatch has none).
 *
 * Pure and copy-on-write: a job with nothing to rename comes back as the very same reference.
 */
import { withKey } from "../core/copy.js";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";
import { withBareGpuRenamed } from "./resources.js";
import { isObject } from "../core/object.js";

/** `job` (of `kind`) with a bare `gpu` in a TrainJob's resourcesPerNode renamed to `gpuName`, and a warning saying so. */
export function renameTrainJobBareGpu(job: KubeObject, kind: JobKind, gpuName: string): { job: KubeObject; warnings: string[] } {
  const unchanged = { job, warnings: [] };
  if (jobShape(kind).name !== "trainjob") return unchanged;
  const spec = job.spec;
  const trainer = isObject(spec) ? spec.trainer : undefined;
  const resources = isObject(trainer) ? trainer.resourcesPerNode : undefined;
  if (!isObject(spec) || !isObject(trainer) || !isObject(resources)) return unchanged;
  const renamed = withBareGpuRenamed(resources, gpuName);
  if (renamed === resources) return unchanged;
  return {
    job: withKey(job, "spec", withKey(spec, "trainer", withKey(trainer, "resourcesPerNode", renamed))),
    warnings: [`quartermaster: renamed gpu to ${gpuName} in spec.trainer.resourcesPerNode (a Job asking for bare gpu is refused)`],
  };
}

/**
 * @module
 * Resource defaults for every container, init container and native sidecar (Flyte's container rules,
 * with its traps avoided):
 * - a bare `gpu` is renamed to the policy's GPU resource (an explicit value of that resource wins);
 * - extended resources (GPUs, MIG slices) get request == limit, the missing side filled from the other,
 *   since Kubernetes does not overcommit them and refuses a request without a limit;
 * - cpu and memory requests come from the limit, else from the policy default;
 * - limits come from requests only for the resources the policy lists;
 * - a value the user set is never changed, and no zero entries are written.
 */
import type { V1Container, V1ResourceRequirements } from "@kubernetes/client-node";
import { copyOf, withKey } from "../core/copy.js";
import type { Policy } from "../policy/types.js";
import { isZero, parseQuantity } from "../core/quantity.js";
import { mapContainers, type ContainerList } from "./pod.js";
import type { Mutation } from "./types.js";
import type { Pod } from "../core/kube.js";
import { isExtendedResource } from "../core/gpu.js";

type ResourceMap = Record<string, string>;

/** A quantity that parses and is not zero: what a default may write (also decided by src/manifests/map.ts). */
export function nonZero(value: string | undefined): value is string {
  if (value === undefined) return false;
  const q = parseQuantity(value);
  return q !== undefined && !isZero(q);
}

const NO_RESOURCES: Readonly<ResourceMap> = Object.freeze({});

/** A container's requests and limits, copied only when first written (most containers need nothing). */
class ResourceDraft {
  requests: ResourceMap;
  limits: ResourceMap;
  private ownRequests = false;
  private ownLimits = false;

  constructor(c: V1Container) {
    this.requests = c.resources?.requests ?? NO_RESOURCES;
    this.limits = c.resources?.limits ?? NO_RESOURCES;
  }

  get changed(): boolean {
    return this.ownRequests || this.ownLimits;
  }

  writableRequests(): ResourceMap {
    if (!this.ownRequests) [this.ownRequests, this.requests] = [true, copyOf(this.requests)];
    return this.requests;
  }

  writableLimits(): ResourceMap {
    if (!this.ownLimits) [this.ownLimits, this.limits] = [true, copyOf(this.limits)];
    return this.limits;
  }
}

/** A bare `gpu` renamed to the policy's GPU resource (an explicit value of that resource wins). */
function renameBareGpu(d: ResourceDraft, gpuName: string): void {
  if (d.requests.gpu !== undefined) {
    const r = d.writableRequests();
    if (r[gpuName] === undefined) r[gpuName] = r.gpu!;
    delete r.gpu;
  }
  if (d.limits.gpu !== undefined) {
    const l = d.writableLimits();
    if (l[gpuName] === undefined) l[gpuName] = l.gpu!;
    delete l.gpu;
  }
}

/**
 * `resources` with a bare `gpu` renamed as in a container (an explicit value of `gpuName` wins), for
 * resources that are not yet a pod's (a TrainJob's `spec.trainer.resourcesPerNode`); the same reference
 * when there is none.
 */
export function withBareGpuRenamed(resources: V1ResourceRequirements, gpuName: string): V1ResourceRequirements {
  const d = new ResourceDraft({ name: "", resources });
  renameBareGpu(d, gpuName);
  if (!d.changed) return resources;
  const out = copyOf(resources);
  if (d.requests !== NO_RESOURCES) out.requests = d.requests;
  if (d.limits !== NO_RESOURCES) out.limits = d.limits;
  return out;
}

/** Extended resources: request == limit, the missing side filled (requests' names first, then limits'). */
function pairExtendedResources(d: ResourceDraft): void {
  const requestNames = Object.keys(d.requests);
  const limitNames = Object.keys(d.limits);
  for (const name of requestNames) {
    if (d.limits[name] === undefined && isExtendedResource(name)) d.writableLimits()[name] = d.requests[name]!;
  }
  for (const name of limitNames) {
    if (d.requests[name] === undefined && isExtendedResource(name)) d.writableRequests()[name] = d.limits[name]!;
  }
}

/** cpu and memory requests from the limit, else the policy's default; limits from requests where the policy says. */
function defaultRequestsAndLimits(d: ResourceDraft, policy: Policy): void {
  for (const name of ["cpu", "memory"] as const) {
    if (d.requests[name] !== undefined) continue;
    const fallback = nonZero(d.limits[name]) ? d.limits[name] : policy.resources.defaultRequests[name];
    if (nonZero(fallback)) d.writableRequests()[name] = fallback;
  }
  for (const name of policy.resources.limitsFromRequests) {
    if (d.limits[name] === undefined && nonZero(d.requests[name])) d.writableLimits()[name] = d.requests[name]!;
  }
}

/** The container with defaulted resources, or the same container when nothing changes. */
export function defaultContainerResources(c: V1Container, policy: Policy): V1Container {
  const d = new ResourceDraft(c);
  renameBareGpu(d, policy.gpu.resourceName);
  pairExtendedResources(d);
  defaultRequestsAndLimits(d, policy);
  if (!d.changed) return c;
  const resources = copyOf(c.resources);
  if (Object.keys(d.requests).length > 0) resources.requests = d.requests;
  else delete resources.requests;
  if (Object.keys(d.limits).length > 0) resources.limits = d.limits;
  else delete resources.limits;
  return withKey(c, "resources", resources);
}

const LISTS: readonly ContainerList[] = ["initContainers", "containers"];

function changedContainers(before: Pod, after: Pod): string[] {
  const names: string[] = [];
  for (const list of LISTS) {
    (after.spec?.[list] ?? []).forEach((c, i) => {
      if (c !== before.spec?.[list]?.[i]) names.push(c.name);
    });
  }
  return names;
}

export const defaultResources: Mutation = {
  name: "resources",
  mutate: (pod, { policy }) => mapContainers(pod, LISTS, (c) => defaultContainerResources(c, policy)),
  explain(before, after) {
    return `quartermaster: resource requests/limits defaulted for ${changedContainers(before, after).join(", ")}`;
  },
};

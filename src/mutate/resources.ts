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
import type { V1Container } from "@kubernetes/client-node";
import { copyOf, withKey } from "../core/copy.js";
import type { Policy } from "../policy/types.js";
import { isZero, parseQuantity } from "../core/quantity.js";
import { mapContainers, type ContainerList } from "./pod.js";
import type { Mutation } from "./types.js";
import type { Pod } from "../core/kube.js";
import { isExtendedResource } from "../core/gpu.js";

type ResourceMap = Record<string, string>;

function nonZero(value: string | undefined): value is string {
  if (value === undefined) return false;
  const q = parseQuantity(value);
  return q !== undefined && !isZero(q);
}

const NO_RESOURCES: Readonly<ResourceMap> = Object.freeze({});

/** The container with defaulted resources, or the same container when nothing changes. */
export function defaultContainerResources(c: V1Container, policy: Policy): V1Container {
  // Copy-on-write: most containers need nothing, and then nothing is copied.
  let requests: ResourceMap = c.resources?.requests ?? NO_RESOURCES;
  let limits: ResourceMap = c.resources?.limits ?? NO_RESOURCES;
  let ownRequests = false;
  let ownLimits = false;
  const writableRequests = (): ResourceMap => (ownRequests ? requests : ((ownRequests = true), (requests = copyOf(requests))));
  const writableLimits = (): ResourceMap => (ownLimits ? limits : ((ownLimits = true), (limits = copyOf(limits))));
  const gpuName = policy.gpu.resourceName;

  if (requests.gpu !== undefined) {
    const r = writableRequests();
    if (r[gpuName] === undefined) r[gpuName] = r.gpu!;
    delete r.gpu;
  }
  if (limits.gpu !== undefined) {
    const l = writableLimits();
    if (l[gpuName] === undefined) l[gpuName] = l.gpu!;
    delete l.gpu;
  }
  // Extended resources: request == limit, the missing side filled (requests' names first, then limits').
  const requestNames = Object.keys(requests);
  const limitNames = Object.keys(limits);
  for (const name of requestNames) {
    if (limits[name] === undefined && isExtendedResource(name)) writableLimits()[name] = requests[name]!;
  }
  for (const name of limitNames) {
    if (requests[name] === undefined && isExtendedResource(name)) writableRequests()[name] = limits[name]!;
  }
  for (const name of ["cpu", "memory"] as const) {
    if (requests[name] !== undefined) continue;
    const fallback = nonZero(limits[name]) ? limits[name] : policy.resources.defaultRequests[name];
    if (nonZero(fallback)) writableRequests()[name] = fallback;
  }
  for (const name of policy.resources.limitsFromRequests) {
    if (limits[name] === undefined && nonZero(requests[name])) writableLimits()[name] = requests[name]!;
  }
  if (!ownRequests && !ownLimits) return c;
  const resources = copyOf(c.resources);
  if (Object.keys(requests).length > 0) resources.requests = requests;
  else delete resources.requests;
  if (Object.keys(limits).length > 0) resources.limits = limits;
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

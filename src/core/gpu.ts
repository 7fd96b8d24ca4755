/**
 * @module
 * What counts as a GPU, defined once. Every layer asks here: the mutations (tolerations, placement, renames),
 * the rules (caps, whole numbers, MIG mixing), the cost bound, the device ledger, and the CEL renders (the
 * webhooks' match conditions and the exported ValidatingAdmissionPolicy are generated from
 * {@link gpuResourcePatterns} and bounded by {@link CONDITION_MAX_CONTAINERS} / {@link CONDITION_MAX_RESOURCES}).
 * A GPU resource is a resource name that one of the policy's `gpu.resources` patterns matches (a glob:
 * `nvidia.com/mig-*`). Three more names are GPUs and count as the resource they stand for ({@link countedAs}):
 * - a bare `gpu`, the shorthand `/mutate/pods` renames to `gpu.resourceName` (a job's templates keep it until
 *   their pods are made, so the job's caps count it as that resource);
 * - `deviceclass.resource.kubernetes.io/<class>`, the extended-resource name Kubernetes gives every DeviceClass
 *   (DRA's extended-resource support), for a class of `gpu.deviceClasses`: as that class's resource;
 * - a class's `extendedResourceName` (the DeviceClass's `spec.extendedResourceName`), the same way.
 * The policy's entries are read structurally (a `pattern` each), so this module imports nothing above it.
 */
import type { V1Container, V1PodSpec } from "@kubernetes/client-node";
import { BARE_GPU, IMPLICIT_DEVICE_CLASS_PREFIX, implicitDeviceClass, looksLikeGpu } from "../vendors/index.js";
import { gpuDeviceClass, podClaimGpuNanos, type DraCapacity, type GpuDeviceClass, type ResolvedClaims } from "./dra.js";
import { matchesGlob } from "./glob.js";
import { nanoToNumber, parseQuantity } from "./quantity.js";

/** A policy `gpu.resources` entry as this module reads it. */
export interface GpuPattern {
  readonly pattern: string;
}

/** The policy's `gpu` settings as this module reads them. */
export interface GpuSettings {
  readonly resourceName: string;
  readonly resources: readonly GpuPattern[];
}

/** What counting a pod's GPUs reads of the policy: its GPU resource, patterns and DeviceClasses. */
export interface GpuCatalog extends GpuSettings {
  readonly deviceClasses: readonly GpuDeviceClass[];
}

// The name each resource name counts as, per (frozen) catalog: a pod's few names recur in every pod.
const countedNames = new WeakMap<GpuCatalog, Map<string, string | null>>();

/** A DRA class's resource for a request that pins no partition profile (`nvidia.com/mig-{profile}` → `nvidia.com/mig-any`). */
const classResource = (c: GpuDeviceClass): string => c.resourceName.replace("{profile}", "any");

function countedAsUncached(name: string, gpu: GpuCatalog): string | undefined {
  if (name === BARE_GPU) return gpu.resourceName;
  const implicit = implicitDeviceClass(name);
  if (implicit !== undefined) {
    const cls = gpuDeviceClass(implicit, gpu.deviceClasses);
    return cls ? classResource(cls) : undefined;
  }
  const served = gpu.deviceClasses.find((c) => c.extendedResourceName === name);
  if (served && !isGpuResource(name, gpu.resources)) return classResource(served);
  return isGpuResource(name, gpu.resources) ? name : undefined;
}

/**
 * The GPU resource a container's resource name counts as: itself for a `gpu.resources` name, the policy's
 * `gpu.resourceName` for a bare `gpu`, a GPU DeviceClass's resource for its extended-resource names; undefined for
 * anything else (which is no GPU, or a GPU the policy does not know: see `looksLikeGpu` in src/vendors).
 */
export function countedAs(name: string, gpu: GpuCatalog): string | undefined {
  let known = countedNames.get(gpu);
  if (!known) countedNames.set(gpu, (known = new Map<string, string | null>()));
  let v = known.get(name);
  if (v === undefined) {
    v = countedAsUncached(name, gpu) ?? null;
    if (known.size < 1024) known.set(name, v);
  }
  return v ?? undefined;
}

// Resource names are few and recur in every pod: remember the matching policy entries per name, per
// (frozen) policy list, instead of matching every glob again for every pod.
const gpuMatches = new WeakMap<readonly GpuPattern[], Map<string, readonly GpuPattern[]>>();
const NONE: readonly GpuPattern[] = Object.freeze([]);

/** The policy entries whose pattern matches `name`. */
export function gpuResourcesFor<T extends GpuPattern>(name: string, gpu: readonly T[]): readonly T[] {
  let known = gpuMatches.get(gpu) as Map<string, readonly T[]> | undefined;
  if (!known) gpuMatches.set(gpu, (known = new Map<string, readonly T[]>()));
  let matches = known.get(name);
  if (matches === undefined) {
    const found = gpu.filter((g) => matchesGlob(g.pattern, name));
    matches = found.length === 0 ? (NONE as readonly T[]) : Object.freeze(found);
    if (known.size < 1024) known.set(name, matches);
  }
  return matches;
}

/** True when `name` is a GPU resource: some policy pattern matches it. */
export function isGpuResource(name: string, gpu: readonly GpuPattern[]): boolean {
  return gpuResourcesFor(name, gpu).length > 0;
}

/**
 * The resource names {@link countedAs} counts, as globs for the webhooks' match conditions and the guards that stand
 * in for them: a bare `gpu` (renamed by the mutation), the policy's GPU resource, every pattern, and every GPU
 * DeviceClass's extended-resource names (`deviceclass.resource.kubernetes.io/<class>`, its `extendedResourceName`).
 * The conditions also send the GPU-looking names a policy may not list (`GPU_WORD_RE2` in src/vendors), which the
 * webhook refuses under a cap (rule `gpu-unknown`): see {@link sentAsGpu}.
 */
export function gpuResourcePatterns(policy: { gpu: GpuCatalog }): string[] {
  return [
    ...new Set([
      BARE_GPU,
      policy.gpu.resourceName,
      ...policy.gpu.resources.map((r) => r.pattern),
      ...policy.gpu.deviceClasses.flatMap((c) => [`${IMPLICIT_DEVICE_CLASS_PREFIX}${c.name}`, ...(c.extendedResourceName ? [c.extendedResourceName] : [])]),
    ]),
  ];
}

/**
 * Whether a resource name makes the webhooks' match conditions send a pod or job (`gpuCondition` in
 * src/manifests/webhooks.ts renders the same test): a name counted as a GPU, or a GPU-looking one. No other name:
 * a pod that asks for neither never meets the webhooks (their cpu and memory caps included).
 */
export function sentAsGpu(name: string, gpu: GpuCatalog): boolean {
  return countedAs(name, gpu) !== undefined || looksLikeGpu(name);
}

/** Kubernetes' IsExtendedResourceName: a domain-prefixed name outside kubernetes.io, not `requests.*`. */
export function isExtendedResource(name: string): boolean {
  const slash = name.indexOf("/");
  if (slash < 0 || name.startsWith("requests.")) return false;
  const domain = name.slice(0, slash);
  return domain !== "kubernetes.io" && !domain.endsWith(".kubernetes.io");
}

/**
 * A container's request of a GPU resource in nano-units, exact. What cannot be counted (not a quantity, out of
 * range, negative) counts 0 here: the container rules (src/validate/pod-spec.ts) report it as a violation with its field path.
 */
function gpuNanos(c: V1Container, name: string): bigint {
  const raw: unknown = c.resources?.requests?.[name] ?? c.resources?.limits?.[name];
  const v = typeof raw === "string" || typeof raw === "number" ? parseQuantity(raw) : undefined;
  return v && v.nano > 0n ? v.nano : 0n;
}

/**
 * The pod's effective request of each GPU resource in nano-units (exact; 1 GPU = 10⁹), under the name each
 * resource counts as ({@link countedAs}: a bare `gpu` as `gpu.resourceName`, a DeviceClass's extended-resource
 * name as its class's resource). Two names counted as one resource add up (init containers' maxima too: never less).
 */
export function effectivePodGpuNanos(spec: V1PodSpec, gpu: GpuCatalog): Map<string, bigint> {
  // Runs for every pod of the cluster in each reconcile pass (the device ledger): no intermediate sets.
  const names: string[] = [];
  for (const list of [spec.initContainers, spec.containers]) {
    for (const c of list ?? []) {
      for (const side of [c.resources?.requests, c.resources?.limits]) {
        for (const n in side ?? {}) if (!names.includes(n) && countedAs(n, gpu) !== undefined) names.push(n);
      }
    }
  }
  const out = new Map<string, bigint>();
  for (const name of names) {
    let sidecars = 0n;
    let initMax = 0n;
    for (const c of spec.initContainers ?? []) {
      if (c.restartPolicy === "Always") sidecars += gpuNanos(c, name);
      else {
        const here = gpuNanos(c, name) + sidecars;
        if (here > initMax) initMax = here;
      }
    }
    let regular = sidecars;
    for (const c of spec.containers ?? []) regular += gpuNanos(c, name);
    const as = countedAs(name, gpu)!;
    out.set(as, (out.get(as) ?? 0n) + (regular > initMax ? regular : initMax));
  }
  return out;
}

/**
 * Everything the pod asks for as GPUs, per resource name, in nano-units: its containers' requests
 * ({@link effectivePodGpuNanos}) plus the devices its claims can be given (src/core/dra.ts), so a GPU asked for
 * through Dynamic Resource Allocation counts as its extended-resource twin. Claims made for an extended-resource
 * request are already counted by that request and are not added again.
 */
export function podGpuDemandNanos(spec: V1PodSpec, gpu: GpuCatalog, claims?: ResolvedClaims, capacity?: DraCapacity): Map<string, bigint> {
  const out = effectivePodGpuNanos(spec, gpu);
  if (!claims || claims.size === 0) return out;
  for (const [name, nano] of podClaimGpuNanos(spec, claims, gpu.deviceClasses, capacity)) out.set(name, (out.get(name) ?? 0n) + nano);
  return out;
}

/** The pod's effective request of each GPU resource in units, for accounting and display (may round). */
export function effectivePodGpus(spec: V1PodSpec, gpu: GpuCatalog): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, nano] of effectivePodGpuNanos(spec, gpu)) out.set(name, nanoToNumber(nano));
  return out;
}

/**
 * How much of a pod the webhooks' match condition walks. A wider pod (more containers and init containers, or a
 * container with more resource entries, requests and limits together) goes to the webhook without being walked,
 * and the webhook's own guard and cost bound decide (src/admission/handler.ts). Without this, a condition's work
 * grows with the pod, and past kube-apiserver's CEL budget for one expression (measured: 1,500 containers of 16
 * resources) it fails, and a failing condition takes the webhook's failurePolicy: the validating webhook's Fail
 * refused unrelated pods. Within these bounds it walks at most 64 × 32 resource names.
 */
export const CONDITION_MAX_CONTAINERS = 64;
export const CONDITION_MAX_RESOURCES = 32;

/**
 * How much of a JobSet the `jobs.validate` webhook's match condition walks (src/manifests/webhooks.ts
 * `gpuWorkloadExpression`): at most this many replicated Jobs and {@link CONDITION_MAX_CONTAINERS} containers over
 * all their templates, each within {@link CONDITION_MAX_RESOURCES}, so the condition's work is the pod condition's
 * at most. A wider JobSet is sent on unwalked, and the webhook's guard decides (src/admission/guards.ts
 * `gpuWorkloadGuard`). Trainer's runtimes have at most four (initializers, launcher, node).
 */
export const CONDITION_MAX_REPLICATED_JOBS = 16;

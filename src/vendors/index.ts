/**
 * @module
 * The GPU vendors Quartermaster knows, one entry each (a vendor is one file beside this one plus one line in
 * {@link VENDORS}), and what follows from them:
 * - the policy's default `gpu.resources` and `gpu.deviceClasses` ({@link defaultGpuResources},
 *   {@link defaultDeviceClasses});
 * - the names that look like a GPU but that a policy may not list ({@link looksLikeGpu}): under a cap such a name is
 *   refused as unknown (rule `gpu-unknown`), never counted as nothing;
 * - Kubernetes' implicit extended-resource name of every DeviceClass (`deviceclass.resource.kubernetes.io/<class>`,
 *   DRA's extended-resource support, served by default from 1.34) read back to its class ({@link implicitDeviceClass}).
 */
import { AMD } from "./amd.js";
import { NVIDIA } from "./nvidia.js";
import type { GpuVendor } from "./types.js";

export type { GpuVendor, VendorDeviceClass, VendorResource } from "./types.js";

export const VENDORS: readonly GpuVendor[] = [NVIDIA, AMD];

/** The bare resource name the mutation renames to the policy's `gpu.resourceName`. */
export const BARE_GPU = "gpu";

/** The prefix of the extended-resource name Kubernetes gives every DeviceClass (kubernetes `pkg/apis/resource`, `ResourceDeviceClassPrefix`). */
export const IMPLICIT_DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/";

/** The DeviceClass an implicit extended-resource name stands for, or undefined for any other name. */
export function implicitDeviceClass(resourceName: string): string | undefined {
  if (!resourceName.startsWith(IMPLICIT_DEVICE_CLASS_PREFIX)) return undefined;
  const cls = resourceName.slice(IMPLICIT_DEVICE_CLASS_PREFIX.length);
  return cls === "" ? undefined : cls;
}

/** The policy's default GPU resources, with the whole GPU's toleration for a partition's. */
export function defaultGpuResources(
  vendors: readonly GpuVendor[] = VENDORS,
): { pattern: string; tolerations: { key: string; operator: "Exists"; effect: "NoSchedule" }[] }[] {
  return vendors.flatMap((v) =>
    v.resources.map((r) => ({
      pattern: r.pattern,
      tolerations: r.partitionOf ? [{ key: r.partitionOf, operator: "Exists" as const, effect: "NoSchedule" as const }] : [],
    })),
  );
}

/** The policy's default GPU DeviceClasses. */
export function defaultDeviceClasses(vendors: readonly GpuVendor[] = VENDORS): { name: string; resourceName: string }[] {
  return vendors.flatMap((v) => v.deviceClasses.map((c) => ({ name: c.name, resourceName: c.resourceName })));
}

/**
 * A word `gpu`, `gpus`, `vgpu`, `gpu0`… or `mig` in a name, words split on `.`, `/`, `_` and `-`: as RE2 for the
 * webhooks' CEL match conditions (`matches()`, case-insensitive) and as a JavaScript RegExp here, one pattern for both.
 */
export const GPU_WORD_RE2 = "(?i)(^|[./_-])(mig|v?gpus?[0-9]*)([./_-]|$)";
const GPU_WORD = /(^|[./_-])(mig|v?gpus?[0-9]*)([./_-]|$)/i;

/**
 * True for a resource name or DeviceClass name that looks like a GPU: one of a vendor's own resource names or
 * classes, or a name with a word `gpu`, `gpus`, `vgpu` or `mig` (`example.com/gpu`, `nvidia.com/gpu.shared`,
 * `vfio.gpu.nvidia.com`, `deviceclass.resource.kubernetes.io/gpu.example.com`). A heuristic on purpose: it decides
 * only which names the policy must list before a pod under a GPU cap may ask for them, never what is counted.
 */
export function looksLikeGpu(name: string, vendors: readonly GpuVendor[] = VENDORS): boolean {
  const lower = name.toLowerCase();
  if (vendors.some((v) => v.resources.some((r) => r.pattern === lower) || v.deviceClasses.some((c) => c.name === lower))) return true;
  return GPU_WORD.test(lower);
}

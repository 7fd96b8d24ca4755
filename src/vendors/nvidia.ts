/**
 * @module
 * NVIDIA: the k8s-device-plugin's `nvidia.com/gpu` and MIG resources (`nvidia.com/mig-<profile>`, mixed strategy),
 * the DRA driver's DeviceClasses (NVIDIA/k8s-dra-driver-gpu: `gpu.nvidia.com`, `mig.nvidia.com`; attributes
 * `productName` and `profile`), and GPU feature discovery's `nvidia.com/gpu.product` label.
 */
import type { GpuVendor } from "./types.js";

/** GPU feature discovery's labels (NVIDIA/k8s-device-plugin, internal/lm). */
export const GFD = {
  product: "nvidia.com/gpu.product",
  replicas: "nvidia.com/gpu.replicas",
  slicesGi: "nvidia.com/gpu.slices.gi",
  migStrategy: "nvidia.com/mig.strategy",
  /** `nvidia.com/mig-<profile>.<attribute>`, the mixed strategy's per-profile labels. */
  migLabel: (profile: string, attribute: string): string => `nvidia.com/mig-${profile}.${attribute}`,
  /** The single strategy's product value, e.g. `A100-SXM4-40GB-MIG-1g.5gb`. */
  migProduct: (product: string, profile: string): string => `${product}-MIG-${profile}`,
} as const;

export const NVIDIA: GpuVendor = {
  name: "NVIDIA",
  domain: "nvidia.com",
  resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "nvidia.com/mig-*", partitionOf: "nvidia.com/gpu" }],
  deviceClasses: [
    { name: "gpu.nvidia.com", resourceName: "nvidia.com/gpu" },
    { name: "mig.nvidia.com", resourceName: "nvidia.com/mig-{profile}" },
  ],
  draAttributes: { product: "productName", profile: "profile" },
  productNodeLabel: GFD.product,
  // NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go (`VisibleDevicesFromEnvVar`): `void`, `none`
  // or empty expose no GPU; `all`, indices or UUIDs expose those. Accepted from unprivileged containers unless the
  // node's toolkit sets `accept-nvidia-visible-devices-envvar-when-unprivileged = false`.
  visibleDevicesEnv: { name: "NVIDIA_VISIBLE_DEVICES", none: ["void", "none", ""] },
};

/**
 * @module
 * NVIDIA: the k8s-device-plugin's `nvidia.com/gpu` and MIG resources (`nvidia.com/mig-<profile>`, mixed strategy),
 * the DRA driver's DeviceClasses (NVIDIA/k8s-dra-driver-gpu: `gpu.nvidia.com`, `mig.nvidia.com`; attributes
 * `productName` and `profile`), and GPU feature discovery's `nvidia.com/gpu.product` label.
 */
import type { GpuVendor } from "./types.js";

export const NVIDIA: GpuVendor = {
  name: "NVIDIA",
  domain: "nvidia.com",
  resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "nvidia.com/mig-*", partitionOf: "nvidia.com/gpu" }],
  deviceClasses: [
    { name: "gpu.nvidia.com", resourceName: "nvidia.com/gpu" },
    { name: "mig.nvidia.com", resourceName: "nvidia.com/mig-{profile}" },
  ],
  draAttributes: { product: "productName", profile: "profile" },
  productNodeLabel: "nvidia.com/gpu.product",
};

/**
 * @module
 * AMD: the ROCm k8s-device-plugin's `amd.com/gpu`, the DRA driver's `gpu.amd.com` DeviceClass
 * (ROCm/k8s-gpu-dra-driver; attribute `productName`), and the node labeller's `amd.com/gpu.product-name`.
 */
import type { GpuVendor } from "./types.js";

export const AMD: GpuVendor = {
  name: "AMD",
  domain: "amd.com",
  resources: [{ pattern: "amd.com/gpu" }],
  deviceClasses: [{ name: "gpu.amd.com", resourceName: "amd.com/gpu" }],
  draAttributes: { product: "productName" },
  productNodeLabel: "amd.com/gpu.product-name",
  // ROCm/container-toolkit (amd-container-runtime): `AMD_VISIBLE_DEVICES` (`all`, indices, ranges) exposes those GPUs;
  // `none` or empty none.
  visibleDevicesEnv: { name: "AMD_VISIBLE_DEVICES", none: ["none", ""] },
};

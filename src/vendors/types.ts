/**
 * @module
 * What a GPU is for one vendor, as data: one {@link GpuVendor} per file in this folder, listed once in `index.ts`.
 * The policy's defaults (`gpu.resources`, `gpu.deviceClasses`) are made from these entries, and the counting
 * (`src/core/gpu.ts`) reads the policy, so a vendor added here is counted by the caps, the match conditions, the
 * exported policies and the ledger without another edit.
 */

/** A device-plugin resource of the vendor: a name or a glob (`nvidia.com/mig-*`). */
export interface VendorResource {
  readonly pattern: string;
  /** A partition of a device (a MIG slice): its nodes are tainted like whole-GPU nodes, so it brings the whole GPU's toleration. */
  readonly partitionOf?: string;
}

/** A DeviceClass the vendor's DRA driver publishes, and the extended-resource name its devices stand for. */
export interface VendorDeviceClass {
  readonly name: string;
  /** `{profile}` where a partition profile selects the name (`nvidia.com/mig-{profile}`). */
  readonly resourceName: string;
}

export interface GpuVendor {
  /** Short name, for messages and docs. */
  readonly name: string;
  /** The vendor's DNS domain: its resource names are `<domain>/...`, its DeviceClasses `*.<domain>`. */
  readonly domain: string;
  readonly resources: readonly VendorResource[];
  readonly deviceClasses: readonly VendorDeviceClass[];
  /** DRA device attributes its driver publishes for the product and the partition profile. */
  readonly draAttributes: { readonly product: string; readonly profile?: string };
  /** The node label that names the product (GPU feature discovery or the vendor's labeller). */
  readonly productNodeLabel: string;
  /**
   * The environment variable the vendor's container runtime reads to expose devices to a container, whatever the
   * container's resources say (where the node's runtime accepts it from unprivileged containers), and the values
   * that expose none. Its device plugin sets it for the devices it allocated; set in a pod spec, it asks for devices
   * no cap can count.
   */
  readonly visibleDevicesEnv?: { readonly name: string; readonly none: readonly string[] };
}

/**
 * @module
 * Do the cluster's DeviceClasses (`resource.k8s.io/v1`, Dynamic Resource Allocation) agree with the policy's
 * `gpu` section? Issue 45 finding 7: a GPU class the policy does not list counts nothing, so under a GPU cap the
 * webhooks refuse pods and claims asking for it (rule `gpu-unknown`), and without one its devices pass uncounted.
 * Two findings per class, each a warning:
 * - a class whose name looks like a GPU's (`looksLikeGpu`, src/vendors: `vfio.gpu.nvidia.com`, `gpu.example.com`),
 *   or whose object may select GPUs (`classSelectsGpus`: a selector naming a GPU driver, no selectors), that is not in
 *   `gpu.deviceClasses`;
 * - a class whose `spec.extendedResourceName` (DRA's extended-resource support: a container asking for that
 *   resource is given the class's devices) is neither a `gpu.resources` name nor a listed class's
 *   `extendedResourceName`, when the class or the name is a GPU's (listed, or looking like one): such a
 *   container's GPUs are not counted as the class's. Another class's extended resource (a NIC's) is info.
 * No DeviceClass API (404: before Kubernetes 1.34, or DRA off) means nothing to check.
 */
import { classSelectsGpus, gpuDeviceClass } from "../core/dra.js";
import { isGpuResource } from "../core/gpu.js";
import type { Policy } from "../policy/types.js";
import { looksLikeGpu } from "../vendors/index.js";
import { findingsOf, isUnreadable, type DeviceClassesState, type DoctorFinding } from "./types.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

const FIX_CLASS = "add it to the policy's gpu.deviceClasses with the resource it stands for (name, resourceName), and roll the webhook";

/** Why an unlisted class may be a GPU class: its name, or its object (`classSelectsGpus`: what the webhooks read under a GPU cap). */
function unlistedGpu(name: string, dc: unknown, deviceClasses: Policy["gpu"]["deviceClasses"]): string | undefined {
  if (looksLikeGpu(name)) return "looks like a GPU class";
  const selects = classSelectsGpus(dc, deviceClasses);
  return selects && `may select GPUs (${selects})`;
}

export function checkDeviceClasses(state: DeviceClassesState | undefined, policy: Pick<Policy, "gpu">): DoctorFinding[] {
  if (state === undefined || state === "absent") return [];
  const finding = findingsOf("device-classes");
  if (isUnreadable(state))
    return [
      finding(
        "warning",
        "DeviceClasses",
        `not checked: cannot list deviceclasses.resource.k8s.io (${state.error})`,
        "let the user running doctor list deviceclasses (resource.k8s.io)",
      ),
    ];
  const { deviceClasses, resources } = policy.gpu;
  const served = new Set(deviceClasses.flatMap((c) => (c.extendedResourceName ? [c.extendedResourceName] : [])));
  const out: DoctorFinding[] = [];
  for (const dc of state) {
    const name = str(obj(dc.metadata).name);
    if (name === undefined) continue;
    const subject = `DeviceClass ${name}`;
    const listed = gpuDeviceClass(name, deviceClasses) !== undefined;
    const why = listed ? undefined : unlistedGpu(name, dc, deviceClasses);
    if (why)
      out.push(
        finding(
          "warning",
          subject,
          `${why} but is not in the policy's gpu.deviceClasses: its devices are not counted, and under a GPU cap pods and claims asking for them are refused (gpu-unknown)`,
          FIX_CLASS,
        ),
      );
    const ern = str(obj(dc.spec).extendedResourceName);
    if (ern === undefined || isGpuResource(ern, resources) || served.has(ern)) continue;
    const gpu = listed || looksLikeGpu(name) || looksLikeGpu(ern);
    out.push(
      finding(
        gpu ? "warning" : "info",
        subject,
        `serves the extended resource ${ern} (spec.extendedResourceName), which the policy neither lists in gpu.resources nor maps (gpu.deviceClasses[].extendedResourceName): a container asking for it ${gpu ? "is not counted as this class's GPUs" : "is not counted as a GPU"}`,
        gpu ? `set extendedResourceName: ${ern} on the policy's gpu.deviceClasses entry for ${name}` : "",
      ),
    );
  }
  if (out.length === 0) out.push(finding("ok", "DeviceClasses", `${state.length} DeviceClass${state.length === 1 ? "" : "es"}, every GPU one in the policy`));
  return out;
}

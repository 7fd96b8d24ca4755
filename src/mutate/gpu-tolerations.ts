/**
 * @module
 * GPU tolerations. For each resource in the requests or limits of any container or init container that
 * matches a policy GPU pattern, in sorted order: `{key: <resource>, operator: Exists, effect: NoSchedule}`
 * (what the ExtendedResourceToleration admission plugin adds, kubernetes#55080) plus the extra
 * tolerations the policy maps to that pattern, such as MIG slices tolerating the `nvidia.com/gpu` taint or a
 * custom `sku=gpu` taint, which the built-in plugin cannot do. Equal tolerations are never duplicated.
 * Limits count as well as requests, because a webhook cannot rely on defaulting having copied them.
 */
import type { V1Toleration } from "@kubernetes/client-node";
import { claimGpuResourceNames, isMalformedList, resourceNames, withTolerations } from "./pod.js";
import { countedAs, gpuResourcesFor } from "../core/gpu.js";
import type { Mutation } from "./types.js";
import type { Pod } from "../core/kube.js";

function wanted(pod: Pod, ctx: Parameters<Mutation["mutate"]>[1]): V1Toleration[] {
  const out: V1Toleration[] = [];
  // A GPU asked for through a claim (DRA) needs the same tolerations as its extended-resource twin.
  const names = [...new Set([...resourceNames(pod, ["containers", "initContainers"]), ...claimGpuResourceNames(pod, ctx.policy.gpu, ctx.claims)])].sort();
  // A bare `gpu` and a DeviceClass's extended-resource names land on the nodes of the resource they count as.
  const counted = [...new Set(names.map((n) => countedAs(n, ctx.policy.gpu) ?? n))].sort();
  for (const name of counted) {
    const matches = gpuResourcesFor(name, ctx.policy.gpu.resources);
    if (matches.length === 0) continue;
    out.push({ key: name, operator: "Exists", effect: "NoSchedule" });
    for (const m of matches) out.push(...m.tolerations);
  }
  return out;
}

export const addGpuTolerations: Mutation = {
  name: "gpu-tolerations",
  mutate: (pod, ctx) => withTolerations(pod, wanted(pod, ctx)),
  explain(before, after) {
    const added = (after.spec?.tolerations ?? []).slice(before.spec?.tolerations?.length ?? 0);
    return `quartermaster: added tolerations for ${[...new Set(added.map((t) => t.key ?? "*"))].join(", ")}`;
  },
  advise(pod, ctx) {
    // withTolerations leaves tolerations that are not a list as they came.
    if (!isMalformedList(pod.spec?.tolerations) || wanted(pod, ctx).length === 0) return [];
    return ["quartermaster: no GPU tolerations added: spec.tolerations is not a list (left untouched)"];
  },
};

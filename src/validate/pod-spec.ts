/**
 * @module
 * Rules on a pod spec, used for pods and for every replica template of a job (so a job over a limit is
 * refused when it is created, not when its pods fail to appear):
 * - container-limits: each container's and init container's requests and limits of cpu, memory and every
 *   GPU resource at most the per-container limit (LimitRanger's `max`, with its wording);
 * - extended-resources: extended resources (GPUs, MIG slices) whole numbers, request == limit;
 * - gpu-mig-mixing: no container asks for whole GPUs and MIG slices at once;
 * - pod-gpus: the pod's effective GPU request (Kubernetes' rule: the larger of the sum over containers and
 *   native sidecars, and each regular init container plus the sidecars started before it) at most the
 *   per-pod limit;
 * - gpu-unknown: under a GPU cap, a resource name that looks like a GPU (src/vendors `looksLikeGpu`) but that the
 *   policy does not count is refused: counted as nothing, it would pass every cap; so is a container setting a
 *   vendor's visible-devices variable (`NVIDIA_VISIBLE_DEVICES=all`) to expose devices, or from a source the
 *   webhook cannot read: the runtime would give it GPUs its resources do not ask for.
 * A bare `gpu` and a DeviceClass's extended-resource names are held to the caps of the resource they count as
 * (src/core/gpu.ts `countedAs`).
 */
import type { V1Container, V1PodSpec } from "@kubernetes/client-node";
import { matchesGlob } from "../core/glob.js";
import { resolveClaims } from "../core/dra.js";
import { countedAs, isExtendedResource, podGpuDemandNanos } from "../core/gpu.js";
import { VENDORS, looksLikeGpu } from "../vendors/index.js";
import {
  checkQuantity,
  compareQuantities,
  formatNano,
  isInteger,
  isNegative,
  nanoOfUnits,
  nanoToNumber,
  parseQuantity,
  quantityOfUnits,
  toNumber,
  type Quantity,
} from "../core/quantity.js";
import type { Findings, ValidationContext } from "./types.js";

/** Near-limit warnings at 90 %: value × 10 ≥ max × 9, in exact integers. */
export function nearLimit(value: bigint, max: bigint): boolean {
  return max > 0n && value * 10n >= max * 9n;
}

function q(v: unknown): Quantity | undefined {
  return typeof v === "string" || typeof v === "number" ? parseQuantity(v) : undefined;
}

/** Per-container maximum for `resource`: cpu, memory, or the first GPU entry whose name or pattern matches. */
export function containerMax(resource: string, ctx: ValidationContext): { max: Quantity; text: string } | undefined {
  const l = ctx.limits.container;
  if (resource === "cpu" || resource === "memory") {
    const text = l[resource];
    const max = text === undefined ? undefined : parseQuantity(text);
    return max && text !== undefined ? { max, text } : undefined;
  }
  for (const [pattern, n] of Object.entries(l.gpus ?? {})) {
    if (matchesGlob(pattern, resource)) return { max: quantityOfUnits(n), text: String(n) };
  }
  return undefined;
}

interface Located {
  c: V1Container;
  path: string;
  sidecar: boolean;
  init: boolean;
}

function containersOf(spec: V1PodSpec, base: string): Located[] {
  return [
    ...(spec.initContainers ?? []).map((c, i) => ({ c, path: `${base}.initContainers[${i}]`, sidecar: c.restartPolicy === "Always", init: true })),
    ...(spec.containers ?? []).map((c, i) => ({ c, path: `${base}.containers[${i}]`, sidecar: false, init: false })),
  ];
}

/** The rules on one resource entry of one container: quantity, the per-container cap, whole extended resources. */
function entryRules(
  raw: unknown,
  at: { name: string; side: "requests" | "limits"; path: string; limits: Record<string, unknown> },
  ctx: ValidationContext,
  out: Findings,
): void {
  const { name, side } = at;
  const field = `${at.path}.resources.${side}[${name}]`;
  const gpu = countedAs(name, ctx.policy.gpu);
  const bound = containerMax(gpu ?? name, ctx);
  // Where a limit applies (a container cap, or a GPU count that pod, job and capacity limits sum), a value
  // that cannot be compared exactly (unparseable, too long, out of range, not a string/number, negative)
  // is a violation, never a silent pass. Elsewhere Quartermaster has no say: the apiserver judges it.
  const counted = bound !== undefined || gpu !== undefined;
  const checked = checkQuantity(raw);
  if (!checked.ok) {
    if (counted) out.violations.push({ rule: "quantity", field, message: checked.message });
    return;
  }
  const value = checked.quantity;
  if (isNegative(value)) {
    if (counted) out.violations.push({ rule: "quantity", field, message: `${String(raw)} must be greater than or equal to 0` });
    return;
  }
  // A request equal to its over-limit limit says nothing new (API defaulting copies limits to requests).
  const limit = side === "requests" ? q(at.limits[name]) : undefined;
  const sameAsLimit = limit !== undefined && compareQuantities(value, limit) === 0;
  if (bound && compareQuantities(value, bound.max) > 0 && !sameAsLimit) {
    out.violations.push({
      rule: "container-limits",
      field,
      message: `${String(raw)} exceeds the per-container limit of ${bound.text}`,
      value: toNumber(value),
    });
  } else if (bound && side === "limits" && nearLimit(value.nano, bound.max.nano)) {
    out.warnings.push(`quartermaster: ${field} ${String(raw)} is near the per-container limit of ${bound.text}`);
  }
  if ((isExtendedResource(name) || gpu !== undefined) && !isInteger(value)) {
    out.violations.push({ rule: "extended-resources", field, message: `${String(raw)} must be a whole number: ${name} cannot be shared` });
  }
}

/** Extended resources are not overcommitted: a request needs a limit, and the two are equal. */
function extendedPairRules(path: string, requests: Record<string, unknown>, limits: Record<string, unknown>, out: Findings): void {
  for (const name of new Set([...Object.keys(requests), ...Object.keys(limits)])) {
    if (!isExtendedResource(name)) continue;
    const r = q(requests[name]);
    const l = q(limits[name]);
    if (r && l && compareQuantities(r, l) !== 0) {
      out.violations.push({
        rule: "extended-resources",
        field: `${path}.resources.requests[${name}]`,
        message: `request ${String(requests[name])} must equal limit ${String(limits[name])}: ${name} is not overcommitted`,
      });
    } else if (r && !l && limits[name] === undefined) {
      out.violations.push({
        rule: "extended-resources",
        field: `${path}.resources.limits[${name}]`,
        message: `a limit is required and must equal the request ${String(requests[name])}`,
      });
    }
  }
}

/** No container asks for whole GPUs and MIG slices at once. */
function migMixingRule(path: string, requests: Record<string, unknown>, limits: Record<string, unknown>, ctx: ValidationContext, out: Findings): void {
  const names = new Set<string>();
  for (const n of [...Object.keys(requests), ...Object.keys(limits)]) {
    const gpu = countedAs(n, ctx.policy.gpu);
    if (gpu !== undefined) names.add(gpu);
  }
  const mig = [...names].filter((n) => n.startsWith("nvidia.com/mig-"));
  if (names.has("nvidia.com/gpu") && mig.length > 0) {
    out.violations.push({
      rule: "gpu-mig-mixing",
      field: `${path}.resources`,
      message: `asks for whole GPUs (nvidia.com/gpu) and MIG slices (${mig.join(", ")}) at once; use one or the other`,
    });
  }
}

/** Whether any GPU cap applies in the namespace: per container, per pod or per job. */
export function gpuCapApplies(ctx: ValidationContext): boolean {
  return Object.keys(ctx.limits.container.gpus ?? {}).length > 0 || ctx.limits.pod.gpus !== undefined || ctx.limits.job.gpus !== undefined;
}

/** gpu-unknown: each GPU-looking resource name the policy does not count, once per container, where a GPU cap applies. */
function unknownGpuRule(path: string, requests: Record<string, unknown>, limits: Record<string, unknown>, ctx: ValidationContext, out: Findings): void {
  for (const [side, names] of [
    ["limits", Object.keys(limits)],
    ["requests", Object.keys(requests).filter((n) => !Object.hasOwn(limits, n))],
  ] as const) {
    for (const name of names) {
      if (countedAs(name, ctx.policy.gpu) !== undefined || !looksLikeGpu(name)) continue;
      out.violations.push({
        rule: "gpu-unknown",
        field: `${path}.resources.${side}[${name}]`,
        message: `${name} looks like a GPU but the policy does not count it, so it cannot be held to the GPU limits; ask for ${ctx.policy.gpu.resourceName}, or have the platform add ${name} to gpu.resources (a DeviceClass's name to gpu.deviceClasses)`,
      });
    }
  }
}

/** The vendors' visible-devices variables (`NVIDIA_VISIBLE_DEVICES`...), by name. */
const VISIBLE_DEVICES = new Map(
  VENDORS.flatMap((v) => (v.visibleDevicesEnv ? [[v.visibleDevicesEnv.name, { vendor: v, ...v.visibleDevicesEnv }] as const] : [])),
);

/**
 * gpu-unknown: a container's `env` entry naming a vendor's visible-devices variable with a value that exposes devices
 * (or a `valueFrom` the webhook cannot read). The container runtime would give it those GPUs whatever its resources
 * say, and the device plugin's own value can be overridden by it. An image's `ENV` or an `envFrom` source is not in
 * the pod spec: the nodes' runtime setting closes those (docs/policy.md, gpu-unknown).
 */
function visibleDevicesRule(c: V1Container, path: string, out: Findings): void {
  const env: unknown = c.env;
  if (!Array.isArray(env)) return;
  env.forEach((e: unknown, j) => {
    if (typeof e !== "object" || e === null) return;
    const { name, value, valueFrom } = e as { name?: unknown; value?: unknown; valueFrom?: unknown };
    const known = typeof name === "string" ? VISIBLE_DEVICES.get(name) : undefined;
    if (!known) return;
    const text = valueFrom !== undefined ? undefined : typeof value === "string" ? value.trim().toLowerCase() : "";
    if (text !== undefined && known.none.includes(text)) return;
    const setTo = text === undefined ? `${known.name} from valueFrom (not readable here)` : `${known.name}=${String(value)}`;
    const resource = known.vendor.resources[0]!.pattern;
    out.violations.push({
      rule: "gpu-unknown",
      field: `${path}.env[${j}]`,
      message: `${setTo} asks ${known.vendor.name}'s container runtime for GPUs outside the container's resources, so they cannot be held to the GPU limits; remove it and ask for ${resource} (its device plugin sets ${known.name} to the GPUs it allocates)`,
    });
  });
}

function containerRules(all: Located[], ctx: ValidationContext): Findings {
  const out: Findings = { violations: [], warnings: [] };
  const capped = gpuCapApplies(ctx);
  for (const { c, path } of all) {
    const requests: Record<string, unknown> = c.resources?.requests ?? {};
    const limits: Record<string, unknown> = c.resources?.limits ?? {};
    for (const side of ["requests", "limits"] as const) {
      for (const [name, raw] of Object.entries(c.resources?.[side] ?? {})) entryRules(raw, { name, side, path, limits }, ctx, out);
    }
    extendedPairRules(path, requests, limits, out);
    migMixingRule(path, requests, limits, ctx, out);
    if (capped) {
      unknownGpuRule(path, requests, limits, ctx, out);
      visibleDevicesRule(c, path, out);
    }
  }
  return out;
}

/** What the pod asks for as GPUs, per resource, in nano-units: container requests and the devices of its claims (DRA). */
export function podGpuDemand(spec: V1PodSpec, ctx: ValidationContext): Map<string, bigint> {
  return podGpuDemandNanos(spec, ctx.policy.gpu, resolveClaims(spec, ctx.claims), ctx.draCapacity);
}

/** The pod's effective GPU request over all GPU resources, in nano-units (exact), claims included. */
export function podGpuNanos(spec: V1PodSpec, ctx: ValidationContext): bigint {
  let n = 0n;
  for (const v of podGpuDemand(spec, ctx).values()) n += v;
  return n;
}

/** The pod's effective GPU request over all GPU resources, in units (display; limits use {@link podGpuNanos}). */
export function podGpuTotal(spec: V1PodSpec, ctx: ValidationContext): number {
  return nanoToNumber(podGpuNanos(spec, ctx));
}

/** All pod-spec rules for the spec at `path` (`spec`, or a template's `...template.spec`). */
export function validatePodSpec(spec: V1PodSpec | undefined, path: string, ctx: ValidationContext): Findings {
  if (!spec) return { violations: [], warnings: [] };
  const found = containerRules(containersOf(spec, path), ctx);
  const max = ctx.limits.pod.gpus;
  if (max !== undefined) {
    const total = podGpuNanos(spec, ctx);
    if (total > nanoOfUnits(max)) {
      const shown = formatNano(total);
      found.violations.push({
        rule: "pod-gpus",
        field: path,
        message: `the pod requests ${shown} GPUs, over the per-pod limit of ${max}`,
        value: nanoToNumber(total),
      });
    }
  }
  return found;
}

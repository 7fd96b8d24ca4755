/**
 * @module
 * The platform's limits on GPUs asked for through Dynamic Resource Allocation, under the same rule names as the
 * same request written as an extended resource, so enforcement modes and reports treat both alike:
 * - container-limits: the devices of the claims (or the claim requests) a container names in
 *   `resources.claims`, per resource name, at most the per-container cap; each `firstAvailable` alternative is
 *   held to the cap of its own resource (the scheduler takes the first that fits, not the largest);
 * - accelerator-allowed: products (`productName`) and MIG profiles (`profile`) a request's CEL selectors pin
 *   must be among `allowedAccelerators` / `allowedPartitions`, for every `firstAvailable` alternative; a
 *   selector that tests them any other way (`!=`, `matches`, a disjunction, an index that is not a name) could
 *   select any and is refused while a list is set. A request with no product selector is not refused, as a
 *   pod asking for `nvidia.com/gpu` without an accelerator annotation or node selection is not
 *   (src/validate/accelerator.ts): the allow-lists judge what is asked for;
 * - gpu-unknown (issue 45, "unknown is not zero"): under a GPU cap (a per-container GPU cap, `limits.pod.gpus`
 *   or `limits.job.gpus`), what cannot be counted is refused at its field: a ResourceClaim or
 *   ResourceClaimTemplate that does not exist yet (created after the pod, it would never be counted) or could
 *   not be read, a request with `allocationMode: All` whose devices no known capacity bounds, and a request of
 *   a DeviceClass the policy does not list but that looks like a GPU's (`looksLikeGpu`, src/vendors) or whose object,
 *   read by the webhook, may select GPUs or is not known (`classSelectsGpus`, src/core/dra.ts). Where no
 *   GPU cap applies, a claim that is absent or unreadable is a warning (nothing would be counted against). The
 *   rule's mode is the policy's (`enforcement`: `gpu-unknown: warn` admits, counted without the unknown part).
 * The counted total itself is checked with the containers' requests in `pod-spec.ts` (pod-gpus, job-gpus).
 * The same rules judge a ResourceClaim or ResourceClaimTemplate at its own CREATE ({@link validateClaimObject}),
 * as if one container of one pod asked for all of it.
 */
import { isObject } from "../core/object.js";
import type { V1PodSpec } from "@kubernetes/client-node";
import {
  alternativesOf,
  claimGpuRequests,
  podGpuClaims,
  resolveClaims,
  unlistedGpuClasses,
  type ClaimSpec,
  type GpuRequest,
  type PodGpuClaim,
  type UnlistedGpuClass,
} from "../core/dra.js";
import { containerMax, gpuCapApplies } from "./pod-spec.js";
import type { Findings, ValidationContext } from "./types.js";

/** A GFD label value writes the product with dashes where NVML's name (the DRA `productName`) has spaces. */
const asLabelValue = (product: string): string => product.trim().replace(/\s+/g, "-");

function acceleratorRules(gpu: GpuRequest, field: string, what: string, ctx: ValidationContext, out: Findings): void {
  const { allowedAccelerators, allowedPartitions } = ctx.limits;
  const report = (message: string): void => void out.violations.push({ rule: "accelerator-allowed", field, message });
  for (const product of gpu.products) {
    if (allowedAccelerators && !allowedAccelerators.includes(product) && !allowedAccelerators.includes(asLabelValue(product)))
      report(`${what} asks for accelerator ${product}, not allowed in namespace ${ctx.namespace}; allowed: ${allowedAccelerators.join(", ") || "none"}`);
  }
  for (const profile of gpu.profiles) {
    if (allowedPartitions && !allowedPartitions.includes(profile))
      report(`${what} asks for GPU partition ${profile}, not allowed in namespace ${ctx.namespace}; allowed: ${allowedPartitions.join(", ") || "none"}`);
  }
  if (gpu.openSelectors.length > 0 && (allowedAccelerators || allowedPartitions)) {
    report(
      `${what} has a selector that may select any accelerator or partition (${gpu.openSelectors.join("; ")}); namespace ${ctx.namespace} allows only the listed ones (pin them with == or in [...])`,
    );
  }
}

/** `allocationMode: All` with no known capacity: a count nothing bounds, refused under a GPU cap (`gpu-unknown`). */
function unboundedRule(gpu: GpuRequest, field: string, what: string, ctx: ValidationContext, out: Findings): void {
  if (gpu.count !== undefined || !gpuCapApplies(ctx)) return;
  out.violations.push({
    rule: "gpu-unknown",
    field,
    message: `${what} asks for every ${gpu.deviceClassName} device of a node (allocationMode: All), and no known capacity bounds how many, so it cannot be held to the GPU limits; ask for an exact count`,
  });
}

/** The rules every GPU request of a claim is held to, each `firstAvailable` alternative on its own. */
function requestRules(gpu: GpuRequest, field: (alt: GpuRequest) => string, what: (alt: GpuRequest) => string, ctx: ValidationContext, out: Findings): void {
  for (const alt of alternativesOf(gpu)) {
    acceleratorRules(alt, field(alt), what(alt), ctx, out);
    unboundedRule(alt, field(alt), what(alt), ctx, out);
  }
}

/**
 * A request of a DeviceClass the policy does not list whose devices may be GPUs (its name, or its object as read) or
 * are not known: refused under a GPU cap (`gpu-unknown`).
 */
function unlistedRule(u: UnlistedGpuClass, field: string, what: string, ctx: ValidationContext, out: Findings): void {
  if (!gpuCapApplies(ctx)) return;
  out.violations.push({
    rule: "gpu-unknown",
    field,
    message: `${what} asks for devices of DeviceClass ${u.deviceClassName}, which ${u.why} and is not in the policy's gpu.deviceClasses, so they cannot be counted against the GPU limits; have the platform add it to gpu.deviceClasses with the resource it stands for (or narrow its selectors to devices that are no GPUs)`,
  });
}

/**
 * Per resource name, the most devices the requests can be given of it: per request, its largest alternative of
 * that resource (any alternative may be the one given), summed over the requests.
 */
function mostPerResource(gpus: readonly GpuRequest[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const gpu of gpus) {
    const most = new Map<string, number>();
    for (const alt of alternativesOf(gpu)) most.set(alt.resourceName, Math.max(most.get(alt.resourceName) ?? 0, alt.count ?? 0));
    for (const [resourceName, n] of most) out.set(resourceName, (out.get(resourceName) ?? 0) + n);
  }
  return out;
}

const describe = (c: PodGpuClaim, alt: GpuRequest): string => `claim ${c.claim} (${c.source}, request ${alt.request})`;

/** The claim requests one container entry of `resources.claims` names: the whole claim, or one request of it. */
function named(entry: unknown, claims: readonly PodGpuClaim[]): PodGpuClaim[] {
  if (!isObject(entry) || typeof entry.name !== "string") return [];
  const request = typeof entry.request === "string" ? entry.request : undefined;
  return claims.filter((c) => c.claim === entry.name && (request === undefined || c.gpu.request.split("/")[0] === request));
}

/** What is known of one `spec.resourceClaims` entry's claim or template. */
type Lookup = { kind: "found"; spec: ClaimSpec } | { kind: "missing" } | { kind: "unreadable"; reason: string } | { kind: "unread" };

function lookup(ref: { claim?: string; template?: string }, known: NonNullable<ValidationContext["claims"]>): Lookup {
  const [name, map, failed] =
    ref.claim !== undefined ? [ref.claim, known.claims, known.unreadable?.claims] : [ref.template!, known.templates, known.unreadable?.templates];
  if (map.has(name)) {
    const spec = map.get(name);
    return spec === undefined ? { kind: "missing" } : { kind: "found", spec };
  }
  const reason = failed?.get(name);
  return reason !== undefined ? { kind: "unreadable", reason } : { kind: "unread" };
}

/**
 * gpu-unknown for the claims a pod spec names that are not known: absent, unreadable or not looked up (under a
 * GPU cap a violation at `spec.resourceClaims[i]`, else a warning for the first two), and for the requests of
 * known claims whose DeviceClass looks like a GPU's but the policy does not list.
 */
function unknownClaims(spec: V1PodSpec, path: string, ctx: ValidationContext, out: Findings): void {
  const known = ctx.claims!;
  const capped = gpuCapApplies(ctx);
  // A pod's spec is at `spec`; a job's templates are deeper.
  const subject = path === "spec" ? "pod" : "job";
  const entries: unknown[] = Array.isArray(spec.resourceClaims) ? spec.resourceClaims : [];
  entries.forEach((entry, i) => {
    if (!isObject(entry) || typeof entry.name !== "string") return;
    const claim = typeof entry.resourceClaimName === "string" ? entry.resourceClaimName : undefined;
    const template = claim === undefined && typeof entry.resourceClaimTemplateName === "string" ? entry.resourceClaimTemplateName : undefined;
    if (claim === undefined && template === undefined) return;
    const kind = claim !== undefined ? "ResourceClaim" : "ResourceClaimTemplate";
    const name = (claim ?? template)!;
    const what = `${kind} ${name} (claim ${entry.name})`;
    const field = `${path}.resourceClaims[${i}]`;
    const found = lookup({ ...(claim !== undefined ? { claim } : { template }) }, known);
    const uncounted = "so the GPUs it asks for cannot be counted against the GPU limits";
    if (found.kind === "found") {
      for (const u of unlistedGpuClasses(found.spec, ctx.policy.gpu.deviceClasses, known.deviceClasses))
        unlistedRule(u, field, `claim ${entry.name} (${kind}/${name}, request ${u.request})`, ctx, out);
    } else if (found.kind === "missing") {
      if (capped)
        out.violations.push({ rule: "gpu-unknown", field, message: `${what} does not exist, ${uncounted}: create ${kind} ${name} before the ${subject}` });
      else out.warnings.push(`quartermaster: ${what} was not found: its devices are not counted here; it is checked when it is created`);
    } else if (found.kind === "unreadable") {
      if (capped)
        out.violations.push({
          rule: "gpu-unknown",
          field,
          message: `${what} could not be read (${found.reason}), ${uncounted}: retry; if it persists, check that the webhook may get ${kind === "ResourceClaim" ? "resourceclaims" : "resourceclaimtemplates"}.resource.k8s.io (manifests/base/rbac.yaml)`,
        });
      else out.warnings.push(`quartermaster: ${what} could not be read, its GPUs not counted: ${found.reason}`);
    } else if (capped) {
      out.violations.push({ rule: "gpu-unknown", field, message: `${what} was not read with the ${subject}, ${uncounted}` });
    }
  });
}

/** The DRA rules for the pod spec at `path`. */
export function validatePodClaims(spec: V1PodSpec | undefined, path: string, ctx: ValidationContext): Findings {
  const out: Findings = { violations: [], warnings: [] };
  if (!spec || !ctx.claims) return out;
  const claims = podGpuClaims(spec, resolveClaims(spec, ctx.claims), ctx.policy.gpu.deviceClasses, ctx.draCapacity);
  for (const c of claims) {
    requestRules(
      c.gpu,
      () => `${path}.resourceClaims[${c.index}]`,
      (alt) => describe(c, alt),
      ctx,
      out,
    );
  }
  for (const [list, containers] of [
    ["initContainers", spec.initContainers],
    ["containers", spec.containers],
  ] as const) {
    (Array.isArray(containers) ? containers : []).forEach((container, i) => {
      const entries: unknown[] = Array.isArray(container?.resources?.claims) ? container.resources.claims : [];
      const perResource = mostPerResource(entries.flatMap((entry) => named(entry, claims).map((c) => c.gpu)));
      for (const [resourceName, count] of perResource) {
        const bound = containerMax(resourceName, ctx);
        if (bound && BigInt(count) * 1_000_000_000n > bound.max.nano) {
          out.violations.push({
            rule: "container-limits",
            field: `${path}.${list}[${i}].resources.claims`,
            message: `its claims ask for ${count} ${resourceName}, over the per-container limit of ${bound.text}`,
            value: count,
          });
        }
      }
    });
  }
  unknownClaims(spec, path, ctx, out);
  return out;
}

/**
 * The DRA rules for a ResourceClaim or ResourceClaimTemplate at its own CREATE: its GPU devices are what one pod
 * using it gets at least, so they are held to the per-container and per-pod caps and the allow-lists.
 * `path` is where the claim spec is (`spec`, or `spec.spec` for a template).
 */
export function validateClaimObject(spec: ClaimSpec | undefined, path: string, ctx: ValidationContext): Findings {
  const out: Findings = { violations: [], warnings: [] };
  const requests = claimGpuRequests(spec, ctx.policy.gpu.deviceClasses, ctx.draCapacity);
  for (const gpu of requests)
    requestRules(
      gpu,
      (alt) => `${path}.${alt.field}`,
      (alt) => `request ${alt.request}`,
      ctx,
      out,
    );
  for (const u of unlistedGpuClasses(spec, ctx.policy.gpu.deviceClasses, ctx.claims?.deviceClasses))
    unlistedRule(u, `${path}.${u.field}`, `request ${u.request}`, ctx, out);
  for (const [resourceName, count] of mostPerResource(requests)) {
    const bound = containerMax(resourceName, ctx);
    if (bound && BigInt(count) * 1_000_000_000n > bound.max.nano)
      out.violations.push({
        rule: "container-limits",
        field: `${path}.devices.requests`,
        message: `asks for ${count} ${resourceName}, over the per-container limit of ${bound.text}`,
        value: count,
      });
  }
  const total = requests.reduce((n, gpu) => n + (gpu.count ?? 0), 0);
  const podMax = ctx.limits.pod.gpus;
  if (podMax !== undefined && total > podMax)
    out.violations.push({
      rule: "pod-gpus",
      field: `${path}.devices.requests`,
      message: `asks for ${total} GPUs, over the per-pod limit of ${podMax}`,
      value: total,
    });
  return out;
}

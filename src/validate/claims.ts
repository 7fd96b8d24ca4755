/**
 * @module
 * The platform's limits on GPUs asked for through Dynamic Resource Allocation, under the same rule names as the
 * same request written as an extended resource, so enforcement modes and reports treat both alike:
 * - container-limits: the devices of the claims (or the claim requests) a container names in
 *   `resources.claims`, per resource name, at most the per-container cap;
 * - pod-gpus: a claim request with `allocationMode: All` whose devices no known capacity bounds cannot be held
 *   to a per-pod or per-job cap, and is refused where one applies (the counted total itself is checked with
 *   the containers' requests in `pod-spec.ts`);
 * - accelerator-allowed: products (`productName`) and MIG profiles (`profile`) a request's CEL selectors pin
 *   must be among `allowedAccelerators` / `allowedPartitions`; a selector that tests them any other way (`!=`,
 *   `matches`, a disjunction) could select any and is refused while a list is set.
 * The same rules judge a ResourceClaim or ResourceClaimTemplate at its own CREATE ({@link validateClaimObject}),
 * as if one container of one pod asked for all of it.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimGpuRequests, claimReferences, podGpuClaims, resolveClaims, type ClaimSpec, type GpuRequest, type PodGpuClaim } from "../core/dra.js";
import { containerMax } from "./pod-spec.js";
import type { Findings, ValidationContext } from "./types.js";

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

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

/** Whether some cap would count these devices: per container, per pod or per job. */
function capApplies(resourceName: string, ctx: ValidationContext): boolean {
  return containerMax(resourceName, ctx) !== undefined || ctx.limits.pod.gpus !== undefined || ctx.limits.job.gpus !== undefined;
}

function unboundedRule(gpu: GpuRequest, field: string, what: string, ctx: ValidationContext, out: Findings): void {
  if (gpu.count !== undefined || !capApplies(gpu.resourceName, ctx)) return;
  out.violations.push({
    rule: "pod-gpus",
    field,
    message: `${what} asks for every ${gpu.deviceClassName} device of a node (allocationMode: All), which no known capacity bounds, so it cannot be held to the GPU limits; ask for an exact count`,
  });
}

const describe = (c: PodGpuClaim): string => `claim ${c.claim} (${c.source}, request ${c.gpu.request})`;

/** The claim requests one container entry of `resources.claims` names: the whole claim, or one request of it. */
function named(entry: unknown, claims: readonly PodGpuClaim[]): PodGpuClaim[] {
  if (!isRecord(entry) || typeof entry.name !== "string") return [];
  const request = typeof entry.request === "string" ? entry.request : undefined;
  return claims.filter((c) => c.claim === entry.name && (request === undefined || c.gpu.request.split("/")[0] === request));
}

/** The DRA rules for the pod spec at `path`. */
export function validatePodClaims(spec: V1PodSpec | undefined, path: string, ctx: ValidationContext): Findings {
  const out: Findings = { violations: [], warnings: [] };
  if (!spec || !ctx.claims) return out;
  const claims = podGpuClaims(spec, resolveClaims(spec, ctx.claims), ctx.policy.gpu.deviceClasses, ctx.draCapacity);
  for (const c of claims) {
    const field = `${path}.resourceClaims[${c.index}]`;
    acceleratorRules(c.gpu, field, describe(c), ctx, out);
    unboundedRule(c.gpu, field, describe(c), ctx, out);
  }
  for (const [list, containers] of [
    ["initContainers", spec.initContainers],
    ["containers", spec.containers],
  ] as const) {
    (Array.isArray(containers) ? containers : []).forEach((container, i) => {
      const entries: unknown[] = Array.isArray(container?.resources?.claims) ? container.resources.claims : [];
      const perResource = new Map<string, number>();
      for (const entry of entries)
        for (const c of named(entry, claims)) perResource.set(c.gpu.resourceName, (perResource.get(c.gpu.resourceName) ?? 0) + (c.gpu.count ?? 0));
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
  for (const ref of claimReferences(spec)) {
    const name = ref.claim ?? ref.template;
    const map = ref.claim !== undefined ? ctx.claims.claims : ctx.claims.templates;
    if (name !== undefined && map.has(name) && map.get(name) === undefined) {
      const kind = ref.claim !== undefined ? "ResourceClaim" : "ResourceClaimTemplate";
      out.warnings.push(`quartermaster: ${kind} ${name} (claim ${ref.name}) was not found: its devices are not counted here; it is checked when it is created`);
    }
  }
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
  const perResource = new Map<string, number>();
  let total = 0;
  for (const gpu of requests) {
    const field = `${path}.${gpu.field}`;
    const what = `request ${gpu.request}`;
    acceleratorRules(gpu, field, what, ctx, out);
    unboundedRule(gpu, field, what, ctx, out);
    perResource.set(gpu.resourceName, (perResource.get(gpu.resourceName) ?? 0) + (gpu.count ?? 0));
    total += gpu.count ?? 0;
  }
  for (const [resourceName, count] of perResource) {
    const bound = containerMax(resourceName, ctx);
    if (bound && BigInt(count) * 1_000_000_000n > bound.max.nano)
      out.violations.push({
        rule: "container-limits",
        field: `${path}.devices.requests`,
        message: `asks for ${count} ${resourceName}, over the per-container limit of ${bound.text}`,
        value: count,
      });
  }
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

/** What counting a subject's GPUs has to say about claims that could not be read. */
export interface ClaimReadFailures {
  /** One sentence per failed read (an error or a timeout; an absent claim is not a failure). */
  failures: readonly string[];
  /** `clusterSpec.onJobLookupFailure`: the same choice as for a job that cannot be read. */
  onFailure: "warn" | "deny";
  /** The rule that would count the GPUs (`pod-gpus`, `job-gpus`) and where. */
  rule: string;
  field: string;
  /** "pod" or "job", for the message. */
  subject: string;
  /** An UPDATE, which a failed read cannot make worse: warned of, never refused. */
  update?: boolean;
}

/**
 * Claims that could not be read are handled like a job that cannot be read (`clusterSpec.onJobLookupFailure`):
 * `deny` refuses the subject under the rule that would have counted their GPUs (so its enforcement mode
 * applies); `warn` (the default) admits it, counted without them, and says so. Failing closed regardless
 * would refuse every claim-naming pod in an opted-in namespace while the reader lacks RBAC (an upgrade
 * without the new ClusterRole) or the apiserver is slow; the claim itself is still held to the caps at its
 * own CREATE (`validateClaimObject`).
 */
export function claimReadFindings(r: ClaimReadFailures): Findings {
  const deny = r.onFailure === "deny" && !r.update;
  return {
    violations: deny ? r.failures.map((f) => ({ rule: r.rule, field: r.field, message: `cannot count the ${r.subject}'s GPUs: ${f}` })) : [],
    warnings: deny ? [] : r.failures.map((f) => `quartermaster: the ${r.subject}'s GPUs counted without a claim that could not be read: ${f}`),
  };
}

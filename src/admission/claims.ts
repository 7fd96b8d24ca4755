/**
 * @module
 * Reading the ResourceClaims and ResourceClaimTemplates that pods name (DRA), through the same cached,
 * single-flight reader and timeout as the job lookup (src/membership/lookup.ts), so the rules and mutations can
 * count the GPUs a pod asks for through them. A pod without claims costs nothing here (no promise, no read).
 *
 * Each distinct name is one read, so a review may name at most {@link MAX_CLAIM_NAMES} (issue 46 finding 2: 20,000
 * names made 20,005 GETs on the webhook's one client); past it nothing is read and the review is refused at the
 * field ({@link claimNamesRefusal}). The reads go through the review's own queue of the webhook's read pool
 * (`read-pool.ts`), so they cost that review and not another; a read shed there is unknown, as any failed read.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import {
  claimReferences,
  claimSpecOf,
  classSelectsGpus,
  classesToRead,
  type ClaimSpec,
  type DeviceClassRead,
  type GpuDeviceClass,
  type KnownClaims,
} from "../core/dra.js";
import type { ObjectKind } from "../core/kube.js";
import { readJob } from "../membership/lookup.js";
import type { JobReader } from "../membership/types.js";
import type { ValidationResult } from "./handler.js";
import type { Violation } from "./response.js";
import { standInClaims, StandInUndecided } from "../core/stand-in.js";

export const RESOURCE_CLAIM: ObjectKind = { kind: "ResourceClaim", group: "resource.k8s.io", version: "v1", plural: "resourceclaims" };
export const RESOURCE_CLAIM_TEMPLATE: ObjectKind = { kind: "ResourceClaimTemplate", group: "resource.k8s.io", version: "v1", plural: "resourceclaimtemplates" };
export const DEVICE_CLASS: ObjectKind = { kind: "DeviceClass", group: "resource.k8s.io", version: "v1", plural: "deviceclasses" };

/**
 * The DeviceClasses one review reads at most (cluster-scoped, through the cache): those its claims name that the
 * policy does not list. A claim holds up to 32 requests of up to 8 alternatives, each naming a class, but a cluster
 * has a few classes (one per kind of device and driver); past this bound the rest are not read, hence unknown
 * (refused under a GPU cap with the claims rules' `gpu-unknown`).
 */
export const MAX_DEVICE_CLASS_READS = 16;

/**
 * The distinct ResourceClaim and ResourceClaimTemplate names one review may make the webhook read. Kubernetes sets
 * no bound on a pod's `spec.resourceClaims` (k8s.io/kubernetes pkg/apis/core/validation/validation.go,
 * validatePodResourceClaims, checks each entry's name only; v1.37.2), so this is the webhook's own: a training pod
 * names a claim per kind of device (GPUs, NICs), at most one per device of a node (8 GPUs and 8 NICs: 16), and one
 * claim holds up to 32 requests (k8s.io/api resource/v1 DeviceRequestsMaxSize); 128 leaves 8× that for a job's
 * templates, old object and runtime together, and bounds a review's reads at 16 rounds of its 8 in flight.
 */
export const MAX_CLAIM_NAMES = 128;

export interface ClaimsRead {
  known: KnownClaims;
  /** Reads that failed (not an absence: an error, a timeout, shed), one sentence each; by name in `known.unreadable`. */
  failures: string[];
  /** More than the names one review may make the webhook read: nothing was read (see {@link claimNamesRefusal}). */
  tooMany?: { names: number; field: string };
}

const NOTHING: ClaimsRead = Object.freeze({ known: { claims: new Map(), templates: new Map() }, failures: [] });

export interface ReadClaimsOptions {
  /** Where each spec is (`spec`, `spec.template.spec`...), for the refusal's field; unknown: the refusal is at `spec`. */
  fields?: readonly (string | undefined)[];
  /** The most distinct names read; default {@link MAX_CLAIM_NAMES}. */
  max?: number;
  /**
   * Read each as it is now, past the reader's cache (its uid and resourceVersion checked when a copy is at hand):
   * for a decision a claim replaced within the cache's window must not pass (`src/admission/pod-job.ts`).
   */
  fresh?: boolean;
}

/**
 * The distinct claim and template names the pod specs name, or `tooMany` past `options.max` (decided without a read,
 * from a stand-in list's names or count too); throws StandInUndecided where a stand-in list cannot decide it, or names
 * claims within the bound (those are read: the body is parsed again).
 */
export function claimNames(
  specs: readonly (V1PodSpec | undefined)[],
  options: ReadClaimsOptions = {},
): { claims: Set<string>; templates: Set<string> } | { tooMany: NonNullable<ClaimsRead["tooMany"]> } {
  const max = options.max ?? MAX_CLAIM_NAMES;
  const claims = new Set<string>();
  const templates = new Set<string>();
  // Counted to the end (linear, no read) for the message; refused at the spec where the bound was passed.
  const over = (i: number) => ({
    tooMany: { names: distinctNames(specs), field: options.fields?.[i] !== undefined ? `${options.fields[i]}.resourceClaims` : "spec" },
  });
  let standIns = false;
  for (let i = 0; i < specs.length; i++) {
    // A stand-in list (a large body parsed off-thread, `stand-in.ts`): the names it carries decide the bound.
    const standIn = standInClaims(listOf(specs[i]));
    if (standIn !== undefined) {
      standIns = true;
      if (standIn === null) throw new StandInUndecided("a resourceClaims list that carries no claim names");
      if (standIn.names === null) {
        // More distinct names than the worker keeps: over the bound here when they alone are more than it.
        if (standIn.count > max) return over(i);
        throw new StandInUndecided("claim names the worker did not keep, within the bound");
      }
      for (const key of standIn.names) {
        (key.startsWith("c/") ? claims : templates).add(key.slice(2));
        if (claims.size + templates.size > max) return over(i);
      }
      continue;
    }
    for (const ref of claimReferences(specs[i])) {
      if (ref.claim !== undefined) claims.add(ref.claim);
      else if (ref.template !== undefined) templates.add(ref.template);
      if (claims.size + templates.size > max) return over(i);
    }
  }
  // Within the bound, the claims are read and the rules look into the list: not from a stand-in.
  if (standIns) throw new StandInUndecided("claims within the bound, named by a stand-in list");
  return { claims, templates };
}

/**
 * The claims and templates the pod specs name, read in `namespace` through `reader` (a review's reader of the
 * read pool); at once (no read) when they name none, or more than `max` distinct names (`tooMany`).
 */
export function readClaims(
  specs: readonly (V1PodSpec | undefined)[],
  namespace: string,
  reader: JobReader,
  timeoutMs: number,
  options: ReadClaimsOptions = {},
): ClaimsRead | Promise<ClaimsRead> {
  const names = claimNames(specs, options);
  if ("tooMany" in names) return { ...NOTHING, tooMany: names.tooMany };
  const { claims, templates } = names;
  if (claims.size === 0 && templates.size === 0) return NOTHING;
  const unreadable = { claims: new Map<string, string>(), templates: new Map<string, string>() };
  const known = { claims: new Map<string, ClaimSpec | undefined>(), templates: new Map<string, ClaimSpec | undefined>(), unreadable };
  const failures: string[] = [];
  const reads = [
    ...[...claims].map((name) => ({ name, kind: RESOURCE_CLAIM, into: known.claims, failed: unreadable.claims, as: "ResourceClaim" as const })),
    ...[...templates].map((name) => ({
      name,
      kind: RESOURCE_CLAIM_TEMPLATE,
      into: known.templates,
      failed: unreadable.templates,
      as: "ResourceClaimTemplate" as const,
    })),
  ].map(async (r) => {
    const read = await readJob({ kind: r.kind, namespace, name: r.name, jobs: reader, timeoutMs, fresh: options.fresh === true });
    if (read.kind === "found") r.into.set(r.name, claimSpecOf(read.job, r.as));
    else if (read.kind === "missing") r.into.set(r.name, undefined);
    else {
      r.failed.set(r.name, read.reason);
      failures.push(read.reason);
    }
  });
  return Promise.all(reads).then(() => ({ known, failures }));
}

/**
 * The distinct names the specs make the webhook read, ResourceClaims and ResourceClaimTemplates apart. A stand-in
 * list counts by the names it carries, or by its count when it is the only list naming any (else StandInUndecided).
 */
function distinctNames(specs: readonly (V1PodSpec | undefined)[]): number {
  const names = new Set<string>();
  let countOnly: number | undefined;
  let lists = 0;
  for (const spec of specs) {
    const standIn = standInClaims(listOf(spec));
    if (standIn === null) throw new StandInUndecided("a resourceClaims list that carries no claim names");
    if (standIn !== undefined) {
      if (standIn.count > 0) lists++;
      if (standIn.names === null) countOnly = standIn.count;
      else for (const key of standIn.names) names.add(key);
      continue;
    }
    const refs = claimReferences(spec);
    if (refs.some((r) => r.claim !== undefined || r.template !== undefined)) lists++;
    for (const ref of refs) {
      if (ref.claim !== undefined) names.add(`c/${ref.claim}`);
      else if (ref.template !== undefined) names.add(`t/${ref.template}`);
    }
  }
  if (countOnly === undefined) return names.size;
  if (lists > 1) throw new StandInUndecided("distinct claim names across lists, one of them a stand-in without its names");
  return countOnly;
}

/** A pod spec's `resourceClaims`, as it came. */
const listOf = (spec: V1PodSpec | undefined): unknown =>
  typeof spec === "object" && spec !== null ? (spec as { resourceClaims?: unknown }).resourceClaims : undefined;

/**
 * A validating webhook's answer to a review naming more claims than {@link MAX_CLAIM_NAMES}: the refusal alone, marked
 * as decided by the names (`tooManyClaims`), so the server answers a large body from its stand-in document.
 */
export function claimNamesDenial(tooMany: NonNullable<ClaimsRead["tooMany"]>): ValidationResult {
  return { violations: [claimNamesRefusal(tooMany)], warnings: [], tooManyClaims: true };
}

/** The refusal of a review naming more claims than {@link MAX_CLAIM_NAMES}: at its field, with the fix. */
export function claimNamesRefusal(tooMany: NonNullable<ClaimsRead["tooMany"]>, max = MAX_CLAIM_NAMES): Violation {
  return {
    rule: "review-cost",
    field: tooMany.field,
    message:
      `${tooMany.names} distinct ResourceClaims and ResourceClaimTemplates named, over the ${max} one review may make the webhook read: ` +
      `not checked; name at most ${max} (one claim may hold up to 32 device requests: put a pod's devices in fewer claims)`,
  };
}

/** A mutating webhook's warnings for the claims not read: failed, shed, or more names than one review may read (issue 46). */
export function unreadClaimWarnings(claims: ClaimsRead, max = MAX_CLAIM_NAMES): string[] {
  return [
    ...(claims.tooMany ? [`quartermaster: the job's claims not read: ${claims.tooMany.names} names, over the ${max} one review may read`] : []),
    ...claims.failures.map((f) => `quartermaster: GPUs of the job's claims not known, no GPU tolerations or placement for them: ${f}`),
  ];
}

/**
 * The DeviceClasses the claim specs name that the policy does not list and whose names do not look like a GPU's
 * (`classesToRead`), read through `reader` (cluster-scoped, cached): what each selects (`classSelectsGpus`), or that
 * it is absent or unreadable. At most {@link MAX_DEVICE_CLASS_READS}; the rest are left out (unknown to the rules).
 * At once (no read) when there are none.
 */
export function readDeviceClasses(
  specs: readonly (ClaimSpec | undefined)[],
  classes: readonly GpuDeviceClass[],
  reader: JobReader,
  timeoutMs: number,
): ReadonlyMap<string, DeviceClassRead> | Promise<ReadonlyMap<string, DeviceClassRead>> {
  const names = [...new Set(specs.flatMap((spec) => classesToRead(spec, classes)))].slice(0, MAX_DEVICE_CLASS_READS);
  const out = new Map<string, DeviceClassRead>();
  if (names.length === 0) return out;
  const reads = names.map(async (name) => {
    const read = await readJob({ kind: DEVICE_CLASS, namespace: "", name, jobs: reader, timeoutMs });
    const gpu = read.kind === "found" ? classSelectsGpus(read.job, classes) : undefined;
    out.set(
      name,
      read.kind === "found"
        ? { kind: "found", ...(gpu ? { gpu } : {}) }
        : read.kind === "missing"
          ? { kind: "missing" }
          : { kind: "unreadable", reason: read.reason },
    );
  });
  return Promise.all(reads).then(() => out);
}

/** `read` with the DeviceClasses its claims and templates name read too ({@link readDeviceClasses}). */
export function withDeviceClasses(
  read: ClaimsRead,
  classes: readonly GpuDeviceClass[],
  reader: JobReader,
  timeoutMs: number,
): ClaimsRead | Promise<ClaimsRead> {
  if (read.tooMany) return read;
  const specs = [...read.known.claims.values(), ...read.known.templates.values()];
  const add = (deviceClasses: ReadonlyMap<string, DeviceClassRead>): ClaimsRead => ({ ...read, known: { ...read.known, deviceClasses } });
  const classesRead = readDeviceClasses(specs, classes, reader, timeoutMs);
  return classesRead instanceof Promise ? classesRead.then(add) : add(classesRead);
}

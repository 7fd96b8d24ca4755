/**
 * @module
 * Reading the ResourceClaims and ResourceClaimTemplates that pods name (DRA), through the same cached,
 * single-flight reader and timeout as the job lookup (src/topology/lookup.ts), so the rules and mutations can
 * count the GPUs a pod asks for through them. A pod without claims costs nothing here (no promise, no read).
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimReferences, claimSpecOf, type ClaimSpec, type KnownClaims } from "../core/dra.js";
import type { ObjectKind } from "../core/kube.js";
import { readJob } from "../topology/lookup.js";
import type { JobReader } from "../topology/types.js";

export const RESOURCE_CLAIM: ObjectKind = { kind: "ResourceClaim", group: "resource.k8s.io", version: "v1", plural: "resourceclaims" };
export const RESOURCE_CLAIM_TEMPLATE: ObjectKind = { kind: "ResourceClaimTemplate", group: "resource.k8s.io", version: "v1", plural: "resourceclaimtemplates" };

export interface ClaimsRead {
  known: KnownClaims;
  /** Reads that failed (not an absence: an error or a timeout), one sentence each; by name in `known.unreadable`. */
  failures: string[];
}

const NOTHING: ClaimsRead = Object.freeze({ known: { claims: new Map(), templates: new Map() }, failures: [] });

/** The claims and templates the pod specs name, read in `namespace`; at once (no read) when they name none. */
export function readClaims(
  specs: readonly (V1PodSpec | undefined)[],
  namespace: string,
  reader: JobReader,
  timeoutMs: number,
): ClaimsRead | Promise<ClaimsRead> {
  const claims = new Set<string>();
  const templates = new Set<string>();
  for (const spec of specs) {
    for (const ref of claimReferences(spec)) {
      if (ref.claim !== undefined) claims.add(ref.claim);
      else if (ref.template !== undefined) templates.add(ref.template);
    }
  }
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
    const read = await readJob({ kind: r.kind, namespace, name: r.name, jobs: reader, timeoutMs });
    if (read.kind === "found") r.into.set(r.name, claimSpecOf(read.job, r.as));
    else if (read.kind === "missing") r.into.set(r.name, undefined);
    else {
      r.failed.set(r.name, read.reason);
      failures.push(read.reason);
    }
  });
  return Promise.all(reads).then(() => ({ known, failures }));
}

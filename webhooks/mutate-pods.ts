/**
 * @module
 * `POST /mutate/pods`: outfits training pods on CREATE. Fails open: a failing rule, or a pod over the
 * cost bound of `src/core/cost.ts`, admits the pod unchanged, with a warning. The pod's job is read first (the only I/O), then the pure mutations in
 * `src/mutate/` run. A job that cannot be read means no cluster spec and a warning saying why, or a
 * denial when the policy's `clusterSpec.onJobLookupFailure` is `deny`.
 */
import { specsCost } from "../src/core/cost.js";
import { MAX_CLAIM_NAMES, readClaims, type ClaimsRead } from "../src/admission/claims.js";
import { allGuards, podGuard, unwalkedPodGuard } from "../src/admission/guards.js";
import { mutatingWebhook, type MutationResult, type Webhook } from "../src/admission/handler.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import type { KubeObject } from "../src/core/kube.js";
import { ClusterSpecMemo } from "../src/mutate/frameworks.js";
import { mutatePod, POD_MUTATIONS, type Pod } from "../src/mutate/index.js";
import { JOBSET_KIND, tfJobSetRef } from "../src/membership/jobset.js";
import { lookupTopology, readJob, type JobReadResult, type TopologyResult } from "../src/membership/lookup.js";
import type { JobReader } from "../src/membership/types.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

export function mutatePods(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  const pool = readsOf(deps);
  // This webhook's cluster-spec work per job object: the pods of one job share it (issue 29, item 3).
  const clusterSpecs = new ClusterSpecMemo();
  function outfit(request: AdmissionRequest & { object: KubeObject }, namespace: string, found: TopologyResult, claims: ClaimsRead): MutationResult {
    if (found.kind === "failed" && policy.clusterSpec.onJobLookupFailure === "deny") {
      return {
        object: request.object,
        warnings: [],
        deny: { rule: "job-lookup", field: "metadata.ownerReferences", message: `cannot outfit the pod: ${found.reason}` },
      };
    }
    const out = mutatePod(request.object, {
      policy,
      namespace,
      clusterSpecs,
      claims: claims.known,
      ...(found.kind === "found" ? { topology: found.topology } : {}),
    });
    const warnings = [
      ...(found.kind === "failed" ? [`quartermaster: no cluster spec: ${found.reason}`] : []),
      ...claims.failures.map((f) => `quartermaster: GPUs of the pod's claims not known, no GPU tolerations or placement for them: ${f}`),
      ...out.warnings,
    ];
    return { object: out.pod as KubeObject, warnings };
  }
  function outfitJobSetPod(request: AdmissionRequest & { object: KubeObject }, namespace: string, read: JobReadResult): MutationResult {
    if (read.kind !== "found") {
      if (policy.clusterSpec.onJobLookupFailure === "deny") {
        return {
          object: request.object,
          warnings: [],
          deny: { rule: "job-lookup", field: "metadata.labels", message: `cannot outfit the pod: ${read.reason}` },
        };
      }
      const out = mutatePod(request.object, { policy, namespace, clusterSpecs });
      return { object: out.pod as KubeObject, warnings: [`quartermaster: no TF_CONFIG: ${read.reason}`, ...out.warnings] };
    }
    const out = mutatePod(request.object, { policy, namespace, clusterSpecs, jobSet: read.job });
    return { object: out.pod as KubeObject, warnings: out.warnings };
  }
  return mutatingWebhook({
    name: "mutate-pods",
    guard: allGuards(podGuard(["CREATE"]), unwalkedPodGuard(policy)),
    // One pass per mutation; a pod over the bound is admitted unchanged, with a warning saying so.
    cost: (request) => specsCost([request.object.spec], POD_MUTATIONS.length, policy.gpu.resources),
    mutate(request) {
      return withReviewReads(pool, policy.clusterSpec.jobLookupTimeoutMs, (reader) => outfitPod(request, reader));
    },
  });
  function outfitPod(request: AdmissionRequest & { object: KubeObject }, reader: JobReader): MutationResult | Promise<MutationResult> {
    const pod = request.object as Pod;
    const namespace = request.namespace ?? pod.metadata?.namespace ?? "";
    // A TensorFlow TrainJob's pod: its JobSet (the pod's owner is a batch Job, which lookupTopology passes by).
    const jobSetRef = tfJobSetRef(pod, namespace);
    if (jobSetRef) {
      const read = readJob({
        kind: JOBSET_KIND,
        namespace: jobSetRef.namespace,
        name: jobSetRef.name,
        jobs: reader,
        timeoutMs: policy.clusterSpec.jobLookupTimeoutMs,
      });
      return read instanceof Promise ? read.then((r) => outfitJobSetPod(request, namespace, r)) : outfitJobSetPod(request, namespace, read);
    }
    const claims = readClaims([pod.spec], namespace, reader, policy.clusterSpec.jobLookupTimeoutMs, { fields: ["spec"] });
    // More claim names than one review may read: admitted unchanged at once, its job not read either (the claim-name
    // bound decides it, a large body's from its stand-in document; /validate/pods refuses such a pod).
    if (!(claims instanceof Promise) && claims.tooMany)
      return {
        object: request.object,
        warnings: [
          `quartermaster: admitted unchanged, the pod's claims not read: ${claims.tooMany.names} names, over the ${MAX_CLAIM_NAMES} one review may read`,
        ],
        tooManyClaims: true,
      };
    const found = lookupTopology(pod, namespace, policy, reader);
    // A cached job answers at once, and a pod without claims reads none; only a read from the apiserver makes this asynchronous.
    if (!(found instanceof Promise) && !(claims instanceof Promise)) return outfit(request, namespace, found, claims);
    return Promise.all([found, claims]).then(([f, c]) => outfit(request, namespace, f, c));
  }
}

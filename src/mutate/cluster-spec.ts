/**
 * @module
 * The distributed cluster-spec environment (TF_CONFIG, PyTorch's MASTER_* and PET_*, MX_CONFIG and
 * DMLC_*, XGBoost, Paddle, JAX, CAFFE2_CONFIG), appended to the containers upstream uses: the first
 * container named `tensorflow` for TFJobs, every container otherwise. A variable the container already
 * sets is never overwritten, so running beside the training operator (which sets them itself) is a no-op.
 */
import type { V1Container, V1EnvVar } from "@kubernetes/client-node";
import { withKey } from "../core/copy.js";
import { overCeiling } from "../membership/ceiling.js";
import type { Topology } from "../membership/types.js";
import { clusterSpec, type ClusterSpecResult } from "./frameworks.js";
import { isEntry, isMalformedList, mapContainers } from "./pod.js";
import type { Mutation, MutationContext } from "./types.js";

// Up to this many variables a container's env is searched directly; a longer one is indexed once.
const SCANNED_ENV = 32;

/**
 * The container with the variables it does not set yet appended, or the container itself. The appended
 * objects are the cluster spec's own (shared, never changed by anyone), not copies.
 */
export function withEnv(c: V1Container, vars: readonly V1EnvVar[]): V1Container {
  // An env that is not a list is left as it came (advise says so): String#concat onto a string env
  // grew it on every reinvocation (fuzz seed 397869332); the apiserver refuses such a pod anyway.
  if (!isEntry(c) || isMalformedList(c.env)) return c;
  const env = c.env ?? [];
  let missing: V1EnvVar[];
  if (env.length <= SCANNED_ENV) {
    missing = vars.filter((v) => !env.some((e) => e?.name === v.name));
  } else {
    const names = new Set<unknown>();
    for (const e of env) names.add(e?.name);
    missing = vars.filter((v) => !names.has(v.name));
  }
  if (missing.length === 0) return c;
  return withKey(c, "env", env.concat(missing));
}

// One admission asks for its cluster spec twice (mutate, then advise) with the same topology object:
// the last answer is kept. (The per-job work across pods is the memo's, `ctx.clusterSpecs`.) Deliberately not a WeakMap keyed by the topology: V8's scavenger keeps the
// entries of a WeakMap alive until a full GC, so every admission's topology and spec were promoted to
// the old generation (~250 KB per scavenge under load, a third of the server's GC time; bench/admission).
let last: { topology: Topology; namespace: string; clusterDomain: string; spec: ClusterSpecResult } | undefined;
function specFor(topology: Topology, ctx: MutationContext): ClusterSpecResult {
  const { namespace, clusterSpecs: memo } = ctx;
  const clusterDomain = ctx.policy.clusterSpec.clusterDomain;
  if (last?.topology !== topology || last.namespace !== namespace || last.clusterDomain !== clusterDomain) {
    // A job over the replica ceiling gets no cluster spec: listing its replicas in every pod's answer is
    // what the ceiling is there to prevent (a 2^31−1-replica job would exhaust the heap).
    const over = overCeiling(topology.job, topology.kind, ctx.policy.kindShapes);
    last = { topology, namespace, clusterDomain, spec: over ? { skip: over } : clusterSpec(topology, namespace, clusterDomain, memo) };
  }
  return last.spec;
}

export const injectClusterSpec: Mutation = {
  name: "cluster-spec",
  mutate(pod, ctx) {
    if (!ctx.topology || !ctx.policy.clusterSpec.enabled) return pod;
    const spec = specFor(ctx.topology, ctx);
    if ("skip" in spec) return pod;
    if (spec.target === "all") return mapContainers(pod, ["containers"], (c) => withEnv(c, spec.env));
    const target = spec.target.container;
    const i = (pod.spec?.containers ?? []).findIndex((c) => c?.name === target);
    return i < 0 ? pod : mapContainers(pod, ["containers"], (c, _list, j) => (j === i ? withEnv(c, spec.env) : c));
  },
  explain(before, after, ctx) {
    // withEnv only appends: what a container gained is its env past the length it had.
    const names = new Set<string>();
    (after.spec?.containers ?? []).forEach((c, i) => {
      const had = before.spec?.containers[i]?.env?.length ?? 0;
      if (!Array.isArray(c?.env)) return; // left as it came (not a container, or an env that is not a list)
      for (let j = had; j < c.env.length; j++) names.add(c.env[j]!.name);
    });
    const list = [...names];
    const shown = list.length > 4 ? `${list.slice(0, 4).join(", ")} and ${list.length - 4} more` : list.join(", ");
    return `quartermaster: ${ctx.topology?.kind.kind} cluster spec set: ${shown}`;
  },
  advise(pod, ctx) {
    if (!ctx.topology || !ctx.policy.clusterSpec.enabled) return [];
    const spec = specFor(ctx.topology, ctx);
    if ("skip" in spec) return [`quartermaster: no cluster spec: ${spec.skip}`];
    const containers = pod.spec?.containers ?? [];
    if (spec.target !== "all" && !containers.some((c) => c?.name === (spec.target as { container: string }).container)) {
      return [`quartermaster: no cluster spec: no container is named ${spec.target.container}`];
    }
    // The containers mutate would append to: all of them, or the first one of the target's name.
    const targets = spec.target === "all" ? containers : [containers.find((c) => c?.name === (spec.target as { container: string }).container)!];
    const malformed = targets.filter((c) => isEntry(c) && isMalformedList(c.env));
    return malformed.map((c) => `quartermaster: no cluster spec in container ${JSON.stringify(c.name)}: its env is not a list (left untouched)`);
  },
};

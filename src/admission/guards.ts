/**
 * @module
 * Guards: the first thing each webhook runs. Each returns why a request is not its business (logged as
 * the skip reason), or undefined. The webhook configurations already scope what the apiserver sends;
 * these make the handlers safe even under a broader configuration.
 */
import { isObject } from "../core/object.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES, sentAsGpu } from "../core/gpu.js";
import type { QueuedWorkloadKind } from "../core/job-shapes.js";
import type { Policy } from "../policy/types.js";
import { schemesOf } from "../kinds/index.js";
import type { Guard } from "./handler.js";
import { standInNames, StandInUndecided } from "../core/stand-in.js";
import type { AdmissionRequest, Operation } from "./types.js";

/** The subresources a webhook handles, with the operations it handles on each (e.g. `{ resize: ["UPDATE"] }`). */
export type SubresourceOperations = Readonly<Record<string, readonly Operation[]>>;

function operationSkip(req: AdmissionRequest, operations: readonly Operation[], subresources: SubresourceOperations): string | undefined {
  if (req.subResource) {
    const ops = Object.hasOwn(subresources, req.subResource) ? subresources[req.subResource] : undefined;
    if (!ops) return `subresource ${req.subResource} is not handled`;
    if (!ops.includes(req.operation)) return `operation ${req.operation} on subresource ${req.subResource} is not handled`;
    return undefined;
  }
  if (!operations.includes(req.operation)) return `operation ${req.operation} is not handled`;
  return undefined;
}

/** Pods in one of `operations`, and the given subresources of pods in theirs. */
export function podGuard(operations: readonly Operation[], subresources: SubresourceOperations = {}): Guard {
  return (req) => {
    if (req.resource.group !== "" || req.resource.resource !== "pods") return `resource ${req.resource.resource} is not pods`;
    return operationSkip(req, operations, subresources);
  };
}

type Obj = Record<string, unknown>;

/**
 * The rest of the pod webhooks' `training-pods-only` match condition (`trainingPodExpression` in
 * src/manifests/webhooks.ts). To bound its cost, the condition walks a pod only within CONDITION_MAX_CONTAINERS
 * and CONDITION_MAX_RESOURCES and sends a wider one on unwalked; for such a pod this guard makes the condition's
 * very test, in one pass: a configured kind's pod labels (`podLabels` of its label scheme: Kubeflow's job-name,
 * caffe2-operator's two labels, JobSet's jobset-name), or a GPU resource pattern of the
 * policy among the requests or limits of a container or init container. So a wide pod that is no training pod (a
 * 1,500-container web server's) is skipped, as the condition would have skipped it, and never meets the rules or
 * the validating webhook's cost bound. A pod within the bounds passes: the apiserver's condition has decided
 * for it, and the CLI (`admit`) keeps admitting any pod it is given.
 *
 * On a document parsed off-thread a long container list is a stand-in (`stand-in.ts`): its length and the
 * resource names of its containers decide the same; where they cannot, the guard throws StandInUndecided.
 */
export function unwalkedPodGuard(policy: Pick<Policy, "jobKinds" | "gpu" | "kindShapes">): Guard {
  const groups = schemesOf(policy.jobKinds, policy.kindShapes).map((s) => s.podLabels);
  const isGpu = (name: string): boolean => sentAsGpu(name, policy.gpu);
  const anyGpu = (m: unknown): boolean => isObject(m) && Object.keys(m).some(isGpu);
  return (req) => {
    const pod = req.object;
    const labels = isObject(pod?.metadata) ? pod.metadata.labels : undefined;
    if (isObject(labels) && groups.some((g) => g.every((l) => Object.hasOwn(labels, l)))) return undefined;
    const spec = isObject(pod?.spec) ? pod.spec : {};
    const lists = [spec.initContainers, spec.containers].filter((l): l is unknown[] => Array.isArray(l));
    const size = (m: unknown): number => (isObject(m) ? Object.keys(m).length : 0);
    const resourcesOf = (c: unknown): Obj => (isObject(c) && isObject(c.resources) ? c.resources : {});
    const count = lists.reduce((n, l) => n + l.length, 0);
    // A stand-in list (a large body parsed off-thread, `stand-in.ts`) keeps its length and its resource names only.
    if (count <= CONDITION_MAX_CONTAINERS && lists.some((l) => standInNames(l) !== undefined))
      throw new StandInUndecided("container resources counted per container");
    const wide =
      count > CONDITION_MAX_CONTAINERS ||
      lists.some((l) => l.some((c) => size(resourcesOf(c).requests) + size(resourcesOf(c).limits) > CONDITION_MAX_RESOURCES));
    if (!wide) return undefined;
    const gpuIn = (l: unknown[]): boolean => {
      const names = standInNames(l);
      if (names === null) throw new StandInUndecided("too many resource names in a container list");
      return names ? names.some(isGpu) : l.some((c) => anyGpu(resourcesOf(c).requests) || anyGpu(resourcesOf(c).limits));
    };
    if (lists.some(gpuIn)) return undefined;
    return "not a training pod (no job label, no GPU resource), sent on by the match condition unwalked: wider than its bounds";
  };
}

/** The first guard's reason, or none when every guard lets the request through. */
export function allGuards(...guards: Guard[]): Guard {
  return (req) => {
    for (const g of guards) {
      const reason = g(req);
      if (reason !== undefined) return reason;
    }
    return undefined;
  };
}

interface KindRef {
  group: string;
  kind: string;
  /** The resource name; subresource requests are matched by it (their `kind` is the subresource's, e.g. Scale). */
  plural?: string;
}

/**
 * The configured job kind a request is about: by `kind` for the job itself, by `resource` for a
 * subresource (a `/scale` request's kind is `autoscaling/v1 Scale`).
 */
export function jobKindOf<K extends KindRef>(req: AdmissionRequest, kinds: readonly K[]): K | undefined {
  const byResource = req.subResource
    ? kinds.find((k) => k.group === req.resource.group && k.plural !== undefined && k.plural === req.resource.resource)
    : undefined;
  return byResource ?? kinds.find((k) => k.group === req.kind.group && k.kind === req.kind.kind);
}

/** The configured training-job kinds in one of `operations`, and the given subresources of them in theirs. */
export function jobGuard(kinds: readonly KindRef[], operations: readonly Operation[], subresources: SubresourceOperations = {}): Guard {
  return (req) => {
    if (!jobKindOf(req, kinds)) return `kind ${req.kind.group}/${req.kind.kind} is not a configured job kind`;
    return operationSkip(req, operations, subresources);
  };
}

/**
 * A batch Job or JobSet (`QUEUED_WORKLOAD_KINDS`) is `/validate/jobs`' business only when one of its pod templates
 * names a GPU resource pattern of the policy (requests or limits of a container or init container) or, when the
 * policy knows GPU device classes, names ResourceClaims: the match condition's test (`gpuWorkloadExpression`
 * in src/manifests/webhooks.ts), made exactly, so an object it sent on unwalked (wider than its bounds) that asks
 * for no GPU is skipped before the cost bound, and nothing reaches a Job or JobSet that asks for none. On a
 * document with stand-ins it reads a container list's resource names, and throws StandInUndecided where they do
 * not decide (or the JobSet's replicatedJobs are a stand-in: their templates are not there to read).
 */
export function gpuWorkloadGuard(policy: Pick<Policy, "jobKinds" | "gpu">, kind: QueuedWorkloadKind): Guard {
  const isGpu = (name: string): boolean => sentAsGpu(name, policy.gpu);
  const anyGpu = (m: unknown): boolean => isObject(m) && Object.keys(m).some(isGpu);
  const claims = policy.gpu.deviceClasses.length > 0;
  const asks = (spec: unknown): boolean => {
    if (!isObject(spec)) return false;
    if (claims && Array.isArray(spec.resourceClaims) && spec.resourceClaims.length > 0) return true;
    return [spec.initContainers, spec.containers].some((l) => {
      if (!Array.isArray(l)) return false;
      const names = standInNames(l);
      if (names === null) throw new StandInUndecided("too many resource names in a container list");
      if (names) return names.some(isGpu);
      return l.some((c) => isObject(c) && isObject(c.resources) && (anyGpu(c.resources.requests) || anyGpu(c.resources.limits)));
    });
  };
  return (req) => {
    const obj = req.object;
    if (!isObject(obj)) return undefined;
    if (isObject(obj.spec) && standInNames(obj.spec.replicatedJobs) !== undefined) throw new StandInUndecided("a JobSet's replicatedJobs");
    const at = (path: Array<string | number>): unknown =>
      path.reduce<unknown>((v, k) => (typeof k === "number" ? (Array.isArray(v) ? v[k] : undefined) : isObject(v) ? v[k] : undefined), obj);
    if (kind.templatePaths(obj).some((p) => asks(at([...p, "spec"])))) return undefined;
    return `a ${kind.kind} whose pod templates ask for no GPU resource and name no ResourceClaims`;
  };
}

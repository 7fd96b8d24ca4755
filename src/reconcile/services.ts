/**
 * @module
 * Per-replica headless Services, as the training operator v1.8.1 makes them (`pkg/controller.v1/common/service.go`
 * CreateNewService, `pkg/core/service.go` GetPortsFromJob), for the replica pods of a job the operator does not
 * serve. For a pod without its Service, one named like it (`GenGeneralName`: `<job>-<type>-<index>`):
 *
 * - `metadata.labels` = `spec.selector` = the operator's `GenLabels` (`operator-name`, `job-name`) plus
 *   `replica-type` and `replica-index`: not the pod's own labels (its template's labels and `job-role` are
 *   left out, as upstream does);
 * - `clusterIP: None`, one port `{name, port}` per port of the framework's default container, after the
 *   operator's in-memory defaulting (`defaulting_utils.go` setDefaultPort: the framework's port, e.g.
 *   `tfjob-port: 2222`, appended when that container has no port of that name); ports are keyed by name as
 *   upstream's map is (the last of a name wins), in the container's order (upstream's is a Go map's: random);
 * - owned by the job (controller, blockOwnerDeletion), so the garbage collector removes it with the job.
 *
 * None where upstream makes none: a replica type without a container named like the framework's default
 * ("failed to find the port"), an index at or beyond the type's `replicas` (upstream deletes that Service), a
 * pod named otherwise than `GenGeneralName`, a finished, suspended or deleting job, and a kind whose operator
 * creates no Services (the label scheme says so: caffe2-operator creates none).
 *
 * A job the operator serves gets none at all: the operator owns its Services (it creates the missing ones on its
 * next reconcile of the job) and Quartermaster must not write what the operator owns. The evidence is the job's
 * status: the operator writes its conditions (`Created` first) at the end of its first reconcile of the job, after
 * that reconcile created the pods and Services; Quartermaster never writes job status. Before that first write
 * (a window of milliseconds per job) a pass can still create a Service the operator is about to create; it is
 * the same object (test/conformance/services.test.ts), and the operator's create then fails with AlreadyExists
 * and its next reconcile finds the Service in place.
 */
import type { KubeObject } from "../admission/types.js";
import { FRAMEWORKS, replicaName } from "../mutate/frameworks.js";
import type { JobKind } from "../policy/types.js";
import { labelScheme } from "../topology/label-scheme.js";
import { replicaSpecs, replicasOf } from "../topology/resolve.js";
import { finishedAt } from "./finished.js";
import type { Meta } from "./meta.js";

export interface CreateServiceAction {
  verb: "create";
  kind: "Service";
  namespace: string;
  name: string;
  job: string;
  reason: string;
  body: KubeObject;
}


/** The names of the Services of each namespace. */
export type ServiceNames = ReadonlyMap<string, ReadonlySet<string>>;

/**
 * Every Service's name by namespace, built once a pass (a per-job scan would be quadratic at scale; no
 * `namespace/name` strings are built, 100,000 of them a pass being garbage).
 */
export function serviceKeys(services: readonly KubeObject[]): ServiceNames {
  const out = new Map<string, Set<string>>();
  for (const s of services) {
    const m = (s.metadata ?? {}) as Meta;
    const ns = m.namespace ?? "";
    let names = out.get(ns);
    if (!names) out.set(ns, (names = new Set()));
    if (m.name) names.add(m.name);
  }
  return out;
}

/** Why the operator is known to serve the job (it wrote the job's status conditions), or undefined. */
export function servedByOperator(job: KubeObject): string | undefined {
  const conditions = (job.status as { conditions?: unknown } | undefined)?.conditions;
  if (!Array.isArray(conditions) || conditions.length === 0) return undefined;
  const types = conditions.map((c) => String((c as { type?: unknown } | null)?.type ?? "?"));
  return `the training operator serves the job (status conditions ${types.join(", ")}): its Services are the operator's`;
}

interface Port {
  name?: string;
  containerPort?: unknown;
}

/**
 * The Service ports upstream derives for a replica spec: the default container's ports after defaulting, one
 * per name; undefined when the spec has no container of the default name (upstream: "failed to find the port").
 */
export function servicePorts(spec: Record<string, any>, kind: Pick<JobKind, "framework">): Array<{ name?: string; port: number }> | undefined {
  const info = FRAMEWORKS[kind.framework];
  const containers = (spec.template?.spec?.containers ?? []) as Array<{ name?: string; ports?: Port[] }>;
  const container = containers.find((c) => c.name === info.container);
  if (!container) return undefined;
  const declared = Array.isArray(container.ports) ? container.ports : [];
  const ports: Port[] = declared.some((p) => p?.name === info.portName) ? declared : [...declared, { name: info.portName, containerPort: info.port }];
  // Go's map[string]int32 keyed by name: one port per name, the last value of a name winning.
  const byName = new Map<string, number>();
  for (const p of ports) if (typeof p?.containerPort === "number") byName.set(p.name ?? "", p.containerPort);
  return [...byName].map(([name, port]) => (name ? { name, port } : { port }));
}

/** `have`: the Services of the cluster (`serviceKeys`), whoever owns them. */
export function planReplicaServices(job: KubeObject, kind: JobKind, pods: readonly KubeObject[], have: ServiceNames): CreateServiceAction[] {
  const jm = (job.metadata ?? {}) as Meta;
  const scheme = labelScheme(kind);
  if (!scheme.services || jm.deletionTimestamp || finishedAt(job).finished || servedByOperator(job)) return [];
  if ((job.spec as { runPolicy?: { suspend?: unknown } } | undefined)?.runPolicy?.suspend === true) return [];
  const specs = replicaSpecs(job, kind);
  const out: CreateServiceAction[] = [];
  for (const pod of pods) {
    const pm = (pod.metadata ?? {}) as Meta;
    if (!pm.name || pm.deletionTimestamp || have.get(pm.namespace ?? "")?.has(pm.name)) continue;
    const type = pm.labels?.[scheme.replicaTypeLabel];
    const spec = specs.find(([t]) => t.toLowerCase() === type)?.[1];
    const indexLabel = pm.labels?.[scheme.replicaIndexLabel] ?? "";
    const index = /^(0|[1-9][0-9]*)$/.test(indexLabel) ? Number(indexLabel) : -1;
    if (!spec || !type || index < 0 || index >= replicasOf(spec)) continue;
    if (pm.name !== replicaName(String(jm.name ?? ""), type, index)) continue;
    const ports = servicePorts(spec, kind);
    if (!ports) continue;
    const labels = { ...scheme.selector(job), [scheme.replicaTypeLabel]: type, [scheme.replicaIndexLabel]: String(index) };
    out.push({
      verb: "create",
      kind: "Service",
      namespace: pm.namespace ?? jm.namespace ?? "",
      name: pm.name,
      job: `${kind.kind}/${jm.name}`,
      reason: `replica pod ${pm.name} has no Service`,
      body: {
        apiVersion: "v1",
        kind: "Service",
        metadata: {
          name: pm.name,
          namespace: pm.namespace ?? jm.namespace,
          labels,
          ownerReferences: [{ apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: jm.name, uid: jm.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: { clusterIP: "None", selector: { ...labels }, ...(ports.length > 0 ? { ports } : {}) },
      },
    });
  }
  return out;
}

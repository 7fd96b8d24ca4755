/**
 * @module
 * Per-replica headless Services (training-operator `common/service.go` CreateNewService): a job's replica
 * pod without its Service gets one named like the pod, `clusterIP: None`, selecting the pod's labels minus
 * `job-role`, with one port per port of the framework's default container in that replica's template, owned
 * by the job (so the garbage collector removes it with the job). Finished or deleting jobs get none, and
 * neither do kinds whose operator creates no Services (the label scheme says so: caffe2-operator creates none);
 * the replica type is read from the scheme's label.
 */
import type { KubeObject } from "../admission/types.js";
import { LABEL_JOB_ROLE } from "../keys.js";
import { FRAMEWORKS } from "../mutate/frameworks.js";
import type { JobKind } from "../policy/types.js";
import { labelScheme } from "../topology/label-scheme.js";
import { replicaSpecs } from "../topology/resolve.js";
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

/** `have`: the Services of the cluster (`serviceKeys`), whoever owns them. */
export function planReplicaServices(job: KubeObject, kind: JobKind, pods: readonly KubeObject[], have: ServiceNames): CreateServiceAction[] {
  const jm = (job.metadata ?? {}) as Meta;
  const scheme = labelScheme(kind);
  if (!scheme.services || jm.deletionTimestamp || finishedAt(job).finished) return [];
  const info = FRAMEWORKS[kind.framework];
  const specs = replicaSpecs(job, kind);
  const out: CreateServiceAction[] = [];
  for (const pod of pods) {
    const pm = (pod.metadata ?? {}) as Meta;
    if (!pm.name || pm.deletionTimestamp || have.get(pm.namespace ?? "")?.has(pm.name)) continue;
    const type = pm.labels?.[scheme.replicaTypeLabel];
    const spec = specs.find(([t]) => t.toLowerCase() === type)?.[1];
    if (!spec) continue;
    const containers = (spec.template?.spec?.containers ?? []) as Array<{ name?: string; ports?: Array<{ name?: string; containerPort?: number }> }>;
    const ports = (containers.find((c) => c.name === info.container)?.ports ?? [])
      .filter((p) => typeof p.containerPort === "number")
      .map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.containerPort! }));
    const selector = Object.fromEntries(Object.entries(pm.labels ?? {}).filter(([k]) => k !== LABEL_JOB_ROLE));
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
          labels: selector,
          ownerReferences: [{ apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: jm.name, uid: jm.uid, controller: true, blockOwnerDeletion: true }],
        },
        spec: { clusterIP: "None", selector, ...(ports.length > 0 ? { ports } : {}) },
      },
    });
  }
  return out;
}

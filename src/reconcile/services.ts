/**
 * @module
 * Per-replica headless Services (training-operator `common/service.go` CreateNewService): a job's replica
 * pod without its Service gets one named like the pod, `clusterIP: None`, selecting the pod's labels minus
 * `job-role`, with one port per port of the framework's default container in that replica's template, owned
 * by the job (so the garbage collector removes it with the job). Finished or deleting jobs get none.
 */
import type { KubeObject } from "../admission/types.js";
import { LABEL_JOB_ROLE, LABEL_REPLICA_TYPE } from "../keys.js";
import { FRAMEWORKS } from "../mutate/frameworks.js";
import type { JobKind } from "../policy/types.js";
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


const key = (m: Meta | undefined): string => `${m?.namespace ?? ""}/${m?.name ?? ""}`;

/** `namespace/name` of every Service, built once a pass (a per-job scan would be quadratic at scale). */
export function serviceKeys(services: readonly KubeObject[]): Set<string> {
  return new Set(services.map((s) => key(s.metadata as Meta | undefined)));
}

/** `have`: the keys of every Service in the cluster (`serviceKeys`), whoever owns them. */
export function planReplicaServices(job: KubeObject, kind: JobKind, pods: readonly KubeObject[], have: ReadonlySet<string>): CreateServiceAction[] {
  const jm = (job.metadata ?? {}) as Meta;
  if (jm.deletionTimestamp || finishedAt(job).finished) return [];
  const info = FRAMEWORKS[kind.framework];
  const specs = replicaSpecs(job, kind);
  const out: CreateServiceAction[] = [];
  for (const pod of pods) {
    const pm = (pod.metadata ?? {}) as Meta;
    if (!pm.name || pm.deletionTimestamp || have.has(key(pm))) continue;
    const type = pm.labels?.[LABEL_REPLICA_TYPE];
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

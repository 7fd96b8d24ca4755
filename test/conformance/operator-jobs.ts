/**
 * Jobs of the five frameworks the training operator v1.9.4 serves (TF, PyTorch, JAX, XGBoost, Paddle), shaped for the Service and coexistence
 * suites (`services.test.ts`, `coexistence.test.ts`): replica types per framework, container and port layouts
 * (the framework's port absent, renumbered, beside other ports, a sidecar's ports, a UDP port), template labels,
 * replicas unset, lower-case replica types, and layouts upstream makes no Service for. Plus the waits on the
 * operator and the Service view both sides are compared in.
 */
import type { ControlPlane } from "../e2e/harness/controlplane.js";

export type Obj = Record<string, any>;

export interface FrameworkCase {
  kind: string;
  plural: string;
  specsField: string;
  container: string;
  portName: string;
  /** Replica types and counts; `undefined` leaves `replicas` out. */
  shapes: Array<Record<string, number | undefined>>;
  spec?: Obj;
}

export const FRAMEWORK_CASES: FrameworkCase[] = [
  {
    kind: "TFJob",
    plural: "tfjobs",
    specsField: "tfReplicaSpecs",
    container: "tensorflow",
    portName: "tfjob-port",
    shapes: [{ PS: 1, Worker: 2 }, { Chief: 1, Worker: 2 }, { Worker: 3 }],
  },
  {
    kind: "PyTorchJob",
    plural: "pytorchjobs",
    specsField: "pytorchReplicaSpecs",
    container: "pytorch",
    portName: "pytorchjob-port",
    shapes: [{ Master: 1, Worker: 2 }, { Worker: 2 }],
  },
  {
    kind: "JAXJob",
    plural: "jaxjobs",
    specsField: "jaxReplicaSpecs",
    container: "jax",
    portName: "jaxjob-port",
    shapes: [{ Worker: 2 }, { Worker: 3 }],
  },
  {
    kind: "XGBoostJob",
    plural: "xgboostjobs",
    specsField: "xgbReplicaSpecs",
    container: "xgboost",
    portName: "xgboostjob-port",
    shapes: [{ Master: 1, Worker: 2 }, { Master: 1 }],
  },
  {
    kind: "PaddleJob",
    plural: "paddlejobs",
    specsField: "paddleReplicaSpecs",
    container: "paddle",
    portName: "master",
    shapes: [{ Master: 1, Worker: 2 }, { Worker: 2 }],
  },
];

/** A container/port layout of every replica type of a job. `served` false: upstream creates no Service for it. */
export interface Layout {
  name: string;
  served: boolean;
  containers(f: FrameworkCase, n: number): Obj[];
  labels?: Record<string, string>;
  lowerCaseTypes?: boolean;
  unsetReplicas?: boolean;
}

const image = "registry.invalid/train:1";
export const LAYOUTS: Layout[] = [
  { name: "bare", served: true, containers: (f) => [{ name: f.container, image }] },
  { name: "renumbered", served: true, containers: (f, n) => [{ name: f.container, image, ports: [{ name: f.portName, containerPort: 20000 + n }] }] },
  {
    name: "metrics",
    served: true,
    containers: (f, n) => [
      {
        name: f.container,
        image,
        ports: [
          { name: "metrics", containerPort: 8000 },
          { name: f.portName, containerPort: 21000 + n },
        ],
      },
    ],
  },
  {
    name: "sidecar",
    served: true,
    containers: (f) => [
      { name: "sidecar", image, ports: [{ name: "side", containerPort: 7000 }] },
      { name: f.container, image, ports: [{ name: "metrics", containerPort: 8000 }] },
    ],
  },
  {
    name: "labelled",
    served: true,
    labels: { team: "vision", "app.kubernetes.io/name": "trainer" },
    lowerCaseTypes: true,
    unsetReplicas: true,
    containers: (f) => [
      { name: f.container, image, ports: [{ name: "gossip", containerPort: 7946, protocol: "UDP" }] },
      { name: "logger", image },
    ],
  },
  // Upstream makes no Service for these: no container of the default name ("failed to find the port"), and an
  // unnamed port beside the framework's (a multi-port Service needs names: the create is refused).
  { name: "nodefault", served: false, containers: (f) => [{ name: "main", image, ports: [{ name: f.portName, containerPort: 2222 }] }] },
  { name: "unnamed", served: false, containers: (f) => [{ name: f.container, image, ports: [{ containerPort: 5000 }] }] },
];

export interface JobCase {
  f: FrameworkCase;
  layout: Layout;
  job: Obj;
  /** Pods (and, when served, Services) upstream makes for it. */
  replicas: number;
}

/** Every framework × shape × layout (each layout `take` picks), named `<kind>-<layout>-<n>`. */
export function jobCases(namespace: string, layouts: Layout[] = LAYOUTS, prefix = ""): JobCase[] {
  const out: JobCase[] = [];
  let n = 0;
  for (const f of FRAMEWORK_CASES) {
    for (const layout of layouts) {
      const shape = f.shapes[n % f.shapes.length]!;
      n++;
      const specs: Obj = {};
      let replicas = 0;
      for (const [type, count] of Object.entries(shape)) {
        const unset = layout.unsetReplicas && type !== "Worker";
        replicas += unset ? 1 : (count ?? 1);
        specs[layout.lowerCaseTypes ? type.toLowerCase() : type] = {
          ...(unset ? {} : { replicas: count }),
          restartPolicy: "Never",
          template: {
            ...(layout.labels ? { metadata: { labels: layout.labels, annotations: { "example.com/note": "kept off the Service" } } } : {}),
            spec: { containers: layout.containers(f, n) },
          },
        };
      }
      const name = `${prefix}${f.kind.toLowerCase().replace(/job$/, "")}-${layout.name}-${n}`;
      out.push({
        f,
        layout,
        replicas,
        job: { apiVersion: "kubeflow.org/v1", kind: f.kind, metadata: { name, namespace }, spec: { ...(f.spec ?? {}), [f.specsField]: specs } },
      });
    }
  }
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The controller ownerReference's uid. */
export const controllerOf = (o: Obj): string | undefined => (o.metadata.ownerReferences as Obj[] | undefined)?.find((r) => r.controller)?.uid;

export async function list(cp: ControlPlane, path: string): Promise<Obj[]> {
  const r = await cp.api("GET", path);
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.items as Obj[];
}

/** Creates the jobs; returns their uids by name. */
export async function createJobs(cp: ControlPlane, namespace: string, cases: JobCase[]): Promise<Map<string, string>> {
  const uids = new Map<string, string>();
  for (const c of cases) {
    const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${namespace}/${c.f.plural}`, c.job);
    if (r.status !== 201) throw new Error(`${c.f.kind} ${c.job.metadata.name}: ${r.status} ${JSON.stringify(r.body)}`);
    uids.set(c.job.metadata.name, r.body.metadata.uid);
  }
  return uids;
}

/**
 * Waits until the operator made every pod and Service of the served cases and wrote their status (`served`
 * jobs only), then a settle period for the others (whose reconciles fail and are retried).
 */
export async function awaitOperator(
  cp: ControlPlane,
  namespace: string,
  cases: JobCase[],
  uids: Map<string, string>,
  logs: () => string,
  settleMs = 3000,
): Promise<void> {
  const deadline = performance.now() + 180_000;
  for (;;) {
    const [pods, services] = [await list(cp, `/api/v1/namespaces/${namespace}/pods`), await list(cp, `/api/v1/namespaces/${namespace}/services`)];
    const count = (items: Obj[], uid: string) => items.filter((o) => controllerOf(o) === uid).length;
    const short: string[] = [];
    for (const c of cases.filter((x) => x.layout.served)) {
      const uid = uids.get(c.job.metadata.name)!;
      const [p, s] = [count(pods, uid), count(services, uid)];
      let status = true;
      if (p >= c.replicas && s >= c.replicas) {
        const job = (await cp.api("GET", `/apis/kubeflow.org/v1/namespaces/${namespace}/${c.f.plural}/${c.job.metadata.name}`)).body;
        status = ((job.status?.conditions as Obj[] | undefined) ?? []).length > 0;
      }
      if (p < c.replicas || s < c.replicas || !status)
        short.push(`${c.job.metadata.name} pods ${p}/${c.replicas} services ${s}/${c.replicas}${status ? "" : " no status"}`);
    }
    if (short.length === 0) break;
    if (performance.now() > deadline) throw new Error(`the operator did not serve every job: ${short.join(", ")}\n${logs()}`);
    await sleep(1000);
  }
  await sleep(settleMs);
}

/** A Service as compared: identity, labels, annotations, owners and the spec (ports in name order; the apiserver's defaults included). */
export function serviceView(s: Obj): Obj {
  const spec = { ...s.spec };
  if (Array.isArray(spec.ports)) spec.ports = [...spec.ports].sort((a: Obj, b: Obj) => String(a.name ?? "").localeCompare(String(b.name ?? "")));
  return {
    labels: s.metadata.labels ?? {},
    annotations: s.metadata.annotations ?? {},
    ownerReferences: s.metadata.ownerReferences ?? [],
    spec,
  };
}

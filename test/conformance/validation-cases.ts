/**
 * @module
 * The validation-parity table: named TFJobs, PyTorchJobs, JAXJobs, XGBoostJobs and PaddleJobs, valid and
 * invalid, for test/conformance/validation-parity.test.ts. The cases follow what decides a create in the
 * training operator v1.9.4: its validating webhooks (`pkg/webhooks/{tensorflow,pytorch,jax,xgboost,
 * paddlepaddle}/*_webhook.go`: DNS-1035 name, replica specs present, containers, images, the framework's
 * default container, replica types, Chief/Master counts, Master replicas, XGBoost's Master,
 * `elasticPolicy.nProcPerNode` with `nprocPerNode`) and its CRDs' OpenAPI schemas (`manifests/base/crds`:
 * required fields, types, int32 formats), plus shapes neither checks (elastic bounds, RDZV settings,
 * nprocPerNode values, run-policy values, replica types of any name) where both must accept.
 * No case states a verdict: the operator's is the reference, measured in the test.
 */

type Obj = Record<string, any>;

export interface ParityCase {
  /** Unique; the test's title and the key of the deliberately-stricter list. */
  name: string;
  kind: string;
  plural: string;
  specsField: string;
  job: Obj;
}

interface KindInfo {
  plural: string;
  specsField: string;
  container: string;
  /** A valid replica layout of the kind. */
  base: Record<string, number>;
  /** Spec fields every job of the kind needs (MXJob's required jobMode, when the operator still served it). */
  spec?: Obj;
}

export const KINDS: Record<string, KindInfo> = {
  TFJob: { plural: "tfjobs", specsField: "tfReplicaSpecs", container: "tensorflow", base: { PS: 1, Worker: 2 } },
  PyTorchJob: { plural: "pytorchjobs", specsField: "pytorchReplicaSpecs", container: "pytorch", base: { Master: 1, Worker: 2 } },
  JAXJob: { plural: "jaxjobs", specsField: "jaxReplicaSpecs", container: "jax", base: { Worker: 2 } },
  XGBoostJob: { plural: "xgboostjobs", specsField: "xgbReplicaSpecs", container: "xgboost", base: { Master: 1, Worker: 2 } },
  PaddleJob: { plural: "paddlejobs", specsField: "paddleReplicaSpecs", container: "paddle", base: { Master: 1, Worker: 2 } },
};

const IMAGE = "registry.invalid/train:1";

/** A replica spec: `replicas` (left out when undefined) and containers by name, each with an image. */
export function replica(replicas: unknown, containers: string[], restartPolicy: string | undefined = "Never"): Obj {
  return {
    ...(replicas === undefined ? {} : { replicas }),
    ...(restartPolicy === undefined ? {} : { restartPolicy }),
    template: { spec: { containers: containers.map((name) => ({ name, image: IMAGE })) } },
  };
}

function make(kind: string, name: string, title: string, specs: Obj | undefined, spec: Obj = {}, metadataName = name): ParityCase {
  const k = KINDS[kind]!;
  const body: Obj = { ...(k.spec ?? {}), ...spec };
  if (specs !== undefined) body[k.specsField] = specs;
  return {
    name: `${kind} ${title}`,
    kind,
    plural: k.plural,
    specsField: k.specsField,
    job: { apiVersion: "kubeflow.org/v1", kind, metadata: { name: metadataName }, spec: body },
  };
}

/** The kind's valid layout, each replica type with the default container. */
function baseSpecs(kind: string): Obj {
  const k = KINDS[kind]!;
  return Object.fromEntries(Object.entries(k.base).map(([t, n]) => [t, replica(n, [k.container])]));
}

/** The kind's valid layout with the Worker spec replaced by `worker` (the spec of the type every kind has). */
const withWorker = (kind: string, worker: unknown): Obj => ({ ...baseSpecs(kind), Worker: worker });

/** Cases every kind gets: names, containers, images, replica counts, run policy, resources. */
function common(kind: string): ParityCase[] {
  const k = KINDS[kind]!;
  const c = k.container;
  const slug = kind.toLowerCase();
  const out: ParityCase[] = [];
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}, metadataName = `${slug}-${out.length}`): void => {
    out.push(make(kind, `${slug}-${out.length}`, title, specs, spec, metadataName));
  };
  const workerWith = (mutate: (w: Obj) => void): Obj => {
    const w = replica(2, [c]);
    mutate(w);
    return withWorker(kind, w);
  };

  add("valid", baseSpecs(kind));
  add("valid, sidecar before the default container", withWorker(kind, replica(2, ["sidecar", c])));
  // Names: the apiserver wants a DNS subdomain for any custom resource, the webhooks a DNS-1035 label.
  add("name starting with a digit", baseSpecs(kind), {}, `1${slug}`);
  add("name with a dot", baseSpecs(kind), {}, `${slug}.v2`);
  add("name of 64 characters", baseSpecs(kind), {}, "a".repeat(64));
  add("name of 63 characters", withWorker(kind, replica(1, [c])), {}, `j${"a".repeat(62)}`);
  add("name with upper-case letters", baseSpecs(kind), {}, `My${kind}`);
  add("name ending in a dash", baseSpecs(kind), {}, `${slug}-`);
  // Pod names: <job>-worker-10 from a 55-character name is 65 characters.
  add("55-character name with 11 workers", withWorker(kind, replica(11, [c])), {}, `p${"a".repeat(54)}`);
  // Containers and images.
  add(
    "no containers in Worker",
    workerWith((w) => (w.template.spec.containers = [])),
  );
  add(
    "Worker template without containers",
    workerWith((w) => (w.template.spec = {})),
  );
  add(
    "Worker template without a spec",
    workerWith((w) => (w.template = {})),
  );
  add("Worker container named main, not the default", withWorker(kind, replica(2, ["main"])));
  add("Worker default container named in upper case", withWorker(kind, replica(2, [c.toUpperCase()])));
  add(
    "Worker default container without an image",
    workerWith((w) => delete w.template.spec.containers[0].image),
  );
  add(
    "Worker sidecar without an image",
    workerWith((w) => w.template.spec.containers.push({ name: "sidecar" })),
  );
  add(
    "Worker container without a name",
    workerWith((w) => w.template.spec.containers.push({ image: IMAGE })),
  );
  // Replica counts (int32 in the CRDs, no minimum).
  add("Worker replicas -1", withWorker(kind, replica(-1, [c])));
  add("Worker replicas 0", withWorker(kind, replica(0, [c])));
  add("Worker replicas unset", withWorker(kind, replica(undefined, [c])));
  add('Worker replicas "2" (a string)', withWorker(kind, replica("2", [c])));
  add("Worker replicas 1.5", withWorker(kind, replica(1.5, [c])));
  add("Worker replicas 2^31 (over int32)", withWorker(kind, replica(2 ** 31, [c])));
  add("Worker spec null", withWorker(kind, null));
  // Replica specs as a whole.
  add("no replica specs field", undefined);
  add("empty replica specs", {});
  // Run policy and restart policy: free strings and int32s in the CRDs.
  add("runPolicy cleanPodPolicy Bogus, backoffLimit -1", baseSpecs(kind), { runPolicy: { cleanPodPolicy: "Bogus", backoffLimit: -1 } });
  add("runPolicy ttl 0, activeDeadlineSeconds 1, suspend", baseSpecs(kind), {
    runPolicy: { ttlSecondsAfterFinished: 0, activeDeadlineSeconds: 1, suspend: true, cleanPodPolicy: "All" },
  });
  add('runPolicy ttlSecondsAfterFinished "60" (a string)', baseSpecs(kind), { runPolicy: { ttlSecondsAfterFinished: "60" } });
  add('runPolicy suspend "yes"', baseSpecs(kind), { runPolicy: { suspend: "yes" } });
  add("runPolicy schedulingPolicy", baseSpecs(kind), {
    runPolicy: { schedulingPolicy: { minAvailable: 3, queue: "research", priorityClass: "high", minResources: { cpu: "4" } } },
  });
  add("runPolicy schedulingPolicy minResources not a quantity", baseSpecs(kind), { runPolicy: { schedulingPolicy: { minResources: { cpu: "four" } } } });
  add("runPolicy managedBy of another controller", baseSpecs(kind), { runPolicy: { managedBy: "example.com/other" } });
  add("unknown spec field (pruned)", baseSpecs(kind), { colour: "blue" });
  add("Worker restartPolicy Sometimes", withWorker(kind, replica(2, [c], "Sometimes")));
  add("Worker restartPolicy ExitCode", withWorker(kind, replica(2, [c], "ExitCode")));
  // Resources: the webhooks do not look at them.
  add(
    "Worker asks for half a GPU",
    workerWith((w) => (w.template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": "0.5" } })),
  );
  add(
    "Worker GPU request 1, limit 2",
    workerWith((w) => (w.template.spec.containers[0].resources = { requests: { "nvidia.com/gpu": "1" }, limits: { "nvidia.com/gpu": "2" } })),
  );
  add(
    "Worker asks for 8 GPUs",
    workerWith((w) => (w.template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": "8" } })),
  );
  return out;
}

function tensorflow(): ParityCase[] {
  const out: ParityCase[] = [];
  const r = (n: unknown): Obj => replica(n, ["tensorflow"]);
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}): void => {
    out.push(make("TFJob", `tfjob-x${out.length}`, title, specs, spec));
  };
  add("Chief, PS, Worker, Evaluator", { Chief: r(1), PS: r(1), Worker: r(2), Evaluator: r(1) });
  add("Master and Worker", { Master: r(1), Worker: r(2) });
  add("Chief and Master", { Chief: r(1), Master: r(1), Worker: r(2) });
  add("Chief with 0 replicas and Master", { Chief: r(0), Master: r(1), Worker: r(2) });
  add("Chief with 2 replicas", { Chief: r(2), Worker: r(2) });
  add("chief (lower case) and Master", { chief: r(1), Master: r(1), Worker: r(2) });
  add("replica types of any name (Foo, worker)", { Foo: r(1), worker: r(2) });
  add("Worker only", { Worker: r(1) });
  add("enableDynamicWorker and successPolicy", { PS: r(1), Worker: r(2) }, { enableDynamicWorker: true, successPolicy: "AllWorkers" });
  add('enableDynamicWorker "yes" (a string)', { PS: r(1), Worker: r(2) }, { enableDynamicWorker: "yes" });
  return out;
}

function pytorch(): ParityCase[] {
  const out: ParityCase[] = [];
  const r = (n: unknown): Obj => replica(n, ["pytorch"]);
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}): void => {
    out.push(make("PyTorchJob", `pytorchjob-x${out.length}`, title, specs, spec));
  };
  const mw = { Master: r(1), Worker: r(2) };
  add("Master with 2 replicas", { Master: r(2), Worker: r(2) });
  add("Master with 0 replicas", { Master: r(0), Worker: r(2) });
  add("Master with replicas unset", { Master: r(undefined), Worker: r(2) });
  add("Master only", { Master: r(1) });
  add("Worker only", { Worker: r(3) });
  add("lower-case master and worker", { master: r(1), worker: r(2) });
  add("a Launcher replica type", { Launcher: r(1), Worker: r(2) });
  for (const nproc of ["auto", "gpu", "cpu", "8", "many"]) add(`nprocPerNode "${nproc}"`, mw, { nprocPerNode: nproc });
  add("nprocPerNode 8 (a number)", mw, { nprocPerNode: 8 });
  // Elastic policy: bounds, nProcPerNode, RDZV settings, metrics.
  add("elastic, min 1 max 4", { Worker: r(2) }, { elasticPolicy: { minReplicas: 1, maxReplicas: 4 } });
  add("elastic, min 4 above max 2", { Worker: r(2) }, { elasticPolicy: { minReplicas: 4, maxReplicas: 2 } });
  add("elastic, min -1, maxRestarts -3", { Worker: r(2) }, { elasticPolicy: { minReplicas: -1, maxRestarts: -3 } });
  add("elastic, no Worker spec", { Master: r(1) }, { elasticPolicy: { maxReplicas: 3 } });
  add("elastic nProcPerNode alone (deprecated)", { Worker: r(2) }, { elasticPolicy: { nProcPerNode: 4 } });
  add("elastic nProcPerNode with nprocPerNode", { Worker: r(2) }, { elasticPolicy: { nProcPerNode: 4 }, nprocPerNode: "4" });
  add("elastic nProcPerNode with nprocPerNode and a Master of 2", { Master: r(2), Worker: r(2) }, { elasticPolicy: { nProcPerNode: 2 }, nprocPerNode: "2" });
  add('elastic nProcPerNode "4" (a string)', { Worker: r(2) }, { elasticPolicy: { nProcPerNode: "4" } });
  add(
    "elastic RDZV etcd with host, port, id, conf",
    { Worker: r(2) },
    { elasticPolicy: { rdzvBackend: "etcd", rdzvHost: "etcd.example", rdzvPort: 2379, rdzvId: "run-7", rdzvConf: [{ key: "timeout", value: "900" }] } },
  );
  add("elastic RDZV backend of any name", { Worker: r(2) }, { elasticPolicy: { rdzvBackend: "carrier-pigeon", rdzvPort: 0 } });
  add('elastic rdzvPort "29400" (a string)', { Worker: r(2) }, { elasticPolicy: { rdzvPort: "29400" } });
  add("elastic rdzvConf entry as a string", { Worker: r(2) }, { elasticPolicy: { rdzvConf: ["timeout=900"] } });
  add('elastic standalone "true" (a string)', { Worker: r(2) }, { elasticPolicy: { standalone: "true" } });
  add(
    "elastic metrics entry without a type",
    { Worker: r(2) },
    { elasticPolicy: { metrics: [{ resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 80 } } }] } },
  );
  add(
    "elastic metrics resource target",
    { Worker: r(2) },
    { elasticPolicy: { maxReplicas: 4, metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 80 } } }] } },
  );
  return out;
}

function jax(): ParityCase[] {
  const out: ParityCase[] = [];
  const r = (n: unknown): Obj => replica(n, ["jax"]);
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}): void => {
    out.push(make("JAXJob", `jaxjob-x${out.length}`, title, specs, spec));
  };
  add("one Worker", { Worker: r(1) });
  add("lower-case worker", { worker: r(2) });
  add("a Master replica type besides Worker", { Master: r(1), Worker: r(2) });
  add("replica types of any name", { Boss: r(1), minion: r(2) });
  add("Worker with a jaxjob-port", {
    Worker: { ...r(2), template: { spec: { containers: [{ name: "jax", image: IMAGE, ports: [{ name: "jaxjob-port", containerPort: 6000 }] }] } } },
  });
  return out;
}

function xgboost(): ParityCase[] {
  const out: ParityCase[] = [];
  const r = (n: unknown): Obj => replica(n, ["xgboost"]);
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}): void => {
    out.push(make("XGBoostJob", `xgboostjob-x${out.length}`, title, specs, spec));
  };
  add("Master only", { Master: r(1) });
  add("Worker only, no Master", { Worker: r(2) });
  add("Master with 2 replicas", { Master: r(2), Worker: r(2) });
  add("Master with 0 replicas", { Master: r(0), Worker: r(2) });
  add("Master with replicas unset", { Master: r(undefined), Worker: r(2) });
  add("lower-case master and worker", { master: r(1), worker: r(2) });
  add("a PS replica type besides Master", { Master: r(1), PS: r(1) });
  return out;
}

function paddle(): ParityCase[] {
  const out: ParityCase[] = [];
  const r = (n: unknown): Obj => replica(n, ["paddle"]);
  const add = (title: string, specs: Obj | undefined, spec: Obj = {}): void => {
    out.push(make("PaddleJob", `paddlejob-x${out.length}`, title, specs, spec));
  };
  add("collective: Worker only", { Worker: r(4) });
  add("Master with 2 replicas (parameter servers)", { Master: r(2), Worker: r(2) });
  add("Master with replicas unset", { Master: r(undefined), Worker: r(2) });
  add("a PS replica type", { PS: r(1), Worker: r(2) });
  add("lower-case worker", { worker: r(2) });
  add("elastic, min 1 max 4", { Worker: r(2) }, { elasticPolicy: { minReplicas: 1, maxReplicas: 4, maxRestarts: 3 } });
  add("elastic, min 5 above max 1", { Worker: r(2) }, { elasticPolicy: { minReplicas: 5, maxReplicas: 1 } });
  add('elastic maxReplicas "4" (a string)', { Worker: r(2) }, { elasticPolicy: { maxReplicas: "4" } });
  return out;
}

/** Every case, names unique. */
export function validationCases(): ParityCase[] {
  const all = [...Object.keys(KINDS).flatMap(common), ...tensorflow(), ...pytorch(), ...jax(), ...xgboost(), ...paddle()];
  const seen = new Set<string>();
  for (const c of all) {
    if (seen.has(c.name)) throw new Error(`duplicate case name ${c.name}`);
    seen.add(c.name);
  }
  return all;
}

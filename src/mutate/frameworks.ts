/**
 * @module
 * The distributed cluster spec of each framework, byte for byte as the Kubeflow training operator
 * writes it (github.com/kubeflow/training-operator, pkg/controller.v1/<framework>/; the file of each is cited per
 * function). Pure: topology in,
 * environment variables out.
 *
 * Deliberate differences from upstream, each because upstream would refuse to create the pod:
 * a missing framework port falls back to the framework's default port (what the operator's own CRD
 * defaulting would have injected), and PyTorch's `nprocPerNode` / elastic min-max defaulting is applied
 * here when the stored job lacks it (a cluster without the operator's defaulting webhook).
 */
import type { V1EnvVar, V1PodTemplateSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { frameworkInfo, type FrameworkInfo } from "../kinds/frameworks.js";
import { caffe2RuntimeId, isBuiltInFramework, jobShape, replicaName } from "../kinds/index.js";
import { replicaSpecs, replicasOf } from "../membership/resolve.js";
import type { Topology } from "../membership/types.js";

export interface ClusterSpec {
  /** `tensorflow`: only the first container with that name; `all`: every container. */
  target: { container: string } | "all";
  env: V1EnvVar[];
}

export type ClusterSpecResult = ClusterSpec | { skip: string };

type Spec = Record<string, unknown>;

interface Job {
  raw: KubeObject;
  name: string;
  namespace: string;
  spec: Spec;
  specs: ReadonlyArray<readonly [string, Spec]>;
  info: FrameworkInfo;
  /** The per-job parts of the spec (the replica lists and their JSON), each computed once: see {@link once}. */
  parts: Map<string, unknown>;
}

/**
 * The per-job work of the cluster specs, kept per job object: every replica pod of a job lists the same N
 * replicas (TF_CONFIG's and MX_CONFIG's cluster, CAFFE2_CONFIG's hosts, XGBoost's WORKER_ADDRS), so they are
 * built and serialized once per job, and each pod only adds its own task. Keyed by the job object a cached
 * job reader returns (the same, never-changed object for every pod read meanwhile; a new read is a new
 * object, so a changed job is never answered from the old one). Owned by whoever makes it (the pod mutation
 * webhook, one per instance), never module-wide.
 */
export class ClusterSpecMemo {
  private readonly jobs = new WeakMap<KubeObject, Map<string, Job>>();
  /** How many jobs were prepared (a statistic for tests and benchmarks). */
  builds = 0;

  /** @internal */
  job(topology: Topology, namespace: string, clusterDomain: string): Job {
    let byKey = this.jobs.get(topology.job);
    if (!byKey) this.jobs.set(topology.job, (byKey = new Map<string, Job>()));
    const key = `${topology.kind.group}/${topology.kind.kind}\0${namespace}\0${clusterDomain}`;
    let job = byKey.get(key);
    if (!job) {
      byKey.set(key, (job = prepareJob(topology, namespace)));
      this.builds++;
    }
    return job;
  }
}

/** `job`'s part `key`, computed by `make` the first time it is asked for. */
function once<T>(job: Job, key: string, make: () => T): T {
  if (job.parts.has(key)) return job.parts.get(key) as T;
  const v = make();
  job.parts.set(key, v);
  return v;
}

const env = (name: string, value: string): V1EnvVar => ({ name, value });

/**
 * JSON as Go's encoding/json Marshal writes it (the operators' TF_CONFIG, MX_CONFIG and CAFFE2_CONFIG):
 * `JSON.stringify`, with `<`, `>`, `&`, U+2028 and U+2029 escaped as `\u003c` and so on (Go's HTML-safe
 * escaping, on by default). An MXJob's `tuner-server-key` annotation reaches MX_CONFIG verbatim, so these
 * characters do occur (found against the real operator, test/conformance).
 */
export function goJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export { replicaName };

/**
 * The name of replica `index` of type `type` of a job: its pod's and its Service's, as the controller that runs
 * it names them (`objectName` of the kind's shape, `src/kinds/`). Kubeflow kinds: `<job>-<type>-<index>`
 * (GenGeneralName on the job's name). Caffe2: on the `<namespace>/<job>` key (caffe2-operator's genGeneralName),
 * so `<namespace>-<job>-worker-<index>`. TrainJob: JobSet's `<job>-<replicatedJob>-0-<index>`. The one function
 * the job controller, the cluster spec and the webhook's name checks (`src/validate/job.ts`) use.
 */
export function replicaObjectName(framework: string, namespace: string, job: string, type: string, index: number): string {
  return jobShape({ framework }).objectName(namespace, job, type, index);
}

function specOf(job: Job, type: string): Spec | undefined {
  return job.specs.find(([t]) => t.toLowerCase() === type.toLowerCase())?.[1];
}

/** The containerPort of the framework's named port on its default container in `spec`, else the default. */
function portOf(job: Job, spec: Spec | undefined): number {
  const containers = ((spec?.template as V1PodTemplateSpec | undefined)?.spec?.containers ?? []) as Array<{
    name?: string;
    ports?: Array<{ name?: string; containerPort?: number }>;
  }>;
  const c = containers.find((x) => x.name === job.info.container);
  const p = c?.ports?.find((x) => x.name === job.info.portName)?.containerPort;
  return typeof p === "number" ? p : job.info.port;
}

function total(job: Job): number {
  return job.specs.reduce((n, [, s]) => n + replicasOf(s), 0);
}

/**
 * TF_CONFIG as the v1 operator writes it: goJson({ cluster, task, environment: "cloud" }), byte for byte
 * (training-operator `tensorflow/tensorflow.go` genTFConfigJSONStr: the TFConfig struct's field order), from the
 * cluster already serialized (goJson of the map: keys sorted, as Go writes a map). Shared by TFJob pods (below)
 * and TrainJob/JobSet pods (`jobset-tf-config.ts`), which differ only in the hostnames in the cluster.
 */
export function tfConfigJson(clusterJson: string, task: { type: string; index: number }): string {
  return `{"cluster":${clusterJson},"task":${goJson(task)},"environment":"cloud"}`;
}

/** The replica types whose replicas count for `isDistributed` (training-operator `tensorflow/util.go`). */
export const TF_DISTRIBUTED_TYPES: readonly string[] = ["chief", "evaluator", "master", "ps", "worker"];

/** TF_CONFIG (training-operator `tensorflow/tensorflow.go` genTFConfigJSONStr, `util.go` isDistributed). */
function tensorflow(job: Job, t: Topology, clusterDomain: string): ClusterSpecResult {
  const distributed = TF_DISTRIBUTED_TYPES.reduce((n, rt) => n + replicasOf(specOf(job, rt)), 0);
  if (distributed === 1) return { skip: "a TFJob with a single replica is not distributed" };
  const cluster = once(job, `tf-cluster\0${clusterDomain}`, () => {
    const out: Record<string, string[]> = {};
    for (const [type, spec] of [...job.specs].sort(([a], [b]) => (a.toLowerCase() < b.toLowerCase() ? -1 : 1))) {
      const port = portOf(job, spec);
      out[type.toLowerCase()] = Array.from(
        { length: replicasOf(spec) },
        (_, i) => `${replicaName(job.name, type, i)}.${job.namespace}.svc${clusterDomain ? `.${clusterDomain}` : ""}:${port}`,
      );
    }
    return out;
  });
  const rt = t.replicaType.toLowerCase();
  const task = { type: rt, index: t.index };
  let config: string;
  if (job.spec.enableDynamicWorker === true) {
    // convertClusterSpecToSparseClusterSpec: PS see only themselves, worker i only itself and all PS.
    const sparse: { worker: Record<string, string>; ps: string[] | null } = { worker: {}, ps: [] };
    if (rt === "ps") sparse.ps = [cluster.ps![t.index]!];
    else if (rt === "worker") {
      sparse.ps = cluster.ps ?? null;
      sparse.worker[String(t.index)] = cluster.worker![t.index]!;
    }
    config = goJson({ cluster: sparse, task });
  } else {
    const clusterJson = once(job, `tf-cluster-json\0${clusterDomain}`, () => goJson(cluster));
    config = tfConfigJson(clusterJson, task);
  }
  return { target: { container: job.info.container }, env: [env("TF_CONFIG", config)] };
}

/** PyTorch (training-operator `pytorch/envvar.go`, `master.go`, `elastic.go`). */
function pytorch(job: Job, t: Topology): ClusterSpecResult {
  const master = specOf(job, "Master");
  const elastic = job.spec.elasticPolicy as Spec | undefined;
  const nproc = pytorchNprocPerNode(job, elastic);
  const out: V1EnvVar[] = [env("PYTHONUNBUFFERED", "1")];
  if (master) out.push(...pytorchMasterEnv(job, t, master, nproc));
  if (nproc !== undefined) out.push(env("PET_NPROC_PER_NODE", nproc));
  if (elastic) out.push(...pytorchElasticEnv(job, elastic));
  else out.push(env("PET_NNODES", String(total(job))));
  return { target: "all", env: out };
}

/** `nprocPerNode` as set; "auto" when neither it nor the elastic policy's `nProcPerNode` is; else none. */
function pytorchNprocPerNode(job: Job, elastic: Spec | undefined): string | undefined {
  if (job.spec.nprocPerNode !== undefined) return String(job.spec.nprocPerNode);
  return elastic?.nProcPerNode === undefined ? "auto" : undefined;
}

/** The master's address and port, the world size and this pod's rank (the master is rank 0). */
function pytorchMasterEnv(job: Job, t: Topology, master: Spec, nproc: string | undefined): V1EnvVar[] {
  const port = String(portOf(job, master));
  const addr = replicaName(job.name, "master", 0);
  const nprocInt = nproc !== undefined && /^\d+$/.test(nproc) ? Number(nproc) : 1;
  const rank = String(t.replicaType.toLowerCase() === "master" ? t.index : t.index + 1);
  return [
    env("MASTER_PORT", port),
    env("PET_MASTER_PORT", port),
    env("MASTER_ADDR", addr),
    env("PET_MASTER_ADDR", addr),
    env("WORLD_SIZE", String(total(job) * nprocInt)),
    env("RANK", rank),
    env("PET_NODE_RANK", rank),
  ];
}

/** torchrun's rendezvous from the elastic policy (`elastic.go`). */
function pytorchElasticEnv(job: Job, elastic: Spec): V1EnvVar[] {
  const worker = specOf(job, "Worker");
  const workers = replicasOf(worker);
  const host = (elastic.rdzvHost as string | undefined) ?? replicaName(job.name, "worker", 0);
  const port = (elastic.rdzvPort as number | undefined) ?? portOf(job, worker);
  const min = (elastic.minReplicas as number | undefined) ?? (elastic.maxReplicas as number | undefined) ?? workers;
  const max = (elastic.maxReplicas as number | undefined) ?? min;
  const out = [
    env("PET_RDZV_ENDPOINT", `${host}:${port}`),
    env("PET_RDZV_BACKEND", (elastic.rdzvBackend as string | undefined) ?? "c10d"),
    env("PET_NNODES", `${min}:${max}`),
  ];
  if (elastic.maxRestarts !== undefined) out.push(env("PET_MAX_RESTARTS", String(elastic.maxRestarts)));
  if (elastic.nProcPerNode !== undefined) out.push(env("PET_NPROC_PER_NODE", String(elastic.nProcPerNode)));
  if (elastic.rdzvId !== undefined) out.push(env("PET_RDZV_ID", String(elastic.rdzvId)));
  const conf = elastic.rdzvConf as Array<{ key: string; value: string }> | undefined;
  if (conf?.length) out.push(env("PET_RDZV_CONF", conf.map((c) => `${c.key}=${c.value}`).join(",")));
  if (elastic.standalone === true) out.push(env("PET_STANDALONE", ""));
  return out;
}

/** MXNet (training-operator v1.7 `mxnet/mxnet.go`). */
function mxnet(job: Job, t: Topology): ClusterSpecResult {
  const { clusterJson, labelsJson, scheduler } = once(job, "mx", () => {
    const sorted = [...job.specs].sort(([a], [b]) => (a.toLowerCase() < b.toLowerCase() ? -1 : 1));
    const cluster: Record<string, Array<{ url: string; port: number }>> = {};
    const labels: Record<string, string> = {};
    for (const [type, spec] of sorted) {
      const port = portOf(job, spec);
      cluster[type.toLowerCase()] = Array.from({ length: replicasOf(spec) }, (_, i) => ({ url: replicaName(job.name, type, i), port }));
      labels[type.toLowerCase()] = (spec.template as V1PodTemplateSpec | undefined)?.metadata?.annotations?.["tuner-server-key"] ?? "";
    }
    return { clusterJson: goJson(cluster), labelsJson: goJson(labels), scheduler: cluster.scheduler?.[0] };
  });
  const rt = t.replicaType.toLowerCase();
  const out = [
    // goJson({ cluster, labels, task }), byte for byte, with the cluster and labels serialized once per job.
    env("MX_CONFIG", `{"cluster":${clusterJson},"labels":${labelsJson},"task":${goJson({ type: rt, index: t.index })}}`),
    env("DMLC_PS_ROOT_PORT", String(scheduler?.port ?? 0)),
    env("DMLC_PS_ROOT_URI", scheduler?.url ?? ""),
    env("DMLC_NUM_SERVER", String(replicasOf(specOf(job, "Server")))),
    env("DMLC_NUM_WORKER", String(replicasOf(specOf(job, "Worker")))),
    env("DMLC_ROLE", rt),
    env("DMLC_USE_KUBERNETES", "1"),
  ];
  if (rt === "worker") out.push(env("DMLC_WORKER_ID", String(t.index)));
  return { target: "all", env: out };
}

/** XGBoost (training-operator `xgboost/xgboost.go` SetPodEnv). */
function xgboost(job: Job, t: Topology): ClusterSpecResult {
  const master = specOf(job, "Master");
  if (!master) return { skip: "an XGBoostJob needs a Master replica for its cluster spec" };
  const n = total(job);
  const rank = t.replicaType.toLowerCase() === "master" ? t.index : t.index + replicasOf(master);
  const out = [
    env("MASTER_PORT", String(portOf(job, master))),
    env("MASTER_ADDR", replicaName(job.name, "master", 0)),
    env("WORLD_SIZE", String(n)),
    env("RANK", String(rank)),
    env("PYTHONUNBUFFERED", "1"),
  ];
  if (n > 1) {
    out.push(
      env("WORKER_PORT", String(portOf(job, specOf(job, "Worker")))),
      env(
        "WORKER_ADDRS",
        once(job, "xgb-workers", () => Array.from({ length: n - 1 }, (_, i) => replicaName(job.name, "worker", i)).join(",")),
      ),
    );
  }
  return { target: "all", env: out };
}

/** PaddlePaddle (training-operator `paddlepaddle/envvar.go`): collective mode without a Master, PS mode with. */
function paddle(job: Job, t: Topology): ClusterSpecResult {
  const out = [env("PYTHONUNBUFFERED", "1"), env("PADDLE_JOB_ID", job.name), env("PADDLE_NNODES", String(total(job)))];
  const master = specOf(job, "Master");
  const rt = t.replicaType.toLowerCase();
  const rootType = master ? "master" : "worker";
  const port = portOf(job, master ?? specOf(job, "Worker"));
  if (rt === rootType && t.index === 0) {
    out.push({ name: "POD_IP_DUMMY", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }, env("PADDLE_MASTER", `$(POD_IP_DUMMY):${port}`));
  } else {
    out.push(env("PADDLE_MASTER", `${replicaName(job.name, rootType, 0)}:${port}`));
  }
  if (master) out.push(rt === "master" ? env("PADDLE_SERVER_NUM", "1") : env("PADDLE_TRAINER_NUM", "1"));
  return { target: "all", env: out };
}

/** JAX (training-operator `jax/envvar.go`). */
function jax(job: Job, t: Topology): ClusterSpecResult {
  return {
    target: "all",
    env: [
      env("PYTHONUNBUFFERED", "1"),
      env("COORDINATOR_PORT", String(portOf(job, specOf(job, "Worker")))),
      env("COORDINATOR_ADDRESS", replicaName(job.name, "worker", 0)),
      env("NUM_PROCESSES", String(total(job))),
      env("PROCESS_ID", String(t.index)),
    ],
  };
}

/**
 * Caffe2 (caffe2-operator `pkg/controller/config.go`, `controller_pod.go`): hosts are `<ns>-<job>-worker-<i>:2222`;
 * `RUN_ID` is the job's stored runtime id (`spec.RuntimeID`, read through the label scheme's declaration).
 */
function caffe2(job: Job, t: Topology): ClusterSpecResult {
  const backend = (job.spec.backendSpecs ?? {}) as Spec;
  const replicas = replicasOf(job.specs[0]?.[1]);
  // goJson({ cluster: { worker: hosts }, task }), byte for byte, with the host list serialized once per job.
  const clusterJson = once(job, "caffe2-cluster-json", () =>
    goJson({ worker: Array.from({ length: replicas }, (_, i) => `${replicaObjectName("caffe2", job.namespace, job.name, "worker", i)}:2222`) }),
  );
  return {
    target: "all",
    env: [
      env("REDIS_HOST", String(backend.redisHost ?? "")),
      env("REDIS_PORT", String(backend.redisPort ?? 0)),
      env("NFS_PATH", String(backend.nfsPath ?? "")),
      env("SHARD_ID", String(t.index)),
      env("NUM_SHARDS", String(replicas)),
      env("RUN_ID", caffe2RuntimeId(job.raw)),
      env("CAFFE2_CONFIG", `{"cluster":${clusterJson},"task":${goJson({ type: "worker", index: t.index })}}`),
    ],
  };
}

function prepareJob(topology: Topology, namespace: string): Job {
  const meta = (topology.job.metadata ?? {}) as { name?: string; namespace?: string };
  return {
    raw: topology.job,
    name: String(meta.name ?? ""),
    namespace: meta.namespace ?? namespace,
    spec: (topology.job.spec ?? {}) as Spec,
    specs: replicaSpecs(topology.job, topology.kind),
    info: frameworkInfo(topology.kind.framework),
    parts: new Map(),
  };
}

/**
 * The cluster spec of the pod at `topology` in namespace `namespace`. With `memo`, the per-job work is done
 * once per job object (see {@link ClusterSpecMemo}); without, every call does it all.
 */
export function clusterSpec(topology: Topology, namespace: string, clusterDomain: string, memo?: ClusterSpecMemo): ClusterSpecResult {
  // A framework without a cluster spec here (a kind shape added to the registry): nothing to prepare.
  if (!isBuiltInFramework(topology.kind.framework)) return { skip: `no cluster spec for framework ${JSON.stringify(topology.kind.framework)}` };
  const job = memo ? memo.job(topology, namespace, clusterDomain) : prepareJob(topology, namespace);
  switch (topology.kind.framework) {
    case "tensorflow":
      return tensorflow(job, topology, clusterDomain);
    case "pytorch":
      return pytorch(job, topology);
    case "mxnet":
      return mxnet(job, topology);
    case "xgboost":
      return xgboost(job, topology);
    case "paddle":
      return paddle(job, topology);
    case "jax":
      return jax(job, topology);
    case "caffe2":
      return caffe2(job, topology);
    case "trainer":
      return { skip: "a TrainJob's distributed environment is the Trainer's (its runtime's ML policy)" };
  }
}

/** Whether the pod at `topology` gets `job-role: master` (each controller's IsMasterRole). */
export function isMasterRole(topology: Topology): boolean {
  if (!isBuiltInFramework(topology.kind.framework)) return false;
  const rt = topology.replicaType.toLowerCase();
  const types = replicaSpecs(topology.job, topology.kind).map(([t]) => t.toLowerCase());
  switch (topology.kind.framework) {
    case "tensorflow":
      return rt === "chief" || rt === "master" || (!types.includes("chief") && !types.includes("master") && rt === "worker" && topology.index === 0);
    case "pytorch":
      return rt === "master" || (!types.includes("master") && rt === "worker" && topology.index === 0);
    case "mxnet":
      return rt === "server";
    case "xgboost":
    case "paddle":
      return rt === "master";
    case "jax":
      return topology.index === 0;
    default:
      return false;
  }
}

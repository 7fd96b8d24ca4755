/**
 * TensorFlow on Kubeflow Trainer v2 against the v1 training operator, and `quartermaster migrate` against the
 * original jobs (issue 32), in one control plane: the real Trainer v2.3.0 controller manager (QM_TRAINER_BIN),
 * JobSet v0.12.0 (QM_JOBSET_BIN) and training-operator v1.9.4 (QM_OPERATOR_BIN), kube-controller-manager's
 * job-controller, and Quartermaster's webhooks registered from its manifests (served by a local process as its
 * ServiceAccount). No kubelet: the pods stay Pending, which is enough, their env is set at creation.
 *
 * Two namespaces: the TrainJobs run in `tfconf-v2`, opted in to Quartermaster (its pod webhook writes TF_CONFIG);
 * the v1 jobs in `tfconf-v1`, NOT opted in, so every byte of their env is the operator's own (the reference).
 *
 * Part 1, {@link TOPOLOGIES}: for each named topology a TrainJob on a TensorFlow runtime (the ClusterTrainingRuntime
 * of examples/trainer/tensorflow-runtime.yaml as it is, or a TrainingRuntime derived from it by {@link derivedRuntime}:
 * replicatedJobs dropped, counted or added, the `tfjob-port` renumbered, everything else the example's) and the
 * equivalent TFJob run by the operator, of the same name. Once every pod of both exists:
 * - pods are paired by role and rank. Role: v1 the `training.kubeflow.org/replica-type` label, v2 the
 *   `jobset.sigs.k8s.io/replicatedjob-name` label. Rank: v1 the `training.kubeflow.org/replica-index` label, v2 the
 *   pod's position among its role's pods ordered by (`jobset.sigs.k8s.io/job-index`, `batch.kubernetes.io/job-completion-index`).
 *   Both sides must have the same roles with the same number of pods.
 * - TF_CONFIG is present on both pods of a pair or on neither (v1: container `tensorflow`; v2: container `node`;
 *   on no other container).
 * - Hostnames are mapped, nothing else: every `"host:port"` string of a TF_CONFIG must be the address of a pod of
 *   the same job, and is replaced by that pod's `<role>/<rank>`. The address of a pod: v1 `<pod name>.<ns>.svc`
 *   (the operator's per-pod Service, `<job>-<type>-<i>`); v2 `<spec.hostname>.<spec.subdomain>.<ns>.svc`, the
 *   hostname and subdomain JobSet set on the pod (`<jobset>-<replicatedjob>-<jobidx>-<podidx>.<subdomain>`).
 *   An address naming no pod stays unmapped and fails the comparison.
 * - The mapped TF_CONFIG strings must be byte-equal: same keys in the same order, same cluster (task types, number
 *   of addresses per type, which pod each names, ports), same task type and index, same `environment` field.
 *   Each side's own entry `cluster[task.type][task.index]` must be the pod itself.
 *
 * Part 2, {@link MIGRATIONS}: a PyTorchJob (examples/pytorchjob.yaml) and a TFJob (the corpus' Kueue sample
 * TFJob; that case skips, saying why, when QM_CORPUS_DIR names a directory without it) through `quartermaster migrate -f` (the CLI, as a
 * process). The original is created in `tfconf-v1`, the objects migrate printed in `tfconf-v2` (their namespace
 * set to it, nothing else changed). Pods are paired by rank: PyTorch v1 Master 0, Worker i is i + 1, v2 the node's
 * completion index; TF the task (type, index) as in part 1. The distributed env of a pod is every env var of its
 * framework container (v1 `pytorch`/`tensorflow`; v2 `node`, migrate names the TF container so too) that the
 * original job's templates do not set. Values compared: a fieldRef resolved on the pod; TF_CONFIG mapped as in
 * part 1 (tokens `<type>/<index>`); any other value that is a pod's namespace-relative address (v1 `<pod name>`, v2
 * `<hostname>.<subdomain>`) or FQDN replaced by `<rank>`. Both sides must have the same names; values must be equal
 * except the case's `differs`, each of which migrate's not-carried table (stderr, and the YAML's comment block,
 * checked equal) must name; a difference not declared fails, a declared one that does not occur fails.
 * What corresponds, PyTorch (v1 operator, training-operator pytorch/envvar.go → the migrated TrainJob's pod):
 *   PYTHONUNBUFFERED 1                 → trainer.env (migrate)
 *   MASTER_ADDR <job>-master-0         → trainer.env <job>-node-0-0.<job> (migrate): both the rank-0 pod
 *   PET_MASTER_ADDR <job>-master-0     → Trainer's torch plugin, <job>-node-0-0.<job>
 *   MASTER_PORT, PET_MASTER_PORT       → 29500 (migrate; Trainer's torch plugin) for v1's 23456: differ, in the table
 *   WORLD_SIZE replicas × nproc        → trainer.env (migrate)
 *   RANK, PET_NODE_RANK rank           → fieldRef to the completion index (migrate; Trainer's torch plugin)
 *   PET_NNODES replicas                → Trainer's torch plugin (numNodes)
 *   PET_NPROC_PER_NODE                 → Trainer's torch plugin (auto with a GPU in resourcesPerNode)
 * TF: TF_CONFIG (v1 operator) → Quartermaster's pod webhook on migrate's TrainingRuntime.
 * Left out: {@link V2_ONLY} (JOB_COMPLETION_INDEX, which Kubernetes gives every Indexed Job's pod), checked present.
 *
 * Skips, saying why, when QM_TRAINER_BIN, QM_JOBSET_BIN or QM_OPERATOR_BIN is unset.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import type { ControlPlane } from "../e2e/harness/controlplane.js";
import { operatorBin, type Operator } from "../e2e/harness/operator.js";
import { trainerBins, type Controller } from "../e2e/harness/trainer.js";
import { startTrainerStack, type TrainerStack } from "../e2e/harness/trainer-stack.js";
import { cli, ROOT } from "../e2e/harness/webhook.js";
import { CORPUS_DIR } from "../fixtures/corpus.js";
import { list, type Obj } from "./operator-jobs.js";

const bins = trainerBins();
const opBin = operatorBin();
const SKIP =
  ["skip" in bins ? bins.skip : "", opBin ? "" : "QM_OPERATOR_BIN is not set (export QM_OPERATOR_BIN=$(bash test/e2e/operator/build.sh)/training-operator)"]
    .filter(Boolean)
    .join("; ") || false;

const V1 = "tfconf-v1";
const V2 = "tfconf-v2";
const POLICY = "limits:\n  container:\n    gpus: {nvidia.com/gpu: 8}\n";
const JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name";
const JOB_INDEX = "jobset.sigs.k8s.io/job-index";
const COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index";
const V1_JOB_NAME = "training.kubeflow.org/job-name";
const V1_TYPE = "training.kubeflow.org/replica-type";
const V1_INDEX = "training.kubeflow.org/replica-index";
const TRAINER_API = "trainer.kubeflow.org/v1alpha1";
const EXAMPLE_RUNTIME = join(ROOT, "examples/trainer/tensorflow-runtime.yaml");

type TfType = "Chief" | "Master" | "PS" | "Worker" | "Evaluator";

interface Topology {
  title: string;
  /** The TFJob's and the TrainJob's name. */
  name: string;
  /** Replicas per TFJob replica type; Worker is the Trainer's replicatedJob (numNodes). */
  shape: Partial<Record<TfType, number>>;
  /** The `tfjob-port` of every type (unset: the operator's default, the example runtime's 2222). */
  port?: number;
  /** Use examples/trainer/tensorflow-runtime.yaml's ClusterTrainingRuntime itself (its shape: chief 1, ps 1). */
  example?: boolean;
  /** Non-worker types as `replicas` Jobs of one pod (JobSet job-index) rather than one Job of `n` pods. */
  asJobs?: boolean;
}

/** The topologies, each a TrainJob on a TF runtime and the equivalent TFJob. */
const TOPOLOGIES: Topology[] = [
  { title: "1 worker (not distributed: no TF_CONFIG on either side)", name: "tf-w1", shape: { Worker: 1 } },
  { title: "2 workers", name: "tf-w2", shape: { Worker: 2 } },
  { title: "chief + 1 ps + 2 workers, the example ClusterTrainingRuntime as it is", name: "tf-example", shape: { Chief: 1, PS: 1, Worker: 2 }, example: true },
  { title: "chief + 2 workers", name: "tf-c1-w2", shape: { Chief: 1, Worker: 2 } },
  { title: "1 ps + 2 workers", name: "tf-p1-w2", shape: { PS: 1, Worker: 2 } },
  { title: "chief + 2 ps + 4 workers", name: "tf-c1-p2-w4", shape: { Chief: 1, PS: 2, Worker: 4 } },
  { title: "chief + 1 ps + 2 workers + evaluator (v1 lists the evaluator)", name: "tf-eval", shape: { Chief: 1, PS: 1, Worker: 2, Evaluator: 1 } },
  { title: "2 ps as 2 Jobs + 3 workers (job-index ranks)", name: "tf-p2jobs-w3", shape: { PS: 2, Worker: 3 }, asJobs: true },
  { title: "master + 2 workers on tfjob-port 2345", name: "tf-m1-w2-port", shape: { Master: 1, Worker: 2 }, port: 2345 },
];

interface Migration {
  title: string;
  /** The v1 job file given to `quartermaster migrate -f`. */
  file: string;
  plural: string;
  container: string;
  /** The v1 pod's rank, from its replica type and index (pods of equal rank are paired). */
  v1Rank(type: string, index: number): string;
  /** The v2 pod's rank, from its replicatedJob and its rank among that replicatedJob's pods. */
  v2Rank(rjob: string, index: number): string;
  /** Distributed env vars expected to differ in value (each must be named by migrate's table). */
  differs: string[];
}

const MIGRATIONS: Migration[] = [
  {
    title: "PyTorchJob examples/pytorchjob.yaml (Master 1 + Worker 2) on torch-distributed",
    file: join(ROOT, "examples/pytorchjob.yaml"),
    plural: "pytorchjobs",
    container: "pytorch",
    // v1 RANK / PET_NODE_RANK: Master 0, Worker i is i + 1; v2: the node's completion index.
    v1Rank: (type, i) => String(type === "master" ? 0 : i + 1),
    v2Rank: (_rjob, i) => String(i),
    differs: ["MASTER_PORT", "PET_MASTER_PORT"],
  },
  {
    title: "TFJob kueue sample-tfjob (PS 1 + Worker 2) on its migrated TrainingRuntime",
    file: join(CORPUS_DIR, "manifests/kueue__site_static_examples_jobs_sample-tfjob.yaml"),
    plural: "tfjobs",
    container: "tensorflow",
    // The TF task: replica type and index on both sides (migrate names the replicatedJobs by the lower-case type).
    v1Rank: (type, i) => `${type}/${i}`,
    v2Rank: (rjob, i) => `${rjob}/${i}`,
    differs: [],
  },
];

/**
 * Env on a migrated job's pods that is no one's translation of the v1 env, so left out of the comparison (each
 * must be there: a stale entry fails).
 */
const V2_ONLY: Record<string, string> = {
  JOB_COMPLETION_INDEX: "Kubernetes' Job controller sets it on every container of an Indexed Job's pods (a fieldRef to the completion-index label)",
};

const lower = (t: string): string => t.toLowerCase();
const clone = <T>(v: T): T => structuredClone(v);
const envOf = (c: Obj | undefined): Obj[] => (c?.env ?? []) as Obj[];

/** The example runtime (the ClusterTrainingRuntime of examples/trainer/tensorflow-runtime.yaml). */
function exampleRuntime(): Obj {
  const docs = parseAllDocuments(readFileSync(EXAMPLE_RUNTIME, "utf8")).map((d) => d.toJS() as Obj);
  const rt = docs.find((d) => d?.kind === "ClusterTrainingRuntime");
  assert.ok(rt, `no ClusterTrainingRuntime in ${EXAMPLE_RUNTIME}`);
  return rt;
}

/**
 * A namespaced TrainingRuntime for `t` derived from the example runtime: only the replicatedJobs of `t`'s types
 * (master cloned from chief, evaluator from ps), non-worker counts set (one Job of n pods, or n Jobs of one pod),
 * the `tfjob-port` renumbered; the labels, images, successPolicy targets (those that remain) are the example's.
 */
function derivedRuntime(example: Obj, t: Topology): Obj {
  const base = new Map((example.spec.template.spec.replicatedJobs as Obj[]).map((r) => [r.name as string, r]));
  const from: Record<string, string> = { chief: "chief", master: "chief", worker: "worker", ps: "ps", evaluator: "ps" };
  const rjobs: Obj[] = [];
  for (const [type, n] of Object.entries(t.shape)) {
    const rt = lower(type);
    const r = clone(base.get(from[rt]!)!);
    assert.ok(r, `the example runtime has no ${from[rt]} replicatedJob`);
    r.name = rt;
    if (rt !== "worker") {
      const [jobs, pods] = t.asJobs ? [n, 1] : [1, n];
      r.replicas = jobs;
      Object.assign(r.template.spec, { parallelism: pods, completions: pods });
    }
    if (t.port !== undefined) for (const c of r.template.spec.template.spec.containers as Obj[]) c.ports = [{ name: "tfjob-port", containerPort: t.port }];
    rjobs.push(r);
  }
  const spec = clone(example.spec);
  spec.mlPolicy.numNodes = t.shape.Worker;
  spec.template.spec.replicatedJobs = rjobs;
  const targets = (spec.template.spec.successPolicy.targetReplicatedJobs as string[]).filter((n) => rjobs.some((r) => r.name === n));
  spec.template.spec.successPolicy.targetReplicatedJobs = targets.length ? targets : ["worker"];
  return { apiVersion: TRAINER_API, kind: "TrainingRuntime", metadata: { name: `${t.name}-rt`, namespace: V2, labels: clone(example.metadata.labels) }, spec };
}

function tfJob(t: Topology): Obj {
  const specs: Obj = {};
  for (const [type, n] of Object.entries(t.shape)) {
    specs[type] = {
      replicas: n,
      restartPolicy: "Never",
      template: {
        spec: {
          containers: [
            {
              name: "tensorflow",
              image: "tensorflow/tensorflow:2.20.0",
              ...(t.port !== undefined ? { ports: [{ name: "tfjob-port", containerPort: t.port }] } : {}),
            },
          ],
        },
      },
    };
  }
  return { apiVersion: "kubeflow.org/v1", kind: "TFJob", metadata: { name: t.name, namespace: V1 }, spec: { tfReplicaSpecs: specs } };
}

/** A pod's role and rank (see the header), and its addresses (FQDN and namespace-relative). */
interface Placed {
  pod: Obj;
  role: string;
  rank: number;
  fqdn: string;
  short: string;
}

function placeV1(pods: Obj[]): Placed[] {
  return pods.map((pod) => ({
    pod,
    role: lower(String(pod.metadata.labels[V1_TYPE])),
    rank: Number(pod.metadata.labels[V1_INDEX]),
    fqdn: `${pod.metadata.name}.${pod.metadata.namespace}.svc`,
    short: pod.metadata.name as string,
  }));
}

function placeV2(pods: Obj[]): Placed[] {
  const byRole = new Map<string, Obj[]>();
  for (const pod of pods) {
    const role = String(pod.metadata.labels[REPLICATED_JOB]);
    byRole.set(role, [...(byRole.get(role) ?? []), pod]);
  }
  const out: Placed[] = [];
  for (const [role, group] of byRole) {
    const key = (p: Obj): [number, number] => [Number(p.metadata.labels[JOB_INDEX]), Number(p.metadata.labels[COMPLETION_INDEX])];
    group.sort((a, b) => key(a)[0] - key(b)[0] || key(a)[1] - key(b)[1]);
    group.forEach((pod, rank) => {
      assert.ok(pod.spec.hostname && pod.spec.subdomain, `pod ${pod.metadata.name} has no hostname/subdomain: ${pod.spec.hostname}/${pod.spec.subdomain}`);
      out.push({
        pod,
        role,
        rank,
        fqdn: `${pod.spec.hostname}.${pod.spec.subdomain}.${pod.metadata.namespace}.svc`,
        short: `${pod.spec.hostname}.${pod.spec.subdomain}`,
      });
    });
  }
  return out;
}

/** `raw` with every `"host:port"` whose host is a pod's address replaced by `token(pod)`; the others marked UNMAPPED. */
function mapHosts(raw: string, placed: Placed[], token: (p: Placed) => string): string {
  const byHost = new Map<string, Placed>();
  for (const p of placed) {
    byHost.set(p.fqdn, p);
    byHost.set(p.short, p);
  }
  return raw.replace(/"([a-z0-9.-]+):(\d+)"/g, (_m, host: string, port: string) => {
    const p = byHost.get(host);
    return `"${p ? token(p) : `UNMAPPED(${host})`}:${port}"`;
  });
}

/** The TF_CONFIG of the pod (on container `container` only), or undefined. */
function tfConfigOf(p: Placed, container: string): string | undefined {
  const containers = [...((p.pod.spec.initContainers ?? []) as Obj[]), ...(p.pod.spec.containers as Obj[])];
  for (const c of containers) {
    if (c.name === container) continue;
    assert.ok(!envOf(c).some((e) => e.name === "TF_CONFIG"), `pod ${p.pod.metadata.name}: TF_CONFIG on container ${c.name}, not ${container}`);
  }
  const c = containers.find((x) => x.name === container);
  assert.ok(c, `pod ${p.pod.metadata.name} has no container ${container}`);
  const v = envOf(c).filter((e) => e.name === "TF_CONFIG");
  assert.ok(v.length <= 1, `pod ${p.pod.metadata.name}: TF_CONFIG set ${v.length} times`);
  return v[0]?.value as string | undefined;
}

const roleToken = (p: Placed): string => `${p.role}/${p.rank}`;

/** Checks a pod's own TF_CONFIG entry names itself; returns the mapped string. */
function mappedTfConfig(side: string, p: Placed, placed: Placed[], raw: string): string {
  const mapped = mapHosts(raw, placed, roleToken);
  const parsed = JSON.parse(mapped) as { cluster: Record<string, string[]>; task: { type: string; index: number } };
  const own = parsed.cluster?.[parsed.task?.type]?.[parsed.task?.index];
  assert.equal(own?.replace(/:\d+$/, ""), roleToken(p), `${side} pod ${p.pod.metadata.name}: its own cluster entry is ${own}: ${raw}`);
  return mapped;
}

describe("TF_CONFIG on Trainer v2 TrainJob pods and migrated jobs' env, against training-operator v1.9.4", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let jobset: Controller | undefined;
  let trainer: Controller | undefined;
  let operator: Operator | undefined;
  let stack: TrainerStack | undefined;
  let started = 0;
  const migrated = new Map<string, { stdout: string; stderr: string; objects: Obj[]; original: Obj }>();

  const logs = (): string =>
    [jobset, trainer].map((c) => (c ? `--- ${c.name}\n${c.logs(20)}` : "")).join("\n") + (operator ? `\n--- training-operator\n${operator.logs(20)}` : "");

  const create = async (path: string, obj: Obj): Promise<void> => {
    const r = await cp.api("POST", path, obj);
    assert.equal(r.status, 201, `${obj.kind} ${obj.metadata?.name}: ${JSON.stringify(r.body)}`);
  };
  const trainJob = (name: string, runtimeKind: string, runtime: string, workers: number): Obj => ({
    apiVersion: TRAINER_API,
    kind: "TrainJob",
    metadata: { name, namespace: V2 },
    spec: { runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: runtimeKind, name: runtime }, trainer: { numNodes: workers } },
  });

  /** Waits for exactly `count` pods matching `selector` in `ns`. */
  const podsOf = async (ns: string, selector: string, count: number, what: string): Promise<Obj[]> => {
    const get = (): Promise<Obj[]> => list(cp, `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`);
    await cp.until(`${count} pods of ${what}\n${logs()}`, async () => (await get()).length >= count, 120_000, 500);
    const pods = await get();
    assert.equal(pods.length, count, `${what}: ${pods.map((p) => p.metadata.name).join(", ")}`);
    return pods;
  };

  before(async () => {
    if ("skip" in bins || !opBin) return;
    started = performance.now();
    stack = await startTrainerStack({
      bins: { ...bins, operator: opBin },
      policy: POLICY,
      namespaces: [
        { name: V2, optedIn: true },
        { name: V1, optedIn: false },
      ],
    });
    ({ cp, jobset, trainer, operator } = stack);

    // Part 1: the example runtime, a derived runtime per other topology, the TrainJobs and the TFJobs.
    const example = exampleRuntime();
    const ex = await cp.kubectl(["apply", "-f", EXAMPLE_RUNTIME]);
    assert.equal(ex.code, 0, ex.stderr);
    for (const t of TOPOLOGIES) {
      const workers = t.shape.Worker!;
      if (t.example) {
        const shape = Object.fromEntries(
          (example.spec.template.spec.replicatedJobs as Obj[]).filter((r) => r.name !== "worker").map((r) => [r.name, r.replicas]),
        );
        assert.deepEqual(
          shape,
          Object.fromEntries(
            Object.entries(t.shape)
              .filter(([k]) => k !== "Worker")
              .map(([k, v]) => [lower(k), v]),
          ),
          "the example runtime's shape",
        );
        await create(
          `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${V2}/trainjobs`,
          trainJob(t.name, "ClusterTrainingRuntime", example.metadata.name, workers),
        );
      } else {
        await create(`/apis/trainer.kubeflow.org/v1alpha1/namespaces/${V2}/trainingruntimes`, derivedRuntime(example, t));
        await create(`/apis/trainer.kubeflow.org/v1alpha1/namespaces/${V2}/trainjobs`, trainJob(t.name, "TrainingRuntime", `${t.name}-rt`, workers));
      }
      await create(`/apis/kubeflow.org/v1/namespaces/${V1}/tfjobs`, tfJob(t));
    }

    // Part 2: `quartermaster migrate` on each file; the original in V1, migrate's objects in V2.
    for (const m of MIGRATIONS.filter((x) => existsSync(x.file))) {
      const out = await cli(["migrate", "-f", m.file]);
      assert.equal(out.code, 0, `migrate -f ${m.file}: ${out.stderr}`);
      const objects = parseAllDocuments(out.stdout).map((d) => d.toJS() as Obj);
      const original = parseAllDocuments(readFileSync(m.file, "utf8")).map((d) => d.toJS() as Obj)[0]!;
      original.metadata.namespace = V1;
      await create(`/apis/kubeflow.org/v1/namespaces/${V1}/${m.plural}`, original);
      for (const o of objects) {
        o.metadata.namespace = V2;
        const plural = o.kind === "TrainJob" ? "trainjobs" : o.kind === "TrainingRuntime" ? "trainingruntimes" : undefined;
        assert.ok(plural, `migrate printed a ${o.kind}`);
        await create(`/apis/trainer.kubeflow.org/v1alpha1/namespaces/${V2}/${plural}`, o);
      }
      migrated.set(m.file, { stdout: out.stdout, stderr: out.stderr, objects, original });
    }
    console.log(
      `trainer-tfconfig: stack up and ${TOPOLOGIES.length} + ${MIGRATIONS.length} job pairs created in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  after(async () => {
    await stack?.stop();
    if (started) console.log(`trainer-tfconfig: suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  for (const t of TOPOLOGIES) {
    it(`TF_CONFIG, ${t.title}: the TrainJob's pods' equals the v1 operator's, hostnames mapped`, async () => {
      const count = Object.values(t.shape).reduce((a, b) => a + b, 0);
      const v1 = placeV1(await podsOf(V1, `${V1_JOB_NAME}=${t.name}`, count, `TFJob ${t.name}`));
      const v2 = placeV2(await podsOf(V2, `${JOBSET_NAME}=${t.name}`, count, `TrainJob ${t.name}`));
      const roles = (ps: Placed[]): string[] => ps.map(roleToken).sort();
      assert.deepEqual(roles(v2), roles(v1), "the pods' roles and ranks");

      const record: string[] = [];
      for (const p1 of v1) {
        const p2 = v2.find((p) => p.role === p1.role && p.rank === p1.rank)!;
        const where = `${roleToken(p1)} (v1 pod ${p1.pod.metadata.name}, v2 pod ${p2.pod.metadata.name})`;
        const [raw1, raw2] = [tfConfigOf(p1, "tensorflow"), tfConfigOf(p2, "node")];
        assert.equal(raw2 !== undefined, raw1 !== undefined, `${where}: TF_CONFIG present v1 ${raw1 !== undefined}, v2 ${raw2 !== undefined}: ${raw1 ?? raw2}`);
        if (raw1 === undefined || raw2 === undefined) {
          record.push(`${roleToken(p1)}: no TF_CONFIG on either`);
          continue;
        }
        const [m1, m2] = [mappedTfConfig("v1", p1, v1, raw1), mappedTfConfig("v2", p2, v2, raw2)];
        assert.deepEqual(JSON.parse(m2), JSON.parse(m1), `${where}:\n  v1 ${raw1}\n  v2 ${raw2}`);
        assert.equal(m2, m1, `${where}: same content, other bytes:\n  v1 ${raw1}\n  v2 ${raw2}`);
        record.push(`${roleToken(p1)}: ${m1}`);
      }
      const sample = v2.map((p) => tfConfigOf(p, "node")).find(Boolean);
      console.log(`trainer-tfconfig: ${t.name}: ${count} pod pairs equal${sample ? `; a v2 TF_CONFIG: ${sample}` : ""}\n  ${record.sort().join("\n  ")}`);
    });
  }

  for (const m of MIGRATIONS) {
    const skip = existsSync(m.file) ? false : `${m.file} is not there (QM_CORPUS_DIR names a directory without it; unset, test/fixtures/corpus is read)`;
    it(`migrate, ${m.title}: the migrated job's pods carry the original's distributed env`, { skip }, async () => {
      const { stdout, stderr, objects, original } = migrated.get(m.file)!;
      // The table: on stderr, and the same as the `# ` comment block heading the YAML.
      const table = stderr.trimEnd().split("\n");
      assert.match(table[0]!, /not carried over|everything carried over/, stderr);
      assert.deepEqual(
        stdout
          .split("\n")
          .filter((l) => l.startsWith("# "))
          .map((l) => l.slice(2)),
        table,
        "the table in the YAML's comment block",
      );
      const name = original.metadata.name as string;
      const tj = objects.find((o) => o.kind === "TrainJob")!;
      const specs = Object.entries(original.spec[Object.keys(original.spec).find((k) => /ReplicaSpecs$/.test(k))!] as Obj) as Array<[string, Obj]>;
      const count = specs.reduce((n, [, s]) => n + (s.replicas ?? 1), 0);
      const v1 = placeV1(await podsOf(V1, `${V1_JOB_NAME}=${name}`, count, `${original.kind} ${name}`));
      const v2 = placeV2(await podsOf(V2, `${JOBSET_NAME}=${tj.metadata.name}`, count, `TrainJob ${tj.metadata.name}`));
      const templateEnv = new Set(
        specs.flatMap(([, s]) =>
          ((s.template?.spec?.containers ?? []) as Obj[]).filter((c) => c.name === m.container).flatMap((c) => envOf(c).map((e) => e.name)),
        ),
      );
      const rankOf1 = (p: Placed): string => m.v1Rank(p.role, p.rank);
      const rankOf2 = (p: Placed): string => m.v2Rank(p.role, p.rank);
      /** The distributed env of a pod's framework container: name → value, mapped. */
      const distributed = (p: Placed, placed: Placed[], container: string, rank: (q: Placed) => string): Map<string, string> => {
        const c = (p.pod.spec.containers as Obj[]).find((x) => x.name === container);
        assert.ok(c, `pod ${p.pod.metadata.name} has no container ${container}`);
        const out = new Map<string, string>();
        for (const e of envOf(c)) {
          if (templateEnv.has(e.name)) continue;
          let v: string;
          if (e.valueFrom) {
            const path = String(e.valueFrom.fieldRef?.fieldPath ?? "");
            const ref = /^metadata\.(annotations|labels)\['(.+)'\]$/.exec(path);
            assert.ok(ref, `pod ${p.pod.metadata.name}: ${e.name} from ${JSON.stringify(e.valueFrom)}`);
            const value = p.pod.metadata[ref[1]!]?.[ref[2]!];
            assert.ok(value !== undefined, `pod ${p.pod.metadata.name}: ${e.name} from ${path}, which the pod lacks`);
            v = String(value);
          } else v = String(e.value ?? "");
          if (e.name === "TF_CONFIG") v = mapHosts(v, placed, rank);
          else {
            const addressed = placed.find((q) => q.short === v || q.fqdn === v);
            if (addressed) v = `<${rank(addressed)}>`;
          }
          out.set(e.name, v);
        }
        return out;
      };
      const ranks1 = v1.map(rankOf1).sort();
      assert.deepEqual(v2.map(rankOf2).sort(), ranks1, "the pods' ranks");
      const record: string[] = [];
      const differing = new Set<string>();
      for (const p1 of v1) {
        const p2 = v2.find((q) => rankOf2(q) === rankOf1(p1))!;
        const where = `rank ${rankOf1(p1)} (v1 pod ${p1.pod.metadata.name}, v2 pod ${p2.pod.metadata.name})`;
        const e1 = distributed(p1, v1, m.container, rankOf1);
        const e2 = distributed(p2, v2, "node", rankOf2);
        assert.ok(e1.size > 0, `${where}: the operator set no env`);
        for (const k of Object.keys(V2_ONLY)) {
          assert.ok(e2.has(k) && !e1.has(k), `${where}: ${k} expected on the v2 pod only (${V2_ONLY[k]})`);
          e2.delete(k);
        }
        assert.deepEqual([...e2.keys()].sort(), [...e1.keys()].sort(), `${where}: distributed env names`);
        for (const [k, v] of e1) {
          if (e2.get(k) === v) continue;
          differing.add(k);
          assert.ok(m.differs.includes(k), `${where}: ${k} is ${JSON.stringify(v)} on v1, ${JSON.stringify(e2.get(k))} migrated`);
        }
        record.push(`${where}: ${JSON.stringify(Object.fromEntries(e1))}`);
      }
      assert.deepEqual([...differing].sort(), [...m.differs].sort(), "the variables that differ");
      for (const k of differing) assert.match(stderr, new RegExp(`\\b${k}\\b`), `${k} differs but migrate's not-carried table does not name it:\n${stderr}`);
      console.log(
        `trainer-tfconfig: migrated ${original.kind} ${name}: ${v1.length} pod pairs, differing (in the table): ${[...differing].join(", ") || "none"}\n  ${record.sort().join("\n  ")}`,
      );
    });
  }
});

/**
 * `quartermaster migrate` (src/migrate/): v1 jobs in (the training-operator v1.9.4 module's own examples, kept in
 * test/fixtures/training-operator-v1.9.4; the corpus' real manifests, test/fixtures/corpus; and inline cases for
 * each rule) → the expected TrainJob fields and the exact not-carried table; every output valid against the upstream Trainer v2.3.0 CRD schemas; and the conformance
 * of the environment: a migrated PyTorchJob's pods get the v1 operator's env (src/mutate/frameworks.ts), names
 * and values, hostnames aside (and the differences the table lists), as Trainer's torch plugin sets it
 * (src/migrate/torch-env.ts); a migrated TFJob's pods get the v1 TF_CONFIG, hostnames aside
 * (src/mutate/jobset-tf-config.ts on the JobSet Trainer makes of the runtime).
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Ajv } from "ajv";
import { parse, parseAllDocuments } from "yaml";
import { runCli } from "../../../src/cli/commands.js";
import type { KubeObject, Pod } from "../../../src/core/kube.js";
import { migrate } from "../../../src/migrate/migrate.js";
import { trainerTorchEnv } from "../../../src/migrate/torch-env.js";
import type { Migration } from "../../../src/migrate/types.js";
import { clusterSpec } from "../../../src/mutate/frameworks.js";
import { jobSetTfConfig } from "../../../src/mutate/jobset-tf-config.js";
import { replicaSpecs, replicasOf } from "../../../src/membership/resolve.js";
import { CORPUS_DIR } from "../../fixtures/corpus.js";
import { kindOf, topology } from "../../fixtures/jobs.js";
import { jobSetPod } from "../../fixtures/jobsets.js";
import { ROOT } from "../../fixtures/manifests.js";

/** The five examples of github.com/kubeflow/training-operator@v1.9.4 these cases read, copied unchanged. */
const OPERATOR_EXAMPLES = join(ROOT, "test/fixtures/training-operator-v1.9.4/examples");
/** Trainer v2.3.0's CRDs, copied from kubeflow/trainer (test/fixtures/trainer-v2.3.0/README.md). */
const trainerDir = join(import.meta.dirname, "../../fixtures/trainer-v2.3.0");

type Obj = Record<string, unknown>;

/** Where an input comes from: the module's examples, the corpus, or inline. */
type Source = { example: string } | { corpus: string } | { inline: KubeObject };

function load(src: Source): KubeObject | undefined {
  const path = "example" in src ? join(OPERATOR_EXAMPLES, src.example) : "corpus" in src ? join(CORPUS_DIR, "manifests", src.corpus) : undefined;
  if ("inline" in src) return src.inline;
  if (!path || !existsSync(path)) return undefined;
  const docs = parseAllDocuments(readFileSync(path, "utf8")).map((d) => d.toJS() as KubeObject);
  return docs.find((d) => String(d?.apiVersion).startsWith("kubeflow.org/"));
}

const container = (name: string, extra: Obj = {}): Obj => ({ name, image: "img:1", ...extra });
const v1 = (kind: string, field: string, spec: Obj, replicas: Record<string, Obj>, name = "job"): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind,
  metadata: { name, namespace: "team-a" },
  spec: { ...spec, [field]: replicas },
});

const RESTART = (t: string): string => `spec.pytorchReplicaSpecs.${t}.restartPolicy`;
const MASTER_PORT_ROW = "spec.pytorchReplicaSpecs.Master: master port";
const TF_CONTAINER_ROW = "spec.tfReplicaSpecs: container tensorflow";

interface Case {
  name: string;
  src: Source;
  /** The kinds out, in order. */
  kinds: string[];
  runtime: string;
  numNodes: number;
  /** Other TrainJob `spec` fields expected (deepEqual per key). */
  spec?: Obj;
  trainer?: Obj;
  notCarried: string[];
}

const CASES: Case[] = [
  {
    name: "upstream pytorch/simple.yaml (Master 1 + Worker 1)",
    src: { example: "pytorch/simple.yaml" },
    kinds: ["TrainJob"],
    runtime: "torch-distributed",
    numNodes: 2,
    trainer: { image: "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727", command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"] },
    notCarried: [
      RESTART("Master"),
      RESTART("Worker"),
      "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].imagePullPolicy",
      "spec.nprocPerNode",
      MASTER_PORT_ROW,
    ],
  },
  {
    name: "upstream pytorch elastic imagenet (Worker only, elasticPolicy)",
    src: { example: "pytorch/elastic/imagenet/imagenet.yaml" },
    kinds: ["TrainJob"],
    runtime: "torch-distributed",
    numNodes: 2,
    notCarried: [RESTART("Worker"), "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy", "spec.nprocPerNode", "spec.elasticPolicy"],
  },
  {
    name: "upstream xgboost/xgboostjob.yaml (Master + Worker of different templates)",
    src: { example: "xgboost/xgboostjob.yaml" },
    kinds: ["TrainJob"],
    runtime: "xgboost-distributed",
    numNodes: 3,
    notCarried: [
      "spec.xgbReplicaSpecs.Worker.template",
      "spec.xgbReplicaSpecs.Master.restartPolicy",
      "spec.xgbReplicaSpecs.Worker.restartPolicy",
      "spec.xgbReplicaSpecs.Master.template.spec.containers[0].ports",
      "spec.xgbReplicaSpecs.Master.template.spec.containers[0].imagePullPolicy",
      "XGBoostJob env",
    ],
  },
  {
    name: "upstream jax/cpu-demo/demo.yaml",
    src: { example: "jax/cpu-demo/demo.yaml" },
    kinds: ["TrainJob"],
    runtime: "jax-distributed",
    numNodes: 2,
    notCarried: ["spec.jaxReplicaSpecs.Worker.restartPolicy", "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy", "JAXJob env"],
  },
  {
    name: "upstream tensorflow/simple.yaml (Worker 2)",
    src: { example: "tensorflow/simple.yaml" },
    kinds: ["TrainingRuntime", "TrainJob"],
    runtime: "tfjob-simple-tensorflow",
    numNodes: 2,
    notCarried: [TF_CONTAINER_ROW, "spec.successPolicy"],
  },
  {
    name: "corpus: training-operator dist-mnist TFJob (Chief/PS/Worker)",
    src: { corpus: "training-operator__examples_tensorflow_dist-mnist_tf_job_mnist.yaml" },
    kinds: ["TrainingRuntime", "TrainJob"],
    runtime: "dist-mnist-for-e2e-test-tensorflow",
    numNodes: 2,
    notCarried: [TF_CONTAINER_ROW],
  },
  {
    name: "corpus: multi-worker TFJob with cleanPodPolicy",
    src: { corpus: "training-operator__examples_tensorflow_distribution_strategy_multi_worker_tfjob.yaml" },
    kinds: ["TrainingRuntime", "TrainJob"],
    runtime: "multi-worker-tensorflow",
    numNodes: 2,
    notCarried: [TF_CONTAINER_ROW, "spec.successPolicy", "spec.runPolicy.cleanPodPolicy"],
  },
  {
    name: "corpus: Kueue sample TFJob (queue label carried)",
    src: { corpus: "kueue__site_static_examples_jobs_sample-tfjob.yaml" },
    kinds: ["TrainingRuntime", "TrainJob"],
    runtime: "tensorflow-dist-mnist-tensorflow",
    numNodes: 2,
    notCarried: [TF_CONTAINER_ROW, "spec.successPolicy"],
  },
  {
    name: "corpus: PyTorchJob mnist nccl (GPU)",
    src: { corpus: "training-operator__examples_pytorch_mnist_v1_pytorch_job_mnist_nccl.yaml" },
    kinds: ["TrainJob"],
    runtime: "torch-distributed",
    numNodes: 2,
    notCarried: [RESTART("Master"), RESTART("Worker"), MASTER_PORT_ROW],
  },
  {
    name: "inline: PyTorchJob with PS, sidecar, reserved env, pod patch fields, runPolicy, nprocPerNode 8",
    src: {
      inline: v1(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        {
          nprocPerNode: "8",
          runPolicy: {
            ttlSecondsAfterFinished: 60,
            backoffLimit: 3,
            activeDeadlineSeconds: 3600,
            suspend: true,
            managedBy: "kueue.x-k8s.io/multikueue",
            schedulingPolicy: { queue: "q" },
          },
        },
        {
          Master: {
            replicas: 1,
            template: {
              metadata: { labels: { team: "a" } },
              spec: {
                nodeSelector: { pool: "a100" },
                tolerations: [{ key: "k", operator: "Exists" }],
                serviceAccountName: "trainer",
                hostIPC: true,
                containers: [
                  container("pytorch", {
                    env: [
                      { name: "FOO", value: "1" },
                      { name: "PET_NNODES", value: "9" },
                    ],
                    resources: { limits: { "nvidia.com/gpu": 8 } },
                    volumeMounts: [{ name: "data", mountPath: "/data" }],
                  }),
                  container("sidecar"),
                ],
                volumes: [{ name: "data", emptyDir: {} }],
              },
            },
          },
          Worker: { replicas: 3 },
          PS: { replicas: 2 },
        },
      ),
    },
    kinds: ["TrainJob"],
    runtime: "torch-distributed",
    numNodes: 4,
    spec: { suspend: true, activeDeadlineSeconds: 3600, managedBy: "kueue.x-k8s.io/multikueue" },
    trainer: { numProcPerNode: 8, resourcesPerNode: { limits: { "nvidia.com/gpu": 8 } } },
    notCarried: [
      "spec.pytorchReplicaSpecs.PS",
      "spec.pytorchReplicaSpecs.Worker.template",
      "spec.pytorchReplicaSpecs.Master.template.spec.containers[1]",
      "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[PET_NNODES]",
      "spec.pytorchReplicaSpecs.Master.template.spec.hostIPC",
      MASTER_PORT_ROW,
      "spec.runPolicy.backoffLimit",
      "spec.runPolicy.schedulingPolicy",
    ],
  },
  {
    name: "inline: TFJob with AllWorkers, enableDynamicWorker, an empty Evaluator and ExitCode restarts",
    src: {
      inline: v1(
        "TFJob",
        "tfReplicaSpecs",
        { successPolicy: "AllWorkers", enableDynamicWorker: true },
        {
          Chief: { replicas: 1, restartPolicy: "ExitCode", template: { spec: { containers: [container("tensorflow")] } } },
          Worker: { replicas: 4, restartPolicy: "OnFailure", template: { spec: { containers: [container("tensorflow")] } } },
          Evaluator: { replicas: 0, template: { spec: { containers: [container("tensorflow")] } } },
        },
      ),
    },
    kinds: ["TrainingRuntime", "TrainJob"],
    runtime: "job-tensorflow",
    numNodes: 4,
    notCarried: ["spec.tfReplicaSpecs.Evaluator.replicas", "spec.tfReplicaSpecs.Chief.restartPolicy", TF_CONTAINER_ROW, "spec.enableDynamicWorker"],
  },
];

function crd(file: string): (doc: unknown) => string[] {
  const c = parse(readFileSync(join(trainerDir, "manifests/base/crds", file), "utf8")) as {
    spec: { versions: Array<{ schema: { openAPIV3Schema: object } }> };
  };
  const validate = new Ajv({ strict: false, validateFormats: false, allErrors: true }).compile(c.spec.versions[0]!.schema.openAPIV3Schema);
  return (doc) => (validate(doc) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ""}`));
}
let validators: Record<string, (doc: unknown) => string[]> | undefined;
const validatorFor = (kind: string): ((doc: unknown) => string[]) | undefined => {
  validators ??= { TrainJob: crd("trainer.kubeflow.org_trainjobs.yaml"), TrainingRuntime: crd("trainer.kubeflow.org_trainingruntimes.yaml") };
  return validators[kind];
};

const trainJobOf = (m: Migration): KubeObject => m.objects.find((o) => o.kind === "TrainJob")!;

describe("migrate: v1 job → TrainJob and the not-carried table", () => {
  for (const c of CASES) {
    const job = load(c.src);
    it(c.name, { skip: job ? false : "input not available (Go module or corpus missing)" }, () => {
      const m = migrate(job!);
      assert.deepEqual(
        m.objects.map((o) => o.kind),
        c.kinds,
      );
      const tj = trainJobOf(m);
      const spec = tj.spec as Obj & { runtimeRef: Obj; trainer: Obj };
      assert.equal(tj.apiVersion, "trainer.kubeflow.org/v1alpha1");
      assert.equal((tj.metadata as Obj).name, (job!.metadata as Obj).name);
      assert.equal(spec.runtimeRef.name, c.runtime);
      assert.equal(spec.trainer.numNodes, c.numNodes);
      for (const [k, v] of Object.entries(c.spec ?? {})) assert.deepEqual(spec[k], v, k);
      for (const [k, v] of Object.entries(c.trainer ?? {})) assert.deepEqual(spec.trainer[k], v, `trainer.${k}`);
      assert.deepEqual(
        m.notCarried.map((r) => r.field),
        c.notCarried,
      );
      for (const o of m.objects) {
        const validate = validatorFor(String(o.kind));
        if (validate) assert.deepEqual(validate(o), [], `${String(o.kind)} against the upstream CRD schema`);
      }
      assert.deepEqual(migrate(job!), m, "deterministic");
    });
  }

  it("the inline PyTorchJob's pod fields go to runtimePatches and its env to trainer.env (minus PET_*)", () => {
    const m = migrate((CASES.find((c) => c.name.startsWith("inline: PyTorchJob"))!.src as { inline: KubeObject }).inline);
    const spec = trainJobOf(m).spec as { runtimePatches: unknown; trainer: { env: Array<{ name: string }> } };
    assert.deepEqual(spec.runtimePatches, [
      {
        manager: "quartermaster.dev/migrate",
        trainingRuntimeSpec: {
          template: {
            spec: {
              replicatedJobs: [
                {
                  name: "node",
                  template: {
                    spec: {
                      template: {
                        metadata: { labels: { team: "a" } },
                        spec: {
                          nodeSelector: { pool: "a100" },
                          tolerations: [{ key: "k", operator: "Exists" }],
                          serviceAccountName: "trainer",
                          volumes: [{ name: "data", emptyDir: {} }],
                          containers: [{ name: "node", volumeMounts: [{ name: "data", mountPath: "/data" }] }],
                        },
                      },
                    },
                  },
                },
              ],
            },
          },
        },
      },
    ]);
    assert.deepEqual(
      spec.trainer.env.map((e) => e.name),
      ["FOO", "PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"],
    );
  });

  // kubeflow/trainer v2.3.0 pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs: a replicatedJob labelled
  // as an ancestor has replicas 1 and the ancestor's container (trainer: `node`). Found by the real controller
  // (test/conformance/trainer-tfconfig.test.ts): a runtime keeping v1's container name `tensorflow` was refused.
  for (const c of CASES.filter((x) => x.kinds[0] === "TrainingRuntime")) {
    const job = load(c.src);
    it(
      `${c.name}: its TrainingRuntime passes Trainer's TrainingRuntime webhook (trainer replicatedJob: replicas 1, container node)`,
      {
        skip: job ? false : "input not available",
      },
      () => {
        const runtime = migrate(job!).objects[0]!;
        type RJob = {
          name: string;
          replicas?: number;
          template: { metadata?: { labels?: Record<string, string> }; spec: { template: { spec: { containers: Array<{ name: string }> } } } };
        };
        const rjobs = (runtime.spec as { template: { spec: { replicatedJobs: RJob[] } } }).template.spec.replicatedJobs;
        const trainers = rjobs.filter((r) => r.template.metadata?.labels?.["trainer.kubeflow.org/trainjob-ancestor-step"] === "trainer");
        assert.equal(trainers.length, 1, "one trainer replicatedJob");
        assert.equal(trainers[0]!.replicas ?? 1, 1, "replicas");
        assert.ok(
          trainers[0]!.template.spec.template.spec.containers.some((x) => x.name === "node"),
          `no container node in ${JSON.stringify(trainers[0]!.template.spec.template.spec.containers.map((x) => x.name))}`,
        );
      },
    );
  }

  it("refuses what it does not take", () => {
    assert.throws(() => migrate({ apiVersion: "kubeflow.org/v1", kind: "MPIJob", metadata: { name: "x" } }), /not a v1 TFJob/);
    assert.throws(() => migrate({ apiVersion: "kubeflow.org/v1", kind: "TFJob", metadata: { generateName: "x-" }, spec: {} }), /metadata.name is required/);
  });
});

/** The v1 pods of a job as `[type, index, rank]` (rank: the v1 RANK, Master first: the node index on Trainer). */
function v1Pods(job: KubeObject): Array<[string, number, number]> {
  const specs = replicaSpecs(job, kindOf(String(job.kind)));
  const out: Array<[string, number, number]> = [];
  const order = [...specs].sort(([a]) => (a === "Master" ? -1 : 1));
  let rank = 0;
  for (const [type, s] of order) for (let i = 0; i < replicasOf(s); i++) out.push([type, i, rank++]);
  return out;
}

describe("conformance: a migrated PyTorchJob's pods get the v1 operator's env, hostnames aside", () => {
  // Not the inline job with PS replicas: the v1 webhook refuses a PyTorchJob with types other than Master and
  // Worker (training-operator pkg/webhooks/pytorch), so there is no v1 environment to compare with.
  const torch = CASES.filter((c) => c.runtime === "torch-distributed" && !c.notCarried.includes("spec.pytorchReplicaSpecs.PS"));
  for (const c of torch) {
    const job = load(c.src);
    it(c.name, { skip: job ? false : "input not available" }, () => {
      const m = migrate(job!);
      const rows = new Set(m.notCarried.map((r) => r.field));
      const name = String((job!.metadata as Obj).name);
      // What may differ, each because the table says so (or because it is a hostname).
      const allowed = new Set<string>(["MASTER_ADDR", "PET_MASTER_ADDR"]);
      if (rows.has(MASTER_PORT_ROW)) ["MASTER_PORT", "PET_MASTER_PORT"].forEach((n) => allowed.add(n));
      if (rows.has("spec.nprocPerNode")) allowed.add("PET_NPROC_PER_NODE");
      const elastic = rows.has("spec.elasticPolicy");
      for (const [type, index, rank] of v1Pods(job!)) {
        const v1Result = clusterSpec(topology(job!, type, index), "team-a", "");
        assert.ok(!("skip" in v1Result));
        const v2 = trainerTorchEnv(trainJobOf(m), rank);
        for (const e of v1Result.env) {
          if (elastic && (e.name.startsWith("PET_RDZV_") || e.name === "PET_NNODES" || e.name === "PET_MAX_RESTARTS")) continue;
          assert.ok(v2.has(e.name), `${type}-${index}: ${e.name} missing on Trainer`);
          if (allowed.has(e.name)) continue;
          assert.equal(v2.get(e.name), e.value, `${type}-${index}: ${e.name}`);
        }
        // The hostnames: the v1 master is the Trainer's node 0.
        const master = v1Result.env.find((e) => e.name === "MASTER_ADDR");
        if (master) {
          assert.equal(master.value, `${name}-master-0`);
          assert.equal(v2.get("MASTER_ADDR"), `${name}-node-0-0.${name}`);
          assert.equal(v2.get("PET_MASTER_ADDR"), `${name}-node-0-0.${name}`);
          assert.equal(v2.get("MASTER_PORT"), v2.get("PET_MASTER_PORT"));
        }
      }
    });
  }
});

/** The JobSet Trainer makes of a TF runtime for a TrainJob: named as the TrainJob, the template's labels and spec. */
function jobSetOf(runtime: KubeObject, trainJob: KubeObject): KubeObject {
  const tpl = (runtime.spec as { template: { metadata?: Obj; spec: Obj } }).template;
  const tj = trainJob.metadata as { name: string; namespace?: string };
  return {
    apiVersion: "jobset.x-k8s.io/v1alpha2",
    kind: "JobSet",
    metadata: { name: tj.name, namespace: tj.namespace ?? "default", ...tpl.metadata },
    spec: tpl.spec,
  };
}

describe("conformance: a migrated TFJob's pods get the v1 TF_CONFIG, hostnames aside", () => {
  // Not with enableDynamicWorker: v1's sparse TF_CONFIG is not carried (the table says so); the full one is compared.
  for (const c of CASES.filter((x) => x.kinds[0] === "TrainingRuntime" && !x.notCarried.includes("spec.enableDynamicWorker"))) {
    const job = load(c.src);
    it(c.name, { skip: job ? false : "input not available" }, () => {
      const m = migrate(job!);
      const js = jobSetOf(m.objects[0]!, m.objects[1]!);
      const name = String((job!.metadata as Obj).name);
      const ns = String((js.metadata as Obj).namespace);
      const rjobs = (
        js.spec as { replicatedJobs: Array<{ name: string; template: { spec: { template: { spec: { containers: Array<{ name: string }> } } } } }> }
      ).replicatedJobs;
      for (const [type, s] of replicaSpecs(job!, kindOf("TFJob"))) {
        for (let i = 0; i < replicasOf(s); i++) {
          const rt = type.toLowerCase();
          const containers = rjobs.find((r) => r.name === rt)!.template.spec.template.spec.containers.map((x) => x.name);
          const pod: Pod = jobSetPod(name, ns, rt, 0, i, { containers });
          const v1Result = clusterSpec(topology(job!, type, i), ns, "");
          const v2 = jobSetTfConfig(js, pod, ns, "");
          if ("skip" in v1Result) {
            assert.ok("skip" in v2);
            continue;
          }
          assert.ok(!("skip" in v2), "skip" in v2 ? v2.skip : "");
          const esc = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          const back = v2.tfConfig.replace(new RegExp(`${esc}-([a-z]+)-0-(\\d+)\\.${esc}\\.`, "g"), `${name}-$1-$2.`);
          assert.equal(back, v1Result.env[0]!.value, `${type}-${i}`);
        }
      }
    });
  }
});

describe("quartermaster migrate (command)", () => {
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: ROOT, shutdown: new Promise(() => undefined) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  }
  const dir = mkdtempSync(join(tmpdir(), "qm-migrate-"));
  const tf = (CASES.find((c) => c.name.startsWith("inline: TFJob"))!.src as { inline: KubeObject }).inline;
  writeFileSync(join(dir, "tf.yaml"), JSON.stringify(tf));
  writeFileSync(join(dir, "pod.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n");

  it("a TFJob: the runtime and the TrainJob on stdout under a not-carried comment, the table on stderr, exit 0", async () => {
    const r = await cli(["migrate", "-f", join(dir, "tf.yaml")]);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as KubeObject);
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["TrainingRuntime", "TrainJob"],
    );
    assert.match(r.stdout, /^# TFJob job: not carried over \(4\)/);
    assert.match(r.stderr, /spec\.tfReplicaSpecs: container tensorflow\s+tensorflow: named node in the runtime/);
    assert.match(r.stderr, /spec\.enableDynamicWorker\s+true: no sparse TF_CONFIG/);
  });

  it("-o writes the file; a Pod is refused with exit 1; no -f is a usage error (2)", async () => {
    const out = join(dir, "out.yaml");
    assert.equal((await cli(["migrate", "-f", join(dir, "tf.yaml"), "-o", out])).code, 0);
    assert.match(readFileSync(out, "utf8"), /kind: TrainJob/);
    const pod = await cli(["migrate", "-f", join(dir, "pod.yaml")]);
    assert.equal(pod.code, 1);
    assert.match(pod.stderr, /v1 Pod is not a v1 TFJob/);
    assert.equal((await cli(["migrate"])).code, 2);
  });
});

describe("migrate: the TTL", () => {
  const job = (runPolicy: Record<string, unknown>): KubeObject => ({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "j", namespace: "n", annotations: { team: "a" } },
    spec: { runPolicy, pytorchReplicaSpecs: { Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", image: "x" }] } } } } },
  });
  const cases: Array<[string, Record<string, unknown>, Record<string, string>, string[]]> = [
    [
      "a TTL → Quartermaster's annotation, the job's own kept",
      { ttlSecondsAfterFinished: 60 },
      { team: "a", "quartermaster.dev/ttl-seconds-after-finished": "60" },
      [],
    ],
    ["0 → deleted at once, still carried", { ttlSecondsAfterFinished: 0 }, { team: "a", "quartermaster.dev/ttl-seconds-after-finished": "0" }, []],
    ["not a number → not carried, said", { ttlSecondsAfterFinished: "1h" }, { team: "a" }, ["spec.runPolicy.ttlSecondsAfterFinished"]],
  ];
  for (const [name, runPolicy, annotations, notCarried] of cases) {
    it(name, () => {
      const m = migrate(job(runPolicy));
      const trainJob = m.objects.find((o) => o.kind === "TrainJob")!;
      assert.deepEqual((trainJob.metadata as { annotations?: unknown }).annotations, annotations);
      assert.deepEqual(
        m.notCarried.map((r) => r.field).filter((f) => f.includes("ttl")),
        notCarried,
      );
    });
  }
});

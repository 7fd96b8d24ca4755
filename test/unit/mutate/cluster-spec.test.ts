/**
 * Conformance with the Kubeflow training operator's cluster specs (github.com/kubeflow/training-operator,
 * pkg/controller.v1/<framework>/):
 * the exact strings upstream writes.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1EnvVar } from "@kubernetes/client-node";
import { clusterSpec, isMasterRole } from "../../../src/mutate/frameworks.js";
import { job, topology } from "../../fixtures/jobs.js";

function envOf(j: ReturnType<typeof job>, type: string, index: number, domain = ""): V1EnvVar[] | string {
  const r = clusterSpec(topology(j, type, index), "default", domain);
  return "skip" in r ? r.skip : r.env;
}
const value = (env: V1EnvVar[] | string, name: string): string | undefined => (typeof env === "string" ? undefined : env.find((e) => e.name === name)?.value);
const asPairs = (env: V1EnvVar[] | string): string[] =>
  typeof env === "string" ? [env] : env.map((e) => `${e.name}=${e.value ?? JSON.stringify(e.valueFrom)}`);

describe("TF_CONFIG", () => {
  const mnist = job("TFJob", "mnist", "kubeflow", { Chief: 1, Worker: 2, PS: 1 });
  const cluster =
    '{"chief":["mnist-chief-0.kubeflow.svc:2222"],"ps":["mnist-ps-0.kubeflow.svc:2222"],"worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]}';
  const cases: Array<[string, number, string]> = [
    ["Chief", 0, `{"cluster":${cluster},"task":{"type":"chief","index":0},"environment":"cloud"}`],
    ["Worker", 0, `{"cluster":${cluster},"task":{"type":"worker","index":0},"environment":"cloud"}`],
    ["Worker", 1, `{"cluster":${cluster},"task":{"type":"worker","index":1},"environment":"cloud"}`],
    ["PS", 0, `{"cluster":${cluster},"task":{"type":"ps","index":0},"environment":"cloud"}`],
  ];
  for (const [type, i, want] of cases) {
    it(`mnist ${type.toLowerCase()}-${i} → the exact upstream bytes`, () => {
      const r = clusterSpec(topology(mnist, type, i), "kubeflow", "");
      assert.ok(!("skip" in r));
      assert.deepEqual(r.target, { container: "tensorflow" });
      assert.deepEqual(r.env, [{ name: "TF_CONFIG", value: want }]);
    });
  }

  it("a single worker and no PS → not distributed, no TF_CONFIG", () => {
    assert.equal(envOf(job("TFJob", "one", "default", { Worker: 1 }), "Worker", 0), "a TFJob with a single replica is not distributed");
  });

  it("upstream test vector: 1 PS + 1 worker in ns2 with cluster domain tf.training.org", () => {
    const j = job("TFJob", "test-tfjob", "ns2", { PS: 1, Worker: 1 });
    const r = clusterSpec(topology(j, "Worker", 0), "ns2", "tf.training.org");
    assert.deepEqual(
      !("skip" in r) && r.env[0]!.value,
      '{"cluster":{"ps":["test-tfjob-ps-0.ns2.svc.tf.training.org:2222"],"worker":["test-tfjob-worker-0.ns2.svc.tf.training.org:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}',
    );
  });

  it("evaluator is included and sorts before ps and worker", () => {
    const j = job("TFJob", "e", "default", { Worker: 1, Evaluator: 1, Chief: 1 });
    assert.equal(
      value(envOf(j, "Evaluator", 0), "TF_CONFIG"),
      '{"cluster":{"chief":["e-chief-0.default.svc:2222"],"evaluator":["e-evaluator-0.default.svc:2222"],"worker":["e-worker-0.default.svc:2222"]},"task":{"type":"evaluator","index":0},"environment":"cloud"}',
    );
  });

  it("cluster domain cluster.local → ...svc.cluster.local:2222", () => {
    assert.match(value(envOf(mnist, "Worker", 0, "cluster.local"), "TF_CONFIG")!, /"mnist-ps-0\.kubeflow\.svc\.cluster\.local:2222"/);
  });

  it("custom port 3333 on PS only → only the PS entries change", () => {
    const j = job("TFJob", "mnist", "kubeflow", { Chief: 1, Worker: 2, PS: { replicas: 1, port: 3333 } });
    const tf = value(envOf(j, "Worker", 0), "TF_CONFIG")!;
    assert.match(tf, /"ps":\["mnist-ps-0\.kubeflow\.svc:3333"\]/);
    assert.match(tf, /"mnist-worker-1\.kubeflow\.svc:2222"/);
  });

  it("enableDynamicWorker → the sparse form", () => {
    const j = job("TFJob", "mnist", "kubeflow", { Chief: 1, Worker: 2, PS: 1 }, { enableDynamicWorker: true });
    const tf = (type: string, i: number) => value(envOf(j, type, i), "TF_CONFIG");
    assert.equal(
      tf("Worker", 1),
      '{"cluster":{"worker":{"1":"mnist-worker-1.kubeflow.svc:2222"},"ps":["mnist-ps-0.kubeflow.svc:2222"]},"task":{"type":"worker","index":1}}',
    );
    assert.equal(tf("PS", 0), '{"cluster":{"worker":{},"ps":["mnist-ps-0.kubeflow.svc:2222"]},"task":{"type":"ps","index":0}}');
    assert.equal(tf("Chief", 0), '{"cluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}');
    const noPs = job("TFJob", "w", "kubeflow", { Worker: 2 }, { enableDynamicWorker: true });
    assert.equal(
      value(envOf(noPs, "Worker", 0), "TF_CONFIG"),
      '{"cluster":{"worker":{"0":"w-worker-0.kubeflow.svc:2222"},"ps":null},"task":{"type":"worker","index":0}}',
    );
  });
});

describe("PyTorch", () => {
  const pt = job("PyTorchJob", "pt", "default", { Master: 1, Worker: 3 });
  const master = [
    "PYTHONUNBUFFERED=1",
    "MASTER_PORT=23456",
    "PET_MASTER_PORT=23456",
    "MASTER_ADDR=pt-master-0",
    "PET_MASTER_ADDR=pt-master-0",
    "WORLD_SIZE=4",
    "RANK=0",
    "PET_NODE_RANK=0",
    "PET_NPROC_PER_NODE=auto",
    "PET_NNODES=4",
  ];
  it("master-0: the exact env, in order", () => assert.deepEqual(asPairs(envOf(pt, "Master", 0)), master));
  for (const i of [0, 1, 2]) {
    it(`worker-${i}: identical but RANK = PET_NODE_RANK = ${i + 1}`, () => {
      const want = master.map((p) => (p.startsWith("RANK=") ? `RANK=${i + 1}` : p.startsWith("PET_NODE_RANK=") ? `PET_NODE_RANK=${i + 1}` : p));
      assert.deepEqual(asPairs(envOf(pt, "Worker", i)), want);
    });
  }
  it('nprocPerNode "8" → WORLD_SIZE 32, PET_NPROC_PER_NODE 8', () => {
    const j = job("PyTorchJob", "pt", "default", { Master: 1, Worker: 3 }, { nprocPerNode: "8" });
    const env = envOf(j, "Worker", 0);
    assert.equal(value(env, "WORLD_SIZE"), "32");
    assert.equal(value(env, "PET_NPROC_PER_NODE"), "8");
  });
  it("no Master → only PYTHONUNBUFFERED, PET_NPROC_PER_NODE, PET_NNODES", () => {
    assert.deepEqual(asPairs(envOf(job("PyTorchJob", "w", "default", { Worker: 2 }), "Worker", 1)), [
      "PYTHONUNBUFFERED=1",
      "PET_NPROC_PER_NODE=auto",
      "PET_NNODES=2",
    ]);
  });
  it("elastic policy → rendezvous variables, min:max nodes", () => {
    const j = job(
      "PyTorchJob",
      "el",
      "default",
      { Worker: { replicas: 2, port: 29400 } },
      {
        elasticPolicy: {
          minReplicas: 1,
          maxReplicas: 3,
          maxRestarts: 100,
          rdzvBackend: "c10d",
          rdzvConf: [
            { key: "a", value: "1" },
            { key: "b", value: "2" },
          ],
        },
      },
    );
    assert.deepEqual(asPairs(envOf(j, "Worker", 0)), [
      "PYTHONUNBUFFERED=1",
      "PET_NPROC_PER_NODE=auto",
      "PET_RDZV_ENDPOINT=el-worker-0:29400",
      "PET_RDZV_BACKEND=c10d",
      "PET_NNODES=1:3",
      "PET_MAX_RESTARTS=100",
      "PET_RDZV_CONF=a=1,b=2",
    ]);
  });
  it("targets every container (sidecars too)", () => {
    const r = clusterSpec(topology(pt, "Worker", 0), "default", "");
    assert.equal(!("skip" in r) && r.target, "all");
  });
});

describe("other frameworks", () => {
  it("MXNet mx-worker-1: MX_CONFIG and DMLC_* exactly", () => {
    const mx = job("MXJob", "mx", "default", { Scheduler: 1, Server: 1, Worker: 2 });
    assert.deepEqual(asPairs(envOf(mx, "Worker", 1)), [
      'MX_CONFIG={"cluster":{"scheduler":[{"url":"mx-scheduler-0","port":9091}],"server":[{"url":"mx-server-0","port":9091}],"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091}]},"labels":{"scheduler":"","server":"","worker":""},"task":{"type":"worker","index":1}}',
      "DMLC_PS_ROOT_PORT=9091",
      "DMLC_PS_ROOT_URI=mx-scheduler-0",
      "DMLC_NUM_SERVER=1",
      "DMLC_NUM_WORKER=2",
      "DMLC_ROLE=worker",
      "DMLC_USE_KUBERNETES=1",
      "DMLC_WORKER_ID=1",
    ]);
  });
  it("MXNet tuner-server-key with <, >, & and U+2028: escaped as Go's encoding/json writes MX_CONFIG (real operator's output)", () => {
    const mx = job(
      "MXJob",
      "mxt",
      "default",
      { TunerTracker: 1, TunerServer: { replicas: 1, annotations: { "tuner-server-key": "ü <&> 'x'\u2028\"q\\" } }, Tuner: 1 },
      { jobMode: "MXTune" },
    );
    assert.equal(
      value(envOf(mx, "Tuner", 0), "MX_CONFIG"),
      '{"cluster":{"tuner":[{"url":"mxt-tuner-0","port":9091}],"tunerserver":[{"url":"mxt-tunerserver-0","port":9091}],"tunertracker":[{"url":"mxt-tunertracker-0","port":9091}]},' +
        '"labels":{"tuner":"","tunerserver":"ü \\u003c\\u0026\\u003e \'x\'\\u2028\\"q\\\\","tunertracker":""},"task":{"type":"tuner","index":0}}',
    );
  });
  it("XGBoost worker-0 of Master×1 Worker×2", () => {
    assert.deepEqual(asPairs(envOf(job("XGBoostJob", "xg", "default", { Master: 1, Worker: 2 }), "Worker", 0)), [
      "MASTER_PORT=9999",
      "MASTER_ADDR=xg-master-0",
      "WORLD_SIZE=3",
      "RANK=1",
      "PYTHONUNBUFFERED=1",
      "WORKER_PORT=9999",
      "WORKER_ADDRS=xg-worker-0,xg-worker-1",
    ]);
  });
  it("XGBoost without a Master → skipped with a reason", () => {
    assert.equal(envOf(job("XGBoostJob", "xg", "default", { Worker: 2 }), "Worker", 0), "an XGBoostJob needs a Master replica for its cluster spec");
  });
  it("Paddle collective: worker-0 gets its own pod IP, others worker-0", () => {
    const pd = job("PaddleJob", "pd", "default", { Worker: 2 });
    assert.deepEqual(asPairs(envOf(pd, "Worker", 0)), [
      "PYTHONUNBUFFERED=1",
      "PADDLE_JOB_ID=pd",
      "PADDLE_NNODES=2",
      'POD_IP_DUMMY={"fieldRef":{"fieldPath":"status.podIP"}}',
      "PADDLE_MASTER=$(POD_IP_DUMMY):36543",
    ]);
    assert.deepEqual(asPairs(envOf(pd, "Worker", 1)).slice(3), ["PADDLE_MASTER=pd-worker-0:36543"]);
  });
  it("Paddle PS mode: master-0 its own IP; workers point at master-0 and count as trainers", () => {
    const pd = job("PaddleJob", "pd", "default", { Master: 1, Worker: 2 });
    assert.deepEqual(asPairs(envOf(pd, "Master", 0)).slice(3), [
      'POD_IP_DUMMY={"fieldRef":{"fieldPath":"status.podIP"}}',
      "PADDLE_MASTER=$(POD_IP_DUMMY):36543",
      "PADDLE_SERVER_NUM=1",
    ]);
    assert.deepEqual(asPairs(envOf(pd, "Worker", 1)).slice(3), ["PADDLE_MASTER=pd-master-0:36543", "PADDLE_TRAINER_NUM=1"]);
  });
  it("JAX worker-2 of 3", () => {
    assert.deepEqual(asPairs(envOf(job("JAXJob", "jx", "default", { Worker: 3 }), "Worker", 2)), [
      "PYTHONUNBUFFERED=1",
      "COORDINATOR_PORT=6666",
      "COORDINATOR_ADDRESS=jx-worker-0",
      "NUM_PROCESSES=3",
      "PROCESS_ID=2",
    ]);
  });
  it("Caffe2 example-job in default, 2 replicas → namespace-prefixed hosts", () => {
    const c2 = job(
      "Caffe2Job",
      "example-job",
      "default",
      { Worker: 2 },
      { backendSpecs: { backendType: "redis", redisHost: "redis-service", redisPort: 6379 } },
    );
    assert.deepEqual(asPairs(envOf(c2, "Worker", 0)), [
      "REDIS_HOST=redis-service",
      "REDIS_PORT=6379",
      "NFS_PATH=",
      "SHARD_ID=0",
      "NUM_SHARDS=2",
      "RUN_ID=",
      'CAFFE2_CONFIG={"cluster":{"worker":["default-example-job-worker-0:2222","default-example-job-worker-1:2222"]},"task":{"type":"worker","index":0}}',
    ]);
  });
});

describe("job-role master", () => {
  const cases: Array<[string, Record<string, number>, string, number, boolean]> = [
    ["TFJob", { Chief: 1, Worker: 2 }, "Chief", 0, true],
    ["TFJob", { Chief: 1, Worker: 2 }, "Worker", 0, false],
    ["TFJob", { Worker: 2, PS: 1 }, "Worker", 0, true],
    ["TFJob", { Worker: 2, PS: 1 }, "Worker", 1, false],
    ["TFJob", { Master: 1, Worker: 1 }, "Master", 0, true],
    ["PyTorchJob", { Master: 1, Worker: 2 }, "Master", 0, true],
    ["PyTorchJob", { Master: 1, Worker: 2 }, "Worker", 0, false],
    ["PyTorchJob", { Worker: 2 }, "Worker", 0, true],
    ["MXJob", { Scheduler: 1, Server: 2, Worker: 2 }, "Server", 1, true],
    ["MXJob", { Scheduler: 1, Server: 2, Worker: 2 }, "Scheduler", 0, false],
    ["XGBoostJob", { Master: 1, Worker: 2 }, "Master", 0, true],
    ["XGBoostJob", { Master: 1, Worker: 2 }, "Worker", 0, false],
    ["PaddleJob", { Master: 1, Worker: 2 }, "Master", 0, true],
    ["JAXJob", { Worker: 2 }, "Worker", 0, true],
    ["JAXJob", { Worker: 2 }, "Worker", 1, false],
  ];
  for (const [kind, replicas, type, i, want] of cases) {
    it(`${kind} ${JSON.stringify(replicas)} ${type}-${i} → ${want}`, () => assert.equal(isMasterRole(topology(job(kind, "j", "ns", replicas), type, i)), want));
  }
});

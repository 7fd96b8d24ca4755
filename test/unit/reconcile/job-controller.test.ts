/**
 * The job controller's decision (`src/reconcile/job-controller.ts`) against the Kubeflow common job controller
 * (training-operator v1.8.1 `pkg/controller.v1/common/{job.go,pod.go,service.go}`, `pkg/core/{job.go,status.go}`,
 * `pkg/util/status.go`, `pkg/util/train/train_util.go`) and caffe2-operator (`pkg/controller/config.go`,
 * `pkg/apis/caffe2/v1alpha1/types.go`). Tables of named cases; each rule has a case that fails without it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import type { JobKind } from "../../../src/policy/types.js";
import {
  ANNOTATION_RESTARTS,
  decideJob,
  exitCodeOf,
  isRetryableExitCode,
  NO_EXIT_CODE,
  setCondition,
  type Decision,
  type InFlight,
} from "../../../src/reconcile/job-controller.js";
import { caffe2JobObject } from "../../fixtures/jobs.js";

const CAFFE2: JobKind = { kind: "Caffe2Job", group: "kubeflow.org", version: "v1alpha1", plural: "caffe2jobs", framework: "caffe2" };
const PYTORCH: JobKind = { kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs", framework: "pytorch" };
const TF: JobKind = { kind: "TFJob", group: "kubeflow.org", version: "v1", plural: "tfjobs", framework: "tensorflow" };
const NOW = new Date("2026-11-26T12:00:00Z");
const T = (s: number): string => new Date(NOW.getTime() - s * 1000).toISOString().replace(/\.\d+Z$/, "Z");
const NOW_S = T(0);

type Obj = Record<string, any>;

function caffe2Job(
  o: {
    replicas?: number;
    restartPolicy?: string;
    templateRestart?: string;
    runPolicy?: Obj;
    status?: Obj;
    annotations?: Obj;
    containerName?: string;
    deleting?: boolean;
  } = {},
): KubeObject {
  const { deleting, ...rest } = o;
  return caffe2JobObject({ templateLabels: { app: "c2" }, ...rest, ...(deleting ? { deletionTimestamp: T(1) } : {}) });
}

function pytorchJob(o: { workers?: number; restartPolicy?: string; status?: Obj; runPolicy?: Obj; templateRestart?: string } = {}): KubeObject {
  const template = (labels: Obj = {}) => ({
    metadata: { labels: { team: "x", ...labels }, annotations: { a: "1" }, finalizers: ["example.com/f"] },
    spec: {
      ...(o.templateRestart ? { restartPolicy: o.templateRestart } : {}),
      containers: [{ name: "pytorch", image: "pt:1", ports: [{ name: "pytorchjob-port", containerPort: 23456 }] }],
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "pt", namespace: "team-a", uid: "uid-pt" },
    spec: {
      ...(o.runPolicy ? { runPolicy: o.runPolicy } : {}),
      pytorchReplicaSpecs: {
        Master: {
          replicas: 1,
          ...(o.restartPolicy ? { restartPolicy: o.restartPolicy } : {}),
          template: template({ "training.kubeflow.org/job-name": "spoofed" }),
        },
        Worker: { replicas: o.workers ?? 2, ...(o.restartPolicy ? { restartPolicy: o.restartPolicy } : {}), template: template() },
      },
    },
    ...(o.status ? { status: o.status } : {}),
  };
}

interface PodOpts {
  phase?: string;
  exitCode?: number;
  container?: string;
  restartCount?: number;
  deleting?: boolean;
  uid?: string;
  noIndex?: boolean;
}

/** A pod of Caffe2Job team-a/ex, replica `index`, as the controller names and labels it. */
function c2Pod(index: number, o: PodOpts = {}): KubeObject {
  const name = `team-a-ex-worker-${index}`;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: o.uid ?? `uid-${name}`,
      labels: {
        group_name: "kubeflow.org",
        caffe2_job_key: "team-a-ex",
        runtime_id: "r1",
        caffe2_replica_type: "worker",
        ...(o.noIndex ? {} : { caffe2_replica_index: String(index) }),
      },
      ownerReferences: [{ apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "ex", uid: "uid-job", controller: true }],
      ...(o.deleting ? { deletionTimestamp: T(1) } : {}),
    },
    spec: { containers: [{ name: o.container ?? "caffe2" }] },
    status: {
      ...(o.phase ? { phase: o.phase } : {}),
      containerStatuses: [
        {
          name: o.container ?? "caffe2",
          restartCount: o.restartCount ?? 0,
          state: o.exitCode !== undefined ? { terminated: { exitCode: o.exitCode } } : { running: {} },
        },
      ],
    },
  };
}

function c2Service(index: number): KubeObject {
  const name = `team-a-ex-worker-${index}`;
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "team-a", uid: `uid-svc-${name}`, labels: { caffe2_replica_type: "worker", caffe2_replica_index: String(index) } },
  };
}

function ptPod(type: "master" | "worker", index: number, o: PodOpts = {}): KubeObject {
  const name = `pt-${type}-${index}`;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${name}`,
      labels: {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "pt",
        "training.kubeflow.org/replica-type": type,
        "training.kubeflow.org/replica-index": String(index),
      },
      ...(o.deleting ? { deletionTimestamp: T(1) } : {}),
    },
    status: {
      phase: o.phase ?? "Running",
      containerStatuses: [
        { name: "pytorch", restartCount: o.restartCount ?? 0, ...(o.exitCode !== undefined ? { state: { terminated: { exitCode: o.exitCode } } } : {}) },
      ],
    },
  };
}

const c2Services = (n: number): KubeObject[] => Array.from({ length: n }, (_, i) => c2Service(i));
const decideC2 = (job: KubeObject, pods: KubeObject[], services = c2Services(2), inFlight?: InFlight): Decision =>
  decideJob({ job, kind: CAFFE2, pods, services, now: NOW, ...(inFlight ? { inFlight } : {}) });
const cond = (d: Decision, type: string): Obj | undefined => ((d.status?.conditions ?? []) as Obj[]).find((c) => c.type === type);
const names = (xs: Array<{ kind: string; name: string }>): string[] => xs.map((x) => `${x.kind}/${x.name}`).sort();
const created = (status: Obj = {}): Obj => ({
  conditions: [
    { type: "Created", status: "True", reason: "JobCreated", message: "Caffe2Job ex is created.", lastUpdateTime: T(60), lastTransitionTime: T(60) },
  ],
  startTime: T(60),
  ...status,
});

/** Applies a decision the way the apiserver would (creates get uids and no phase; deletes remove; status replaced). */
function apply(job: KubeObject, pods: KubeObject[], services: KubeObject[], d: Decision): { job: KubeObject; pods: KubeObject[]; services: KubeObject[] } {
  const gone = new Set(d.deletes.map((x) => `${x.kind}/${x.name}`));
  const add = (kind: string) =>
    d.creates.filter((c) => c.kind === kind).map((c) => ({ ...structuredClone(c.body), metadata: { ...(c.body.metadata as Obj), uid: `uid-new-${c.name}` } }));
  const annotations =
    d.restarts !== undefined ? { ...((job.metadata as Obj).annotations ?? {}), [ANNOTATION_RESTARTS]: String(d.restarts) } : (job.metadata as Obj).annotations;
  return {
    job: { ...job, metadata: { ...(job.metadata as Obj), ...(annotations ? { annotations } : {}) }, ...(d.status ? { status: d.status } : {}) },
    pods: [...pods.filter((p) => !gone.has(`Pod/${(p.metadata as Obj).name}`)), ...add("Pod")],
    services: [...services.filter((s) => !gone.has(`Service/${(s.metadata as Obj).name}`)), ...add("Service")],
  };
}

describe("job controller: pods and Services from the replica templates", () => {
  it("a new Caffe2Job: one pod and one headless Service per replica, named as CAFFE2_CONFIG's hosts, the job as controller", () => {
    const d = decideC2(caffe2Job(), [], []);
    assert.deepEqual(names(d.creates), ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1", "Service/team-a-ex-worker-0", "Service/team-a-ex-worker-1"]);
    const pod = d.creates.find((c) => c.name === "team-a-ex-worker-1")!.body as Obj;
    assert.deepEqual(pod.metadata.labels, {
      app: "c2",
      group_name: "kubeflow.org",
      caffe2_job_key: "team-a-ex",
      runtime_id: "r1",
      caffe2_replica_type: "worker",
      caffe2_replica_index: "1",
    });
    assert.deepEqual(pod.metadata.ownerReferences, [
      { apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "ex", uid: "uid-job", controller: true, blockOwnerDeletion: true },
    ]);
    assert.equal(pod.metadata.namespace, "team-a");
    assert.equal(pod.spec.restartPolicy, "Never", "caffe2-operator's default");
    const env = Object.fromEntries((pod.spec.containers[0].env as Obj[]).map((e) => [e.name, e.value]));
    assert.equal(env.CAFFE2_CONFIG, '{"cluster":{"worker":["team-a-ex-worker-0:2222","team-a-ex-worker-1:2222"]},"task":{"type":"worker","index":1}}');
    assert.equal(env.SHARD_ID, "1");
    // The hosts resolve: each is the name of a Service of the job's namespace selecting the pod.
    const hosts = JSON.parse(env.CAFFE2_CONFIG).cluster.worker.map((h: string) => h.split(":")[0]);
    const services = d.creates.filter((c) => c.kind === "Service");
    assert.deepEqual(
      hosts,
      services.map((s) => s.name),
    );
    const svc = services[1]!.body as Obj;
    assert.equal(svc.spec.clusterIP, "None");
    assert.deepEqual(svc.spec.ports, [{ name: "caffe2-port", port: 2222 }]);
    for (const [k, v] of Object.entries(svc.spec.selector as Obj)) assert.equal(pod.metadata.labels[k], v, `selector ${k} matches the pod`);
    assert.deepEqual(svc.metadata.ownerReferences, pod.metadata.ownerReferences);
  });

  it("a Kubeflow kind: GenGeneralName names, GenLabels over the template's, job-role on the master only, template annotations and finalizers kept", () => {
    const d = decideJob({ job: pytorchJob(), kind: PYTORCH, pods: [], services: [], now: NOW });
    assert.deepEqual(names(d.creates), [
      "Pod/pt-master-0",
      "Pod/pt-worker-0",
      "Pod/pt-worker-1",
      "Service/pt-master-0",
      "Service/pt-worker-0",
      "Service/pt-worker-1",
    ]);
    const master = d.creates.find((c) => c.kind === "Pod" && c.name === "pt-master-0")!.body as Obj;
    assert.deepEqual(master.metadata.labels, {
      team: "x",
      "training.kubeflow.org/job-name": "pt",
      "training.kubeflow.org/operator-name": "pytorchjob-controller",
      "training.kubeflow.org/replica-type": "master",
      "training.kubeflow.org/replica-index": "0",
      "training.kubeflow.org/job-role": "master",
    });
    assert.deepEqual(master.metadata.annotations, { a: "1" });
    assert.deepEqual(master.metadata.finalizers, ["example.com/f"]);
    assert.equal(master.spec.restartPolicy, "OnFailure", "PyTorch's default restart policy");
    const worker = d.creates.find((c) => c.kind === "Pod" && c.name === "pt-worker-1")!.body as Obj;
    assert.equal(worker.metadata.labels["training.kubeflow.org/job-role"], undefined);
    const env = Object.fromEntries((worker.spec.containers[0].env as Obj[]).map((e) => [e.name, e.value]));
    assert.equal(env.MASTER_ADDR, "pt-master-0");
    assert.equal(env.RANK, "2");
    const svc = d.creates.find((c) => c.kind === "Service" && c.name === "pt-master-0")!.body as Obj;
    assert.equal(svc.spec.selector["training.kubeflow.org/job-role"], undefined, "services never select on job-role");
    assert.deepEqual(svc.spec.ports, [{ name: "pytorchjob-port", port: 23456 }]);
  });

  const restartCases: Array<{ name: string; job: KubeObject; podRestart: string; warned: boolean }> = [
    { name: "ExitCode → pod Never", job: caffe2Job({ restartPolicy: "ExitCode" }), podRestart: "Never", warned: false },
    { name: "OnFailure stays", job: caffe2Job({ restartPolicy: "OnFailure" }), podRestart: "OnFailure", warned: false },
    { name: "Always stays", job: caffe2Job({ restartPolicy: "Always" }), podRestart: "Always", warned: false },
    { name: "Caffe2 without one: the template's", job: caffe2Job({ templateRestart: "OnFailure" }), podRestart: "OnFailure", warned: false },
    {
      name: "the replica spec's overwrites the template's, with a warning",
      job: caffe2Job({ restartPolicy: "ExitCode", templateRestart: "Always" }),
      podRestart: "Never",
      warned: true,
    },
  ];
  for (const c of restartCases) {
    it(`restart policy of the pod: ${c.name}`, () => {
      const d = decideC2(c.job, [], []);
      assert.equal((d.creates[0]!.body as Obj).spec.restartPolicy, c.podRestart);
      assert.equal(
        d.events.some((e) => e.reason === "SetPodTemplateRestartPolicy" && e.type === "Warning"),
        c.warned,
      );
    });
  }

  const slotCases: Array<{
    name: string;
    replicas: number;
    pods: KubeObject[];
    services?: KubeObject[];
    inFlight?: InFlight;
    creates: string[];
    deletes: string[];
    problems?: RegExp;
  }> = [
    { name: "only the missing index is created", replicas: 2, pods: [c2Pod(0, { phase: "Running" })], creates: ["Pod/team-a-ex-worker-1"], deletes: [] },
    {
      name: "a create still in flight is not made twice",
      replicas: 2,
      pods: [c2Pod(0)],
      inFlight: { creates: new Set(["Pod/team-a-ex-worker-1"]), deletes: new Set() },
      creates: [],
      deletes: [],
    },
    {
      name: "scale-down deletes the highest indices, pods and Services",
      replicas: 1,
      pods: [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Running" }), c2Pod(2, { phase: "Pending" })],
      services: c2Services(3),
      creates: [],
      deletes: ["Pod/team-a-ex-worker-1", "Pod/team-a-ex-worker-2", "Service/team-a-ex-worker-1", "Service/team-a-ex-worker-2"],
    },
    {
      name: "a delete in flight is not sent again",
      replicas: 1,
      pods: [c2Pod(0), c2Pod(1)],
      services: c2Services(1),
      inFlight: { creates: new Set(), deletes: new Set(["Pod/team-a-ex-worker-1"]) },
      creates: [],
      deletes: [],
    },
    {
      name: "a terminating pod holds its slot: no create until it is gone",
      replicas: 2,
      pods: [c2Pod(0), c2Pod(1, { deleting: true, phase: "Failed", exitCode: 137 })],
      creates: [],
      deletes: [],
    },
    {
      name: "two pods in one slot: reported, nothing done",
      replicas: 2,
      pods: [c2Pod(0), { ...c2Pod(0, { uid: "other" }), metadata: { ...(c2Pod(0).metadata as Obj), name: "dup", uid: "other" } }, c2Pod(1)],
      creates: [],
      deletes: [],
      problems: /2 pods for worker 0/,
    },
    {
      name: "a pod without an index label: reported and left alone",
      replicas: 2,
      pods: [c2Pod(0), c2Pod(1), c2Pod(5, { noIndex: true })],
      creates: [],
      deletes: [],
      problems: /no valid caffe2_replica_index/,
    },
    {
      name: "a missing Service alone is created",
      replicas: 2,
      pods: [c2Pod(0), c2Pod(1)],
      services: [c2Service(1)],
      creates: ["Service/team-a-ex-worker-0"],
      deletes: [],
    },
  ];
  for (const c of slotCases) {
    it(`slots: ${c.name}`, () => {
      const d = decideC2(caffe2Job({ replicas: c.replicas, status: created() }), c.pods, c.services ?? c2Services(c.replicas), c.inFlight);
      assert.deepEqual(names(d.creates), c.creates);
      assert.deepEqual(names(d.deletes), c.deletes);
      if (c.problems) assert.match(d.problems.join("\n"), c.problems);
      for (const x of d.deletes) assert.ok(x.uid.startsWith("uid-"), "every delete carries the uid precondition");
    });
  }

  it("TFJob: the cluster spec goes on the tensorflow container only", () => {
    const job: KubeObject = {
      metadata: { name: "mnist", namespace: "kubeflow", uid: "u" },
      spec: { tfReplicaSpecs: { Worker: { replicas: 2, template: { spec: { containers: [{ name: "sidecar" }, { name: "tensorflow" }] } } } } },
    };
    const d = decideJob({ job, kind: TF, pods: [], services: [], now: NOW, clusterDomain: "cluster.local" });
    const pod = d.creates.find((c) => c.name === "mnist-worker-0")!.body as Obj;
    assert.equal(pod.spec.containers[0].env, undefined);
    assert.match(pod.spec.containers[1].env[0].value, /mnist-worker-1\.kubeflow\.svc\.cluster\.local:2222/);
  });
});

describe("job controller: status", () => {
  it("first sight: Created, startTime, zeroed replica statuses in the Caffe2Job shape, lastReconcileTime", () => {
    const d = decideC2(caffe2Job(), [], []);
    assert.deepEqual(d.status, {
      conditions: [
        { type: "Created", status: "True", reason: "JobCreated", message: "Caffe2Job ex is created.", lastUpdateTime: NOW_S, lastTransitionTime: NOW_S },
      ],
      replicaStatuses: { active: 0, succeeded: 0, failed: 0 },
      startTime: NOW_S,
      lastReconcileTime: NOW_S,
    });
  });

  it("a Kubeflow kind keeps the common map of replica statuses", () => {
    const d = decideJob({ job: pytorchJob(), kind: PYTORCH, pods: [ptPod("master", 0), ptPod("worker", 0, { phase: "Pending" })], services: [], now: NOW });
    assert.deepEqual(d.status?.replicaStatuses, { Master: { active: 1, succeeded: 0, failed: 0 }, Worker: { active: 0, succeeded: 0, failed: 0 } });
    assert.equal(cond(d, "Running")?.reason, "JobRunning");
  });

  const statusCases: Array<{
    name: string;
    pods: KubeObject[];
    replicas?: Obj;
    running?: string;
    succeeded?: boolean;
    failed?: RegExp;
    restarting?: boolean;
    events?: string[];
  }> = [
    {
      name: "Pending is not counted: no Running",
      pods: [c2Pod(0, { phase: "Pending" }), c2Pod(1, { phase: "Pending" })],
      replicas: { active: 0, succeeded: 0, failed: 0 },
    },
    {
      name: "a Running pod: Running",
      pods: [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Pending" })],
      replicas: { active: 1, succeeded: 0, failed: 0 },
      running: "True",
    },
    {
      name: "a Running pod being deleted counts as failed (Never: the job fails, Running turns False)",
      pods: [c2Pod(0, { phase: "Running", deleting: true }), c2Pod(1, { phase: "Running" })],
      replicas: { active: 1, succeeded: 0, failed: 1 },
      running: "False",
      failed: /1 Worker replica\(s\) failed/,
      events: ["JobFailed"],
    },
    {
      name: "all succeeded: Succeeded, Running False",
      pods: [c2Pod(0, { phase: "Succeeded" }), c2Pod(1, { phase: "Succeeded" })],
      replicas: { active: 0, succeeded: 2, failed: 0 },
      succeeded: true,
      events: ["JobSucceeded"],
    },
    {
      name: "one of two succeeded, one running: still Running",
      pods: [c2Pod(0, { phase: "Succeeded" }), c2Pod(1, { phase: "Running" })],
      replicas: { active: 1, succeeded: 1, failed: 0 },
      running: "True",
    },
    {
      name: "Never + a failed pod: Failed",
      pods: [c2Pod(0, { phase: "Failed", exitCode: 1 }), c2Pod(1, { phase: "Running" })],
      replicas: { active: 1, succeeded: 0, failed: 1 },
      failed: /^Caffe2Job ex is failed because 1 Worker replica\(s\) failed\.$/,
      events: ["JobFailed"],
    },
  ];
  for (const c of statusCases) {
    it(`replica counts and conditions: ${c.name}`, () => {
      const job = caffe2Job({
        status: created({
          conditions: [
            ...created().conditions,
            { type: "Running", status: "True", reason: "JobRunning", message: "m", lastUpdateTime: T(30), lastTransitionTime: T(30) },
          ],
        }),
      });
      const fresh = caffe2Job({ status: created() });
      const d = decideC2(c.running || c.succeeded || c.failed ? job : fresh, c.pods);
      if (c.replicas) assert.deepEqual(d.status?.replicaStatuses, c.replicas);
      if (c.running) assert.equal(cond(d, "Running")?.status, c.running);
      if (c.succeeded) {
        assert.equal(cond(d, "Succeeded")?.status, "True");
        assert.equal(cond(d, "Running")?.status, "False", "Succeeded turns Running False");
        assert.equal(d.status?.completionTime, NOW_S);
        assert.equal((d.status?.conditions as Obj[]).at(-1)!.type, "Succeeded", "appended last (kubectl's State column)");
      } else assert.equal(cond(d, "Succeeded"), undefined);
      if (c.failed) {
        assert.equal(cond(d, "Failed")?.status, "True");
        assert.match(cond(d, "Failed")!.message, c.failed);
        assert.equal(cond(d, "Failed")!.reason, "JobFailed");
        assert.equal(d.status?.completionTime, NOW_S);
        assert.deepEqual(d.creates, [], "a job failed by this pass gets no new pods");
      } else assert.equal(cond(d, "Failed"), undefined);
      assert.deepEqual(
        d.events.map((e) => e.reason).filter((r) => r.startsWith("Job")),
        c.events ?? [],
      );
    });
  }

  it("with a Master, the master decides success (workers still running)", () => {
    const d = decideJob({
      job: pytorchJob(),
      kind: PYTORCH,
      pods: [ptPod("master", 0, { phase: "Succeeded" }), ptPod("worker", 0), ptPod("worker", 1)],
      services: [],
      now: NOW,
    });
    assert.equal(cond(d, "Succeeded")?.status, "True");
    assert.equal(cond(d, "Succeeded")?.message, "PyTorchJob team-a/pt successfully completed.");
  });

  it("with a Master, workers all succeeded but the master running: not Succeeded", () => {
    const d = decideJob({
      job: pytorchJob(),
      kind: PYTORCH,
      pods: [ptPod("master", 0), ptPod("worker", 0, { phase: "Succeeded" }), ptPod("worker", 1, { phase: "Succeeded" })],
      services: [],
      now: NOW,
    });
    assert.equal(cond(d, "Succeeded"), undefined);
    assert.equal(cond(d, "Running")?.status, "True");
  });

  it("Failed is final: a failed job's status is never changed again, nor are pods created", () => {
    const failed = created({
      conditions: [
        ...created().conditions,
        { type: "Failed", status: "True", reason: "JobFailed", message: "x", lastUpdateTime: T(5), lastTransitionTime: T(5) },
      ],
      completionTime: T(5),
      replicaStatuses: { active: 0, succeeded: 0, failed: 1 },
    });
    const d = decideC2(caffe2Job({ status: failed }), [c2Pod(0, { phase: "Succeeded" }), c2Pod(1, { phase: "Succeeded" })], []);
    assert.deepEqual(d, { creates: [], deletes: [], events: [], problems: [] });
  });

  it("a Succeeded job: its active replicas are counted as succeeded (upstream ReconcileJobs)", () => {
    const ok = created({
      conditions: [...created().conditions, { type: "Succeeded", status: "True", reason: "JobSucceeded", message: "x" }],
      completionTime: T(5),
      replicaStatuses: { active: 1, succeeded: 1, failed: 0 },
    });
    const d = decideC2(caffe2Job({ status: ok }), [c2Pod(0, { phase: "Succeeded" })], []);
    assert.deepEqual(d.status?.replicaStatuses, { active: 0, succeeded: 2, failed: 0 });
    assert.deepEqual(d.creates, []);
  });

  it("reinvocation: applying a decision and deciding again changes nothing", () => {
    for (const pods of [[], [c2Pod(0, { phase: "Running" })], [c2Pod(0, { phase: "Succeeded" }), c2Pod(1, { phase: "Succeeded" })]]) {
      let s = { job: caffe2Job(), pods, services: [] as KubeObject[] };
      const first = decideC2(s.job, s.pods, s.services);
      s = apply(s.job, s.pods, s.services, first);
      const second = decideC2(s.job, s.pods, s.services);
      assert.deepEqual(
        { ...second, status: second.status && "changed" },
        { creates: [], deletes: [], events: [], problems: [], ...(second.requeueAfterMs ? { requeueAfterMs: second.requeueAfterMs } : {}), status: undefined },
      );
    }
  });

  it("a status read back with its keys sorted (as the apiserver returns a custom resource) is not written again", () => {
    const sortKeys = (x: unknown): unknown =>
      Array.isArray(x)
        ? x.map(sortKeys)
        : x && typeof x === "object"
          ? Object.fromEntries(
              Object.entries(x)
                .sort(([a], [b]) => (a < b ? -1 : 1))
                .map(([k, v]) => [k, sortKeys(v)]),
            )
          : x;
    const first = decideC2(caffe2Job(), [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Running" })]);
    const again = decideC2(caffe2Job({ status: sortKeys(first.status) as Obj }), [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Running" })]);
    assert.equal(again.status, undefined);
  });

  it("deletion timestamp on the job, or a runPolicy or restartPolicy it cannot read: nothing but a problem", () => {
    assert.deepEqual(decideC2(caffe2Job({ deleting: true }), [], []), { creates: [], deletes: [], events: [], problems: [] });
    for (const job of [
      caffe2Job({ runPolicy: { backoffLimit: "3" } }),
      caffe2Job({ runPolicy: { activeDeadlineSeconds: 0 } }),
      caffe2Job({ restartPolicy: "Sometimes" }),
      caffe2Job({ runPolicy: { suspend: "yes" } }),
    ]) {
      const d = decideC2(job, [], []);
      assert.deepEqual([d.creates, d.deletes, d.status], [[], [], undefined]);
      assert.match(d.problems[0]!, /^team-a\/Caffe2Job\/ex: spec\.(runPolicy|replicaSpecs)|restartPolicy/);
    }
  });
});

describe("job controller: setCondition (training-operator pkg/util/status.go)", () => {
  const c = (type: string, status: "True" | "False", reason: string, t = T(10)) => ({
    type,
    status,
    reason,
    message: `${type} ${reason}`,
    lastUpdateTime: t,
    lastTransitionTime: t,
  });
  const cases: Array<{
    name: string;
    before: Obj[];
    add: ReturnType<typeof c>;
    after: Array<[string, string, string?]>;
    changed: boolean;
    keepsTransition?: boolean;
  }> = [
    {
      name: "appended",
      before: [c("Created", "True", "JobCreated")],
      add: c("Running", "True", "JobRunning", NOW_S),
      after: [
        ["Created", "True"],
        ["Running", "True"],
      ],
      changed: true,
    },
    {
      name: "same status and reason: no change",
      before: [c("Running", "True", "JobRunning")],
      add: c("Running", "True", "JobRunning", NOW_S),
      after: [["Running", "True"]],
      changed: false,
    },
    {
      name: "same status, other reason: lastTransitionTime kept",
      before: [c("Running", "True", "JobRunning")],
      add: c("Running", "True", "Other", NOW_S),
      after: [["Running", "True", "Other"]],
      changed: true,
      keepsTransition: true,
    },
    {
      name: "Running replaces Restarting",
      before: [c("Created", "True", "JobCreated"), c("Restarting", "True", "JobRestarting")],
      add: c("Running", "True", "JobRunning", NOW_S),
      after: [
        ["Created", "True"],
        ["Running", "True"],
      ],
      changed: true,
    },
    {
      name: "Restarting replaces Running",
      before: [c("Running", "True", "JobRunning")],
      add: c("Restarting", "True", "JobRestarting", NOW_S),
      after: [["Restarting", "True"]],
      changed: true,
    },
    {
      name: "Succeeded turns Running False, kept in place",
      before: [c("Running", "True", "JobRunning"), c("Created", "True", "JobCreated")],
      add: c("Succeeded", "True", "JobSucceeded", NOW_S),
      after: [
        ["Running", "False"],
        ["Created", "True"],
        ["Succeeded", "True"],
      ],
      changed: true,
    },
    {
      name: "Failed turns Running False",
      before: [c("Running", "True", "JobRunning")],
      add: c("Failed", "True", "JobFailed", NOW_S),
      after: [
        ["Running", "False"],
        ["Failed", "True"],
      ],
      changed: true,
    },
    {
      name: "nothing after Failed",
      before: [c("Failed", "True", "JobFailed")],
      add: c("Running", "True", "JobRunning", NOW_S),
      after: [["Failed", "True"]],
      changed: false,
    },
  ];
  for (const k of cases) {
    it(k.name, () => {
      const status: Obj = { conditions: structuredClone(k.before) };
      assert.equal(setCondition(status, k.add as never), k.changed);
      assert.deepEqual(
        (status.conditions as Obj[]).map((x) => [x.type, x.status, ...(k.after.find((a) => a[0] === x.type)?.[2] ? [x.reason] : [])]),
        k.after,
      );
      if (k.keepsTransition) assert.equal((status.conditions as Obj[])[0]!.lastTransitionTime, T(10));
    });
  }
});

describe("job controller: restart policies and exit codes", () => {
  it("IsRetryableExitCode: 1–127 permanent, 128–255 retryable", () => {
    for (const code of [1, 2, 126, 127]) assert.equal(isRetryableExitCode(code), false, String(code));
    for (const code of [128, 130, 137, 143, 255, NO_EXIT_CODE]) assert.equal(isRetryableExitCode(code), true, String(code));
  });

  it("the exit code is the default container's; none terminated: 0xbeef; a Caffe2 pod's single container stands in", () => {
    assert.equal(exitCodeOf(c2Pod(0, { phase: "Failed", exitCode: 3 }), CAFFE2), 3);
    assert.equal(exitCodeOf(c2Pod(0, { phase: "Failed" }), CAFFE2), NO_EXIT_CODE);
    assert.equal(exitCodeOf(c2Pod(0, { phase: "Failed", exitCode: 3, container: "main" }), CAFFE2), 3);
    assert.equal(exitCodeOf(ptPod("worker", 0, { phase: "Failed", exitCode: 3 }), PYTORCH), 3);
    const other = ptPod("worker", 0, { phase: "Failed" });
    (other.status as Obj).containerStatuses = [{ name: "sidecar", state: { terminated: { exitCode: 1 } } }];
    assert.equal(exitCodeOf(other, PYTORCH), NO_EXIT_CODE, "only the default container counts for a Kubeflow kind");
  });

  const cases: Array<{ name: string; policy: string; exitCode?: number; restart: boolean; fails?: string }> = [
    { name: "ExitCode 137 (SIGKILL): recreated", policy: "ExitCode", exitCode: 137, restart: true },
    { name: "ExitCode 143: recreated", policy: "ExitCode", exitCode: 143, restart: true },
    { name: "ExitCode 128: recreated", policy: "ExitCode", exitCode: 128, restart: true },
    { name: "ExitCode with no terminated container (0xbeef): recreated", policy: "ExitCode", restart: true },
    { name: "ExitCode 1: the job fails", policy: "ExitCode", exitCode: 1, restart: false, fails: 'job "ex" is failing because "Worker" replica(s) failed.' },
    {
      name: "ExitCode 127: the job fails",
      policy: "ExitCode",
      exitCode: 127,
      restart: false,
      fails: 'job "ex" is failing because "Worker" replica(s) failed.',
    },
    { name: "OnFailure, exit 1: recreated", policy: "OnFailure", exitCode: 1, restart: true },
    { name: "Always, exit 1: recreated", policy: "Always", exitCode: 1, restart: true },
    {
      name: "Never, exit 137: the job fails",
      policy: "Never",
      exitCode: 137,
      restart: false,
      fails: "Caffe2Job ex is failed because 1 Worker replica(s) failed.",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const job = caffe2Job({ restartPolicy: c.policy, status: created() });
      const d = decideC2(job, [c2Pod(0, { phase: "Failed", ...(c.exitCode !== undefined ? { exitCode: c.exitCode } : {}) }), c2Pod(1, { phase: "Running" })]);
      if (c.restart) {
        assert.deepEqual(names(d.deletes), ["Pod/team-a-ex-worker-0"]);
        assert.equal(d.restarts, 1);
        assert.equal(cond(d, "Restarting")?.status, "True");
        assert.equal(cond(d, "Restarting")?.reason, "JobRestarting");
        // Running (pod 1) replaced the pod-level Restarting; the status rule then sets it again, as upstream does.
        assert.equal(cond(d, "Restarting")?.message, "Caffe2Job ex is restarting because 1 Worker replica(s) failed.");
        assert.equal(cond(d, "Failed"), undefined);
        assert.ok(d.events.some((e) => e.type === "Warning" && e.reason === "JobRestarting"));
        assert.deepEqual(d.status?.replicaStatuses, { active: 1, succeeded: 0, failed: 1 });
        // The next pass, the pod gone: recreated under the same name.
        const next = apply(job, [c2Pod(0, { phase: "Failed" }), c2Pod(1, { phase: "Running" })], c2Services(2), d);
        assert.deepEqual(names(decideC2(next.job, next.pods, next.services).creates), ["Pod/team-a-ex-worker-0"]);
      } else {
        assert.deepEqual(d.deletes, []);
        assert.equal(d.restarts, undefined);
        assert.equal(cond(d, "Failed")?.status, "True");
        assert.equal(cond(d, "Failed")?.message, c.fails);
        assert.equal(d.status?.completionTime, NOW_S);
      }
    });
  }
});

describe("job controller: backoffLimit", () => {
  const cases: Array<{ name: string; backoffLimit: number; policy?: string; pods: KubeObject[]; restarts?: number; statusFailed?: number; fails: boolean }> = [
    {
      name: "restartCount of Running pods reaches the limit (OnFailure)",
      backoffLimit: 2,
      policy: "OnFailure",
      pods: [c2Pod(0, { phase: "Running", restartCount: 1 }), c2Pod(1, { phase: "Running", restartCount: 1 })],
      fails: true,
    },
    {
      name: "restartCount below the limit",
      backoffLimit: 3,
      policy: "OnFailure",
      pods: [c2Pod(0, { phase: "Running", restartCount: 1 }), c2Pod(1, { phase: "Running", restartCount: 1 })],
      fails: false,
    },
    {
      name: "limit 0: any restart fails",
      backoffLimit: 0,
      policy: "OnFailure",
      pods: [c2Pod(0, { phase: "Running", restartCount: 1 }), c2Pod(1, { phase: "Running" })],
      fails: true,
    },
    {
      name: "restartCount of a Never replica type is not counted",
      backoffLimit: 1,
      policy: "Never",
      pods: [c2Pod(0, { phase: "Running", restartCount: 5 }), c2Pod(1, { phase: "Running" })],
      fails: false,
    },
    {
      name: "restartCount of pods not Running is not counted",
      backoffLimit: 1,
      policy: "OnFailure",
      pods: [c2Pod(0, { phase: "Pending", restartCount: 5 }), c2Pod(1, { phase: "Running" })],
      fails: false,
    },
    {
      name: "recreations: a new failure with restarts + 1 > limit fails",
      backoffLimit: 2,
      policy: "ExitCode",
      restarts: 2,
      pods: [c2Pod(0, { phase: "Failed", exitCode: 137 }), c2Pod(1, { phase: "Running" })],
      fails: true,
    },
    {
      name: "recreations: restarts + 1 ≤ limit restarts again",
      backoffLimit: 2,
      policy: "ExitCode",
      restarts: 1,
      pods: [c2Pod(0, { phase: "Failed", exitCode: 137 }), c2Pod(1, { phase: "Running" })],
      fails: false,
    },
    {
      name: "recreations: a failure already in the status is not new",
      backoffLimit: 0,
      policy: "ExitCode",
      restarts: 5,
      statusFailed: 1,
      pods: [c2Pod(0, { phase: "Failed", exitCode: 137 }), c2Pod(1, { phase: "Running" })],
      fails: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const job = caffe2Job({
        restartPolicy: c.policy,
        runPolicy: { backoffLimit: c.backoffLimit },
        status: created({ replicaStatuses: { active: 1, succeeded: 0, failed: c.statusFailed ?? 0 } }),
        ...(c.restarts !== undefined ? { annotations: { [ANNOTATION_RESTARTS]: String(c.restarts) } } : {}),
      });
      const d = decideC2(job, c.pods);
      if (c.fails) {
        assert.equal(cond(d, "Failed")?.message, "Job ex has failed because it has reached the specified backoff limit");
        assert.equal(d.status?.completionTime, NOW_S);
        assert.deepEqual(names(d.deletes), ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1", "Service/team-a-ex-worker-0", "Service/team-a-ex-worker-1"]);
        assert.ok(d.events.some((e) => e.reason === "JobFailed"));
        assert.deepEqual(d.creates, []);
      } else assert.equal(cond(d, "Failed"), undefined);
    });
  }

  it("each restart by recreation is counted in the annotation", () => {
    const job = caffe2Job({ restartPolicy: "OnFailure", status: created(), annotations: { [ANNOTATION_RESTARTS]: "4" } });
    const d = decideC2(job, [c2Pod(0, { phase: "Failed", exitCode: 1 }), c2Pod(1, { phase: "Failed", exitCode: 1 })]);
    assert.equal(d.restarts, 6);
  });
});

describe("job controller: activeDeadlineSeconds", () => {
  const cases: Array<{ name: string; started: number; deadline: number; fails: boolean; requeueMs?: number }> = [
    { name: "past the deadline: Failed", started: 100, deadline: 100, fails: true },
    { name: "long past: Failed", started: 1000, deadline: 100, fails: true },
    { name: "before: looked at again when it falls due", started: 99, deadline: 100, fails: false, requeueMs: 1000 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const job = caffe2Job({ runPolicy: { activeDeadlineSeconds: c.deadline }, status: created({ startTime: T(c.started) }) });
      const d = decideC2(job, [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Running" })]);
      if (c.fails) {
        assert.equal(cond(d, "Failed")?.message, "Job ex has failed because it was active longer than specified deadline");
        assert.equal(d.deletes.length, 4);
        assert.equal(d.requeueAfterMs, undefined);
      } else {
        assert.equal(cond(d, "Failed"), undefined);
        assert.equal(d.requeueAfterMs, c.requeueMs);
      }
    });
  }
});

describe("job controller: suspend and resume", () => {
  it("suspend: every pod and Service deleted, active 0, Running False, Suspended True, once", () => {
    const running = created({
      conditions: [
        ...created().conditions,
        { type: "Running", status: "True", reason: "JobRunning", message: "m", lastUpdateTime: T(30), lastTransitionTime: T(30) },
      ],
      replicaStatuses: { active: 2, succeeded: 0, failed: 0 },
    });
    const job = caffe2Job({ runPolicy: { suspend: true }, status: running });
    const d = decideC2(job, [c2Pod(0, { phase: "Running" }), c2Pod(1, { phase: "Succeeded" })]);
    assert.deepEqual(names(d.deletes), ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1", "Service/team-a-ex-worker-0", "Service/team-a-ex-worker-1"]);
    assert.deepEqual(d.creates, []);
    assert.deepEqual(d.status?.replicaStatuses, { active: 0, succeeded: 0, failed: 0 });
    assert.deepEqual([cond(d, "Running")?.status, cond(d, "Running")?.reason], ["False", "JobSuspended"]);
    assert.deepEqual([cond(d, "Suspended")?.status, cond(d, "Suspended")?.message], ["True", "Caffe2Job ex is suspended."]);
    assert.deepEqual(
      d.events.map((e) => e.reason),
      ["JobSuspended"],
    );
    const after = apply(job, [c2Pod(0), c2Pod(1)], c2Services(2), d);
    const again = decideC2(after.job, after.pods, after.services);
    assert.equal(again.status, undefined, "suspended twice changes nothing");
    assert.deepEqual(again.events, []);
    assert.deepEqual(again.creates, []);
  });

  it("resume: Suspended False (JobResumed), startTime now, pods created again", () => {
    const suspended = created({
      startTime: T(500),
      conditions: [
        ...created().conditions,
        { type: "Suspended", status: "True", reason: "JobSuspended", message: "s", lastUpdateTime: T(30), lastTransitionTime: T(30) },
      ],
    });
    const d = decideC2(caffe2Job({ runPolicy: { suspend: false }, status: suspended }), [], []);
    assert.deepEqual([cond(d, "Suspended")?.status, cond(d, "Suspended")?.reason], ["False", "JobResumed"]);
    assert.equal(d.status?.startTime, NOW_S);
    assert.equal(d.creates.length, 4);
    assert.ok(d.events.some((e) => e.reason === "JobResumed"));
  });

  it("resume resets the deadline clock", () => {
    const suspended = created({
      startTime: T(500),
      conditions: [...created().conditions, { type: "Suspended", status: "True", reason: "JobSuspended", message: "s" }],
    });
    const d = decideC2(caffe2Job({ runPolicy: { activeDeadlineSeconds: 100 }, status: suspended }), [], []);
    assert.equal(cond(d, "Failed"), undefined);
    assert.equal(d.requeueAfterMs, 100_000);
  });
});

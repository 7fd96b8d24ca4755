import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { defaultPolicy, checkPolicy } from "../../../src/policy/load.js";
import { planPass } from "../../../src/reconcile/plan.js";
import { planReplicaServices, serviceKeys } from "../../../src/reconcile/services.js";
import { SCOPE, snapshotOf } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";

type Obj = Record<string, any>;
const kind = kindOf("TFJob");
const tf = (finished = false): KubeObject => {
  const j = structuredClone(job("TFJob", "mnist", "team-a", { Worker: { replicas: 2, port: 2222 }, PS: 1 })) as Record<string, any>;
  j.spec.tfReplicaSpecs.Worker.template.spec.containers[0].ports.push({ name: "metrics", containerPort: 9090 });
  if (finished) j.status = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: "2026-11-22T00:00:00Z" };
  return deepFreeze(j);
};
/** `edit` changes a clone of `j` before it is frozen. */
const edited = (j: KubeObject, edit: (j: Obj) => void): KubeObject => {
  const c = structuredClone(j) as Obj;
  edit(c);
  return deepFreeze(c);
};
/** A managedFields entry of `manager` owning the ownerReference of `uid` (and, when `created`, the pod's spec: it created the pod). */
const refEntry = (manager: string, uid: string, created = false) => ({
  manager,
  operation: "Update",
  apiVersion: "v1",
  time: "2026-11-22T00:00:00Z",
  fieldsType: "FieldsV1",
  fieldsV1: {
    "f:metadata": { "f:ownerReferences": { ".": {}, [`k:${JSON.stringify({ uid })}`]: {} } },
    ...(created ? { "f:spec": { "f:containers": {} } } : {}),
  },
});
/** A replica pod the reconciler adopted in an earlier pass (its managedFields say so), unless `managed` says otherwise. */
const pod = (
  name: string,
  type: string,
  extra: Record<string, string> = {},
  owner = "uid-mnist",
  job = "mnist",
  kindName = "TFJob",
  managed: unknown[] = [refEntry("quartermaster-reconciler", owner)],
): KubeObject =>
  deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${name}`,
      labels: {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/replica-type": type,
        "training.kubeflow.org/replica-index": name.slice(name.lastIndexOf("-") + 1),
        ...extra,
      },
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: kindName, name: job, uid: owner, controller: true }],
      managedFields: managed,
    },
  });
const svc = (name: string, namespace = "team-a"): KubeObject => deepFreeze({ apiVersion: "v1", kind: "Service", metadata: { name, namespace } });
/** The operator's Service labels (GenLabels + replica type and index). */
const opLabels = (job: string, operator: string, type: string, index: number) => ({
  "training.kubeflow.org/job-name": job,
  "training.kubeflow.org/operator-name": operator,
  "training.kubeflow.org/replica-type": type,
  "training.kubeflow.org/replica-index": String(index),
});

describe("planReplicaServices", () => {
  it("a replica pod without its Service → upstream's headless Service: its name, GenLabels + type + index as labels and selector, the default container's ports, owned by the job", () => {
    const [a, ...rest] = planReplicaServices(
      tf(),
      kind,
      [
        pod("mnist-worker-0", "worker", {
          "training.kubeflow.org/job-role": "master",
          "training.kubeflow.org/operator-name": "tfjob-controller",
          team: "vision",
        }),
      ],
      new Map(),
    );
    assert.equal(rest.length, 0);
    const labels = opLabels("mnist", "tfjob-controller", "worker", 0);
    assert.deepEqual(a!.body, {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "mnist-worker-0",
        namespace: "team-a",
        labels,
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true, blockOwnerDeletion: true }],
      },
      spec: {
        clusterIP: "None",
        selector: labels,
        ports: [
          { name: "tfjob-port", port: 2222 },
          { name: "metrics", port: 9090 },
        ],
      },
    });
  });

  // Differences from upstream found by reading pkg/controller.v1/common/service.go, pkg/core/service.go and
  // pkg/apis/kubeflow.org/v1/*_defaults.go (v1.8.1); each row failed before the fix.
  const spec = (type: string) => (j: Obj) => j.spec.tfReplicaSpecs[type].template.spec;
  const body: Array<{ name: string; job: KubeObject; pod: KubeObject; labels?: Record<string, string>; ports?: unknown }> = [
    {
      name: "labels are the operator's (GenLabels + type + index), not the pod's: template labels and job-role left out, operator-name added",
      job: tf(),
      pod: pod("mnist-worker-1", "worker", { team: "vision", "training.kubeflow.org/job-role": "master" }),
      labels: opLabels("mnist", "tfjob-controller", "worker", 1),
    },
    {
      name: "a default container without the framework's named port gets it appended (setDefaultPort), after its own",
      job: edited(tf(), (j) => (spec("Worker")(j).containers[0].ports = [{ name: "metrics", containerPort: 9090 }])),
      pod: pod("mnist-worker-0", "worker"),
      ports: [
        { name: "metrics", port: 9090 },
        { name: "tfjob-port", port: 2222 },
      ],
    },
    {
      name: "a default container without ports → the framework's default port",
      job: tf(),
      pod: pod("mnist-ps-0", "ps"),
      ports: [{ name: "tfjob-port", port: 2222 }],
    },
    {
      name: "the framework's port under its name keeps its number; no second one is added",
      job: edited(tf(), (j) => (spec("PS")(j).containers[0].ports = [{ name: "tfjob-port", containerPort: 2300 }])),
      pod: pod("mnist-ps-0", "ps"),
      ports: [{ name: "tfjob-port", port: 2300 }],
    },
    {
      name: "ports are keyed by name as upstream's map: the last of a name wins",
      job: edited(
        tf(),
        (j) =>
          (spec("PS")(j).containers[0].ports = [
            { name: "a", containerPort: 1 },
            { name: "tfjob-port", containerPort: 2 },
            { name: "a", containerPort: 3 },
          ]),
      ),
      pod: pod("mnist-ps-0", "ps"),
      ports: [
        { name: "a", port: 3 },
        { name: "tfjob-port", port: 2 },
      ],
    },
    {
      name: "ports of other containers are not the Service's",
      job: edited(
        tf(),
        (j) =>
          (spec("PS")(j).containers = [
            { name: "sidecar", image: "s", ports: [{ name: "side", containerPort: 7 }] },
            { name: "tensorflow", image: "t" },
          ]),
      ),
      pod: pod("mnist-ps-0", "ps"),
      ports: [{ name: "tfjob-port", port: 2222 }],
    },
  ];
  for (const c of body) {
    it(c.name, () => {
      const [a, ...rest] = planReplicaServices(c.job, kind, [c.pod], new Map());
      assert.ok(a, "no Service planned");
      assert.equal(rest.length, 0);
      const b = a.body as Obj;
      if (c.labels) {
        assert.deepEqual(b.metadata.labels, c.labels);
        assert.deepEqual(b.spec.selector, c.labels);
      }
      if (c.ports) assert.deepEqual(b.spec.ports, c.ports);
    });
  }

  const frameworks: Array<[string, string, string, Record<string, unknown>, string, string, number]> = [
    ["PyTorchJob", "pytorchjob-controller", "master", { Master: 1, Worker: 2 }, "pytorch", "pytorchjob-port", 23456],
    ["MXJob", "mxjob-controller", "scheduler", { Scheduler: 1, Server: 1, Worker: 1 }, "mxnet", "mxjob-port", 9091],
    ["XGBoostJob", "xgboostjob-controller", "master", { Master: 1, Worker: 1 }, "xgboost", "xgboostjob-port", 9999],
    ["PaddleJob", "paddlejob-controller", "master", { Master: 1, Worker: 1 }, "paddle", "master", 36543],
    ["JAXJob", "jaxjob-controller", "worker", { Worker: 2 }, "jax", "jaxjob-port", 6666],
  ];
  for (const [kindName, operator, type, replicas, , portName, port] of frameworks) {
    it(`${kindName}: operator-name ${operator}, default port ${portName}: ${port}`, () => {
      const j = job(kindName, "j", "team-a", replicas as Record<string, number>);
      const [a] = planReplicaServices(j, kindOf(kindName), [pod(`j-${type}-0`, type, {}, "uid-j", "j", kindName)], new Map());
      assert.ok(a, "no Service planned");
      const labels = opLabels("j", operator, type, 0);
      assert.deepEqual((a.body as Obj).spec, { clusterIP: "None", selector: labels, ports: [{ name: portName, port }] });
      assert.deepEqual((a.body as Obj).metadata.labels, labels);
    });
  }

  const none: Array<[string, KubeObject, KubeObject[], KubeObject[]]> = [
    ["the Service exists → nothing", tf(), [pod("mnist-worker-0", "worker")], [svc("mnist-worker-0")]],
    ["a finished job → nothing", tf(true), [pod("mnist-worker-0", "worker")], []],
    ["a pod of an unknown replica type → nothing", tf(), [pod("mnist-chief-0", "chief")], []],
    // Rows added with the comparison against upstream (each planned a Service before the fix):
    [
      'no container named like the framework\'s default → nothing (upstream: "failed to find the port")',
      edited(tf(), (j) => (spec("PS")(j).containers[0].name = "main")),
      [pod("mnist-ps-0", "ps")],
      [],
    ],
    ["an index at or beyond the type's replicas → nothing (upstream deletes that Service)", tf(), [pod("mnist-worker-2", "worker")], []],
    ["a missing or malformed index → nothing", tf(), [pod("mnist-worker-x", "worker"), pod("mnist-worker-01", "worker")], []],
    ["a pod not named <job>-<type>-<index> → nothing", tf(), [pod("other-worker-0", "worker")], []],
    [
      "a suspended job → nothing (upstream deletes its pods and Services)",
      edited(tf(), (j) => (j.spec.runPolicy = { suspend: true })),
      [pod("mnist-worker-0", "worker")],
      [],
    ],
    [
      "a job whose status the operator wrote (it serves the job) → nothing",
      edited(tf(), (j) => (j.status = { conditions: [{ type: "Created", status: "True" }] })),
      [pod("mnist-worker-0", "worker")],
      [],
    ],
    ["a job being deleted → nothing", edited(tf(), (j) => (j.metadata.deletionTimestamp = "2026-11-22T00:00:00Z")), [pod("mnist-worker-0", "worker")], []],
    ["a pod being deleted → nothing", tf(), [edited(pod("mnist-worker-0", "worker"), (p) => (p.metadata.deletionTimestamp = "2026-11-22T00:00:00Z"))], []],
  ];
  for (const [name, j, pods, services] of none) it(name, () => assert.deepEqual(planReplicaServices(j, kind, pods, serviceKeys(services)), []));

  it("an empty status or empty conditions is not the operator's mark", () => {
    for (const status of [{}, { conditions: [] }])
      assert.equal(
        planReplicaServices(
          edited(tf(), (j) => (j.status = status)),
          kind,
          [pod("mnist-worker-0", "worker")],
          new Map(),
        ).length,
        1,
      );
  });
  it("a lower-case replica type key is matched (the stored job keeps it; the operator camel-cases in memory)", () => {
    const j = edited(tf(), (x) => {
      x.spec.tfReplicaSpecs.worker = x.spec.tfReplicaSpecs.Worker;
      delete x.spec.tfReplicaSpecs.Worker;
    });
    assert.deepEqual(
      planReplicaServices(j, kind, [pod("mnist-worker-1", "worker")], new Map()).map((c) => c.name),
      ["mnist-worker-1"],
    );
  });
  it("replicas unset count as 1", () => {
    const j = edited(tf(), (x) => delete x.spec.tfReplicaSpecs.PS.replicas);
    assert.deepEqual(
      planReplicaServices(j, kind, [pod("mnist-ps-0", "ps"), pod("mnist-ps-1", "ps")], new Map()).map((c) => c.name),
      ["mnist-ps-0"],
    );
  });
  it("a same-named Service in another namespace does not count", () => {
    assert.equal(planReplicaServices(tf(), kind, [pod("mnist-worker-0", "worker")], serviceKeys([svc("mnist-worker-0", "elsewhere")])).length, 1);
  });
  it("planning again once the Services exist → nothing (a second pass creates nothing)", () => {
    const pods = [pod("mnist-worker-0", "worker"), pod("mnist-worker-1", "worker"), pod("mnist-ps-0", "ps")];
    const first = planReplicaServices(tf(), kind, pods, new Map());
    assert.equal(first.length, 3);
    assert.deepEqual(planReplicaServices(tf(), kind, pods, serviceKeys(first.map((c) => c.body))), []);
  });
  it("Caffe2Job (its operator creates no Services) → nothing", () => {
    const c = kindOf("Caffe2Job");
    const j = job("Caffe2Job", "c", "team-a", { Worker: 2 });
    const p = deepFreeze({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "c-worker-0", namespace: "team-a", uid: "u", labels: { caffe2_replica_type: "worker", caffe2_replica_index: "0" } },
    });
    assert.deepEqual(planReplicaServices(j, c, [p], new Map()), []);
  });
});

// Who set the pods' controller reference (src/reconcile/services.ts, evidence 1). The job has no status: the
// window before the operator's first status write. Every "nothing" row planned Services before the change.
describe("planReplicaServices: the pods tell who serves the job", () => {
  const uid = "uid-mnist";
  const QM = "quartermaster-reconciler";
  const status = { manager: "kubelet", operation: "Update", subresource: "status", fieldsType: "FieldsV1", fieldsV1: { "f:status": { "f:phase": {} } } };
  const w0 = (managed: unknown[]) => pod("mnist-worker-0", "worker", {}, uid, "mnist", "TFJob", managed);
  const rows: Array<{ name: string; pods: KubeObject[]; managers?: string[]; want: string[] }> = [
    {
      name: "the reconciler adopted the pods (its manager set the reference) → their Services",
      pods: [w0([refEntry(QM, uid)]), pod("mnist-ps-0", "ps")],
      want: ["mnist-worker-0", "mnist-ps-0"],
    },
    {
      name: "the reconciler's reference beside other managers' other fields (kubelet's status) → the Service",
      pods: [w0([status, refEntry(QM, uid)])],
      want: ["mnist-worker-0"],
    },
    {
      name: "the race window: the operator created the pod with the job's reference, no status yet → nothing",
      pods: [w0([refEntry("training-operator", uid, true)])],
      want: [],
    },
    { name: "upstream's image names its manager `manager` → nothing (the name is not what decides)", pods: [w0([refEntry("manager", uid, true)])], want: [] },
    { name: "a pod created with the reference by hand or by another tool → nothing", pods: [w0([refEntry("kubectl-create", uid, true)])], want: [] },
    { name: "no managedFields (no record of who set the reference) → nothing", pods: [w0([])], want: [] },
    {
      name: "the reconciler's record is of another uid's reference → nothing",
      pods: [w0([refEntry(QM, "uid-other"), refEntry("training-operator", uid, true)])],
      want: [],
    },
    {
      name: "the reference owned by the reconciler and another manager too → nothing",
      pods: [w0([refEntry(QM, uid), refEntry("training-operator", uid)])],
      want: [],
    },
    {
      name: "one pod the operator created among pods the reconciler adopted → nothing for the whole job",
      pods: [pod("mnist-ps-0", "ps"), w0([refEntry("training-operator", uid, true)])],
      want: [],
    },
    {
      name: "a manager opted in (Quartermaster's job controller) → the Service",
      pods: [w0([refEntry("quartermaster-job-controller", uid, true)])],
      managers: [QM, "quartermaster-job-controller"],
      want: ["mnist-worker-0"],
    },
    { name: "a manager not opted in → nothing", pods: [w0([refEntry("quartermaster-job-controller", uid, true)])], want: [] },
  ];
  for (const r of rows)
    it(r.name, () =>
      assert.deepEqual(
        planReplicaServices(tf(), kind, r.pods, new Map(), r.managers).map((c) => c.name),
        r.want,
      ),
    );

  it("Caffe2Job: its scheme still decides (none), whoever set the references and whoever is opted in", () => {
    const c = kindOf("Caffe2Job");
    const j = job("Caffe2Job", "c", "team-a", { Worker: 2 });
    const u = String((j.metadata as Obj).uid);
    const p = deepFreeze({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "c-worker-0",
        namespace: "team-a",
        uid: "u",
        labels: { caffe2_replica_type: "worker", caffe2_replica_index: "0" },
        ownerReferences: [{ apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "c", uid: u, controller: true }],
        managedFields: [refEntry("quartermaster-job-controller", u, true)],
      },
    });
    assert.deepEqual(planReplicaServices(j, c, [p], new Map(), [QM, "quartermaster-job-controller"]), []);
  });
});

describe("planPass services", () => {
  it("orphans the pass adopts get their Services; beside a pod the operator created, none (the adoptions stay)", () => {
    const orphan = (name: string, type: string) =>
      edited(pod(name, type, { "training.kubeflow.org/operator-name": "tfjob-controller" }), (p) => {
        delete p.metadata.ownerReferences;
        delete p.metadata.managedFields;
      });
    const orphans = [orphan("mnist-worker-0", "worker"), orphan("mnist-worker-1", "worker")];
    const alone = planPass(snapshotOf({ jobs: [{ kind, job: tf() }], pods: orphans }), new Date(), defaultPolicy(), SCOPE);
    assert.deepEqual(
      [alone.claims.map((c) => c.name), alone.creates.map((c) => c.name)],
      [
        ["mnist-worker-0", "mnist-worker-1"],
        ["mnist-worker-0", "mnist-worker-1"],
      ],
    );
    const op = pod("mnist-ps-0", "ps", { "training.kubeflow.org/operator-name": "tfjob-controller" }, "uid-mnist", "mnist", "TFJob", [
      refEntry("training-operator", "uid-mnist", true),
    ]);
    const beside = planPass(snapshotOf({ jobs: [{ kind, job: tf() }], pods: [...orphans, op] }), new Date(), defaultPolicy(), SCOPE);
    assert.deepEqual([beside.claims.map((c) => c.name), beside.creates], [["mnist-worker-0", "mnist-worker-1"], []]);
  });

  const snapshot = (pods: KubeObject[], j = tf()) => snapshotOf({ jobs: [{ kind, job: j }], pods });
  it("only pods the job controls get Services; the policy switch turns them off", () => {
    const pods = [pod("mnist-worker-0", "worker"), pod("mnist-worker-1", "worker", {}, "uid-someone-else")];
    assert.deepEqual(
      planPass(snapshot(pods), new Date(), defaultPolicy(), SCOPE).creates.map((c) => c.name),
      ["mnist-worker-0"],
    );
    assert.deepEqual(planPass(snapshot(pods), new Date(), checkPolicy({ reconciler: { perReplicaServices: false } }, "t"), SCOPE).creates, []);
  });
  it("a job the operator serves: no Services, and its pods and Services are neither adopted nor released", () => {
    const served = edited(
      tf(),
      (j) =>
        (j.status = {
          conditions: [
            { type: "Created", status: "True" },
            { type: "Running", status: "True" },
          ],
        }),
    );
    const pods = [
      pod("mnist-worker-0", "worker", { "training.kubeflow.org/operator-name": "tfjob-controller" }),
      pod("mnist-ps-0", "ps", { "training.kubeflow.org/operator-name": "tfjob-controller" }),
    ];
    const plan = planPass(snapshot(pods, served), new Date(), defaultPolicy(), SCOPE);
    assert.deepEqual(plan.creates, []);
    assert.deepEqual(plan.claims, []);
  });
});

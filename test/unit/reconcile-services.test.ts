import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../src/admission/types.js";
import { defaultPolicy, checkPolicy } from "../../src/policy/load.js";
import { planPass } from "../../src/reconcile/plan.js";
import { planReplicaServices, serviceKeys } from "../../src/reconcile/services.js";
import { SCOPE, snapshotOf } from "../fixtures/cluster.js";
import { job, kindOf } from "../fixtures/jobs.js";
import { deepFreeze } from "../fixtures/reviews.js";

const kind = kindOf("TFJob");
const tf = (finished = false): KubeObject => {
  const j = structuredClone(job("TFJob", "mnist", "team-a", { Worker: { replicas: 2, port: 2222 }, PS: 1 })) as Record<string, any>;
  j.spec.tfReplicaSpecs.Worker.template.spec.containers[0].ports.push({ name: "metrics", containerPort: 9090 });
  if (finished) j.status = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: "2026-11-22T00:00:00Z" };
  return deepFreeze(j);
};
const pod = (name: string, type: string, extra: Record<string, string> = {}, owner = "uid-mnist"): KubeObject =>
  deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${name}`,
      labels: { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": type, "training.kubeflow.org/replica-index": name.slice(-1), ...extra },
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: owner, controller: true }],
    },
  });
const svc = (name: string, namespace = "team-a"): KubeObject => deepFreeze({ apiVersion: "v1", kind: "Service", metadata: { name, namespace } });

describe("planReplicaServices", () => {
  it("a replica pod without its Service → a headless Service named like it, selector without job-role, framework ports, owned by the job", () => {
    const [a, ...rest] = planReplicaServices(tf(), kind, [pod("mnist-worker-0", "worker", { "training.kubeflow.org/job-role": "master" })], new Map());
    assert.equal(rest.length, 0);
    const labels = { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0" };
    assert.deepEqual(a!.body, {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "mnist-worker-0",
        namespace: "team-a",
        labels,
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true, blockOwnerDeletion: true }],
      },
      spec: { clusterIP: "None", selector: labels, ports: [{ name: "tfjob-port", port: 2222 }, { name: "metrics", port: 9090 }] },
    });
  });
  const none: Array<[string, KubeObject, KubeObject[], KubeObject[]]> = [
    ["the Service exists → nothing", tf(), [pod("mnist-worker-0", "worker")], [svc("mnist-worker-0")]],
    ["a finished job → nothing", tf(true), [pod("mnist-worker-0", "worker")], []],
    ["a pod of an unknown replica type → nothing", tf(), [pod("mnist-chief-0", "chief")], []],
  ];
  for (const [name, j, pods, services] of none) it(name, () => assert.deepEqual(planReplicaServices(j, kind, pods, serviceKeys(services)), []));
  it("a same-named Service in another namespace does not count", () => {
    assert.equal(planReplicaServices(tf(), kind, [pod("mnist-worker-0", "worker")], serviceKeys([svc("mnist-worker-0", "elsewhere")])).length, 1);
  });
  it("a replica type without default-container ports → a Service without ports", () => {
    const [a] = planReplicaServices(tf(), kind, [pod("mnist-ps-0", "ps")], new Map());
    assert.deepEqual(a!.body.spec, { clusterIP: "None", selector: (a!.body.metadata as { labels: unknown }).labels });
  });
});

describe("planPass services", () => {
  const snapshot = (pods: KubeObject[]) => snapshotOf({ jobs: [{ kind, job: tf() }], pods });
  it("only pods the job controls get Services; the policy switch turns them off", () => {
    const pods = [pod("mnist-worker-0", "worker"), pod("mnist-worker-1", "worker", {}, "uid-someone-else")];
    assert.deepEqual(planPass(snapshot(pods), new Date(), defaultPolicy(), SCOPE).creates.map((c) => c.name), ["mnist-worker-0"]);
    assert.deepEqual(planPass(snapshot(pods), new Date(), checkPolicy({ reconciler: { perReplicaServices: false } }, "t"), SCOPE).creates, []);
  });
});

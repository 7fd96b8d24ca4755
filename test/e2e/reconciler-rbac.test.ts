/**
 * End to end: the reconciler's RBAC from the rendered manifests/base, exercised as its ServiceAccount
 * (kubectl --as) on a real kube-apiserver that runs OwnerReferencesPermissionEnforcement. It can update job
 * finalizers and the ledger's ConfigMaps; it cannot touch the webhook's policy ConfigMap or any other; and
 * adoption (ownerReferences with blockOwnerDeletion) works, while an account without the finalizers grant is
 * refused the same patch (so the admission plugin is really on).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MAX_LEDGER_SHARDS } from "../../src/reconcile/ledger-shards.js";
import type { ControlPlane } from "./harness/controlplane.js";
import { cli, reconcilerCluster } from "./harness/webhook.js";

const NS = "team-rbac";
const OWN = "quartermaster";
const AS = `--as=system:serviceaccount:${OWN}:quartermaster-reconciler`;

describe("the reconciler's RBAC on a real kube-apiserver", () => {
  let cp: ControlPlane;
  let sa: Awaited<ReturnType<typeof reconcilerCluster>>["sa"];
  let policyConfigMap: string;
  let jobUid: string;

  const as = (args: string[], stdin?: string) => cp.kubectl([AS, ...args], stdin);
  const canI = async (args: string[]): Promise<boolean> => (await as(["auth", "can-i", ...args])).stdout.trim() === "yes";

  before(async () => {
    ({ cp, sa } = await reconcilerCluster(NS));
    const labelled = await cp.kubectl(["label", "namespace", NS, "quartermaster.dev/enabled=true"]);
    assert.equal(labelled.code, 0, labelled.stderr);
    const cms = await cp.api("GET", `/api/v1/namespaces/${OWN}/configmaps`);
    policyConfigMap = (cms.body.items as Array<{ metadata: { name: string } }>).map((c) => c.metadata.name).find((n) => n.startsWith("quartermaster-policy"))!;
    assert.ok(policyConfigMap, "the base's policy ConfigMap is applied");
    for (const name of ["unrelated", "quartermaster-ledger-x"]) {
      const r = await cp.api("POST", `/api/v1/namespaces/${OWN}/configmaps`, { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels: { "quartermaster.dev/ledger": "true" } }, data: { a: "b" } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const job = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs`, {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name: "adopter" },
      spec: { tfReplicaSpecs: { Worker: { replicas: 1, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
    });
    assert.equal(job.status, 201, JSON.stringify(job.body));
    jobUid = job.body.metadata.uid;
  });

  after(() => cp?.stop());

  const allowed: Array<{ name: string; args: string[] }> = [
    { name: "update tfjobs/finalizers in any namespace", args: ["update", "tfjobs.kubeflow.org", "--subresource=finalizers", "-n", NS] },
    { name: "update caffe2jobs/finalizers", args: ["update", "caffe2jobs.kubeflow.org", "--subresource=finalizers", "-n", NS] },
    { name: "list namespaces", args: ["list", "namespaces"] },
    { name: "update the ledger index", args: ["update", "configmaps/quartermaster-ledger", "-n", OWN] },
    { name: "update shard 0", args: ["update", "configmaps/quartermaster-ledger-0", "-n", OWN] },
    { name: `delete the last shard (${MAX_LEDGER_SHARDS - 1})`, args: ["delete", `configmaps/quartermaster-ledger-${MAX_LEDGER_SHARDS - 1}`, "-n", OWN] },
    { name: "create ConfigMaps (cannot be restricted by name)", args: ["create", "configmaps", "-n", OWN] },
  ];
  const refused: Array<{ name: string; args: string[] }> = [
    { name: "update the policy ConfigMap", args: ["update", "configmaps/POLICY", "-n", OWN] },
    { name: "patch the policy ConfigMap", args: ["patch", "configmaps/POLICY", "-n", OWN] },
    { name: "delete the policy ConfigMap", args: ["delete", "configmaps/POLICY", "-n", OWN] },
    { name: "update an unrelated ConfigMap", args: ["update", "configmaps/unrelated", "-n", OWN] },
    { name: `update a shard past the maximum (${MAX_LEDGER_SHARDS})`, args: ["update", `configmaps/quartermaster-ledger-${MAX_LEDGER_SHARDS}`, "-n", OWN] },
    { name: "update ConfigMaps in a team namespace", args: ["update", "configmaps/quartermaster-ledger", "-n", NS] },
    { name: "update tfjobs themselves", args: ["update", "tfjobs.kubeflow.org", "-n", NS] },
  ];
  for (const c of allowed) it(`can ${c.name}`, async () => assert.equal(await canI(c.args), true));
  for (const c of refused) it(`cannot ${c.name}`, async () => assert.equal(await canI(c.args.map((a) => a.replace("POLICY", policyConfigMap))), false));

  it("really writes the ledger's ConfigMaps and is really refused the policy's and an unrelated one", async () => {
    const ledger = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "quartermaster-ledger-0", namespace: OWN }, data: { "shard.json": "{}" } };
    assert.equal((await as(["create", "-f", "-"], JSON.stringify(ledger))).code, 0);
    const updated = await as(["replace", "-f", "-"], JSON.stringify({ ...ledger, data: { "shard.json": '{"x":1}' } }));
    assert.equal(updated.code, 0, updated.stderr);
    for (const name of [policyConfigMap, "unrelated", "quartermaster-ledger-x"]) {
      const patch = await as(["-n", OWN, "patch", "configmap", name, "--type=merge", "-p", '{"data":{"evil":"1"}}']);
      assert.notEqual(patch.code, 0, `patched ${name}`);
      assert.match(patch.stderr, /forbidden/i);
      const del = await as(["-n", OWN, "delete", "configmap", name]);
      assert.notEqual(del.code, 0, `deleted ${name}`);
    }
    assert.equal((await as(["-n", OWN, "delete", "configmap", "quartermaster-ledger-0"])).code, 0);
  });

  it("OwnerReferencesPermissionEnforcement is on: blockOwnerDeletion without the finalizers grant is refused", async () => {
    // The webhook's ServiceAccount may get jobs but not update their finalizers; give it pod create here only.
    const role = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "pods-only", namespace: NS },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["create"] }],
    };
    const binding = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "pods-only", namespace: NS },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pods-only" },
      subjects: [{ kind: "ServiceAccount", name: "quartermaster-webhook", namespace: OWN }],
    };
    assert.equal((await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: [role, binding] }))).code, 0);
    const podWithOwner = (name: string, block: boolean) =>
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: NS, ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "adopter", uid: jobUid, controller: true, blockOwnerDeletion: block }] },
        spec: { containers: [{ name: "c", image: "busybox" }] },
      });
    const asWebhook = `--as=system:serviceaccount:${OWN}:quartermaster-webhook`;
    const refusedCreate = await cp.kubectl([asWebhook, "create", "-f", "-"], podWithOwner("blocked", true));
    assert.notEqual(refusedCreate.code, 0);
    assert.match(refusedCreate.stderr, /cannot set blockOwnerDeletion/);
    const plain = await cp.kubectl([asWebhook, "create", "-f", "-"], podWithOwner("unblocked", false));
    assert.equal(plain.code, 0, plain.stderr);
  });

  it("a pass adopts an orphan pod with blockOwnerDeletion as the reconciler's ServiceAccount", async () => {
    const labels = { "training.kubeflow.org/job-name": "adopter", "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/operator-name": "tfjob-controller" };
    const created = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, { apiVersion: "v1", kind: "Pod", metadata: { name: "adopter-worker-0", labels }, spec: { containers: [{ name: "tensorflow", image: "tf" }] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const st = await cp.api("PATCH", `/api/v1/namespaces/${NS}/pods/adopter-worker-0/status`, { status: { phase: "Running" } }, { "content-type": "application/merge-patch+json" });
    assert.equal(st.status, 200);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig, "--namespace", OWN]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stdout + r.stderr, /forbidden/i);
    const pod = await cp.api("GET", `/api/v1/namespaces/${NS}/pods/adopter-worker-0`);
    assert.deepEqual(
      (pod.body.metadata.ownerReferences ?? []).map((o: Record<string, unknown>) => ({ uid: o.uid, controller: o.controller, blockOwnerDeletion: o.blockOwnerDeletion })),
      [{ uid: jobUid, controller: true, blockOwnerDeletion: true }],
      r.stdout,
    );
  });
});

/**
 * End to end: the reconciler's RBAC from the rendered manifests/base, exercised as its ServiceAccount
 * (kubectl --as) on a real kube-apiserver that runs OwnerReferencesPermissionEnforcement. It can update job
 * finalizers and the ledger's ConfigMaps; it cannot touch the webhook's policy ConfigMap or any other; and
 * adoption (ownerReferences with blockOwnerDeletion) works, while an account without the finalizers grant is
 * refused the same patch (so the admission plugin is really on). And the apiserver itself confines its writes
 * (the ValidatingAdmissionPolicy quartermaster-reconciler-scope, src/manifests/confinement.ts): pods, Services,
 * Events and jobs only in opted-in namespaces, whatever its ClusterRole grants, and nobody else's writes judged.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MAX_LEDGER_SHARDS } from "../../src/ledger/shards.js";
import type { ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, reconcilerCluster } from "./harness/webhook.js";

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
      const r = await cp.api("POST", `/api/v1/namespaces/${OWN}/configmaps`, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, labels: { "quartermaster.dev/ledger": "true" } },
        data: { a: "b" },
      });
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
        metadata: {
          name,
          namespace: NS,
          ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "adopter", uid: jobUid, controller: true, blockOwnerDeletion: block }],
        },
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
    const labels = {
      "training.kubeflow.org/job-name": "adopter",
      "training.kubeflow.org/replica-type": "worker",
      "training.kubeflow.org/replica-index": "0",
      "training.kubeflow.org/operator-name": "tfjob-controller",
    };
    const created = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "adopter-worker-0", labels },
      spec: { containers: [{ name: "tensorflow", image: "tf" }] },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const st = await cp.api(
      "PATCH",
      `/api/v1/namespaces/${NS}/pods/adopter-worker-0/status`,
      { status: { phase: "Running" } },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(st.status, 200);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig, "--namespace", OWN]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stdout + r.stderr, /forbidden/i);
    const pod = await cp.api("GET", `/api/v1/namespaces/${NS}/pods/adopter-worker-0`);
    assert.deepEqual(
      (pod.body.metadata.ownerReferences ?? []).map((o: Record<string, unknown>) => ({
        uid: o.uid,
        controller: o.controller,
        blockOwnerDeletion: o.blockOwnerDeletion,
      })),
      [{ uid: jobUid, controller: true, blockOwnerDeletion: true }],
      r.stdout,
    );
  });

  describe("its writes confined by the apiserver (ValidatingAdmissionPolicy quartermaster-reconciler-scope)", () => {
    const PLAIN = "team-plain"; // not opted in
    const OFF = "team-off"; // opted out explicitly
    const pod = (name: string, namespace: string) =>
      JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec: { containers: [{ name: "c", image: "busybox" }] } });
    const service = (namespace: string) =>
      JSON.stringify({ apiVersion: "v1", kind: "Service", metadata: { name: "svc", namespace }, spec: { clusterIP: "None", selector: { a: "b" } } });
    const event = (namespace: string) =>
      JSON.stringify({
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: "e1", namespace },
        involvedObject: { kind: "Pod", name: "x", namespace },
        reason: "Test",
        message: "m",
        type: "Normal",
      });
    const REFUSAL = /ValidatingAdmissionPolicy 'quartermaster-reconciler-scope'.*may write only in namespaces opted in to Quartermaster/;

    before(async () => {
      await createNamespace(cp, PLAIN);
      await createNamespace(cp, OFF, { "quartermaster.dev/enabled": "false" });
      // kube-system carrying the opt-in label is still protected.
      assert.equal((await cp.kubectl(["label", "namespace", "kube-system", "quartermaster.dev/enabled=true", "--overwrite"])).code, 0);
      // Pods the reconciler will be asked to patch and delete where it may not (made by the administrator).
      for (const ns of ["kube-system", PLAIN]) assert.equal((await cp.kubectl(["create", "-f", "-"], pod("victim", ns))).code, 0, ns);
      // The apiserver loads a new policy asynchronously: wait (bounded) until it refuses.
      const deadline = Date.now() + 30_000;
      for (;;) {
        const r = await as(["create", "--dry-run=server", "-f", "-"], pod("probe", PLAIN));
        if (r.code !== 0 && REFUSAL.test(r.stderr)) break;
        assert.ok(Date.now() < deadline, `the policy never took effect: ${r.code} ${r.stderr}`);
        await new Promise((ok) => setTimeout(ok, 250));
      }
    });

    const refused: Array<{ name: string; args: string[]; stdin?: (ns: string) => string; ns: string }> = [
      { name: "create a pod in kube-system (labelled opted in, still protected)", args: ["create", "-f", "-"], stdin: (ns) => pod("p", ns), ns: "kube-system" },
      { name: "create a pod in a namespace that has not opted in", args: ["create", "-f", "-"], stdin: (ns) => pod("p", ns), ns: PLAIN },
      { name: "create a pod in a namespace labelled enabled=false", args: ["create", "-f", "-"], stdin: (ns) => pod("p", ns), ns: OFF },
      { name: "create a pod in its own namespace", args: ["create", "-f", "-"], stdin: (ns) => pod("p", ns), ns: OWN },
      { name: "create a Service in kube-system", args: ["create", "-f", "-"], stdin: service, ns: "kube-system" },
      { name: "create an Event in a namespace that has not opted in", args: ["create", "-f", "-"], stdin: event, ns: PLAIN },
      { name: "delete a pod in a namespace that has not opted in", args: ["delete", "pod", "victim", "--wait=false"], ns: PLAIN },
    ];
    for (const c of refused) {
      it(`refused: ${c.name}, with the policy's message`, async () => {
        const r = await as(["-n", c.ns, ...c.args], c.stdin?.(c.ns));
        assert.notEqual(r.code, 0, r.stdout);
        assert.match(r.stderr, REFUSAL);
        assert.match(r.stderr, new RegExp(`namespace ${c.ns}`));
      });
    }

    // A patch as the reconciler sends it (kubectl patch would GET first, which its RBAC does not grant).
    const patchAs = (ns: string, name: string) =>
      cp.api(
        "PATCH",
        `/api/v1/namespaces/${ns}/pods/${name}`,
        { metadata: { labels: { x: "y" } } },
        { "content-type": "application/merge-patch+json", "Impersonate-User": AS.slice("--as=".length) },
      );

    it("refused: patch a pod in kube-system, with the policy's message", async () => {
      const r = await patchAs("kube-system", "victim");
      assert.equal(r.status, 403, JSON.stringify(r.body));
      assert.match(r.body.message, REFUSAL);
    });

    it("the refused writes changed nothing: the pods are still there, unpatched", async () => {
      for (const ns of ["kube-system", PLAIN]) {
        const r = await cp.api("GET", `/api/v1/namespaces/${ns}/pods/victim`);
        assert.equal(r.status, 200, ns);
        assert.equal(r.body.metadata.deletionTimestamp, undefined, ns);
        assert.equal(r.body.metadata.labels?.x, undefined, ns);
      }
    });

    it("allowed in an opted-in namespace: create, patch and delete a pod, create a Service and an Event", async () => {
      assert.equal((await as(["-n", NS, "create", "-f", "-"], pod("confined-ok", NS))).code, 0);
      const patched = await patchAs(NS, "confined-ok");
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.equal((await as(["-n", NS, "delete", "pod", "confined-ok", "--wait=false"])).code, 0);
      for (const body of [service(NS), event(NS)]) {
        const r = await as(["create", "--dry-run=server", "-f", "-"], body);
        assert.equal(r.code, 0, r.stderr);
      }
    });

    it("its own namespace's Lease and ledger ConfigMaps are not the policy's business", async () => {
      const r = await as(
        ["-n", OWN, "create", "--dry-run=server", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "quartermaster-ledger-7", namespace: OWN }, data: {} }),
      );
      assert.equal(r.code, 0, r.stderr);
    });

    it("other identities are not judged: the administrator creates a pod where the reconciler may not", async () => {
      const r = await cp.kubectl(["create", "--dry-run=server", "-f", "-"], pod("admin-made", PLAIN));
      assert.equal(r.code, 0, r.stderr);
    });
  });
});

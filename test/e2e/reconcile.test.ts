/**
 * End to end: `quartermaster reconcile --once` against a real kube-apiserver (with the garbage collector),
 * running with the reconciler ServiceAccount of manifests/base, so its RBAC is what is exercised.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { ROOT, applyOwnManifests, cli } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const NS = "team-r";

describe("reconciler against a real kube-apiserver", () => {
  let cp: ControlPlane;
  let sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  const uids = new Map<string, string>();

  const tfjob = async (name: string, runPolicy: Record<string, unknown>, finishedSecondsAgo?: number): Promise<void> => {
    const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs`, {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: {
        runPolicy,
        tfReplicaSpecs: { Worker: { replicas: 2, template: { spec: { containers: [{ name: "tensorflow", image: "tf", ports: [{ name: "tfjob-port", containerPort: 2222 }] }] } } } },
      },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    uids.set(name, r.body.metadata.uid);
    if (finishedSecondsAgo !== undefined) {
      const done = new Date(Date.now() - finishedSecondsAgo * 1000).toISOString().replace(/\.\d+Z$/, "Z");
      const s = await cp.api("PATCH", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/${name}/status`, {
        status: { conditions: [{ type: "Created", status: "True" }, { type: "Succeeded", status: "True" }], completionTime: done },
      }, { "content-type": "application/merge-patch+json" });
      assert.equal(s.status, 200, JSON.stringify(s.body));
    }
  };

  const replica = async (job: string, index: number, phase: string, withService = true): Promise<void> => {
    const name = `${job}-worker-${index}`;
    const owner = [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: job, uid: uids.get(job), controller: true, blockOwnerDeletion: true }];
    const labels = { "training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": String(index) };
    const pod = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, labels, ownerReferences: owner },
      spec: { restartPolicy: "Never", containers: [{ name: "tensorflow", image: "tf" }] },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
    const st = await cp.api("PATCH", `/api/v1/namespaces/${NS}/pods/${name}/status`, { status: { phase } }, { "content-type": "application/merge-patch+json" });
    assert.equal(st.status, 200, JSON.stringify(st.body));
    if (!withService) return;
    const svc = await cp.api("POST", `/api/v1/namespaces/${NS}/services`, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, labels, ownerReferences: owner },
      spec: { clusterIP: "None", selector: labels, ports: [{ name: "tfjob-port", port: 2222 }] },
    });
    assert.equal(svc.status, 201, JSON.stringify(svc.body));
  };

  const exists = async (path: string): Promise<boolean> => (await cp.api("GET", path)).status === 200;
  const pod = (n: string) => `/api/v1/namespaces/${NS}/pods/${n}`;
  const svc = (n: string) => `/api/v1/namespaces/${NS}/services/${n}`;
  const job = (n: string) => `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/${n}`;

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    assert.equal((await cp.kubectl(["apply", "-f", join(ROOT, "test/e2e/crds/kubeflow.yaml")])).code, 0);
    assert.equal((await cp.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
    await applyOwnManifests(cp);
    sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    assert.equal((await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } })).status, 201);

    await tfjob("done", { cleanPodPolicy: "Running", ttlSecondsAfterFinished: 60 }, 120); // finished, TTL passed
    await replica("done", 0, "Running");
    await replica("done", 1, "Succeeded");
    await tfjob("fresh", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 3600 }, 10); // finished, TTL not due
    await replica("fresh", 0, "Succeeded");
    await tfjob("busy", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 }); // not finished
    await replica("busy", 0, "Running");
    await tfjob("lonely", {}); // running, its pod has no Service yet
    await replica("lonely", 0, "Running", false);
  });

  after(() => cp?.stop());

  it("--dry-run prints the plan and changes nothing", async () => {
    const r = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as { actions: Array<{ kind: string; name: string; uid: string }>; creates: Array<{ name: string }> };
    assert.deepEqual(plan.creates.map((c) => c.name), ["lonely-worker-0"]);
    assert.ok(!(await exists(svc("lonely-worker-0"))), "a dry run created a Service");
    assert.deepEqual(plan.actions.map((a) => `${a.kind}/${a.name}`).sort(), ["Job/done", "Pod/done-worker-0", "Pod/fresh-worker-0", "Service/done-worker-0", "Service/fresh-worker-0"]);
    assert.equal(plan.actions.find((a) => a.kind === "Job")?.uid, uids.get("done"));
    for (const p of [pod("done-worker-0"), pod("fresh-worker-0"), job("done")]) assert.ok(await exists(p), `${p} was changed by a dry run`);
    const table = await cli(["reconcile", "--once", "--dry-run", "--kubeconfig", sa.kubeconfig]);
    assert.match(table.stdout, /^ACTION\s+KIND\s+NAMESPACE\s+NAME\s+JOB\s+REASON/);
    assert.match(table.stdout, /delete\s+Job\s+team-r\s+done\s+TFJob\/done\s+TTL: finished/);
  });

  const setLease = async (holder: string, renewedSecondsAgo: number): Promise<void> => {
    const renew = new Date(Date.now() - renewedSecondsAgo * 1000).toISOString().replace("Z", "000Z");
    const path = "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases/quartermaster-reconciler";
    const spec = { holderIdentity: holder, leaseDurationSeconds: 600, renewTime: renew, acquireTime: renew };
    const current = await cp.api("GET", path);
    const r = current.status === 404
      ? await cp.api("POST", "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases", { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "quartermaster-reconciler" }, spec })
      : await cp.api("PUT", path, { ...current.body, spec });
    assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.body));
  };

  it("another instance holding the lease → the pass is skipped and nothing changes", async () => {
    await setLease("other-instance", 5);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"holder":"other-instance".*another instance holds the lease; pass skipped/);
    assert.ok(await exists(job("done")));
  });

  it("a pass deletes what is finished and due, with the reconciler's own RBAC, and nothing else (taking over an expired lease)", async () => {
    await setLease("killed-instance", 601);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    const summary = r.stdout.split("\n").filter((l) => l.includes('"msg":"reconcile pass"')).map((l) => JSON.parse(l))[0];
    assert.deepEqual(summary.applied, { Pod: 2, Service: 2, Job: 1 });
    assert.equal(summary.servicesCreated, 1);
    const created = (await cp.api("GET", svc("lonely-worker-0"))).body;
    assert.equal(created.spec.clusterIP, "None");
    assert.equal(created.metadata.ownerReferences[0].uid, uids.get("lonely"));
    assert.deepEqual(created.spec.ports, [{ name: "tfjob-port", port: 2222, protocol: "TCP", targetPort: 2222 }]);
    assert.deepEqual(summary.failed, {});
    for (const p of [pod("done-worker-0"), svc("done-worker-0"), pod("fresh-worker-0"), svc("fresh-worker-0"), job("done")]) assert.ok(!(await exists(p)), `${p} still exists`);
    for (const p of [job("fresh"), job("busy"), pod("busy-worker-0"), svc("busy-worker-0")]) assert.ok(await exists(p), `${p} was deleted`);
    const lease = (await cp.api("GET", "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases/quartermaster-reconciler")).body;
    assert.equal(lease.spec.holderIdentity, undefined, "the lease is released after the pass");
    assert.equal(lease.spec.leaseTransitions, 1);
  });

  it("the garbage collector then removes what the deleted job owned (Background propagation)", async () => {
    const deadline = Date.now() + 60_000;
    while ((await exists(pod("done-worker-1"))) || (await exists(svc("done-worker-1")))) {
      assert.ok(Date.now() < deadline, `done-worker-1 not garbage-collected\n${cp.logs()}`);
      await sleep(500);
    }
  });

  it("a second pass on a converged cluster plans nothing", async () => {
    const r = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).actions, []);
    assert.deepEqual(JSON.parse(r.stdout).creates, []);
  });

  it("RBAC: the reconciler cannot create, read secrets, or touch other kinds", async () => {
    const refused = [
      ["POST", `/api/v1/namespaces/${NS}/pods`],
      ["GET", "/api/v1/namespaces/kube-system/secrets"],
      ["GET", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/busy`],
      ["DELETE", "/api/v1/namespaces/kube-system/configmaps/x"],
    ] as const;
    for (const [method, path] of refused) {
      const r = await sa.api(method, path, method === "POST" ? { apiVersion: "v1", kind: "Pod", metadata: { name: "x" }, spec: { containers: [{ name: "x", image: "x" }] } } : undefined);
      assert.equal(r.status, 403, `${method} ${path} → ${r.status}`);
    }
  });
});

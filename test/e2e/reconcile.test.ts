/**
 * End to end: `quartermaster reconcile --once` against a real kube-apiserver (with the garbage collector),
 * running with the reconciler ServiceAccount of manifests/base, so its RBAC is what is exercised.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ControlPlane } from "./harness/controlplane.js";
import { cli, reconcilerCluster } from "./harness/webhook.js";

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
        tfReplicaSpecs: {
          Worker: {
            replicas: 2,
            template: { spec: { containers: [{ name: "tensorflow", image: "tf", ports: [{ name: "tfjob-port", containerPort: 2222 }] }] } },
          },
        },
      },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    uids.set(name, r.body.metadata.uid);
    if (finishedSecondsAgo !== undefined) {
      const done = new Date(Date.now() - finishedSecondsAgo * 1000).toISOString().replace(/\.\d+Z$/, "Z");
      const s = await cp.api(
        "PATCH",
        `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/${name}/status`,
        {
          status: {
            conditions: [
              { type: "Created", status: "True" },
              { type: "Succeeded", status: "True" },
            ],
            completionTime: done,
          },
        },
        { "content-type": "application/merge-patch+json" },
      );
      assert.equal(s.status, 200, JSON.stringify(s.body));
    }
  };

  interface ReplicaOpts {
    withService?: boolean;
    /** No ownerReference (an orphan for the reconciler to adopt), with the operator's labels. */
    orphan?: boolean;
    /** Labels replacing the defaults (e.g. another job's name, for a release). */
    labels?: Record<string, string>;
    /** Bound to this node (no scheduler here) with this many GPUs. */
    node?: string;
    gpus?: number;
  }

  const replica = async (job: string, index: number, phase: string, o: ReplicaOpts = {}): Promise<void> => {
    const name = `${job}-worker-${index}`;
    const owner = o.orphan
      ? undefined
      : [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: job, uid: uids.get(job), controller: true, blockOwnerDeletion: true }];
    const labels = o.labels ?? {
      "training.kubeflow.org/job-name": job,
      "training.kubeflow.org/replica-type": "worker",
      "training.kubeflow.org/replica-index": String(index),
      ...(o.orphan ? { "training.kubeflow.org/operator-name": "tfjob-controller" } : {}),
    };
    const resources = o.gpus ? { limits: { "nvidia.com/gpu": String(o.gpus) } } : undefined;
    const pod = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, labels, ...(owner ? { ownerReferences: owner } : {}) },
      spec: {
        restartPolicy: "Never",
        ...(o.node ? { nodeName: o.node } : {}),
        containers: [{ name: "tensorflow", image: "tf", ...(resources ? { resources } : {}) }],
      },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
    const st = await cp.api("PATCH", `/api/v1/namespaces/${NS}/pods/${name}/status`, { status: { phase } }, { "content-type": "application/merge-patch+json" });
    assert.equal(st.status, 200, JSON.stringify(st.body));
    if (o.withService === false) return;
    const svc = await cp.api("POST", `/api/v1/namespaces/${NS}/services`, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, labels, ownerReferences: owner },
      spec: { clusterIP: "None", selector: labels, ports: [{ name: "tfjob-port", port: 2222 }] },
    });
    assert.equal(svc.status, 201, JSON.stringify(svc.body));
  };

  const gpuNode = async (name: string, gpus: number, renewedIn: number): Promise<void> => {
    assert.equal((await cp.api("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name } })).status, 201);
    const resources = { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": String(gpus) };
    const st = await cp.api(
      "PATCH",
      `/api/v1/nodes/${name}/status`,
      { status: { capacity: resources, allocatable: resources } },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(st.status, 200, JSON.stringify(st.body));
    const renewTime = new Date(Date.now() + renewedIn * 1000).toISOString().replace("Z", "000Z");
    const lease = await cp.api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime },
    });
    assert.equal(lease.status, 201, JSON.stringify(lease.body));
  };

  const passSummary = (stdout: string) =>
    stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"reconcile pass"'))
      .map((l) => JSON.parse(l))[0];
  const ledger = async () => {
    const r = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  };

  /** Present and not being deleted (bound pods wait for a kubelet that never comes: see kubeletFinishes). */
  const exists = async (path: string): Promise<boolean> => {
    const r = await cp.api("GET", path);
    return r.status === 200 && !r.body.metadata.deletionTimestamp;
  };
  /** What a kubelet does for a pod being deleted: confirms it gone (grace 0) once its containers have stopped. */
  const kubeletFinishes = async (): Promise<void> => {
    const pods = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods`)).body.items as Array<{ metadata: { name: string; deletionTimestamp?: string } }>;
    for (const p of pods.filter((x) => x.metadata.deletionTimestamp)) {
      const r = await cp.api("DELETE", pod(p.metadata.name), { gracePeriodSeconds: 0 });
      assert.ok(r.status === 200 || r.status === 404, JSON.stringify(r.body));
    }
  };
  const pod = (n: string) => `/api/v1/namespaces/${NS}/pods/${n}`;
  const svc = (n: string) => `/api/v1/namespaces/${NS}/services/${n}`;
  const job = (n: string) => `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/${n}`;

  before(async () => {
    ({ cp, sa } = await reconcilerCluster(NS));
    // Two GPU nodes (there are no kubelets: the objects are written by hand). gpu-a's kubelet keeps renewing its
    // Lease (renewTime ahead of the clock); gpu-b's stopped five minutes ago, so its devices are unavailable.
    await gpuNode("gpu-a", 8, 3600);
    await gpuNode("gpu-b", 4, -300);

    await tfjob("done", { cleanPodPolicy: "Running", ttlSecondsAfterFinished: 60 }, 120); // finished, TTL passed
    await replica("done", 0, "Running", { node: "gpu-a", gpus: 2 });
    await replica("done", 1, "Succeeded", { node: "gpu-a", gpus: 2 });
    await tfjob("fresh", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 3600 }, 10); // finished, TTL not due
    await replica("fresh", 0, "Succeeded");
    await tfjob("busy", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 }); // not finished
    await replica("busy", 0, "Running", { node: "gpu-a", gpus: 4 });
    await replica("busy", 1, "Running", { node: "gpu-b", gpus: 1 });
    // Running, its pod created with the job's controller reference and no Service: the shape of the operator's pod
    // before the operator creates its Service, so the reconciler makes none (src/reconcile/services.ts).
    await tfjob("lonely", {});
    await replica("lonely", 0, "Running", { withService: false });
    // Controlled by lonely but labelled for another job: released.
    await replica("lonely", 1, "Running", { withService: false, labels: { "training.kubeflow.org/job-name": "someone-else" } });
    await tfjob("adopter", {}); // running, its pods are orphans
    await replica("adopter", 0, "Running", { orphan: true, withService: false, node: "gpu-a", gpus: 1 });
    await replica("adopter", 1, "Pending", { orphan: true, withService: false });
  });

  after(() => cp?.stop());

  it("--dry-run prints the plan and changes nothing", async () => {
    const r = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as {
      actions: Array<{ kind: string; name: string; uid: string }>;
      creates: Array<{ name: string }>;
      claims: Array<{ verb: string; name: string; patch: string }>;
    };
    assert.deepEqual(plan.creates.map((c) => c.name).sort(), ["adopter-worker-0", "adopter-worker-1"]);
    assert.deepEqual(plan.claims.map((c) => `${c.verb} ${c.name}`).sort(), ["adopt adopter-worker-0", "adopt adopter-worker-1", "release lonely-worker-1"]);
    assert.ok(!(await exists(svc("adopter-worker-0"))), "a dry run created a Service");
    assert.deepEqual(plan.actions.map((a) => `${a.kind}/${a.name}`).sort(), [
      "Job/done",
      "Pod/done-worker-0",
      "Pod/fresh-worker-0",
      "Service/done-worker-0",
      "Service/fresh-worker-0",
    ]);
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
    const r =
      current.status === 404
        ? await cp.api("POST", "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases", {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: "quartermaster-reconciler" },
            spec,
          })
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
    const summary = passSummary(r.stdout);
    assert.deepEqual(summary.applied, { "adopt Pod": 2, "release Pod": 1, "create Service": 2, "delete Pod": 2, "delete Service": 2, "delete Job": 1 });
    const created = (await cp.api("GET", svc("adopter-worker-0"))).body;
    assert.equal(created.spec.clusterIP, "None");
    assert.equal(created.metadata.ownerReferences[0].uid, uids.get("adopter"));
    assert.ok(!(await exists(svc("lonely-worker-0"))), "a Service for a pod another writer created with the job's reference");
    assert.deepEqual(created.spec.ports, [{ name: "tfjob-port", port: 2222, protocol: "TCP", targetPort: 2222 }]);
    assert.deepEqual(summary.failed, {});
    for (const p of [pod("done-worker-0"), svc("done-worker-0"), pod("fresh-worker-0"), svc("fresh-worker-0"), job("done")])
      assert.ok(!(await exists(p)), `${p} still exists`);
    for (const p of [job("fresh"), job("busy"), pod("busy-worker-0"), svc("busy-worker-0")]) assert.ok(await exists(p), `${p} was deleted`);
    const lease = (await cp.api("GET", "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases/quartermaster-reconciler")).body;
    assert.equal(lease.spec.holderIdentity, undefined, "the lease is released after the pass");
    assert.equal(lease.spec.leaseTransitions, 1);
  });

  it("orphans that match a job are adopted (its controller, blockOwnerDeletion); a pod whose labels name another job is released", async () => {
    for (const n of ["adopter-worker-0", "adopter-worker-1"]) {
      const refs = (await cp.api("GET", pod(n))).body.metadata.ownerReferences;
      assert.deepEqual(refs, [
        { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "adopter", uid: uids.get("adopter"), controller: true, blockOwnerDeletion: true },
      ]);
      assert.equal((await cp.api("GET", svc(n))).body.metadata.ownerReferences[0].uid, uids.get("adopter"));
    }
    assert.equal((await cp.api("GET", pod("lonely-worker-1"))).body.metadata.ownerReferences, undefined);
  });

  it("Events on the jobs say what the pass did", async () => {
    const events = (await cp.api("GET", `/api/v1/namespaces/${NS}/events`)).body.items as Array<{
      reason: string;
      involvedObject: { name: string; uid: string };
      message: string;
      source: { component: string };
    }>;
    const got = events
      .filter((e) => e.source.component === "quartermaster-reconciler")
      .map((e) => `${e.involvedObject.name} ${e.reason}`)
      .sort();
    assert.deepEqual(got, [
      "adopter AdoptedPod",
      "done DeletedAfterTTL",
      "done SuccessfulDeletePod",
      "done SuccessfulDeleteService",
      "fresh SuccessfulDeletePod",
      "fresh SuccessfulDeleteService",
      "lonely ReleasedPod",
    ]);
    assert.ok(events.find((e) => e.reason === "AdoptedPod")!.message.startsWith("Adopted pods (2) adopter-worker-0, adopter-worker-1"));
  });

  it("the device ledger matches the nodes and pods: allocations by node, namespace and job; the stale node's GPUs unavailable", async () => {
    const l = await ledger();
    assert.deepEqual(l.corrupt, []);
    // At the pass's snapshot: done-worker-0 (2) busy-worker-0 (4) adopter-worker-0 (1) on gpu-a, busy-worker-1 (1) on gpu-b.
    assert.deepEqual(l.totals["nvidia.com/gpu"], { capacity: 12, allocatable: 12, unavailable: 4, allocated: 8, free: 1 });
    const byNode = Object.fromEntries(l.nodes.map((n: any) => [n.name, { ...n.resources["nvidia.com/gpu"], stale: n.stale }]));
    assert.deepEqual(byNode["gpu-a"], { capacity: 8, allocatable: 8, allocated: 7, free: 1, overCommitted: false, inactive: false, stale: false });
    assert.deepEqual(byNode["gpu-b"], { capacity: 4, allocatable: 4, allocated: 1, free: 0, overCommitted: false, inactive: false, stale: true });
    assert.deepEqual(l.namespaces[NS]["nvidia.com/gpu"].allocated, 8);
    assert.deepEqual(Object.fromEntries(Object.entries(l.jobs).map(([k, v]: [string, any]) => [k, v["nvidia.com/gpu"].allocated])), {
      [`${NS}/adopter`]: 1,
      [`${NS}/busy`]: 5,
      [`${NS}/done`]: 2,
    });
    const table = await cli(["ledger", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.match(table.stdout, /gpu-b\s+nvidia.com\/gpu\s+4\s+4\s+1\s+0\s+1\s+stale/);
  });

  it("the garbage collector then removes what the deleted job owned (Background propagation)", async () => {
    const deadline = Date.now() + 60_000;
    while ((await exists(pod("done-worker-1"))) || (await exists(svc("done-worker-1")))) {
      assert.ok(Date.now() < deadline, `done-worker-1 not garbage-collected\n${cp.logs()}`);
      await sleep(500);
    }
  });

  it("the apiserver records the reconciler's adoption (managedFields), so a lost Service of an adopted pod is made again; still none for lonely", async () => {
    const uid = uids.get("adopter")!;
    const managed = (await cp.api("GET", pod("adopter-worker-1"))).body.metadata.managedFields as Array<{ manager: string; fieldsV1?: any }>;
    const owners = managed.filter((m) => m.fieldsV1?.["f:metadata"]?.["f:ownerReferences"]?.[`k:{"uid":"${uid}"}`]).map((m) => m.manager);
    assert.deepEqual(owners, ["quartermaster-reconciler"]);
    const gone = await cp.api("DELETE", svc("adopter-worker-1"));
    assert.equal(gone.status, 200, JSON.stringify(gone.body));
    const dry = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(
      JSON.parse(dry.stdout).creates.map((c: { name: string }) => c.name),
      ["adopter-worker-1"],
    );
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(passSummary(r.stdout).applied["create Service"], 1);
    assert.ok(await exists(svc("adopter-worker-1")), "the adopted pod's Service was not made again");
    assert.ok(!(await exists(svc("lonely-worker-0"))));
  });

  it("the garbage collector removes adopted pods and their Services when their job is deleted", async () => {
    const r = await cp.api("DELETE", job("adopter"), { propagationPolicy: "Background" });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const deadline = Date.now() + 60_000;
    for (const p of [pod("adopter-worker-0"), pod("adopter-worker-1"), svc("adopter-worker-0")]) {
      while (await exists(p)) {
        assert.ok(Date.now() < deadline, `${p} not garbage-collected\n${cp.logs()}`);
        await sleep(500);
      }
    }
  });

  it("a second pass on a converged cluster plans nothing and writes nothing but the ledger", async () => {
    await kubeletFinishes();
    const dry = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(dry.code, 0, dry.stderr);
    const plan = JSON.parse(dry.stdout);
    assert.deepEqual([plan.claims, plan.actions, plan.creates], [[], [], []]);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    const summary = passSummary(r.stdout);
    assert.deepEqual([summary.planned, summary.applied, summary.failed, summary.events], [{}, {}, {}, 0]);
    assert.deepEqual(summary.ledger.corrupt, []);
    const l = await ledger();
    const holders = l.nodes.flatMap((n: any) => n.pods.map((p: any) => p.name)).sort();
    assert.deepEqual(holders, ["busy-worker-0", "busy-worker-1"]);
    assert.equal(l.totals["nvidia.com/gpu"].allocated, 5);
  });

  it("a ledger shard corrupted by hand is reported and rebuilt by the next pass", async () => {
    const path = "/api/v1/namespaces/quartermaster/configmaps/quartermaster-ledger-0";
    const cm = (await cp.api("GET", path)).body;
    cm.data["shard.json"] = cm.data["shard.json"].replace('"allocatable":8', '"allocatable":80');
    assert.equal((await cp.api("PUT", path, cm)).status, 200);
    const bad = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /quartermaster-ledger-0 is checksum mismatch/);
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /quartermaster-ledger-0 is checksum mismatch: rebuilt from cluster state/);
    assert.deepEqual((await ledger()).corrupt, []);
  });

  // Creating pods and patching jobs (and their status) are the job controller's, for kinds without an
  // operator (test/e2e/job-controller.test.ts); replacing a job or creating other workloads stays refused.
  it("RBAC: the reconciler cannot create other workloads, read secrets, replace jobs, or touch other kinds", async () => {
    const refused = [
      ["POST", `/apis/apps/v1/namespaces/${NS}/deployments`],
      ["GET", "/api/v1/namespaces/kube-system/secrets"],
      ["DELETE", "/api/v1/nodes/gpu-a"],
      ["PUT", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/busy`],
      ["DELETE", "/api/v1/namespaces/kube-system/configmaps/x"],
    ] as const;
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "x" },
      spec: { selector: { matchLabels: { a: "b" } }, template: { metadata: { labels: { a: "b" } }, spec: { containers: [{ name: "x", image: "x" }] } } },
    };
    for (const [method, path] of refused) {
      const r = await sa.api(
        method,
        path,
        method === "POST" ? deployment : method === "PUT" ? { apiVersion: "kubeflow.org/v1", kind: "TFJob", metadata: { name: "busy" }, spec: {} } : undefined,
      );
      assert.equal(r.status, 403, `${method} ${path} → ${r.status}`);
    }
  });
});

/**
 * End to end, the reconciler safe by default (issue 15), against a real kube-apiserver with the garbage
 * collector, as the reconciler's own ServiceAccount: the scope (a namespace without the opt-in label and
 * kube-system untouched), no TTL unless the job sets one, caffe2-operator's pods keeping one owner over five
 * passes, a managedBy job untouched, a well-checksummed shard of the wrong shape rebuilt, staleness from the
 * Ready heartbeat of a node without a Lease, and the deletion
 * budget's order (GPU holders first, the Service parted from its pod deleted by the next pass).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, reconcilerCluster } from "./harness/webhook.js";

const IN = "team-in";
const OUT = "team-out";
const DONE_AGO = 3600;

describe("reconciler safe by default, against a real kube-apiserver", () => {
  let cp: ControlPlane;
  let sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  let budgetPolicy: string;
  const uids = new Map<string, string>();

  const merge = { "content-type": "application/merge-patch+json" };
  const iso = (msAgo: number) => new Date(Date.now() - msAgo).toISOString().replace(/\.\d+Z$/, "Z");

  /** A TFJob, finished an hour ago unless `running`. */
  const tfjob = async (ns: string, name: string, runPolicy: Record<string, unknown>, running = false): Promise<string> => {
    const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${ns}/tfjobs`, {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: { runPolicy, tfReplicaSpecs: { Worker: { replicas: 1, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    uids.set(`${ns}/${name}`, r.body.metadata.uid);
    if (!running) {
      const s = await cp.api(
        "PATCH",
        `/apis/kubeflow.org/v1/namespaces/${ns}/tfjobs/${name}/status`,
        { status: { conditions: [{ type: "Succeeded", status: "True" }], completionTime: iso(DONE_AGO * 1000) } },
        merge,
      );
      assert.equal(s.status, 200, JSON.stringify(s.body));
    }
    return r.body.metadata.uid;
  };

  /** A pod (and, unless `service` is false, its Service) controlled by a TFJob, with the operator's labels. */
  const tfPod = async (ns: string, job: string, name: string, phase: string, o: { service?: boolean; node?: string; gpus?: number } = {}): Promise<void> => {
    const owner = [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: job, uid: uids.get(`${ns}/${job}`), controller: true, blockOwnerDeletion: true }];
    const labels = {
      "training.kubeflow.org/job-name": job,
      "training.kubeflow.org/operator-name": "tfjob-controller",
      "training.kubeflow.org/replica-type": "worker",
      "training.kubeflow.org/replica-index": "0",
    };
    const resources = o.gpus ? { limits: { "nvidia.com/gpu": String(o.gpus) } } : undefined;
    const p = await cp.api("POST", `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, labels, ownerReferences: owner },
      spec: {
        restartPolicy: "Never",
        ...(o.node ? { nodeName: o.node } : {}),
        containers: [{ name: "tensorflow", image: "tf", ...(resources ? { resources } : {}) }],
      },
    });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    assert.equal((await cp.api("PATCH", `/api/v1/namespaces/${ns}/pods/${name}/status`, { status: { phase } }, merge)).status, 200);
    if (o.service === false) return;
    const s = await cp.api("POST", `/api/v1/namespaces/${ns}/services`, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, labels, ownerReferences: owner },
      spec: { clusterIP: "None", selector: labels },
    });
    assert.equal(s.status, 201, JSON.stringify(s.body));
  };

  const exists = async (path: string): Promise<boolean> => {
    const r = await cp.api("GET", path);
    return r.status === 200 && !r.body.metadata.deletionTimestamp;
  };
  const pass = async (extra: string[] = []) => {
    const r = await cli(["reconcile", "--once", "--kubeconfig", sa.kubeconfig, ...extra]);
    assert.equal(r.code, 0, r.stderr);
    const summary = r.stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"reconcile pass"'))
      .map((l) => JSON.parse(l))[0];
    assert.ok(summary, r.stdout);
    return { ...r, summary };
  };
  const dryRun = async () => {
    const r = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as {
      skipped: Array<{ kind: string; namespace: string; name: string; why: string }>;
      actions: Array<{ kind: string; namespace: string; name: string }>;
      claims: unknown[];
      creates: unknown[];
    };
  };

  before(async () => {
    ({ cp, sa } = await reconcilerCluster(IN));
    await createNamespace(cp, OUT); // no opt-in label
    const dir = mkdtempSync(join(tmpdir(), "qm-e2e-safety-"));
    budgetPolicy = join(dir, "policy.yaml");
    writeFileSync(budgetPolicy, "reconciler:\n  maxDeletionsPerPass: 3\n  concurrency: 1\n");

    // The same finished job (All, TTL 0: everything due) in the opted-in namespace, one without the label, and kube-system.
    for (const ns of [IN, OUT, "kube-system"]) {
      await tfjob(ns, "due", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 });
      await tfPod(ns, "due", "due-worker-0", "Running");
    }
    // Finished an hour ago, no TTL, no cleanPodPolicy: upstream keeps the job and its pods forever.
    await tfjob(IN, "keep", {});
    await tfPod(IN, "keep", "keep-worker-0", "Running");
    // Managed by MultiKueue: finished, All, TTL 0, and an orphan it would adopt — all left alone.
    await tfjob(IN, "mk", { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0, managedBy: "kueue.x-k8s.io/multikueue" });
    await tfPod(IN, "mk", "mk-worker-0", "Running");
    const orphan = await cp.api("POST", `/api/v1/namespaces/${IN}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "mk-worker-1", labels: { "training.kubeflow.org/job-name": "mk", "training.kubeflow.org/operator-name": "tfjob-controller" } },
      spec: { containers: [{ name: "tensorflow", image: "tf" }] },
    });
    assert.equal(orphan.status, 201, JSON.stringify(orphan.body));

    // A Caffe2Job and its two worker pods exactly as caffe2-operator makes them (genLabels, controller ref).
    const c2 = await cp.api("POST", `/apis/kubeflow.org/v1alpha1/namespaces/${IN}/caffe2jobs`, {
      apiVersion: "kubeflow.org/v1alpha1",
      kind: "Caffe2Job",
      metadata: { name: "resnet" },
      spec: {
        RuntimeID: "run-42",
        backendSpecs: { backendType: "none" },
        replicaSpecs: { replicas: 2, template: { spec: { containers: [{ name: "caffe2", image: "caffe2" }] } } },
      },
    });
    assert.equal(c2.status, 201, JSON.stringify(c2.body));
    uids.set(`${IN}/resnet`, c2.body.metadata.uid);
    for (const i of [0, 1]) {
      const p = await cp.api("POST", `/api/v1/namespaces/${IN}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: `resnet-worker-${i}`,
          labels: {
            group_name: "kubeflow.org",
            caffe2_job_key: `${IN}-resnet`,
            runtime_id: "run-42",
            caffe2_replica_type: "worker",
            caffe2_replica_index: String(i),
          },
          ownerReferences: [
            { apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "resnet", uid: c2.body.metadata.uid, controller: true, blockOwnerDeletion: true },
          ],
        },
        spec: { containers: [{ name: "caffe2", image: "caffe2" }] },
      });
      assert.equal(p.status, 201, JSON.stringify(p.body));
    }
  });

  after(() => cp?.stop());

  it("--dry-run lists what it skips and why: the namespace without the label, kube-system, the managedBy job", async () => {
    const plan = await dryRun();
    const why = (ns: string, name: string) => plan.skipped.find((s) => s.namespace === ns && s.name === name)?.why;
    assert.match(why(OUT, "due") ?? "", /namespace team-out has not opted in \(label quartermaster.dev\/enabled="true"\)/);
    assert.match(why("kube-system", "due") ?? "", /namespace kube-system is protected: Quartermaster never acts in it/);
    assert.match(why(IN, "mk") ?? "", /spec.runPolicy.managedBy is "kueue.x-k8s.io\/multikueue": another controller manages this job/);
    assert.deepEqual(plan.actions.map((a) => `${a.namespace}/${a.kind}/${a.name}`).sort(), [
      `${IN}/Job/due`,
      `${IN}/Pod/due-worker-0`,
      `${IN}/Service/due-worker-0`,
    ]);
    const table = await cli(["reconcile", "--once", "--dry-run", "--kubeconfig", sa.kubeconfig]);
    assert.match(table.stdout, /\nSKIPPED .*\nKIND\s+NAMESPACE\s+NAME\s+WHY\n/);
    assert.match(table.stdout, /TFJob\s+kube-system\s+due\s+namespace kube-system is protected/);
  });

  it("a pass acts in the opted-in namespace only: the namespace without the label and kube-system are untouched", async () => {
    const { summary } = await pass();
    assert.deepEqual(summary.failed, {});
    // The Caffe2Job (Quartermaster is its controller by default: caffe2-operator is archived) gets the headless
    // Services of its two existing pods and its status; no pod is created (its pods hold both replica slots).
    assert.deepEqual(summary.applied, { "delete Pod": 1, "delete Service": 1, "delete Job": 1, "create Service": 2, "patch Caffe2Job/status": 1 });
    assert.ok(!(await exists(`/apis/kubeflow.org/v1/namespaces/${IN}/tfjobs/due`)));
    for (const ns of [OUT, "kube-system"]) {
      for (const path of [
        `/apis/kubeflow.org/v1/namespaces/${ns}/tfjobs/due`,
        `/api/v1/namespaces/${ns}/pods/due-worker-0`,
        `/api/v1/namespaces/${ns}/services/due-worker-0`,
      ]) {
        assert.ok(await exists(path), `${path} was touched`);
      }
      const events = (await cp.api("GET", `/api/v1/namespaces/${ns}/events`)).body.items as Array<{ source?: { component?: string } }>;
      assert.deepEqual(
        events.filter((e) => e.source?.component === "quartermaster-reconciler"),
        [],
        `Events written in ${ns}`,
      );
    }
  });

  it("a finished job without a TTL (and without cleanPodPolicy) survives with its pod and Service", async () => {
    for (const path of [
      `/apis/kubeflow.org/v1/namespaces/${IN}/tfjobs/keep`,
      `/api/v1/namespaces/${IN}/pods/keep-worker-0`,
      `/api/v1/namespaces/${IN}/services/keep-worker-0`,
    ]) {
      assert.ok(await exists(path), `${path} deleted`);
    }
  });

  it("a managedBy job is untouched: not deleted, its pod not deleted, the orphan not adopted", async () => {
    assert.ok(await exists(`/apis/kubeflow.org/v1/namespaces/${IN}/tfjobs/mk`));
    assert.ok(await exists(`/api/v1/namespaces/${IN}/pods/mk-worker-0`));
    assert.equal((await cp.api("GET", `/api/v1/namespaces/${IN}/pods/mk-worker-1`)).body.metadata.ownerReferences, undefined);
  });

  it("a Caffe2Job's pods keep their one owner across 5 passes (caffe2-operator's labels, no release, no Service)", async () => {
    const owners = async () => {
      const out: string[] = [];
      for (const i of [0, 1]) {
        const p = (await cp.api("GET", `/api/v1/namespaces/${IN}/pods/resnet-worker-${i}`)).body;
        out.push(JSON.stringify(p.metadata.ownerReferences));
      }
      return out;
    };
    const want = await owners();
    assert.ok(want.every((o) => o.includes(uids.get(`${IN}/resnet`)!)));
    for (let n = 1; n <= 5; n++) {
      const { summary } = await pass();
      assert.equal(summary.planned["release Pod"], undefined, `pass ${n} released a Caffe2 pod`);
      assert.equal(summary.planned["adopt Pod"], undefined, `pass ${n} adopted a pod`);
      assert.deepEqual(await owners(), want, `pass ${n}`);
    }
    for (const i of [0, 1])
      assert.equal(
        (await cp.api("GET", `/api/v1/namespaces/${IN}/services/resnet-worker-${i}`)).status,
        404,
        "caffe2-operator creates no Services; neither does Quartermaster",
      );
  });

  it("a ledger shard whose checksums are right but whose shape is wrong is reported and rebuilt; the pass goes on", async () => {
    const sha = (t: string) => createHash("sha256").update(t).digest("hex");
    const shardPath = "/api/v1/namespaces/quartermaster/configmaps/quartermaster-ledger-0";
    const indexPath = "/api/v1/namespaces/quartermaster/configmaps/quartermaster-ledger";
    const shard = (await cp.api("GET", shardPath)).body;
    shard.data["shard.json"] = JSON.stringify({ ...JSON.parse(shard.data["shard.json"]), nodes: "not a list" });
    shard.data.sha256 = sha(shard.data["shard.json"]);
    assert.equal((await cp.api("PUT", shardPath, shard)).status, 200);
    const index = (await cp.api("GET", indexPath)).body;
    const idx = JSON.parse(index.data["index.json"]);
    idx.shards.find((s: { name: string }) => s.name === "quartermaster-ledger-0").sha256 = shard.data.sha256;
    index.data["index.json"] = JSON.stringify(idx);
    index.data.sha256 = sha(index.data["index.json"]);
    assert.equal((await cp.api("PUT", indexPath, index)).status, 200);

    const r = await pass();
    assert.match(r.stdout, /quartermaster-ledger-0 is of the wrong shape \(nodes: must be array\): rebuilt from cluster state/);
    assert.deepEqual(r.summary.ledger.corrupt, ["quartermaster-ledger-0"]);
    assert.deepEqual(r.summary.failed, {});
    const l = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.equal(l.code, 0, l.stderr);
    assert.deepEqual(JSON.parse(l.stdout).corrupt, []);
  });

  it("staleness: a node without a Lease is stale only when its Ready heartbeat is older than the grace period", async () => {
    for (const [name, agoSeconds] of [
      ["hb-fresh", 2],
      ["hb-old", 600],
    ] as const) {
      assert.equal((await cp.api("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name } })).status, 201);
      const res = { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "4" };
      const ready = {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "kubelet is posting ready status",
        lastHeartbeatTime: iso(agoSeconds * 1000),
        lastTransitionTime: iso(3600_000),
      };
      const st = await cp.api("PATCH", `/api/v1/nodes/${name}/status`, { status: { capacity: res, allocatable: res, conditions: [ready] } }, merge);
      assert.equal(st.status, 200, JSON.stringify(st.body));
    }
    await pass();
    const l = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.equal(l.code, 0, l.stderr);
    const nodes = Object.fromEntries(
      (JSON.parse(l.stdout).nodes as Array<{ name: string; stale: boolean; staleReason?: string; resources: Record<string, { free: number }> }>).map((n) => [
        n.name,
        n,
      ]),
    );
    assert.equal(nodes["hb-fresh"]!.stale, false, JSON.stringify(nodes["hb-fresh"]));
    assert.equal(nodes["hb-fresh"]!.resources["nvidia.com/gpu"]!.free, 4);
    assert.equal(nodes["hb-old"]!.stale, true);
    assert.match(nodes["hb-old"]!.staleReason!, /^no Lease in kube-node-lease; last Ready heartbeat at \d{4}-\d\d-\d\dT[\d:.]+Z \(grace 40s\)$/);
  });

  it("the deletion budget: GPU-holding pods first, then round-robin; a Service parted from its pod goes in the next pass", async () => {
    // A GPU node with a fresh Lease; team-in gets a finished job with three completed pods (no GPUs held),
    // team-zz (opted in, after team-in by name: round-robin alone would start with team-in) a finished job whose
    // pod holds GPUs. Budget 3 a pass.
    assert.equal((await cp.api("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: "gpu-1" } })).status, 201);
    const res = { cpu: "64", memory: "512Gi", pods: "110", "nvidia.com/gpu": "8" };
    assert.equal((await cp.api("PATCH", "/api/v1/nodes/gpu-1/status", { status: { capacity: res, allocatable: res } }, merge)).status, 200);
    await createNamespace(cp, "team-zz", { "quartermaster.dev/enabled": "true" });
    await tfjob(IN, "bulk", { cleanPodPolicy: "All" });
    for (const i of [0, 1, 2]) await tfPod(IN, "bulk", `bulk-worker-${i}`, "Succeeded");
    await tfjob("team-zz", "trainer", { cleanPodPolicy: "Running" });
    await tfPod("team-zz", "trainer", "trainer-worker-0", "Running", { node: "gpu-1", gpus: 4 });

    const first = await pass(["--policy", budgetPolicy]);
    const deleted1 = first.stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"reconcile: delete"'))
      .map((l) => JSON.parse(l))
      .map((x) => `${x.namespace}/${x.action}/${x.name}`);
    // concurrency 1: applied in plan order.
    assert.deepEqual(deleted1, ["team-zz/delete Pod/trainer-worker-0", "team-zz/delete Service/trainer-worker-0", `${IN}/delete Pod/bulk-worker-0`]);
    assert.ok(await exists(`/api/v1/namespaces/${IN}/services/bulk-worker-0`), "the Service parted from its pod by the budget is still there");
    // The pod is gone once its (absent) kubelet confirms: do what a kubelet does.
    await cp.api("DELETE", `/api/v1/namespaces/team-zz/pods/trainer-worker-0`, { gracePeriodSeconds: 0 });
    await cp.api("DELETE", `/api/v1/namespaces/${IN}/pods/bulk-worker-0`, { gracePeriodSeconds: 0 });

    const second = await pass(["--policy", budgetPolicy]);
    const deleted2 = second.stdout
      .split("\n")
      .filter((l) => l.includes('"msg":"reconcile: delete"'))
      .map((l) => JSON.parse(l))
      .map((x) => `${x.namespace}/${x.action}/${x.name}`);
    assert.deepEqual(deleted2, [`${IN}/delete Service/bulk-worker-0`, `${IN}/delete Pod/bulk-worker-1`, `${IN}/delete Service/bulk-worker-1`]);
    assert.ok(!(await exists(`/api/v1/namespaces/${IN}/services/bulk-worker-0`)));
  });
});

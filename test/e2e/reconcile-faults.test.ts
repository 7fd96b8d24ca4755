/**
 * Faults in the reconciler, against a real kube-apiserver (with the garbage collector): passes killed at
 * random points, again and again, must never delete an unfinished job or anything outside Quartermaster's
 * remit, and the next whole pass must converge; two reconcilers started together must not run passes at once.
 * (A ledger shard corrupted by hand is in reconcile.test.ts.)
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { ControlPlane } from "./harness/controlplane.js";
import { cli, reconcilerCluster, spawnCli } from "./harness/webhook.js";

const NS = "team-f";
const FINISHED = 30;
const RUNNING = 6;
const KILLS = 20;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LEASE = "/apis/coordination.k8s.io/v1/namespaces/quartermaster/leases/quartermaster-reconciler";

describe("reconciler under faults", () => {
  let cp: ControlPlane;
  let sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  /** Tiny passes while killing (so work is left for every kill); big ones to converge after. */
  let policyFile: string;
  let convergeFile: string;
  const uids = new Map<string, string>();

  const tfjob = async (name: string, finished: boolean): Promise<void> => {
    const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs`, {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: {
        runPolicy: { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 },
        tfReplicaSpecs: {
          Worker: {
            replicas: 3,
            template: { spec: { containers: [{ name: "tensorflow", image: "tf", ports: [{ name: "tfjob-port", containerPort: 2222 }] }] } },
          },
        },
      },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    uids.set(name, r.body.metadata.uid);
    if (finished) {
      const done = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z");
      const s = await cp.api(
        "PATCH",
        `/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/${name}/status`,
        { status: { conditions: [{ type: "Succeeded", status: "True" }], completionTime: done } },
        { "content-type": "application/merge-patch+json" },
      );
      assert.equal(s.status, 200, JSON.stringify(s.body));
    }
    for (let i = 0; i < 3; i++) {
      const pod = `${name}-worker-${i}`;
      const labels = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": String(i),
      };
      // Every third pod of a finished job an orphan: the passes adopt them while being killed. A running job's
      // pods are all orphans: pods created with the job's reference are the operator's, and so would be their
      // Services (src/reconcile/services.ts); adopted, the passes make the Services themselves.
      const owner =
        i === 2 || !finished
          ? {}
          : { ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name, uid: uids.get(name), controller: true, blockOwnerDeletion: true }] };
      const p = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: pod, labels, ...owner },
        spec: { restartPolicy: "Never", containers: [{ name: "tensorflow", image: "tf" }] },
      });
      assert.equal(p.status, 201, JSON.stringify(p.body));
    }
  };

  /** Objects that are none of Quartermaster's business: they must outlive every pass. */
  const outsiders = [
    {
      path: `/api/v1/namespaces/${NS}/pods/bystander`,
      body: { apiVersion: "v1", kind: "Pod", metadata: { name: "bystander" }, spec: { containers: [{ name: "c", image: "x" }] } },
    },
    {
      path: `/api/v1/namespaces/${NS}/services/bystander`,
      body: { apiVersion: "v1", kind: "Service", metadata: { name: "bystander" }, spec: { ports: [{ port: 80 }] } },
    },
    { path: `/api/v1/namespaces/${NS}/configmaps/bystander`, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "bystander" }, data: { a: "b" } } },
    // Carries a finished job's label but is controlled by someone else: never adopted, never deleted.
    {
      path: `/api/v1/namespaces/${NS}/pods/foreign`,
      body: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: "foreign",
          labels: { "training.kubeflow.org/job-name": "done-0", "training.kubeflow.org/operator-name": "tfjob-controller" },
          ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "bystander", uid: "", controller: true }],
        },
        spec: { containers: [{ name: "c", image: "x" }] },
      },
    },
  ];

  const present = async (path: string): Promise<boolean> => {
    const r = await cp.api("GET", path);
    return r.status === 200 && !r.body.metadata.deletionTimestamp;
  };

  /** The invariant after any pass, whole or killed. */
  const assertNothingWrongDeleted = async (when: string): Promise<void> => {
    for (let j = 0; j < RUNNING; j++) {
      assert.ok(await present(`/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/busy-${j}`), `${when}: unfinished job busy-${j} deleted`);
      for (let i = 0; i < 3; i++)
        assert.ok(await present(`/api/v1/namespaces/${NS}/pods/busy-${j}-worker-${i}`), `${when}: pod of unfinished busy-${j} deleted`);
    }
    for (const o of outsiders) assert.ok(await present(o.path), `${when}: ${o.path} deleted`);
  };

  before(async () => {
    ({ cp, sa } = await reconcilerCluster(NS));
    const cm = await cp.api("POST", `/api/v1/namespaces/${NS}/configmaps`, outsiders[2]!.body);
    assert.equal(cm.status, 201);
    (outsiders[3]!.body.metadata.ownerReferences![0] as { uid: string }).uid = cm.body.metadata.uid;
    for (const o of outsiders)
      if (o !== outsiders[2]) assert.equal((await cp.api("POST", o.path.slice(0, o.path.lastIndexOf("/")), o.body)).status, 201, o.path);
    for (let j = 0; j < FINISHED; j++) await tfjob(`done-${j}`, true);
    for (let j = 0; j < RUNNING; j++) await tfjob(`busy-${j}`, false);
    // 120 deletions at 3 a pass outlast the 20 kills, so every kill lands on a cluster with work left.
    const dir = mkdtempSync(join(tmpdir(), "qm-faults-"));
    policyFile = join(dir, "policy.yaml");
    writeFileSync(policyFile, "reconciler:\n  maxDeletionsPerPass: 3\n  concurrency: 1\n");
    convergeFile = join(dir, "converge.yaml");
    writeFileSync(convergeFile, "reconciler:\n  maxDeletionsPerPass: 200\n");
  });

  after(() => cp?.stop());

  it(`${KILLS} passes killed (SIGKILL) at random points: nothing unfinished or outside the remit is ever deleted`, async (t) => {
    const killedDuring: string[] = [];
    // How long a pass takes from its start to its first action, as last seen (a fixed window let passes on a
    // fast machine finish before most of the random kills).
    let toFirstActionMs = 1500;
    for (let k = 0; k < KILLS; k++) {
      const started = Date.now();
      const run = spawnCli(["reconcile", "--once", "--policy", policyFile, "--kubeconfig", sa.kubeconfig]);
      // Half the kills at a random moment from the start to a little past the first action; half just after
      // the pass has begun acting.
      if (k % 2 === 0) await sleep(Math.random() * (toFirstActionMs + 300));
      else {
        const deadline = Date.now() + 15_000;
        while (!/"msg":"reconcile: (adopt|release|create|delete)"/.test(run.stdout) && Date.now() < deadline && run.child.exitCode === null) await sleep(20);
        if (run.child.exitCode === null) toFirstActionMs = Date.now() - started;
        await sleep(Math.random() * 30);
      }
      run.child.kill("SIGKILL");
      const r = await run.done;
      const acted = (r.stdout.match(/"msg":"reconcile: (adopt|release|create|delete)"/g) ?? []).length;
      killedDuring.push(r.signal === "SIGKILL" ? `killed after ${acted} actions` : `finished (exit ${r.code})`);
      await assertNothingWrongDeleted(`after kill ${k + 1}`);
      // The killed pass holds the Lease for passLeaseSeconds; taking over an expired Lease is tested in
      // reconcile.test.ts, so here it is simply removed to keep the test short.
      await cp.api("DELETE", LEASE);
    }
    t.diagnostic(killedDuring.join("; "));
    const killed = killedDuring.filter((d) => d.startsWith("killed")).length;
    const midPass = killedDuring.filter((d) => /killed after [1-9]/.test(d)).length;
    assert.ok(killed >= (KILLS * 2) / 5 && midPass >= 3, `too few kills landed in a pass: ${killedDuring.join("; ")}`);
  });

  it("then whole passes converge: every finished job and its objects gone, the rest untouched, the ledger sound", async () => {
    let converged = false;
    for (let pass = 0; pass < 12 && !converged; pass++) {
      const r = await cli(["reconcile", "--once", "--policy", convergeFile, "--kubeconfig", sa.kubeconfig]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const summary = JSON.parse(r.stdout.split("\n").find((l) => l.includes('"msg":"reconcile pass"'))!);
      assert.deepEqual(summary.failed, {}, r.stdout);
      converged = Object.keys(summary.planned).length === 0;
      await assertNothingWrongDeleted(`after whole pass ${pass + 1}`);
    }
    assert.ok(converged, "no converged pass within 12");
    for (let j = 0; j < FINISHED; j++) {
      assert.ok(!(await present(`/apis/kubeflow.org/v1/namespaces/${NS}/tfjobs/done-${j}`)), `done-${j} still there`);
      for (let i = 0; i < 3; i++) assert.ok(!(await present(`/api/v1/namespaces/${NS}/pods/done-${j}-worker-${i}`)), `done-${j}-worker-${i} still there`);
    }
    for (let j = 0; j < RUNNING; j++) {
      for (let i = 0; i < 3; i++) {
        const pod = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods/busy-${j}-worker-${i}`)).body;
        assert.equal(pod.metadata.ownerReferences?.[0]?.uid, uids.get(`busy-${j}`), `busy-${j}-worker-${i} not owned by its job`);
        assert.ok(await present(`/api/v1/namespaces/${NS}/services/busy-${j}-worker-${i}`), `no Service for busy-${j}-worker-${i}`);
      }
    }
    const ledger = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", sa.kubeconfig]);
    assert.equal(ledger.code, 0, ledger.stderr);
    assert.deepEqual(JSON.parse(ledger.stdout).corrupt, []);
  });

  it("two reconcilers started at once never run passes at the same time", async () => {
    for (let round = 0; round < 3; round++) {
      const runs = [0, 1].map(() => spawnCli(["reconcile", "--once", "--policy", policyFile, "--kubeconfig", sa.kubeconfig]));
      const results = await Promise.all(runs.map((r) => r.done));
      const passes: Array<[number, number]> = [];
      let skipped = 0;
      for (const r of results) {
        assert.equal(r.code, 0, r.stderr + r.stdout);
        const line = r.stdout.split("\n").find((l) => l.includes('"msg":"reconcile pass"'));
        if (line) {
          const s = JSON.parse(line) as { time: string; durationMs: number };
          const end = Date.parse(s.time);
          passes.push([end - s.durationMs, end]);
        } else {
          assert.match(r.stdout, /another instance holds the lease; pass skipped/);
          skipped++;
        }
      }
      assert.equal(passes.length + skipped, 2);
      assert.ok(passes.length >= 1, "neither reconciler ran a pass");
      if (passes.length === 2) {
        const [[a0, a1], [b0, b1]] = passes as [[number, number], [number, number]];
        assert.ok(a1 <= b0 || b1 <= a0, `passes overlapped: ${JSON.stringify(passes)}`);
      }
    }
  });
});

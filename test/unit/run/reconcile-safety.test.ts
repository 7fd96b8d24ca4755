/**
 * The reconciler safe by default (issue 15): scope, managedBy, per-kind label schemes over consecutive passes,
 * the deletion budget across passes, and a ledger shard of the wrong shape, at the planner and at the pass.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { runPass } from "../../../src/run/pass.js";
import { silentLogger } from "../../../src/log.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import { LEDGER_INDEX_NAME, sha256, shardName } from "../../../src/ledger/shards.js";
import { planPass, type Plan } from "../../../src/reconcile/plan.js";
import { planTable } from "../../../src/reconcile/table.js";
import type { NamespaceInfo } from "../../../src/core/scope.js";
import { fakeCluster, gpuPod, node, nodeLease, OPTED_IN, SCOPE, snapshotOf, type FakeCluster } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const NOW = new Date("2026-11-22T12:00:00Z");
const policy = defaultPolicy();
const TF = kindOf("TFJob");
const C2 = kindOf("Caffe2Job");

/** A finished TFJob (All, TTL 0, so every pass would delete all it can) with one running GPU pod and its Service. */
function finishedTf(
  name: string,
  namespace: string,
  runPolicy: Record<string, unknown> = { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 },
): { job: KubeObject; pod: KubeObject; service: KubeObject } {
  const j = structuredClone(job("TFJob", name, namespace, { Worker: 1 }, { runPolicy })) as Record<string, any>;
  j.metadata.uid = `uid-${namespace}-${name}`;
  j.status = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: new Date(NOW.getTime() - 3600_000).toISOString() };
  const owner = [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name, uid: j.metadata.uid, controller: true, blockOwnerDeletion: true }];
  const labels = {
    "training.kubeflow.org/job-name": name,
    "training.kubeflow.org/operator-name": "tfjob-controller",
    "training.kubeflow.org/replica-type": "worker",
    "training.kubeflow.org/replica-index": "0",
  };
  const pod = gpuPod(`${name}-worker-0`, { namespace, node: "gpu-1", uid: `uid-${namespace}-${name}-pod` }) as Record<string, any>;
  pod.metadata.labels = labels;
  pod.metadata.ownerReferences = owner;
  const service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: `${name}-worker-0`, namespace, uid: `uid-${namespace}-${name}-svc`, labels, ownerReferences: owner },
  };
  return { job: j, pod, service };
}

const touched = (plan: Plan): string[] => [
  ...plan.claims.map((c) => `${c.verb} ${c.namespace}/${c.name}`),
  ...plan.creates.map((c) => `create ${c.namespace}/${c.name}`),
  ...[...plan.actions, ...plan.deferred].map((a) => `delete ${a.kind} ${a.namespace}/${a.name}`),
];

describe("scope: writes only in namespaces the webhooks serve", () => {
  const ns = (name: string, labels: Record<string, string> = {}): NamespaceInfo => ({ name, labels });
  const namespaces = [
    ns("team-a", OPTED_IN),
    ns("team-b"),
    ns("team-c", { "quartermaster.dev/enabled": "false" }),
    ns("kube-system", OPTED_IN),
    ns("quartermaster", OPTED_IN),
    ns("kube-public", OPTED_IN),
  ];
  const jobs = ["team-a", "team-b", "team-c", "kube-system", "quartermaster", "kube-public", "vanished"].map((n) => finishedTf("done", n));
  const plan = planPass(
    snapshotOf({ namespaces, jobs: jobs.map((j) => ({ kind: TF, job: j.job })), pods: jobs.map((j) => j.pod), services: jobs.map((j) => j.service) }),
    NOW,
    policy,
    SCOPE,
  );

  it("only the opted-in namespace gets actions", () => {
    assert.deepEqual(touched(plan), ["delete Pod team-a/done-worker-0", "delete Service team-a/done-worker-0", "delete Job team-a/done"]);
  });
  const cases: Array<[string, RegExp]> = [
    ["team-b", /namespace team-b has not opted in \(label quartermaster.dev\/enabled="true"\)/],
    ["team-c", /namespace team-c has not opted in/],
    ["kube-system", /namespace kube-system is protected: Quartermaster never acts in it/],
    ["quartermaster", /namespace quartermaster is protected/],
    ["kube-public", /namespace kube-public is protected/],
    ["vanished", /namespace vanished was not found/],
  ];
  for (const [name, why] of cases) {
    it(`${name}: skipped, with why`, () => {
      const s = plan.skipped.filter((x) => x.namespace === name);
      assert.equal(s.length, 1);
      assert.deepEqual([s[0]!.kind, s[0]!.name], ["TFJob", "done"]);
      assert.match(s[0]!.why, why);
    });
  }
  it("the device ledger still counts every namespace (read-only, cluster-wide)", () => {
    assert.equal(plan.ledger.nodes[0]?.pods.length, 7);
  });
  it("--dry-run's table has a SKIPPED section saying what and why", () => {
    const t = planTable(plan);
    assert.match(t, /\nSKIPPED \(no claims, Services, deletions or Events for these jobs\)\nKIND\s+NAMESPACE\s+NAME\s+WHY\n/);
    assert.match(t, /TFJob\s+kube-system\s+done\s+namespace kube-system is protected/);
  });

  it("a pass over the cluster: nothing written outside team-a (namespaces listed by the pass)", async () => {
    const c = fakeCluster({
      namespaces,
      jobs: jobs.map((j) => ({ kind: TF, job: j.job })),
      pods: jobs.map((j) => j.pod),
      services: jobs.map((j) => j.service),
      nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })],
      nodeLeases: [nodeLease("gpu-1", NOW)],
    });
    const report = await runPass({ cluster: c, policy, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
    assert.ok(c.log.includes("list Namespace"));
    const writes = c.log.filter((l) => !/^(list|get) /.test(l) && !/ConfigMap quartermaster\//.test(l));
    assert.deepEqual(writes, [
      "delete Pod team-a/done-worker-0",
      "delete Service team-a/done-worker-0",
      "delete Job team-a/done",
      "create Event team-a/SuccessfulDeletePod",
      "create Event team-a/SuccessfulDeleteService",
      "create Event team-a/DeletedAfterTTL",
    ]);
    assert.equal(report.plan.skipped.length, 6);
  });
});

describe("managedBy: jobs another controller manages are skipped by every action", () => {
  const cases: Array<[string, unknown, boolean]> = [
    ["unset → ours", undefined, true],
    ["kubeflow.org/training-operator → ours", "kubeflow.org/training-operator", true],
    ["kueue.x-k8s.io/multikueue → skipped", "kueue.x-k8s.io/multikueue", false],
    ["any other controller → skipped", "example.com/other", false],
    ["not a string → skipped (not certain it is ours)", 7, false],
  ];
  for (const [name, managedBy, ours] of cases) {
    it(name, () => {
      const runPolicy = { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0, ...(managedBy === undefined ? {} : { managedBy }) };
      const j = finishedTf("mk", "team-a", runPolicy);
      // An orphan matching the job too: no adoption either.
      const orphan = structuredClone(j.pod) as Record<string, any>;
      orphan.metadata.name = "mk-worker-1";
      orphan.metadata.uid = "uid-orphan";
      delete orphan.metadata.ownerReferences;
      const plan = planPass(snapshotOf({ jobs: [{ kind: TF, job: j.job }], pods: [j.pod, orphan], services: [j.service] }), NOW, policy, SCOPE);
      if (ours) {
        assert.ok(touched(plan).length > 0);
        assert.deepEqual(plan.skipped, []);
      } else {
        assert.deepEqual(touched(plan), []);
        assert.equal(plan.skipped.length, 1);
        assert.match(plan.skipped[0]!.why, /spec.runPolicy.managedBy is .*: another controller manages this job/);
      }
    });
  }
});

describe("label schemes: caffe2-operator's pods keep one owner", () => {
  const RUNTIME = "run-42";
  const withOperator = { ...policy, jobKinds: policy.jobKinds.map((k) => (k.framework === "caffe2" ? { ...k, controller: "operator" as const } : k)) };
  const c2 = (): KubeObject => {
    const j = structuredClone(job("Caffe2Job", "resnet", "team-a", { Worker: 2 }, { RuntimeID: RUNTIME })) as Record<string, any>;
    j.apiVersion = "kubeflow.org/v1alpha1";
    return j;
  };
  /** A pod as caffe2-operator's createNewPod makes it: genLabels + caffe2_replica_type/index, controller ref. */
  const c2pod = (i: number, owned: boolean): KubeObject => {
    const p = gpuPod(`resnet-worker-${i}`, { node: "gpu-1" }) as Record<string, any>;
    p.metadata.labels = {
      group_name: "kubeflow.org",
      caffe2_job_key: "team-a-resnet",
      runtime_id: RUNTIME,
      caffe2_replica_type: "worker",
      caffe2_replica_index: String(i),
    };
    if (owned)
      p.metadata.ownerReferences = [
        { apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "resnet", uid: "uid-resnet", controller: true, blockOwnerDeletion: true },
      ];
    return p;
  };
  /** caffe2-operator between passes: adopts the orphans its selector matches (its ClaimPods). */
  const operator = (c: FakeCluster): void => {
    for (const p of c.pods) {
      const l = p.metadata.labels ?? {};
      if (
        !(p.metadata.ownerReferences ?? []).some((r: any) => r.controller) &&
        l.group_name === "kubeflow.org" &&
        l.caffe2_job_key === "team-a-resnet" &&
        l.runtime_id === RUNTIME
      ) {
        p.metadata.ownerReferences = [
          { apiVersion: "kubeflow.org/v1alpha1", kind: "Caffe2Job", name: "resnet", uid: "uid-resnet", controller: true, blockOwnerDeletion: true },
        ];
      }
    }
  };

  it("5 consecutive passes with the operator running in between: no release, no adoption, no Service, the owner never changes", async () => {
    const c = fakeCluster({
      jobs: [{ kind: C2, job: c2() }],
      pods: [c2pod(0, true), c2pod(1, true)],
      nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })],
      nodeLeases: [nodeLease("gpu-1", NOW)],
    });
    for (let n = 1; n <= 5; n++) {
      const report = await runPass({ cluster: c, policy: withOperator, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
      assert.deepEqual([report.plan.claims, report.plan.creates, report.plan.actions], [[], [], []], `pass ${n}`);
      operator(c);
      for (const p of c.pods)
        assert.deepEqual(
          p.metadata.ownerReferences!.map((r: any) => r.uid),
          ["uid-resnet"],
          `pass ${n}: ${p.metadata.name}`,
        );
    }
    assert.deepEqual(
      c.log.filter((l) => /^(patch|create Service)/.test(l)),
      [],
    );
  });

  it("an orphan with caffe2-operator's labels is adopted once (and the operator, in between, finds it owned); then nothing for 4 passes", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }], pods: [c2pod(0, true), c2pod(1, false)] });
    const verbs: string[][] = [];
    for (let n = 1; n <= 5; n++) {
      const report = await runPass({ cluster: c, policy: withOperator, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
      verbs.push(report.plan.claims.map((x) => `${x.verb} ${x.name}`));
      operator(c);
    }
    assert.deepEqual(verbs, [["adopt resnet-worker-1"], [], [], [], []]);
  });

  it("a controlled Caffe2 pod without any Kubeflow label is not released; one whose caffe2_job_key names another job is", () => {
    const other = c2pod(1, true) as Record<string, any>;
    other.metadata.labels.caffe2_job_key = "team-a-other";
    const plan = planPass(snapshotOf({ jobs: [{ kind: C2, job: c2() }], pods: [c2pod(0, true), other] }), NOW, policy, SCOPE);
    assert.deepEqual(
      plan.claims.map((x) => `${x.verb} ${x.name}`),
      ["release resnet-worker-1"],
    );
  });

  it("a TFJob-controlled pod carrying caffe2 labels but no job-name is released (its own scheme's key is missing)", () => {
    const j = finishedTf("mnist", "team-a", {});
    const pod = structuredClone(j.pod) as Record<string, any>;
    pod.metadata.labels = { group_name: "kubeflow.org", caffe2_job_key: "team-a-mnist" };
    const plan = planPass(snapshotOf({ jobs: [{ kind: TF, job: j.job }], pods: [pod] }), NOW, policy, SCOPE);
    assert.deepEqual(
      plan.claims.map((x) => `${x.verb} ${x.name}`),
      ["release mnist-worker-0"],
    );
  });
});

describe("deletion budget across passes", () => {
  it("GPU holders first; a Service parted from its pod by the budget is deleted by the next pass", async () => {
    const budget = checkPolicy({ reconciler: { maxDeletionsPerPass: 3 } }, "t");
    // team-a: 4 completed pods (no GPUs held); team-b: 1 running GPU pod. Both jobs finished, All, no TTL.
    const a = finishedTf("bulk", "team-a", { cleanPodPolicy: "All" });
    const b = finishedTf("gpu", "team-b", { cleanPodPolicy: "All" });
    const pods: KubeObject[] = [b.pod];
    const services: KubeObject[] = [b.service];
    for (let i = 0; i < 4; i++) {
      const p = structuredClone(a.pod) as Record<string, any>;
      p.metadata.name = `bulk-worker-${i}`;
      p.metadata.uid = `uid-bulk-${i}`;
      p.status.phase = "Succeeded";
      pods.push(p);
      services.push({
        ...structuredClone(a.service),
        metadata: { ...structuredClone((a.service as any).metadata), name: `bulk-worker-${i}`, uid: `uid-bulk-svc-${i}` },
      });
    }
    const c = fakeCluster({
      jobs: [
        { kind: TF, job: a.job },
        { kind: TF, job: b.job },
      ],
      pods,
      services,
    });
    const run = () => runPass({ cluster: c, policy: budget, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
    const deletes = (r: Awaited<ReturnType<typeof run>>) => r.applied.filter((x) => x.startsWith("delete"));
    const first = await run();
    assert.deepEqual(deletes(first), ["delete Pod team-b/gpu-worker-0", "delete Service team-b/gpu-worker-0", "delete Pod team-a/bulk-worker-0"]);
    const second = await run();
    assert.equal(second.plan.actions[0]?.name, "bulk-worker-0", "the parted Service comes first in the next pass");
    assert.deepEqual(deletes(second), ["delete Service team-a/bulk-worker-0", "delete Pod team-a/bulk-worker-1", "delete Service team-a/bulk-worker-1"]);
    await run();
    await run();
    assert.deepEqual([c.pods.length, c.services.length], [0, 0]);
  });
});

describe("a ledger shard of the wrong shape (checksums right) does not stop the pass", () => {
  it("reported, rebuilt, and the rest of the pass runs", async () => {
    const j = finishedTf("done", "team-a");
    const c = fakeCluster({
      jobs: [{ kind: TF, job: j.job }],
      pods: [j.pod],
      services: [j.service],
      nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })],
      nodeLeases: [nodeLease("gpu-1", NOW)],
    });
    await runPass({ cluster: c, policy, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
    // Reshape shard 0 by hand, fixing its checksum and the index's record of it.
    const shard = c.configMaps.find((m) => m.metadata.name === shardName(0)) as any;
    const index = c.configMaps.find((m) => m.metadata.name === LEDGER_INDEX_NAME) as any;
    shard.data["shard.json"] = JSON.stringify({ ...JSON.parse(shard.data["shard.json"]), nodes: { "gpu-1": "?" } });
    shard.data.sha256 = sha256(shard.data["shard.json"]);
    const idx = JSON.parse(index.data["index.json"]);
    idx.shards[0].sha256 = shard.data.sha256;
    index.data["index.json"] = JSON.stringify(idx);
    index.data.sha256 = sha256(index.data["index.json"]);
    const report = await runPass({ cluster: c, policy, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
    assert.deepEqual(report.plan.ledgerCorrupt, [shardName(0)]);
    assert.match(report.plan.problems.join("\n"), /quartermaster-ledger-0 is of the wrong shape \(nodes: must be array\): rebuilt/);
    assert.deepEqual(report.failed, []);
    assert.ok(report.ledger!.written.includes(shardName(0)));
    const again = await runPass({ cluster: c, policy, log: silentLogger(), now: () => NOW, dryRun: false, namespace: "quartermaster" });
    assert.deepEqual(again.plan.ledgerCorrupt, []);
  });
});

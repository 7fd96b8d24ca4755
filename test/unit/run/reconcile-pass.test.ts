/**
 * The pass's orchestration over an in-memory cluster that keeps the apiserver's preconditions: claims with a
 * fresh job read once per job, Services, deletes, Events per job and reason, the ledger's writes, dry run.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { runPass } from "../../../src/run/pass.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { LEDGER_INDEX_NAME, shardName } from "../../../src/ledger/shards.js";
import { fakeCluster, gpuPod, node, nodeLease, type FakeCluster } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const NOW = new Date("2026-11-22T12:00:00Z");
const kind = kindOf("TFJob");
const policy = defaultPolicy();
const LABELS = {
  "training.kubeflow.org/job-name": "mnist",
  "training.kubeflow.org/operator-name": "tfjob-controller",
  "training.kubeflow.org/replica-type": "worker",
};

function tf(o: { finishedAgo?: number; ttl?: number } = {}): KubeObject {
  const j = structuredClone(
    job(
      "TFJob",
      "mnist",
      "team-a",
      { Worker: { replicas: 2, port: 2222 } },
      o.ttl === undefined ? {} : { runPolicy: { ttlSecondsAfterFinished: o.ttl, cleanPodPolicy: "All" } },
    ),
  ) as Record<string, any>;
  if (o.finishedAgo !== undefined)
    j.status = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: new Date(NOW.getTime() - o.finishedAgo * 1000).toISOString() };
  return j;
}

function replica(i: number, owned: boolean): KubeObject {
  const p = gpuPod(`mnist-worker-${i}`, { node: "gpu-1", gpus: { "nvidia.com/gpu": 2 } }) as Record<string, any>;
  p.metadata.labels = { ...LABELS, "training.kubeflow.org/replica-index": String(i) };
  if (owned)
    p.metadata.ownerReferences = [
      { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true, blockOwnerDeletion: true },
    ];
  return p;
}

function cluster(jobObject: KubeObject, pods: KubeObject[]): FakeCluster {
  return fakeCluster({ jobs: [{ kind, job: jobObject }], pods, nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })], nodeLeases: [nodeLease("gpu-1", NOW)] });
}

/** The first pod deleted and recreated under its name right after the pass listed it. */
function recreateFirstPodAfterSnapshot(c: FakeCluster): void {
  const list = c.listPods.bind(c);
  c.listPods = async () => {
    const pods = await list();
    c.pods[0]!.metadata.uid = "uid-recreated";
    return pods;
  };
}

const pass = (c: FakeCluster, dryRun = false) => runPass({ cluster: c, policy, log: silentLogger(), now: () => NOW, dryRun, namespace: "quartermaster" });
const writes = (c: FakeCluster, from = 0) => c.log.slice(from).filter((l) => !/^(list|get) /.test(l));

describe("reconcile pass", () => {
  it("orphans of a running job: adopted (one fresh job read for all), Services created, one Event, ledger written; the next pass writes only the ledger index", async () => {
    const c = cluster(tf(), [replica(0, false), replica(1, false)]);
    const report = await pass(c);
    assert.deepEqual(report.failed, []);
    assert.equal(c.log.filter((l) => l === "get TFJob team-a/mnist").length, 1);
    assert.deepEqual(writes(c), [
      "patch Pod team-a/mnist-worker-0",
      "patch Pod team-a/mnist-worker-1",
      "create Service team-a/mnist-worker-0",
      "create Service team-a/mnist-worker-1",
      "create Event team-a/AdoptedPod",
      `create ConfigMap quartermaster/${shardName(0)}`,
      `create ConfigMap quartermaster/${LEDGER_INDEX_NAME}`,
    ]);
    assert.ok(c.pods.every((p) => p.metadata.ownerReferences?.[0]?.uid === "uid-mnist"));
    assert.deepEqual(
      c.events.map((e: any) => [e.reason, e.involvedObject.uid, e.message]),
      [["AdoptedPod", "uid-mnist", "Adopted pods (2) mnist-worker-0, mnist-worker-1: matches the selector of TFJob/mnist and has no controller"]],
    );

    const mark = c.log.length;
    const again = await pass(c);
    assert.deepEqual(again.failed, []);
    assert.deepEqual(writes(c, mark), [`replace ConfigMap quartermaster/${LEDGER_INDEX_NAME}`]);
  });

  it("a pass changes nothing it read (the resident reconciler hands it its informers' cached objects)", async () => {
    const deepFreeze = <T>(o: T): T => {
      if (o && typeof o === "object" && !Object.isFrozen(o)) {
        for (const v of Object.values(o)) deepFreeze(v);
        Object.freeze(o);
      }
      return o;
    };
    const cases: Array<{ name: string; job: KubeObject; pods: KubeObject[] }> = [
      { name: "orphans adopted, Services created, the ledger written", job: tf(), pods: [replica(0, false), replica(1, false)] },
      { name: "a finished job past its TTL cleaned up", job: tf({ finishedAgo: 120, ttl: 60 }), pods: [replica(0, true), replica(1, true)] },
    ];
    for (const c of cases) {
      const plain = cluster(c.job, c.pods);
      const frozen = cluster(c.job, c.pods);
      for (const read of ["listPods", "listServices", "listJobs", "listNamespaces", "listNodes", "listNodeLeases"] as const) {
        const list = (frozen[read] as (...a: unknown[]) => Promise<unknown>).bind(frozen);
        (frozen as unknown as Record<string, unknown>)[read] = async (...a: unknown[]) => deepFreeze(await list(...a));
      }
      const want = await pass(plain);
      const got = await pass(frozen); // a write to a frozen object throws (ES modules are strict)
      assert.deepEqual(got.failed, [], c.name);
      assert.deepEqual(writes(frozen), writes(plain), c.name);
      assert.ok(want.applied.length > 0, `${c.name}: the pass acted`);
    }
  });

  const refusals: Array<[string, (j: KubeObject) => KubeObject | undefined, RegExp]> = [
    [
      "the job was replaced (another uid)",
      (j) => ({ ...j, metadata: { ...(j.metadata as object), uid: "uid-new" } }),
      /was replaced: uid uid-new, wanted uid-mnist/,
    ],
    ["the job is being deleted", (j) => ({ ...j, metadata: { ...(j.metadata as object), deletionTimestamp: "2026-11-22T11:59:00Z" } }), /is being deleted/],
    ["the job is gone", () => undefined, /is gone/],
  ];
  for (const [name, fresh, why] of refusals) {
    it(`CanAdopt: ${name} → no adoption, said why`, async () => {
      const c = cluster(tf(), [replica(0, false)]);
      const get = c.getJob.bind(c);
      c.getJob = async (...a) => {
        const j = await get(...a);
        return j && fresh(j);
      };
      const report = await pass(c);
      assert.equal(c.log.filter((l) => l.startsWith("patch")).length, 0);
      assert.match(report.skipped.map((s) => s.why).join("\n"), why);
      assert.equal(c.pods[0]!.metadata.ownerReferences, undefined);
    });
  }

  it("a pod recreated under the same name between snapshot and patch → the uid precondition refuses, skipped", async () => {
    const c = cluster(tf(), [replica(0, false)]);
    recreateFirstPodAfterSnapshot(c);
    const report = await pass(c);
    assert.match(report.skipped.map((s) => `${s.action}: ${s.why}`).join("\n"), /adopt Pod team-a\/mnist-worker-0: the object was replaced/);
    assert.equal(c.pods[0]!.metadata.ownerReferences, undefined);
  });

  it("a finished job past its TTL: its pods, Services and the job deleted with uid preconditions; Events per reason", async () => {
    const c = cluster(tf({ finishedAgo: 120, ttl: 60 }), [replica(0, true), replica(1, true)]);
    const report = await pass(c);
    assert.deepEqual(report.failed, []);
    assert.deepEqual(
      writes(c).filter((l) => !l.includes("ConfigMap")),
      [
        "delete Pod team-a/mnist-worker-0",
        "delete Pod team-a/mnist-worker-1",
        "delete Job team-a/mnist",
        "create Event team-a/SuccessfulDeletePod",
        "create Event team-a/DeletedAfterTTL",
      ],
    );
    assert.equal(c.jobs.size, 0);
    assert.match(String((c.events[1] as any).message), /^Deleting the job: TTL: finished .*, ttlSecondsAfterFinished 60$/);
  });

  it("a delete whose uid no longer matches → skipped, nothing removed", async () => {
    const c = cluster(tf({ finishedAgo: 10, ttl: 3600 }), [replica(0, true)]);
    recreateFirstPodAfterSnapshot(c);
    const report = await pass(c);
    assert.match(report.skipped.map((s) => s.why).join(), /uid changed/);
    assert.equal(c.pods.length, 1);
  });

  it("--dry-run: the same plan, and no call but reads", async () => {
    const c = cluster(tf({ finishedAgo: 120, ttl: 60 }), [replica(0, true), replica(1, false)]);
    const report = await pass(c, true);
    assert.deepEqual(writes(c), []);
    assert.deepEqual(
      report.plan.claims.map((x) => `${x.verb} ${x.name}`),
      ["adopt mnist-worker-1"],
    );
    assert.deepEqual(
      report.plan.actions.map((x) => `${x.kind} ${x.name}`),
      ["Pod mnist-worker-0", "Job mnist"],
    );
  });

  it("a shard write that fails → the index is not written, the pass reports it; the next pass completes the ledger", async () => {
    const c = cluster(tf(), [replica(0, true)]);
    c.failOn(/create ConfigMap quartermaster\/quartermaster-ledger-0/);
    const report = await pass(c);
    assert.deepEqual(
      report.failed.map((f) => f.action),
      [`write ConfigMap quartermaster/${shardName(0)}`, `write ConfigMap quartermaster/${LEDGER_INDEX_NAME}`],
    );
    assert.equal(c.configMaps.length, 0);
    const fixed = fakeCluster({ jobs: [{ kind, job: tf() }], pods: [replica(0, true)], nodes: c.nodes, nodeLeases: c.nodeLeases });
    await pass(fixed);
    assert.deepEqual(fixed.configMaps.map((m) => m.metadata.name).sort(), [LEDGER_INDEX_NAME, shardName(0)]);
  });

  it("a ledger shard corrupted by hand → a warning, and the pass rewrites it", async () => {
    const c = cluster(tf(), [replica(0, true)]);
    await pass(c);
    const shard = c.configMaps.find((m) => m.metadata.name === shardName(0)) as any;
    shard.data["shard.json"] = shard.data["shard.json"].replace('"allocated":2', '"allocated":0');
    const report = await pass(c);
    assert.deepEqual(report.plan.ledgerCorrupt, [shardName(0)]);
    assert.match(report.plan.problems.join("\n"), /quartermaster-ledger-0 is checksum mismatch: rebuilt from cluster state/);
    const third = await pass(c);
    assert.deepEqual(third.plan.ledgerCorrupt, []);
  });

  it("an Event that cannot be written does not fail the pass", async () => {
    const c = cluster(tf(), [replica(0, false)]);
    c.failOn(/create Event/);
    const report = await pass(c);
    assert.deepEqual(report.failed, []);
    assert.equal(report.events, 0);
    assert.equal(report.applied.filter((a) => a.startsWith("adopt")).length, 1);
  });

  it("the ledger written matches the nodes and pods", async () => {
    const c = cluster(tf(), [replica(0, true), replica(1, true)]);
    const report = await pass(c);
    assert.deepEqual(report.plan.ledger.totals["nvidia.com/gpu"], { capacity: 8, allocatable: 8, unavailable: 0, allocated: 4, free: 4 });
    assert.deepEqual(report.plan.ledger.jobs, { "team-a/mnist": { "nvidia.com/gpu": { allocated: 4, gpuSeconds: 0, since: report.plan.ledger.generatedAt } } });
  });
});

describe("reconcile pass: Kueue's flavors in the ledger", () => {
  const flavor = { metadata: { name: "a100" }, spec: { nodeLabels: { "nvidia.com/gpu.product": "A100-SXM4-80GB" } } };
  const queue = {
    metadata: { name: "team-a" },
    spec: {
      resourceGroups: [{ coveredResources: ["nvidia.com/gpu"], flavors: [{ name: "a100", resources: [{ name: "nvidia.com/gpu", nominalQuota: "16" }] }] }],
    },
  };
  /** A node with many labels: the pass must keep only those a flavor names. */
  const labelledNode = (): KubeObject => {
    const n = node("gpu-1", { "nvidia.com/gpu": "8" }) as Record<string, any>;
    n.metadata.labels = { "nvidia.com/gpu.product": "A100-SXM4-80GB", "kubernetes.io/hostname": "gpu-1", "topology.kubernetes.io/zone": "z1" };
    return n;
  };
  const cases: Array<{ name: string; listKueue?: () => Promise<unknown>; want: { flavors?: string[]; physical?: number; problem?: RegExp; keep?: string[] } }> =
    [
      {
        name: "Kueue served: the section per flavor, and the node listing keeps only the flavors' label keys",
        listKueue: async () => ({ resourceFlavors: [flavor], clusterQueues: [queue] }),
        want: { flavors: ["a100"], physical: 8, keep: ["nvidia.com/gpu.product"] },
      },
      { name: "Kueue not installed (404 → undefined): no section, no problem", listKueue: async () => undefined, want: {} },
      { name: "a reader without Kueue listing at all: no section", want: {} },
      {
        name: "listing refused (403, RBAC not yet updated): a problem, no section, the pass goes on",
        listKueue: async () => {
          throw Object.assign(new Error("HTTP 403: forbidden"), { code: 403 });
        },
        want: { problem: /Kueue's ResourceFlavors and ClusterQueues could not be listed \(HTTP 403: forbidden\)/ },
      },
    ];
  for (const c of cases) {
    it(c.name, async () => {
      const fc = fakeCluster({ jobs: [{ kind, job: tf() }], pods: [replica(0, true)], nodes: [labelledNode()], nodeLeases: [nodeLease("gpu-1", NOW)] });
      let kept: string[] | undefined;
      const list = fc.listNodes.bind(fc);
      fc.listNodes = async (keep?: ReadonlySet<string>) => {
        kept = keep ? [...keep] : undefined;
        return list();
      };
      if (c.listKueue) (fc as unknown as { listKueue: unknown }).listKueue = c.listKueue;
      const report = await pass(fc);
      assert.deepEqual(report.failed, []);
      const k = report.plan.ledger.kueue;
      assert.deepEqual(
        k?.flavors.map((f) => f.name),
        c.want.flavors,
      );
      if (c.want.physical !== undefined) assert.equal(k?.flavors[0]?.resources["nvidia.com/gpu"]?.physical, c.want.physical);
      assert.deepEqual(kept, c.want.keep);
      const problems = report.plan.problems.filter((p) => /Kueue/.test(p));
      if (c.want.problem) assert.match(problems.join("\n"), c.want.problem);
      else assert.deepEqual(problems, []);
    });
  }
});

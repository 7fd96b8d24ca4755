/**
 * Synthetic cluster state for bench/reconcile: the snapshot a pass would read from a big GPU cluster.
 */
import type { KubeObject } from "../../src/core/kube.js";
import { DEFAULT_JOB_KINDS } from "../../src/policy/schema.js";
import type { JobKind, Policy } from "../../src/policy/types.js";
import { shardLedger, type StoredConfigMap } from "../../src/ledger/shards.js";
import { LABEL_NAMESPACE_OPT_IN } from "../../src/core/keys.js";
import { planPass, type Snapshot } from "../../src/reconcile/plan.js";
import { namespaceScope } from "../../src/core/scope.js";

const TF = (DEFAULT_JOB_KINDS as JobKind[]).find((k) => k.kind === "TFJob")!;
export const SYNTHETIC_NOW = new Date("2026-11-22T12:00:00Z");
export const SYNTHETIC_SCOPE = namespaceScope("quartermaster");
const NOW = SYNTHETIC_NOW;
const LABELS = (job: string) => ({
  "training.kubeflow.org/job-name": job,
  "training.kubeflow.org/operator-name": "tfjob-controller",
  "training.kubeflow.org/replica-type": "worker",
});

function tfjob(i: number, ns: string, replicas: number, finished: boolean): KubeObject {
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "TFJob",
    metadata: { name: `job-${i}`, namespace: ns, uid: `job-uid-${i}` },
    spec: {
      runPolicy: { cleanPodPolicy: "Running", ttlSecondsAfterFinished: 3600 },
      tfReplicaSpecs: {
        Worker: {
          replicas,
          template: {
            spec: {
              containers: [
                { name: "tensorflow", image: "tf", ports: [{ name: "tfjob-port", containerPort: 2222 }], resources: { limits: { "nvidia.com/gpu": "1" } } },
              ],
            },
          },
        },
      },
    },
    ...(finished ? { status: { conditions: [{ type: "Succeeded", status: "True" }], completionTime: new Date(NOW.getTime() - 600_000).toISOString() } } : {}),
  };
}

/**
 * A cluster of `pods` GPU pods in `jobs` TFJobs (a tenth finished, one in fifty with an orphan to adopt) over
 * `nodes` 8-GPU nodes (one in a hundred with a stale Lease), Services for the owned pods, and the ledger the
 * previous pass (five minutes earlier) stored.
 */
export function syntheticSnapshot(pods: number, nodes: number, jobs: number, policy: Policy): Snapshot {
  const perJob = Math.floor(pods / jobs);
  // Every team namespace has opted in: the whole cluster is the pass's work, as before scoping.
  const snap: Snapshot = {
    namespaces: Array.from({ length: 100 }, (_, i) => ({ name: `team-${i}`, labels: { [LABEL_NAMESPACE_OPT_IN]: "true" } })),
    jobs: [],
    pods: [],
    services: [],
    nodes: [],
    nodeLeases: [],
    ledger: new Map(),
  };
  for (let n = 0; n < nodes; n++) {
    const name = `gpu-node-${n}`;
    snap.nodes.push({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name, uid: `node-uid-${n}` },
      status: { capacity: { cpu: "96", "nvidia.com/gpu": "8" }, allocatable: { cpu: "95", "nvidia.com/gpu": "8" } },
    });
    snap.nodeLeases.push({ metadata: { name }, spec: { renewTime: new Date(NOW.getTime() - (n % 100 === 0 ? 120_000 : 5_000)).toISOString() } });
  }
  let podIndex = 0;
  for (let j = 0; j < jobs; j++) {
    const ns = `team-${j % 100}`;
    const finished = j % 10 === 0;
    const job = tfjob(j, ns, perJob, finished);
    snap.jobs.push({ kind: TF, job });
    // The trimmed managedFields of the job's pods, one copy shared by them (as src/kube/cluster.ts slimPod shares it).
    const adopted = [
      { manager: "quartermaster-reconciler", operation: "Update", fieldsV1: { "f:metadata": { "f:ownerReferences": { [`k:{"uid":"job-uid-${j}"}`]: {} } } } },
    ];
    for (let r = 0; r < perJob; r++) {
      const name = `job-${j}-worker-${r}`;
      const orphan = j % 50 === 1 && r === 0;
      const pod: KubeObject = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name,
          namespace: ns,
          uid: `pod-uid-${podIndex}`,
          creationTimestamp: new Date(NOW.getTime() - 3_600_000).toISOString(),
          labels: { ...LABELS(`job-${j}`), "training.kubeflow.org/replica-index": String(r) },
          ...(orphan
            ? {}
            : {
                ownerReferences: [
                  { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: `job-${j}`, uid: `job-uid-${j}`, controller: true, blockOwnerDeletion: true },
                ],
              }),
          // Adopted by the reconciler: the Service planner reads every pod's record.
          ...(orphan ? {} : { managedFields: adopted }),
        },
        spec: {
          nodeName: `gpu-node-${podIndex % nodes}`,
          containers: [{ name: "tensorflow", resources: { limits: { "nvidia.com/gpu": "1" } }, ports: [{ name: "tfjob-port", containerPort: 2222 }] }],
        },
        status: { phase: "Running" },
      };
      snap.pods.push(pod);
      if (!orphan) {
        snap.services.push({
          apiVersion: "v1",
          kind: "Service",
          metadata: {
            name,
            namespace: ns,
            uid: `svc-uid-${podIndex}`,
            labels: LABELS(`job-${j}`),
            ownerReferences: (pod.metadata as { ownerReferences: unknown[] }).ownerReferences,
          },
        });
      }
      podIndex++;
    }
  }
  // The previous pass's ledger, as stored: GPU-seconds accrue against it and unchanged shards are not rewritten.
  const previous = planPass({ ...snap, ledger: new Map() }, new Date(NOW.getTime() - 300_000), policy, SYNTHETIC_SCOPE).ledger;
  const { index, shards } = shardLedger(previous, policy.reconciler.ledgerShardBytes);
  const stored = new Map<string, StoredConfigMap>();
  for (const s of [index, ...shards]) stored.set(s.name, { name: s.name, uid: `cm-${s.name}`, resourceVersion: "1", text: s.text, sha256: s.sha256 });
  snap.ledger = stored;
  return snap;
}

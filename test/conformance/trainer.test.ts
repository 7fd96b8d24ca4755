/**
 * Kubeflow Trainer v2 with the real controllers (issue 32): the Trainer v2 controller manager v2.3.0
 * (QM_TRAINER_BIN, `test/e2e/trainer/build.sh`) and JobSet v0.12.0 (QM_JOBSET_BIN, `test/e2e/jobset/build.sh`),
 * their webhooks served, their CRDs and the upstream default runtimes installed, on the e2e control plane
 * with kube-controller-manager's job-controller (JobSet's Jobs get their pods from it; no kubelet: the pods
 * stay Pending, which is all the outfitting needs). Quartermaster's webhooks are registered from its
 * manifests (served by a local process as its ServiceAccount, as in coexistence.test.ts) and the TrainJobs'
 * namespace is opted in.
 *
 * Each entry of {@link CASES} is a TrainJob; for each, the test shows the JobSet (named like the TrainJob),
 * its Jobs and pods appear, every pod carries the JobSet labels Quartermaster finds them by
 * (`jobset.sigs.k8s.io/jobset-name`, `…/replicatedjob-name`, `batch.kubernetes.io/job-completion-index`),
 * has been through Quartermaster's pod webhook (its `quartermaster.dev/mutations` annotation and the GPU
 * toleration), and the distributed environment the runtime gave it (PET_* for torch) is printed and checked
 * against the case's expectation. Cases are added to the table; `expect` holds what is particular to a case.
 *
 * Skips, saying why, when QM_TRAINER_BIN or QM_JOBSET_BIN is unset: a fresh clone's `npm test` never needs them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { JOB_CONTROLLER, installDefaultRuntimes, installTrainerCrds, startJobSet, startTrainer, trainerBins, type Controller } from "../e2e/harness/trainer.js";
import { createNamespace, startOwnWebhook, type WebhookProcess } from "../e2e/harness/webhook.js";
import { list, sleep, type Obj } from "./operator-jobs.js";

const bins = trainerBins();
const SKIP = "skip" in bins ? bins.skip : false;
const NS = "trainer-conformance";
const POLICY = "limits:\n  container:\n    gpus: {nvidia.com/gpu: 8}\n";
const JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name";
const COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index";

/** What a case's pods are held to beyond what every TrainJob pod is. */
interface Expect {
  /** Pods in all (numNodes for a single-step runtime). */
  pods: number;
  /** The replicated job of the JobSet that runs the training nodes. */
  replicatedJob: string;
  /** The container the runtime puts the training in. */
  container: string;
  /** Env the runtime must have given that container (a string: the value; a function: checks the var on pod `index`). */
  env: Record<string, string | ((v: Obj, index: number, trainJob: string) => void)>;
  /** Quartermaster's mutations the pod must carry (names in `quartermaster.dev/mutations`). */
  mutations: string[];
  /** GPUs per pod the container asks for. */
  gpus: number;
}

interface Case {
  title: string;
  name: string;
  /** The TrainJob's spec. */
  spec: Obj;
  expect: Expect;
}

const torchEnv = (nodes: number): Expect["env"] => ({
  PET_NNODES: String(nodes),
  PET_NPROC_PER_NODE: "auto",
  PET_MASTER_PORT: "29500",
  PET_MASTER_ADDR: (v, _i, job) => assert.equal(v.value, `${job}-node-0-0.${job}`),
  PET_NODE_RANK: (v) => assert.equal(v.valueFrom?.fieldRef?.fieldPath, `metadata.annotations['${COMPLETION_INDEX}']`),
});

export const CASES: Case[] = [
  {
    title: "torch-distributed, 2 nodes × 2 GPUs",
    name: "torch-2x2",
    spec: {
      runtimeRef: { name: "torch-distributed" },
      trainer: { numNodes: 2, resourcesPerNode: { limits: { "nvidia.com/gpu": "2" } } },
    },
    expect: { pods: 2, replicatedJob: "node", container: "node", env: torchEnv(2), mutations: ["gpu-tolerations"], gpus: 2 },
  },
];

/** The env entry `name` of a container, or undefined. */
const envOf = (container: Obj, name: string): Obj | undefined => ((container.env ?? []) as Obj[]).find((e) => e.name === name);

describe("Kubeflow Trainer v2.3.0 and JobSet v0.12.0: TrainJob pods through Quartermaster's webhooks", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let jobset: Controller | undefined;
  let trainer: Controller | undefined;
  let wh: WebhookProcess | undefined;
  let started = 0;
  const uids = new Map<string, string>();

  const logs = (): string => [jobset, trainer].map((c) => (c ? `--- ${c.name}\n${c.logs(30)}` : "")).join("\n");

  before(async () => {
    if ("skip" in bins) return;
    started = performance.now();
    cp = await startControlPlane({ controllers: [JOB_CONTROLLER] });
    await installTrainerCrds(cp);
    jobset = await startJobSet(cp, bins.jobset);
    trainer = await startTrainer(cp, bins.trainer);
    const runtimes = await installDefaultRuntimes(cp);
    assert.ok(runtimes.includes("torch-distributed"), `default runtimes: ${runtimes.join(", ")}`);

    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
    assert.equal(applied.code, 0, applied.stderr);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    // A new configuration takes effect asynchronously: dry-run GPU pods until Quartermaster's pod webhook sees one.
    let probes = 0;
    await cp.until("Quartermaster's webhooks to take effect", async () => {
      const name = `probe-${++probes}`;
      await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name },
        spec: { containers: [{ name: "c", image: "registry.invalid/probe:1", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
      });
      return (await wh!.awaitAdmissions(name, 1, 1000)).some((l) => l.webhook === "mutate-pods");
    });

    for (const c of CASES) {
      const r = await cp.api("POST", `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${NS}/trainjobs`, {
        apiVersion: "trainer.kubeflow.org/v1alpha1",
        kind: "TrainJob",
        metadata: { name: c.name, namespace: NS },
        spec: c.spec,
      });
      assert.equal(r.status, 201, `TrainJob ${c.name}: ${JSON.stringify(r.body)}`);
      uids.set(c.name, r.body.metadata.uid as string);
    }
    console.log(`trainer: stack up and ${CASES.length} TrainJobs created in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await wh?.stop();
    await trainer?.stop();
    await jobset?.stop();
    await cp?.stop();
    if (started) console.log(`trainer: suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  for (const c of CASES) {
    it(`${c.title}: JobSet, Jobs and pods appear, labelled by JobSet and outfitted by Quartermaster`, async () => {
      const pods = (): Promise<Obj[]> => list(cp, `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(`${JOBSET_NAME}=${c.name}`)}`);
      await cp.until(`${c.expect.pods} pods of TrainJob ${c.name}\n${logs()}`, async () => (await pods()).length >= c.expect.pods, 90_000, 500);
      await sleep(500); // no more than expected may follow
      const got = await pods();
      assert.equal(got.length, c.expect.pods, got.map((p) => p.metadata.name).join(", "));

      // The JobSet: named like the TrainJob, owned by it.
      const js = await cp.api("GET", `/apis/jobset.x-k8s.io/v1alpha2/namespaces/${NS}/jobsets/${c.name}`);
      assert.equal(js.status, 200, JSON.stringify(js.body));
      const jsOwner = (js.body.metadata.ownerReferences as Obj[]).find((o) => o.controller);
      assert.deepEqual([jsOwner?.kind, jsOwner?.name, jsOwner?.uid], ["TrainJob", c.name, uids.get(c.name)]);

      // Its Jobs: owned by the JobSet, each with the TrainJob ancestor label (on the Jobs, not the pods).
      const jobs = (await list(cp, `/apis/batch/v1/namespaces/${NS}/jobs`)).filter((j) => j.metadata.labels?.[JOBSET_NAME] === c.name);
      assert.ok(jobs.length >= 1, "no Job of the JobSet");
      for (const j of jobs) {
        assert.equal((j.metadata.ownerReferences as Obj[]).find((o) => o.controller)?.uid, js.body.metadata.uid, `Job ${j.metadata.name} owner`);
        assert.ok(j.metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"], `Job ${j.metadata.name} has no trainjob-ancestor-step label`);
      }
      const nodeJobs = jobs.filter((j) => j.metadata.labels[REPLICATED_JOB] === c.expect.replicatedJob);
      assert.ok(nodeJobs.length >= 1, `no Job of replicated job ${c.expect.replicatedJob}`);

      const record: string[] = [];
      const indexes = new Set<string>();
      for (const pod of got) {
        const where = `pod ${pod.metadata.name}`;
        const labels = pod.metadata.labels as Record<string, string>;
        // The JobSet labels Quartermaster finds TrainJob pods by.
        assert.equal(labels[JOBSET_NAME], c.name, where);
        assert.equal(labels[REPLICATED_JOB], c.expect.replicatedJob, where);
        assert.match(labels[COMPLETION_INDEX] ?? "", /^\d+$/, `${where}: ${COMPLETION_INDEX}`);
        indexes.add(labels[COMPLETION_INDEX]!);
        const owner = (pod.metadata.ownerReferences as Obj[]).find((o) => o.controller);
        assert.ok(
          nodeJobs.some((j) => j.metadata.uid === owner?.uid),
          `${where} is owned by ${owner?.kind}/${owner?.name}, not a Job of the JobSet`,
        );
        // Quartermaster's pod webhook outfitting.
        const mutations = String(pod.metadata.annotations?.["quartermaster.dev/mutations"] ?? "").split(",");
        for (const m of c.expect.mutations) assert.ok(mutations.includes(m), `${where}: mutations ${JSON.stringify(mutations)} lack ${m}`);
        assert.ok(
          ((pod.spec.tolerations ?? []) as Obj[]).some((t) => t.key === "nvidia.com/gpu" && t.operator === "Exists" && t.effect === "NoSchedule"),
          `${where}: no GPU toleration: ${JSON.stringify(pod.spec.tolerations)}`,
        );
        // The training container: its GPUs and the runtime's distributed env.
        const container = (pod.spec.containers as Obj[]).find((x) => x.name === c.expect.container);
        assert.ok(container, `${where}: no container ${c.expect.container}`);
        assert.equal(String(container.resources?.limits?.["nvidia.com/gpu"]), String(c.expect.gpus), `${where}: GPU limit`);
        const index = Number(labels[COMPLETION_INDEX]);
        for (const [name, want] of Object.entries(c.expect.env)) {
          const v = envOf(container, name);
          assert.ok(v, `${where}: no ${name} in ${JSON.stringify(container.env)}`);
          if (typeof want === "string") assert.equal(v.value, want, `${where}: ${name}`);
          else want(v, index, c.name);
        }
        const distributed = ((container.env ?? []) as Obj[]).filter((e) => /^(PET_|JOB_COMPLETION_INDEX$)/.test(String(e.name)));
        record.push(`${pod.metadata.name} [${labels[COMPLETION_INDEX]}] ${JSON.stringify(distributed)}`);
      }
      assert.equal(indexes.size, c.expect.pods, `completion indexes ${[...indexes].join(",")}`);
      console.log(`trainer: ${c.name} env as the runtime gave it:\n  ${record.sort().join("\n  ")}`);
    });
  }
});

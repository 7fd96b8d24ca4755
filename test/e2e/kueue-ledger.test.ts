/**
 * The ledger per ResourceFlavor and `doctor`'s over-quota check through the real Kueue v0.19.2 (QM_KUEUE_BIN;
 * issue 33), on the e2e control plane with kube-scheduler and the job-controller over virtual GPU nodes (an A100
 * and an H100 node of 8 GPUs each, a CPU node; `./harness/nodes.ts`).
 *
 * Two flavors on the GFD product label of their nodes: `a100`, whose ClusterQueue quota (16 GPUs) is twice its
 * node's 8, and `h100`, whose quota (8) matches. A queued batch Job of 2 pods × 4 GPUs is admitted by Kueue into
 * `a100` and bound by kube-scheduler onto the A100 node. Then one reconcile pass (`runPass`, as
 * `quartermaster reconcile --once` runs it) and:
 * - the ledger's Kueue section: a100 quota 16, physical 8, in use 8, Kueue's usage 8; h100 quota 8, physical 8,
 *   in use 0, usage 0; `quartermaster ledger` prints the rows, the over-quota one flagged;
 * - `quartermaster doctor -o json` warns about flavor a100 (kueue-quota), naming the ClusterQueue, the resource,
 *   the quota and the physical count, and not about h100; and, Quartermaster's webhooks not being installed here,
 *   that Kueue mutates the training kinds at CREATE while jobs.mutate is not registered (kueue-webhooks);
 * - with `--policy` allowing only H100s in the (opted-in) namespace, `doctor` warns that flavor a100, which its
 *   LocalQueue's ClusterQueue admits into, contradicts the allow-list (kueue-flavors), and not about h100.
 *
 * Skips, saying why, when QM_KUEUE_BIN is unset.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../src/cli/commands.js";
import type { DoctorReport } from "../../src/doctor/index.js";
import { connectCluster } from "../../src/kube/cluster.js";
import { runPass } from "../../src/run/pass.js";
import { silentLogger } from "../../src/log.js";
import { defaultPolicy } from "../../src/policy/load.js";
import type { KueueFlavor } from "../../src/ledger/kueue-quota.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import {
  type Controller,
  createQueues,
  gpuFlavorCluster,
  hasCondition,
  installKueueCrds,
  kueueBin,
  QUEUE_LABEL,
  startKueue,
  workloadFor,
} from "./harness/kueue.js";
import { startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { JOB_CONTROLLER } from "./harness/trainer.js";
import { createNamespace } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kueueBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-ledger";
const OWN = "quartermaster";
const CLUSTER_QUEUE = "gpu-cluster-queue";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const GPU = "nvidia.com/gpu";
const { a100: A100_NODE, h100: H100_NODE, nodes: CLUSTER, flavors: FLAVORS } = gpuFlavorCluster();
/** a100's quota is twice its node's GPUs; h100's matches. */
const QUOTA: Record<string, Record<string, number | string>> = {
  a100: { [GPU]: 16, cpu: 64, memory: "512Gi" },
  h100: { [GPU]: 8, cpu: 64, memory: "512Gi" },
};

const queuedJob = (name: string): Obj => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
  spec: {
    parallelism: 2,
    completions: 2,
    completionMode: "Indexed",
    backoffLimit: 0,
    template: {
      spec: {
        restartPolicy: "Never",
        containers: [
          { name: "train", image: "registry.invalid/train:1", resources: { requests: { cpu: "4", memory: "32Gi", [GPU]: "4" }, limits: { [GPU]: "4" } } },
        ],
      },
    },
  },
});

/** Runs the CLI in this process; stdout, stderr and the exit code. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, {
    stdout: (l) => (stdout += `${l}\n`),
    stderr: (l) => (stderr += `${l}\n`),
    cwd: process.cwd(),
    shutdown: new Promise(() => {}),
  });
  return { code, stdout, stderr };
}

describe("the ledger per Kueue flavor and doctor's over-quota check, through the real Kueue", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let kueue: Controller | undefined;
  const started = performance.now();

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane({ scheduler: true, controllers: [JOB_CONTROLLER] });
    nodes = await startVirtualNodes(cp, CLUSTER);
    await installKueueCrds(cp);
    kueue = await startKueue(cp, bins.bin);
    // Opted in: Quartermaster's webhooks would serve it, so doctor judges its flavors against the allow-lists.
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, OWN);
    await createQueues(cp, { namespace: NS, flavors: FLAVORS, clusterQueue: CLUSTER_QUEUE, localQueue: LOCAL_QUEUE, quota: (f) => QUOTA[f.name]! });
  });
  after(async () => {
    nodes?.stop();
    await kueue?.stop();
    await cp?.stop();
    console.log(`kueue-ledger suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  it("a queued Job admitted into a100 and bound; one pass: the ledger per flavor; `ledger` prints it; `doctor` warns about a100 alone", async () => {
    const r = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, queuedJob("train-a"));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await cp.until("the Workload of train-a to be admitted", async () => hasCondition(await workloadFor(cp, NS, "Job", "train-a"), "Admitted"), 120_000, 250);
    await cp.until(
      "2 pods of train-a bound onto the A100 node",
      async () => {
        const pods = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=batch.kubernetes.io/job-name=train-a`)).body.items as Obj[];
        return pods.length === 2 && pods.every((p) => p.spec.nodeName === A100_NODE.name);
      },
      120_000,
      250,
    );
    await cp.until(
      "Kueue's usage of 8 GPUs in a100",
      async () => {
        const cq = (await cp.api("GET", `/apis/kueue.x-k8s.io/v1beta2/clusterqueues/${CLUSTER_QUEUE}`)).body;
        const f = (cq.status?.flavorsUsage ?? []).find((x: Obj) => x.name === "a100");
        return f?.resources?.find((x: Obj) => x.name === GPU)?.total === "8";
      },
      120_000,
      250,
    );

    const report = await runPass({
      cluster: await connectCluster(cp.kubeconfig),
      policy: defaultPolicy(),
      log: silentLogger(),
      now: () => new Date(),
      dryRun: false,
      namespace: OWN,
    });
    assert.deepEqual(report.failed, []);
    const flavors = report.plan.ledger.kueue?.flavors ?? [];
    const figures = (f: KueueFlavor | undefined) => {
      const g = f?.resources[GPU];
      return g && { quota: g.quota, physical: g.physical, inUse: g.inUse, kueueUsage: g.kueueUsage, nodes: f!.nodes, clusterQueues: f!.clusterQueues };
    };
    assert.deepEqual(
      flavors.map((f) => [f.name, figures(f)]),
      [
        ["a100", { quota: 16, physical: 8, inUse: 8, kueueUsage: 8, nodes: 1, clusterQueues: [CLUSTER_QUEUE] }],
        ["h100", { quota: 8, physical: 8, inUse: 0, kueueUsage: 0, nodes: 1, clusterQueues: [CLUSTER_QUEUE] }],
      ],
    );

    const ledger = await cli(["ledger", "--namespace", OWN, "--kubeconfig", cp.kubeconfig]);
    assert.equal(ledger.code, 0, ledger.stderr);
    assert.match(ledger.stdout, /\na100\s+nvidia\.com\/gpu\s+16\s+8\s+8\s+8\s+\d+\s+1\s+gpu-cluster-queue\s+\S+\s+quota-over-physical/);
    assert.match(ledger.stdout, /\nh100\s+nvidia\.com\/gpu\s+8\s+8\s+0\s+0\s+0\s+1\s+gpu-cluster-queue/);
    const json = await cli(["ledger", "-o", "json", "--namespace", OWN, "--kubeconfig", cp.kubeconfig]);
    assert.deepEqual(JSON.parse(json.stdout).kueue, report.plan.ledger.kueue);

    const doctor = await cli(["doctor", "-o", "json", "--namespace", OWN, "--kubeconfig", cp.kubeconfig]);
    const d = JSON.parse(doctor.stdout) as DoctorReport;
    const kueueFindings = d.findings.filter((f) => f.check.startsWith("kueue-")).map((f) => `${f.severity} ${f.check} ${f.subject}: ${f.message}`);
    const quota = kueueFindings.filter((f) => f.includes("kueue-quota"));
    assert.equal(quota.length, 1, kueueFindings.join("\n"));
    assert.match(
      quota[0]!,
      /^warning kueue-quota ResourceFlavor a100: ClusterQueue gpu-cluster-queue \(16\) gives flavor a100 a nominal quota of 16 nvidia\.com\/gpu, but the 1 node its nodeLabels \(nvidia\.com\/gpu\.product=A100-SXM4-40GB\) select has 8 allocatable/,
    );
    assert.ok(
      kueueFindings.some((f) =>
        /^warning kueue-webhooks jobs\.mutate\.quartermaster\.dev: Kueue mutates .*kubeflow\.org\/pytorchjobs.* is not registered/.test(f),
      ),
      kueueFindings.join("\n"),
    );
    assert.ok(doctor.code >= 1);
    assert.ok(!kueueFindings.some((f) => f.startsWith("warning kueue-flavors")), kueueFindings.join("\n"));

    // A policy that allows only H100s in the namespace: the a100 flavor its LocalQueue feeds contradicts it.
    const policyFile = join(cp.dir, "h100-only-policy.yaml");
    writeFileSync(policyFile, `namespaces:\n  - pattern: ${NS}\n    limits:\n      allowedAccelerators: [${H100_NODE.labels[PRODUCT]}]\n`);
    const strict = JSON.parse(
      (await cli(["doctor", "-o", "json", "--namespace", OWN, "--policy", policyFile, "--kubeconfig", cp.kubeconfig])).stdout,
    ) as DoctorReport;
    const flavorFindings = strict.findings.filter((f) => f.check === "kueue-flavors" && f.severity !== "ok");
    assert.deepEqual(
      flavorFindings.map((f) => f.subject),
      ["ResourceFlavor a100"],
    );
    assert.match(
      flavorFindings[0]!.message,
      new RegExp(
        `^LocalQueue ${NS}/${LOCAL_QUEUE} feeds ClusterQueue ${CLUSTER_QUEUE}, which admits into flavor a100 .*accelerator A100-SXM4-40GB is not allowed in namespace ${NS}`,
      ),
    );
  });
});

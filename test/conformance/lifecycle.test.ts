/**
 * Lifecycle on real phases (issue 34): jobs run by the real Kubeflow training operator v1.9.4 (QM_OPERATOR_BIN)
 * and by Quartermaster's own job controller (Caffe2Job), whose pods are scheduled by kube-scheduler onto kwok
 * GPU nodes (QM_KWOK_BIN, `test/e2e/harness/kwok.ts`: the fixtures' shapes of `test/fixtures/nodes.ts`) and
 * really start, succeed and fail there (exit codes by pod annotation, `podOutcome`), while Quartermaster's
 * resident reconciler runs in-process (`startWatch`, as the reconciler's ServiceAccount of manifests/base, a
 * full pass every 5 s). Nobody writes a status by hand. Cases, each bounded by a wait that names it:
 *
 * 1. TTL: a PyTorchJob (Master + 2 Workers, 1 GPU each) runs on the GPU nodes: the Workers exit 0 3 s after
 *    they run, the Master (whose end decides a PyTorchJob's, so it ends last) is given exit 0 after 3 s once
 *    they have; every pod is seen Running then Succeeded, the operator marks the job Succeeded, and with
 *    `ttlSecondsAfterFinished: 3` it is deleted (by the operator or Quartermaster's watch, whichever comes
 *    first: the log says which) no earlier than completionTime + 3 s and within 5 s after that;
 * 2. CleanPodPolicy Running / All / None on jobs that finish while their Workers still run (the Master is given
 *    exit 0 once both Workers run): Running deletes the Running Workers and keeps the Succeeded Master, All
 *    deletes every pod, None keeps all; the end state holds past a full pass of the watch;
 * 3. ExitCode with the operator: a PyTorchJob Worker exiting 137 (retryable) is recreated by the operator (new
 *    uid) while the job runs on; the new pod exiting 1 (permanent) fails the job;
 * 4. ExitCode with Quartermaster as the controller (Caffe2Job, no operator): its pods, created by the watch,
 *    run on kwok; a worker exiting 137 is deleted and recreated by Quartermaster (new uid,
 *    `quartermaster.dev/restarts` 1, its Events), then both exit 0 and Quartermaster writes Succeeded;
 * 5. GPU-seconds: the ledgers of two of the watch's passes, 5 s or more apart, show a job whose two GPU pods
 *    keep running accruing 2 GPU-seconds a second (`settledUsage`);
 * 6. stale node: the node holding one of those pods has its Lease stopped (`stopNodeLease`); a ledger written
 *    after the grace period (`reconciler.leaseGracePeriodSeconds` 8 s, kwok renewing every 2.5 s) marks it
 *    stale with 0 free GPUs, the other GPU nodes not; its Lease given back, it is healthy again.
 *
 * Pod outcomes given to a running pod (an annotation patched on it) stand for "this process ends now" where
 * the order of ends matters; the rest come from the templates. kwok's own delays (1 to 6 s a step, init
 * containers included: the operator gives PyTorchJob Workers one) are left as they are.
 * Run under `unshare --net` (the operator's webhook server listens on every interface). Skips, saying why,
 * without QM_OPERATOR_BIN, QM_KWOK_BIN or QM_K8S_BIN_DIR.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { parse, parseAllDocuments } from "yaml";
import { readClusterLedger } from "../../src/kube/ledger.js";
import { startWatch, type Watcher } from "../../src/run/watch.js";
import { checkPolicy } from "../../src/policy/load.js";
import { settledUsage, type Ledger } from "../../src/ledger/compute.js";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { EXIT_CODE, kwokBin, kwokNodes, podOutcome, resumeNodeLease, startKwok, stopNodeLease, type Controller } from "../e2e/harness/kwok.js";
import { installOperatorCrds, operatorBin, startOperator, type Operator } from "../e2e/harness/operator.js";
import { ROOT, applyOwnManifests, createNamespace } from "../e2e/harness/webhook.js";
import { NVIDIA_GPU_TAINT, PLACEMENT_CLUSTER } from "../fixtures/nodes.js";
import { sleep, type Obj } from "./operator-jobs.js";

const opBin = operatorBin();
const kwok = kwokBin();
const SKIP = !opBin
  ? "QM_OPERATOR_BIN is not set (export QM_OPERATOR_BIN=$(bash test/e2e/operator/build.sh)/training-operator)"
  : "skip" in kwok
    ? kwok.skip
    : false;

const NS = "team-lifecycle";
const GPU = "nvidia.com/gpu";
/** Three 8-GPU NVIDIA nodes in two zones and one CPU node. */
const NODES = PLACEMENT_CLUSTER.filter((n) => ["a100-mig-disabled", "h100-no-mig", "h100-zone-b", "cpu"].includes(n.name));
const GPU_NODES = new Set(NODES.filter((n) => (n.allocatable[GPU] ?? 0) > 0).map((n) => n.name));
/** kwok renews each Lease every quarter of this; the ledger calls a node stale after GRACE_S without a renewal. */
const LEASE_S = 10;
const GRACE_S = 8;
const RESYNC_S = 5;
const POLICY = `reconciler:\n  leaseGracePeriodSeconds: ${GRACE_S}\n`;
const TOLERATIONS = [{ key: NVIDIA_GPU_TAINT.key, operator: "Exists", effect: NVIDIA_GPU_TAINT.effect }];
const IMAGE = "registry.invalid/train:1";

/** A replica type of a PyTorchJob: `outcome` gives its pods their end (none: they run until deleted). */
interface Replica {
  replicas: number;
  outcome?: { exitCode: number; afterMs?: number };
}

const pytorchJob = (name: string, replicas: Record<string, Replica>, o: { runPolicy?: Obj; restartPolicy?: string } = {}): Obj => ({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name, namespace: NS },
  spec: {
    runPolicy: o.runPolicy ?? {},
    pytorchReplicaSpecs: Object.fromEntries(
      Object.entries(replicas).map(([type, r]) => [
        type,
        {
          replicas: r.replicas,
          restartPolicy: o.restartPolicy ?? "Never",
          template: {
            metadata: { annotations: r.outcome ? podOutcome(r.outcome) : {} },
            spec: {
              tolerations: TOLERATIONS,
              containers: [{ name: "pytorch", image: IMAGE, resources: { requests: { cpu: "1" }, limits: { [GPU]: "1" } } }],
            },
          },
        },
      ]),
    ),
  },
});

describe("lifecycle on real phases: the training operator, Quartermaster's watch and kwok GPU nodes", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let kw: Controller | undefined;
  let operator: Operator | undefined;
  let watcher: Watcher | undefined;
  let reconciler: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  const lines: Obj[] = [];
  const started = performance.now();

  before(async () => {
    if (!opBin || "skip" in kwok) return;
    cp = await startControlPlane({ scheduler: true, controllerManager: true });
    await installOperatorCrds(cp);
    // Caffe2Job, which no operator of v1.9.4 serves: the project's CRD for it.
    const caffe2 = parseAllDocuments(readFileSync(join(ROOT, "test/e2e/crds/kubeflow.yaml"), "utf8"))
      .map((d) => d.toJS() as Obj)
      .find((d) => d?.metadata?.name === "caffe2jobs.kubeflow.org");
    assert.ok(caffe2, "the Caffe2Job CRD in test/e2e/crds/kubeflow.yaml");
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(caffe2));
    assert.equal(applied.code, 0, applied.stderr);
    const established = await cp.kubectl(["wait", "--for=condition=Established", "crd/caffe2jobs.kubeflow.org", "--timeout=60s"]);
    assert.equal(established.code, 0, established.stderr);
    await applyOwnManifests(cp);
    reconciler = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    kw = await startKwok(cp, kwok.bin, { leaseDurationSeconds: LEASE_S });
    const nodes = await kwokNodes(cp, NODES);
    operator = await startOperator(cp, opBin);
    const log = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    watcher = await startWatch({
      kubeconfig: reconciler.kubeconfig,
      policy: checkPolicy(parse(POLICY), "lifecycle"),
      log,
      namespace: "quartermaster",
      holder: "lifecycle-1",
      leaseSeconds: 15,
      resyncSeconds: RESYNC_S,
    });
    await cp.until("the watch takes the Lease", () => watcher!.leading(), 10_000, 100);
    console.log(
      `lifecycle: ${nodes.names.length} kwok nodes Ready in ${nodes.readyMs.toFixed(0)} ms; set up in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });
  after(async () => {
    if (process.env.QM_DEBUG) for (const l of lines) console.error(JSON.stringify(l));
    await watcher?.stop();
    await operator?.stop();
    await kw?.stop();
    await cp?.stop();
    console.log(`lifecycle suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const logs = (): string =>
    `\n--- training-operator\n${operator?.logs(20) ?? ""}\n--- kwok\n${kw?.logs(10) ?? ""}\n--- watch\n${lines
      .slice(-15)
      .map((l) => JSON.stringify(l))
      .join("\n")}`;
  const until = (what: string, cond: () => Promise<boolean>, ms = 60_000, every = 250): Promise<void> => cp.until(`${what}${logs()}`, cond, ms, every);

  const ptPath = (name = ""): string => `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs${name ? `/${name}` : ""}`;
  const c2Path = (name = ""): string => `/apis/kubeflow.org/v1alpha1/namespaces/${NS}/caffe2jobs${name ? `/${name}` : ""}`;
  const create = async (path: string, obj: Obj): Promise<Obj> => {
    const r = await cp.api("POST", path, obj);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  };
  const get = async (path: string): Promise<Obj | undefined> => {
    const r = await cp.api("GET", path);
    if (r.status === 404) return undefined;
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };
  const podsOf = async (selector: string): Promise<Obj[]> =>
    ((await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(selector)}`)).body.items as Obj[]).sort((a, b) =>
      a.metadata.name < b.metadata.name ? -1 : 1,
    );
  const ptPods = (job: string): Promise<Obj[]> => podsOf(`training.kubeflow.org/job-name=${job}`);
  const condition = (o: Obj | undefined, type: string): Obj | undefined =>
    (o?.status?.conditions ?? []).find((c: Obj) => c.type === type && c.status === "True");
  const phase = (p: Obj): string => (p.metadata.deletionTimestamp ? "Terminating" : (p.status?.phase ?? "?"));
  const annotate = async (pod: string, annotations: Record<string, string>): Promise<void> => {
    const r = await cp.api("PATCH", `/api/v1/namespaces/${NS}/pods/${pod}`, { metadata: { annotations } }, { "content-type": "application/merge-patch+json" });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };
  const deleteJob = async (path: string): Promise<void> => {
    const r = await cp.api("DELETE", path, { propagationPolicy: "Foreground" });
    assert.ok([200, 202, 404].includes(r.status), JSON.stringify(r.body));
  };
  /** The ledger of the watch's last pass, job usage settled to its generatedAt. */
  const ledger = async (): Promise<Ledger | undefined> => {
    const read = await readClusterLedger(cp.kubeconfig, "quartermaster");
    return read.ledger && settledUsage(read.ledger);
  };

  it("TTL: a PyTorchJob's GPU pods run and succeed on kwok nodes, the operator marks it Succeeded, it is deleted within 5 s after completionTime + 3 s", async () => {
    const TTL = 3;
    await create(
      ptPath(),
      pytorchJob(
        "ttl",
        { Master: { replicas: 1 }, Worker: { replicas: 2, outcome: { exitCode: 0, afterMs: 3000 } } },
        {
          runPolicy: { ttlSecondsAfterFinished: TTL, cleanPodPolicy: "None" },
        },
      ),
    );
    // Every phase each pod is seen in, and where it ran; polled until the job is gone.
    interface Seen {
      name: string;
      node?: string;
      phases: string[];
    }
    const seen = new Map<string, Seen>();
    let completionTime: string | undefined;
    let goneAt: number | undefined;
    await until(
      "job ttl deleted after its TTL",
      async () => {
        const job = await get(ptPath("ttl"));
        if (!job) {
          goneAt = Date.now();
          return true;
        }
        if (condition(job, "Succeeded")) completionTime ??= job.status.completionTime;
        const pods = await ptPods("ttl");
        // The Master decides a PyTorchJob's success: it exits last, 3 s after it hears that both Workers succeeded.
        const master = pods.find((p) => p.metadata.name.includes("-master-"));
        const workersDone = pods.filter((p) => p.metadata.name.includes("-worker-") && phase(p) === "Succeeded").length === 2;
        if (workersDone && master && !master.metadata.annotations?.[EXIT_CODE])
          await annotate(master.metadata.name, podOutcome({ exitCode: 0, afterMs: 3000 }));
        for (const p of pods) {
          const s: Seen = seen.get(p.metadata.uid) ?? { name: p.metadata.name, phases: [] };
          s.node ??= p.spec.nodeName;
          if (s.phases.at(-1) !== phase(p)) s.phases.push(phase(p));
          seen.set(p.metadata.uid, s);
        }
        return false;
      },
      120_000,
      100,
    );
    assert.ok(completionTime, `the operator marked ttl Succeeded before it went: ${JSON.stringify([...seen.values()])}`);
    assert.equal(seen.size, 3, JSON.stringify([...seen.values()]));
    for (const s of seen.values()) {
      assert.ok(s.node && GPU_NODES.has(s.node), `${s.name} ran on a GPU node (${s.node})`);
      assert.ok(s.phases.includes("Running") && s.phases.includes("Succeeded"), `${s.name} phases ${s.phases.join(" → ")}`);
      assert.ok(s.phases.indexOf("Running") < s.phases.indexOf("Succeeded"), `${s.name} phases ${s.phases.join(" → ")}`);
    }
    // completionTime has whole seconds (the true moment is up to 1 s later): its TTL runs out no earlier than this,
    // and the 5 s allowed after it get that second.
    const expiry = Date.parse(completionTime) + TTL * 1000;
    const late = goneAt! - expiry;
    const byWatch = lines.some((l) => l.msg === "watch: delete" && l.action === "delete Job" && l.name === "ttl");
    console.log(`lifecycle: ttl deleted ${late} ms after completionTime + ${TTL} s (${byWatch ? "by Quartermaster's watch" : "by the operator"})`);
    assert.ok(late >= 0, `deleted ${-late} ms before its TTL ran out`);
    assert.ok(late < 5000 + 1000, `deleted ${late} ms after completionTime + ${TTL} s`);
  });

  // Once both Workers run, the Master is told to exit 0 after 1 s (the job Succeeds: PyTorchJob's Master decides);
  // the Workers run on.
  const CLEAN = [
    { policy: "Running", workersKept: false, masterKept: true },
    { policy: "All", workersKept: false, masterKept: false },
    { policy: "None", workersKept: true, masterKept: true },
  ] as const;

  it("CleanPodPolicy on jobs finished while their Workers run: Running deletes the Running pods and keeps the Succeeded Master, All deletes every pod, None keeps all", async () => {
    for (const c of CLEAN) {
      await create(
        ptPath(),
        pytorchJob(
          `clean-${c.policy.toLowerCase()}`,
          { Master: { replicas: 1 }, Worker: { replicas: 2 } },
          {
            runPolicy: { cleanPodPolicy: c.policy },
          },
        ),
      );
    }
    for (const c of CLEAN) {
      const name = `clean-${c.policy.toLowerCase()}`;
      // The Workers are seen Running (on kwok) before the job finishes.
      const workersRunning = new Set<string>();
      await until(
        `${name} Succeeded`,
        async () => {
          const pods = await ptPods(name);
          for (const p of pods) if (p.metadata.name.includes("-worker-") && phase(p) === "Running") workersRunning.add(p.metadata.uid);
          const master = pods.find((p) => p.metadata.name.includes("-master-"));
          if (workersRunning.size === 2 && master && phase(master) === "Running" && !master.metadata.annotations?.[EXIT_CODE])
            await annotate(master.metadata.name, podOutcome({ exitCode: 0, afterMs: 1000 }));
          return condition(await get(ptPath(name)), "Succeeded") !== undefined;
        },
        90_000,
        200,
      );
      assert.equal(workersRunning.size, 2, `${name}: both Workers seen Running`);
      const expected = (pods: Obj[]): boolean => {
        const workers = pods.filter((p) => p.metadata.name.includes("-worker-") && phase(p) !== "Terminating");
        const master = pods.filter((p) => p.metadata.name.includes("-master-") && phase(p) !== "Terminating");
        return (
          workers.length === (c.workersKept ? 2 : 0) &&
          workers.every((p) => phase(p) === "Running") &&
          master.length === (c.masterKept ? 1 : 0) &&
          master.every((p) => phase(p) === "Succeeded")
        );
      };
      let pods: Obj[] = [];
      await until(`${name}: its pods as CleanPodPolicy ${c.policy} leaves them`, async () => expected((pods = await ptPods(name))), 20_000, 200);
      // And they stay so (no later pass or resync takes more).
      await sleep(RESYNC_S * 1000 + 1000);
      pods = await ptPods(name);
      assert.ok(expected(pods), `${name}: ${JSON.stringify(pods.map((p) => [p.metadata.name, phase(p)]))}`);
    }
    for (const c of CLEAN) await deleteJob(ptPath(`clean-${c.policy.toLowerCase()}`));
  });

  it("ExitCode with the operator: a Worker exiting 137 is recreated (new uid) and the job runs on; the new pod exiting 1 fails the job", async () => {
    await create(
      ptPath(),
      pytorchJob("exit", { Master: { replicas: 1 }, Worker: { replicas: 1 } }, { restartPolicy: "ExitCode", runPolicy: { cleanPodPolicy: "All" } }),
    );
    let pods: Obj[] = [];
    await until("exit's pods Running", async () => (pods = await ptPods("exit")).length === 2 && pods.every((p) => phase(p) === "Running"));
    const worker = pods.find((p) => p.metadata.name.includes("-worker-"))!;
    await annotate(worker.metadata.name, podOutcome({ exitCode: 137 }));
    let again: Obj | undefined;
    await until("the operator recreates the Worker", async () => {
      again = (await ptPods("exit")).find((p) => p.metadata.name === worker.metadata.name);
      return again !== undefined && again.metadata.uid !== worker.metadata.uid && phase(again) === "Running";
    });
    let job = await get(ptPath("exit"));
    assert.equal(condition(job, "Failed"), undefined, JSON.stringify(job?.status));
    assert.ok(condition(job, "Running") || condition(job, "Restarting"), JSON.stringify(job?.status));
    await annotate(again!.metadata.name, podOutcome({ exitCode: 1 }));
    await until("exit Failed", async () => condition((job = await get(ptPath("exit"))), "Failed") !== undefined);
    assert.equal(condition(job, "Succeeded"), undefined);
    await deleteJob(ptPath("exit"));
  });

  it("Caffe2Job (Quartermaster its controller): pods run on kwok, a worker exiting 137 is recreated by Quartermaster, then all exit 0 and Quartermaster writes Succeeded", async () => {
    await create(c2Path(), {
      apiVersion: "kubeflow.org/v1alpha1",
      kind: "Caffe2Job",
      metadata: { name: "c2" },
      spec: {
        RuntimeID: "run-1",
        backendSpecs: { backendType: "redis", redisHost: "redis", redisPort: 6379 },
        replicaSpecs: {
          replicas: 2,
          restartPolicy: "ExitCode",
          template: {
            spec: { tolerations: TOLERATIONS, containers: [{ name: "caffe2", image: IMAGE, resources: { requests: { cpu: "1" }, limits: { [GPU]: "1" } } }] },
          },
        },
      },
    });
    const c2Pods = (): Promise<Obj[]> => podsOf(`caffe2_job_key=${NS}-c2`);
    let pods: Obj[] = [];
    await until(
      "c2's two pods Running on GPU nodes",
      async () => (pods = await c2Pods()).length === 2 && pods.every((p) => phase(p) === "Running" && GPU_NODES.has(p.spec.nodeName)),
    );
    const [first, second] = pods as [Obj, Obj];
    await annotate(first.metadata.name, podOutcome({ exitCode: 137 }));
    let job: Obj | undefined;
    let again: Obj | undefined;
    await until("c2's failed worker recreated (a new uid) and Running", async () => {
      again = (await c2Pods()).find((p) => p.metadata.name === first.metadata.name);
      return again !== undefined && again.metadata.uid !== first.metadata.uid && phase(again) === "Running";
    });
    job = await get(c2Path("c2"));
    assert.equal(job?.metadata.annotations?.["quartermaster.dev/restarts"], "1");
    assert.equal(condition(job, "Failed"), undefined, JSON.stringify(job?.status));
    assert.equal((await c2Pods()).find((p) => p.metadata.name === second.metadata.name)?.metadata.uid, second.metadata.uid, "the other worker kept");
    for (const p of [again!, second]) await annotate(p.metadata.name, podOutcome({ exitCode: 0, afterMs: 1000 }));
    await until("Quartermaster marks c2 Succeeded", async () => condition((job = await get(c2Path("c2"))), "Succeeded") !== undefined);
    assert.ok(job!.status.completionTime);
    const events = ((await cp.api("GET", `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name=c2`)).body.items as Obj[]).map(
      (e) => `${e.type} ${e.reason} ${e.message}`,
    );
    assert.ok(events.includes(`Normal SuccessfulDeletePod Deleted pod: ${first.metadata.name}`), events.join("\n"));
    assert.ok(
      events.some((e) => e.startsWith("Warning JobRestarting")),
      events.join("\n"),
    );
    assert.deepEqual(job!.status.replicaStatuses, { active: 0, succeeded: 2, failed: 0 });
    await deleteJob(c2Path("c2"));
  });

  let steadyNode = "";

  it("GPU-seconds: the ledger of two of the watch's passes shows a running job's GPU-seconds growing at its 2 GPUs a second", async () => {
    await create(ptPath(), pytorchJob("steady", { Master: { replicas: 1 }, Worker: { replicas: 1 } }, { runPolicy: { cleanPodPolicy: "All" } }));
    let pods: Obj[] = [];
    await until("steady's two pods Running", async () => (pods = await ptPods("steady")).length === 2 && pods.every((p) => phase(p) === "Running"));
    steadyNode = pods[0]!.spec.nodeName;
    const key = `${NS}/steady`;
    let first: Ledger | undefined;
    await until("a ledger with steady's 2 GPUs", async () => (first = await ledger())?.jobs[key]?.[GPU]?.allocated === 2, (RESYNC_S * 3 + 10) * 1000, 500);
    let second: Ledger | undefined;
    await until(
      "a ledger 5 s or more later",
      async () => Date.parse((second = await ledger())?.generatedAt ?? "") - Date.parse(first!.generatedAt) >= 5000,
      (RESYNC_S * 3 + 10) * 1000,
      500,
    );
    const [a, b] = [first!.jobs[key]![GPU]!, second!.jobs[key]![GPU]!];
    const seconds = (Date.parse(second!.generatedAt) - Date.parse(first!.generatedAt)) / 1000;
    console.log(`lifecycle: steady ${a.gpuSeconds.toFixed(1)} → ${b.gpuSeconds.toFixed(1)} GPU-seconds over ${seconds.toFixed(1)} s`);
    assert.equal(b.allocated, 2);
    assert.ok(b.gpuSeconds > a.gpuSeconds, `${a.gpuSeconds} → ${b.gpuSeconds}`);
    assert.ok(Math.abs(b.gpuSeconds - a.gpuSeconds - 2 * seconds) < 0.5, `${b.gpuSeconds - a.gpuSeconds} GPU-seconds over ${seconds} s`);
    for (const n of second!.nodes.filter((x) => GPU_NODES.has(x.name))) assert.equal(n.stale, false, `${n.name}: ${n.staleReason}`);
    const held = second!.nodes.find((n) => n.name === steadyNode);
    assert.ok(held && held.pods.some((p) => p.job === key), JSON.stringify(held));
  });

  it("stale node: its Lease stopped while it holds a running GPU pod, the next ledger marks it stale with 0 free GPUs; given back, healthy again", async () => {
    assert.ok(steadyNode, "case 4 ran steady");
    const stopped = Date.now();
    await stopNodeLease(cp, steadyNode);
    let l: Ledger | undefined;
    const entry = (x: Ledger | undefined, name: string) => x?.nodes.find((n) => n.name === name);
    await until(
      "the ledger marks the node stale",
      async () => entry((l = await ledger()), steadyNode)?.stale === true,
      (GRACE_S + RESYNC_S * 3 + 10) * 1000,
      500,
    );
    console.log(`lifecycle: ${steadyNode} stale in the ledger ${Date.now() - stopped} ms after its Lease stopped (grace ${GRACE_S} s)`);
    const node = entry(l, steadyNode)!;
    assert.ok(Date.parse(l!.generatedAt) - stopped >= GRACE_S * 1000, `stale at ${l!.generatedAt}, not before the grace period ran out`);
    assert.equal(node.resources[GPU]!.free, 0, JSON.stringify(node.resources));
    assert.ok(node.resources[GPU]!.allocated >= 1, JSON.stringify(node));
    assert.ok(
      node.pods.some((p) => p.job === `${NS}/steady`),
      JSON.stringify(node.pods),
    );
    for (const other of l!.nodes.filter((n) => n.name !== steadyNode && GPU_NODES.has(n.name))) {
      assert.equal(other.stale, false, `${other.name}: ${other.staleReason}`);
      assert.equal(other.resources[GPU]!.free, other.resources[GPU]!.allocatable - other.resources[GPU]!.allocated);
    }
    await resumeNodeLease(cp, steadyNode);
    await until(
      "the node healthy again in the ledger",
      async () => entry(await ledger(), steadyNode)?.stale === false,
      (LEASE_S + RESYNC_S * 3 + 10) * 1000,
      500,
    );
    await deleteJob(ptPath("steady"));
  });

  it("the watch logged no error", () => {
    const errors = lines.filter((l) => l.level >= 50);
    assert.deepEqual(errors, []);
  });
});

/**
 * End to end: `reconcile --watch` keeps the clock of the operators' kinds too. On a real kube-apiserver with the
 * garbage collector, as the reconciler's ServiceAccount of manifests/base: a finished job's CleanPodPolicy acts
 * within moments and its TTL within a second or two of running out, for each Kubeflow v1 kind an operator runs;
 * an unfinished job is never touched; a kind whose CRD is not installed (TrainJob here) does not hold the others
 * back. No operator runs: the test writes the jobs' and pods' status as an operator and a kubelet would.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { startWatch, type Watcher } from "../../src/run/watch.js";
import { defaultPolicy } from "../../src/policy/load.js";
import type { ControlPlane } from "./harness/controlplane.js";
import { reconcilerCluster } from "./harness/webhook.js";

const NS = "team-hygiene";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
type Obj = Record<string, any>;

/** The Kubeflow v1 kinds their operators run (Caffe2Job, which Quartermaster runs, has its own suite). */
const KINDS = [
  { kind: "PyTorchJob", plural: "pytorchjobs", replicas: "pytorchReplicaSpecs", type: "Worker" },
  { kind: "TFJob", plural: "tfjobs", replicas: "tfReplicaSpecs", type: "Worker" },
  { kind: "MXJob", plural: "mxjobs", replicas: "mxReplicaSpecs", type: "Worker" },
  { kind: "XGBoostJob", plural: "xgboostjobs", replicas: "xgbReplicaSpecs", type: "Worker" },
  { kind: "PaddleJob", plural: "paddlejobs", replicas: "paddleReplicaSpecs", type: "Worker" },
  { kind: "JAXJob", plural: "jaxjobs", replicas: "jaxReplicaSpecs", type: "Worker" },
] as const;
type Kind = (typeof KINDS)[number];

describe("reconcile --watch: finished-job hygiene on time for every kind an operator runs", () => {
  let cp: ControlPlane;
  let sa: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  let watcher: Watcher;
  const lines: Obj[] = [];

  /** A resident reconciler as the reconciler's ServiceAccount, logging into `lines`. */
  const watch = (holder: string, resyncSeconds: number): Promise<Watcher> =>
    startWatch({
      kubeconfig: sa.kubeconfig,
      policy: defaultPolicy(),
      log: pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) }),
      namespace: "quartermaster",
      holder,
      leaseSeconds: 15,
      resyncSeconds,
    });

  before(async () => {
    ({ cp, sa } = await reconcilerCluster(NS));
    watcher = await watch("w-1", 3600);
    for (let i = 0; i < 50 && !watcher.leading(); i++) await sleep(100);
    assert.ok(watcher.leading(), "the only instance takes the Lease");
  });
  after(async () => {
    if (process.env.QM_DEBUG) for (const l of lines) console.error(JSON.stringify(l));
    await watcher?.stop();
    await cp?.stop();
  });

  const jobPath = (k: Kind, name = ""): string => `/apis/kubeflow.org/v1/namespaces/${NS}/${k.plural}${name ? `/${name}` : ""}`;
  const createJob = async (k: Kind, name: string, runPolicy: Obj): Promise<string> => {
    const r = await cp.api("POST", jobPath(k), {
      apiVersion: "kubeflow.org/v1",
      kind: k.kind,
      metadata: { name },
      spec: { runPolicy, [k.replicas]: { [k.type]: { replicas: 2, template: { spec: { containers: [{ name: "main", image: "trainer:1" }] } } } } },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.metadata.uid;
  };
  /** A pod (and a Service of the same name) controlled by the job, in `phase`, as an operator and kubelet leave them. */
  const createReplica = async (k: Kind, job: string, uid: string, name: string, phase: string): Promise<void> => {
    const owner = [{ apiVersion: "kubeflow.org/v1", kind: k.kind, name: job, uid, controller: true }];
    // training-operator's labels (pkg/controller.v1/common): the Service selects its pod by them.
    const labels = {
      "training.kubeflow.org/job-name": job,
      "training.kubeflow.org/operator-name": `${k.kind.toLowerCase()}-controller`,
      "training.kubeflow.org/replica-type": k.type.toLowerCase(),
      "training.kubeflow.org/replica-index": name.split("-").at(-1)!,
    };
    const pod = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, ownerReferences: owner, labels },
      spec: { containers: [{ name: "main", image: "trainer:1" }] },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
    const st = await cp.api("PATCH", `/api/v1/namespaces/${NS}/pods/${name}/status`, { status: { phase } }, { "content-type": "application/merge-patch+json" });
    assert.equal(st.status, 200, JSON.stringify(st.body));
    const svc = await cp.api("POST", `/api/v1/namespaces/${NS}/services`, {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, ownerReferences: owner, labels },
      spec: { clusterIP: "None", selector: labels, ports: [{ port: 2222 }] },
    });
    assert.equal(svc.status, 201, JSON.stringify(svc.body));
  };
  /** Marks the job Succeeded at `at` (whole seconds, as the API keeps times). */
  const finish = async (k: Kind, name: string, at: Date): Promise<void> => {
    const t = at.toISOString().replace(/\.\d{3}Z$/, "Z");
    const r = await cp.api(
      "PATCH",
      `${jobPath(k, name)}/status`,
      {
        status: {
          conditions: [{ type: "Succeeded", status: "True", reason: "JobSucceeded", message: "done", lastUpdateTime: t, lastTransitionTime: t }],
          startTime: t,
          completionTime: t,
        },
      },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };
  const exists = async (path: string): Promise<boolean> => (await cp.api("GET", path)).status === 200;
  /** Polls every 50 ms until `path` is gone (or `ms` passes); when it went. */
  const goneAt = async (path: string, ms: number): Promise<number | undefined> => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (!(await exists(path))) return Date.now();
      await sleep(50);
    }
    return undefined;
  };

  it("CleanPodPolicy Running: a finished job's running and pending pods and their Services go within seconds; finished pods stay", async () => {
    const k = KINDS[0];
    const uid = await createJob(k, "clean", { cleanPodPolicy: "Running" });
    await createReplica(k, "clean", uid, "clean-worker-0", "Running");
    await createReplica(k, "clean", uid, "clean-worker-1", "Succeeded");
    await createReplica(k, "clean", uid, "clean-worker-2", "Pending");
    await sleep(1000);
    for (const p of ["clean-worker-0", "clean-worker-1", "clean-worker-2"])
      assert.ok(await exists(`/api/v1/namespaces/${NS}/pods/${p}`), `${p} kept while running`);
    const finished = Date.now();
    await finish(k, "clean", new Date());
    for (const p of ["clean-worker-0", "clean-worker-2"]) {
      const at = await goneAt(`/api/v1/namespaces/${NS}/pods/${p}`, 10_000);
      assert.ok(at !== undefined, `${p} deleted`);
      assert.ok(at - finished < 5000, `${p} deleted ${at - finished} ms after the job finished`);
      assert.equal((await goneAt(`/api/v1/namespaces/${NS}/services/${p}`, 5000)) !== undefined, true, `service ${p} deleted`);
    }
    assert.ok(await exists(`/api/v1/namespaces/${NS}/pods/clean-worker-1`), "the succeeded pod stays for its logs");
    assert.ok(await exists(`/api/v1/namespaces/${NS}/services/clean-worker-1`));
    assert.ok(await exists(jobPath(k, "clean")), "no TTL: the job stays");
  });

  it("TTL: each kind's finished job is deleted within 2 s after its TTL runs out, never before", async () => {
    const TTL = 3;
    const started = await Promise.all(
      KINDS.map(async (k) => {
        const name = `ttl-${k.plural}`;
        const uid = await createJob(k, name, { ttlSecondsAfterFinished: TTL, cleanPodPolicy: "None" });
        await createReplica(k, name, uid, `${name}-worker-0`, "Succeeded");
        const at = new Date(Math.floor(Date.now() / 1000) * 1000);
        await finish(k, name, at);
        return { k, name, expiry: at.getTime() + TTL * 1000 };
      }),
    );
    const results = await Promise.all(
      started.map(async ({ k, name, expiry }) => {
        // Still there just before the TTL runs out.
        await sleep(Math.max(0, expiry - 400 - Date.now()));
        const before = await exists(jobPath(k, name));
        const at = await goneAt(jobPath(k, name), expiry - Date.now() + 10_000);
        return { kind: k.kind, before, lateMs: at === undefined ? undefined : at - expiry };
      }),
    );
    await sleep(1000);
    for (const r of results) {
      // One delete sent per job, however many of its objects' events queue it before the informer sees it go.
      const deletes = lines.filter(
        (l) => l.msg === "watch: delete" && l.action === "delete Job" && l.name === `ttl-${KINDS.find((k) => k.kind === r.kind)!.plural}`,
      );
      assert.equal(deletes.length, 1, `${r.kind}: ${deletes.length} deletes sent`);
      assert.ok(r.before, `${r.kind} still there 400 ms before its TTL ran out`);
      assert.ok(r.lateMs !== undefined, `${r.kind} deleted`);
      assert.ok(r.lateMs >= 0 && r.lateMs < 2000, `${r.kind} deleted ${r.lateMs} ms after its TTL ran out`);
    }
  });

  it("an unfinished job, its pods and Services are never touched, however its pods change", async () => {
    const k = KINDS[1];
    const uid = await createJob(k, "running", { ttlSecondsAfterFinished: 0, cleanPodPolicy: "All" });
    await createReplica(k, "running", uid, "running-worker-0", "Running");
    await createReplica(k, "running", uid, "running-worker-1", "Failed");
    await sleep(3000);
    assert.ok(await exists(jobPath(k, "running")));
    for (const p of ["running-worker-0", "running-worker-1"]) {
      assert.ok(await exists(`/api/v1/namespaces/${NS}/pods/${p}`), p);
      assert.ok(await exists(`/api/v1/namespaces/${NS}/services/${p}`), p);
    }
    assert.deepEqual(
      lines.filter((l) => l.msg === "watch: delete" && String(l.job).endsWith("/running")),
      [],
    );
  });

  it("a namespace that did not opt in: its finished job past its TTL, and the job's running pod, are never touched", async () => {
    const OUT = "team-outside";
    assert.equal((await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: OUT } })).status, 201);
    const path = `/apis/kubeflow.org/v1/namespaces/${OUT}/pytorchjobs`;
    const job = await cp.api("POST", path, {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "outside" },
      spec: {
        runPolicy: { ttlSecondsAfterFinished: 0, cleanPodPolicy: "All" },
        pytorchReplicaSpecs: { Worker: { replicas: 1, template: { spec: { containers: [{ name: "main", image: "t:1" }] } } } },
      },
    });
    assert.equal(job.status, 201, JSON.stringify(job.body));
    const pod = await cp.api("POST", `/api/v1/namespaces/${OUT}/pods`, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "outside-worker-0",
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "outside", uid: job.body.metadata.uid, controller: true }],
      },
      spec: { containers: [{ name: "main", image: "t:1" }] },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
    const t = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
    const done = await cp.api(
      "PATCH",
      `${path}/outside/status`,
      {
        status: {
          conditions: [{ type: "Succeeded", status: "True", reason: "JobSucceeded", message: "done", lastUpdateTime: t, lastTransitionTime: t }],
          completionTime: t,
        },
      },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(done.status, 200, JSON.stringify(done.body));
    await sleep(4000);
    assert.ok(await exists(`${path}/outside`), "the job stays");
    assert.ok(await exists(`/api/v1/namespaces/${OUT}/pods/outside-worker-0`), "its pod stays");
    assert.deepEqual(
      lines.filter((l) => l.namespace === OUT),
      [],
    );
  });

  it("a kind whose CRD is not installed (TrainJob here, and Kueue's three) is said once each and holds nothing back", () => {
    const absent = lines.filter((l) => String(l.msg).includes("not served"));
    assert.deepEqual(absent.map((l) => l.path).sort(), [
      "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
      "/apis/kueue.x-k8s.io/v1beta1/localqueues",
      "/apis/kueue.x-k8s.io/v1beta1/workloads",
      "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
    ]);
    assert.equal(lines.filter((l) => l.level >= 50).length, 0, JSON.stringify(lines.filter((l) => l.level >= 50)));
    assert.deepEqual(
      lines.filter((l) => String(l.msg).startsWith("reconcile: release")),
      [],
      "the operator's own objects are never released",
    );
  });

  it("a full pass reads the informers' caches: after they synced, passes LIST no pod, Service or job again; nodes and the ledger fresh", async () => {
    /** The apiserver's own count of LISTs, by resource (`apiserver_request_total`, every client). */
    const lists = async (): Promise<Map<string, number>> => {
      const r = await cp.api("GET", "/metrics");
      assert.equal(r.status, 200);
      const out = new Map<string, number>();
      for (const line of String(r.body).split("\n")) {
        if (!line.startsWith("apiserver_request_total{") || !line.includes('verb="LIST"')) continue;
        const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? "";
        out.set(resource, (out.get(resource) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
      }
      return out;
    };
    // The suite's watcher hands the Lease over; this one makes a full pass every second.
    await watcher.stop();
    watcher = await watch("w-2", 1);
    const passes = async (n: number): Promise<void> => {
      for (let i = 0; i < 200 && watcher.stats.passes < n; i++) await sleep(50);
      assert.ok(watcher.stats.passes >= n, `${watcher.stats.passes} passes, waited for ${n}`);
    };
    await passes(1);
    await sleep(500); // the first pass's LISTs counted
    const before = await lists();
    await passes(4);
    await sleep(500);
    const after = await lists();
    const delta = (resource: string): number => (after.get(resource) ?? 0) - (before.get(resource) ?? 0);
    assert.ok(delta("nodes") >= 3 && delta("configmaps") >= 3, `nodes +${delta("nodes")}, configmaps +${delta("configmaps")}: each pass lists them fresh`);
    assert.deepEqual(
      ["pods", "services", "namespaces", ...KINDS.map((k) => k.plural)].map((r) => [r, delta(r)]),
      ["pods", "services", "namespaces", ...KINDS.map((k) => k.plural)].map((r) => [r, 0]),
    );
    assert.equal(lines.filter((l) => l.msg === "watch: full pass failed").length, 0);
  });
});

/**
 * kwok v0.8.0 (QM_KWOK_BIN, `test/e2e/kwok/build.sh`; issue 34) as the kubelet of the e2e control plane, with
 * kube-scheduler, kube-controller-manager's job-controller and node-lifecycle-controller (grace period 20 s),
 * through `./harness/kwok.ts` and the Stages of `test/e2e/kwok/stages/`. Quartermaster is not involved: this
 * is the ground the lifecycle and scale suites of issue 34 stand on, shown to do what they will rely on.
 *
 * The cluster is the placement e2e's ten nodes of nine shapes (`PLACEMENT_CLUSTER`: A100 MIG mixed and
 * single, MIG disabled, H100 in two zones and on spot, L4, AMD MI250, CPU on demand and spot; GPU taints), as
 * kwok nodes. The suite shows, each wait bounded (cp.until), nothing asserted on elapsed time except the
 * declared delay as a lower bound:
 * 1. every node Ready, with its labels, taints and allocatable (GPUs and MIG slices) as the fixture says, and a
 *    Lease in kube-node-lease held and renewed by kwok;
 * 2. a pod asking for MIG slices is bound by kube-scheduler to the one node that has them and goes Running:
 *    phase, container state running, Ready, a pod IP from kwok's CIDR; without an outcome it stays Running;
 * 3. a pod annotated with exit code 0 after 2 s Succeeds (terminated exit code 0, Completed, ≥ 1 s after it
 *    started: the API's times have whole seconds); one with exit code 3 Fails with that exit code (Error);
 * 4. restartPolicy OnFailure and a non-zero code: the pod stays Running and its container is restarted in
 *    place (restartCount grows, lastState.terminated carries the code);
 * 5. a batch Job without annotations completes (kwok's own pod-complete) and the Job is Complete; a Job
 *    whose pod template says exit code 2 with backoffLimit 0 is Failed;
 * 6. a node whose Lease is taken from kwok (`stopNodeLease`) keeps its last renewTime and goes Ready=Unknown
 *    (node-lifecycle-controller); given back (`resumeNodeLease`), kwok renews it and makes it Ready again.
 *
 * Skips, saying why, when QM_KWOK_BIN or QM_K8S_BIN_DIR is unset.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PLACEMENT_CLUSTER, NVIDIA_GPU_TAINT, AMD_GPU_TAINT } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { STALE_HOLDER, isReady, kwokBin, kwokNodes, podOutcome, resumeNodeLease, startKwok, stopNodeLease, type Controller } from "./harness/kwok.js";
import { JOB_CONTROLLER } from "./harness/trainer.js";
import { createNamespace } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kwokBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-kwok";
const MIG = "nvidia.com/mig-1g.5gb";
const TOLERATIONS = [NVIDIA_GPU_TAINT, AMD_GPU_TAINT].map((t) => ({ key: t.key, operator: "Exists", effect: t.effect }));
/** The one node offering MIG 1g.5gb slices as their own resource (mig.strategy mixed). */
const MIG_NODE = PLACEMENT_CLUSTER.find((n) => (n.allocatable[MIG] ?? 0) > 0)!;
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
/** node-lifecycle-controller's grace period here (its default is 50 s). */
const GRACE_S = 20;

const pod = (name: string, o: { annotations?: Record<string, string>; restartPolicy?: string; resources?: Record<string, string> } = {}): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, annotations: o.annotations ?? {} },
  spec: {
    restartPolicy: o.restartPolicy ?? "Always",
    tolerations: TOLERATIONS,
    containers: [{ name: "train", image: "registry.invalid/train:1", resources: { requests: { cpu: "1", ...o.resources }, limits: { ...o.resources } } }],
  },
});

const job = (name: string, annotations: Record<string, string> = {}): Obj => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name },
  spec: {
    completions: 2,
    parallelism: 2,
    backoffLimit: 0,
    template: { metadata: { annotations }, spec: { ...pod("x").spec, restartPolicy: "Never" } },
  },
});

describe("kwok v0.8.0 runs the GPU cluster's nodes and pods on the e2e control plane", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let kwok: Controller | undefined;
  const started = performance.now();

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane({
      scheduler: true,
      controllers: [JOB_CONTROLLER, "node-lifecycle-controller"],
      controllerManagerArgs: [`--node-monitor-grace-period=${GRACE_S}s`, "--node-monitor-period=2s"],
    });
    kwok = await startKwok(cp, bins.bin);
    const nodes = await kwokNodes(cp, PLACEMENT_CLUSTER);
    console.log(`kwok: ${nodes.names.length} nodes created in ${nodes.createMs.toFixed(0)} ms, all Ready after ${nodes.readyMs.toFixed(0)} ms`);
    await createNamespace(cp, NS);
  });
  after(async () => {
    await kwok?.stop();
    await cp?.stop();
    console.log(`kwok suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const failMsg = (what: string): string => `${what}\n--- kwok\n${kwok?.logs(30) ?? ""}`;
  const getPod = async (name: string): Promise<Obj> => (await cp.api("GET", `/api/v1/namespaces/${NS}/pods/${name}`)).body;
  const createPod = async (p: Obj): Promise<void> => {
    const r = await cp.api("POST", `/api/v1/namespaces/${NS}/pods`, p);
    assert.equal(r.status, 201, JSON.stringify(r.body));
  };
  const waitPhase = async (name: string, phase: string, ms = 60_000): Promise<Obj> => {
    let last: Obj = {};
    try {
      await cp.until(failMsg(`pod ${name} ${phase}`), async () => (last = await getPod(name)).status?.phase === phase, ms, 250);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n--- its last status\n${JSON.stringify(last.status)}`);
    }
    return last;
  };
  const condition = (o: Obj, type: string): Obj | undefined => (o.status?.conditions ?? []).find((c: Obj) => c.type === type);

  it("makes every node Ready with the fixture's labels, taints and allocatable, and holds its Lease", async () => {
    for (const shape of PLACEMENT_CLUSTER) {
      const node = (await cp.api("GET", `/api/v1/nodes/${shape.name}`)).body as Obj;
      assert.ok(isReady(node), `${shape.name} not Ready: ${JSON.stringify(node.status?.conditions)}`);
      for (const [k, v] of Object.entries(shape.labels)) assert.equal(node.metadata.labels[k], v, `${shape.name} label ${k}`);
      assert.deepEqual(
        (node.spec.taints ?? []).map((t: Obj) => `${t.key}=${t.value}:${t.effect}`).sort(),
        shape.taints.map((t) => `${t.key}=${t.value}:${t.effect}`).sort(),
        `${shape.name} taints`,
      );
      for (const [resource, n] of Object.entries(shape.allocatable)) {
        assert.equal(node.status.allocatable[resource], String(n), `${shape.name} allocatable ${resource}`);
        assert.equal(node.status.capacity[resource], String(n), `${shape.name} capacity ${resource}`);
      }
      assert.equal(node.status.allocatable.cpu, String(shape.cpu), `${shape.name} cpu`);
      const lease = (await cp.api("GET", `${LEASES}/${shape.name}`)).body as Obj;
      assert.ok(lease.spec?.holderIdentity && lease.spec.holderIdentity !== STALE_HOLDER, `${shape.name} lease: ${JSON.stringify(lease)}`);
      assert.equal(lease.spec.leaseDurationSeconds, 40);
      assert.ok(Date.now() - Date.parse(lease.spec.renewTime) < 30_000, `${shape.name} lease renewed at ${lease.spec.renewTime}`);
    }
  });

  it("has kube-scheduler bind a MIG pod to the only node with the slices, and kwok run it", async () => {
    await createPod(pod("mig-runner", { resources: { [MIG]: "2" } }));
    const p = await waitPhase("mig-runner", "Running");
    assert.equal(p.spec.nodeName, MIG_NODE.name);
    const [status] = p.status.containerStatuses as Obj[];
    assert.ok(status?.state?.running?.startedAt, JSON.stringify(p.status.containerStatuses));
    assert.equal(status.ready, true);
    assert.equal(condition(p, "Ready")?.status, "True");
    assert.match(p.status.podIP ?? "", /^10\.244\.\d+\.\d+$/);
    assert.equal(p.status.hostIP, "127.0.0.1");
  });

  it("ends a pod annotated with exit code 0 after its delay: Succeeded, terminated with exit code 0", async () => {
    await createPod(pod("succeeds", { restartPolicy: "Never", annotations: podOutcome({ exitCode: 0, afterMs: 2000 }) }));
    const p = await waitPhase("succeeds", "Succeeded");
    const terminated = p.status.containerStatuses[0].state.terminated as Obj;
    assert.equal(terminated.exitCode, 0);
    assert.equal(terminated.reason, "Completed");
    assert.ok(Date.parse(terminated.finishedAt) - Date.parse(terminated.startedAt) >= 1000, JSON.stringify(terminated));
    assert.equal(condition(p, "Ready")?.status, "False");
  });

  it("fails a pod annotated with exit code 3: Failed, terminated with exit code 3", async () => {
    await createPod(pod("fails", { restartPolicy: "Never", annotations: podOutcome({ exitCode: 3, afterMs: 500 }) }));
    const p = await waitPhase("fails", "Failed");
    const terminated = p.status.containerStatuses[0].state.terminated as Obj;
    assert.equal(terminated.exitCode, 3);
    assert.equal(terminated.reason, "Error");
  });

  it("restarts in place a restartPolicy OnFailure pod whose container exits non-zero", async () => {
    await createPod(pod("crashes", { restartPolicy: "OnFailure", annotations: podOutcome({ exitCode: 1 }) }));
    let last: Obj = {};
    await cp.until(
      failMsg("crashes restarted twice"),
      async () => ((last = await getPod("crashes")).status?.containerStatuses?.[0]?.restartCount ?? 0) >= 2,
      60_000,
      250,
    );
    assert.equal(last.status.phase, "Running");
    assert.equal(last.status.containerStatuses[0].lastState.terminated.exitCode, 1);
    assert.ok(last.status.containerStatuses[0].state.running, JSON.stringify(last.status.containerStatuses));
  });

  it("completes a batch Job's pods (kwok's pod-complete) and fails one whose template says exit code 2", async () => {
    for (const j of [job("completes"), job("exits-2", podOutcome({ exitCode: 2 }))]) {
      const r = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, j);
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const finished = async (name: string, type: string): Promise<Obj> => {
      let last: Obj = {};
      await cp.until(
        failMsg(`job ${name} ${type}`),
        async () => condition((last = (await cp.api("GET", `/apis/batch/v1/namespaces/${NS}/jobs/${name}`)).body), type)?.status === "True",
        90_000,
        500,
      );
      return last;
    };
    const done = await finished("completes", "Complete");
    assert.equal(done.status.succeeded, 2);
    const failed = await finished("exits-2", "Failed");
    assert.equal(condition(failed, "Failed")?.reason, "BackoffLimitExceeded");
    const pods = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=batch.kubernetes.io/job-name=exits-2`)).body.items as Obj[];
    assert.ok(
      pods.some((p) => p.status.containerStatuses?.[0]?.state?.terminated?.exitCode === 2),
      JSON.stringify(pods.map((p) => p.status.containerStatuses)),
    );
  });

  it("leaves the pod without an outcome Running", async () => {
    assert.equal((await getPod("mig-runner")).status.phase, "Running");
  });

  it("lets a node go stale when its Lease is taken from kwok, and Ready again when given back", async () => {
    const name = "cpu-spot";
    const stopped = await stopNodeLease(cp, name);
    await cp.until(
      failMsg(`${name} Ready=Unknown after its lease stopped`),
      async () => condition((await cp.api("GET", `/api/v1/nodes/${name}`)).body, "Ready")?.status === "Unknown",
      (GRACE_S + 40) * 1000,
      1000,
    );
    const lease = (await cp.api("GET", `${LEASES}/${name}`)).body as Obj;
    assert.equal(lease.spec.renewTime, stopped.spec.renewTime, "nothing renewed the lease while it was taken");
    assert.equal(lease.spec.holderIdentity, STALE_HOLDER);
    await resumeNodeLease(cp, name);
    await cp.until(failMsg(`${name} Ready again`), async () => isReady((await cp.api("GET", `/api/v1/nodes/${name}`)).body), 60_000, 1000);
    const renewed = (await cp.api("GET", `${LEASES}/${name}`)).body as Obj;
    assert.notEqual(renewed.spec.holderIdentity, STALE_HOLDER);
  });
});

/**
 * `no-node-shape` against the real kube-scheduler (issue 49): a pod larger than every node can never be scheduled,
 * and the rule says so at CREATE from the device ledger's largest healthy node per GPU resource. Differential, as
 * the GPU counting is (./gpu-differential.test.ts): seeded batch Jobs of one pod each, over the placement cluster's
 * ten node shapes (test/fixtures/nodes.ts: whole A100s and H100s, MIG slices of two strategies, an L4, an AMD MI250,
 * CPU nodes), asking one GPU resource in one of four ways (one container; split over two; an init container asking
 * more than the regular ones; a native sidecar adding to them), from 1 to past the largest node; and a resource no
 * node has.
 *
 * The rule runs in `warn` (its default), so every Job is created and the verdict is the admission warning; the real
 * one is kube-scheduler's for the Job's pod (job-controller creates it), which tolerates every taint so that only
 * resources decide. Each Job is created, judged and deleted before the next, on empty nodes:
 * - a pod the rule warns about is never scheduled (its PodScheduled condition says Unschedulable);
 * - a pod the rule lets through is scheduled.
 * The ledger is written once by `reconcile --once` before any Job, and the webhook restarted to read it.
 * Not compared: stale nodes (the ledger leaves them out; the scheduler keeps them until node-lifecycle taints them).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { startVirtualNodes, type VirtualNodes } from "../e2e/harness/nodes.js";
import { JOB_CONTROLLER } from "../e2e/harness/trainer.js";
import { cli, createNamespace, startOwnWebhook, waitForPodWebhook, type WebhookProcess } from "../e2e/harness/webhook.js";
import { PLACEMENT_CLUSTER } from "../fixtures/nodes.js";
import { sleep } from "./operator-jobs.js";

const SKIP = process.env.QM_K8S_BIN_DIR ? false : "QM_K8S_BIN_DIR not set (export QM_K8S_BIN_DIR=$(bash test/e2e/controlplane/build.sh newest))";
const SEED = Number(process.env.QM_SHAPE_SEED ?? 49);
const CASES = Number(process.env.QM_SHAPE_CASES ?? 40);
const NS = "qm-shape";
// The rules that could refuse a Job are put in warn: only the verdicts are compared, every Job is created.
const POLICY = "enforcement:\n  rules: {no-node-shape: warn, capacity: warn}\n";

type Obj = Record<string, any>;
type Layout = "one" | "split" | "init" | "sidecar";

interface Case {
  name: string;
  resource: string;
  count: number;
  layout: Layout;
}

/** The most one node offers of each extended resource (what the ledger's largest node is made of). */
const LARGEST = new Map<string, number>();
for (const node of PLACEMENT_CLUSTER) for (const [r, n] of Object.entries(node.allocatable)) LARGEST.set(r, Math.max(LARGEST.get(r) ?? 0, n));
/** A GPU resource no node has. */
const ABSENT = "nvidia.com/mig-7g.80gb";

/** mulberry32: a small seeded generator, so a failure names a seed that reproduces it. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generate(seed: number, n: number): Case[] {
  const rnd = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const resources = [...LARGEST.keys(), ABSENT];
  const layouts: Layout[] = ["one", "split", "init", "sidecar"];
  const out: Case[] = [];
  for (let i = 0; i < n; i++) {
    const resource = pick(resources);
    const largest = LARGEST.get(resource) ?? 0;
    // Around the largest node: at it, one past it, and spread below and above.
    const count = pick([1, Math.max(1, largest), largest + 1, Math.max(1, largest - 1), largest * 2 + 1, 1 + Math.floor(rnd() * (largest + 3))]);
    out.push({ name: `shape-${i}`, resource, count, layout: pick(layouts) });
  }
  return out;
}

/** The pod template of `c`: what one pod asks of `c.resource`, laid out as `c.layout` says. */
function podSpec(c: Case): Obj {
  const ask = (n: number): Obj => ({ limits: { [c.resource]: String(n) } });
  const container = (name: string, n: number): Obj => ({ name, image: "registry.invalid/train:1", ...(n > 0 ? { resources: ask(n) } : {}) });
  const spec: Obj = { restartPolicy: "Never", tolerations: [{ operator: "Exists" }] };
  switch (c.layout) {
    case "one":
      spec.containers = [container("main", c.count)];
      break;
    case "split": // ceil + floor: the pod asks the sum
      spec.containers = [container("a", Math.ceil(c.count / 2)), ...(c.count > 1 ? [container("b", Math.floor(c.count / 2))] : [])];
      break;
    case "init": // the pod asks the larger of the init container and the regular ones
      spec.initContainers = [container("setup", c.count)];
      spec.containers = [container("main", 1)];
      break;
    case "sidecar": // a native sidecar runs beside the regular containers: their sum
      spec.initContainers = [{ ...container("sidecar", 1), restartPolicy: "Always" }];
      spec.containers = [container("main", Math.max(0, c.count - 1))];
      break;
  }
  return spec;
}

const asked = (c: Case): number => (c.layout === "init" ? Math.max(c.count, 1) : c.count);

describe("no-node-shape against kube-scheduler: a pod the rule warns about is never scheduled, one it lets through is", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let nodes: VirtualNodes | undefined;
  const cases = generate(SEED, CASES);
  const rows: Array<{ c: Case; warned: boolean; scheduled: boolean; message: string }> = [];

  before(async () => {
    if (SKIP) return;
    cp = await startControlPlane({ scheduler: true, controllers: [JOB_CONTROLLER] });
    try {
      nodes = await startVirtualNodes(cp, PLACEMENT_CLUSTER);
      const own = await startOwnWebhook(cp, POLICY);
      wh = own.wh;
      const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
      assert.equal(applied.code, 0, applied.stderr);
      await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
      // The ledger, as the reconciler keeps it; the webhook restarted so that it reads it now.
      const reconciler = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
      const pass = await cli(["reconcile", "--once", "--kubeconfig", reconciler.kubeconfig]);
      assert.equal(pass.code, 0, pass.stderr);
      await wh.stop();
      await wh.start();
      await waitForPodWebhook(cp, wh, NS);
    } catch (err) {
      nodes?.stop();
      await wh?.stop();
      await cp.stop();
      throw err;
    }
  });

  after(async () => {
    if (SKIP) return;
    nodes?.stop();
    await wh?.stop();
    await cp?.stop();
  });

  /** The Job's one pod, once kube-scheduler has decided: scheduled, or Unschedulable with its message. */
  async function decided(job: string): Promise<{ scheduled: boolean; message: string }> {
    let out: { scheduled: boolean; message: string } | undefined;
    await cp.until(
      `the scheduler's decision on job ${job}'s pod`,
      async () => {
        const r = await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(`batch.kubernetes.io/job-name=${job}`)}`);
        const pod = (r.body?.items ?? [])[0] as Obj | undefined;
        if (!pod) return false;
        if (pod.spec?.nodeName) return Boolean((out = { scheduled: true, message: `bound to ${pod.spec.nodeName}` }));
        const cond = (pod.status?.conditions ?? []).find((x: Obj) => x.type === "PodScheduled");
        if (cond?.status === "False" && cond.reason === "Unschedulable") return Boolean((out = { scheduled: false, message: String(cond.message) }));
        return false;
      },
      60_000,
    );
    return out!;
  }

  it(`${CASES} seeded Jobs (seed ${SEED}): the rule's warning and the scheduler agree on every one`, { skip: SKIP }, async () => {
    for (const c of cases) {
      const body = {
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: { name: c.name, namespace: NS },
        spec: { parallelism: 1, completions: 1, backoffLimit: 0, template: { spec: podSpec(c) } },
      };
      const created = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, body);
      assert.equal(created.status, 201, `${c.name}: ${JSON.stringify(created.body)}`);
      const warnings = [created.headers.warning ?? []].flat().join("\n");
      const warned = /no-node-shape/.test(warnings) || /would never be scheduled/.test(warnings);
      const real = await decided(c.name);
      rows.push({ c, warned, ...real });
      // No kubelet confirms a bound pod's end on a virtual node: the Job goes, then its pod at once (grace 0).
      const selector = encodeURIComponent(`batch.kubernetes.io/job-name=${c.name}`);
      const del = await cp.api("DELETE", `/apis/batch/v1/namespaces/${NS}/jobs/${c.name}`, {
        kind: "DeleteOptions",
        apiVersion: "v1",
        propagationPolicy: "Orphan",
      });
      assert.ok([200, 202].includes(del.status), `${c.name}: delete ${del.status}`);
      const pods = await cp.api("DELETE", `/api/v1/namespaces/${NS}/pods?labelSelector=${selector}&gracePeriodSeconds=0`);
      assert.equal(pods.status, 200, `${c.name}: deleting its pod: ${JSON.stringify(pods.body)}`);
      await cp.until(`job ${c.name}'s pod gone`, async () => {
        const r = await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=${selector}`);
        return (r.body?.items ?? []).length === 0;
      });
      await sleep(50);
    }
    const table = rows.map(
      (r) =>
        `${r.c.name.padEnd(9)} ${r.c.resource.padEnd(24)} ${String(asked(r.c)).padStart(3)} (${r.c.layout.padEnd(7)}) largest ${String(LARGEST.get(r.c.resource) ?? 0).padStart(2)}: ` +
        `rule ${r.warned ? "warns" : "lets through"}, scheduler ${r.scheduled ? "schedules" : "cannot"}${r.scheduled ? "" : ` (${r.message.slice(0, 90)})`}`,
    );
    console.log(`no-node-shape differential, seed ${SEED}:\n${table.join("\n")}`);
    const warned = rows.filter((r) => r.warned).length;
    console.log(`no-node-shape differential: ${rows.length} Jobs, ${warned} warned, ${rows.length - warned} let through`);
    // The generator must reach both sides, or the comparison proves nothing.
    assert.ok(warned > 0 && warned < rows.length, `one-sided sample: ${warned} of ${rows.length} warned`);
    const wrong = rows.filter((r) => r.warned === r.scheduled);
    assert.deepEqual(
      wrong.map((r) => table[rows.indexOf(r)]),
      [],
      "the rule and kube-scheduler disagree (a warning on a pod that was scheduled, or none on one that never can be)",
    );
  });
});

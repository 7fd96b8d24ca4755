/**
 * Differential GPU conformance (issue 45's acceptance test): Quartermaster's prediction of the GPUs a workload's
 * controllers will ask for, made at the workload's CREATE, against the GPUs the real controllers' pods do ask
 * for, over several hundred generated workloads (`gpu-workloads.ts`, seeded: QM_DIFF_SEED, default 45, printed).
 *
 * The stack: the e2e control plane (newest) with kube-controller-manager's job-controller and
 * resourceclaim-controller and kube-scheduler (DRA allocation; virtual nodes of `test/e2e/harness/nodes.ts`,
 * untainted, each publishing a ResourceSlice of {@link DEVICES_PER_NODE} devices of DeviceClass
 * `gpu.nvidia.com` through a stand-in driver, as `test/e2e/dra.test.ts` does), the training operator v1.9.4
 * (QM_OPERATOR_BIN), JobSet v0.12.0 (QM_JOBSET_BIN) and Trainer v2.3.0 (QM_TRAINER_BIN) with their webhooks,
 * and Quartermaster's webhooks as its manifests install them (`startOwnWebhook`), restarted after one
 * `reconcile --once` has written the device ledger (whose per-node device counts bound `allocationMode: All`, as
 * in a cluster where the reconciler runs). Six of the nodes are tainted and kept for the pods whose claim takes
 * every device of a node, so each finds a whole node.
 *
 * 1. Audit, namespace {@link NS}: the policy caps a job at 0 GPUs there with `enforcement.mode: audit`, so every
 *    GPU workload is admitted with a `job-gpus` audit violation on its `/validate/jobs` admission line whose
 *    message carries the GPUs Quartermaster predicts ("the job requests N GPUs in all"); a `/validate/jobs` line
 *    for the workload (its kind and name, a CREATE) without one predicts 0; no line at all is "no prediction".
 *    Every workload is created, the controllers make their pods (nothing runs them: they stay Pending or are
 *    bound by the scheduler, and none finishes, so a Job keeps min(parallelism, completions) pods), and the
 *    actual GPUs of a workload are, over its pods (found by `training.kubeflow.org/job-name`,
 *    `jobset.sigs.k8s.io/jobset-name` or `batch.kubernetes.io/job-name`), each pod's effective request
 *    (`effectivePodGpuNanos` of src/core/gpu.ts: Kubernetes' rule for init containers and native sidecars; a bare
 *    `gpu` and a DeviceClass's extended-resource name counted as `nvidia.com/gpu`) plus the devices the
 *    scheduler allocated to the ResourceClaims its pods name (`status.allocation.devices.results`, each claim
 *    once). The test prints a table by kind and every mismatch (name, kind, shape, predicted, actual, why),
 *    and asserts there are none.
 * 2. Deny, namespace {@link DENY_NS}: caps of 8 GPUs a container, a pod and a job under `enforcement.mode: deny`;
 *    a few workloads of each kind over the job cap (each pod under the pod cap; the red team's TrainJob shapes;
 *    pods naming a claim template created just after their workload; a suspended PyTorchJob whose template is
 *    created again asking more, then resumed) must get no pod (refused at CREATE, or their children refused),
 *    while one under the cap of each kind gets its pods.
 *
 * Skips, saying why, when QM_OPERATOR_BIN, QM_JOBSET_BIN or QM_TRAINER_BIN is unset (a fresh clone's `npm test`
 * never needs them). For development: QM_DIFF_PARTIAL=1 runs the kinds whose controllers are given, QM_DIFF_KINDS (a
 * regular expression) only the kinds it matches.
 * Run under `unshare --net` like the other conformance suites (the operator's webhook server listens on every interface).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimSpecOf } from "../../src/core/dra.js";
import { effectivePodGpuNanos } from "../../src/core/gpu.js";
import type { KubeObject } from "../../src/core/kube.js";
import { jobGpuNanosByResource } from "../../src/validate/job.js";
import { effectiveLimits } from "../../src/validate/limits.js";
import { checkPolicy } from "../../src/policy/load.js";
import { parse } from "yaml";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { publishDevices, startVirtualNodes, type VirtualNodes } from "../e2e/harness/nodes.js";
import { installOperatorCrds, startOperator } from "../e2e/harness/operator.js";
import { JOB_CONTROLLER, installDefaultRuntimes, installTrainerCrds, startJobSet, startTrainer, type Controller } from "../e2e/harness/trainer.js";
import { cli, createNamespace, startOwnWebhook, waitForPodWebhook, type WebhookProcess } from "../e2e/harness/webhook.js";
import type { ClusterNode } from "../fixtures/nodes.js";
import {
  BATCH_JOB_NAME,
  DEVICE_CLASS,
  GPU,
  JOBSET_NAME,
  JOB_NAME_V1,
  WHOLE_NODE,
  generate,
  jobPods,
  podSpec,
  type GeneratedSet,
  type Obj,
  type Prerequisite,
  type Workload,
} from "./gpu-workloads.js";
import { list, sleep } from "./operator-jobs.js";

const env = process.env;
const PARTIAL = env.QM_DIFF_PARTIAL === "1";
const BINS = { operator: env.QM_OPERATOR_BIN, jobset: env.QM_JOBSET_BIN, trainer: env.QM_TRAINER_BIN };
const missing = Object.entries({ QM_OPERATOR_BIN: BINS.operator, QM_JOBSET_BIN: BINS.jobset, QM_TRAINER_BIN: BINS.trainer })
  .filter(([, v]) => !v)
  .map(([k]) => k);
const SKIP = !env.QM_K8S_BIN_DIR
  ? "QM_K8S_BIN_DIR not set (export QM_K8S_BIN_DIR=$(bash test/e2e/controlplane/build.sh newest))"
  : missing.length > 0 && !PARTIAL
    ? `${missing.join(", ")} not set: the differential suite runs the real training operator, JobSet and Trainer (see .ci/run)`
    : false;

const SEED = Number(env.QM_DIFF_SEED ?? 45);
const NS = "qm-diff";
const DENY_NS = "qm-diff-deny";
const DENY_CAP = 8;
/** A claim template created after the workloads that name it (deny part). */
const LATE_TEMPLATE = "late-six";
/** A template of 2 devices at the workloads' CREATE, deleted and created again asking 6 after it (red team). */
const SWAP_TEMPLATE = "swap-two";
const DEVICES_PER_NODE = 32;
const NODE_COUNT = 24;
/** The pods' wait ends when nothing changed for this long. */
const STABLE_MS = 20_000;
const POLICY = [
  "namespaces:",
  `  - pattern: ${NS}`,
  "    limits: {job: {gpus: 0}}",
  `  - pattern: ${DENY_NS}`,
  `    limits: {container: {gpus: {"nvidia.com/*": ${DENY_CAP}}}, pod: {gpus: ${DENY_CAP}}, job: {gpus: ${DENY_CAP}}}`,
  "enforcement:",
  "  mode: deny",
  "  namespaces:",
  `    - pattern: ${NS}`,
  "      mode: audit",
  "",
].join("\n");
const policy = checkPolicy(parse(POLICY), "gpu-differential");

/** The kinds whose controllers run (all of them unless QM_DIFF_PARTIAL). */
const runs = (w: { kind: string }): boolean => {
  if (env.QM_DIFF_KINDS && !new RegExp(env.QM_DIFF_KINDS).test(w.kind)) return false;
  if (w.kind === "TrainJob") return Boolean(BINS.trainer && BINS.jobset);
  if (w.kind === "JobSet") return Boolean(BINS.jobset);
  if (w.kind.startsWith("Job")) return true;
  return Boolean(BINS.operator);
};

/** Nodes kept for pods whose claim takes every device of a node (`WHOLE_NODE`): one per such pod, and a spare. */
const WHOLE_NODES = 6;
const NODES: ClusterNode[] = Array.from({ length: NODE_COUNT }, (_, i) => {
  const name = `gpu-${String(i).padStart(2, "0")}`;
  const whole = i < WHOLE_NODES;
  return {
    name,
    labels: { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", ...(whole ? { [WHOLE_NODE]: "true" } : {}) },
    allocatable: { [GPU]: 1000, "nvidia.com/mig-1g.5gb": 1000 },
    offers: { migProfiles: [], fullGpus: 1000 },
    taints: whole ? [{ key: WHOLE_NODE, value: "true", effect: "NoSchedule" }] : [],
    cpu: 10_000,
    memoryGi: 100_000,
    pods: 1000,
  };
});

const path = (group: string, plural: string, ns?: string): string =>
  `/${group === "v1" ? "api/v1" : `apis/${group}`}${ns ? `/namespaces/${ns}` : ""}/${plural}`;

/** GPUs as a number from nano-units. */
const units = (nano: bigint): number => Number(nano) / 1e9;

/** A pod's effective container GPUs, every GPU resource summed (a bare `gpu` and DeviceClass names counted as theirs). */
const podGpus = (pod: Obj): number => {
  let n = 0n;
  for (const v of effectivePodGpuNanos(pod.spec as V1PodSpec, policy.gpu).values()) n += v;
  return units(n);
};

/** The workload a pod belongs to (by the label its controller gives it), or undefined. */
const ownerName = (pod: Obj): string | undefined => {
  const l = (pod.metadata.labels ?? {}) as Record<string, string>;
  return l[JOB_NAME_V1] ?? l[JOBSET_NAME] ?? l[BATCH_JOB_NAME];
};

interface Row {
  w: Workload;
  created: number;
  createError?: string;
  predicted?: number;
  predictionLine?: string;
  /** The webhook recorded part of the workload as uncountable (gpu-unknown): refused under any cap, whatever the count. */
  unbounded?: string;
  /** The pure model's count in-process (src/validate/job.ts jobGpuNanosByResource) on the stored object. */
  model?: number;
  pods: number;
  actual: number;
  /** Claims allocated / named by its pods. */
  claims: { named: number; allocated: number };
}

/**
 * The devices of the driver allocated to the claims `pods` name (by template: `status.resourceClaimStatuses`;
 * directly: `spec.resourceClaims[].resourceClaimName`), each claim once; `claims` by name.
 */
function claimDevices(pods: Obj[], claims: Map<string, Obj>): { named: number; allocated: number; devices: number } {
  const out = { named: 0, allocated: 0, devices: 0 };
  const seen = new Set<string>();
  for (const pod of pods) {
    const names = [
      ...((pod.status?.resourceClaimStatuses ?? []) as Obj[]).map((x) => x.resourceClaimName as string | undefined),
      ...((pod.spec.resourceClaims ?? []) as Obj[]).map((x) => x.resourceClaimName as string | undefined),
    ];
    for (const name of names) {
      if (!name || seen.has(name)) continue;
      seen.add(name);
      out.named++;
      const results = ((claims.get(name)?.status?.allocation?.devices?.results ?? []) as Obj[]).filter((d) => d.driver === DEVICE_CLASS);
      if (results.length) out.allocated++;
      out.devices += results.length;
    }
  }
  return out;
}

/** The GPUs a job-gpus audit record counted: its `value`, else its message ("the job requests 12 GPUs in all", "the Job runs 6 GPUs at once in all"). */
const gpusOf = (v: Obj): number | undefined => {
  if (typeof v.value === "number") return v.value;
  const x = /(?:requests|runs) ([\d.]+) GPUs/.exec(String(v.message));
  return x ? Number(x[1]) : undefined;
};

describe("GPU differential conformance: Quartermaster's predicted GPUs per workload against the real controllers' pods", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let nodes: VirtualNodes | undefined;
  const controllers: Controller[] = [];
  let set: GeneratedSet;
  const rows = new Map<string, Row>();
  let started = 0;
  let stopWebhook: (() => Promise<void>) | undefined;

  const logs = (): string => controllers.map((c) => `--- ${c.name}\n${c.logs(20)}`).join("\n");

  before(async () => {
    if (SKIP) return;
    started = performance.now();
    set = generate(SEED);
    set.workloads = set.workloads.filter(runs);
    if (!(BINS.trainer && BINS.jobset)) set.prerequisites = set.prerequisites.filter((p) => !p.group.startsWith("trainer."));
    console.log(`gpu-differential: seed ${SEED}, ${set.workloads.length} workloads, ${set.workloads.reduce((s, w) => s + w.pods, 0)} pods expected`);
    if (missing.length) console.log(`gpu-differential: QM_DIFF_PARTIAL: ${missing.join(", ")} unset, their kinds left out`);
    cp = await startControlPlane({
      controllers: [JOB_CONTROLLER, "resourceclaim-controller"],
      scheduler: true,
      schedulerArgs: ["--kube-api-qps=200", "--kube-api-burst=400"],
      controllerManagerArgs: ["--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-job-syncs=10"],
    });
    try {
      if (BINS.trainer && BINS.jobset) await installTrainerCrds(cp);
      if (BINS.operator) await installOperatorCrds(cp);
      if (BINS.jobset) controllers.push(await startJobSet(cp, BINS.jobset));
      if (BINS.trainer && BINS.jobset) controllers.push(await startTrainer(cp, BINS.trainer));
      if (BINS.operator) controllers.push(await startOperator(cp, BINS.operator));
      if (BINS.trainer && BINS.jobset) await installDefaultRuntimes(cp);
      const own = await startOwnWebhook(cp, POLICY);
      wh = own.wh;
      stopWebhook = () => own.wh.stop();
      const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
      assert.equal(applied.code, 0, applied.stderr);
      for (const ns of [NS, DENY_NS]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
      await waitForPodWebhook(cp, wh, NS);
      // DRA: the DeviceClass, the virtual nodes and their devices (a stand-in driver's ResourceSlices).
      nodes = await startVirtualNodes(cp, NODES);
      await publishDevices(cp, { driver: DEVICE_CLASS, nodes: NODES.map((n) => n.name), perNode: DEVICES_PER_NODE, product: () => "NVIDIA H100 80GB HBM3" });
      // The device ledger, as the reconciler writes it in a cluster that runs Quartermaster (the capacity rule reads
      // it; a claim of `allocationMode: All` stays uncounted, gpu-unknown: the webhook has no per-class capacity).
      // Written once before any workload; the webhook restarted so that it reads it now rather than in a minute.
      const reconciler = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
      const pass = await cli(["reconcile", "--once", "--kubeconfig", reconciler.kubeconfig]);
      assert.equal(pass.code, 0, pass.stderr);
      await wh.stop();
      await wh.start();
      await waitForPodWebhook(cp, wh, NS);
      console.log(`gpu-differential: stack up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    } catch (err) {
      await stop();
      throw err;
    }
  });

  const stop = async (): Promise<void> => {
    nodes?.stop();
    await stopWebhook?.();
    for (const c of controllers.reverse()) await c.stop();
    await cp?.stop();
  };

  after(async () => {
    if (SKIP) return;
    await stop();
    if (started) console.log(`gpu-differential: suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const createAll = async (ns: string, prerequisites: Prerequisite[], workloads: Workload[]): Promise<Map<string, { status: number; message?: string }>> => {
    for (const p of prerequisites) {
      const r = await cp.api("POST", path(p.group, p.plural, p.cluster ? undefined : ns), p.body);
      // Under deny, Quartermaster refuses a claim template of `allocationMode: All` (no known capacity bounds it).
      if (ns === DENY_NS && r.status === 403) {
        console.log(`gpu-differential: deny: ${p.body.kind} ${p.body.metadata.name} refused: ${String(r.body?.message).slice(0, 300)}`);
        continue;
      }
      assert.ok(r.status === 201 || (p.cluster && r.status === 409), `${p.body.kind} ${p.body.metadata.name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    const out = new Map<string, { status: number; message?: string }>();
    // A few at a time: the webhooks and controllers keep up, and creation takes seconds, not minutes.
    const queue = [...workloads];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let w = queue.shift(); w; w = queue.shift()) {
          const r = await cp.api("POST", path(w.group, w.plural, ns), w.body);
          out.set(w.name, { status: r.status, ...(r.status === 201 ? {} : { message: String(r.body?.message ?? JSON.stringify(r.body)) }) });
        }
      }),
    );
    return out;
  };

  /** Pods by workload name in `ns`. */
  const podsByWorkload = async (ns: string): Promise<Map<string, Obj[]>> => {
    const by = new Map<string, Obj[]>();
    for (const pod of await list(cp, `/api/v1/namespaces/${ns}/pods`)) {
      const name = ownerName(pod);
      if (name) by.set(name, [...(by.get(name) ?? []), pod]);
    }
    return by;
  };

  it("audit: every workload's predicted GPUs equal its controllers' pods' GPUs", { timeout: 600_000 }, async () => {
    const t0 = performance.now();
    const created = await createAll(NS, set.prerequisites, set.workloads);
    console.log(`gpu-differential: ${set.workloads.length} workloads created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    for (const w of set.workloads) {
      const c = created.get(w.name)!;
      rows.set(w.name, { w, created: c.status, ...(c.message ? { createError: c.message } : {}), pods: 0, actual: 0, claims: { named: 0, allocated: 0 } });
    }

    // Wait for every workload's pods (those created), and for every DRA pod's claims to be allocated; or until
    // nothing has changed for STABLE_MS (a controller that will not make a pod makes none however long one waits).
    const deadline = performance.now() + 180_000;
    let short: string[] = [];
    let last = "";
    let lastChange = performance.now();
    for (;;) {
      const by = await podsByWorkload(NS);
      const now = [...by.values()].map((ps) => ps.map((p) => `${p.metadata.name}@${p.spec.nodeName ?? ""}`).join(",")).join(";");
      if (now !== last) [last, lastChange] = [now, performance.now()];
      short = [];
      for (const row of rows.values()) {
        if (row.created !== 201) continue;
        const have = by.get(row.w.name)?.length ?? 0;
        if (have < row.w.pods) short.push(`${row.w.name} ${have}/${row.w.pods}`);
        else {
          const unbound = row.w.kind.includes("DRA") ? by.get(row.w.name)!.find((p) => !p.spec.nodeName) : undefined;
          const why = ((unbound?.status?.conditions ?? []) as Obj[]).find((c) => c.type === "PodScheduled")?.message;
          if (unbound) short.push(`${row.w.name} unbound (${String(why ?? "not tried").slice(0, 160)})`);
        }
      }
      if (short.length === 0 || performance.now() > deadline || performance.now() - lastChange > STABLE_MS) break;
      await sleep(2000);
    }
    await sleep(3000); // no more than expected may follow
    // Workloads whose controller's children the apiserver refused (a TrainJob's requests-only resourcesPerNode
    // merged into a runtime's limits makes an invalid Job): they get fewer pods than asked, or none.
    const refused = new Map<string, string>();
    for (const e of await list(cp, `/api/v1/namespaces/${NS}/events`)) {
      if (e.type !== "Warning" || !/is invalid/.test(String(e.message))) continue;
      const row = [...rows.values()].find((r) => String(e.involvedObject?.name ?? "").startsWith(r.w.name));
      if (row && !refused.has(row.w.name))
        refused.set(
          row.w.name,
          String(e.message)
            .replace(/^.*?is invalid: /s, "")
            .slice(0, 200),
        );
    }
    if (short.length) {
      // Why: the Jobs' conditions and the Warning events of the workloads short of pods.
      const names = short.map((x) => x.split(" ")[0]!);
      const events = (await list(cp, `/api/v1/namespaces/${NS}/events`)).filter(
        (e) => e.type === "Warning" && names.some((n) => String(e.involvedObject?.name ?? "").startsWith(n)),
      );
      const seen = new Set<string>();
      const why = events
        .map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.reason}: ${String(e.message).slice(0, 300)}`)
        .filter((x) => !seen.has(x.replace(/^[^:]*: /, "")) && seen.add(x.replace(/^[^:]*: /, "")));
      console.log(`gpu-differential: warnings of the workloads short of pods:\n  ${why.slice(0, 40).join("\n  ")}`);
    }
    console.log(
      `gpu-differential: pods settled in ${((performance.now() - t0) / 1000).toFixed(1)} s${short.length ? `; short at the deadline: ${short.slice(0, 20).join(", ")}${short.length > 20 ? ` and ${short.length - 20} more` : ""}` : ""}`,
    );

    // Actual: the pods' GPUs, and the devices allocated to the claims they name (each claim once).
    const claims = new Map<string, Obj>((await list(cp, `/apis/resource.k8s.io/v1/namespaces/${NS}/resourceclaims`)).map((c) => [c.metadata.name, c]));
    const by = await podsByWorkload(NS);
    for (const row of rows.values()) {
      const pods = by.get(row.w.name) ?? [];
      row.pods = pods.length;
      const c = claimDevices(pods, claims);
      row.actual = pods.reduce((n, p) => n + podGpus(p), 0) + c.devices;
      row.claims = { named: c.named, allocated: c.allocated };
    }

    // Predicted: the /validate/jobs admission line of the workload's own kind and name (its CREATE).
    for (const row of rows.values()) {
      const kind = row.w.body.kind as string;
      const lines = wh
        .admissions(row.w.name)
        .filter((l) => l.webhook === "validate-jobs" && l.kind === kind && l.operation === "CREATE" && l.dryRun !== true && l.namespace === NS);
      const line = lines.at(-1);
      if (!line) {
        // A batch Job or JobSet whose templates ask for no GPU is not sent to /validate/jobs at all (the webhook's
        // match condition, `training-jobs-or-gpu-workloads`): that is Quartermaster's prediction of 0.
        if (kind === "Job" || kind === "JobSet") {
          row.predicted = 0;
          row.predictionLine = "not sent: the match condition saw no GPU";
        }
        continue;
      }
      const admitted = (line.admittedViolations ?? []) as Obj[];
      const audit = admitted.find((v) => v.rule === "job-gpus");
      row.predicted = audit ? gpusOf(audit) : 0;
      row.predictionLine = audit ? String(audit.message) : `outcome ${String(line.outcome)}, no job-gpus violation`;
      // Unknown is not zero: what the webhook could not count (an allocationMode All claim with no known capacity)
      // is recorded as gpu-unknown, which a cap refuses whatever the count: an unbounded prediction.
      const unknown = admitted.find((v) => v.rule === "gpu-unknown");
      if (unknown) row.unbounded = String(unknown.message);
    }

    // Cross-check: the pure model in-process, on the object as stored (after /mutate/jobs), with the runtime
    // and the claim templates as created; reported where it differs from the webhook's line.
    const templates = new Map(
      set.prerequisites
        .filter((p) => p.body.kind === "ResourceClaimTemplate")
        .map((p) => [p.body.metadata.name as string, claimSpecOf(p.body, "ResourceClaimTemplate")]),
    );
    const ctx = { policy, limits: effectiveLimits(policy, NS), namespace: NS, claims: { claims: new Map(), templates } };
    const modelDiffers: string[] = [];
    for (const row of rows.values()) {
      const kind = policy.jobKinds.find((k) => k.kind === row.w.body.kind);
      if (!kind || row.created !== 201) continue;
      const stored = (await cp.api("GET", `${path(row.w.group, row.w.plural, NS)}/${row.w.name}`)).body as KubeObject;
      let runtime: KubeObject | undefined;
      if (row.w.body.kind === "TrainJob") {
        const ref = row.w.body.spec.runtimeRef as Obj;
        const cluster = (ref.kind ?? "ClusterTrainingRuntime") === "ClusterTrainingRuntime";
        runtime = (
          await cp.api(
            "GET",
            `${path("trainer.kubeflow.org/v1alpha1", cluster ? "clustertrainingruntimes" : "trainingruntimes", cluster ? undefined : NS)}/${ref.name}`,
          )
        ).body;
      }
      let n = 0n;
      for (const v of jobGpuNanosByResource(stored, kind, ctx, runtime).values()) n += v;
      row.model = units(n);
      if (row.predicted !== undefined && row.model !== row.predicted)
        modelDiffers.push(`${row.w.kind} ${row.w.name} [${row.w.shape}]: webhook ${row.predicted}, in-process model ${row.model}`);
    }
    const modelled = [...rows.values()].filter((r) => r.model !== undefined).length;
    console.log(`gpu-differential: the in-process model (jobGpuNanosByResource) agrees with the webhook on ${modelled - modelDiffers.length} of ${modelled}`);
    if (modelDiffers.length)
      console.log(`gpu-differential: the in-process model differs from the webhook's prediction on ${modelDiffers.length}:\n  ${modelDiffers.join("\n  ")}`);

    // The table by kind and the mismatches.
    const mismatches: string[] = [];
    const downstream: string[] = [];
    const bounded: string[] = [];
    const unbounded: string[] = [];
    const byKind = new Map<
      string,
      {
        workloads: number;
        pods: number;
        predicted: number;
        actual: number;
        mismatches: number;
        noPrediction: number;
        refused: number;
        bounded: number;
        unbounded: number;
      }
    >();
    for (const row of rows.values()) {
      const k = byKind.get(row.w.kind) ?? {
        workloads: 0,
        pods: 0,
        predicted: 0,
        actual: 0,
        mismatches: 0,
        noPrediction: 0,
        refused: 0,
        bounded: 0,
        unbounded: 0,
      };
      byKind.set(row.w.kind, k);
      k.workloads++;
      k.pods += row.pods;
      k.predicted += row.predicted ?? 0;
      k.actual += row.actual;
      let why: string | undefined;
      if (row.created !== 201) why = `not created (${row.created}): ${row.createError?.slice(0, 600)}`;
      else if (row.predicted === undefined) {
        why = "no prediction (no /validate/jobs admission of its kind and name)";
        k.noPrediction++;
      } else if (row.predicted > row.actual && refused.has(row.w.name)) {
        // Not a mismatch: no cap is passed by pods that were never made; listed apart.
        k.refused++;
        downstream.push(
          `${row.w.kind} ${row.w.name} [${row.w.shape}]: predicted ${row.predicted}, actual ${row.actual} (${row.pods}/${row.w.pods} pods): ${refused.get(row.w.name)}`,
        );
      } else if (row.unbounded !== undefined && row.predicted < row.actual) {
        // Not a mismatch: the part the webhook could not count is refused under a cap (gpu-unknown); listed apart.
        k.unbounded++;
        unbounded.push(`${row.w.kind} ${row.w.name} [${row.w.shape}]: counted ${row.predicted} + unknown, actual ${row.actual}: ${row.unbounded}`);
      } else if (row.predicted > row.actual && row.w.shape.includes("firstAvailable")) {
        // Not a mismatch: a cap counts the largest alternative of a firstAvailable request (any may be given when
        // the earlier ones do not fit), the scheduler gave the first that fit. Listed apart; an under-count is not.
        k.bounded++;
        bounded.push(`${row.w.kind} ${row.w.name} [${row.w.shape}]: predicted ${row.predicted} (the largest alternatives), allocated ${row.actual}`);
      } else if (row.predicted !== row.actual) {
        why = `${row.predicted > row.actual ? "over" : "UNDER"}-predicted`;
        if (row.pods < row.w.pods) why += `; ${row.pods}/${row.w.pods} pods made`;
        if (row.claims.named > row.claims.allocated) why += `; ${row.claims.named - row.claims.allocated} of ${row.claims.named} claims unallocated`;
      }
      if (why) {
        k.mismatches++;
        mismatches.push(`${row.w.kind} ${row.w.name} [${row.w.shape}]: predicted ${row.predicted ?? "-"}, actual ${row.actual} (${row.pods} pods): ${why}`);
      }
    }
    const table = [
      "| kind | workloads | pods | predicted GPUs | actual GPUs | mismatches | of which no prediction | children refused by the apiserver | firstAvailable bounded | unknown (gpu-unknown) |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...[...byKind].map(
        ([kind, k]) =>
          `| ${kind} | ${k.workloads} | ${k.pods} | ${k.predicted} | ${k.actual} | ${k.mismatches} | ${k.noPrediction} | ${k.refused} | ${k.bounded} | ${k.unbounded} |`,
      ),
    ];
    const total = [...byKind.values()].reduce(
      (s, k) => ({
        w: s.w + k.workloads,
        p: s.p + k.pods,
        pr: s.pr + k.predicted,
        a: s.a + k.actual,
        m: s.m + k.mismatches,
        n: s.n + k.noPrediction,
        r: s.r + k.refused,
        b: s.b + k.bounded,
        u: s.u + k.unbounded,
      }),
      { w: 0, p: 0, pr: 0, a: 0, m: 0, n: 0, r: 0, b: 0, u: 0 },
    );
    table.push(`| all | ${total.w} | ${total.p} | ${total.pr} | ${total.a} | ${total.m} | ${total.n} | ${total.r} | ${total.b} | ${total.u} |`);
    console.log(`gpu-differential: seed ${SEED}\n${table.join("\n")}`);
    if (downstream.length)
      console.log(
        `gpu-differential: ${downstream.length} over-predicted because the apiserver refused their controllers' children (not mismatches):\n  ${downstream.join("\n  ")}`,
      );
    if (bounded.length)
      console.log(`gpu-differential: ${bounded.length} firstAvailable workloads given less than the cap counts (not mismatches):\n  ${bounded.join("\n  ")}`);
    if (mismatches.length) console.log(`gpu-differential: ${mismatches.length} mismatches:\n  ${mismatches.join("\n  ")}`);
    assert.ok(total.w >= (PARTIAL ? 1 : 300), `only ${total.w} workloads`);
    assert.deepEqual(mismatches, [], `${mismatches.length} workloads whose predicted GPUs differ from their pods' (table above)`);
  });

  /** Over the job cap in DENY_NS, each pod under the pod cap: per kind, a few over and one under. */
  const denyCases = (): Array<{ w: Workload; over: boolean }> => {
    const out: Array<{ w: Workload; over: boolean }> = [];
    const gpuPod = (main: string, n: number): Obj => podSpec(main, "main", "limits", n, 0, { restartPolicy: "Never" });
    const v1 = (kind: string, plural: string, specs: string, container: string, replicas: number, per: number, name: string): Workload => ({
      kind,
      name,
      plural,
      group: "kubeflow.org/v1",
      pods: replicas,
      podLabel: JOB_NAME_V1,
      shape: `${replicas} × ${per}`,
      body: {
        apiVersion: "kubeflow.org/v1",
        kind,
        metadata: { name },
        spec: { runPolicy: { cleanPodPolicy: "None" }, [specs]: { Worker: { replicas, restartPolicy: "Never", template: { spec: gpuPod(container, per) } } } },
      },
    });
    const batch = (name: string, parallelism: number, per: number): Workload => ({
      kind: "Job",
      name,
      plural: "jobs",
      group: "batch/v1",
      pods: jobPods(parallelism, parallelism),
      podLabel: BATCH_JOB_NAME,
      shape: `${parallelism} × ${per}`,
      body: {
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: { name },
        spec: { parallelism, completions: parallelism, backoffLimit: 0, template: { spec: gpuPod("main", per) } },
      },
    });
    const jobset = (name: string, replicas: number, parallelism: number, per: number): Workload => ({
      kind: "JobSet",
      name,
      plural: "jobsets",
      group: "jobset.x-k8s.io/v1alpha2",
      pods: replicas * parallelism,
      podLabel: JOBSET_NAME,
      shape: `${replicas} × ${parallelism} × ${per}`,
      body: {
        apiVersion: "jobset.x-k8s.io/v1alpha2",
        kind: "JobSet",
        metadata: { name },
        spec: {
          replicatedJobs: [{ name: "w", replicas, template: { spec: { parallelism, completions: parallelism, template: { spec: gpuPod("main", per) } } } }],
        },
      },
    });
    /** `per` GPUs a node through resourcesPerNode, or (0) the runtime's own 2. */
    const trainJob = (name: string, numNodes: number, per: number, runtime = "qm-torch-2gpu"): Workload => ({
      kind: "TrainJob",
      name,
      plural: "trainjobs",
      group: "trainer.kubeflow.org/v1alpha1",
      pods: numNodes,
      podLabel: JOBSET_NAME,
      shape: `${runtime} ${numNodes} × ${per || "the runtime's GPUs"}`,
      body: {
        apiVersion: "trainer.kubeflow.org/v1alpha1",
        kind: "TrainJob",
        metadata: { name },
        spec: { runtimeRef: { name: runtime }, trainer: { numNodes, ...(per ? { resourcesPerNode: { limits: { [GPU]: String(per) } } } : {}) } },
      },
    });
    for (const [i, [replicas, per]] of [
      [3, 4],
      [2, 6],
      [5, 2],
    ].entries()) {
      out.push({ w: v1("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", replicas!, per!, `deny-pt-${i}`), over: true });
      out.push({ w: v1("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax", replicas!, per!, `deny-jax-${i}`), over: true });
      out.push({ w: batch(`deny-bj-${i}`, replicas!, per!), over: true });
      out.push({ w: jobset(`deny-js-${i}`, 1, replicas!, per!), over: true });
      out.push({ w: trainJob(`deny-tj-${i}`, replicas!, per!), over: true });
    }
    // The same kinds under the cap: they get their pods (the machinery works).
    out.push({ w: v1("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", 2, 4, "ok-pt"), over: false });
    out.push({ w: v1("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax", 2, 2, "ok-jax"), over: false });
    out.push({ w: batch("ok-bj", 2, 4), over: false });
    out.push({ w: jobset("ok-js", 2, 1, 4), over: false });
    out.push({ w: trainJob("ok-tj", 2, 4), over: false });
    // A runtime whose GPUs the TrainJob leaves out: 5 nodes × the runtime's 2 GPUs.
    out.push({ w: trainJob("deny-tj-runtime", 5, 0), over: true });
    // The red team's TrainJob shapes: a cpu-only resourcesPerNode over the runtime's 2 GPUs a node (Trainer keeps
    // the runtime's GPUs), and numNodes on a trainer Job not named `node` (1 GPU each).
    const cpuOnly = trainJob("deny-tj-cpu-merge", 5, 0);
    cpuOnly.body.spec.trainer.resourcesPerNode = { limits: { cpu: "1" } };
    out.push({ w: { ...cpuOnly, shape: "qm-torch-2gpu 5 × the runtime's GPUs, resourcesPerNode cpu only" }, over: true });
    out.push({ w: trainJob("deny-tj-renamed", 9, 0, "qm-torch-renamed"), over: true });
    // Claims created later: the pods name a ResourceClaimTemplate that does not exist yet at the workload's
    // CREATE ({@link LATE_TEMPLATE}, 6 devices, made right after): 2 pods × 6 = 12.
    const late = (main: string): Obj => ({
      restartPolicy: "Never",
      containers: [{ name: main, image: "registry.invalid/train:1", resources: { claims: [{ name: "gpus" }] } }],
      resourceClaims: [{ name: "gpus", resourceClaimTemplateName: LATE_TEMPLATE }],
    });
    out.push({
      w: {
        ...v1("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", 2, 0, "deny-late-pt"),
        shape: `2 × a template of 6 made after the job`,
        body: {
          apiVersion: "kubeflow.org/v1",
          kind: "PyTorchJob",
          metadata: { name: "deny-late-pt" },
          spec: { pytorchReplicaSpecs: { Worker: { replicas: 2, restartPolicy: "Never", template: { spec: late("pytorch") } } } },
        },
      },
      over: true,
    });
    out.push({
      w: {
        ...batch("deny-late-bj", 2, 0),
        shape: `2 × a template of 6 made after the job`,
        body: {
          apiVersion: "batch/v1",
          kind: "Job",
          metadata: { name: "deny-late-bj" },
          spec: { parallelism: 2, completions: 2, template: { spec: late("main") } },
        },
      },
      over: true,
    });
    // A template created again asking more after its job's admission (red team): a suspended PyTorchJob of 4 Workers
    // × a 2-device template (8: the cap) admitted, the template created again asking 6, the job resumed: the
    // operator's pods (4 × 6 = 24) are refused at their CREATE.
    const swapped = v1("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", 4, 0, "deny-swap-pt");
    out.push({
      w: {
        ...swapped,
        shape: "4 × a template of 2, created again asking 6 while the job is suspended",
        body: {
          apiVersion: "kubeflow.org/v1",
          kind: "PyTorchJob",
          metadata: { name: "deny-swap-pt" },
          spec: {
            runPolicy: { cleanPodPolicy: "None", suspend: true },
            pytorchReplicaSpecs: {
              Worker: {
                replicas: 4,
                restartPolicy: "Never",
                template: {
                  spec: {
                    containers: [{ name: "pytorch", image: "registry.invalid/train:1", resources: { claims: [{ name: "gpus" }] } }],
                    resourceClaims: [{ name: "gpus", resourceClaimTemplateName: SWAP_TEMPLATE }],
                  },
                },
              },
            },
          },
        },
      },
      over: true,
    });
    return out.filter((c) => runs(c.w));
  };

  const swapTemplate = (count: number) => ({
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaimTemplate",
    metadata: { name: SWAP_TEMPLATE },
    spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DEVICE_CLASS, count } }] } } },
  });

  it(`deny: no workload over the job cap of ${DENY_CAP} GPUs gets a pod; the same kinds under it do`, { timeout: 300_000 }, async () => {
    const cases = denyCases();
    const prerequisites = set.prerequisites.filter((p) => p.body.kind === "TrainingRuntime" || p.body.kind === "ResourceClaimTemplate");
    const swap = cases.some((c) => c.w.name === "deny-swap-pt");
    if (swap) assert.equal((await cp.api("POST", path("resource.k8s.io/v1", "resourceclaimtemplates", DENY_NS), swapTemplate(2))).status, 201);
    const created = await createAll(
      DENY_NS,
      prerequisites,
      cases.map((c) => c.w),
    );
    const lateTemplate = await cp.api("POST", path("resource.k8s.io/v1", "resourceclaimtemplates", DENY_NS), {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceClaimTemplate",
      metadata: { name: LATE_TEMPLATE },
      spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DEVICE_CLASS, count: 6 } }] } } },
    });
    assert.equal(lateTemplate.status, 201, JSON.stringify(lateTemplate.body));
    if (swap) {
      // The suspended job was admitted at the cap; its template created again asking 6 (its own CREATE within the
      // per-pod cap), then the job resumed (an UPDATE that makes nothing worse): its pods are where it is caught.
      assert.equal(created.get("deny-swap-pt")?.status, 201, created.get("deny-swap-pt")?.message);
      const templates = path("resource.k8s.io/v1", "resourceclaimtemplates", DENY_NS);
      assert.equal((await cp.api("DELETE", `${templates}/${SWAP_TEMPLATE}`)).status, 200);
      assert.equal((await cp.api("POST", templates, swapTemplate(6))).status, 201);
      const resumed = await cp.api(
        "PATCH",
        `${path("kubeflow.org/v1", "pytorchjobs", DENY_NS)}/deny-swap-pt`,
        { spec: { runPolicy: { suspend: false } } },
        {
          "Content-Type": "application/merge-patch+json",
        },
      );
      assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    }
    // Under-cap ones get their pods; then a settle period in which an over-cap one would get its first.
    const deadline = performance.now() + 120_000;
    for (;;) {
      const by = await podsByWorkload(DENY_NS);
      if (cases.filter((c) => !c.over).every((c) => (by.get(c.w.name)?.length ?? 0) >= c.w.pods) || performance.now() > deadline) break;
      await sleep(2000);
    }
    await sleep(5000);
    const by = await podsByWorkload(DENY_NS);
    const claims = new Map<string, Obj>((await list(cp, `/apis/resource.k8s.io/v1/namespaces/${DENY_NS}/resourceclaims`)).map((c) => [c.metadata.name, c]));
    const failures: string[] = [];
    const record: string[] = [];
    for (const c of cases) {
      const r = created.get(c.w.name)!;
      const pods = by.get(c.w.name) ?? [];
      const gpus = pods.reduce((s, p) => s + podGpus(p), 0) + claimDevices(pods, claims).devices;
      record.push(
        `${c.w.kind} ${c.w.name} [${c.w.shape}]: CREATE ${r.status}${r.message ? ` (${r.message.slice(0, 140)})` : ""}, ${pods.length} pods, ${gpus} GPUs`,
      );
      if (c.over && pods.length > 0)
        failures.push(`${c.w.kind} ${c.w.name} [${c.w.shape}] over the cap: CREATE ${r.status}, got ${pods.length} pods (${gpus} GPUs)`);
      if (!c.over && pods.length < c.w.pods)
        failures.push(`${c.w.kind} ${c.w.name} [${c.w.shape}] under the cap: CREATE ${r.status} ${r.message ?? ""}, ${pods.length}/${c.w.pods} pods`);
    }
    console.log(`gpu-differential: deny:\n  ${record.join("\n  ")}`);
    assert.deepEqual(failures, [], `deny: ${failures.length} failures:\n  ${failures.join("\n  ")}\n${failures.length ? logs() : ""}`);
  });

  it("deny: a running JobSet's template created again asking more: its Job's replacement pod refused, naming the JobSet", { timeout: 180_000 }, async (t) => {
    if (!runs({ kind: "JobSet" })) return t.skip("JobSet not run here (QM_JOBSET_BIN, QM_DIFF_KINDS)");
    const templates = path("resource.k8s.io/v1", "resourceclaimtemplates", DENY_NS);
    const template = (count: number) => ({ ...swapTemplate(count), metadata: { name: "swap-js" } });
    assert.equal((await cp.api("POST", templates, template(2))).status, 201);
    const made = await cp.api("POST", path("jobset.x-k8s.io/v1alpha2", "jobsets", DENY_NS), {
      apiVersion: "jobset.x-k8s.io/v1alpha2",
      kind: "JobSet",
      metadata: { name: "swap-js" },
      spec: {
        replicatedJobs: [
          {
            name: "w",
            replicas: 1,
            template: {
              spec: {
                parallelism: 4,
                completions: 4,
                backoffLimit: 100,
                template: {
                  spec: {
                    restartPolicy: "Never",
                    containers: [{ name: "main", image: "registry.invalid/train:1", resources: { claims: [{ name: "gpus" }] } }],
                    resourceClaims: [{ name: "gpus", resourceClaimTemplateName: "swap-js" }],
                  },
                },
              },
            },
          },
        ],
      },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const pods = async (): Promise<string[]> =>
      (await list(cp, `/api/v1/namespaces/${DENY_NS}/pods?labelSelector=${JOBSET_NAME}%3Dswap-js`))
        .filter((p) => !p.metadata.deletionTimestamp)
        .map((p) => p.metadata.name);
    await cp.until("the JobSet's 4 pods (4 × 2 GPUs: the cap)", async () => (await pods()).length === 4, 60_000, 500);
    // The template created again asking 6 (within the per-pod cap), then one pod deleted: the Job controller's
    // replacement (the JobSet now 4 × 6 = 24) is refused at its CREATE, the Job's FailedCreate Event says why.
    assert.equal((await cp.api("DELETE", `${templates}/swap-js`)).status, 200);
    assert.equal((await cp.api("POST", templates, template(6))).status, 201);
    const before = await pods();
    assert.equal((await cp.api("DELETE", `/api/v1/namespaces/${DENY_NS}/pods/${before[0]}`, { gracePeriodSeconds: 0 })).status, 200);
    const refusals = async () =>
      (await list(cp, `/api/v1/namespaces/${DENY_NS}/events?fieldSelector=reason%3DFailedCreate`)).filter((e) => e.involvedObject.name === "swap-js-w-0");
    await cp.until("the Job's FailedCreate Event", async () => (await refusals()).length > 0, 90_000, 500);
    assert.match(
      (await refusals()).map((e) => e.message).join("\n"),
      /JobSet qm-diff-deny\/swap-js \(the controller of Job qm-diff-deny\/swap-js-w-0\): the JobSet runs 24 GPUs at once in all \(w: 4 pods × 6\), over the per-job limit of 8/,
    );
    assert.deepEqual((await pods()).sort(), before.slice(1).sort());
  });
});

/**
 * @module
 * kwok (sigs.k8s.io/kwok v0.8.0, `cmd/kwok`, built by `test/e2e/kwok/build.sh`, QM_KWOK_BIN) against the e2e
 * control plane of `./controlplane.ts`: it plays the kubelet for Node objects annotated
 * `kwok.x-k8s.io/node: fake` (and only those: nodes of `./nodes.ts` are left alone) and for the pods bound to
 * them, driven by the Stage documents committed under `test/e2e/kwok/stages/` (see the README there):
 *
 * - nodes (kwok `kustomize/stage/node/fast` and `node/heartbeat-with-lease`): Ready at once, with the
 *   capacity and allocatable the Node object was created with (kwok's `node-initialize` keeps them), and a
 *   Lease in kube-node-lease renewed every leaseDurationSeconds / 4 (kubelet's defaults: 40 s, so 10 s);
 * - pods (kwok `kustomize/stage/pod/general`): a bound pod gets a pod IP from `cidr`, goes Pending
 *   (ContainerCreating) then Running and Ready, each step after 1 to 5 s; a pod owned by a batch Job then
 *   Succeeds (exit 0) 1 to 5 s later; any other pod keeps running until deleted (a deleted pod is removed once
 *   it has no finalizers);
 * - Quartermaster's own pod outcomes ({@link podOutcome}): a pod annotated {@link EXIT_CODE} has its
 *   containers exit with that code {@link EXIT_AFTER_MS} ms after it is Running (default 0): phase Succeeded
 *   (0) or Failed with `containerStatuses[].state.terminated.exitCode` when restartPolicy is Never (or
 *   OnFailure and the code is 0); restarted in place (restartCount + 1, `lastState.terminated`, at least 1 s
 *   apart) when a kubelet would restart them. Put the annotations on a pod template to give a Job's or a
 *   training job's pods their outcome.
 *
 * kwok restarts a pending stage's delay whenever the pod object changes (it re-matches the stages on every
 * update), so a pod patched while it waits exits that much later.
 *
 * {@link kwokNodes} creates Node objects from the fixtures' cluster shapes (`test/fixtures/nodes.ts`:
 * labels, taints, cpu/memory/pods and the extended resources as capacity and allocatable, all in the one
 * CREATE: the apiserver keeps a Node's status on create, as the kubelet's registration relies on) and waits
 * for kwok to make them Ready. {@link stopNodeLease} makes one node stale the way a dead kubelet does: its
 * Lease is taken over by another holder with a day-long duration, which kwok respects (kwok
 * `pkg/kwok/controllers/node_lease_controller.go`, tryAcquireOrRenew), so after that one write the Lease's
 * renewTime stops moving and kwok stops touching the node and its pods; kube-controller-manager's `node-lifecycle-controller`, when
 * it runs, then marks the node's Ready condition Unknown after its `--node-monitor-grace-period`.
 * {@link resumeNodeLease} hands it back.
 *
 * At scale (measured on this 2-core box during a concurrent CI build, kube-scheduler at `--kube-api-qps=500`):
 * 1,000 nodes created at ~80/s (this harness's client opens a TLS connection per request: the limit is
 * ours, not kwok's) were all Ready 1.5 s after the last CREATE; 5,000 one-GPU pods created at ~50/s were all
 * Running 11 s after the last was bound with `podParallelism: 32` (41 s behind with kwok's default 4); kwok
 * used ~4 ms of CPU a pod, peaked at 116-131 MiB RSS, and keeping 1,000 Leases renewed costs it ~8% of a core
 * and the apiserver 100 Lease writes a second (a longer `leaseDurationSeconds` lowers that). kube-scheduler's
 * and kube-controller-manager's default client QPS (50 and 20) cap binding and Job pod creation long before kwok
 * does: raise them through `schedulerArgs` and `controllerManagerArgs` of `startControlPlane`.
 *
 * The process is started by `./go-controller.ts` (log in cp.dir/kwok.log, stopped by its PID, killed when the
 * test process exits). It needs kube-scheduler to bind pods (`startControlPlane({ scheduler: true })`) and
 * `job-controller` for batch Jobs.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ClusterNode } from "../../fixtures/nodes.js";
import type { ApiReply, ControlPlane } from "./controlplane.js";
import { startGoController, type Controller } from "./go-controller.js";

export type { Controller } from "./go-controller.js";

const HERE = dirname(fileURLToPath(import.meta.url));
/** The committed Stage documents (`test/e2e/kwok/stages/*.yaml`). */
export const STAGES_DIR = join(HERE, "..", "kwok", "stages");

/** The annotation kwok is told to manage nodes by (`--manage-nodes-with-annotation-selector`). */
export const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";
/** A pod's containers exit with this code (a decimal string), see {@link podOutcome}. */
export const EXIT_CODE = "e2e.quartermaster.dev/exit-code";
/** ... this many milliseconds (a decimal string) after the pod is Running and Ready; default 0. */
export const EXIT_AFTER_MS = "e2e.quartermaster.dev/exit-after-ms";
/** The holder {@link stopNodeLease} writes into a node's Lease. */
export const STALE_HOLDER = "quartermaster-e2e-stale";

type Obj = Record<string, any>;

/**
 * QM_KWOK_BIN (and QM_K8S_BIN_DIR, which the control plane needs), or the reason the suites that need them
 * skip: unset. Set to a missing file: an error.
 */
export function kwokBin(): { bin: string } | { skip: string } {
  const bin = process.env.QM_KWOK_BIN;
  if (!bin) return { skip: "QM_KWOK_BIN not set: the kwok suites need kwok (export QM_KWOK_BIN=$(bash test/e2e/kwok/build.sh)/kwok)" };
  if (!process.env.QM_K8S_BIN_DIR)
    return { skip: "QM_K8S_BIN_DIR not set: the kwok suites need the control plane (export QM_K8S_BIN_DIR=$(bash test/e2e/controlplane/build.sh))" };
  if (!existsSync(bin)) throw new Error(`QM_KWOK_BIN=${bin} does not exist: run test/e2e/kwok/build.sh`);
  return { bin };
}

/**
 * The annotations that give a pod (or a pod template) its end: its containers exit with `exitCode` `afterMs`
 * milliseconds after it is Running.
 */
export function podOutcome(o: { exitCode: number; afterMs?: number }): Record<string, string> {
  if (!Number.isInteger(o.exitCode) || o.exitCode < 0 || o.exitCode > 255) throw new Error(`exit code ${o.exitCode}: not in 0..255`);
  if (o.afterMs !== undefined && (!Number.isInteger(o.afterMs) || o.afterMs < 0)) throw new Error(`afterMs ${o.afterMs}: not a whole number of ms`);
  return { [EXIT_CODE]: String(o.exitCode), ...(o.afterMs !== undefined ? { [EXIT_AFTER_MS]: String(o.afterMs) } : {}) };
}

export interface KwokOptions {
  /** The Leases' duration; renewed every quarter of it (default 40, the kubelet's). */
  leaseDurationSeconds?: number;
  /** Pod IPs come from here (default 10.244.0.0/16). */
  cidr?: string;
  /** kwok's workers (its defaults: 4 each): raise them for thousands of pods or nodes. */
  podParallelism?: number;
  nodeParallelism?: number;
  leaseParallelism?: number;
  /** More Stage documents (YAML text) after the committed ones. */
  extraStages?: string[];
}

/** The committed Stage documents, in file-name order, as one multi-document YAML text. */
export function stagesYaml(): string {
  const files = readdirSync(STAGES_DIR)
    .filter((f) => f.endsWith(".yaml"))
    .sort();
  if (files.length === 0) throw new Error(`${STAGES_DIR} has no Stage documents`);
  return files.map((f) => `# ${f}\n${readFileSync(join(STAGES_DIR, f), "utf8").trim()}\n`).join("---\n");
}

/**
 * Starts kwok with the committed Stages (written with the options into cp.dir/kwok.yaml); resolves once it
 * has loaded them and is about to watch nodes (its log says so), throws if it exits first or within 90 s.
 */
export async function startKwok(cp: ControlPlane, bin: string, o: KwokOptions = {}): Promise<Controller> {
  const config = join(cp.dir, "kwok.yaml");
  // A configuration given sets every parallelism (kwok fills no default into it: an unset one is 0, and kwok
  // refuses to start): kwok's own defaults, 4, where the caller says nothing.
  const given = o.podParallelism !== undefined || o.nodeParallelism !== undefined || o.leaseParallelism !== undefined;
  const options: Obj = given
    ? { podPlayStageParallelism: o.podParallelism ?? 4, nodePlayStageParallelism: o.nodeParallelism ?? 4, nodeLeaseParallelism: o.leaseParallelism ?? 4 }
    : {};
  const docs = [stagesYaml(), ...(o.extraStages ?? [])];
  // kwok `pkg/apis/config/v1alpha1/kwok_configuration_types.go`: KwokConfigurationOptions.
  if (given) docs.push(`apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: ${JSON.stringify(options)}\n`);
  writeFileSync(config, docs.join("---\n"));
  return startGoController(cp, {
    name: "kwok",
    bin,
    args: [
      `--kubeconfig=${cp.kubeconfig}`,
      `--config=${config}`,
      "--manage-all-nodes=false",
      `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
      `--node-lease-duration-seconds=${o.leaseDurationSeconds ?? 40}`,
      `--cidr=${o.cidr ?? "10.244.0.0/16"}`,
      "--node-ip=127.0.0.1",
    ],
    // Its HOME-relative default config (~/.kwok/kwok.yaml) must not join in.
    env: { HOME: cp.dir },
    // kwok logs no line once its controllers run; this one follows loading the config and the clients.
    // That it manages nodes shows when they are Ready (kwokNodes waits for that).
    ready: /"msg":"Watch nodes"/,
    notReady: "did not start",
    webhookPort: 0,
  });
}

/** A fixture shape as the Node object kwok manages: labels, taints, and capacity = allocatable in its status. */
export function kwokNode(node: ClusterNode): Obj {
  const resources: Record<string, string> = { cpu: String(node.cpu), memory: `${node.memoryGi}Gi`, pods: String(node.pods), "ephemeral-storage": "1Ti" };
  for (const [name, n] of Object.entries(node.allocatable)) resources[name] = String(n);
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: node.name, labels: node.labels, annotations: { [KWOK_NODE_ANNOTATION]: "fake" } },
    spec: { taints: node.taints },
    status: { capacity: resources, allocatable: resources, nodeInfo: { architecture: node.labels["kubernetes.io/arch"] ?? "amd64", operatingSystem: "linux" } },
  };
}

export const isReady = (node: Obj): boolean => (node.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True");

async function must(what: string, reply: Promise<ApiReply>, ok: number[] = [200, 201]): Promise<any> {
  const r = await reply;
  if (!ok.includes(r.status)) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/**
 * Creates the nodes (`concurrency` CREATEs at a time, default 8) and waits, up to `readyMs` (default 60 s
 * plus 50 ms a node), until kwok has made every one Ready. Returns their names and how long it took.
 */
export async function kwokNodes(
  cp: ControlPlane,
  nodes: readonly ClusterNode[],
  o: { concurrency?: number; readyMs?: number } = {},
): Promise<{ names: string[]; createMs: number; readyMs: number }> {
  const started = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < nodes.length) {
      const node = nodes[next++]!;
      await must(`creating kwok node ${node.name}`, cp.api("POST", "/api/v1/nodes", kwokNode(node)));
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency ?? 8, nodes.length) }, worker));
  const createMs = performance.now() - started;
  const names = new Set(nodes.map((n) => n.name));
  await cp.until(
    `${names.size} kwok nodes Ready`,
    async () => {
      const items = (await must("listing nodes", cp.api("GET", "/api/v1/nodes"))).items as Obj[];
      return items.filter((n) => names.has(n.metadata.name) && isReady(n)).length === names.size;
    },
    o.readyMs ?? 60_000 + 50 * nodes.length,
    500,
  );
  return { names: [...names], createMs, readyMs: performance.now() - started };
}

const LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/** metav1.MicroTime wants six fractional digits. */
const microTime = (d: Date): string => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

/**
 * Stops the renewal of node `name`'s Lease: another holder with a day-long duration takes it over, renewing
 * it one last time (renewTime now), and nothing renews it again. kwok leaves the node (and its pods) alone
 * from then on. The last renewal is needed: kube-controller-manager v1.37's node-lifecycle-controller (feature
 * NodeControllerLeaseCircuitBreaker, kubernetes `pkg/controller/nodelifecycle/node_lifecycle_controller.go`)
 * remembers a node's Lease only when its renewTime advances, and refuses to mark the node Unknown while the
 * live Lease's resourceVersion differs from the one it remembers, so a takeover that kept the renewTime would
 * leave the node Ready for ever.
 */
export async function stopNodeLease(cp: ControlPlane, name: string): Promise<Obj> {
  const lease = await must(`lease of ${name}`, cp.api("GET", `${LEASES}/${name}`));
  lease.spec = { ...lease.spec, holderIdentity: STALE_HOLDER, leaseDurationSeconds: 86_400, renewTime: microTime(new Date()) };
  return must(`taking over the lease of ${name}`, cp.api("PUT", `${LEASES}/${name}`, lease));
}

/** Gives node `name`'s Lease back to kwok: expired, so kwok takes it over at its next try (within ~ a quarter lease). */
export async function resumeNodeLease(cp: ControlPlane, name: string): Promise<Obj> {
  const lease = await must(`lease of ${name}`, cp.api("GET", `${LEASES}/${name}`));
  lease.spec = { ...lease.spec, leaseDurationSeconds: 1 };
  return must(`releasing the lease of ${name}`, cp.api("PUT", `${LEASES}/${name}`, lease));
}

/**
 * @module
 * The real Kueue controller manager (sigs.k8s.io/kueue v0.19.2, `cmd/kueue`, built by
 * `test/e2e/kueue/build.sh`, QM_KUEUE_BIN) against the e2e control plane of `./controlplane.ts`, as in a real
 * install: its CRDs (kueue `config/components/crd/bases`, from the Go module cache, server-side apply), the
 * binary with its webhooks served on 127.0.0.1 and registered by URL (kueue `config/components/webhook`,
 * rendered by kustomize, so its pod/deployment/statefulset namespace selectors are upstream's), and the
 * conversion webhook of the CRDs upstream converts (kueue `config/components/crd/kustomization.yaml`: local
 * queues, cluster queues, cohorts, workloads, MultiKueue clusters) pointed at the same server. A job labelled
 * `kueue.x-k8s.io/queue-name` is therefore suspended at CREATE by Kueue's mutating webhook, and unsuspended by
 * Kueue's UPDATE once its Workload is admitted, with the chosen ResourceFlavor's `nodeLabels` and
 * `tolerations` written into its pod template. Plus helpers for ResourceFlavors, ClusterQueues and
 * LocalQueues (API `kueue.x-k8s.io/v1beta2`, the storage version).
 *
 * The process is started by `./go-controller.ts` (stopped by its PID, also when the test process exits). Its
 * Configuration (`config.kueue.x-k8s.io/v1beta2`, kueue `apis/config/v1beta2/configuration_types.go`):
 * leader election off; internal certificate management off (the webhook server's pair is issued by
 * `src/certs/generate.ts` for 127.0.0.1 from a CA of this run, which the registered configurations carry as
 * `caBundle`); webhook, metrics and health servers on free loopback ports; `manageJobsWithoutQueueName: false`
 * (only labelled jobs are Kueue's); the integrations of {@link KUEUE_FRAMEWORKS}; the VisibilityOnDemand
 * feature gate off (its API server would listen on every interface and write a self-signed pair under
 * `/visibility`, kueue `pkg/visibility/server.go`).
 *
 * One thing outside the run's directory: with internal certificate management off, Kueue's `main` reads its
 * metrics serving pair from the fixed path `/etc/kueue/metrics/certs/tls.{crt,key}` (kueue `cmd/kueue/main.go`)
 * and exits when it is missing. {@link ensureMetricsCerts} writes a pair there when there is none (the test
 * never scrapes the metrics server, so any valid pair will do) and says so when it cannot.
 *
 * Needs a control plane whose kube-controller-manager runs `job-controller` for batch Jobs to get pods, and
 * kube-scheduler to bind them (`startControlPlane({ scheduler: true, controllers: ["job-controller"] })`).
 * Do not name a LocalQueue `default`: Kueue's LocalQueueDefaulting would put every unlabelled job of its
 * namespace in it.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { A100_MIG_DISABLED, CPU_NODE, H100_NO_MIG, NVIDIA_GPU_TAINT, clusterNode, type ClusterNode } from "../../fixtures/nodes.js";
import { freePort, type ControlPlane } from "./controlplane.js";
import { servingPair, startGoController, type Controller } from "./go-controller.js";
import { applyServerSide, ensureNamespace, goModuleDir, webhooksByUrl } from "./trainer.js";

export type { Controller } from "./go-controller.js";

export const KUEUE_MODULE = "sigs.k8s.io/kueue";
/** Kueue's API (the CRDs' storage version in v0.19.2). */
export const KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2";
/** The label that puts a job in a LocalQueue. */
export const QUEUE_LABEL = "kueue.x-k8s.io/queue-name";
/** The directory Kueue reads its metrics pair from when it does not manage its certificates (kueue `cmd/kueue/main.go`). */
export const KUEUE_METRICS_CERT_DIR = "/etc/kueue/metrics/certs";
/** Kueue's namespace (its Configuration's default `namespace`). */
export const KUEUE_NAMESPACE = "kueue-system";
/**
 * The integrations enabled by default (`integrations.frameworks`): batch Jobs, plain pods, the training-operator
 * v1 kinds, JobSet and Trainer v2's TrainJob. A framework whose CRD is not installed is set up once it is
 * (kueue `pkg/controller/jobframework/setup.go`); its webhook is served from the start.
 */
export const KUEUE_FRAMEWORKS = [
  "batch/job",
  "pod",
  "kubeflow.org/pytorchjob",
  "kubeflow.org/tfjob",
  "kubeflow.org/xgboostjob",
  "kubeflow.org/paddlejob",
  "kubeflow.org/jaxjob",
  "jobset.x-k8s.io/jobset",
  "trainer.kubeflow.org/trainjob",
] as const;
/** The CRDs upstream gives a conversion webhook (kueue `config/components/crd/kustomization.yaml`, the `webhook_in_*` patches). */
const CONVERTED_CRDS = ["localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"].map((p) => `${p}.kueue.x-k8s.io`);

type Obj = Record<string, any>;

/**
 * QM_KUEUE_BIN, or the reason it cannot be used (unset: the tests that need it skip with it; set to a missing
 * file: an error, as for QM_OPERATOR_BIN).
 */
export function kueueBin(): { bin: string } | { skip: string } {
  const bin = process.env.QM_KUEUE_BIN;
  if (!bin)
    return {
      skip: "QM_KUEUE_BIN not set: the Kueue suite needs the real Kueue controller manager (export QM_KUEUE_BIN=$(bash test/e2e/kueue/build.sh)/kueue)",
    };
  if (!existsSync(bin)) throw new Error(`QM_KUEUE_BIN=${bin} does not exist: run test/e2e/kueue/build.sh`);
  return { bin };
}

export const kueueModuleDir = (): string => goModuleDir("kueue/kueue-bin", KUEUE_MODULE);

/** Kueue's CRDs (kueue `config/components/crd/bases`), applied server-side (too large for client-side apply) and established. */
export async function installKueueCrds(cp: ControlPlane): Promise<string[]> {
  const dir = join(kueueModuleDir(), "config", "components", "crd", "bases");
  const crds = readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), "utf8")).map((d) => d.toJS() as Obj))
    .filter((o) => o?.kind === "CustomResourceDefinition");
  const names = crds.map((c) => c.metadata.name as string);
  for (const name of ["resourceflavors.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"]) {
    if (!names.includes(name)) throw new Error(`${dir} has no ${name}`);
  }
  await applyServerSide(cp, "Kueue's CRDs", crds);
  const established = await cp.kubectl(["wait", "--for=condition=Established", "crd", ...names, "--timeout=60s"]);
  if (established.code !== 0) throw new Error(`Kueue's CRDs not established: ${established.stderr}`);
  return names;
}

/** Writes a pair to {@link KUEUE_METRICS_CERT_DIR} unless one is there; throws, saying why, when it cannot. */
export async function ensureMetricsCerts(): Promise<void> {
  if (existsSync(join(KUEUE_METRICS_CERT_DIR, "tls.crt")) && existsSync(join(KUEUE_METRICS_CERT_DIR, "tls.key"))) return;
  try {
    await servingPair(KUEUE_METRICS_CERT_DIR, "kueue-metrics");
  } catch (err) {
    throw new Error(
      `Kueue (internal certificate management off) reads its metrics pair from ${KUEUE_METRICS_CERT_DIR}/tls.{crt,key} and exits without it; ` +
        `writing one there failed (${(err as Error).message}): create it once, e.g. as root`,
    );
  }
}

export interface KueueOptions {
  /** `integrations.frameworks` (default {@link KUEUE_FRAMEWORKS}). */
  frameworks?: readonly string[];
}

/**
 * Starts Kueue and registers its webhooks (and the CRDs' conversion webhook) by URL; resolves once a dry-run
 * Job labelled with a queue name comes back suspended, i.e. Kueue's job webhook is called at CREATE.
 * Needs {@link installKueueCrds} first.
 */
export async function startKueue(cp: ControlPlane, bin: string, o: KueueOptions = {}): Promise<Controller> {
  await ensureNamespace(cp, KUEUE_NAMESPACE);
  await ensureMetricsCerts();
  const certDir = join(cp.dir, "kueue-certs");
  const { caPem } = await servingPair(certDir, "kueue");
  const [port, metricsPort, healthPort] = [await freePort(), await freePort(), await freePort()];
  const config = join(cp.dir, "kueue-config.yaml");
  writeFileSync(
    config,
    [
      "apiVersion: config.kueue.x-k8s.io/v1beta2",
      "kind: Configuration",
      `namespace: ${KUEUE_NAMESPACE}`,
      "manageJobsWithoutQueueName: false",
      "leaderElection: {leaderElect: false}",
      "internalCertManagement: {enable: false}",
      `webhook: {port: ${port}, host: 127.0.0.1, certDir: ${JSON.stringify(certDir)}}`,
      `metrics: {bindAddress: "127.0.0.1:${metricsPort}"}`,
      `health: {healthProbeBindAddress: "127.0.0.1:${healthPort}"}`,
      "featureGates: {VisibilityOnDemand: false}",
      `integrations: {frameworks: ${JSON.stringify(o.frameworks ?? KUEUE_FRAMEWORKS)}}`,
      "",
    ].join("\n"),
  );
  const kueue = await startGoController(cp, {
    name: "kueue",
    bin,
    args: [`--kubeconfig=${cp.kubeconfig}`, `--config=${config}`],
    env: { POD_NAMESPACE: KUEUE_NAMESPACE },
    // The batch/job integration's reconciler (kueue `pkg/controller/jobs/job`; its logger is named "job"), started by the manager.
    ready: /"logger":"job",.*"msg":"Starting workers"/,
    webhookPort: port,
  });
  try {
    const configs = await webhooksByUrl(cp, join(kueueModuleDir(), "config", "components", "webhook"), "qm-test-kueue", port, caPem);
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    if (applied.code !== 0) throw new Error(`registering Kueue's webhooks: ${applied.stderr}`);
    const conversion = {
      strategy: "Webhook",
      webhook: {
        clientConfig: { url: `https://127.0.0.1:${port}/convert`, caBundle: Buffer.from(caPem).toString("base64") },
        conversionReviewVersions: ["v1"],
      },
    };
    for (const crd of CONVERTED_CRDS) {
      const r = await cp.api(
        "PATCH",
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}`,
        { spec: { conversion } },
        { "content-type": "application/merge-patch+json" },
      );
      if (r.status !== 200) throw new Error(`conversion webhook of ${crd}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    await cp.until(
      "Kueue's job webhook to suspend a queued Job at CREATE",
      async () => {
        const r = await cp.api("POST", "/apis/batch/v1/namespaces/default/jobs?dryRun=All", probeJob());
        return r.status === 201 && r.body?.spec?.suspend === true;
      },
      120_000,
      200,
    );
  } catch (err) {
    await kueue.stop();
    throw err;
  }
  return kueue;
}

const probeJob = (): Obj => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "qm-kueue-probe", labels: { [QUEUE_LABEL]: "qm-probe-queue" } },
  spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "registry.invalid/probe:1" }] } } },
});

async function create(cp: ControlPlane, path: string, obj: Obj): Promise<Obj> {
  const r = await cp.api("POST", path, obj);
  if (r.status !== 201) throw new Error(`creating ${obj.kind} ${obj.metadata.name}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export interface Flavor {
  name: string;
  /** Written by Kueue into an admitted job's pod templates as nodeSelector terms. */
  nodeLabels: Record<string, string>;
  /** Added by Kueue to an admitted job's pod templates. */
  tolerations?: Obj[];
  /** The taints of the flavor's nodes: Kueue assigns the flavor only to pod sets that tolerate them. */
  nodeTaints?: Obj[];
}

/** A ResourceFlavor. */
/**
 * The e2e Kueue suites' cluster: an A100 and an H100 node with the GPU taint (the H100 node with more cpu and
 * memory, so least-allocated scoring prefers it for any pod allowed there) and a CPU node, in one zone; one
 * flavor per GPU product whose tolerations let admitted pods onto its tainted node.
 */
export function gpuFlavorCluster(): {
  a100: ClusterNode;
  h100: ClusterNode;
  nodes: readonly ClusterNode[];
  toleration: { key: string; operator: "Exists"; effect: string };
  flavors: Flavor[];
} {
  const product = "nvidia.com/gpu.product";
  const a100 = clusterNode(A100_MIG_DISABLED, { name: "a100-node", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 });
  const h100 = clusterNode(H100_NO_MIG, { name: "h100-node", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 256, memoryGi: 2048 });
  const toleration = { key: NVIDIA_GPU_TAINT.key, operator: "Exists" as const, effect: NVIDIA_GPU_TAINT.effect };
  return {
    a100,
    h100,
    nodes: [a100, h100, clusterNode(CPU_NODE, { name: "cpu-node", zone: "zone-a", cpu: 512, memoryGi: 4096 })],
    toleration,
    flavors: [
      { name: "a100", nodeLabels: { [product]: a100.labels[product]! }, tolerations: [toleration] },
      { name: "h100", nodeLabels: { [product]: h100.labels[product]! }, tolerations: [toleration] },
    ],
  };
}

export const createResourceFlavor = (cp: ControlPlane, f: Flavor): Promise<Obj> =>
  create(cp, `${KUEUE_API}/resourceflavors`, {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "ResourceFlavor",
    metadata: { name: f.name },
    spec: { nodeLabels: f.nodeLabels, ...(f.tolerations ? { tolerations: f.tolerations } : {}), ...(f.nodeTaints ? { nodeTaints: f.nodeTaints } : {}) },
  });

export interface FlavorQuota {
  flavor: string;
  /** Nominal quota per resource (e.g. `{"nvidia.com/gpu": 8, cpu: 64, memory: "512Gi"}`). */
  quota: Record<string, number | string>;
}

/**
 * A ClusterQueue with one resource group covering the resources the flavors' quotas name (every flavor must
 * name the same ones), flavors tried in the order given, for the namespaces `namespaceSelector` picks (default
 * all). `queueingStrategy` is Kueue's default, BestEffortFIFO, unless given: under it a newer workload may be
 * admitted before an older one Kueue had set aside as inadmissible; StrictFIFO admits in order, the head blocking.
 */
export function createClusterQueue(
  cp: ControlPlane,
  name: string,
  flavors: FlavorQuota[],
  namespaceSelector: Obj = {},
  queueingStrategy: "BestEffortFIFO" | "StrictFIFO" = "BestEffortFIFO",
): Promise<Obj> {
  const covered = Object.keys(flavors[0]?.quota ?? {});
  for (const f of flavors) {
    if (Object.keys(f.quota).sort().join() !== [...covered].sort().join())
      throw new Error(`flavor ${f.flavor}: quota for ${Object.keys(f.quota)}, not ${covered}`);
  }
  return create(cp, `${KUEUE_API}/clusterqueues`, {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "ClusterQueue",
    metadata: { name },
    spec: {
      namespaceSelector,
      queueingStrategy,
      resourceGroups: [
        {
          coveredResources: covered,
          flavors: flavors.map((f) => ({ name: f.flavor, resources: covered.map((r) => ({ name: r, nominalQuota: String(f.quota[r]) })) })),
        },
      ],
    },
  });
}

/** A LocalQueue `name` in `namespace` feeding `clusterQueue`. */
export const createLocalQueue = (cp: ControlPlane, namespace: string, name: string, clusterQueue: string): Promise<Obj> =>
  create(cp, `${KUEUE_API}/namespaces/${namespace}/localqueues`, {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "LocalQueue",
    metadata: { name, namespace },
    spec: { clusterQueue },
  });

/**
 * The queues every Kueue suite starts from: `flavors` as ResourceFlavors, one ClusterQueue over them (each flavor's
 * quota `quota(flavor)`, tried in order, `queueingStrategy` as {@link createClusterQueue}), one LocalQueue in
 * `namespace` feeding it, and both Active.
 */
export async function createQueues(
  cp: ControlPlane,
  o: {
    namespace: string;
    flavors: readonly Flavor[];
    clusterQueue: string;
    localQueue: string;
    quota: (flavor: Flavor) => FlavorQuota["quota"];
    queueingStrategy?: "BestEffortFIFO" | "StrictFIFO";
  },
): Promise<void> {
  for (const f of o.flavors) await createResourceFlavor(cp, f);
  await createClusterQueue(
    cp,
    o.clusterQueue,
    o.flavors.map((f) => ({ flavor: f.name, quota: o.quota(f) })),
    {},
    o.queueingStrategy,
  );
  await createLocalQueue(cp, o.namespace, o.localQueue, o.clusterQueue);
  await waitQueuesActive(cp, o.clusterQueue, [{ namespace: o.namespace, name: o.localQueue }]);
}

/** Whether `obj`'s status has condition `type` True. */
export const hasCondition = (obj: Obj | undefined, type: string): boolean =>
  (obj?.status?.conditions ?? []).some((c: Obj) => c.type === type && c.status === "True");

/** Waits until a ClusterQueue and LocalQueue report Active (Kueue has them in its cache, flavors found). */
export async function waitQueuesActive(cp: ControlPlane, clusterQueue: string, localQueues: { namespace: string; name: string }[]): Promise<void> {
  await cp.until(`ClusterQueue ${clusterQueue} to be Active`, async () =>
    hasCondition((await cp.api("GET", `${KUEUE_API}/clusterqueues/${clusterQueue}`)).body, "Active"),
  );
  for (const q of localQueues) {
    await cp.until(`LocalQueue ${q.namespace}/${q.name} to be Active`, async () =>
      hasCondition((await cp.api("GET", `${KUEUE_API}/namespaces/${q.namespace}/localqueues/${q.name}`)).body, "Active"),
    );
  }
}

/** The Workload Kueue made for the job `kind`/`name` in `namespace` (its controller owner), if any yet. */
export async function workloadFor(cp: ControlPlane, namespace: string, kind: string, name: string): Promise<Obj | undefined> {
  const r = await cp.api("GET", `${KUEUE_API}/namespaces/${namespace}/workloads`);
  // 429 "storage is (re)initializing": the CRD's storage is still starting, moments after its install; not yet.
  if (r.status === 429) return undefined;
  if (r.status !== 200) throw new Error(`listing workloads in ${namespace}: ${r.status} ${JSON.stringify(r.body)}`);
  return (r.body.items as Obj[]).find((w) => (w.metadata.ownerReferences ?? []).some((o: Obj) => o.controller && o.kind === kind && o.name === name));
}

/**
 * Finishes `pods` as a kubelet would (no kubelet runs here): each pod's status written Succeeded, its containers
 * terminated with exit code 0; the job-controller then completes their Job.
 */
export async function succeedPods(cp: ControlPlane, pods: readonly Obj[]): Promise<void> {
  for (const p of pods) {
    const containerStatuses = (p.spec.containers as Obj[]).map((c) => ({
      name: c.name,
      image: c.image,
      imageID: "",
      ready: false,
      restartCount: 0,
      state: { terminated: { exitCode: 0, reason: "Completed" } },
    }));
    const r = await cp.api(
      "PATCH",
      `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}/status`,
      { status: { phase: "Succeeded", containerStatuses } },
      { "content-type": "application/strategic-merge-patch+json" },
    );
    if (r.status !== 200) throw new Error(`pod ${p.metadata.namespace}/${p.metadata.name} Succeeded: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

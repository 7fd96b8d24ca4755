/**
 * @module
 * The real JobSet controller (sigs.k8s.io/jobset v0.12.0, `test/e2e/jobset/build.sh`, QM_JOBSET_BIN) and the
 * real Kubeflow Trainer v2 controller manager (github.com/kubeflow/trainer/v2 v2.3.0,
 * `test/e2e/trainer/build.sh`, QM_TRAINER_BIN) against the e2e control plane of `./controlplane.ts`: their
 * CRDs (server-side apply from the Go module cache: jobset `config/components/crd/bases`, trainer
 * `manifests/base/crds`), the binaries themselves with their webhooks served and registered by URL, and the
 * upstream default runtimes (`manifests/base/runtimes`, ClusterTrainingRuntimes). Each process is stopped by
 * its PID (also when the test process exits).
 *
 * Needs a control plane whose kube-controller-manager runs `job-controller` (`startControlPlane({ controllers:
 * [JOB_CONTROLLER] })`): JobSet makes Jobs, and the Jobs' pods are made by kube-controller-manager.
 *
 * Both run with leader election, metrics and their own certificate management off; their webhook servers
 * listen on 127.0.0.1 (both Configurations have a `webhook.host`), serving a pair issued by
 * `src/certs/generate.ts` for 127.0.0.1 from a CA of this run, which the registered configurations carry as
 * `caBundle`. JobSet's webhooks are required, not optional: without its defaulting webhook its controller
 * dereferences a nil field (e.g. `successPolicy`) and panics. Trainer's webhooks (TrainJob defaulting,
 * TrainJob/TrainingRuntime/ClusterTrainingRuntime validation) are registered too, so TrainJobs are refused
 * as on a real cluster. Trainer's runtime status server (feature gate TrainJobStatus, alpha, off by default)
 * stays off: it would listen on every interface.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { freePort, type ControlPlane } from "./controlplane.js";
import { pointWebhooksAt, servingPair, startGoController, type Controller } from "./go-controller.js";

export type { Controller } from "./go-controller.js";

const HERE = dirname(fileURLToPath(import.meta.url));
export const TRAINER_MODULE = "github.com/kubeflow/trainer/v2";
export const JOBSET_MODULE = "sigs.k8s.io/jobset";
/** The kube-controller-manager controller JobSet needs. */
export const JOB_CONTROLLER = "job-controller";

type Obj = Record<string, any>;

/**
 * QM_TRAINER_BIN and QM_JOBSET_BIN, or the reason they cannot be used (unset: the tests that need them skip
 * with it; set to a missing file: an error, as for QM_OPERATOR_BIN).
 */
export function trainerBins(): { trainer: string; jobset: string } | { skip: string } {
  const trainer = process.env.QM_TRAINER_BIN;
  const jobset = process.env.QM_JOBSET_BIN;
  if (!trainer || !jobset) {
    const unset = [!trainer && "QM_TRAINER_BIN", !jobset && "QM_JOBSET_BIN"].filter(Boolean).join(" and ");
    return {
      skip:
        `${unset} not set: the Trainer v2 conformance needs the real controllers (export ` +
        "QM_TRAINER_BIN=$(bash test/e2e/trainer/build.sh)/trainer-controller-manager QM_JOBSET_BIN=$(bash test/e2e/jobset/build.sh)/jobset)",
    };
  }
  for (const [name, bin, script] of [
    ["QM_TRAINER_BIN", trainer, "trainer"],
    ["QM_JOBSET_BIN", jobset, "jobset"],
  ] as const) {
    if (!existsSync(bin)) throw new Error(`${name}=${bin} does not exist: run test/e2e/${script}/build.sh`);
  }
  return { trainer, jobset };
}

/** A module's directory in the Go module cache, as the consumer module `moduleDir` (test/e2e/<dir>) pins it. */
export function goModuleDir(consumer: "trainer/trainer-bin" | "jobset/jobset-bin" | "kueue/kueue-bin", module: string): string {
  const dir = execFileSync("go", ["list", "-m", "-f", "{{.Dir}}", module], {
    cwd: join(HERE, "..", consumer),
    env: { ...process.env, GOFLAGS: "-mod=readonly", GOTOOLCHAIN: "local" },
    encoding: "utf8",
  }).trim();
  if (!dir || !existsSync(dir))
    throw new Error(`${module} is not in the Go module cache (${dir || "no directory"}): run test/e2e/${consumer.split("/")[0]}/build.sh`);
  return dir;
}

export const trainerModuleDir = (): string => goModuleDir("trainer/trainer-bin", TRAINER_MODULE);
export const jobsetModuleDir = (): string => goModuleDir("jobset/jobset-bin", JOBSET_MODULE);

export async function kustomize(cp: ControlPlane, dir: string): Promise<Obj[]> {
  const r = await cp.kubectl(["kustomize", dir]);
  if (r.code !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
}

export async function applyServerSide(cp: ControlPlane, what: string, objects: Obj[]): Promise<void> {
  const r = await cp.kubectl(
    ["apply", "--server-side", "--field-manager=qm-conformance", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  );
  if (r.code !== 0) throw new Error(`applying ${what}: ${r.stderr}`);
}

/** JobSet's and Trainer's CRDs, applied server-side (too large for client-side apply) and established. */
export async function installTrainerCrds(cp: ControlPlane): Promise<void> {
  const jobsetCrds = join(jobsetModuleDir(), "config", "components", "crd", "bases");
  const crds = [
    ...(await kustomize(cp, join(trainerModuleDir(), "manifests", "base", "crds"))),
    ...readdirSync(jobsetCrds)
      .filter((f) => f.endsWith(".yaml"))
      .flatMap((f) => parseAllDocuments(readFileSync(join(jobsetCrds, f), "utf8")).map((d) => d.toJS() as Obj)),
  ].filter((o) => o?.kind === "CustomResourceDefinition");
  if (crds.length < 4) throw new Error(`expected JobSet's and Trainer's 4 CRDs, found ${crds.length}`);
  await applyServerSide(cp, "the JobSet and Trainer CRDs", crds);
  const established = await cp.kubectl(["wait", "--for=condition=Established", "crd", ...crds.map((c) => c.metadata.name as string), "--timeout=60s"]);
  if (established.code !== 0) throw new Error(`JobSet/Trainer CRDs not established: ${established.stderr}`);
}

/** The upstream default runtimes (`manifests/base/runtimes`: torch, deepspeed, jax, mlx, xgboost, torchtune), applied server-side. */
export async function installDefaultRuntimes(cp: ControlPlane): Promise<string[]> {
  const runtimes = (await kustomize(cp, join(trainerModuleDir(), "manifests", "base", "runtimes"))).filter((o) => o.kind === "ClusterTrainingRuntime");
  if (runtimes.length === 0) throw new Error("no ClusterTrainingRuntime in the trainer module's manifests/base/runtimes");
  await applyServerSide(cp, "the default runtimes", runtimes);
  return runtimes.map((r) => r.metadata.name as string);
}

/**
 * The webhook configurations `dir` renders (kustomize: upstream's patches, e.g. JobSet's pod webhooks'
 * objectSelector, included), renamed `<prefix>-<name>` and pointed by URL at 127.0.0.1:`port` with `caPem`.
 */
export async function webhooksByUrl(cp: ControlPlane, dir: string, prefix: string, port: number, caPem: string): Promise<Obj[]> {
  const configs = (await kustomize(cp, dir)).filter((o) => /^(Mutating|Validating)WebhookConfiguration$/.test(String(o.kind)));
  if (configs.length === 0) throw new Error(`no webhook configuration in ${dir}`);
  return configs.map((config) => pointWebhooksAt(config, `${prefix}-${config.metadata.name}`, port, caPem));
}

export async function ensureNamespace(cp: ControlPlane, name: string): Promise<void> {
  const r = await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  if (r.status !== 201 && r.status !== 409) throw new Error(`namespace ${name}: ${r.status} ${JSON.stringify(r.body)}`);
}

/** Starts JobSet (its webhook server on 127.0.0.1) and registers its webhooks; resolves once its controller runs. */
export async function startJobSet(cp: ControlPlane, bin: string): Promise<Controller> {
  await ensureNamespace(cp, "jobset-system");
  const certDir = join(cp.dir, "jobset-certs");
  const { caPem } = await servingPair(certDir, "jobset");
  const port = await freePort();
  const config = join(cp.dir, "jobset-config.yaml");
  writeFileSync(
    config,
    [
      "apiVersion: config.jobset.x-k8s.io/v1alpha1",
      "kind: Configuration",
      "leaderElection: {leaderElect: false}",
      "internalCertManagement: {enable: false}",
      `webhook: {port: ${port}, host: 127.0.0.1, certDir: ${JSON.stringify(certDir)}}`,
      'metrics: {bindAddress: "0"}',
      'health: {healthProbeBindAddress: "0"}',
      "",
    ].join("\n"),
  );
  const jobset = await startGoController(cp, {
    name: "jobset",
    bin,
    args: [`--kubeconfig=${cp.kubeconfig}`, `--config=${config}`],
    env: { POD_NAMESPACE: "jobset-system" },
    ready: /Starting workers/,
    webhookPort: port,
  });
  try {
    const configs = await webhooksByUrl(cp, join(jobsetModuleDir(), "config", "components", "webhook"), "qm-test-jobset", port, caPem);
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    if (applied.code !== 0) throw new Error(`registering JobSet's webhooks: ${applied.stderr}`);
    // Called once a dry-run JobSet comes back defaulted (successPolicy is set only by the defaulting webhook).
    await cp.until(
      "JobSet's webhooks to be called",
      async () => {
        const r = await cp.api("POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?dryRun=All", probeJobSet());
        return r.status === 201 && r.body?.spec?.successPolicy !== undefined;
      },
      30_000,
      200,
    );
  } catch (err) {
    await jobset.stop();
    throw err;
  }
  return jobset;
}

const probeJobSet = (): Obj => ({
  apiVersion: "jobset.x-k8s.io/v1alpha2",
  kind: "JobSet",
  metadata: { name: "probe" },
  spec: {
    replicatedJobs: [
      {
        name: "r",
        replicas: 1,
        template: { spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "c", image: "registry.invalid/probe:1" }] } } } },
      },
    ],
  },
});

/**
 * Starts the Trainer v2 controller manager (webhook server on 127.0.0.1, pair in its default directory under
 * a `TMPDIR` of this run) and registers its webhooks; resolves once its TrainJob controller runs.
 */
export async function startTrainer(cp: ControlPlane, bin: string): Promise<Controller> {
  await ensureNamespace(cp, "kubeflow-system");
  const tmp = join(cp.dir, "trainer-tmp");
  // controller-runtime's default CertDir: os.TempDir()/k8s-webhook-server/serving-certs (the Configuration has no certDir).
  const { caPem } = await servingPair(join(tmp, "k8s-webhook-server", "serving-certs"), "trainer");
  const port = await freePort();
  const config = join(cp.dir, "trainer-config.yaml");
  writeFileSync(
    config,
    [
      "apiVersion: config.trainer.kubeflow.org/v1alpha1",
      "kind: Configuration",
      'health: {healthProbeBindAddress: "0"}',
      'metrics: {bindAddress: "0"}',
      `webhook: {port: ${port}, host: 127.0.0.1}`,
      "leaderElection: {leaderElect: false}",
      "certManagement: {enable: false}",
      "",
    ].join("\n"),
  );
  const trainer = await startGoController(cp, {
    name: "trainer-controller-manager",
    bin,
    args: [`--kubeconfig=${cp.kubeconfig}`, `--config=${config}`],
    env: { POD_NAMESPACE: "kubeflow-system", TMPDIR: tmp },
    ready: /Starting workers.*trainjob_controller/,
    webhookPort: port,
  });
  try {
    const configs = await webhooksByUrl(cp, join(trainerModuleDir(), "manifests", "base", "webhook"), "qm-test-trainer", port, caPem);
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    if (applied.code !== 0) throw new Error(`registering Trainer's webhooks: ${applied.stderr}`);
    // Called once a TrainJob naming no runtime that exists is refused by its validating webhook.
    await cp.until(
      "Trainer's webhooks to be called",
      async () => {
        const r = await cp.api("POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs?dryRun=All", {
          apiVersion: "trainer.kubeflow.org/v1alpha1",
          kind: "TrainJob",
          metadata: { name: "probe" },
          spec: { runtimeRef: { name: "qm-no-such-runtime" } },
        });
        return r.status !== 201 && /validator\.trainjob\.trainer\.kubeflow\.org" denied the request/.test(String(r.body?.message ?? ""));
      },
      30_000,
      200,
    );
  } catch (err) {
    await trainer.stop();
    throw err;
  }
  return trainer;
}

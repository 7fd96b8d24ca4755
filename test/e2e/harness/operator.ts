/**
 * @module
 * The real Kubeflow training operator (github.com/kubeflow/training-operator v1.9.4, built by
 * `test/e2e/operator/build.sh`, QM_OPERATOR_BIN) against the e2e control plane of `./controlplane.ts`:
 * its CRDs, then the binary itself, stopped by PID.
 *
 * Its webhooks cannot be switched off (cmd/training-operator.v1/main.go always starts the webhook server and
 * the certificate rotator of github.com/open-policy-agent/cert-controller, and starts its controllers only
 * once the rotator is ready). The rotator needs the Secret `kubeflow/training-operator-webhook-cert` (it fills
 * it) and a `tls.crt` in its fixed directory `/tmp/k8s-webhook-server/serving-certs` (existence is all it
 * checks: in a cluster the Secret is mounted there); a missing ValidatingWebhookConfiguration is only logged.
 * The webhook server reads its pair from controller-runtime's default directory under `$TMPDIR`, which is set
 * here to a directory of this run holding a pair made by `src/certs/generate.ts`. No
 * ValidatingWebhookConfiguration is registered by `startOperator`: the apiserver never calls the operator's
 * webhooks unless a test registers them with {@link registerOperatorWebhooks} (by URL, with that pair's CA).
 * The webhook server listens on a free port on every interface (the operator has no flag for its host);
 * metrics and health probes are off.
 * `KUBEFLOW_NAMESPACE` is not set: it would also restrict the namespaces the operator watches.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { freePort, type ControlPlane } from "./controlplane.js";
import { pointWebhooksAt, servingPair, startGoController, type Controller } from "./go-controller.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const MODULE = "github.com/kubeflow/training-operator";
/** The directory cert-controller's rotator checks for `tls.crt` (training-operator `pkg/cert/cert.go` certDir). */
const ROTATOR_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs";

export interface Operator extends Controller {
  /** The operator's webhook server: its port (reached on 127.0.0.1) and the CA of its serving certificate. */
  webhook: { port: number; caPem: string };
}

/** The operator binary from QM_OPERATOR_BIN, or undefined when it is not set. */
export function operatorBin(): string | undefined {
  const bin = process.env.QM_OPERATOR_BIN;
  if (!bin) return undefined;
  if (!existsSync(bin)) throw new Error(`QM_OPERATOR_BIN=${bin} does not exist: run test/e2e/operator/build.sh`);
  return bin;
}

/** The training operator's module directory in the Go module cache (the build puts it there). */
export function operatorModuleDir(): string {
  const dir = execFileSync("go", ["list", "-m", "-f", "{{.Dir}}", MODULE], {
    cwd: join(HERE, "..", "operator", "operator-bin"),
    env: { ...process.env, GOFLAGS: "-mod=readonly", GOTOOLCHAIN: "local" },
    encoding: "utf8",
  }).trim();
  if (!dir || !existsSync(join(dir, "manifests", "base", "crds"))) {
    throw new Error(`${MODULE} is not in the Go module cache (${dir || "no directory"}): run test/e2e/operator/build.sh`);
  }
  return dir;
}

/** Renders the module's `manifests/base/crds` with kubectl's kustomize and applies them server-side (they are too large for client-side apply). */
export async function installOperatorCrds(cp: ControlPlane): Promise<void> {
  const rendered = await cp.kubectl(["kustomize", join(operatorModuleDir(), "manifests", "base", "crds")]);
  if (rendered.code !== 0) throw new Error(`kubectl kustomize: ${rendered.stderr}`);
  const applied = await cp.kubectl(["apply", "--server-side", "--field-manager=qm-conformance", "-f", "-"], rendered.stdout);
  if (applied.code !== 0) throw new Error(`applying the operator's CRDs: ${applied.stderr}`);
  const established = await cp.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  if (established.code !== 0) throw new Error(`operator CRDs not established: ${established.stderr}`);
}

/** Starts the operator (every scheme it supports) against `cp` with the admin kubeconfig; `extraEnv` joins its environment. */
export async function startOperator(cp: ControlPlane, bin: string, extraEnv: Record<string, string> = {}): Promise<Operator> {
  const ns = await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "kubeflow" } });
  if (ns.status !== 201 && ns.status !== 409) throw new Error(`namespace kubeflow: ${ns.status} ${JSON.stringify(ns.body)}`);
  const secret = await cp.api("POST", "/api/v1/namespaces/kubeflow/secrets", {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "training-operator-webhook-cert" },
  });
  if (secret.status !== 201 && secret.status !== 409) throw new Error(`webhook Secret: ${secret.status} ${JSON.stringify(secret.body)}`);

  // The webhook server's serving pair (used by the apiserver only once registerOperatorWebhooks points a configuration at it).
  const tmp = join(cp.dir, "operator-tmp");
  const { caPem, certPem } = await servingPair(join(tmp, "k8s-webhook-server", "serving-certs"), "operator", ["training-operator.kubeflow.svc", "localhost"]);

  const webhookPort = await freePort();
  // Its controllers start once the rotator is ready (the log says "registering controllers...", then "Starting workers").
  // On a loaded machine the rotator (open-policy-agent/cert-controller v0.16.0) can lose a race with itself on the
  // Secret ("the object has been modified", then "missing ca.crt") and never get ready: seen once in 2 clean
  // runs of .ci/run. Then the Secret is made again, empty, and the operator started once more.
  const start = (): Promise<Controller> => {
    let createdRotatorCert = false;
    if (!existsSync(join(ROTATOR_CERT_DIR, "tls.crt"))) {
      mkdirSync(ROTATOR_CERT_DIR, { recursive: true });
      writeFileSync(join(ROTATOR_CERT_DIR, "tls.crt"), certPem);
      createdRotatorCert = true;
    }
    return startGoController(cp, {
      name: "training-operator",
      bin,
      args: [
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        `--webhook-server-port=${webhookPort}`,
        "--controller-threads=4",
        "--zap-log-level=info",
        "--zap-devel=false",
      ],
      env: { ...extraEnv, TMPDIR: tmp },
      unset: ["KUBEFLOW_NAMESPACE", "MY_POD_NAMESPACE"],
      ready: /Starting workers/,
      notReady: "'s controllers not started",
      webhookPort,
      cleanup: () => {
        if (createdRotatorCert) rmSync(join(ROTATOR_CERT_DIR, "tls.crt"), { force: true });
      },
    });
  };
  let operator: Controller;
  try {
    operator = await start();
  } catch (err) {
    if (!String(err).includes("controllers not started")) throw err;
    await cp.api("DELETE", "/api/v1/namespaces/kubeflow/secrets/training-operator-webhook-cert");
    const again = await cp.api("POST", "/api/v1/namespaces/kubeflow/secrets", {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "training-operator-webhook-cert" },
    });
    if (again.status !== 201) throw new Error(`webhook Secret, again: ${again.status} ${JSON.stringify(again.body)}`);
    operator = await start();
  }
  return { ...operator, webhook: { port: webhookPort, caPem } };
}

/**
 * The name of the configuration {@link registerOperatorWebhooks} creates. Not the operator's own
 * `validator.training-operator.kubeflow.org` (`pkg/cert/cert.go`): its certificate rotator would write its own
 * CA into that one, and the server serves the pair made here.
 */
export const OPERATOR_WEBHOOKS_NAME = "qm-test-training-operator-validators";

/**
 * Registers the operator's validating webhooks, as its module's `manifests/base/webhook/manifests.yaml` declares
 * them (paths, rules, failurePolicy Fail), pointed by URL at `operator`'s webhook server. Returns once the
 * apiserver calls them (a dry-run create of a TFJob named `0-probe`, a DNS subdomain but no DNS-1035 label, is
 * refused by the TFJob webhook); the returned function removes them and returns once that job passes again.
 */
export async function registerOperatorWebhooks(cp: ControlPlane, operator: Operator, namespace = "default"): Promise<() => Promise<void>> {
  const file = join(operatorModuleDir(), "manifests", "base", "webhook", "manifests.yaml");
  const config = parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS() as Record<string, any>)
    .find((d) => d?.kind === "ValidatingWebhookConfiguration");
  if (!config) throw new Error(`no ValidatingWebhookConfiguration in ${file}`);
  pointWebhooksAt(config, OPERATOR_WEBHOOKS_NAME, operator.webhook.port, operator.webhook.caPem);
  const base = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
  const created = await cp.api("POST", base, config);
  if (created.status !== 201) throw new Error(`registering the operator's webhooks: ${created.status} ${JSON.stringify(created.body)}`);
  const probe = {
    apiVersion: "kubeflow.org/v1",
    kind: "TFJob",
    metadata: { name: "0-probe", namespace },
    spec: { tfReplicaSpecs: { Worker: { replicas: 1, template: { spec: { containers: [{ name: "tensorflow", image: "probe" }] } } } } },
  };
  const refusedByWebhook = async (): Promise<boolean> => {
    const r = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${namespace}/tfjobs?dryRun=All`, probe);
    return r.status !== 201 && /validator\.tfjob/.test(JSON.stringify(r.body));
  };
  await cp.until("the operator's webhooks to be called", refusedByWebhook, 30_000, 100);
  return async () => {
    const r = await cp.api("DELETE", `${base}/${OPERATOR_WEBHOOKS_NAME}`);
    if (r.status !== 200) throw new Error(`removing the operator's webhooks: ${r.status} ${JSON.stringify(r.body)}`);
    await cp.until("the operator's webhooks to be gone", async () => !(await refusedByWebhook()), 30_000, 100);
  };
}

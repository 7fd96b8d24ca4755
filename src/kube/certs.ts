/**
 * @module
 * The cluster side of `quartermaster certs`: the CA and serving Secrets in Quartermaster's namespace and
 * the caBundle of the webhook configurations, through @kubernetes/client-node (imported on first use).
 * Secrets are replaced with their resourceVersion, so two runs racing cannot overwrite each other (the
 * loser fails with 409 and the next run starts from what the winner wrote). caBundles are set with a
 * strategic-merge patch keyed by webhook name, which touches nothing else in the configuration.
 * Errors keep their HTTP status in `code`.
 */
import type { CertStore, StoredSecret, StoredWebhookConfiguration } from "../certs/ensure.js";
import { kubeClient, statusOf } from "./client.js";

export interface CertStoreOptions {
  kubeconfig?: string;
  /** The deadline of each request in ms (--request-timeout); 0 for none. Default: ./client.ts RESIDENT_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  /** Namespace of the Secrets. */
  namespace: string;
  /** Names of the MutatingWebhookConfigurations and ValidatingWebhookConfigurations to keep trusting the CA. */
  mutating: readonly string[];
  validating: readonly string[];
}

const b64 = (s: string): string => Buffer.from(s).toString("base64");
const unb64 = (s: string | undefined): string => (s ? Buffer.from(s, "base64").toString("utf8") : "");

export async function connectCertStore(opts: CertStoreOptions): Promise<CertStore> {
  const { k8s, kc } = await kubeClient(opts.kubeconfig, opts);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const admission = kc.makeApiClient(k8s.AdmissionregistrationV1Api);
  const strategicMerge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.StrategicMergePatch);
  const { namespace } = opts;

  const notFound =
    (kind: string, name: string) =>
    (err: unknown): never => {
      if (statusOf(err) === 404) throw Object.assign(new Error(`${kind} ${name} not found: apply the webhook configurations first`), { code: 404, cause: err });
      throw err;
    };

  return {
    async readSecret(name) {
      try {
        const s = await core.readNamespacedSecret({ name, namespace });
        const data: Record<string, string> = {};
        for (const [k, v] of Object.entries(s.data ?? {})) data[k] = unb64(v);
        return { data, version: s.metadata?.resourceVersion };
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    },
    async writeSecret(name, type, data, previous?: StoredSecret) {
      const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)]));
      const metadata = { name, namespace, labels: { "app.kubernetes.io/name": "quartermaster", "app.kubernetes.io/managed-by": "quartermaster-certs" } };
      if (!previous) {
        await core.createNamespacedSecret({ namespace, body: { apiVersion: "v1", kind: "Secret", type, metadata, data: encoded } });
        return;
      }
      const body = { apiVersion: "v1", kind: "Secret", type, metadata: { ...metadata, resourceVersion: previous.version }, data: encoded };
      await core.replaceNamespacedSecret({ name, namespace, body });
    },
    async readWebhookConfigurations() {
      const shape = (
        kind: StoredWebhookConfiguration["kind"],
        name: string,
        webhooks: Array<{ name: string; clientConfig?: { caBundle?: string } }> | undefined,
      ): StoredWebhookConfiguration => ({
        kind,
        name,
        webhooks: (webhooks ?? []).map((w) => ({ name: w.name, caBundle: unb64(w.clientConfig?.caBundle) })),
      });
      return Promise.all([
        ...opts.mutating.map(async (name) =>
          shape(
            "MutatingWebhookConfiguration",
            name,
            (await admission.readMutatingWebhookConfiguration({ name }).catch(notFound("MutatingWebhookConfiguration", name))).webhooks,
          ),
        ),
        ...opts.validating.map(async (name) =>
          shape(
            "ValidatingWebhookConfiguration",
            name,
            (await admission.readValidatingWebhookConfiguration({ name }).catch(notFound("ValidatingWebhookConfiguration", name))).webhooks,
          ),
        ),
      ]);
    },
    async writeCaBundle(config, webhooks, bundle) {
      const body = { webhooks: webhooks.map((name) => ({ name, clientConfig: { caBundle: b64(bundle) } })) };
      if (config.kind === "MutatingWebhookConfiguration") await admission.patchMutatingWebhookConfiguration({ name: config.name, body }, strategicMerge);
      else await admission.patchValidatingWebhookConfiguration({ name: config.name, body }, strategicMerge);
    },
  };
}

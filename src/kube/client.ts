/**
 * @module
 * @kubernetes/client-node and a loaded KubeConfig, for every reader and writer in `src/kube`. The module is
 * imported here on first use (it takes over a second to load), never at start-up.
 *
 * Every API client made from the returned KubeConfig reports failures people can act on (src/core/errors.ts): a
 * call the apiserver refuses throws KubeApiError with the Status's message and reason (client-node's own
 * ApiException puts the whole response, headers included, in its message); a cluster that does not answer
 * throws ClusterConnectionError naming the server URL.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { ClusterConnectionError, KubeApiError, KubeconfigMissingError, NoKubeconfigError } from "../core/errors.js";

/** Where client-node's loadFromCluster reads the ServiceAccount's token and CA (a token means "in a cluster"). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Where a configuration comes from: a kubeconfig file, the files of $KUBECONFIG, or the in-cluster ServiceAccount. */
export type KubeconfigSource = { file: string } | { env: string[] } | { inCluster: true };

/**
 * Where client-node's `loadFromDefault` would load from, in its order: `file` (--kubeconfig), $KUBECONFIG,
 * ~/.kube/config, the in-cluster ServiceAccount. The plain-HTTPS reader (rest.ts) follows the same choice.
 * Throws NoKubeconfigError when there is none, KubeconfigMissingError when --kubeconfig or $KUBECONFIG names a
 * file that does not exist (client-node would fail on it with a bare ENOENT).
 */
export function kubeconfigSource(file: string | undefined, env: NodeJS.ProcessEnv = process.env, home = homedir()): KubeconfigSource {
  if (file) {
    if (!existsSync(file)) throw new KubeconfigMissingError([file], { flag: true });
    return { file };
  }
  const paths = env.KUBECONFIG?.split(delimiter).filter(Boolean) ?? [];
  if (paths.length > 0) {
    // client-node loads every file of $KUBECONFIG and fails on the first missing one: name them all here.
    const missing = paths.filter((p) => !existsSync(p));
    if (missing.length > 0) throw new KubeconfigMissingError(missing, { env: env.KUBECONFIG! });
    return { env: paths };
  }
  const homeConfig = join(home, ".kube", "config");
  if (existsSync(homeConfig)) return { file: homeConfig };
  if (existsSync(join(SERVICE_ACCOUNT_DIR, "token"))) return { inCluster: true };
  throw new NoKubeconfigError();
}

/** Throws NoKubeconfigError when `loadFromDefault` would find nothing ({@link kubeconfigSource}). */
export function assertKubeconfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env, home = homedir()): void {
  kubeconfigSource(file, env, home);
}

export type ClientNode = typeof import("@kubernetes/client-node");

/** The client module and the kubeconfig at `file`, else the in-cluster ServiceAccount or $KUBECONFIG. */
export async function kubeClient(file: string | undefined): Promise<{ k8s: ClientNode; kc: KubeConfig }> {
  assertKubeconfig(file);
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  withActionableErrors(k8s, kc);
  return { k8s, kc };
}

type HttpLibrary = {
  send(request: import("@kubernetes/client-node").RequestContext): { toPromise(): Promise<import("@kubernetes/client-node").ResponseContext> };
};

/**
 * Makes `kc.makeApiClient` build clients whose HTTP layer turns failures into KubeApiError and
 * ClusterConnectionError. Same configuration as client-node's own makeApiClient (server, auth), with the
 * default HTTP library wrapped (client-node's documented extension point, `httpApi`).
 */
export function withActionableErrors(k8s: ClientNode, kc: KubeConfig): void {
  kc.makeApiClient = ((apiClientType: new (config: unknown) => unknown) => {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error(`the kubeconfig has no current cluster (context "${kc.getCurrentContext()}"): pass --kubeconfig or set its current-context`);
    const inner: HttpLibrary = k8s.createConfiguration().httpApi;
    const config = k8s.createConfiguration({
      baseServer: new k8s.ServerConfiguration(cluster.server, {}),
      authMethods: { default: kc },
      httpApi: k8s.wrapHttpLibrary({ send: (request) => sendWithActionableErrors(inner, request, cluster.server) }),
    });
    return new apiClientType(config);
  }) as KubeConfig["makeApiClient"];
}

async function sendWithActionableErrors(
  inner: HttpLibrary,
  request: import("@kubernetes/client-node").RequestContext,
  server: string,
): Promise<import("@kubernetes/client-node").ResponseContext> {
  let response;
  try {
    response = await inner.send(request).toPromise();
  } catch (err) {
    // An abort (a caller's timeout) is the caller's to describe.
    if ((err as { name?: string } | null)?.name === "AbortError") throw err;
    throw new ClusterConnectionError(server, err);
  }
  if (response.httpStatusCode < 400) return response;
  let text = "";
  try {
    text = await response.body.text();
  } catch {
    /* the body could not be read: the status alone */
  }
  throw KubeApiError.fromResponse(response.httpStatusCode, text, { method: String(request.getHttpMethod()), url: request.getUrl() });
}

/** The HTTP status a failed call's error carries (`code`, as on KubeApiError and client-node's ApiException), if any. */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

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
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import {
  ClusterConnectionError,
  KubeApiError,
  KubeconfigInvalidError,
  KubeconfigMissingError,
  NoKubeconfigError,
  RequestTimeoutError,
  errorMessage,
} from "../core/errors.js";

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

/**
 * A request's deadline when the caller names none: the resident commands (`serve`, `reconcile --watch`) keep
 * waiting patiently, but no single request waits forever. The interactive commands pass --request-timeout.
 */
export const RESIDENT_REQUEST_TIMEOUT_MS = 60_000;

export interface KubeClientOptions {
  /** The deadline of each request, credentials included, in ms (kubectl's --request-timeout); 0 for none. */
  requestTimeoutMs?: number;
}

/** The client module and the kubeconfig at `file`, else the in-cluster ServiceAccount or $KUBECONFIG. */
export async function kubeClient(file: string | undefined, opts: KubeClientOptions = {}): Promise<{ k8s: ClientNode; kc: KubeConfig }> {
  const source = kubeconfigSource(file);
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  loadKubeconfig(k8s, kc, source);
  withActionableErrors(k8s, kc, opts.requestTimeoutMs ?? RESIDENT_REQUEST_TIMEOUT_MS);
  return { k8s, kc };
}

/**
 * Loads `source` into `kc` as client-node's loadFromFile/loadFromDefault would, with a file that is empty or
 * does not parse named (client-node throws `Cannot read properties of undefined (reading 'clusters')` on an
 * empty one, and its parser's excerpt without the file's name on a malformed one).
 */
function loadKubeconfig(k8s: ClientNode, kc: KubeConfig, source: KubeconfigSource): void {
  const files = "file" in source ? [source.file] : "env" in source ? source.env : [];
  for (const f of files) {
    if (readFileSync(f, "utf8").trim() === "") throw new KubeconfigInvalidError(f, "empty");
    if (files.length === 1) break; // loaded below: its error is this file's
    try {
      new k8s.KubeConfig().loadFromFile(f);
    } catch (err) {
      throw new KubeconfigInvalidError(f, { parser: errorMessage(err) });
    }
  }
  try {
    if ("file" in source) kc.loadFromFile(source.file);
    else kc.loadFromDefault();
  } catch (err) {
    if (files.length === 1) throw new KubeconfigInvalidError(files[0]!, { parser: errorMessage(err) });
    throw err;
  }
}

type HttpLibrary = {
  send(request: import("@kubernetes/client-node").RequestContext): { toPromise(): Promise<import("@kubernetes/client-node").ResponseContext> };
};

/**
 * Makes `kc.makeApiClient` build clients whose HTTP layer turns failures into KubeApiError and
 * ClusterConnectionError, and ends each request after `timeoutMs` (0: never) with RequestTimeoutError: its
 * credentials (an exec plugin that hangs), its response and its body (a server that stalls mid-LIST). Same
 * configuration as client-node's own makeApiClient (server, auth), with the default HTTP library wrapped
 * (client-node's documented extension point, `httpApi`).
 */
export function withActionableErrors(k8s: ClientNode, kc: KubeConfig, timeoutMs = 0): void {
  kc.makeApiClient = ((apiClientType: new (config: unknown) => unknown) => {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error(`the kubeconfig has no current cluster (context "${kc.getCurrentContext()}"): pass --kubeconfig or set its current-context`);
    const inner: HttpLibrary = k8s.createConfiguration().httpApi;
    const plugin = (kc.getCurrentUser()?.exec as { command?: unknown } | undefined)?.command;
    const auth = {
      getName: () => "default",
      applySecurityAuthentication: (request: import("@kubernetes/client-node").RequestContext) =>
        withDeadline(kc.applySecurityAuthentication(request), timeoutMs, () =>
          typeof plugin === "string"
            ? new RequestTimeoutError(cluster.server, timeoutMs, `the kubeconfig's credential plugin (${plugin}) for ${cluster.server}`)
            : new RequestTimeoutError(cluster.server, timeoutMs),
        ),
    };
    const config = k8s.createConfiguration({
      baseServer: new k8s.ServerConfiguration(cluster.server, {}),
      authMethods: { default: auth },
      httpApi: k8s.wrapHttpLibrary({ send: (request) => sendWithActionableErrors(inner, request, cluster.server, timeoutMs) }),
    });
    return new apiClientType(config);
  }) as KubeConfig["makeApiClient"];
}

/** `work`, or `timeout()` thrown once `timeoutMs` (> 0) has passed. */
async function withDeadline<T>(work: Promise<T>, timeoutMs: number, timeout: () => Error): Promise<T> {
  if (timeoutMs <= 0) return work;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timeout()), timeoutMs).unref()))]);
  } finally {
    clearTimeout(timer);
  }
}

async function sendWithActionableErrors(
  inner: HttpLibrary,
  request: import("@kubernetes/client-node").RequestContext,
  server: string,
  timeoutMs: number,
): Promise<import("@kubernetes/client-node").ResponseContext> {
  // One deadline for the whole request, its body included (node-fetch aborts a body read on the signal).
  const deadline = timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined;
  const own = request.getSignal();
  if (deadline) request.setSignal(own ? AbortSignal.any([own, deadline]) : deadline);
  const timedOut = (err: unknown): Error =>
    deadline?.aborted && !own?.aborted ? new RequestTimeoutError(server, timeoutMs) : err instanceof Error ? err : new Error(String(err));
  let response;
  try {
    response = await inner.send(request).toPromise();
  } catch (err) {
    if (deadline?.aborted && !own?.aborted) throw new RequestTimeoutError(server, timeoutMs);
    // An abort (a caller's timeout) is the caller's to describe.
    if ((err as { name?: string } | null)?.name === "AbortError") throw err;
    throw new ClusterConnectionError(server, err);
  }
  const body = response.body;
  response.body = {
    text: () => body.text().catch((err: unknown) => Promise.reject(timedOut(err))),
    binary: () => body.binary().catch((err: unknown) => Promise.reject(timedOut(err))),
  };
  if (response.httpStatusCode < 400) return response;
  let text = "";
  try {
    text = await response.body.text();
  } catch (err) {
    if (err instanceof RequestTimeoutError) throw err;
    /* the body could not be read: the status alone */
  }
  throw KubeApiError.fromResponse(response.httpStatusCode, text, { method: String(request.getHttpMethod()), url: request.getUrl() });
}

/** The HTTP status a failed call's error carries (`code`, as on KubeApiError and client-node's ApiException), if any. */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

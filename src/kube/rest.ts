/**
 * @module
 * A plain `node:https` GET of one API object, for the webhook server's reads (a training job and the objects
 * read like it on the admission path, the ledger index in the background), and a POST of one object, for its
 * one write (an Event on a job whose Kueue admission was refused, `events.ts`). Why not @kubernetes/client-node
 * here: loading it adds ~70 MiB of resident memory to the process (measured with node 20: 40 → 112 MiB), more
 * than everything else the server holds under load, for a few requests of known paths. The reconciler and the CLI
 * commands keep client-node.
 *
 * The credentials are the ones client-node's `loadFromDefault` would pick (the `--kubeconfig` file, else
 * $KUBECONFIG, else ~/.kube/config, else the in-cluster ServiceAccount), read from the same places. A
 * kubeconfig this module does not cover (an exec or auth-provider plugin, basic auth, a proxy, several
 * files in $KUBECONFIG) makes {@link restClient} answer `undefined`, and the caller uses client-node.
 */
import { readFile } from "node:fs/promises";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { isIPv6 } from "node:net";
import { dirname, isAbsolute, join } from "node:path";
import { ClusterConnectionError, KubeconfigInvalidError, NoKubeconfigError, RequestTimeoutError, errorMessage } from "../core/errors.js";
import { kubeconfigSource, SERVICE_ACCOUNT_DIR } from "./client.js";

/**
 * A request that has not answered in this time is abandoned, unless the caller names its own deadline (the
 * CLI's --request-timeout; the admission path has its own, shorter bound).
 */
const REQUEST_TIMEOUT_MS = 10_000;

export interface RestClient {
  /** The JSON object at `path` (e.g. `/api/v1/namespaces/q/configmaps/x`); undefined when it does not exist (404). */
  get(path: string): Promise<unknown>;
  /**
   * The object's metadata alone (a `meta.k8s.io/v1` PartialObjectMetadata: uid, resourceVersion, labels...), which the
   * apiserver serves for every resource, custom ones too, when asked for it by `Accept`; undefined on 404.
   */
  getMetadata(path: string): Promise<unknown>;
  /** Creates `body` at the collection `path` (e.g. `/api/v1/namespaces/q/events`); the created object. Any non-2xx rejects. */
  post(path: string, body: unknown, timeoutMs?: number): Promise<unknown>;
}

const JSON_ONLY = "application/json";

/**
 * The apiserver's metadata-only form of an object (k8s.io/apiserver pkg/endpoints/handlers/response.go,
 * transformObject: `as=PartialObjectMetadata;g=meta.k8s.io;v=v1`), for custom resources too; plain JSON after it,
 * for a server that would not serve it (then the whole object comes back, which has the same metadata).
 */
export const METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/** A failed GET; `code` is the HTTP status, where client-node puts it (see `statusOf`). */
export class RestError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "RestError";
  }
}

interface Target {
  server: URL;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure: boolean;
  servername?: string;
  /** The bearer token, read for each request (a projected ServiceAccount token is rotated in place). */
  token?: () => Promise<string | undefined>;
}

type Named<T> = Array<{ name: string } & T> | undefined;
interface KubeconfigFile {
  "current-context"?: string;
  contexts?: Named<{ context?: { cluster?: string; user?: string } }>;
  clusters?: Named<{ cluster?: Record<string, unknown> }>;
  users?: Named<{ user?: Record<string, unknown> }>;
}

/**
 * A kubeconfig written as JSON (kubectl and client-node read one: JSON is YAML), parsed without loading a YAML
 * parser; undefined for any other text, which yaml then reads (a flow mapping such as `{apiVersion: v1}` starts
 * with a brace too). yaml is imported only then, not at the top: a server in a cluster reads its ServiceAccount,
 * never a kubeconfig, and ~160 KB of parser compiled at start was ~5 % of `serve`'s cold start (bench/cold-start.ts).
 */
function jsonKubeconfig(text: string): unknown {
  if (!text.trimStart().startsWith("{")) return undefined;
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    return undefined;
  }
  // JSON.parse keeps a key written twice (the last value); yaml, client-node and kubectl refuse the file, so it goes to yaml.
  return memberCount(text) === keyCount(config) ? config : undefined;
}

/** The keys of `value`'s objects, nested ones included. */
function keyCount(value: unknown): number {
  if (typeof value !== "object" || value === null) return 0;
  let n = Array.isArray(value) ? 0 : Object.keys(value).length;
  for (const v of Object.values(value)) n += keyCount(v);
  return n;
}

/** The members written in valid JSON `text`: its colons outside strings (each follows a key, and only a key). */
function memberCount(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3a) n++;
    // A string: on to its closing quote, past each escape's next character.
    else if (c === 0x22) for (i++; text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
  }
  return n;
}

/** The kubeconfig at `file`, parsed; an empty or malformed one named (as ./client.ts does for client-node). */
async function readKubeconfig(file: string): Promise<KubeconfigFile> {
  const text = await readFile(file, "utf8");
  if (text.trim() === "") throw new KubeconfigInvalidError(file, "empty");
  let config: KubeconfigFile;
  try {
    config = (jsonKubeconfig(text) ?? (await import("yaml")).parse(text)) as KubeconfigFile;
  } catch (err) {
    throw new KubeconfigInvalidError(file, { parser: errorMessage(err) });
  }
  if (typeof config !== "object" || config === null) throw new KubeconfigInvalidError(file, { parser: "not a YAML mapping" });
  return config;
}

/** The connection a kubeconfig file describes; undefined when it needs what only client-node does. */
async function fromKubeconfig(file: string): Promise<Target | undefined> {
  const config = await readKubeconfig(file);
  const context = config.contexts?.find((c) => c.name === config["current-context"])?.context;
  const cluster = config.clusters?.find((c) => c.name === context?.cluster)?.cluster;
  const user = config.users?.find((u) => u.name === context?.user)?.user ?? {};
  if (!cluster || typeof cluster.server !== "string")
    throw new Error(`${file}: no cluster server for the current context ${JSON.stringify(config["current-context"])}`);
  if (cluster["proxy-url"] || user.exec || user["auth-provider"] || user.username || user.password) return undefined;
  const base = dirname(file);
  const path = (p: unknown): string => (isAbsolute(String(p)) ? String(p) : join(base, String(p)));
  const bytes = async (data: unknown, fileKey: unknown): Promise<Buffer | undefined> =>
    typeof data === "string" ? Buffer.from(data, "base64") : fileKey ? readFile(path(fileKey)) : undefined;
  const token = typeof user.token === "string" ? user.token : undefined;
  const tokenFile = user.tokenFile ? path(user.tokenFile) : undefined;
  return {
    server: new URL(cluster.server),
    ca: await bytes(cluster["certificate-authority-data"], cluster["certificate-authority"]),
    cert: await bytes(user["client-certificate-data"], user["client-certificate"]),
    key: await bytes(user["client-key-data"], user["client-key"]),
    insecure: cluster["insecure-skip-tls-verify"] === true,
    servername: typeof cluster["tls-server-name"] === "string" ? cluster["tls-server-name"] : undefined,
    token: token !== undefined ? () => Promise.resolve(token) : tokenFile ? async () => (await readFile(tokenFile, "utf8")).trim() : undefined,
  };
}

/** The in-cluster ServiceAccount's connection, as client-node's `loadFromCluster` makes it. */
async function inCluster(): Promise<Target> {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new NoKubeconfigError();
  const scheme = ["80", "8080", "8001"].includes(port) ? "http" : "https";
  return {
    server: new URL(`${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`),
    ca: await readFile(join(SERVICE_ACCOUNT_DIR, "ca.crt")),
    insecure: false,
    token: async () => (await readFile(join(SERVICE_ACCOUNT_DIR, "token"), "utf8")).trim(),
  };
}

/**
 * A client for the kubeconfig `file`, else the one client-node's `loadFromDefault` would load; undefined
 * when that configuration needs client-node (see the module comment).
 */
export async function restClient(file: string | undefined, opts: { requestTimeoutMs?: number } = {}): Promise<RestClient | undefined> {
  const source = kubeconfigSource(file);
  let target: Target | undefined;
  if ("inCluster" in source) target = await inCluster();
  else if ("file" in source) target = await fromKubeconfig(source.file);
  else if (source.env.length > 1) return undefined;
  else target = await fromKubeconfig(source.env[0]!);
  return target && client(target, opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS);
}

function client(t: Target, requestTimeoutMs: number): RestClient {
  const https = t.server.protocol === "https:";
  const agent = https
    ? new HttpsAgent({ keepAlive: true, maxSockets: 16, ca: t.ca, cert: t.cert, key: t.key, rejectUnauthorized: !t.insecure, servername: t.servername })
    : new HttpAgent({ keepAlive: true, maxSockets: 16 });
  const prefix = t.server.pathname.replace(/\/$/, "");
  /** One request. A GET answered 404 resolves to undefined (no such object); any other non-2xx rejects. */
  const send = async (method: "GET" | "POST", path: string, body: unknown, timeoutMs: number, accept = JSON_ONLY): Promise<unknown> => {
    const token = await t.token?.();
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const server = t.server.origin;
    const expired = new RequestTimeoutError(server, timeoutMs);
    let timedOut = false;
    /** A failure without an HTTP answer, as the client-node path reports it (./client.ts). */
    const fail = (err: unknown): Error => (timedOut ? expired : new ClusterConnectionError(server, err));
    return new Promise((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(
        {
          protocol: t.server.protocol,
          hostname: t.server.hostname.replace(/^\[|\]$/g, ""),
          port: t.server.port,
          path: prefix + path,
          method,
          agent,
          timeout: timeoutMs,
          headers: {
            accept,
            ...(payload ? { "content-type": "application/json", "content-length": String(payload.length) } : {}),
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", (err) => reject(fail(err)));
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            const text = Buffer.concat(chunks).toString("utf8");
            if (status === 404 && method === "GET") return resolve(undefined);
            if (status < 200 || status >= 300) {
              let message = text.slice(0, 300);
              try {
                message = (JSON.parse(text) as { message?: string }).message ?? message;
              } catch {
                /* not a Status: keep the text */
              }
              return reject(new RestError(status, `${method} ${path}: HTTP ${status}: ${message}`));
            }
            try {
              resolve(JSON.parse(text));
            } catch (err) {
              reject(new Error(`${method} ${path}: the answer is not JSON: ${(err as Error).message}`));
            }
          });
        },
      );
      // One deadline for the whole request, body included (the socket's `timeout` above is an idle one).
      const expire = (): void => {
        timedOut = true;
        req.destroy(expired);
      };
      if (timeoutMs > 0) {
        const deadline = setTimeout(expire, timeoutMs).unref();
        req.on("close", () => clearTimeout(deadline));
      }
      req.on("timeout", expire);
      req.on("error", (err) => reject(fail(err)));
      req.end(payload);
    });
  };
  return {
    get: (path) => send("GET", path, undefined, requestTimeoutMs),
    getMetadata: (path) => send("GET", path, undefined, requestTimeoutMs, METADATA_ONLY),
    post: (path, body, timeoutMs = requestTimeoutMs) => send("POST", path, body, timeoutMs),
  };
}

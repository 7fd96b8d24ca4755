/**
 * @module
 * Error classes, one per meaning. Each sets `name` and keeps its `cause`, so logs show both.
 */

/** The HTTP body is not a usable AdmissionReview v1 request. Maps to HTTP 400 with every problem listed. */
export class ReviewDecodeError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[], options?: { cause?: unknown }) {
    super(`invalid AdmissionReview: ${problems.join("; ")}`, options);
    this.name = "ReviewDecodeError";
    this.problems = problems;
  }
}

/** A policy document that does not satisfy the schema. `problems` holds every error with its path. */
export class PolicyError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: readonly string[], options?: { cause?: unknown }) {
    super(`invalid policy ${source}:\n  ${problems.join("\n  ")}`, options);
    this.name = "PolicyError";
    this.problems = problems;
  }
}

/** A command line that cannot be run as given (unknown flag, missing value). */
export class UsageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** The message of anything thrown, never `JSON.stringify(err)` (which is "{}" for an Error). */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** A metav1.Status, the body the apiserver sends with every failed call (the fields read here). */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { name?: string; group?: string; kind?: string; causes?: Array<{ field?: string; message?: string }> };
}

/** The request a failure answered, for messages: the method and the URL (its query left out). */
export interface KubeRequest {
  method?: string;
  url?: string;
}

/** What to do about a failure, by the Status's reason (and kind), or undefined when there is nothing to add. */
export function kubeHint(status: number, body: KubeStatus | undefined): string | undefined {
  const reason = body?.reason ?? "";
  const kind = body?.details?.kind ?? "";
  if (reason === "NotFound" && kind === "namespaces" && body?.details?.name) {
    return `create it (kubectl create namespace ${body.details.name}) or pass --namespace with the namespace Quartermaster is installed in`;
  }
  if (status === 401 || reason === "Unauthorized") return "the credentials in the kubeconfig were refused: log in again, or pass --kubeconfig with valid ones";
  if (status === 403 || reason === "Forbidden")
    return "the user or ServiceAccount lacks this permission: grant it (manifests/base has the Roles Quartermaster needs) or use a kubeconfig that has it";
  if (status === 429 || reason === "TooManyRequests") return "the apiserver is throttling requests: retry later";
  if (status >= 500) return "the apiserver failed to answer: retry, and check its health (kubectl get --raw /readyz)";
  return undefined;
}

/**
 * A call the apiserver answered with an error (HTTP 4xx/5xx), read like kubectl reads it: the Status
 * body's message (`namespaces "quartermaster" not found`), its reason, and what to do. Never the
 * response headers. `code` is the HTTP status, where @kubernetes/client-node's ApiException keeps it.
 */
export class KubeApiError extends Error {
  /** The HTTP status (also `status`). */
  readonly code: number;
  readonly status: number;
  /** The Status's reason (`NotFound`, `Forbidden`, `Conflict`, …), or `HTTP <status>` when the body is not a Status. */
  readonly reason: string;
  /** The apiserver's own message. */
  readonly apiMessage: string;
  /** The parsed Status, or the body text when it is not one. */
  readonly body: KubeStatus | string;
  readonly hint?: string;
  readonly request?: KubeRequest;

  constructor(status: number, body: KubeStatus | string, request?: KubeRequest, options?: { cause?: unknown }) {
    const parsed = typeof body === "object" && body !== null ? body : undefined;
    const reason = parsed?.reason || `HTTP ${status}`;
    const where = request?.url ? `${request.method ?? "GET"} ${request.url.split("?")[0]}` : "the request";
    const apiMessage =
      parsed?.message ||
      (typeof body === "string" && body.trim() !== ""
        ? `${where} failed with HTTP ${status}: ${body.trim().replace(/\s+/g, " ").slice(0, 200)}`
        : `${where} failed with HTTP ${status}`);
    const hint = kubeHint(status, parsed);
    super(`${apiMessage} (${reason})${hint ? `: ${hint}` : ""}`, options);
    this.name = "KubeApiError";
    this.code = status;
    this.status = status;
    this.reason = reason;
    this.apiMessage = apiMessage;
    this.body = body;
    if (hint) this.hint = hint;
    if (request) this.request = request;
  }

  /** From a response's status and body text (a JSON Status, or anything else a proxy may answer). */
  static fromResponse(status: number, text: string, request?: KubeRequest): KubeApiError {
    let body: KubeStatus | string = text;
    try {
      const json = JSON.parse(text) as unknown;
      if (typeof json === "object" && json !== null && !Array.isArray(json)) body = json;
    } catch {
      /* not JSON: keep the text */
    }
    return new KubeApiError(status, body, request);
  }
}

const CONNECTION_PROBLEMS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EPIPE: "connection closed",
  DEPTH_ZERO_SELF_SIGNED_CERT: "its certificate is self-signed and not trusted by the kubeconfig's certificate-authority",
  SELF_SIGNED_CERT_IN_CHAIN: "its certificate chain is not trusted by the kubeconfig's certificate-authority",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "its certificate is not signed by the kubeconfig's certificate-authority",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "its certificate is not signed by the kubeconfig's certificate-authority",
  CERT_HAS_EXPIRED: "its certificate has expired",
  ERR_TLS_CERT_ALTNAME_INVALID: "its certificate does not name the host in the kubeconfig's server URL",
};

/**
 * The cluster could not be reached at all (no HTTP answer): connection refused, DNS, TLS trust, timeouts.
 * Says where it tried and what to check. `code` is left unset so nothing mistakes it for an HTTP status;
 * the system error code is `systemCode`.
 */
export class ClusterConnectionError extends Error {
  readonly server: string;
  readonly systemCode?: string;

  constructor(server: string, cause: unknown) {
    const code = (cause as { code?: unknown } | null)?.code;
    const systemCode = typeof code === "string" ? code : undefined;
    const what = (systemCode && CONNECTION_PROBLEMS[systemCode]) || (cause instanceof Error ? cause.message : String(cause));
    super(
      `cannot reach the cluster at ${server}: ${what}${systemCode ? ` (${systemCode})` : ""}; check your kubeconfig (--kubeconfig, $KUBECONFIG, its current context) and that the apiserver is up`,
      { cause },
    );
    this.name = "ClusterConnectionError";
    this.server = server;
    if (systemCode) this.systemCode = systemCode;
  }
}

/**
 * A kubeconfig that was named (by --kubeconfig or $KUBECONFIG) does not exist. client-node would throw a bare
 * "ENOENT: no such file or directory, open '/x'"; this names the missing file(s) and where they were named.
 */
export class KubeconfigMissingError extends ClusterConnectionError {
  readonly missing: string[];

  constructor(missing: string[], from: { flag: true } | { env: string }) {
    super("(no kubeconfig)", undefined);
    const files = missing.join(", ");
    this.message =
      "flag" in from
        ? `kubeconfig not found: ${files} (named by --kubeconfig); pass an existing file`
        : `kubeconfig not found: ${files} (named by the KUBECONFIG environment variable, KUBECONFIG=${from.env}); fix or unset KUBECONFIG, or pass --kubeconfig`;
    this.name = "KubeconfigMissingError";
    this.missing = missing;
  }
}

/** What to do when no cluster configuration exists at all (the CLI's one line, the server's start-up error). */
export const NO_KUBECONFIG = "no kubeconfig: set KUBECONFIG, pass --kubeconfig, or run in a cluster";

/**
 * No kubeconfig to load and not in a cluster: no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, no
 * ServiceAccount token. client-node would go on with http://localhost:8080 and fail on every call with
 * "HTTP protocol is not allowed when skipTLSVerify is not set or false"; this says what to do instead.
 */
export class NoKubeconfigError extends ClusterConnectionError {
  constructor() {
    super("(no kubeconfig)", undefined);
    this.message = NO_KUBECONFIG;
    this.name = "NoKubeconfigError";
  }
}

/** `ms` as kubectl writes a duration: `30s`, `1m`, `1m30s`, `500ms`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const parts: string[] = [];
  let s = ms / 1000;
  for (const [unit, size] of [
    ["h", 3600],
    ["m", 60],
  ] as const) {
    const n = Math.floor(s / size);
    if (n > 0) parts.push(`${n}${unit}`);
    s -= n * size;
  }
  if (s > 0 || parts.length === 0) parts.push(`${Math.round(s * 1000) / 1000}s`);
  return parts.join("");
}

/**
 * A request to the apiserver (or the kubeconfig's exec credential plugin) that did not end within
 * --request-timeout: a dead, silent or stalled server. Says where, how long, and what to do.
 */
export class RequestTimeoutError extends ClusterConnectionError {
  readonly timeoutMs: number;

  constructor(server: string, timeoutMs: number, what = `the API server at ${server}`) {
    super(server, undefined);
    this.message = `${what} did not answer within ${formatDuration(timeoutMs)} (--request-timeout); is the cluster reachable? Check the kubeconfig's server and that the apiserver is up, or pass a longer --request-timeout`;
    this.name = "RequestTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A kubeconfig file that exists but cannot be used: empty, or not YAML a kubeconfig is made of. Names the
 * file and what the parser said (client-node would throw `Cannot read properties of undefined (reading
 * 'clusters')` or a parser excerpt with no file name).
 */
export class KubeconfigInvalidError extends ClusterConnectionError {
  readonly file: string;

  constructor(file: string, problem: "empty" | { parser: string }) {
    super("(no kubeconfig)", undefined);
    this.message =
      problem === "empty"
        ? `kubeconfig ${file} is empty: write one there (kind, minikube or your cloud's CLI do; or kubectl config view --raw > ${file} from a working setup), or pass --kubeconfig with another file`
        : `kubeconfig ${file} is not a valid kubeconfig: ${problem.parser.trim().replace(/\s*\n\s*/g, "\n  ")}\nfix the file, or pass --kubeconfig with another one`;
    this.name = "KubeconfigInvalidError";
    this.file = file;
  }
}

/**
 * @module
 * The webhook server's one write: a core/v1 Event on a job (issue 33, an Event on a job whose Kueue admission
 * UPDATE was refused), shaped by `kueueAdmissionRefusedEvent` in src/reconcile/events.ts. Fire and forget, off the
 * admission path: {@link BoundedEventWriter.write} returns at once, never throws and never delays or changes the
 * admission answer. Each POST is bounded by `timeoutMs`; at most `maxInFlight` are outstanding (more are dropped
 * and counted); the same Event (object, reason, message) is written once per `dedupeMs` (Kueue retries a refused
 * UPDATE with back-off: the job gets one Event per refusal, not a flood); failures are logged rate-limited (the
 * first at once, then at most one line per `logEveryMs` with the count since). A plain POST (`rest.ts`, which
 * keeps client-node out of the webhook process), or client-node's CoreV1Api for a kubeconfig only it handles.
 */
import type { Logger } from "pino";
import { errorMessage } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import { kubeClient } from "./client.js";
import { restClient } from "./rest.js";

/**
 * The bounded writer, which says whether it took the Event. It implements `EventWriter`, declared by its user
 * (src/admission/events.ts), by shape: the client sits below the decisions and does not import them.
 */
export interface BoundedEventWriter {
  /**
   * False when `event` was dropped (`maxInFlight` writes outstanding); true when it is being sent, or the same
   * Event was within `dedupeMs`.
   */
  write(event: KubeObject): boolean;
}

export interface EventWriterOptions {
  kubeconfig?: string;
  log: Logger;
  /** Bound on one POST; default 5 s. */
  timeoutMs?: number;
  maxInFlight?: number;
  dedupeMs?: number;
  logEveryMs?: number;
  now?: () => number;
}

type Post = (namespace: string, event: KubeObject, timeoutMs: number) => Promise<unknown>;

async function connect(kubeconfig: string | undefined): Promise<Post> {
  const rest = await restClient(kubeconfig);
  if (rest) return (namespace, event, timeoutMs) => rest.post(`/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, event, timeoutMs);
  const { k8s, kc } = await kubeClient(kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  return (namespace, event) => core.createNamespacedEvent({ namespace, body: event as never });
}

/** The server's writer, connecting on first use. */
export function createEventWriter(opts: EventWriterOptions): BoundedEventWriter {
  let post: Promise<Post> | undefined;
  return backgroundEventWriter(() => {
    post ??= connect(opts.kubeconfig).catch((err: unknown) => {
      post = undefined; // try again with the next Event
      throw err;
    });
    return post;
  }, opts);
}

/** A writer over `post` (the apiserver's, or a test's), with the bounds of the module comment. */
export function backgroundEventWriter(post: () => Promise<Post>, opts: Omit<EventWriterOptions, "kubeconfig">): BoundedEventWriter {
  const now = opts.now ?? Date.now;
  const timeoutMs = opts.timeoutMs ?? 5000;
  const maxInFlight = opts.maxInFlight ?? 16;
  const dedupeMs = opts.dedupeMs ?? 60_000;
  const logEveryMs = opts.logEveryMs ?? 60_000;
  const recent = new Map<string, number>();
  let inFlight = 0;
  let failed = 0;
  let lastLog = -Infinity;
  const failure = (why: string, event: KubeObject): void => {
    failed++;
    const t = now();
    if (t - lastLog < logEveryMs) return;
    lastLog = t;
    const o = event.involvedObject as { kind?: string; namespace?: string; name?: string } | undefined;
    opts.log.warn({ failed, last: why, object: `${o?.kind}/${o?.namespace}/${o?.name}` }, "Events not written (counted since the last line)");
    failed = 0;
  };
  return {
    write(event) {
      const meta = (event.metadata ?? {}) as { namespace?: string };
      const o = (event.involvedObject ?? {}) as { uid?: string; namespace?: string; name?: string };
      const key = `${o.uid ?? `${o.namespace}/${o.name}`}\0${String(event.reason)}\0${String(event.message)}`;
      const t = now();
      for (const [k, at] of recent) if (t - at >= dedupeMs) recent.delete(k);
      if (recent.has(key)) return true;
      if (inFlight >= maxInFlight) {
        failure(`more than ${maxInFlight} Events in flight`, event);
        return false;
      }
      recent.set(key, t);
      inFlight++;
      // Every step is caught: nothing here reaches the admission answer.
      void post()
        .then((p) => p(meta.namespace ?? o.namespace ?? "", event, timeoutMs))
        .catch((err: unknown) => {
          recent.delete(key); // a later refusal may try again
          failure(errorMessage(err), event);
        })
        .finally(() => inFlight--);
      return true;
    },
  };
}

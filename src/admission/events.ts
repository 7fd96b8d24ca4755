/**
 * @module
 * The webhook's own Events (the reconciler's are src/reconcile/events.ts): today one, on a job whose Kueue admission
 * `/validate/jobs` refused. Pure: webhooks/refusal-event.ts writes it after reading the job fresh.
 */
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";

/** The webhook's Events (the reconciler's are `quartermaster-reconciler`'s). */
export const WEBHOOK_EVENT_SOURCE = "quartermaster-webhook";
/** The reason of the Event on a job whose Kueue admission UPDATE `/validate/jobs` refused (issue 33). */
export const KUEUE_ADMISSION_REFUSED = "KueueAdmissionRefused";
const MAX_MESSAGE = 1024;

/**
 * The Warning Event on `job` (of `kind`) saying why Quartermaster refused Kueue's admission UPDATE: the refusal's
 * own text, one `field: message` per violation (each names the node labels Kueue wrote and the queue). Kueue only
 * sees its UPDATE fail in its own log; `kubectl describe` on the job shows this.
 */
export function kueueAdmissionRefusedEvent(
  job: KubeObject,
  kind: Pick<JobKind, "group" | "version" | "kind">,
  violations: ReadonlyArray<{ field: string; message: string }>,
  now: Date,
): KubeObject {
  const meta = (job.metadata ?? {}) as { name?: unknown; namespace?: unknown; uid?: unknown };
  const name = String(meta.name ?? "");
  const namespace = String(meta.namespace ?? "");
  const at = now.toISOString().replace(/\.\d+Z$/, "Z");
  const text = `Quartermaster refused Kueue's admission of the job: ${violations.map((v) => `${v.field}: ${v.message}`).join("; ")}`;
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { generateName: `${name}.`, namespace },
    involvedObject: {
      apiVersion: `${kind.group}/${kind.version}`,
      kind: kind.kind,
      name,
      namespace,
      ...(typeof meta.uid === "string" && meta.uid !== "" ? { uid: meta.uid } : {}),
    },
    reason: KUEUE_ADMISSION_REFUSED,
    message: text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text,
    type: "Warning",
    source: { component: WEBHOOK_EVENT_SOURCE },
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
  };
}

/** How the webhooks write an Event (implemented by src/kube/events.ts): declared here, by the webhook that writes. */
export interface EventWriter {
  /** Writes `event` (a core/v1 Event with `metadata.namespace`) in the background; never throws. */
  write(event: KubeObject): void;
}

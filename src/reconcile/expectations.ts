/**
 * @module
 * What the job controller has asked the apiserver for and not yet seen in a listing (Kubernetes
 * `pkg/controller/controller_utils.go` ControllerExpectations, which training-operator's
 * `pkg/controller.v1/expectation` copies). Kubernetes counts adds and deletes per controller; here each
 * expectation names its object (`Pod/<name>`), because the job controller's names are deterministic: a
 * create is in flight until a listing shows the name, a delete until a listing no longer shows that uid
 * under the name. A listing that lags behind the controller's own writes (an informer's cache, a slow
 * watch) then never makes it create a pod twice or delete one twice. An expectation not met within
 * `ttlMs` (Kubernetes' ExpectationsTimeout, 5 minutes) is dropped, so a lost event cannot wedge a job.
 *
 * In-memory state of one controller process, created by the entry point and passed in (no singleton); the
 * clock is passed to every call.
 */
import type { KubeObject } from "../core/kube.js";
import type { InFlight } from "./job-controller.js";

export const EXPECTATIONS_TTL_MS = 5 * 60_000;

interface Entry {
  op: "create" | "delete";
  namespace: string;
  /** `Pod/<name>` or `Service/<name>`. */
  key: string;
  /** For a delete: the uid deleted (a new object of the same name meets the expectation). */
  uid?: string;
  at: number;
}

const EMPTY: InFlight = { creates: new Set(), deletes: new Set() };

export class Expectations {
  private readonly byJob = new Map<string, Map<string, Entry>>();

  constructor(private readonly ttlMs = EXPECTATIONS_TTL_MS) {}

  expectCreate(jobUid: string, namespace: string, key: string, now: Date): void {
    this.entries(jobUid).set(key, { op: "create", namespace, key, at: now.getTime() });
  }

  expectDelete(jobUid: string, namespace: string, key: string, uid: string, now: Date): void {
    this.entries(jobUid).set(key, { op: "delete", namespace, key, uid, at: now.getTime() });
  }

  /** The call failed (nothing will appear or go): the expectation is dropped. */
  forget(jobUid: string, key: string): void {
    const m = this.byJob.get(jobUid);
    m?.delete(key);
    if (m?.size === 0) this.byJob.delete(jobUid);
  }

  /** Expectations held, across jobs. */
  get size(): number {
    let n = 0;
    for (const m of this.byJob.values()) n += m.size;
    return n;
  }

  /**
   * Meets the expectations the listing shows done (and drops expired ones); answers, per job uid, what is
   * still in flight.
   */
  observe(pods: readonly KubeObject[], services: readonly KubeObject[], now: Date): (jobUid: string) => InFlight {
    if (this.byJob.size === 0) return () => EMPTY;
    const index = new Map<string, string>();
    for (const [kind, list] of [
      ["Pod", pods],
      ["Service", services],
    ] as const) {
      for (const o of list) {
        const m = (o.metadata ?? {}) as { name?: string; namespace?: string; uid?: string };
        index.set(`${m.namespace}/${kind}/${m.name}`, String(m.uid));
      }
    }
    const out = new Map<string, InFlight>();
    for (const [jobUid, entries] of [...this.byJob]) out.set(jobUid, this.meet(jobUid, entries, index, now));
    return (jobUid) => out.get(jobUid) ?? EMPTY;
  }

  /**
   * The same for one job, over objects of its namespace (a resident controller's caches): expectations of
   * other jobs are not looked at.
   */
  observeJob(jobUid: string, pods: readonly KubeObject[], services: readonly KubeObject[], now: Date): InFlight {
    const entries = this.byJob.get(jobUid);
    if (!entries) return EMPTY;
    const index = new Map<string, string>();
    for (const [kind, list] of [
      ["Pod", pods],
      ["Service", services],
    ] as const) {
      for (const o of list) {
        const m = (o.metadata ?? {}) as { name?: string; namespace?: string; uid?: string };
        index.set(`${m.namespace}/${kind}/${m.name}`, String(m.uid));
      }
    }
    return this.meet(jobUid, entries, index, now);
  }

  private meet(jobUid: string, entries: Map<string, Entry>, index: ReadonlyMap<string, string>, now: Date): InFlight {
    const creates = new Set<string>();
    const deletes = new Set<string>();
    for (const [key, e] of entries) {
      const seen = index.get(`${e.namespace}/${key}`);
      const met = e.op === "create" ? seen !== undefined : seen === undefined || seen !== e.uid;
      if (met || now.getTime() - e.at > this.ttlMs) entries.delete(key);
      else (e.op === "create" ? creates : deletes).add(key);
    }
    if (entries.size === 0) this.byJob.delete(jobUid);
    return creates.size + deletes.size === 0 ? EMPTY : { creates, deletes };
  }

  private entries(jobUid: string): Map<string, Entry> {
    let m = this.byJob.get(jobUid);
    if (!m) this.byJob.set(jobUid, (m = new Map<string, Entry>()));
    return m;
  }
}

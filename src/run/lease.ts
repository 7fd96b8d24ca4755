/**
 * @module
 * Taking and releasing the reconciler's Lease, with optimistic concurrency: a create that finds the Lease
 * already there, or a replace whose resourceVersion is stale, means another instance won the race.
 */
import { decideLease, type LeaseDecision } from "../reconcile/lease.js";
import { kubeClient, statusOf } from "../kube/client.js";

export interface HeldLease {
  release(): Promise<void>;
}

export interface LeaseOptions {
  kubeconfig?: string;
  /** The deadline of each request in ms (--request-timeout); 0 for none. Default: ../kube/client.ts RESIDENT_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  namespace: string;
  name: string;
  holder: string;
  durationSeconds: number;
  now: () => Date;
}

/** Takes the Lease, or reports who holds it. */
export async function acquireLease(opts: LeaseOptions): Promise<{ held: HeldLease } | { busy: Extract<LeaseDecision, { take: false }> }> {
  const { k8s, kc } = await kubeClient(opts.kubeconfig, opts);
  const api = kc.makeApiClient(k8s.CoordinationV1Api);
  const { namespace, name } = opts;

  let current: Awaited<ReturnType<typeof api.readNamespacedLease>> | undefined;
  try {
    current = await api.readNamespacedLease({ name, namespace });
  } catch (err) {
    if (statusOf(err) !== 404) throw err;
  }
  const now = opts.now();
  const decision = decideLease(
    // client-node hands timestamps back as strings despite their Date types: normalise.
    current && {
      holder: current.spec?.holderIdentity,
      renewTime: current.spec?.renewTime ? new Date(current.spec.renewTime) : undefined,
      durationSeconds: current.spec?.leaseDurationSeconds,
    },
    opts.holder,
    now,
  );
  if (!decision.take) return { busy: decision };
  const spec = {
    holderIdentity: opts.holder,
    leaseDurationSeconds: opts.durationSeconds,
    acquireTime: new k8s.V1MicroTime(now.getTime()),
    renewTime: new k8s.V1MicroTime(now.getTime()),
    leaseTransitions: (current?.spec?.leaseTransitions ?? 0) + (current?.spec?.holderIdentity === opts.holder ? 0 : 1),
  };
  try {
    if (decision.create) {
      current = await api.createNamespacedLease({
        namespace,
        body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name, namespace }, spec },
      });
    } else {
      current = await api.replaceNamespacedLease({ name, namespace, body: { ...current!, spec } });
    }
  } catch (err) {
    if (statusOf(err) === 409)
      return { busy: { take: false, holder: "another instance (lost the race)", until: new Date(now.getTime() + opts.durationSeconds * 1000) } };
    throw err;
  }
  const taken = current;
  return {
    held: {
      async release() {
        try {
          await api.replaceNamespacedLease({ name, namespace, body: { ...taken, spec: { ...taken.spec, holderIdentity: undefined, renewTime: undefined } } });
        } catch (err) {
          if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err; // gone or taken over: nothing of ours to release
        }
      },
    },
  };
}

/**
 * @module
 * Who may run a reconcile pass: the pure decision over a coordination.k8s.io Lease. A pass takes the lease
 * when it does not exist, is free, is its own, or its holder stopped renewing it more than
 * `leaseDurationSeconds` ago (a pass that was killed); otherwise another instance is running and this one waits.
 */

export interface LeaseState {
  holder?: string;
  renewTime?: Date;
  durationSeconds?: number;
}

export type LeaseDecision = { take: true; create: boolean } | { take: false; holder: string; until: Date };

export function decideLease(lease: LeaseState | undefined, me: string, now: Date): LeaseDecision {
  if (!lease) return { take: true, create: true };
  if (!lease.holder || lease.holder === me) return { take: true, create: false };
  const until = new Date((lease.renewTime?.getTime() ?? 0) + (lease.durationSeconds ?? 0) * 1000);
  if (until.getTime() < now.getTime()) return { take: true, create: false };
  return { take: false, holder: lease.holder, until };
}

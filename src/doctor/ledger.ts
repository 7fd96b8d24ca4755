/**
 * @module
 * Checks of the GPU device ledger the reconciler writes each pass: present, checksums valid, and fresh
 * (no older than three reconcile periods, or an hour when the period is unknown).
 */
import { humanAge } from "./reconciler.js";
import type { ReadLedger } from "../ledger/shards.js";
import type { DoctorFinding, LedgerState } from "./types.js";

export const LEDGER_STALE_PERIODS = 3;
export const LEDGER_DEFAULT_MAX_AGE_SECONDS = 3600;

export interface LedgerContext {
  now: Date;
  namespace: string;
  /** The reconciler's schedule period, when known. */
  periodSeconds?: number;
  /** Whether the reconciler has completed a pass (an absent ledger is expected before the first). */
  reconcilerHasSucceeded: boolean;
}

export function checkLedger(ledger: LedgerState, ctx: LedgerContext): DoctorFinding[] {
  const subject = `ledger in ${ctx.namespace}`;
  const runPass = `kubectl -n ${ctx.namespace} create job --from=cronjob/quartermaster-reconciler quartermaster-reconciler-manual`;
  if (ledger === "absent") {
    return ctx.reconcilerHasSucceeded
      ? [
          {
            check: "ledger",
            severity: "warning",
            subject,
            message: "no ledger although the reconciler has completed passes: the capacity rule is skipped",
            fix: `check the reconciler's logs, then run a pass: ${runPass}`,
          },
        ]
      : [{ check: "ledger", severity: "info", subject, message: "no ledger yet: the reconciler writes it on its first successful pass", fix: "" }];
  }
  if ("unread" in ledger) return [{ check: "ledger", severity: "info", subject, message: `ledger not read: ${ledger.unread}`, fix: "" }];
  const out: DoctorFinding[] = [];
  if (ledger.corrupt.length > 0) {
    out.push({
      check: "ledger",
      severity: "warning",
      subject,
      message: `${ledger.corrupt.length} of ${ledger.shards} shard${ledger.shards === 1 ? "" : "s"} fail their checksum (${ledger.corrupt.join(", ")}): their entries are not trusted`,
      fix: `the next pass rewrites them; run one now: ${runPass}`,
    });
  }
  const maxAge = ctx.periodSeconds !== undefined ? LEDGER_STALE_PERIODS * ctx.periodSeconds : LEDGER_DEFAULT_MAX_AGE_SECONDS;
  if (!ledger.generatedAt) {
    out.push({
      check: "ledger",
      severity: "warning",
      subject,
      message: "the ledger carries no generation time: its age is unknown",
      fix: `run a pass to rewrite it: ${runPass}`,
    });
  } else {
    const age = (ctx.now.getTime() - ledger.generatedAt.getTime()) / 1000;
    if (age > maxAge) {
      out.push({
        check: "ledger",
        severity: "warning",
        subject,
        message: `written ${humanAge(age)} ago, older than ${humanAge(maxAge)}: GPU holdings may be out of date`,
        fix: `check the reconciler (see its finding above), then run a pass: ${runPass}`,
      });
    } else if (ledger.corrupt.length === 0) {
      out.push({
        check: "ledger",
        severity: "ok",
        subject,
        message: `${ledger.shards} shard${ledger.shards === 1 ? "" : "s"}, checksums valid, written ${humanAge(age)} ago`,
        fix: "",
      });
    }
  }
  return out;
}

/** What `checkLedger` needs from a ledger read back from its ConfigMaps (`readStored`). */
export function ledgerState(read: ReadLedger): LedgerState {
  if (!read.index && read.corrupt.length === 0) return "absent";
  const generatedAt = read.index?.generatedAt ? new Date(read.index.generatedAt) : undefined;
  return {
    ...(generatedAt && !Number.isNaN(generatedAt.getTime()) ? { generatedAt } : {}),
    shards: read.index?.shards.length ?? 0,
    corrupt: read.corrupt,
  };
}

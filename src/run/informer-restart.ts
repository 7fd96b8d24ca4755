import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../core/errors.js";
import { statusOf } from "../kube/client.js";
import type { TrimmedInformer } from "../kube/informer.js";

/** How long an informer waits before it starts again: briefly after a passing error, slowly after a lasting one. */
const RESTART_AFTER_MS = { passing: 2000, lasting: 30_000 } as const;

export interface RestartOptions {
  readonly log: Logger;
  /** The log lines' prefix: the part of the reconciler that reads this cache ("watch", "blocked"). */
  readonly prefix: string;
  /** Whether the process is stopping: an error then starts nothing. */
  readonly stopped: () => boolean;
  /** What its readers do meanwhile, said in the lines ("verdicts judge without it meanwhile"). */
  readonly meanwhile?: string;
}

/**
 * The one restart policy of the reconciler's informers. An API that is not served (404: its CRD is not
 * installed) or refused (403: not granted) is a lasting state: said once, at info and warn, and looked at again
 * every 30 s, so a cluster without Kueue, or a Role without its grant, is neither a log line every 2 s nor a
 * cache given up for good; once the informer holds a cache again, the next such state is said again. Any other
 * error (a broken watch, an apiserver restart) is said each time and the informer starts again in 2 s; so does a
 * start that fails before any request (client-node's watch throws when the kubeconfig's credentials cannot be
 * read). While it is down its cache is not synced (../kube/informer.ts), and its readers judge without it.
 */
export function restartOnError<T extends KubernetesObject>(inf: TrimmedInformer<T>, opts: RestartOptions): { start: () => void } {
  const { log, prefix, stopped } = opts;
  const meanwhile = opts.meanwhile === undefined ? "" : `; ${opts.meanwhile}`;
  const path = inf.watchPath;
  let saidLasting: number | undefined;
  const start = (): void => {
    if (stopped()) return;
    inf.start().then(
      () => void (inf.synced() && (saidLasting = undefined)),
      (err: unknown) => {
        if (stopped()) return;
        log.warn({ path, err: errorMessage(err) }, `${prefix}: informer did not start; trying again in 2 s${meanwhile}`);
        setTimeout(start, RESTART_AFTER_MS.passing).unref();
      },
    );
  };
  inf.on("error", (err: unknown) => {
    if (stopped()) return;
    const status = statusOf(err);
    const lasting = status === 403 || status === 404;
    if (!lasting) log.warn({ path, status, err: errorMessage(err) }, `${prefix}: informer stopped; restarting in 2 s${meanwhile}`);
    else if (saidLasting !== status && status === 404) log.info({ path }, `${prefix}: not served (CRD not installed?); looking again every 30 s${meanwhile}`);
    else if (saidLasting !== status)
      log.warn({ path, err: errorMessage(err) }, `${prefix}: watch refused (403: not granted?); looking again every 30 s${meanwhile}`);
    saidLasting = lasting ? status : undefined;
    setTimeout(start, lasting ? RESTART_AFTER_MS.lasting : RESTART_AFTER_MS.passing).unref();
  });
  return { start };
}

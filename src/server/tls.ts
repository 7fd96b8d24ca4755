/**
 * @module
 * The serving key pair, reloaded when its files change. Kubernetes updates a mounted Secret by swapping a
 * `..data` symlink in the volume directory, which changes no watched inode of the files themselves, so the
 * directories are watched and a slow poll backs the watch up. A new pair is used only once both files
 * parse and match each other: a half-written update keeps the old pair until the next change.
 * Connections already open keep the context they shook hands with, so nothing in flight fails.
 */
import { createHash, X509Certificate } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { createSecureContext } from "node:tls";
import type { Logger } from "pino";

export interface KeyPair {
  cert: Buffer;
  key: Buffer;
  notBefore: Date;
  notAfter: Date;
  fingerprint: string;
}

/** Why a pair was not loaded: the `result` label of `quartermaster_tls_reloads_total`. */
export type RefusalReason = "expired" | "not_yet_valid" | "mismatch" | "unreadable";

/** A key pair that is not served, with the reason counted in the metrics. */
export class KeyPairRefused extends Error {
  constructor(
    readonly reason: RefusalReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "KeyPairRefused";
  }
}

/** Throws {@link KeyPairRefused} when `now` is outside the certificate's validity window. */
export function checkValidity(pair: KeyPair, now: Date, what: string): void {
  if (now.getTime() > pair.notAfter.getTime()) {
    throw new KeyPairRefused("expired", `${what}: certificate expired at ${pair.notAfter.toISOString()}`);
  }
  if (now.getTime() < pair.notBefore.getTime()) {
    throw new KeyPairRefused("not_yet_valid", `${what}: certificate not valid before ${pair.notBefore.toISOString()}`);
  }
}

/** Reads and checks a key pair; throws with a clear message if either file is missing or they do not match. */
export async function readKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  let cert: Buffer;
  let key: Buffer;
  try {
    [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  } catch (cause) {
    throw new KeyPairRefused("unreadable", `reading the key pair failed: ${(cause as Error).message}`, { cause });
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (cause) {
    throw new KeyPairRefused("unreadable", `${certFile}: not a PEM certificate`, { cause });
  }
  try {
    createSecureContext({ cert, key }); // fails on a key that does not belong to the certificate
  } catch (cause) {
    throw new KeyPairRefused("mismatch", `${keyFile} does not match ${certFile}: ${(cause as Error).message}`, { cause });
  }
  return { cert, key, notBefore: new Date(x509.validFrom), notAfter: new Date(x509.validTo), fingerprint: x509.fingerprint256 };
}

export interface KeyPairWatcher {
  /** Checks the files now; resolves once any change has been applied. */
  check(): Promise<void>;
  close(): void;
}

export interface KeyPairWatchOptions {
  certFile: string;
  keyFile: string;
  initial: KeyPair;
  onChange(pair: KeyPair): void;
  onError(err: unknown): void;
  log: Logger;
  /** Poll interval backing the directory watch (ms). */
  pollMs?: number;
  /** Wall clock for the validity check. */
  now?: () => Date;
}

export function watchKeyPair(opts: KeyPairWatchOptions): KeyPairWatcher {
  const digest = (p: { cert: Buffer; key: Buffer }): string => createHash("sha256").update(p.cert).update(p.key).digest("hex");
  let current = digest(opts.initial);
  let running: Promise<void> | undefined;
  let again = false;
  let debounce: NodeJS.Timeout | undefined;

  const load = async (): Promise<void> => {
    let pair: KeyPair;
    try {
      pair = await readKeyPair(opts.certFile, opts.keyFile);
    } catch (err) {
      // Mid-update (one file new, the other old) or broken: keep serving with the pair we have.
      opts.onError(err);
      return;
    }
    const d = digest(pair);
    if (d === current) return;
    try {
      // Checked only for a changed pair: the one being served is never swapped out for being old, and a
      // refused pair is checked again on the next change or poll (a not-yet-valid one becomes valid).
      checkValidity(pair, (opts.now ?? (() => new Date()))(), opts.certFile);
    } catch (err) {
      opts.onError(err);
      return;
    }
    try {
      opts.onChange(pair);
      current = d;
    } catch (err) {
      opts.onError(err);
    }
  };
  const check = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await load();
      } while (again);
    })().finally(() => {
      running = undefined;
    });
    return running;
  };

  const watchers: FSWatcher[] = [];
  for (const dir of new Set([dirname(opts.certFile), dirname(opts.keyFile)])) {
    try {
      const w = watch(dir, { persistent: false }, () => {
        clearTimeout(debounce);
        debounce = setTimeout(() => void check(), 50);
      });
      w.on("error", (err) => opts.log.warn({ err, dir }, "tls: directory watch failed; polling only"));
      watchers.push(w);
    } catch (err) {
      opts.log.warn({ err, dir }, "tls: cannot watch directory; polling only");
    }
  }
  const poll = setInterval(() => void check(), opts.pollMs ?? 10_000);
  poll.unref();

  return {
    check,
    close() {
      clearInterval(poll);
      clearTimeout(debounce);
      for (const w of watchers) w.close();
    },
  };
}

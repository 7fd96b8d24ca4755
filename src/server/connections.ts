/**
 * @module
 * Who keeps a connection slot: the admission port's connection guard.
 *
 * A cap that refuses new connections once full (Node's `server.maxConnections`) hands the port to whoever
 * fills it first: 1,000 silent TCP connections, or a client that opens connections and sends a `GET /healthz`
 * on each every minute, locked the apiserver out for as long as they were held (issue 29). Here a new
 * connection is always taken, and when a bound is passed the connection that matters least is closed
 * instead, in this order:
 *
 * 1. the oldest connection whose TLS handshake is not done (the apiserver's finish in milliseconds);
 * 2. the connection idle longest, where only admission requests (the webhook POSTs) count as use, so
 *    health checks, 404s and refused requests keep nothing alive;
 * 3. none: every other connection has a request in flight, and the new one is closed.
 *
 * At the global bounds (all connections, handshaking ones) the victim is looked for first among the
 * connections of the source holding the most of them, then among all: a few abusive addresses pay for
 * their own flood, and the apiserver's handshakes are not cut by the rotation.
 *
 * Bounds: open connections per source address (one tenant's pods cannot take the pool), all open
 * connections, and connections still in their handshake (with `--client-ca`, the only ones not yet
 * authenticated: a small pool). A sweep closes connections that have served no admission request for
 * `idleMs`, whatever else they sent.
 *
 * Victims are found by a scan of the open connections. Only a connection arriving at a full bound scans,
 * the bounds are ~1,000, and a scan is some microseconds: an index ordered by last use would cost every
 * request an update to save that.
 */
import type { Socket } from "node:net";

/** Why the guard closed a connection (the `reason` label of `quartermaster_connections_shed_total`). */
export type ShedReason = "per_source" | "handshaking" | "capacity" | "idle";

export interface ConnectionLimits {
  /** Open connections at most. */
  readonly max: number;
  /** Open connections at most from one source address. */
  readonly perSource: number;
  /** Connections whose TLS handshake is not done, at most (plain HTTP has none). */
  readonly handshaking: number;
  /** A connection with nothing in flight that has served no admission request (or opened) this long ago is closed. */
  readonly idleMs: number;
}

export interface ConnectionCounts {
  handshaking: number;
  idle: number;
  active: number;
}

export interface ConnectionGuard {
  /** Connections open now, by state. */
  counts(): ConnectionCounts;
  /** Stops the idle sweep (the server is closing). */
  stop(): void;
}

/** What the guard needs of a server: the raw accepts, handshakes, and requests of both protocols. */
export interface GuardedServer {
  on(event: "connection", listener: (socket: Socket) => void): unknown;
  on(event: "secureConnection", listener: (socket: Socket) => void): unknown;
  on(event: "request", listener: (req: RequestLike, res: ResponseLike) => void): unknown;
}

/** A request of either protocol, as far as the guard reads it (h2's `socket` is a proxy of its session's). */
export interface RequestLike {
  readonly method?: string;
  readonly url?: string;
  readonly socket: { readonly remoteAddress?: string; readonly remotePort?: number } | null;
}
export interface ResponseLike {
  once(event: "close", listener: () => void): unknown;
}

export interface GuardOptions {
  limits: ConnectionLimits;
  /** True on a TLS listener: a connection is handshaking until `secureConnection`. */
  tls: boolean;
  /** Whether a request counts as use: the admission POSTs on the webhook port, everything on the metrics port. */
  isUse(req: RequestLike): boolean;
  /** Called once per connection the guard closes. */
  onShed?(reason: ShedReason): void;
  /** Monotonic milliseconds. */
  now?: () => number;
  /** How often the idle sweep runs (default 2 s); 0: never (tests drive {@link sweep}). */
  sweepMs?: number;
}

interface Connection {
  readonly socket: Socket;
  readonly key: string;
  readonly source: string;
  readonly opened: number;
  secure: boolean;
  inFlight: number;
  /** When it last served an admission request (its opening, before one). */
  lastUse: number;
  closed: boolean;
}

function keyOf(address: string | undefined, port: number | undefined): string {
  return `${address ?? "?"}|${port ?? "?"}`;
}

export interface Guard extends ConnectionGuard {
  /** Closes connections idle past `idleMs` (the timer's work, callable from tests). */
  sweep(): void;
}

/** Puts the guard on `server`. Set no `maxConnections` on it: that would refuse at accept, before the guard sees a thing. */
export function guardConnections(server: GuardedServer, opts: GuardOptions): Guard {
  const { limits } = opts;
  const now = opts.now ?? ((): number => performance.now());
  const open = new Map<string, Connection>();
  const bySource = new Map<string, Set<Connection>>();
  let handshaking = 0;

  function close(c: Connection, reason: ShedReason): void {
    forget(c);
    c.socket.destroy();
    opts.onShed?.(reason);
  }

  function forget(c: Connection): void {
    if (c.closed) return;
    c.closed = true;
    open.delete(c.key);
    const peers = bySource.get(c.source);
    peers?.delete(c);
    if (peers?.size === 0) bySource.delete(c.source);
    if (!c.secure) handshaking--;
  }

  /** The connection to close to make room among `candidates` (never `except`), or undefined when all are busy. */
  function victim(candidates: Iterable<Connection>, except: Connection, handshakingOnly = false): Connection | undefined {
    let oldestHandshaking: Connection | undefined;
    let longestIdle: Connection | undefined;
    for (const c of candidates) {
      if (c === except) continue;
      if (!c.secure) {
        if (!oldestHandshaking || c.opened < oldestHandshaking.opened) oldestHandshaking = c;
      } else if (!handshakingOnly && c.inFlight === 0 && (!longestIdle || c.lastUse < longestIdle.lastUse)) {
        longestIdle = c;
      }
    }
    return oldestHandshaking ?? longestIdle;
  }

  /**
   * The connections of the sources holding the most of the bound's kind (handshaking ones, or all), so that
   * a flood from a few addresses churns its own connections and not the apiserver's: without this, 700
   * connections rotating through a 200-slot handshake pool cut everyone's handshakes after ~60 ms.
   */
  function heaviest(handshakingOnly: boolean): Connection[] {
    let top: Set<Connection>[] = [];
    let most = 0;
    for (const peers of bySource.values()) {
      let n = peers.size;
      if (handshakingOnly) {
        n = 0;
        for (const p of peers) if (!p.secure) n++;
      }
      if (n > most) {
        most = n;
        top = [peers];
      } else if (n === most) top.push(peers);
    }
    return top.flatMap((peers) => [...peers]);
  }

  /** Makes room for `c` under one bound; false when `c` itself had to go. */
  function makeRoom(over: boolean, candidates: Iterable<Connection>, c: Connection, reason: ShedReason, handshakingOnly = false): boolean {
    if (!over) return true;
    const v = (reason === "per_source" ? undefined : victim(heaviest(handshakingOnly), c, handshakingOnly)) ?? victim(candidates, c, handshakingOnly);
    close(v ?? c, reason);
    return v !== undefined;
  }

  server.on("connection", (socket) => {
    const source = socket.remoteAddress ?? "?";
    const key = keyOf(socket.remoteAddress, socket.remotePort);
    const t = now();
    const c: Connection = { socket, key, source, opened: t, secure: !opts.tls, inFlight: 0, lastUse: t, closed: false };
    open.set(key, c);
    let peers = bySource.get(source);
    if (!peers) bySource.set(source, (peers = new Set()));
    peers.add(c);
    if (!c.secure) handshaking++;
    socket.once("close", () => forget(c));
    if (!makeRoom(peers.size > limits.perSource, peers, c, "per_source")) return;
    if (!makeRoom(handshaking > limits.handshaking, open.values(), c, "handshaking", true)) return;
    makeRoom(open.size > limits.max, open.values(), c, "capacity");
  });

  if (opts.tls) {
    server.on("secureConnection", (tlsSocket) => {
      const c = open.get(keyOf(tlsSocket.remoteAddress, tlsSocket.remotePort));
      if (!c || c.secure) return;
      c.secure = true;
      handshaking--;
      // The TLS socket may close without its raw socket saying so at once.
      tlsSocket.once("close", () => forget(c));
    });
  }

  server.on("request", (req, res) => {
    const c = open.get(keyOf(req.socket?.remoteAddress, req.socket?.remotePort));
    if (!c) return;
    const use = opts.isUse(req);
    c.inFlight++;
    if (use) c.lastUse = now();
    res.once("close", () => {
      c.inFlight--;
      if (use) c.lastUse = now();
    });
  });

  function sweep(): void {
    const cutoff = now() - limits.idleMs;
    for (const c of [...open.values()]) if (c.secure && c.inFlight === 0 && c.lastUse < cutoff) close(c, "idle");
  }

  const sweepMs = opts.sweepMs ?? 2_000;
  const timer = sweepMs > 0 ? setInterval(sweep, sweepMs) : undefined;
  timer?.unref();

  return {
    counts() {
      let active = 0;
      for (const c of open.values()) if (c.secure && c.inFlight > 0) active++;
      return { handshaking, idle: open.size - handshaking - active, active };
    },
    stop() {
      if (timer) clearInterval(timer);
    },
    sweep,
  };
}

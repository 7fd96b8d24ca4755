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
 * Closing a connection the client may still reuse races its next request (issue 52): an HTTP/1.1 client
 * that writes a POST into a keep-alive connection as the server closes it gets EOF or a reset, and Go's
 * http.Transport (the apiserver's webhook client) retries no POST, so a fail-closed webhook refuses the
 * pod. The apiserver keeps idle connections for 90 s (client-go's transport: Go's IdleConnTimeout) and may
 * take any of them at any moment, including spares it dialled and never used. So the guard closes at once
 * only what no client can be reusing:
 *
 * - a connection whose handshake is not done (no request can be on it yet);
 * - an idle one that has received nothing since its last answer (or its handshake) for longer than `idleMs`,
 *   past the client's reuse window, measured from the handshake (where the client's idle clock starts),
 *   never from the TCP accept;
 * - (the sweep runs after the event loop's poll phase, so bytes that came in while the loop was busy are
 *   read, and count, before it decides.)
 *
 * Any other connection a bound picks is retired instead: it no longer counts against the bounds, and is
 * told before it goes. HTTP/2: a GOAWAY (`session.close()`), the streams under way finish and the client
 * opens new ones elsewhere. HTTP/1.1 has no way to tell an idle client, so its next answer carries
 * `Connection: close` (the client knows, and Node closes the connection after it); one that sends nothing
 * more is closed by the sweep past the reuse window. Retired connections are bounded too (as many as `max`):
 * only a flood past twice the bound closes the oldest of them. A connection whose client certificate
 * verified (`--client-ca`: the apiserver's identity) is never picked.
 *
 * Victims are found by a scan of the open connections. Only a connection arriving at a full bound scans,
 * the bounds are ~1,000, and a scan is some microseconds: an index ordered by last use would cost every
 * request an update to save that.
 */
import type { Socket } from "node:net";

/** Why the guard closed a connection (the `reason` label of `quartermaster_connections_shed_total`). */
export type ShedReason = "per_source" | "handshaking" | "capacity" | "idle" | "retired";

export interface ConnectionLimits {
  /** Open connections at most. */
  readonly max: number;
  /** Open connections at most from one source address. */
  readonly perSource: number;
  /** Connections whose TLS handshake is not done, at most (plain HTTP has none). */
  readonly handshaking: number;
  /**
   * A connection with nothing in flight that has served no admission request (or finished its handshake)
   * this long ago, and received nothing since its last answer, is closed. Longer than the clients' idle reuse
   * window (the apiserver's: 90 s), so a client never writes into one as it goes.
   */
  readonly idleMs: number;
}

export interface ConnectionCounts {
  handshaking: number;
  idle: number;
  active: number;
}

export interface ConnectionGuard {
  /** Connections open now, by state (retired ones not counted). */
  counts(): ConnectionCounts;
  /**
   * True when `socket`'s connection is open, has nothing in flight and has received no byte since its last
   * answer (or its handshake): a keep-alive connection at rest, which a header timeout must not cut (the
   * client may write into it at any moment); false for one where a request has begun.
   */
  quiet(socket: { readonly remoteAddress?: string; readonly remotePort?: number }): boolean;
  /** Stops the idle sweep (the server is closing). */
  stop(): void;
}

/** The raw socket as the guard reads it (`bytesRead`: whether anything came in since the last answer). */
export type GuardedSocket = Pick<Socket, "remoteAddress" | "remotePort" | "bytesRead" | "destroy" | "once">;
/** A TLS socket at the end of its handshake: the protocol ALPN chose, and whether a client certificate verified. */
export type SecureSocket = GuardedSocket & { readonly alpnProtocol?: string | false | null; readonly authorized?: boolean };
/** An HTTP/2 session, as far as the guard closes it: `close()` sends a GOAWAY and lets its streams finish. */
export interface SessionLike {
  readonly socket: { readonly remoteAddress?: string; readonly remotePort?: number } | null;
  close(): void;
}

/** What the guard needs of a server: the raw accepts, handshakes, and requests of both protocols. */
export interface GuardedServer {
  on(event: "connection", listener: (socket: GuardedSocket) => void): unknown;
  on(event: "secureConnection", listener: (socket: SecureSocket) => void): unknown;
  on(event: "session", listener: (session: SessionLike) => void): unknown;
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
  /** HTTP/1.1 only (an HTTP/2 response has no connection header). */
  setHeader?(name: string, value: string): unknown;
  readonly headersSent?: boolean;
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
  readonly socket: GuardedSocket;
  readonly key: string;
  readonly source: string;
  readonly opened: number;
  secure: boolean;
  /** Its client certificate verified (`--client-ca`): the apiserver's identity, never a bound's victim. */
  verified: boolean;
  /** Its HTTP/2 session, when ALPN chose h2. */
  session?: SessionLike;
  /** HTTP/2 by ALPN (its session may not be known yet). */
  h2: boolean;
  inFlight: number;
  /** When it last served an admission request (its handshake, before one). */
  lastUse: number;
  /** The raw socket's `bytesRead` when its last answer ended (or its handshake did): more since, a request has begun. */
  restBytes: number;
  /** Picked by a bound: no longer counted, told before it goes (see the module comment). */
  retired: boolean;
  closed: boolean;
}

function keyOf(address: string | undefined, port: number | undefined): string {
  return `${address ?? "?"}|${port ?? "?"}`;
}

export interface Guard extends ConnectionGuard {
  /** Closes connections idle past `idleMs` (the timer's work, callable from tests). */
  sweep(): void;
  /** Whether a bound retired `socket`'s connection (out of the counts, to be told before it goes). */
  retired(socket: { readonly remoteAddress?: string; readonly remotePort?: number }): boolean;
}

/** The guard's connections and bounds (see the module comment); the server's events drive it (guardConnections). */
class ConnectionTable {
  readonly open = new Map<string, Connection>();
  readonly bySource = new Map<string, Set<Connection>>();
  /** Retired connections, oldest first (a Map keeps insertion order). */
  readonly retired = new Map<string, Connection>();
  handshaking = 0;
  readonly limits: ConnectionLimits;
  readonly now: () => number;

  constructor(readonly opts: GuardOptions) {
    this.limits = opts.limits;
    this.now = opts.now ?? ((): number => performance.now());
  }

  /**
   * Closes `c` now: only for one no client can be reusing (see the module comment). An HTTP/2 session gets
   * its GOAWAY all the same (`close()` ends the connection once its streams, if any, are done).
   */
  close(c: Connection, reason: ShedReason): void {
    this.forget(c);
    if (c.session) c.session.close();
    else c.socket.destroy();
    this.opts.onShed?.(reason);
  }

  /** Received nothing since its last answer, and nothing in flight. */
  atRest(c: Connection): boolean {
    return c.inFlight === 0 && c.socket.bytesRead === c.restBytes;
  }

  /** Past the client's reuse window: closing it races nothing. */
  stale(c: Connection, t: number): boolean {
    return this.atRest(c) && c.lastUse < t - this.limits.idleMs;
  }

  /** Takes `c` out of the bounds and tells its client before it goes (see the module comment). */
  retire(c: Connection, reason: ShedReason): void {
    if (!c.secure || this.stale(c, this.now())) return this.close(c, reason);
    this.uncount(c);
    c.retired = true;
    this.retired.set(c.key, c);
    this.opts.onShed?.(reason);
    // HTTP/2: a GOAWAY now; the session closes once its streams are done.
    if (c.h2) c.session?.close();
    // HTTP/1.1: its next answer says `Connection: close` (the request listener); idle, the sweep closes it.
  }

  /**
   * Whether `v` can be retired now: the retired connections are bounded too (`limits.max`), and a full set makes
   * room only by closing one past its client's reuse window, never one that may have a request on its way or in
   * flight (issue 52). When none is, the newcomer is shed instead: it has no request yet.
   */
  canRetire(v: Connection): boolean {
    if (!v.secure || this.stale(v, this.now()) || this.retired.size < this.limits.max) return true;
    const t = this.now();
    for (const r of this.retired.values()) {
      if (this.stale(r, t)) {
        this.close(r, "retired");
        return true;
      }
    }
    return false;
  }

  /** Out of the bounds' counts (retired or closed). */
  uncount(c: Connection): void {
    if (c.retired || c.closed) return;
    if (this.open.get(c.key) === c) this.open.delete(c.key);
    const peers = this.bySource.get(c.source);
    peers?.delete(c);
    if (peers?.size === 0) this.bySource.delete(c.source);
    if (!c.secure) this.handshaking--;
  }

  forget(c: Connection): void {
    if (c.closed) return;
    this.uncount(c);
    c.closed = true;
    if (this.retired.get(c.key) === c) this.retired.delete(c.key);
  }

  /** The open or retired connection at this address and port. */
  find(address: string | undefined, port: number | undefined): Connection | undefined {
    const key = keyOf(address, port);
    return this.open.get(key) ?? this.retired.get(key);
  }

  /**
   * The connection to close to make room among `candidates` (never `except`), or undefined when all are
   * busy or the apiserver's.
   */
  victim(candidates: Iterable<Connection>, except: Connection, handshakingOnly = false): Connection | undefined {
    let oldestHandshaking: Connection | undefined;
    let longestIdle: Connection | undefined;
    for (const c of candidates) {
      if (c === except) continue;
      if (!c.secure) {
        if (!oldestHandshaking || c.opened < oldestHandshaking.opened) oldestHandshaking = c;
      } else if (!handshakingOnly && !c.verified && c.inFlight === 0 && (!longestIdle || c.lastUse < longestIdle.lastUse)) {
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
  heaviest(handshakingOnly: boolean): Connection[] {
    let top: Set<Connection>[] = [];
    let most = 0;
    for (const peers of this.bySource.values()) {
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

  /** Makes room for `c` under one bound; false when `c` itself had to go (it is still in its handshake). */
  makeRoom(over: boolean, candidates: Iterable<Connection>, c: Connection, reason: ShedReason, handshakingOnly = false): boolean {
    if (!over) return true;
    const v =
      (reason === "per_source" ? undefined : this.victim(this.heaviest(handshakingOnly), c, handshakingOnly)) ?? this.victim(candidates, c, handshakingOnly);
    if (v && this.canRetire(v)) {
      this.retire(v, reason);
      return true;
    }
    this.close(c, reason);
    return false;
  }

  /** A new connection: counted, then each bound makes room for it (or it goes). */
  accept(socket: GuardedSocket): void {
    const source = socket.remoteAddress ?? "?";
    const key = keyOf(socket.remoteAddress, socket.remotePort);
    const t = this.now();
    const c: Connection = {
      socket,
      key,
      source,
      opened: t,
      secure: !this.opts.tls,
      verified: false,
      h2: false,
      inFlight: 0,
      lastUse: t,
      restBytes: socket.bytesRead,
      retired: false,
      closed: false,
    };
    this.open.set(key, c);
    let peers = this.bySource.get(source);
    if (!peers) this.bySource.set(source, (peers = new Set()));
    peers.add(c);
    if (!c.secure) this.handshaking++;
    socket.once("close", () => this.forget(c));
    if (!this.makeRoom(peers.size > this.limits.perSource, peers, c, "per_source")) return;
    if (!this.makeRoom(this.handshaking > this.limits.handshaking, this.open.values(), c, "handshaking", true)) return;
    this.makeRoom(this.open.size > this.limits.max, this.open.values(), c, "capacity");
  }

  /** Its TLS handshake is done. */
  secured(tlsSocket: SecureSocket): void {
    const c = this.find(tlsSocket.remoteAddress, tlsSocket.remotePort);
    if (!c || c.secure) return;
    c.secure = true;
    if (!c.retired) this.handshaking--;
    c.verified = tlsSocket.authorized === true;
    c.h2 = tlsSocket.alpnProtocol === "h2";
    // The client's idle clock starts when its connection is ready, not at our accept.
    c.lastUse = this.now();
    c.restBytes = c.socket.bytesRead;
    // The TLS socket may close without its raw socket saying so at once.
    tlsSocket.once("close", () => this.forget(c));
  }

  /** Closes connections at rest past the reuse window. */
  sweep(): void {
    const t = this.now();
    for (const c of [...this.open.values(), ...this.retired.values()]) if (c.secure && this.stale(c, t)) this.close(c, c.retired ? "retired" : "idle");
  }

  counts(): ConnectionCounts {
    let active = 0;
    for (const c of this.open.values()) if (c.secure && c.inFlight > 0) active++;
    return { handshaking: this.handshaking, idle: this.open.size - this.handshaking - active, active };
  }
}

/** Puts the guard on `server`. Set no `maxConnections` on it: that would refuse at accept, before the guard sees a thing. */
export function guardConnections(server: GuardedServer, opts: GuardOptions): Guard {
  const table = new ConnectionTable(opts);
  server.on("connection", (socket) => table.accept(socket));
  if (opts.tls) server.on("secureConnection", (tlsSocket) => table.secured(tlsSocket));
  server.on("session", (session) => {
    const c = table.find(session.socket?.remoteAddress, session.socket?.remotePort);
    if (!c) return;
    c.session = session;
    c.h2 = true;
    if (c.retired) session.close();
  });

  server.on("request", (req, res) => {
    const c = table.find(req.socket?.remoteAddress, req.socket?.remotePort);
    if (!c) return;
    const use = opts.isUse(req);
    c.inFlight++;
    if (use) c.lastUse = table.now();
    // A retired HTTP/1.1 connection is told with this answer, and Node closes it after.
    if (c.retired && !c.h2 && res.setHeader && !res.headersSent) res.setHeader("Connection", "close");
    res.once("close", () => {
      c.inFlight--;
      if (use) c.lastUse = table.now();
      if (c.inFlight === 0) c.restBytes = c.socket.bytesRead;
    });
  });

  const sweepMs = opts.sweepMs ?? 2_000;
  // After the poll phase (setImmediate): what came in while the loop was busy is read before the sweep decides.
  const timer = sweepMs > 0 ? setInterval(() => setImmediate(() => table.sweep()), sweepMs) : undefined;
  timer?.unref();

  return {
    counts: () => table.counts(),
    quiet(socket) {
      const c = table.find(socket.remoteAddress, socket.remotePort);
      return c !== undefined && c.secure && table.atRest(c);
    },
    stop() {
      if (timer) clearInterval(timer);
    },
    retired(socket) {
      return table.retired.has(keyOf(socket.remoteAddress, socket.remotePort));
    },
    sweep: () => table.sweep(),
  };
}

/**
 * The connection guard (src/server/connections.ts) on a stand-in server: which connection a full bound
 * closes, and which ones the idle sweep closes. The real listener is in test/integration/connections.test.ts.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import { guardConnections, type ConnectionLimits, type GuardedServer, type ShedReason } from "../../../src/server/connections.js";

class FakeSocket extends EventEmitter {
  destroyed = false;
  /** Raw bytes received so far: a request's bytes arrive before its 'request' event. */
  bytesRead = 0;
  authorized = false;
  alpnProtocol: string | false = "http/1.1";
  constructor(
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {
    super();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit("close");
  }
}

/** A stand-in listener: connections, handshakes and requests as the guard sees them, on a settable clock. */
function rig(limits: Partial<ConnectionLimits> = {}, tls = true) {
  const server = new EventEmitter();
  let clock = 0;
  let port = 1000;
  const shed: ShedReason[] = [];
  const guard = guardConnections(server as unknown as GuardedServer, {
    limits: { max: 4, perSource: 4, handshaking: 4, idleMs: 95_000, ...limits },
    tls,
    isUse: (req) => req.method === "POST" && req.url === "/mutate/pods",
    onShed: (reason) => shed.push(reason),
    now: () => clock,
    sweepMs: 0,
  });
  const rigged = {
    guard,
    shed,
    tick(ms: number) {
      clock += ms;
    },
    /** A new connection from `source`, its handshake done unless `handshake: false`. */
    open(source = "10.0.0.1", handshake = true): FakeSocket {
      const s = new FakeSocket(source, port++);
      server.emit("connection", s);
      if (handshake && !s.destroyed && tls) rigged.secure(s);
      return s;
    },
    secure(s: FakeSocket) {
      server.emit("secureConnection", s);
    },
    /** A request on `s` (its bytes counted first); returns its end. */
    request(s: FakeSocket, method = "POST", url = "/mutate/pods"): () => void {
      return rigged.answered(s, method, url).end;
    },
    /** A request on `s`: its end, and the headers the guard set on its answer. */
    answered(s: FakeSocket, method = "POST", url = "/mutate/pods") {
      s.bytesRead += 300;
      const headers: Record<string, string> = {};
      const res = Object.assign(new EventEmitter(), { headersSent: false, setHeader: (k: string, v: string) => (headers[k.toLowerCase()] = v) });
      server.emit("request", { method, url, socket: s }, res);
      return { end: () => res.emit("close"), headers };
    },
    /** Closed, or retired (out of the bounds, told before it goes): either way the bound's victim. */
    gone(s: FakeSocket): boolean {
      return s.destroyed || guard.retired(s);
    },
    /** One request, answered at once. */
    use(s: FakeSocket, method = "POST", url = "/mutate/pods") {
      rigged.request(s, method, url)();
    },
  };
  return rigged;
}

describe("connection guard: who makes room at a full bound", () => {
  it("a silent connection (no handshake) goes before an idle one, the oldest first", () => {
    const r = rig();
    const idle = r.open("10.0.0.1");
    r.tick(10);
    const silent1 = r.open("10.0.0.2", false);
    r.tick(10);
    const silent2 = r.open("10.0.0.3", false);
    r.tick(10);
    const busy = r.open("10.0.0.4");
    r.request(busy);
    const newcomer = r.open("10.0.0.5");
    assert.deepEqual(
      [idle, silent1, silent2, busy, newcomer].map((s) => s.destroyed),
      [false, true, false, false, false],
    );
    assert.deepEqual(r.shed, ["capacity"]);
  });

  it("at a global bound the source holding the most pays: a flood rotates its own handshakes, not the apiserver's", () => {
    const r = rig({ max: 10, perSource: 10, handshaking: 4 });
    const apiserver = r.open("10.0.0.9", false); // the oldest handshake, from the control plane
    r.tick(1);
    const flood = Array.from({ length: 8 }, () => (r.tick(1), r.open("10.0.0.1", false)));
    assert.equal(apiserver.destroyed, false, "the apiserver's handshake survives the flood");
    assert.deepEqual(
      flood.map((s) => s.destroyed),
      [true, true, true, true, true, false, false, false],
    );
    r.secure(apiserver);
    assert.deepEqual(r.shed, Array(5).fill("handshaking"));
  });

  it("at the connection bound, too: the heaviest source's idle connection goes before a lighter source's older one", () => {
    const r = rig({ max: 4, perSource: 4, handshaking: 4 });
    const apiserver = r.open("10.0.0.9");
    r.tick(10);
    const tenant = [r.open("10.0.0.1"), r.open("10.0.0.1"), r.open("10.0.0.1")];
    r.tick(10);
    r.open("10.0.0.1");
    assert.equal(r.gone(apiserver), false);
    assert.deepEqual(tenant.map(r.gone), [true, false, false]);
  });

  it("with no handshake pending, the connection longest without an admission request goes", () => {
    const r = rig();
    const a = r.open();
    const b = r.open("10.0.0.2");
    const c = r.open("10.0.0.3");
    const d = r.open("10.0.0.4");
    r.tick(1_000);
    r.use(a);
    r.use(c);
    r.use(d);
    r.tick(1_000);
    // b served nothing: it goes, though a was opened first.
    r.open("10.0.0.5");
    assert.deepEqual([a, b, c, d].map(r.gone), [false, true, false, false]);
  });

  it("health checks and other requests do not count as use", () => {
    const r = rig();
    const prober = r.open("10.0.0.1");
    const apiserver = r.open("10.0.0.2");
    const others = [r.open("10.0.0.3"), r.open("10.0.0.4")];
    r.tick(1_000);
    r.use(apiserver);
    r.tick(1_000);
    r.use(prober, "GET", "/healthz");
    r.use(prober, "POST", "/nowhere");
    for (const o of others) r.use(o);
    r.tick(1_000);
    r.open("10.0.0.5");
    assert.equal(r.gone(prober), true, "the prober's requests kept nothing");
    assert.equal(r.gone(apiserver), false);
  });

  it("a connection with a request in flight is never closed; when all are busy the newcomer is", () => {
    const r = rig({ max: 2, perSource: 2 });
    const a = r.open("10.0.0.1");
    const b = r.open("10.0.0.2");
    const endA = r.request(a);
    r.request(b);
    const c = r.open("10.0.0.3");
    assert.deepEqual([r.gone(a), r.gone(b), r.gone(c)], [false, false, true]);
    endA();
    const d = r.open("10.0.0.4");
    assert.deepEqual([r.gone(a), r.gone(b), r.gone(d)], [true, false, false], "once a's request ended, a is idle and makes room");
    assert.deepEqual(r.shed, ["capacity", "capacity"]);
  });

  it("one source at its own bound makes room among its own connections, not others'", () => {
    const r = rig({ max: 10, perSource: 2 });
    const other = r.open("10.0.0.9");
    const t1 = r.open("10.0.0.1");
    r.tick(5);
    const t2 = r.open("10.0.0.1");
    r.tick(5);
    const t3 = r.open("10.0.0.1");
    assert.deepEqual([other, t1, t2, t3].map(r.gone), [false, true, false, false]);
    assert.deepEqual(r.shed, ["per_source"]);
  });

  it("unfinished handshakes have a pool of their own: past it the oldest goes, finished connections stay", () => {
    const r = rig({ max: 10, perSource: 10, handshaking: 2 });
    const done = r.open("10.0.0.1");
    const h1 = r.open("10.0.0.2", false);
    r.tick(5);
    const h2 = r.open("10.0.0.3", false);
    r.tick(5);
    const h3 = r.open("10.0.0.4", false);
    assert.deepEqual(
      [done, h1, h2, h3].map((s) => s.destroyed),
      [false, true, false, false],
    );
    assert.deepEqual(r.guard.counts(), { handshaking: 2, idle: 1, active: 0 });
    r.secure(h2);
    assert.deepEqual(r.guard.counts(), { handshaking: 1, idle: 2, active: 0 });
    assert.deepEqual(r.shed, ["handshaking"]);
  });

  it("a closed connection frees its place at once", () => {
    const r = rig({ max: 2, perSource: 2 });
    const a = r.open("10.0.0.1");
    const b = r.open("10.0.0.2");
    a.destroy();
    const c = r.open("10.0.0.3");
    assert.deepEqual([b.destroyed, c.destroyed], [false, false]);
    assert.deepEqual(r.shed, []);
    assert.deepEqual(r.guard.counts(), { handshaking: 0, idle: 2, active: 0 });
  });

  it("plain HTTP has no handshake: a connection is idle from its opening", () => {
    const r = rig({}, false);
    r.open("10.0.0.1");
    assert.deepEqual(r.guard.counts(), { handshaking: 0, idle: 1, active: 0 });
  });
});

describe("connection guard: the idle sweep", () => {
  const cases: Array<{ name: string; run(r: ReturnType<typeof rig>, s: FakeSocket): void; closed: boolean }> = [
    { name: "opened 96 s ago, nothing since", run: (r) => r.tick(96_000), closed: true },
    { name: "opened 94 s ago, nothing since", run: (r) => r.tick(94_000), closed: false },
    { name: "a health check every 60 s for 200 s", run: (r, s) => [1, 2, 3].forEach(() => (r.tick(60_000), r.use(s, "GET", "/healthz"))), closed: true },
    { name: "an admission request every 60 s for 200 s", run: (r, s) => [1, 2, 3].forEach(() => (r.tick(60_000), r.use(s))), closed: false },
    {
      name: "a request in flight for 100 s",
      run: (r, s) => {
        r.request(s);
        r.tick(100_000);
      },
      closed: false,
    },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.closed ? "closed" : "kept"}`, () => {
      const r = rig();
      const s = r.open();
      c.run(r, s);
      r.guard.sweep();
      assert.equal(s.destroyed, c.closed);
      assert.deepEqual(r.shed, c.closed ? ["idle"] : []);
    });
  }

  it("a handshake in progress is the handshake timeout's, not the sweep's", () => {
    const r = rig();
    const s = r.open("10.0.0.1", false);
    r.tick(200_000);
    r.guard.sweep();
    assert.equal(s.destroyed, false);
  });
});

/**
 * Issue 52: a client (the apiserver's Go transport) may write a request into any idle keep-alive connection
 * it holds, for up to 90 s; a server that closes such a connection under it gives it EOF, and Go retries no
 * POST. So nothing the client may still reuse is closed without telling it first.
 */
describe("connection guard: never closes a connection its client may be reusing (issue 52)", () => {
  it("a bound's idle victim is retired, not cut: out of the counts, and its next answer says Connection: close", () => {
    const r = rig({ max: 2, perSource: 2 });
    const apiserver = r.open("10.0.0.1");
    r.use(apiserver);
    r.tick(1_000);
    const other = r.open("10.0.0.2");
    r.use(other);
    r.open("10.0.0.3");
    assert.equal(apiserver.destroyed, false, "not cut under a client that may be writing into it");
    assert.equal(r.guard.retired(apiserver), true);
    assert.deepEqual(r.guard.counts(), { handshaking: 0, idle: 2, active: 0 });
    const { end, headers } = r.answered(apiserver);
    assert.equal(headers.connection, "close", "the client is told with the answer");
    end();
    assert.equal(r.answered(other).headers.connection, undefined, "a connection not retired is kept alive");
    assert.deepEqual(r.shed, ["capacity"]);
  });

  it("a retired connection that sends nothing more is closed by the sweep once past the reuse window", () => {
    const r = rig({ max: 1, perSource: 1 });
    const a = r.open("10.0.0.1");
    r.open("10.0.0.2");
    r.tick(94_000);
    r.guard.sweep();
    assert.equal(a.destroyed, false);
    r.tick(2_000);
    r.guard.sweep();
    assert.equal(a.destroyed, true);
    assert.deepEqual(r.shed, ["capacity", "idle", "retired"], "the newcomer, idle as long, goes with it");
  });

  it("retired connections are bounded too: with max of them waiting, a newcomer is shed, not a retired one cut", () => {
    const r = rig({ max: 2, perSource: 2 });
    const first = [r.open("10.0.0.1"), r.open("10.0.0.2")];
    r.tick(10);
    const second = [r.open("10.0.0.3"), r.open("10.0.0.4")];
    assert.deepEqual(
      first.map((s) => [s.destroyed, r.guard.retired(s)]),
      [
        [false, true],
        [false, true],
      ],
    );
    r.tick(10);
    // A request arrives on a retired connection (it is answered with Connection: close): never cut.
    const inFlight = r.answered(first[0]!);
    const newcomer = r.open("10.0.0.5");
    assert.equal(newcomer.destroyed, true, "the newcomer has no request yet: it goes");
    assert.deepEqual(
      [...first, ...second].map((s) => s.destroyed),
      [false, false, false, false],
    );
    assert.equal(inFlight.headers.connection, "close");
    inFlight.end();
    // Past the clients' reuse window a retired connection at rest can go, and makes room for a busy one's retiring.
    r.tick(95_001);
    for (const s of second) r.request(s)();
    const later = r.open("10.0.0.6");
    assert.equal(later.destroyed, false);
    assert.deepEqual(
      [...first, ...second].map((s) => [s.destroyed, r.guard.retired(s)]),
      [
        [true, false],
        [false, true],
        [false, true],
        [false, false],
      ],
    );
  });

  it("with --client-ca, a connection whose certificate verified (the apiserver) is never a bound's victim", () => {
    const r = rig({ max: 2, perSource: 2 });
    const apiserver = r.open("10.0.0.1", false);
    apiserver.authorized = true;
    r.secure(apiserver);
    r.tick(1_000);
    const other = r.open("10.0.0.2");
    r.tick(1_000);
    r.open("10.0.0.3");
    assert.deepEqual([r.gone(apiserver), r.gone(other)], [false, true], "the younger, unverified one goes though the apiserver idled longer");
  });

  it("HTTP/2: a bound's victim gets a GOAWAY (session.close()), never a cut", () => {
    const server = new EventEmitter();
    let goaways = 0;
    const guard = guardConnections(server as unknown as GuardedServer, {
      limits: { max: 1, perSource: 1, handshaking: 1, idleMs: 95_000 },
      tls: true,
      isUse: () => true,
      now: () => 0,
      sweepMs: 0,
    });
    const s = new FakeSocket("10.0.0.1", 1);
    s.alpnProtocol = "h2";
    server.emit("connection", s);
    server.emit("session", { socket: s, close: () => goaways++ });
    server.emit("secureConnection", s);
    server.emit("connection", new FakeSocket("10.0.0.2", 2));
    assert.deepEqual([s.destroyed, goaways, guard.retired(s)], [false, 1, true]);
  });

  const sweepCases: Array<{ name: string; run(r: ReturnType<typeof rig>, s: FakeSocket): void; closed: boolean }> = [
    {
      name: "a request's bytes arrived (its 'request' event not yet emitted) as it passed the idle time",
      run: (r, s) => {
        r.secure(s);
        r.tick(96_000);
        s.bytesRead += 120;
      },
      closed: false,
    },
    {
      name: "accepted 96 s ago, its handshake done 2 s later (the client's idle clock starts there)",
      run: (r, s) => {
        r.tick(2_000);
        r.secure(s);
        r.tick(94_000);
      },
      closed: false,
    },
  ];
  for (const c of sweepCases) {
    it(`sweep: ${c.name}: ${c.closed ? "closed" : "kept"}`, () => {
      const r = rig();
      const s = r.open("10.0.0.1", false);
      c.run(r, s);
      r.guard.sweep();
      assert.equal(s.destroyed, c.closed);
    });
  }

  it("quiet: at rest after its handshake or last answer; not once a request's bytes came in", () => {
    const r = rig();
    const s = r.open("10.0.0.1");
    assert.equal(r.guard.quiet(s), true, "a spare connection that has sent nothing yet");
    const end = r.request(s);
    assert.equal(r.guard.quiet(s), false, "a request in flight");
    end();
    assert.equal(r.guard.quiet(s), true, "between requests");
    s.bytesRead += 40;
    assert.equal(r.guard.quiet(s), false, "a request under way (its headers not all in)");
  });
});

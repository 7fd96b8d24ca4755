/**
 * A TCP proxy on 127.0.0.1 for fault tests: put it between a client and a server (TLS passes through
 * untouched) and make the server slow, hung or gone without touching it.
 *
 * - `forward`: bytes pass both ways, each chunk from the server held back `delayMs` first;
 * - `stall`: connections are accepted and nothing is ever forwarded (a hung server or network);
 * - `down()`: the listener is closed and every connection cut, so connects are refused; `up()` listens
 *   again on the same port.
 * Switching mode cuts the connections open at the time, so kept-alive ones cannot dodge the fault.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export type ProxyMode = { kind: "forward"; delayMs?: number } | { kind: "stall" };

export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  setMode(mode: ProxyMode): void;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, mode: ProxyMode = { kind: "forward" }): Promise<TcpProxy> {
  let current = mode;
  let accepted = 0;
  const open = new Set<Socket>();
  const cutAll = (): void => {
    for (const s of open) s.destroy();
    open.clear();
  };

  const onConnection = (client: Socket): void => {
    accepted++;
    open.add(client);
    client.on("close", () => open.delete(client));
    client.on("error", () => client.destroy());
    if (current.kind === "stall") {
      client.on("data", () => undefined); // read and drop: a peer that never answers
      return;
    }
    const delayMs = current.delayMs ?? 0;
    // Everything from the server, its end and close included, goes to the client `delayMs` later, in order.
    const later = (f: () => void): void => void (delayMs === 0 ? f() : setTimeout(f, delayMs));
    const upstream = connect(targetPort, "127.0.0.1");
    open.add(upstream);
    upstream.on("data", (chunk: Buffer) => later(() => client.writable && client.write(chunk)));
    upstream.on("end", () => later(() => client.end()));
    upstream.on("close", () => {
      open.delete(upstream);
      later(() => client.destroySoon());
    });
    upstream.on("error", () => upstream.destroy());
    client.on("data", (chunk: Buffer) => upstream.write(chunk));
    client.on("end", () => upstream.end());
    client.on("close", () => upstream.destroy());
  };

  let server: Server = createServer(onConnection);
  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  const port = await listen(0);
  let listening = true;

  const down = async (): Promise<void> => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((r) => server.close(() => r()));
    cutAll();
    await closed;
  };

  return {
    port,
    get accepted() {
      return accepted;
    },
    setMode(m) {
      current = m;
      cutAll();
    },
    down,
    async up() {
      if (listening) return;
      server = createServer(onConnection);
      await listen(port);
      listening = true;
    },
    close: down,
  };
}

/**
 * bench/handshake: what one TLS handshake with the webhook server costs, by serving key type. A handshake
 * is what an apiserver pays (and makes the webhook pay) for every new connection: after a restart, after a
 * connection sat idle past its 90 s, or for a new peak of concurrent calls.
 *
 *   npm run bench:handshake [-- --handshakes 400 --rounds 4]
 *
 * Starts `quartermaster serve` once with an ECDSA P-256 and once with an RSA-2048 serving pair (both from
 * `certs generate --key-type`), then opens --handshakes full TLS 1.3 handshakes (no session resumption,
 * one at a time, each closed at once) to each, in --rounds rounds alternating which server goes first,
 * and prints per handshake: the server's CPU (from /proc), this client's CPU (the apiserver's side: it
 * verifies the chain), the wall time, and the size of the serving certificate. The ratio column compares
 * against RSA, the key Quartermaster used before, measured in the same run.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:tls";
import { parseArgs } from "node:util";
import { webhookProcess, type WebhookProcess } from "../test/e2e/harness/webhook.js";
import { summarize, table } from "./lib/stats.js";

const { values } = parseArgs({ options: { handshakes: { type: "string", default: "400" }, rounds: { type: "string", default: "4" } } });
const handshakes = Number(values.handshakes);
const rounds = Number(values.rounds);

/** CPU seconds (user + system) of a process, from /proc (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function handshake(port: number, ca: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, ca }, () => {
      const ms = performance.now() - started;
      socket.destroy();
      resolve(ms);
    });
    socket.once("error", reject);
  });
}

const KEYS = ["rsa", "ecdsa"] as const;
const servers: Partial<Record<(typeof KEYS)[number], WebhookProcess>> = {};
try {
  for (const keyType of KEYS) {
    const wh = await webhookProcess({ keyType, logLevel: "warn", args: ["--ledger-refresh-seconds", "0"] });
    await wh.start();
    servers[keyType] = wh;
    for (let i = 0; i < 20; i++) await handshake(wh.port, wh.caPem); // warm-up
  }
  const tally = Object.fromEntries(KEYS.map((k) => [k, { server: 0, client: 0, ms: [] as number[] }]));
  for (let round = 0; round < rounds; round++) {
    for (const keyType of round % 2 === 0 ? KEYS : [...KEYS].reverse()) {
      const wh = servers[keyType]!;
      const pid = wh.pid()!;
      const serverBefore = cpuSeconds(pid);
      const clientBefore = process.cpuUsage();
      for (let i = 0; i < handshakes; i++) tally[keyType]!.ms.push(await handshake(wh.port, wh.caPem));
      const client = process.cpuUsage(clientBefore);
      tally[keyType]!.server += cpuSeconds(pid) - serverBefore;
      tally[keyType]!.client += (client.user + client.system) / 1e6;
    }
  }
  const n = handshakes * rounds;
  const per = (k: (typeof KEYS)[number]) => ({
    server: (tally[k]!.server * 1000) / n,
    client: (tally[k]!.client * 1000) / n,
    wall: summarize(tally[k]!.ms).p50,
  });
  const rsa = per("rsa");
  console.log(
    `\nbench/handshake: ${n} full TLS 1.3 handshakes per key, one at a time, ${rounds} rounds alternating; node ${process.version}; a shared machine: compare the ratios, not the absolute figures\n`,
  );
  console.log(
    table(
      ["serving key", "server CPU ms/handshake", "× RSA", "client CPU ms/handshake", "× RSA", "p50 wall ms", "certificate bytes (DER)"],
      KEYS.map((k) => {
        const p = per(k);
        const der = new X509Certificate(readFileSync(join(servers[k]!.certDir, "tls.crt"))).raw.length;
        return [
          k === "rsa" ? "RSA-2048" : "ECDSA P-256",
          p.server.toFixed(3),
          (p.server / rsa.server).toFixed(2),
          p.client.toFixed(3),
          (p.client / rsa.client).toFixed(2),
          p.wall.toFixed(2),
          der,
        ];
      }),
    ),
  );
} finally {
  for (const wh of Object.values(servers)) await wh?.stop();
}

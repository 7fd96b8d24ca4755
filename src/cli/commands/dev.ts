/**
 * @module
 * `quartermaster dev` (`npm start`): `serve` (./serve.ts) on https://127.0.0.1:8443 with development
 * certificates, created in certs/dev on first use; no cluster unless asked for (the capacity check is off).
 */
import { access } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { writeCertificates } from "../cert-files.js";
import type { CliDeps } from "../deps.js";
import type { CliIo } from "../io.js";
import { runServer, serveOptions, serverSettings, type ServeOptions } from "./serve.js";

const exists = (file: string): Promise<boolean> =>
  access(file).then(
    () => true,
    () => false,
  );

async function devCommand(opts: ServeOptions, _args: readonly string[], io: CliIo): Promise<number> {
  const dir = resolve(io.cwd, "certs/dev");
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  if (!(await exists(certFile)) || !(await exists(keyFile))) {
    const { generateCertificates } = await import("../../certs/generate.js");
    await writeCertificates(
      dir,
      await generateCertificates({ service: "quartermaster-webhook", namespace: "quartermaster", ips: ["127.0.0.1"], dnsNames: ["localhost"] }),
    );
    io.stdout(`quartermaster: created development certificates in ${dir}`);
  }
  const settings = serverSettings(opts, { certFile, keyFile });
  io.stdout(`quartermaster: CA for clients: ${join(dir, "ca.crt")}`);
  io.stdout(`quartermaster: try  curl --cacert ${join(dir, "ca.crt")} https://127.0.0.1:${settings.port}/readyz`);
  return runServer(settings, io);
}

export function registerDev(program: Command, deps: CliDeps): void {
  const cmd = program
    .command("dev")
    .summary("serve on https://127.0.0.1:8443 with development certificates")
    .description("Serve on https://127.0.0.1:8443 with development certificates (created in certs/dev on first use).");
  for (const option of serveOptions(true)) cmd.addOption(option);
  deps.action(cmd, devCommand);
}

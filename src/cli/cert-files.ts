/**
 * @module
 * A CA and serving certificate written as files (`certs generate`, `dev`'s development certificates).
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** ca.crt, ca.key, tls.crt and tls.key in `dir` (made if missing); the keys readable by the owner only. */
export async function writeCertificates(dir: string, certs: { ca: { certPem: string; keyPem: string }; certPem: string; keyPem: string }): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "ca.crt"), certs.ca.certPem);
  await writeFile(join(dir, "ca.key"), certs.ca.keyPem, { mode: 0o600 });
  // Key first, then certificate: a reloading server sees a mismatched pair only briefly and keeps the old one.
  await writeFile(join(dir, "tls.key"), certs.keyPem, { mode: 0o600 });
  await writeFile(join(dir, "tls.crt"), certs.certPem);
}

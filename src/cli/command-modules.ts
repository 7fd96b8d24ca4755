/**
 * @module
 * The full program's commands, one module each (src/cli/commands/): `quartermaster` runs them all (./commands.ts);
 * the `serve` bundle's program has `serve` alone (./serve-cli.ts), so it carries no other command's code.
 */
import { registerAdmit } from "./commands/admit.js";
import { registerAudit } from "./commands/audit.js";
import { registerCerts } from "./commands/certs.js";
import { registerDev } from "./commands/dev.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerExplain } from "./commands/explain.js";
import { registerLedger } from "./commands/ledger.js";
import { registerManifests } from "./commands/manifests.js";
import { registerMigrate } from "./commands/migrate.js";
import { registerPolicy } from "./commands/policy.js";
import { registerReconcile } from "./commands/reconcile.js";
import { registerServe } from "./commands/serve.js";
import { registerTest } from "./commands/test.js";
import { registerVersion } from "./commands/version.js";
import type { CommandModule } from "./program.js";

/** Every command's registration, in the order `--help` lists them. */
export const COMMAND_MODULES: readonly CommandModule[] = [
  registerServe,
  registerDev,
  registerPolicy,
  registerAudit,
  registerReconcile,
  registerLedger,
  registerDoctor,
  registerExplain,
  registerManifests,
  registerMigrate,
  registerCerts,
  registerAdmit,
  registerTest,
  registerVersion,
];

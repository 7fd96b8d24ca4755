/**
 * @module
 * What `serve` (and `dev`) run, as one object a command is given: the server, its metrics, the webhooks, the job
 * reader, the Event writer and the ledger reader. The whole program imports them when `serve` or `dev` runs
 * ({@link importServeModules}), so composing it loads none; the serve bundle's program (./serve-cli.ts) imports
 * them with itself, so esbuild keeps them plain modules in its one file (a module reached by `import()` is wrapped in
 * a lazy initializer, its top-level constants become mutable variables the hot path reads through).
 */
import type { startServer } from "../server/serve.js";
import type { createAdmissionMetrics } from "../server/metrics.js";
import type { createWebhooks } from "../../webhooks/index.js";
import type { createJobReader } from "../kube/jobs.js";
import type { createEventWriter } from "../kube/events.js";
import type { ledgerCapacity } from "../run/capacity.js";

export interface ServeModules {
  startServer: typeof startServer;
  createAdmissionMetrics: typeof createAdmissionMetrics;
  createWebhooks: typeof createWebhooks;
  createJobReader: typeof createJobReader;
  createEventWriter: typeof createEventWriter;
  ledgerCapacity: typeof ledgerCapacity;
}

/** The modules `serve` runs, imported now. */
export async function importServeModules(): Promise<ServeModules> {
  const [{ startServer }, { createAdmissionMetrics }, { createWebhooks }, { createJobReader }, { createEventWriter }, { ledgerCapacity }] = await Promise.all([
    import("../server/serve.js"),
    import("../server/metrics.js"),
    import("../../webhooks/index.js"),
    import("../kube/jobs.js"),
    import("../kube/events.js"),
    import("../run/capacity.js"),
  ]);
  return { startServer, createAdmissionMetrics, createWebhooks, createJobReader, createEventWriter, ledgerCapacity };
}

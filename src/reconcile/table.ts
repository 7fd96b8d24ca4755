/**
 * @module
 * Plain-text tables for the CLI: the plan of a pass (`reconcile --dry-run`: actions, then the jobs skipped and
 * why) and the device ledger
 * (`quartermaster ledger`). Columns padded to their widest cell; the last column is never padded.
 */
import { gpuSecondsAt, type Ledger } from "../ledger/compute.js";
import { describeQuota, type KueueLedger } from "../ledger/kueue-quota.js";
import type { Plan } from "./plan.js";

export function table(rows: readonly string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n");
}

/** The plan as a table, for `--dry-run`. */
export function planTable(plan: Plan): string {
  const rows = [
    ["ACTION", "KIND", "NAMESPACE", "NAME", "JOB", "REASON"],
    ...plan.claims.map((c) => [c.verb, c.kind, c.namespace, c.name, c.job, c.reason]),
    ...plan.creates.map((c) => ["create", c.kind, c.namespace, c.name, c.job, c.reason]),
    ...plan.actions.map((a) => ["delete", a.kind, a.namespace, a.name, a.job, a.reason]),
    // The job controller's (kinds Quartermaster runs): its deletes, creates and status writes.
    ...plan.controller.flatMap((c) => [
      ...c.decision.deletes.map((a) => ["delete", a.kind, a.namespace, a.name, a.job, a.reason]),
      ...c.decision.creates.map((a) => ["create", a.kind, a.namespace, a.name, a.job, a.reason]),
      ...(c.decision.status ? [["status", c.kind.kind, c.namespace, c.name, `${c.kind.kind}/${c.name}`, statusSummary(c.decision.status)]] : []),
    ]),
  ];
  const lines = [table(rows)];
  if (plan.deferred.length > 0) lines.push(`(${plan.deferred.length} more deletions deferred to later passes by reconciler.maxDeletionsPerPass)`);
  if (rows.length === 1) lines.push("(nothing to do)");
  if (plan.skipped.length > 0) {
    lines.push("", "SKIPPED (no claims, Services, deletions or Events for these jobs)");
    lines.push(table([["KIND", "NAMESPACE", "NAME", "WHY"], ...plan.skipped.map((s) => [s.kind, s.namespace, s.name, s.why])]));
  }
  const writes = plan.ledgerWrites.filter((w) => w.verb !== "delete").length;
  lines.push(
    `ledger: ${plan.ledger.nodes.length} nodes, ${plan.ledger.pending.length} GPU pods pending; ${writes} ConfigMap writes${plan.ledgerCorrupt.length > 0 ? `; rebuilding ${plan.ledgerCorrupt.join(", ")}` : ""}`,
  );
  return lines.join("\n");
}

/** The last condition of a status (kubectl's State column) and its reason. */
function statusSummary(status: Record<string, unknown>): string {
  const last = ((status.conditions ?? []) as Array<{ type?: string; status?: string; reason?: string }>).at(-1);
  return last ? `${last.type}=${last.status} (${last.reason})` : "status";
}

const flags = (f: Array<[boolean, string]>): string =>
  f
    .filter(([on]) => on)
    .map(([, s]) => s)
    .join(",") || "-";

/** The ledger as tables: totals, nodes, namespaces, jobs, pending GPU pods. */
export function ledgerTable(ledger: Ledger): string {
  const out: string[] = [`Device ledger generated ${ledger.generatedAt}`, ""];
  // DRA and extended-resource GPUs side by side, only when some resource has DRA devices: the DRA devices
  // (ResourceSlices) and those of them claims allocated, and the GPUs pods' container requests hold.
  const dra = Object.values(ledger.totals).some((t) => t.dra !== undefined);
  const sources = (e: { allocated: number; dra?: { allocated: number; capacity: number } }): string[] =>
    dra ? [String(e.dra?.capacity ?? 0), String(e.dra?.allocated ?? 0), String(e.allocated - (e.dra?.allocated ?? 0))] : [];
  const sourceHeads = dra ? ["DRA CAPACITY", "DRA ALLOCATED", "REQUESTS ALLOCATED"] : [];
  out.push(
    table([
      ["RESOURCE", "CAPACITY", "ALLOCATABLE", "UNAVAILABLE", "ALLOCATED", "FREE", ...sourceHeads],
      ...Object.entries(ledger.totals).map(([r, t]) => [
        r,
        String(t.capacity),
        String(t.allocatable),
        String(t.unavailable),
        String(t.allocated),
        String(t.free),
        ...sources(t),
      ]),
    ]),
  );
  const nodeRows = ledger.nodes.flatMap((n) =>
    Object.entries(n.resources).map(([r, e]) => [
      n.name,
      r,
      String(e.capacity),
      String(e.allocatable),
      String(e.allocated),
      String(e.free),
      String(n.pods.filter((p) => p.resources[r]).length),
      ...sources(e),
      flags([
        [n.stale, "stale"],
        [e.overCommitted, "over-committed"],
        [e.inactive, "inactive"],
        [n.missing === true, "node-missing"],
      ]),
    ]),
  );
  if (nodeRows.length > 0)
    out.push("", table([["NODE", "RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "FREE", "PODS", ...sourceHeads, "FLAGS"], ...nodeRows]));
  const usage = (title: string, m: Ledger["namespaces"]) => {
    const rows = Object.entries(m).flatMap(([k, per]) =>
      Object.entries(per).map(([r, u]) => [k, r, String(u.allocated), gpuSecondsAt(u, ledger.generatedAt).toFixed(0)]),
    );
    if (rows.length > 0) out.push("", table([[title, "RESOURCE", "ALLOCATED", "GPU-SECONDS"], ...rows]));
  };
  usage("NAMESPACE", ledger.namespaces);
  usage("JOB", ledger.jobs);
  if (ledger.kueue) out.push("", kueueTable(ledger.kueue));
  if (ledger.pending.length > 0) {
    out.push(
      "",
      table([
        ["PENDING POD", "RESOURCES", "FOR", "REASON"],
        ...ledger.pending.map((p) => [
          `${p.namespace}/${p.name}`,
          Object.entries(p.resources)
            .map(([r, n]) => `${r}=${n}`)
            .join(","),
          `${p.pendingSeconds}s`,
          p.message ? `${p.reason}: ${p.message}` : p.reason,
        ]),
      ]),
    );
  }
  return out.join("\n");
}

/**
 * The ledger's Kueue section: per ResourceFlavor and GPU resource, Kueue's nominal quota (with what its
 * ClusterQueues may borrow) beside the GPUs of the nodes its nodeLabels select, those in use there, and Kueue's
 * own usage and reservation. A flavor without GPU figures gets one row, so a flavor selecting no node shows.
 */
export function kueueTable(kueue: KueueLedger): string {
  if (kueue.flavors.length === 0) return "Kueue: no ResourceFlavors or ClusterQueues";
  const labels = (l: Record<string, string>): string =>
    Object.entries(l)
      .map(([k, v]) => `${k}=${v}`)
      .join(",") || "(every node)";
  const rows = kueue.flavors.flatMap((f) => {
    const common = (resource: string): string[] => [f.name, resource];
    const tail = [String(f.nodes), f.clusterQueues.join(",") || "-", labels(f.nodeLabels)];
    const resources = Object.entries(f.resources);
    const flagsOf = (over: boolean): string =>
      flags([
        [f.missing === true, "flavor-missing"],
        [!f.missing && f.nodes === 0, "no-nodes"],
        [over, "quota-over-physical"],
      ]);
    if (resources.length === 0) return [[...common("-"), "-", "-", "-", "-", "-", ...tail, flagsOf(false)]];
    return resources.map(([r, e]) => [
      ...common(r),
      describeQuota(e),
      String(e.physical),
      String(e.inUse),
      String(e.kueueUsage),
      String(e.kueueReserved),
      ...tail,
      flagsOf(e.quota > e.physical),
    ]);
  });
  return table([
    ["KUEUE FLAVOR", "RESOURCE", "QUOTA", "PHYSICAL", "IN USE", "KUEUE USAGE", "KUEUE RESERVED", "NODES", "CLUSTERQUEUES", "NODE LABELS", "FLAGS"],
    ...rows,
  ]);
}

/** The plan for `-o json`: the ledger writes without their texts (the ledger itself is there, once). */
export function planJson(plan: Plan): unknown {
  return {
    ...plan,
    ledgerWrites: plan.ledgerWrites.map((w) => (w.verb === "delete" ? w : { verb: w.verb, name: w.name, sha256: w.sha256, bytes: w.text.length })),
  };
}

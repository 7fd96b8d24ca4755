/**
 * Least privilege, derived from the code: the Kubernetes API calls each deployed component makes are found
 * by scanning the source, and every rendered manifest variant's RBAC must grant exactly those, nothing more.
 *
 * 1. Which component runs as which ServiceAccount: the workloads in the render (a container's args name the
 *    command, e.g. `serve` or `certs ensure`; its pod names the ServiceAccount).
 * 2. Which code a command reaches: its function in src/cli/commands/ (its entry in COMMANDS), the local
 *    functions it calls, and every module it imports from there on (type-only imports aside).
 * 3. Which calls that code makes: in each src/kube/*.ts reached, `const x = kc.makeApiClient(k8s.SomeApi)`
 *    gives the receivers, and `x.method(` the calls; METHODS below maps each to verb, group, resource and
 *    scope. A call with a namespace literal (`namespace: "kube-node-lease"`) is scoped to it; otherwise
 *    NAMESPACE gives the scope: Quartermaster's own namespace, or any namespace (a cluster-wide grant).
 * 4. Grants: Roles through RoleBindings (their namespace), ClusterRoles through ClusterRoleBindings (all
 *    namespaces) or RoleBindings (the binding's namespace).
 *
 * The failure messages name the call (file:line) that lacks a grant, and the grant no call uses.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, it } from "node:test";
import { COMMANDS } from "../../src/cli/command-list.js";
import { DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE } from "../../src/admission/claims.js";
import { CLUSTER_QUEUE, LOCAL_QUEUE, RESOURCE_FLAVOR } from "../../src/kueue/queues.js";
import { QUEUED_WORKLOAD_KINDS, TRAINER } from "../../src/core/job-shapes.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { JOBSET_KIND } from "../../src/membership/jobset.js";
import { labelScheme } from "../../src/kinds/index.js";
import { runtimeKind } from "../../src/membership/lookup.js";
import { ROOT, podSpec, render, variants, type Manifest } from "../fixtures/manifests.js";

const OWN = "quartermaster";
const ANY = "*";

type Target = { verb: string; group: string; resources: string[] };
const jobKinds = defaultPolicy().jobKinds;
/** `verb` on every job kind, one target per API group (Kubeflow v1 kinds, Trainer v2's TrainJob). */
const JOBS = (verb: string, kinds: ReadonlyArray<{ group: string; plural: string }> = jobKinds): Target[] =>
  [...new Set(kinds.map((k) => k.group))].map((group) => ({ verb, group, resources: kinds.filter((k) => k.group === group).map((k) => k.plural) }));
/**
 * What the webhook's one reader (src/kube/jobs.ts, `get` of any namespaced or cluster-scoped object) reads
 * besides the job kinds: a TrainJob's runtimes, a TensorFlow TrainJob pod's JobSet, the ResourceClaims and
 * templates pods name (DRA) and the DeviceClasses they name that the policy does not list, a DRA pod's batch Job
 * (src/admission/pod-job.ts), a queued job's Kueue LocalQueue, ClusterQueue and ResourceFlavors (src/admission/queue.ts).
 */
const READ_TOO = [
  ...TRAINER.runtimeKinds.map((kind) => runtimeKind({ kind, apiGroup: TRAINER.group })),
  JOBSET_KIND,
  QUEUED_WORKLOAD_KINDS[0]!,
  RESOURCE_CLAIM,
  RESOURCE_CLAIM_TEMPLATE,
  DEVICE_CLASS,
  LOCAL_QUEUE,
  CLUSTER_QUEUE,
  RESOURCE_FLAVOR,
];
/** Those of {@link READ_TOO} that are cluster-scoped (read with namespace "", `getClusterCustomObject`). */
const CLUSTER_SCOPED = new Set(["ClusterTrainingRuntime", CLUSTER_QUEUE.kind, RESOURCE_FLAVOR.kind, DEVICE_CLASS.kind]);
const core = (verb: string, resource: string): Target => ({ verb, group: "", resources: [resource] });
const g =
  (group: string) =>
  (verb: string, resource: string): Target => ({ verb, group, resources: [resource] });
const coordination = g("coordination.k8s.io");
const admission = g("admissionregistration.k8s.io");
const batch = g("batch");
const events = g("events.k8s.io");
const policyReports = (verb: string): Target => g("wgpolicyk8s.io")(verb, "policyreports");

/**
 * client-node `Api.method` → what RBAC must allow. `cluster: true`: a cluster-wide call (all namespaces or a
 * cluster-scoped kind). CustomObjectsApi serves the job kinds and PolicyReports (src/run/policy-reports.ts)
 * alike: a method both use maps to both.
 */
const ADOPTED = jobKinds.filter((k) => labelScheme(k).claimed);

/** Calls whose targets depend on the file: the webhook's one reader (src/kube/jobs.ts) reads more than jobs. */
const METHODS_IN: Record<string, typeof METHODS> = {
  // The reconcile pass lists jobs and, for the device ledger, DRA's ResourceSlices and ResourceClaims and Kueue's
  // ResourceFlavors and ClusterQueues.
  "src/kube/cluster.ts": {
    "CustomObjectsApi.listClusterCustomObject": [
      ...JOBS("list").map((t) => ({ ...t, cluster: true as const })),
      { verb: "list", group: "resource.k8s.io", resources: ["resourceslices", "resourceclaims"], cluster: true as const },
      // The ledger's section per Kueue ResourceFlavor (src/ledger/kueue-quota.ts).
      { verb: "list", group: "kueue.x-k8s.io", resources: ["resourceflavors", "clusterqueues"], cluster: true as const },
    ],
  },
  "src/kube/jobs.ts": {
    "CustomObjectsApi.getNamespacedCustomObject": [
      ...JOBS("get"),
      ...JOBS(
        "get",
        READ_TOO.filter((k) => !CLUSTER_SCOPED.has(k.kind)),
      ),
    ],
    "CustomObjectsApi.getClusterCustomObject": JOBS(
      "get",
      READ_TOO.filter((k) => CLUSTER_SCOPED.has(k.kind)),
    ).map((t) => ({ ...t, cluster: true as const })),
  },
};

const METHODS: Record<string, (Target & { cluster?: true }) | Array<Target & { cluster?: true }>> = {
  "CoreV1Api.listPodForAllNamespaces": { ...core("list", "pods"), cluster: true },
  "CoreV1Api.listServiceForAllNamespaces": { ...core("list", "services"), cluster: true },
  "CoreV1Api.listNode": { ...core("list", "nodes"), cluster: true },
  "CoreV1Api.listNamespace": { ...core("list", "namespaces"), cluster: true },
  "CoreV1Api.readNode": { ...core("get", "nodes"), cluster: true },
  "CoreV1Api.readNamespace": { ...core("get", "namespaces"), cluster: true },
  "CoreV1Api.listNamespacedPod": core("list", "pods"),
  "CoreV1Api.readNamespacedPod": core("get", "pods"),
  "CoreV1Api.patchNamespacedPod": core("patch", "pods"),
  "CoreV1Api.createNamespacedPod": core("create", "pods"),
  "CoreV1Api.deleteNamespacedPod": core("delete", "pods"),
  "CoreV1Api.createNamespacedService": core("create", "services"),
  "CoreV1Api.patchNamespacedService": core("patch", "services"),
  "CoreV1Api.deleteNamespacedService": core("delete", "services"),
  "CoreV1Api.listNamespacedConfigMap": core("list", "configmaps"),
  "CoreV1Api.readNamespacedConfigMap": core("get", "configmaps"),
  "CoreV1Api.createNamespacedConfigMap": core("create", "configmaps"),
  "CoreV1Api.replaceNamespacedConfigMap": core("update", "configmaps"),
  "CoreV1Api.patchNamespacedConfigMap": core("patch", "configmaps"),
  "CoreV1Api.deleteNamespacedConfigMap": core("delete", "configmaps"),
  "CoreV1Api.readNamespacedSecret": core("get", "secrets"),
  "CoreV1Api.createNamespacedSecret": core("create", "secrets"),
  "CoreV1Api.replaceNamespacedSecret": core("update", "secrets"),
  "CoreV1Api.createNamespacedEvent": core("create", "events"),
  "CoordinationV1Api.readNamespacedLease": coordination("get", "leases"),
  "CoordinationV1Api.listNamespacedLease": coordination("list", "leases"),
  "CoordinationV1Api.createNamespacedLease": coordination("create", "leases"),
  "CoordinationV1Api.replaceNamespacedLease": coordination("update", "leases"),
  "CustomObjectsApi.getNamespacedCustomObject": JOBS("get"),
  "CustomObjectsApi.listClusterCustomObject": [...JOBS("list").map((t) => ({ ...t, cluster: true as const })), { ...policyReports("list"), cluster: true }],
  // The resident reconciler reads one namespace's jobs again when it opts in (src/kube/projection.ts).
  "CustomObjectsApi.listNamespacedCustomObject": JOBS("list"),
  // Adoption's patches (a job's status, its finalizers): only kinds whose pods the reconciler adopts.
  "CustomObjectsApi.patchNamespacedCustomObject": JOBS("patch", ADOPTED),
  "CustomObjectsApi.patchNamespacedCustomObjectStatus": JOBS("patch", ADOPTED).map((t) => ({ ...t, resources: t.resources.map((r) => `${r}/status`) })),
  "CustomObjectsApi.deleteNamespacedCustomObject": [...JOBS("delete"), policyReports("delete")],
  "CustomObjectsApi.createNamespacedCustomObject": policyReports("create"),
  "CustomObjectsApi.replaceNamespacedCustomObject": policyReports("update"),
  "AdmissionregistrationV1Api.readMutatingWebhookConfiguration": { ...admission("get", "mutatingwebhookconfigurations"), cluster: true },
  "AdmissionregistrationV1Api.readValidatingWebhookConfiguration": { ...admission("get", "validatingwebhookconfigurations"), cluster: true },
  "AdmissionregistrationV1Api.patchMutatingWebhookConfiguration": { ...admission("patch", "mutatingwebhookconfigurations"), cluster: true },
  "AdmissionregistrationV1Api.patchValidatingWebhookConfiguration": { ...admission("patch", "validatingwebhookconfigurations"), cluster: true },
  "BatchV1Api.readNamespacedJob": batch("get", "jobs"),
  "EventsV1Api.createNamespacedEvent": events("create", "events"),
};

/**
 * Grants a ServiceAccount needs though no call names them, with the reason. `update` on a job kind's
 * `finalizers`: the OwnerReferencesPermissionEnforcement admission plugin requires it of whoever sets
 * `blockOwnerDeletion` on an ownerReference to that job (adoption, per-replica Services).
 * `list namespaces`: the pass lists namespaces to apply the scope (src/core/scope.ts); the call lands with the
 * reconciler's scope change (remove this entry once src/kube makes it, so the grant is checked like the rest).
 */
const IMPLICIT: Array<{ sa: string; verb: string; group: string; resource: string; why: string }> = [
  ...ADOPTED.map((k) => ({
    sa: "quartermaster-reconciler",
    verb: "update",
    group: k.group,
    resource: `${k.plural}/finalizers`,
    why: "blockOwnerDeletion under OwnerReferencesPermissionEnforcement",
  })),
  // `reconcile --watch` (src/run/watch.ts): client-node's makeInformer lists and watches; the scan sees makeApiClient calls only.
  ...[
    ...jobKinds.map((k) => ({ group: k.group, resource: k.plural })),
    { group: "", resource: "pods" },
    { group: "", resource: "services" },
    { group: "", resource: "namespaces" },
    // The node informer behind the reconciler's verdicts on blocked jobs (src/run/blocked.ts, issue 49).
    { group: "", resource: "nodes" },
    // Kueue's Workloads and queues behind the same verdicts (src/run/blocked-kueue.ts).
    ...["workloads", "localqueues", "clusterqueues"].map((resource) => ({ group: "kueue.x-k8s.io", resource })),
  ].map((r) => ({
    sa: "quartermaster-reconciler",
    verb: "watch",
    ...r,
    why: "informers of reconcile --watch (makeInformer: list, then watch)",
  })),
  // The reads for blocked jobs the caches cannot explain (src/run/blocked-follow-up.ts): paths built per job and kind.
  ...[
    { group: "", resource: "events" },
    { group: "apps", resource: "deployments" },
  ].map((r) => ({ sa: "quartermaster-reconciler", verb: "list", ...r, why: "the follow-up reads of reconcile --watch's verdicts" })),
  // The LISTs of the Kueue informers (src/run/blocked-kueue.ts): paths built per plural.
  ...["workloads", "localqueues"].map((resource) => ({
    sa: "quartermaster-reconciler",
    verb: "list",
    group: "kueue.x-k8s.io",
    resource,
    why: "the Kueue informers of reconcile --watch's verdicts (list, then watch)",
  })),
];

/** Namespaced calls without a namespace literal: in Quartermaster's own namespace, else in any namespace. */
const NAMESPACE: Record<string, string> = {
  secrets: OWN,
  configmaps: OWN,
  leases: OWN,
};

interface Call {
  where: string;
  api: string;
  verb: string;
  group: string;
  resource: string;
  /** Namespace, or ANY for cluster-wide / every namespace. */
  ns: string;
}

// ---- 2. the code a command reaches -------------------------------------------------------------------

const COMMANDS_DIR = join(ROOT, "src/cli/commands");

/** Top-level functions of a file by name, with their text. */
function functionsOf(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const starts = [...text.matchAll(/^(?:export )?(?:async )?function (\w+)/gm)];
  starts.forEach((m, i) => out.set(m[1]!, text.slice(m.index, starts[i + 1]?.index ?? text.length)));
  return out;
}

/** Top-level functions of the command modules (src/cli/commands/*.ts, one directory) by name, with their text. */
function commandFunctions(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of readdirSync(COMMANDS_DIR).filter((f) => f.endsWith(".ts"))) {
    for (const [name, text] of functionsOf(readFileSync(join(COMMANDS_DIR, file), "utf8"))) {
      if (out.has(name)) throw new Error(`function ${name} is defined twice in src/cli/commands/: give one another name`);
      out.set(name, text);
    }
  }
  return out;
}

/** The registry's entries: "serve" → serveCommand, "certs ensure" → certsEnsureCommand, ... (each `run`'s function name). */
function entryFunctions(): Map<string, string> {
  return new Map(COMMANDS.map((c) => [c.name, c.run.name]));
}

/** Relative runtime imports of a piece of code (static and dynamic; `import type` left out). */
function importsOf(code: string, fromDir: string): string[] {
  const specs = [
    ...[...code.matchAll(/^import (?!type\b)[^;]*?from "(\.[^"]+)"/gm)].map((m) => m[1]!),
    ...[...code.matchAll(/import\("(\.[^"]+)"\)/g)].map((m) => m[1]!),
  ];
  return specs.map((s) => resolve(fromDir, s.replace(/\.js$/, ".ts"))).filter((f) => existsSync(f));
}

/** The src/kube and src/run files a command's code reaches (the client, and the drivers that call it). */
function kubeFilesOf(command: string): string[] {
  const fns = commandFunctions();
  const entry = entryFunctions().get(command);
  if (!entry) throw new Error(`src/cli/commands/ registers no command "${command}"`);
  // The entry function and the local functions it calls.
  const local = new Set([entry]);
  for (const name of local)
    for (const [other, body] of fns) if (!local.has(other) && new RegExp(`\\b${other}\\(`).test(fns.get(name)!)) local.add(other) && void body;
  const files = new Set<string>();
  const queue = [...local].flatMap((name) => importsOf(fns.get(name)!, COMMANDS_DIR));
  while (queue.length > 0) {
    const f = queue.pop()!;
    if (files.has(f)) continue;
    files.add(f);
    queue.push(...importsOf(readFileSync(f, "utf8"), dirname(f)));
  }
  return [...files].filter((f) => /^src\/(kube|run)\//.test(relative(ROOT, f))).sort();
}

// ---- 3. the calls in a src/kube file ------------------------------------------------------------------

function callsIn(file: string): { calls: Call[]; unknown: string[] } {
  const text = readFileSync(file, "utf8");
  const rel = relative(ROOT, file);
  // `const core = kc.makeApiClient(k8s.CoreV1Api)`, or a property of an object of clients (`core: kc.makeApiClient(…)`).
  const receivers = new Map(
    [...text.matchAll(/(?:(?:const|let)\s+(\w+)\s*=|(\w+)\s*:)\s*\w+\.makeApiClient\((?:\w+\.)?(\w+)\)/g)].map((m) => [(m[1] ?? m[2])!, m[3]!]),
  );
  const calls: Call[] = [];
  const unknown: string[] = [];
  if (receivers.size === 0) return { calls, unknown };
  const re = new RegExp(`\\b(${[...receivers.keys()].join("|")})\\.(\\w+)\\(`, "g");
  for (const m of text.matchAll(re)) {
    const api = `${receivers.get(m[1]!)}.${m[2]}`;
    const where = `${rel}:${text.slice(0, m.index).split("\n").length}`;
    const mapped = METHODS_IN[rel]?.[api] ?? METHODS[api];
    if (!mapped) {
      unknown.push(`${where} calls ${api}, which METHODS in test/e2e/manifests-rbac.test.ts does not map: add its verb, group, resource and scope`);
      continue;
    }
    const literal = /namespace:\s*"([a-z0-9-]+)"/.exec(text.slice(m.index, m.index + 300).split(/\)\s*[;,)]/)[0]!)?.[1];
    for (const target of [mapped].flat()) {
      for (const resource of target.resources) {
        const ns = target.cluster ? ANY : (literal ?? NAMESPACE[resource] ?? ANY);
        calls.push({ where, api, verb: target.verb, group: target.group, resource, ns });
      }
    }
  }
  return { calls, unknown };
}

// ---- 4. the grants of a ServiceAccount in a render ----------------------------------------------------

interface Grant {
  from: string;
  verb: string;
  group: string;
  resource: string;
  ns: string;
  names?: string[];
}

function grantsOf(objects: Manifest[], sa: { namespace: string; name: string }): Grant[] {
  const find = (kind: string, name: string, ns?: string): Manifest | undefined =>
    objects.find((o) => o.kind === kind && o.metadata.name === name && (ns === undefined || o.metadata.namespace === ns));
  const grants: Grant[] = [];
  for (const b of objects.filter((o) => o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding")) {
    if (!(b.subjects ?? []).some((s: Record<string, string>) => s.kind === "ServiceAccount" && s.name === sa.name && s.namespace === sa.namespace)) continue;
    const ns = b.kind === "ClusterRoleBinding" ? ANY : b.metadata.namespace!;
    const role = find(b.roleRef.kind, b.roleRef.name, b.roleRef.kind === "Role" ? ns : undefined);
    if (!role) continue;
    for (const rule of role.rules ?? []) {
      for (const group of rule.apiGroups ?? [])
        for (const resource of rule.resources ?? [])
          for (const verb of rule.verbs ?? []) {
            grants.push({
              from: `${role.kind} ${role.metadata.name}${ns === ANY ? " (cluster-wide)" : ` (in ${ns})`}`,
              verb,
              group,
              resource,
              ns,
              names: rule.resourceNames,
            });
          }
    }
  }
  return grants;
}

const covers = (g: Grant, c: Call): boolean =>
  (g.verb === c.verb || g.verb === "*") && g.group === c.group && g.resource === c.resource && (g.ns === ANY || g.ns === c.ns);
/** A grant is needed when some call needs exactly its scope: a cluster-wide grant only for a call in any namespace. */
const needs = (c: Call, g: Grant): boolean => covers(g, c) && (g.ns === ANY ? c.ns === ANY : true);

const describeCall = (c: Call): string => `${c.verb} ${c.group || "core"}/${c.resource} ${c.ns === ANY ? "cluster-wide" : `in ${c.ns}`}`;

// ---- the checks ---------------------------------------------------------------------------------------

describe("RBAC grants exactly the API calls the code makes", () => {
  it("the scanner finds the calls of known code (so the checks below can fail)", () => {
    const { calls } = callsIn(join(ROOT, "src/kube/jobs.ts"));
    assert.ok(
      calls.some((c) => c.verb === "get" && c.resource === "tfjobs" && c.ns === ANY),
      JSON.stringify(calls),
    );
    assert.deepEqual(
      kubeFilesOf("certs ensure").map((f) => relative(ROOT, f)),
      ["src/kube/certs.ts", "src/kube/client.ts"],
    );
    const lease = callsIn(join(ROOT, "src/run/lease.ts")).calls.find((c) => c.resource === "leases");
    assert.equal(lease?.ns, OWN);
  });

  for (const v of variants()) {
    it(`${v.name}: every call has a grant and every grant a call`, () => {
      const objects = render(v.dir);
      /** ServiceAccount → the commands its workloads run. */
      const commands = new Map<string, Set<string>>();
      for (const o of objects) {
        const spec = podSpec(o);
        if (!spec) continue;
        const sa = `${o.metadata.namespace}/${spec.serviceAccountName}`;
        for (const c of spec.containers ?? []) {
          const args: string[] = c.args ?? [];
          const command = args[0] === "certs" || args[0] === "policy" ? `${args[0]} ${args[1]}` : args[0]!;
          commands.set(sa, (commands.get(sa) ?? new Set()).add(command));
        }
      }
      const problems: string[] = [];
      for (const [sa, cmds] of commands) {
        const [namespace, name] = sa.split("/") as [string, string];
        const calls: Call[] = [];
        for (const cmd of cmds) {
          for (const file of kubeFilesOf(cmd)) {
            const found = callsIn(file);
            calls.push(...found.calls);
            problems.push(...found.unknown.map((u) => `${sa} (${cmd}): ${u}`));
          }
        }
        const grants = grantsOf(objects, { namespace, name });
        const who = `ServiceAccount ${sa} (${[...cmds].join(", ")})`;
        for (const c of calls) {
          if (!grants.some((g) => covers(g, c)))
            problems.push(`${who}: ${c.where} ${c.api} needs ${describeCall(c)}, which no Role/ClusterRole bound to it grants`);
        }
        for (const i of IMPLICIT.filter((i) => i.sa === name && cmds.has("reconcile"))) {
          if (!grants.some((g) => g.verb === i.verb && g.group === i.group && g.resource === i.resource && g.ns === ANY))
            problems.push(`${who}: lacks ${i.verb} ${i.group || "core"}/${i.resource} cluster-wide (${i.why})`);
        }
        for (const g of grants) {
          if (calls.some((c) => needs(c, g))) continue;
          if (IMPLICIT.some((i) => i.sa === name && i.verb === g.verb && i.group === g.group && i.resource === g.resource)) continue;
          const narrower = calls.find((c) => covers(g, c));
          problems.push(
            narrower
              ? `${who}: ${g.from} grants ${g.verb} ${g.group || "core"}/${g.resource} cluster-wide, but the code needs it only in ${narrower.ns} (${narrower.where}): use a Role there`
              : `${who}: ${g.from} grants ${g.verb} ${g.group || "core"}/${g.resource}, which no call in the code needs: remove it`,
          );
        }
      }
      assert.deepEqual([...new Set(problems)], []);
    });
  }
});

/**
 * @module
 * What each ServiceAccount must be allowed to do for the code to work, and the findings when RBAC says
 * otherwise. The list mirrors the API calls in src/kube: keep it in step when a call is added there.
 * The doctor asks the apiserver with SubjectAccessReviews (src/run/doctor.ts), so the answer comes from
 * the cluster's real authorizer rather than from reading Roles.
 */
import { DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE } from "../admission/claims.js";
import { CLUSTER_QUEUE, LOCAL_QUEUE, RESOURCE_FLAVOR } from "../kueue/queues.js";
import type { Policy } from "../policy/types.js";
import { JOBSET_KIND } from "../membership/jobset.js";
import { LEDGER_INDEX_NAME, shardName } from "../ledger/shards.js";
import type { AccessCheck, DoctorFinding, Severity } from "./types.js";
import { isUnreadable, worst, type Unreadable } from "./types.js";
import { TRAINER } from "../core/job-shapes.js";
import { jobShape, labelScheme } from "../kinds/index.js";
import { runtimeKind } from "../membership/lookup.js";

export const WEBHOOK_SERVICE_ACCOUNT = "quartermaster-webhook";
export const RECONCILER_SERVICE_ACCOUNT = "quartermaster-reconciler";

export type AccessRequirement = Omit<AccessCheck, "allowed">;

/** Every permission the webhook and the reconciler need, for `policy`'s job kinds, in `namespace`. */
export function requiredAccess(
  policy: Pick<Policy, "jobKinds" | "clusterSpec" | "reconciler"> & { gpu?: Pick<Policy["gpu"], "deviceClasses"> },
  namespace: string,
): AccessRequirement[] {
  const webhook = `${namespace}/${WEBHOOK_SERVICE_ACCOUNT}`;
  const reconciler = `${namespace}/${RECONCILER_SERVICE_ACCOUNT}`;
  const kinds = [...new Map(policy.jobKinds.map((k) => [`${k.group}/${k.plural}`, k])).values()];
  const out: AccessRequirement[] = [];
  const need: Need = (serviceAccount, verbs, r) => {
    for (const verb of verbs)
      out.push({
        serviceAccount,
        verb,
        group: r.group,
        resource: r.resource,
        namespace: r.namespace ?? "",
        ...(r.name ? { name: r.name } : {}),
        ifDenied: r.ifDenied,
        why: r.why,
      });
  };
  webhookAccess(need, policy, kinds, webhook, namespace);
  reconcilerPassAccess(need, policy, kinds, reconciler);
  jobControllerAccess(need, kinds, reconciler);
  reconcilerStoreAccess(need, policy, reconciler, namespace, out);
  return out;
}

function describe(a: AccessRequirement): string {
  const resource = a.group ? `${a.resource}.${a.group}` : a.resource;
  return `${a.verb} ${resource}${a.name ? `/${a.name}` : ""}${a.namespace ? ` in ${a.namespace}` : ""} (${a.why})`;
}

export function checkAccess(access: AccessCheck[] | Unreadable): DoctorFinding[] {
  if (isUnreadable(access)) {
    return [
      {
        check: "rbac",
        severity: "warning",
        subject: "ServiceAccounts",
        message: `not checked: ${access.error}`,
        fix: "run doctor as a user allowed to create subjectaccessreviews.authorization.k8s.io",
      },
    ];
  }
  const bySa = new Map<string, AccessCheck[]>();
  for (const a of access) bySa.set(a.serviceAccount, [...(bySa.get(a.serviceAccount) ?? []), a]);
  return [...bySa].map(([sa, checks]): DoctorFinding => {
    const denied = checks.filter((c) => !c.mustNot && !c.allowed);
    const excess = checks.filter((c) => c.mustNot && c.allowed);
    if (denied.length === 0 && excess.length === 0) {
      return {
        check: "rbac",
        severity: "ok",
        subject: `ServiceAccount ${sa}`,
        message: `allowed everything it needs and nothing it must not (${checks.length} checks)`,
        fix: "",
      };
    }
    const severity = worst([...denied, ...excess].map((d) => d.ifDenied));
    const parts = [
      ...(denied.length > 0 ? [`not allowed to ${denied.map(describe).join("; ")}`] : []),
      ...(excess.length > 0 ? [`allowed to ${excess.map(describe).join("; ")}, which it must not be`] : []),
    ];
    return {
      check: "rbac",
      severity,
      subject: `ServiceAccount ${sa}`,
      message: parts.join("; "),
      fix: `apply the Roles and bindings of manifests/base/rbac.yaml, reconciler.yaml, reconciler-ledger-rbac.yaml and reconciler-policyreports-rbac.yaml (kubectl apply -k manifests/base)${excess.length > 0 ? "; remove other grants bound to it" : ""}`,
    };
  });
}

/** One permission (`verbs` on one resource) that `serviceAccount` needs; `namespace` "" (or absent) is every namespace. */

type Need = (
  serviceAccount: string,
  verbs: string[],
  r: { group: string; resource: string; namespace?: string; ifDenied: Severity; why: string; name?: string },
) => void;

/** One reconcile pass: adoption, clean-up, the ledger's reads (src/kube/cluster.ts, ledger.ts, lease.ts). */
function reconcilerPassAccess(need: Need, policy: Pick<Policy, "reconciler">, kinds: Policy["jobKinds"], reconciler: string): void {
  // src/kube/cluster.ts, ledger.ts, lease.ts: one reconcile pass.
  for (const k of kinds)
    need(reconciler, ["get", "list", "delete"], { group: k.group, resource: k.plural, ifDenied: "warning", why: `adopt for and clean up ${k.kind}s` });
  // Adoption and per-replica Services set blockOwnerDeletion on their ownerReference to the job, which the
  // OwnerReferencesPermissionEnforcement admission plugin allows only with update on the job's finalizers.
  for (const k of kinds.filter((k) => labelScheme(k).claimed))
    need(reconciler, ["update"], {
      group: k.group,
      resource: `${k.plural}/finalizers`,
      ifDenied: "warning",
      why: `adoption with blockOwnerDeletion for ${k.kind}s`,
    });
  need(reconciler, ["list"], { group: "", resource: "namespaces", ifDenied: "warning", why: "the namespace scope of a pass" });
  need(reconciler, ["list", "patch", "delete"], { group: "", resource: "pods", ifDenied: "warning", why: "adoption, CleanPodPolicy, the ledger" });
  need(reconciler, policy.reconciler.perReplicaServices ? ["list", "create", "patch", "delete"] : ["list", "patch", "delete"], {
    group: "",
    resource: "services",
    ifDenied: "warning",
    why: "per-replica Services, adoption",
  });
  need(reconciler, ["list"], { group: "", resource: "nodes", ifDenied: "warning", why: "the ledger's node inventory" });
  need(reconciler, ["list"], { group: "resource.k8s.io", resource: "resourceslices", ifDenied: "warning", why: "the ledger's DRA devices per node" });
  need(reconciler, ["list"], { group: "resource.k8s.io", resource: "resourceclaims", ifDenied: "warning", why: "the ledger's DRA allocations" });
  for (const resource of ["resourceflavors", "clusterqueues"])
    need(reconciler, ["list"], { group: "kueue.x-k8s.io", resource, ifDenied: "warning", why: "the ledger per Kueue ResourceFlavor" });
}

/** The job controller and `reconcile --watch`'s informers. */
function jobControllerAccess(need: Need, kinds: Policy["jobKinds"], reconciler: string): void {
  // The job controller (src/run/job-controller.ts, src/run/watch.ts) for kinds Quartermaster runs (Caffe2Job
  // by default; any kind may be marked so): informers, replica pods, the restart counter and the status.
  // Patches of a job and its status come with adoption and the job controller: not for kinds whose pods the
  // reconciler never adopts (a TrainJob's pods belong to its JobSet's Jobs; the Trainer writes its status).
  for (const k of kinds)
    need(reconciler, labelScheme(k).claimed ? ["watch", "patch"] : ["watch"], {
      group: k.group,
      resource: k.plural,
      ifDenied: "warning",
      why: `the job controller for ${k.kind}s (informers, restart counter)`,
    });
  for (const k of kinds.filter((k) => labelScheme(k).claimed))
    need(reconciler, ["patch"], { group: k.group, resource: `${k.plural}/status`, ifDenied: "warning", why: `the job controller writes ${k.kind}s' status` });
  need(reconciler, ["watch"], { group: "", resource: "namespaces", ifDenied: "warning", why: "the job controller's namespace informer (reconcile --watch)" });
  need(reconciler, ["watch", "create"], { group: "", resource: "pods", ifDenied: "warning", why: "the job controller creates replica pods and watches them" });
  need(reconciler, ["watch"], { group: "", resource: "services", ifDenied: "warning", why: "the job controller's Service informer (reconcile --watch)" });
  need(reconciler, ["watch"], {
    group: "",
    resource: "nodes",
    ifDenied: "warning",
    why: "the verdicts on blocked jobs: the node informer (reconcile --watch)",
  });
  need(reconciler, ["list"], {
    group: "",
    resource: "events",
    ifDenied: "warning",
    why: "the verdicts on blocked jobs: the Events on a job (reconcile --watch)",
  });
  need(reconciler, ["list"], {
    group: "apps",
    resource: "deployments",
    ifDenied: "warning",
    why: "the verdicts on blocked jobs: whether a job's controller runs (reconcile --watch)",
  });
  for (const resource of ["workloads", "localqueues", "clusterqueues"])
    need(reconciler, ["list", "watch"], {
      group: "kueue.x-k8s.io",
      resource,
      ifDenied: "warning",
      why: "the verdicts on blocked jobs: Kueue's Workloads and queues (reconcile --watch)",
    });
}

/** What the reconciler writes in its own namespace and elsewhere (scope, Events, Lease, ledger, PolicyReports), and what it must not. */
function reconcilerStoreAccess(need: Need, policy: Pick<Policy, "reconciler">, reconciler: string, namespace: string, out: AccessRequirement[]): void {
  need(reconciler, ["list"], { group: "", resource: "namespaces", ifDenied: "warning", why: "the scope: a pass writes only in namespaces that opted in" });
  if (policy.reconciler.events) need(reconciler, ["create"], { group: "", resource: "events", ifDenied: "warning", why: "Events on jobs" });
  need(reconciler, ["get", "create", "update"], { group: "coordination.k8s.io", resource: "leases", namespace, ifDenied: "warning", why: "the pass Lease" });
  need(reconciler, ["list", "create"], { group: "", resource: "configmaps", namespace, ifDenied: "warning", why: "the ledger's ConfigMaps" });
  // Update and delete are granted by name (manifests/base/reconciler-ledger-rbac.yaml): the index and a shard stand for all.
  for (const name of [LEDGER_INDEX_NAME, shardName(0)])
    need(reconciler, ["update", "delete"], { group: "", resource: "configmaps", namespace, ifDenied: "warning", why: "the ledger's ConfigMaps", name: name });
  need(reconciler, ["list"], {
    group: "coordination.k8s.io",
    resource: "leases",
    namespace: "kube-node-lease",
    ifDenied: "warning",
    why: "node staleness in the ledger",
  });
  // src/run/policy-reports.ts, for reconciler.policyReports (manifests/base/reconciler-policyreports-rbac.yaml, always
  // installed, so checked whether the policy turns the reports on or not: turning them on needs no RBAC change).
  need(reconciler, ["list", "create"], {
    group: "wgpolicyk8s.io",
    resource: "policyreports",
    ifDenied: "warning",
    why: "PolicyReports (reconciler.policyReports)",
  });
  need(reconciler, ["update", "delete"], {
    group: "wgpolicyk8s.io",
    resource: "policyreports",
    ifDenied: "warning",
    why: "PolicyReports (reconciler.policyReports)",
    name: "quartermaster",
  });
  // Least privilege the design relies on: the reconciler never changes the policy the webhook enforces (an
  // install from before the ledger's grant was by name could). The policy ConfigMap's name is hashed; any
  // name outside the ledger's answers the same.
  for (const verb of ["update", "patch", "delete"]) {
    out.push({
      serviceAccount: reconciler,
      verb,
      group: "",
      resource: "configmaps",
      namespace,
      name: "quartermaster-policy",
      ifDenied: "warning",
      why: "the webhook's policy ConfigMap",
      mustNot: true,
    });
  }
}

/** The webhook's permissions: its reads on the admission path and in the background, and its Events. */
function webhookAccess(
  need: Need,
  policy: Pick<Policy, "jobKinds" | "clusterSpec"> & { gpu?: Pick<Policy["gpu"], "deviceClasses"> },
  kinds: Policy["jobKinds"],
  webhook: string,
  namespace: string,
): void {
  // Without the job GET a pod gets no cluster spec (warn), or is refused (deny).
  const lookup: Severity = policy.clusterSpec.onJobLookupFailure === "deny" ? "critical" : "warning";
  // src/kube/jobs.ts (job lookup) and src/run/capacity.ts (the ledger index, read in the background).
  for (const k of kinds) need(webhook, ["get"], { group: k.group, resource: k.plural, ifDenied: lookup, why: `job lookup for ${k.kind} pods` });
  // A TrainJob's runtime (`readRuntime` in src/membership/lookup.ts), read by /validate/jobs.
  for (const k of kinds.filter((k) => jobShape(k).layout === "runtime"))
    for (const runtime of TRAINER.runtimeKinds)
      need(webhook, ["get"], {
        group: TRAINER.group,
        resource: runtimeKind({ kind: runtime, apiGroup: TRAINER.group }).plural,
        ifDenied: lookup,
        why: `the runtime of ${k.kind}s`,
      });
  // A TensorFlow TrainJob pod's JobSet, for its TF_CONFIG (webhooks/mutate-pods.ts).
  if (kinds.some((k) => jobShape(k).layout === "runtime"))
    need(webhook, ["get"], {
      group: JOBSET_KIND.group,
      resource: JOBSET_KIND.plural,
      ifDenied: "warning",
      why: "TF_CONFIG for TensorFlow TrainJob pods (their JobSet)",
    });
  // The ResourceClaims and templates pods and job replicas name (src/admission/claims.ts): without them, GPUs
  // asked for through DRA cannot be counted and such pods are refused (/validate/pods fails closed).
  if ((policy.gpu?.deviceClasses.length ?? 0) > 0) {
    for (const k of [RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE])
      need(webhook, ["get"], { group: k.group, resource: k.plural, ifDenied: "critical", why: `GPUs asked for through ${k.kind}s (DRA)` });
    // Under a GPU cap, the DeviceClasses claims name that the policy does not list (what they select); unreadable,
    // claims of them are refused (gpu-unknown), NICs included.
    need(webhook, ["get"], {
      group: DEVICE_CLASS.group,
      resource: DEVICE_CLASS.plural,
      ifDenied: "critical",
      why: "claims of DeviceClasses the policy does not list (whether they select GPUs)",
    });
    // A DRA pod's batch Job (and that Job's JobSet, above), judged again with its claims (src/admission/pod-job.ts);
    // unreadable, such pods are refused under a per-job GPU cap (gpu-unknown).
    need(webhook, ["get"], { group: "batch", resource: "jobs", ifDenied: "critical", why: "the job of a DRA pod of a batch Job, under a per-job GPU cap" });
  }
  // Kueue (src/admission/queue.ts): a queued job's LocalQueue, ClusterQueue and flavors, read at CREATE for
  // queue-capacity; without them the rule is skipped with a warning. Harmless where Kueue is not installed.
  for (const k of [LOCAL_QUEUE, CLUSTER_QUEUE, RESOURCE_FLAVOR])
    need(webhook, ["get"], { group: k.group, resource: k.plural, ifDenied: "warning", why: `queue-capacity for queued jobs (Kueue ${k.kind}s)` });
  // src/kube/events.ts: an Event on a job whose Kueue admission UPDATE /validate/jobs refused.
  need(webhook, ["create"], { group: "", resource: "events", ifDenied: "warning", why: "an Event on a job whose Kueue admission is refused" });
  need(webhook, ["get"], {
    group: "",
    resource: "configmaps",
    namespace,
    ifDenied: "warning",
    why: "the capacity rule reads the ledger index",
    name: LEDGER_INDEX_NAME,
  });
}

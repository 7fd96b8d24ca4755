/**
 * @module
 * Which parts of a job's pod templates the policy does not allow the job controller to create (issue 29,
 * item 6). Pure: `(template, namespace, policy) → violations`, each with its field path.
 *
 * Why: the job controller (`job-controller.ts`) creates pods from a job's templates with its own
 * ServiceAccount. Without this check a user allowed to create Caffe2Jobs but not pods gets any pod Pod
 * Security Admission lets through in the namespace: privileged containers, the node's namespaces, or a
 * ServiceAccount other than the one every pod of the namespace may use (and its token and RBAC). RBAC cannot
 * stop it: the pod is created by the controller, not by the user.
 *
 * DECIDE: what is checked is what the issue names, grouped as Pod Security Standards "baseline" groups them:
 * - **privileged** (`reconciler.allowedTemplates.privileged`): `securityContext.privileged: true` on a
 *   container or an init container (ephemeral containers cannot be set at pod creation, the apiserver refuses them);
 * - **host namespaces** (`reconciler.allowedTemplates.hostNamespaces`): `hostNetwork`, `hostPID`, `hostIPC`
 *   set to true;
 * - **ServiceAccounts** (`reconciler.allowedTemplates.serviceAccounts`): `serviceAccountName`, and the
 *   deprecated `serviceAccount` the apiserver copies into it when it is unset (else checking only the first
 *   is bypassed by setting the second). Unset, empty or `default` is always allowed: every pod of the
 *   namespace may run as `default`.
 * The other baseline items (hostPath volumes, hostPorts, added capabilities, AppArmor/SELinux/seccomp,
 * Windows HostProcess, sysctls, /proc mount) are not checked here: they stay with Pod Security Admission at
 * the namespace. A value that is not exactly `true` (e.g. the string "true", which a CRD keeping unknown
 * fields would store) is not a violation: the apiserver refuses such a pod at create.
 */
import { isObject } from "../core/object.js";
import type { KubeObject } from "../core/kube.js";
import type { AllowedTemplates, JobKind } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";

/** What the policy allows when it says nothing (`reconciler.allowedTemplates`'s schema defaults). */
export const DEFAULT_ALLOWED_TEMPLATES: Readonly<AllowedTemplates> = Object.freeze({
  privileged: false,
  hostNamespaces: false,
  serviceAccounts: Object.freeze([]),
});

export interface Violation {
  /** The field, from the job's root: `spec.replicaSpecs.template.spec.hostNetwork`. */
  path: string;
  /** What is refused and which setting would allow it. */
  what: string;
}

const HOST_NAMESPACES = ["hostNetwork", "hostPID", "hostIPC"] as const;

/** Whether the ServiceAccount `name` may be used in `namespace`: `default`, `<name>` or `<namespace>/<name>` listed. */
export function serviceAccountAllowed(name: string, namespace: string, allowed: AllowedTemplates): boolean {
  if (name === "" || name === "default") return true;
  return allowed.serviceAccounts.includes(name) || allowed.serviceAccounts.includes(`${namespace}/${name}`);
}

/**
 * Every violation of one pod template (`{metadata, spec}`) at `at` (its path from the job's root), in field
 * order: host namespaces, ServiceAccounts, then containers and init containers.
 */
export function templateViolations(template: unknown, namespace: string, allowed: AllowedTemplates, at = "template"): Violation[] {
  const out: Violation[] = [];
  const spec = isObject(template) && isObject(template.spec) ? template.spec : undefined;
  if (!spec) return out;
  if (!allowed.hostNamespaces) {
    for (const f of HOST_NAMESPACES) {
      if (spec[f] === true)
        out.push({ path: `${at}.spec.${f}`, what: `the node's ${f.slice(4)} namespace (reconciler.allowedTemplates.hostNamespaces is false)` });
    }
  }
  for (const f of ["serviceAccountName", "serviceAccount"] as const) {
    const sa = spec[f];
    if (typeof sa === "string" && !serviceAccountAllowed(sa, namespace, allowed)) {
      out.push({
        path: `${at}.spec.${f}`,
        what: `ServiceAccount ${JSON.stringify(sa)} (reconciler.allowedTemplates.serviceAccounts allows ${allowedAccounts(allowed)})`,
      });
    }
  }
  if (!allowed.privileged) {
    for (const list of ["containers", "initContainers"] as const) {
      const cs = spec[list];
      if (!Array.isArray(cs)) continue;
      cs.forEach((c, i) => {
        if (isObject(c) && isObject(c.securityContext) && c.securityContext.privileged === true) {
          const name = typeof c.name === "string" ? ` ${JSON.stringify(c.name)}` : "";
          out.push({
            path: `${at}.spec.${list}[${i}].securityContext.privileged`,
            what: `privileged container${name} (reconciler.allowedTemplates.privileged is false)`,
          });
        }
      });
    }
  }
  return out;
}

const allowedAccounts = (allowed: AllowedTemplates): string => ["default", ...allowed.serviceAccounts].map((s) => JSON.stringify(s)).join(", ");

/**
 * Every violation of every replica template of `job`, paths from the job's root: `spec.replicaSpecs.template…`
 * for Caffe2's single pool, `spec.<field>.<Type>.template…` for the Kubeflow kinds.
 */
export function jobTemplateViolations(job: KubeObject, kind: JobKind, allowed: AllowedTemplates): Violation[] {
  const namespace = String((job.metadata as { namespace?: string } | undefined)?.namespace ?? "");
  const out: Violation[] = [];
  for (const { spec, templateField } of jobShape(kind).replicas(job, kind)) out.push(...templateViolations(spec.template, namespace, allowed, templateField));
  return out;
}

/** The violations as one line each, `path: what`, for a condition's or an Event's message. */
export function describeViolations(violations: readonly Violation[]): string {
  return violations.map((v) => `${v.path}: ${v.what}`).join("; ");
}

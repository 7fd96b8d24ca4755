/**
 * @module
 * The reconciler's writes confined by the apiserver: a ValidatingAdmissionPolicy bound to the reconciler's
 * ServiceAccount that refuses its writes (pods, Services, Events, its job kinds, PolicyReports) in every
 * namespace outside Quartermaster's scope. RBAC cannot say this: the reconciler needs a ClusterRole for those
 * resources (jobs live in any namespace that opts in, and namespaces opt in after install), so without this
 * policy a bug in the code's own scope check, or a stolen token, could create, patch or delete pods and
 * Services in kube-system. The scope is src/core/scope.ts's, the same definition the webhooks' namespaceSelector
 * is rendered from: the opt-in label set to "true", and none of the protected namespaces (the system ones
 * and Quartermaster's own, where the reconciler writes only its Lease and ledger ConfigMaps, which a
 * namespaced Role already confines).
 *
 * manifests/base/reconciler-confinement.yaml and the chart's template are this render (`npm run generate`;
 * a unit test fails when they differ). ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1)
 * since Kubernetes 1.30, the chart's lowest version.
 */
import type { Policy } from "../policy/types.js";
import { namespaceScope, type NamespaceScope } from "../core/scope.js";
import { RECONCILER_SERVICE_ACCOUNT_NAME } from "./rbac.js";
import { yamlStream } from "./yaml.js";

export const CONFINEMENT_POLICY_NAME = "quartermaster-reconciler-scope";

/** The username the apiserver gives the reconciler's ServiceAccount token. */
export function reconcilerUsername(namespace: string): string {
  return `system:serviceaccount:${namespace}:${RECONCILER_SERVICE_ACCOUNT_NAME}`;
}

/** A CEL string literal (single-quoted; the names here are label keys and DNS names, escaped all the same). */
const celString = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/**
 * The CEL condition "the request's namespace is in scope", over the admission's `namespaceObject` (null for
 * cluster-scoped requests: never in scope). Labels are read with `in` first, so a namespace without them
 * evaluates to false rather than to an error.
 */
export function scopeExpression(scope: NamespaceScope): string {
  const label = celString(scope.optInLabel);
  return [
    "namespaceObject != null",
    `!(namespaceObject.metadata.name in [${scope.excluded.map(celString).join(", ")}])`,
    "has(namespaceObject.metadata.labels)",
    `${label} in namespaceObject.metadata.labels`,
    `namespaceObject.metadata.labels[${label}] == 'true'`,
  ].join(" && ");
}

/** The resources the reconciler writes outside its own namespace, by API group (subresources included). */
function writtenResources(policy: Pick<Policy, "jobKinds">): Array<{ apiGroups: string[]; resources: string[] }> {
  const jobGroups = new Map<string, string[]>();
  for (const k of policy.jobKinds) jobGroups.set(k.group, [...(jobGroups.get(k.group) ?? []), k.plural, `${k.plural}/status`]);
  return [
    { apiGroups: [""], resources: ["pods", "services", "events"] },
    ...[...jobGroups].map(([group, resources]) => ({ apiGroups: [group], resources })),
    { apiGroups: ["wgpolicyk8s.io"], resources: ["policyreports"] },
  ];
}

/** The policy and its binding, for an installation in `namespace`. */
export function renderReconcilerConfinement(policy: Pick<Policy, "jobKinds">, namespace = "quartermaster"): [Record<string, unknown>, Record<string, unknown>] {
  const scope = namespaceScope(namespace);
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: CONFINEMENT_POLICY_NAME },
      spec: {
        // An error (none is expected: every access is guarded) refuses the write: this policy confines.
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: writtenResources(policy).map((r) => ({ ...r, apiVersions: ["*"], operations: ["CREATE", "UPDATE", "DELETE"] })),
        },
        // Only the reconciler's own requests are judged; everyone else's pass untouched.
        matchConditions: [{ name: "is-the-reconciler", expression: `request.userInfo.username == ${celString(reconcilerUsername(namespace))}` }],
        validations: [
          {
            expression: scopeExpression(scope),
            messageExpression:
              `'${RECONCILER_SERVICE_ACCOUNT_NAME} may write only in namespaces opted in to Quartermaster ` +
              `(label ${scope.optInLabel}=true; never ${scope.excluded.join(", ")}): ' + ` +
              `(request.namespace == '' ? 'a cluster-scoped object' : 'namespace ' + request.namespace)`,
            reason: "Forbidden",
          },
        ],
      },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: CONFINEMENT_POLICY_NAME },
      spec: { policyName: CONFINEMENT_POLICY_NAME, validationActions: ["Deny"] },
    },
  ];
}

const HEADER = [
  " Generated by `npm run generate` from src/core/scope.ts and the built-in policy's job kinds (src/manifests/confinement.ts); do not edit.",
  " The reconciler's writes confined by the apiserver: its ServiceAccount may create, update and delete pods, Services,",
  " Events, job kinds and PolicyReports only in namespaces in Quartermaster's scope (RBAC needs a ClusterRole for them).",
  " The username names the namespace `quartermaster`; for another, render it with `quartermaster manifests confinement",
  " --namespace N` (as `manifests webhooks` for the webhook configurations), or use the chart.",
].join("\n");

export async function reconcilerConfinementYaml(policy: Policy, namespace?: string): Promise<string> {
  return yamlStream(renderReconcilerConfinement(policy, namespace), HEADER, { maxFlowItems: 7 });
}

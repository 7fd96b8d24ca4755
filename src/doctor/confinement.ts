/**
 * @module
 * Is the reconciler confined by the apiserver? The ValidatingAdmissionPolicy `quartermaster-reconciler-scope` and its
 * binding (src/manifests/confinement.ts) refuse the reconciler's writes outside the opted-in namespaces. Without them
 * (an install from before they existed, `reconciler.confinement.enabled=false`, a cluster without the API) only the
 * reconciler's own code keeps it out of kube-system. The installed policy is compared with this version's render on
 * what decides (who is judged, which writes, the expression), not byte for byte: the apiserver adds its defaults.
 */
import type { KubeObject } from "../core/kube.js";
import { CONFINEMENT_POLICY_NAME, renderReconcilerConfinement } from "../manifests/confinement.js";
import type { Policy } from "../policy/types.js";
import { isUnreadable, type ConfinementState, type DoctorFinding, type Unreadable } from "./types.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const strings = (v: unknown): string[] => list(v).filter((x): x is string => typeof x === "string");

/** What decides the policy's verdicts, as sorted text lines: compared between the cluster's and the render. */
function decisive(policy: KubeObject): string[] {
  const spec = obj(policy.spec);
  const lines = [`failurePolicy ${String(spec.failurePolicy ?? "Fail")}`];
  for (const c of list(spec.matchConditions)) lines.push(`match ${String(obj(c).expression)}`);
  for (const v of list(spec.validations)) lines.push(`validate ${String(obj(v).expression)}`);
  for (const r of list(obj(spec.matchConstraints).resourceRules)) {
    const rule = obj(r);
    for (const g of strings(rule.apiGroups))
      for (const res of strings(rule.resources)) for (const op of strings(rule.operations)) lines.push(`rule ${g}/${res} ${op}`);
  }
  return lines.sort();
}

const APPLY = (namespace: string): string =>
  `quartermaster manifests confinement --namespace ${namespace} | kubectl apply -f - (Helm: reconciler.confinement.enabled=true)`;

export function checkConfinement(state: ConfinementState | Unreadable | undefined, policy: Pick<Policy, "jobKinds">, namespace: string): DoctorFinding[] {
  if (state === undefined) return [];
  const subject = `ValidatingAdmissionPolicy ${CONFINEMENT_POLICY_NAME}`;
  const finding = (severity: DoctorFinding["severity"], message: string, fix = ""): DoctorFinding[] => [
    { check: "confinement", severity, subject, message, fix },
  ];
  if (isUnreadable(state)) {
    return finding(
      "warning",
      `cannot read it (${state.error}); the reconciler's writes may be confined by its own code only`,
      "Kubernetes >= 1.30 serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies; check the doctor's access to them",
    );
  }
  if (!state.policy)
    return finding(
      "warning",
      "not installed: the reconciler's ClusterRole lets it write pods and Services in every namespace, and only its code keeps it to the opted-in ones",
      APPLY(namespace),
    );
  const [want, wantBinding] = renderReconcilerConfinement(policy, namespace);
  const have = decisive(state.policy);
  const expected = decisive(want);
  const missing = expected.filter((l) => !have.includes(l));
  const extra = have.filter((l) => !expected.includes(l));
  if (missing.length > 0 || extra.length > 0) {
    const diff = [...missing.map((l) => `missing: ${l}`), ...extra.map((l) => `not rendered: ${l}`)];
    return finding(
      "warning",
      `differs from what this version renders (${diff.length} difference${diff.length === 1 ? "" : "s"}; first: ${diff[0]})`,
      APPLY(namespace),
    );
  }
  const binding = obj(state.binding?.spec);
  const policyName = obj(wantBinding.spec).policyName;
  if (!state.binding || binding.policyName !== policyName)
    return finding("warning", "the policy is installed but not bound: it judges nothing", APPLY(namespace));
  if (!strings(binding.validationActions).includes("Deny")) {
    return finding(
      "warning",
      `bound with validationActions [${strings(binding.validationActions).join(", ")}]: the reconciler's writes outside its scope are reported, not refused`,
      APPLY(namespace),
    );
  }
  return finding("ok", "bound and current: the apiserver refuses the reconciler's writes outside the opted-in namespaces");
}

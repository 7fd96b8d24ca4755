/**
 * @module
 * Do the exported MutatingAdmissionPolicy (`quartermaster policy export-map`, src/manifests/map.ts) in the cluster and
 * the pods webhook's mode (`webhook.podMutation`) agree with the policy in force? In reduced mode the webhook no
 * longer sees GPU pods without a job, so a missing, unbound or stale policy means those pods are not outfitted, or
 * outfitted by another policy's rules: critical. In full mode an installed policy is redundant (both are idempotent),
 * and a stale one outfits pods first by other rules: a warning. (The webhook's own match conditions, which carry the
 * mode, are compared with the render by the webhook checks.) The installed policy is compared with the render on
 * what decides, not byte for byte: the apiserver adds its defaults.
 */
import type { KubeObject } from "../core/kube.js";
import { MAP_NAME, renderMutatingAdmissionPolicy } from "../manifests/map.js";
import type { Policy } from "../policy/types.js";
import { isUnreadable, type DoctorFinding, type MutatingPolicyState, type Unreadable } from "./types.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** JSON with object keys sorted: the apiserver writes a rule's fields in its own order. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  );

/** What decides the mutations, as text lines in order: compared between the cluster's and the render. */
export function decisiveMutations(policy: KubeObject): string[] {
  const spec = obj(policy.spec);
  const constraints = obj(spec.matchConstraints);
  return [
    `failurePolicy ${String(spec.failurePolicy ?? "Fail")}`,
    `reinvocationPolicy ${String(spec.reinvocationPolicy ?? "Never")}`,
    `namespaceSelector ${canonical(constraints.namespaceSelector ?? {})}`,
    ...list(constraints.resourceRules).map((r) => `rule ${canonical(r)}`),
    ...list(spec.matchConditions).map((c) => `match ${String(obj(c).name)}: ${String(obj(c).expression)}`),
    ...list(spec.variables).map((v) => `variable ${String(obj(v).name)}: ${String(obj(v).expression)}`),
    ...list(spec.mutations).map(
      (m) => `mutation ${String(obj(m).patchType)}: ${String(obj(obj(m).jsonPatch).expression ?? obj(obj(m).applyConfiguration).expression)}`,
    ),
  ];
}

const APPLY = "quartermaster policy export-map --policy <the policy in force> | kubectl apply -f -";

export function checkMutatingPolicy(state: MutatingPolicyState | Unreadable | undefined, policy: Policy, namespace: string): DoctorFinding[] {
  if (state === undefined) return [];
  const reduced = policy.webhook.podMutation === "reduced";
  const subject = `MutatingAdmissionPolicy ${MAP_NAME}`;
  const finding = (severity: DoctorFinding["severity"], message: string, fix = ""): DoctorFinding[] => [
    { check: "mutating-policy", severity, subject, message, fix },
  ];
  if (isUnreadable(state)) {
    return reduced
      ? finding(
          "critical",
          `cannot read it (${state.error}); webhook.podMutation is reduced, so GPU pods without a job rely on it`,
          "Kubernetes >= 1.36 serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicies; check the doctor's access to them",
        )
      : [];
  }
  if (!state.policy) {
    return reduced
      ? finding(
          "critical",
          "not installed, but webhook.podMutation is reduced: GPU pods without a job reach neither it nor the webhook, and are not outfitted",
          APPLY,
        )
      : [];
  }
  const [want, have] = [decisiveMutations(renderMutatingAdmissionPolicy(policy, { namespace }).policy), decisiveMutations(state.policy)];
  const missing = want.filter((l) => !have.includes(l));
  const extra = have.filter((l) => !want.includes(l));
  const severity = reduced ? "critical" : "warning";
  if (missing.length > 0 || extra.length > 0) {
    const diff = [...missing.map((l) => `missing: ${l}`), ...extra.map((l) => `not rendered: ${l}`)];
    const first = diff[0]!.length > 160 ? `${diff[0]!.slice(0, 157)}...` : diff[0]!;
    return finding(
      severity,
      `differs from what the policy in force renders (${diff.length} difference${diff.length === 1 ? "" : "s"}; first: ${first}): pods are outfitted by other rules than the webhook's`,
      APPLY,
    );
  }
  if (!state.binding || obj(state.binding.spec).policyName !== MAP_NAME) {
    return reduced
      ? finding("critical", "installed but not bound: it outfits nothing, and the reduced webhook leaves GPU pods without a job as they come", APPLY)
      : finding("warning", "installed but not bound: it outfits nothing", APPLY);
  }
  if (!reduced) {
    return finding(
      "warning",
      "installed and current while webhook.podMutation is full: the webhook still sees every training pod (redundant work, no harm)",
      "set webhook.podMutation: reduced in the policy and apply the webhook configuration it renders (`quartermaster manifests webhooks`)",
    );
  }
  return finding("ok", "bound and current: GPU pods without a job are outfitted by the apiserver, the reduced webhook keeps the rest");
}

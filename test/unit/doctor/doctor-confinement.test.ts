/**
 * The doctor's confinement check (src/doctor/confinement.ts): the reconciler's ValidatingAdmissionPolicy and
 * binding as the cluster holds them, against this version's render.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkConfinement } from "../../../src/doctor/confinement.js";
import type { ConfinementState, Unreadable } from "../../../src/doctor/types.js";
import { renderReconcilerConfinement } from "../../../src/manifests/confinement.js";
import { defaultPolicy } from "../../../src/policy/load.js";

const policy = defaultPolicy();
const NS = "quartermaster";
const [POLICY, BINDING] = renderReconcilerConfinement(policy, NS) as [KubeObject, KubeObject];

type Obj = Record<string, any>;
/** The object as the apiserver returns it: defaults added (matchPolicy, scope, namespaceSelector, …). */
function asStored(o: KubeObject): KubeObject {
  const s = structuredClone(o) as Obj;
  s.metadata = { ...s.metadata, uid: "u1", resourceVersion: "7", generation: 1 };
  if (s.kind === "ValidatingAdmissionPolicy") {
    s.spec.matchConstraints = { ...s.spec.matchConstraints, matchPolicy: "Equivalent", namespaceSelector: {}, objectSelector: {} };
    for (const r of s.spec.matchConstraints.resourceRules) r.scope = "*";
  }
  return s;
}
function edit(o: KubeObject, change: (s: Obj) => void): KubeObject {
  const s = asStored(o) as Obj;
  change(s);
  return s;
}

const CASES: Array<{ name: string; state: ConfinementState | Unreadable | undefined; severity?: string; message?: RegExp; fix?: RegExp }> = [
  { name: "not read (an older snapshot): no finding", state: undefined },
  {
    name: "installed as rendered, with the apiserver's defaults",
    state: { policy: asStored(POLICY), binding: asStored(BINDING) },
    severity: "ok",
    message: /bound and current/,
  },
  {
    name: "not installed",
    state: {},
    severity: "warning",
    message: /not installed: .*only its code keeps it/,
    fix: /quartermaster manifests confinement --namespace quartermaster \| kubectl apply -f -/,
  },
  { name: "unreadable", state: { error: "403 Forbidden" }, severity: "warning", message: /cannot read it \(403 Forbidden\)/ },
  {
    name: "its expression edited (the own namespace dropped from the protected ones)",
    state: {
      policy: edit(POLICY, (s) => (s.spec.validations[0].expression = s.spec.validations[0].expression.replace(", 'quartermaster'", ""))),
      binding: asStored(BINDING),
    },
    severity: "warning",
    message: /differs from what this version renders \(2 differences; first: missing: validate /,
  },
  {
    name: "it judges someone else",
    state: {
      policy: edit(
        POLICY,
        (s) => (s.spec.matchConditions[0].expression = "request.userInfo.username == 'system:serviceaccount:other:quartermaster-reconciler'"),
      ),
      binding: asStored(BINDING),
    },
    severity: "warning",
    message: /differs .*missing: match request\.userInfo\.username == 'system:serviceaccount:quartermaster:quartermaster-reconciler'/,
  },
  {
    name: "a resource dropped from its rules (Services)",
    state: { policy: edit(POLICY, (s) => (s.spec.matchConstraints.resourceRules[0].resources = ["pods", "events"])), binding: asStored(BINDING) },
    severity: "warning",
    message: /differs .*\(3 differences; first: missing: rule \/services CREATE\)/,
  },
  { name: "not bound", state: { policy: asStored(POLICY) }, severity: "warning", message: /installed but not bound: it judges nothing/ },
  {
    name: "bound to another policy",
    state: { policy: asStored(POLICY), binding: edit(BINDING, (s) => (s.spec.policyName = "other")) },
    severity: "warning",
    message: /not bound/,
  },
  {
    name: "bound to warn, not deny",
    state: { policy: asStored(POLICY), binding: edit(BINDING, (s) => (s.spec.validationActions = ["Warn", "Audit"])) },
    severity: "warning",
    message: /validationActions \[Warn, Audit\]: .*reported, not refused/,
  },
];

describe("doctor: the reconciler's confinement", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const findings = checkConfinement(c.state, policy, NS);
      if (c.severity === undefined) {
        assert.deepEqual(findings, []);
        return;
      }
      assert.equal(findings.length, 1);
      const [f] = findings;
      assert.equal(f!.check, "confinement");
      assert.equal(f!.subject, "ValidatingAdmissionPolicy quartermaster-reconciler-scope");
      assert.equal(f!.severity, c.severity, f!.message);
      assert.match(f!.message, c.message!);
      if (c.fix) assert.match(f!.fix, c.fix);
      if (c.severity === "ok") assert.equal(f!.fix, "");
      else assert.notEqual(f!.fix, "");
    });
  }
  it("judged against the namespace the doctor is told: the render for quartermaster differs from one for qm-2", () => {
    const findings = checkConfinement({ policy: asStored(POLICY), binding: asStored(BINDING) }, policy, "qm-2");
    assert.equal(findings[0]!.severity, "warning");
    assert.match(findings[0]!.fix, /--namespace qm-2/);
  });
});

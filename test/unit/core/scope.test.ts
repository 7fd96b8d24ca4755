/**
 * The namespace scope: one definition for the webhooks' namespaceSelector and the reconciler's writes.
 * The verdicts are checked as a table, and against the protected-namespace list the doctor enforces.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { excludesByName } from "../../../src/core/selector.js";
import { protectedNamespaceNames } from "../../../src/doctor/webhooks.js";
import { inScope, namespaceScope, namespaceSelector, scopeIndex } from "../../../src/core/scope.js";

const scope = namespaceScope("quartermaster");
const optedIn = { "quartermaster.dev/enabled": "true" };

describe("namespace scope", () => {
  const cases: Array<{ name: string; ns: string; labels?: Record<string, string>; want: boolean; why?: RegExp }> = [
    { name: "opted-in team namespace", ns: "team-a", labels: optedIn, want: true },
    { name: "no labels", ns: "team-b", want: false, why: /has not opted in/ },
    { name: "label with another value", ns: "team-c", labels: { "quartermaster.dev/enabled": "True" }, want: false, why: /has not opted in/ },
    { name: "kube-system even when labelled", ns: "kube-system", labels: optedIn, want: false, why: /protected/ },
    { name: "kube-public even when labelled", ns: "kube-public", labels: optedIn, want: false, why: /protected/ },
    { name: "kube-node-lease even when labelled", ns: "kube-node-lease", labels: optedIn, want: false, why: /protected/ },
    { name: "our own namespace even when labelled", ns: "quartermaster", labels: optedIn, want: false, why: /protected/ },
    {
      name: "a forged name label does not help",
      ns: "kube-system",
      labels: { ...optedIn, "kubernetes.io/metadata.name": "team-a" },
      want: false,
      why: /protected/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const v = inScope(scope, { name: c.ns, labels: c.labels });
      assert.equal(v.inScope, c.want);
      if (!v.inScope) assert.match(v.why, c.why!);
    });
  }

  it("another install namespace is protected instead", () => {
    const s = namespaceScope("qm-system");
    assert.equal(inScope(s, { name: "qm-system", labels: optedIn }).inScope, false);
    assert.equal(inScope(s, { name: "quartermaster", labels: optedIn }).inScope, true);
  });

  it("the selector excludes by name every namespace the doctor protects", () => {
    for (const name of protectedNamespaceNames("quartermaster")) assert.equal(excludesByName(namespaceSelector(scope), name), true, name);
  });

  it("scopeIndex answers per name; an unlisted namespace is out of scope", () => {
    const lookup = scopeIndex(scope, [{ name: "team-a", labels: optedIn }, { name: "team-b" }]);
    assert.deepEqual(lookup("team-a"), { inScope: true });
    assert.equal(lookup("team-b").inScope, false);
    const gone = lookup("deleted");
    assert.equal(gone.inScope, false);
    assert.match(gone.inScope ? "" : gone.why, /not found/);
  });
});

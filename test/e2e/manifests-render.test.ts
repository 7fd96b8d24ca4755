/**
 * Checks of the kustomize renders of manifests/ that need kubectl's built-in kustomize (test/fixtures/manifests.ts),
 * so they run in the e2e suite, which builds kubectl: the reconciler's ConfigMap grants in every render reach the
 * device ledger's names and nothing else (not the webhook's policy ConfigMap), and the doctor asks about exactly the
 * grants manifests/base makes.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { requiredAccess } from "../../src/doctor/rbac.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { ledgerConfigMapNames } from "../../src/ledger/shards.js";
import { ROOT, render, variants } from "../fixtures/manifests.js";

const NS = "quartermaster";

describe("the reconciler's ConfigMap grants in every render", () => {
  for (const v of variants()) {
    it(`${v.name}: update and delete only on the ledger's names; the policy ConfigMap out of reach`, () => {
      const objects = render(v.dir);
      const bound = new Set(
        objects
          .filter(
            (o) =>
              (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") &&
              (o.subjects ?? []).some((s: any) => s.kind === "ServiceAccount" && s.name === "quartermaster-reconciler"),
          )
          .map((b) => `${b.roleRef.kind}/${b.roleRef.name}`),
      );
      const rules = objects.filter((o) => bound.has(`${o.kind}/${o.metadata.name}`)).flatMap((r) => r.rules ?? []);
      const cm = rules.filter(
        (r: any) => (r.apiGroups ?? []).includes("") && ((r.resources ?? []).includes("configmaps") || (r.resources ?? []).includes("*")),
      );
      const writers = cm.filter((r: any) => (r.verbs ?? []).some((verb: string) => ["update", "patch", "delete", "deletecollection", "*"].includes(verb)));
      assert.ok(writers.length > 0, "the reconciler can write its ledger");
      for (const r of writers) {
        assert.ok(!(r.verbs as string[]).some((verb) => ["patch", "deletecollection", "*"].includes(verb)), `unexpected verbs ${r.verbs}`);
        assert.deepEqual(r.resourceNames, ledgerConfigMapNames());
      }
      const policyCm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("quartermaster-policy"));
      if (policyCm) assert.ok(!writers.some((r: any) => r.resourceNames.includes(policyCm.metadata.name)));
    });
  }
});

describe("doctor: RBAC requirements against manifests/base", () => {
  // test/e2e/manifests-rbac.test.ts proves the base grants exactly the calls the code makes; this proves the doctor
  // asks about exactly those grants, so it neither cries wolf on a healthy install nor misses a grant.
  const ANY = "*";
  const objects = render(join(ROOT, "manifests/base"));
  const grantsOf = (sa: string): Array<{ verb: string; group: string; resource: string; ns: string; names?: string[] }> =>
    objects
      .filter(
        (b) =>
          (b.kind === "RoleBinding" || b.kind === "ClusterRoleBinding") &&
          (b.subjects ?? []).some((s: Record<string, string>) => s.kind === "ServiceAccount" && `${s.namespace}/${s.name}` === sa),
      )
      .flatMap((b) => {
        const ns = b.kind === "ClusterRoleBinding" ? ANY : b.metadata.namespace!;
        const role = objects.find(
          (o) => o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name && (o.kind === "ClusterRole" || o.metadata.namespace === ns),
        );
        return (role?.rules ?? []).flatMap((r: Record<string, string[]>) =>
          r.apiGroups!.flatMap((group) =>
            r.resources!.flatMap((resource) => r.verbs!.map((verb) => ({ verb, group, resource, ns, ...(r.resourceNames ? { names: r.resourceNames } : {}) }))),
          ),
        );
      });

  for (const sa of [`${NS}/quartermaster-webhook`, `${NS}/quartermaster-reconciler`]) {
    it(`${sa}: every permission the doctor checks is granted, and every grant is checked`, () => {
      const grants = grantsOf(sa);
      const all = requiredAccess(defaultPolicy(), NS).filter((a) => a.serviceAccount === sa);
      const required = all.filter((a) => !a.mustNot);
      // What it must not be able to do, no grant gives it.
      const excess = all.filter(
        (a) =>
          a.mustNot &&
          grants.some(
            (g) =>
              g.verb === a.verb &&
              g.group === a.group &&
              g.resource === a.resource &&
              (g.ns === ANY || g.ns === a.namespace) &&
              (!g.names || g.names.includes(a.name!)),
          ),
      );
      assert.deepEqual(
        excess.map((a) => `${a.verb} ${a.resource}/${a.name}`),
        [],
      );
      assert.ok(grants.length > 0 && required.length > 0);
      const ungranted = required.filter(
        (a) =>
          !grants.some(
            (g) =>
              g.verb === a.verb &&
              g.group === a.group &&
              g.resource === a.resource &&
              (g.ns === ANY || g.ns === a.namespace) &&
              (!g.names || (a.name !== undefined && g.names.includes(a.name))),
          ),
      );
      assert.deepEqual(
        ungranted.map((a) => `${a.verb} ${a.resource} ${a.namespace}`),
        [],
        "the doctor requires what the manifests do not grant",
      );
      const unchecked = grants.filter(
        (g) =>
          !required.some(
            (a) => g.verb === a.verb && g.group === a.group && g.resource === a.resource && (g.ns === ANY ? a.namespace === "" : g.ns === a.namespace),
          ),
      );
      assert.deepEqual(
        unchecked.map((g) => `${g.verb} ${g.resource} ${g.ns}`),
        [],
        "grants the doctor does not check: add them to requiredAccess in src/doctor/rbac.ts",
      );
    });
  }
});

describe("examples/install (the install overlay of README.md and docs/deploy.md)", () => {
  /** Renders a copy of examples/install beside it (its relative paths hold) with network-sources.yaml edited. */
  const renderCopy = (edit: (sources: string) => string) => {
    const dir = mkdtempSync(join(ROOT, "examples/.test-"));
    try {
      cpSync(join(ROOT, "examples/install"), dir, { recursive: true });
      const file = join(dir, "network-sources.yaml");
      writeFileSync(file, edit(readFileSync(file, "utf8")));
      return render(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  /** The first of the commented examples, uncommented, as a user would. */
  const told = (sources: string) => sources.replace("# apiserverFrom:\n#   - ipBlock: {cidr: 10.0.0.0/24}", "apiserverFrom:\n  - ipBlock: {cidr: 10.0.0.0/24}");

  it("does not render until it is told the control plane's source, and says which field is missing", () => {
    assert.throws(() => render(join(ROOT, "examples/install")), /fieldPath `apiserverFrom` is missing/);
  });

  it("renders the self-managed overlay with every workload on the image it names, the policy it carries, and the webhook port admitted from the control plane only", () => {
    const objects = renderCopy(told);
    const images = objects.flatMap((o) => {
      const spec = o.kind === "CronJob" ? o.spec?.jobTemplate?.spec?.template?.spec : o.spec?.template?.spec;
      return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].map((c: { image: string }) => c.image);
    });
    assert.ok(images.length >= 3, images.join(", "));
    assert.deepEqual([...new Set(images)], ["registry.example.com/quartermaster:0.1.0"]);
    const policies = objects.filter((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("quartermaster-policy"));
    assert.equal(policies.length, 1);
    assert.match(policies[0]!.data["policy.yaml"], /ttlSecondsAfterFinished: 86400/);
    const network = objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-webhook")!;
    assert.deepEqual(network.spec.ingress[0], { from: [{ ipBlock: { cidr: "10.0.0.0/24" } }], ports: [{ port: 8443, protocol: "TCP" }] });
    assert.equal(objects.filter((o) => o.kind === "NetworkSources").length, 0);
  });
});

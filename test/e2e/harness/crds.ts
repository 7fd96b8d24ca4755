/**
 * @module
 * Server-side dry-runs of rendered manifests: stand-in CRDs for the custom kinds Quartermaster's manifests
 * use (cert-manager's Certificate and Issuer, Prometheus Operator's ServiceMonitor, PodMonitor and
 * PrometheusRule), each accepting any content, so a dry-run checks everything but those kinds' own schemas;
 * and the check that kubectl accepted every object.
 */
import assert from "node:assert/strict";
import type { ControlPlane } from "./controlplane.js";

type Obj = Record<string, any>;

/** A CRD that accepts any content, for each custom kind in `objects`. */
export function minimalCrds(objects: Obj[]): Obj[] {
  const builtIn = /^(v1|[a-z]+\/v\w+|[a-z.]+\.k8s\.io\/\w+)$/;
  const kinds = new Map<string, { group: string; version: string; kind: string; namespaced: boolean }>();
  for (const o of objects) {
    if (builtIn.test(o.apiVersion)) continue;
    const [group, version] = (o.apiVersion as string).split("/") as [string, string];
    kinds.set(`${group}/${o.kind}`, { group, version, kind: o.kind, namespaced: o.metadata.namespace !== undefined });
  }
  return [...kinds.values()].map(({ group, version, kind, namespaced }) => {
    const plural = `${kind.toLowerCase()}s`;
    return {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `${plural}.${group}` },
      spec: {
        group,
        scope: namespaced ? "Namespaced" : "Cluster",
        names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
        versions: [
          { name: version, served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } },
        ],
      },
    };
  });
}

/** Installs {@link minimalCrds} for `objects` and waits until the apiserver serves them. */
export async function installMinimalCrds(cp: ControlPlane, objects: Obj[]): Promise<void> {
  const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: minimalCrds(objects) }));
  assert.equal(applied.code, 0, applied.stderr);
  const established = await cp.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
}

/** Asserts that kubectl's `apply --dry-run=server` output `r` accepted every one of `objects`. */
export function assertDryRunAccepted(r: { code: number; stdout: string; stderr: string }, objects: Obj[]): void {
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert.equal(lines.length, objects.length, r.stdout);
  for (const o of objects) {
    const accepted = lines.some((l) => l.startsWith(o.kind.toLowerCase()) && l.includes(`/${o.metadata.name} `) && l.endsWith("(server dry run)"));
    assert.ok(accepted, `${o.kind}/${o.metadata.name} not accepted: ${r.stdout}`);
  }
}

/**
 * Network exposure of the webhook in every rendered variant (issue #16): the Service selects the webhook
 * pods on both labels, its ports name container ports the server listens on, the probes use the metrics
 * port, and the NetworkPolicy admits each port from its one source: the webhook port from the control
 * plane (a peer list there is, never a rule open to every source), the metrics port from the monitoring
 * namespace. The kustomize patch docs/operations.md gives for narrowing the control-plane source is
 * applied to the base here, so the documented patch is known to work.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { ROOT, render, variants, type Manifest } from "../fixtures/manifests.js";

const rendered = variants().map((v) => ({ ...v, objects: render(v.dir) }));
/** `--name=value` from a container's args. */
const flag = (args: string[], name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

interface Exposure {
  deployment: Manifest;
  container: Record<string, any>;
  service: Manifest;
  policy: Manifest;
}

function exposure(objects: Manifest[]): Exposure | undefined {
  const deployment = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-webhook");
  if (!deployment) return undefined;
  return {
    deployment,
    container: deployment.spec.template.spec.containers.find((c: { name: string }) => c.name === "webhook"),
    service: objects.find((o) => o.kind === "Service" && o.apiVersion === "v1" && o.metadata.name === "quartermaster-webhook")!,
    policy: objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-webhook")!,
  };
}

/** The container port number a Service targetPort or probe port (a name or a number) refers to. */
function containerPort(container: Record<string, any>, port: string | number): number | undefined {
  if (typeof port === "number") return port;
  return container.ports.find((p: { name: string }) => p.name === port)?.containerPort;
}

const matches = (selector: Record<string, string>, labels: Record<string, string>): boolean => Object.entries(selector).every(([k, v]) => labels[k] === v);

describe("network exposure of the webhook", () => {
  for (const v of rendered) {
    const e = exposure(v.objects);
    if (!e) continue; // the knative overlay: no Deployment, Knative routes the traffic
    describe(v.name, () => {
      const args: string[] = e.container.args;
      const webhookPort = Number(flag(args, "port"));
      const metricsPort = Number(flag(args, "metrics-port"));

      it("the server listens on a webhook port and a different metrics port, both declared on the container", () => {
        assert.ok(webhookPort > 0 && metricsPort > 0 && webhookPort !== metricsPort, `--port=${webhookPort} --metrics-port=${metricsPort}`);
        const declared = e.container.ports.map((p: { containerPort: number }) => p.containerPort).sort();
        assert.deepEqual(declared, [webhookPort, metricsPort].sort());
      });

      it("the Service selects on both labels of the Deployment's selector, and on nothing else", () => {
        const selector = e.service.spec.selector as Record<string, string>;
        assert.deepEqual(selector, e.deployment.spec.selector.matchLabels);
        assert.ok(selector["app.kubernetes.io/name"] && selector["app.kubernetes.io/component"], JSON.stringify(selector));
        // A pod labelled only component=webhook (another product's) is no endpoint.
        assert.equal(matches(selector, { "app.kubernetes.io/component": "webhook" }), false);
      });

      it("Service port 443 reaches the webhook port and port 9090 the metrics port", () => {
        const byPort = new Map(
          e.service.spec.ports.map((p: { port: number; targetPort: string | number }) => [p.port, containerPort(e.container, p.targetPort)]),
        );
        assert.equal(byPort.get(443), webhookPort);
        assert.equal(byPort.get(9090), metricsPort);
      });

      it("the probes use the metrics port over HTTP (no handshake, no client certificate needed)", () => {
        for (const probe of [e.container.readinessProbe, e.container.livenessProbe]) {
          assert.equal(containerPort(e.container, probe.httpGet.port), metricsPort);
          assert.equal(probe.httpGet.scheme ?? "HTTP", "HTTP");
        }
        assert.equal(e.container.readinessProbe.httpGet.path, "/readyz");
        assert.equal(e.container.livenessProbe.httpGet.path, "/healthz");
      });

      it("the NetworkPolicy selects the webhook pods and admits each port from its source only", () => {
        assert.ok(matches(e.policy.spec.podSelector.matchLabels, e.deployment.spec.template.metadata.labels));
        assert.deepEqual(e.policy.spec.policyTypes, ["Ingress"]);
        const rules: Array<{ from?: unknown[]; ports?: Array<{ port: number | string }> }> = e.policy.spec.ingress;
        for (const rule of rules) {
          assert.ok(rule.from && rule.from.length > 0, "a rule without `from` admits every pod of the cluster");
          assert.ok(rule.ports && rule.ports.length > 0, "a rule without `ports` admits every port");
        }
        const sourcesOf = (port: number): unknown[] =>
          rules.filter((r) => r.ports!.some((p) => containerPort(e.container, p.port) === port)).flatMap((r) => r.from!);
        assert.deepEqual(sourcesOf(metricsPort), [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }]);
        const control = sourcesOf(webhookPort);
        assert.ok(control.length > 0);
        assert.ok(
          !control.some((s) => JSON.stringify(s).includes("namespaceSelector") && JSON.stringify(s).includes("monitoring")),
          "monitoring does not reach the webhook port",
        );
        const covered = new Set(rules.flatMap((r) => r.ports!.map((p) => containerPort(e.container, p.port))));
        assert.deepEqual([...covered].sort(), [webhookPort, metricsPort].sort(), "no other port is admitted");
      });

      it("the Deployment bounds glibc's malloc arenas", () => {
        assert.ok(e.container.env?.some((x: { name: string; value: string }) => x.name === "MALLOC_ARENA_MAX" && x.value === "2"));
      });
    });
  }

  it("monitoring overlay: the ServiceMonitor scrapes the Service's metrics port, which the NetworkPolicy admits from monitoring", () => {
    const objects = rendered.find((v) => v.name === "monitoring")!.objects;
    const e = exposure(objects)!;
    const monitor = objects.find((o) => o.kind === "ServiceMonitor")!;
    const [endpoint] = monitor.spec.endpoints;
    const port = e.service.spec.ports.find((p: { name: string }) => p.name === endpoint.port);
    assert.ok(port, `the Service has no port named ${endpoint.port}`);
    assert.equal(containerPort(e.container, port.targetPort), Number(flag(e.container.args, "metrics-port")));
    assert.equal(endpoint.scheme, "http");
    assert.equal(endpoint.path, "/metrics");
  });

  it("the patch in docs/operations.md narrows the webhook port to the given control-plane source", () => {
    const docs = readFileSync(join(ROOT, "docs/operations.md"), "utf8");
    const block = /<!-- network-policy-patch -->\s*```yaml\n([\s\S]*?)```/.exec(docs)?.[1];
    assert.ok(block, "docs/operations.md has the patch after <!-- network-policy-patch -->");
    const dir = mkdtempSync(join(ROOT, "manifests/.test-"));
    try {
      writeFileSync(join(dir, "kustomization.yaml"), block.replace("../../manifests/base", relative(dir, join(ROOT, "manifests/base"))));
      const e = exposure(render(dir))!;
      const webhookPort = Number(flag(e.container.args, "port"));
      const rule = e.policy.spec.ingress.find((r: { ports: Array<{ port: number }> }) => r.ports.some((p) => p.port === webhookPort));
      assert.deepEqual(rule.from, [
        { ipBlock: { cidr: "10.0.0.0/24" } },
        { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-apiserver" } } },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("the component manifests/components/network-sources, as docs/operations.md shows it", () => {
    const docs = readFileSync(join(ROOT, "docs/operations.md"), "utf8");
    const block = (marker: string): string => {
      const text = new RegExp(`<!-- ${marker} -->\\s*\`\`\`yaml\n([\\s\\S]*?)\`\`\``).exec(docs)?.[1];
      assert.ok(text, `docs/operations.md has a yaml block after <!-- ${marker} -->`);
      return text;
    };
    /** Renders the documented kustomization over `base` with `sources` as network-sources.yaml. */
    const renderWith = (base: string, sources: string): Manifest[] => {
      const dir = mkdtempSync(join(ROOT, "manifests/.test-"));
      try {
        const kustomization = block("network-sources-kustomization")
          .replace("../../manifests/overlays/self-managed", relative(dir, join(ROOT, base)))
          .replace("../../manifests/components/network-sources", relative(dir, join(ROOT, "manifests/components/network-sources")));
        writeFileSync(join(dir, "kustomization.yaml"), kustomization);
        writeFileSync(join(dir, "network-sources.yaml"), sources);
        return render(dir);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    const prometheus = { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "prometheus" } } };
    const sources = block("network-sources-object")
      .replace("- ipBlock: {cidr: 10.0.0.0/24}", '- ipBlock: {cidr: 10.0.0.0/24}\n  - ipBlock: {cidr: "fd00:10::/64"}')
      .replace("kubernetes.io/metadata.name: monitoring", "kubernetes.io/metadata.name: prometheus");
    const CASES = [
      { name: "self-managed overlay", base: "manifests/overlays/self-managed", reconciler: false },
      { name: "resident reconciler (its metrics port too)", base: "manifests/overlays/resident-reconciler", reconciler: true },
      { name: "job controller (its metrics port too)", base: "manifests/overlays/job-controller", reconciler: true },
    ];
    for (const c of CASES) {
      it(`${c.name}: the webhook port from apiserverFrom, the metrics ports from metricsFrom; the object itself is not rendered`, () => {
        const objects = renderWith(c.base, sources);
        const policy = (name: string) => objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === name);
        const webhook = policy("quartermaster-webhook")!;
        assert.deepEqual(webhook.spec.ingress[0].from, [{ ipBlock: { cidr: "10.0.0.0/24" } }, { ipBlock: { cidr: "fd00:10::/64" } }]);
        assert.deepEqual(webhook.spec.ingress[0].ports, [{ port: 8443, protocol: "TCP" }]);
        assert.deepEqual(webhook.spec.ingress[1].from, [prometheus]);
        assert.deepEqual(webhook.spec.ingress[1].ports, [{ port: 9090, protocol: "TCP" }]);
        assert.equal(
          policy("quartermaster-reconciler")?.spec.ingress[0].from[0].namespaceSelector.matchLabels["kubernetes.io/metadata.name"],
          c.reconciler ? "prometheus" : undefined,
        );
        assert.equal(objects.filter((o) => o.kind === "NetworkSources").length, 0, "a local-config object is not applied");
      });
    }
    it("the documented object unchanged renders (the webhook port from the example CIDR)", () => {
      const webhook = renderWith("manifests/base", block("network-sources-object")).find(
        (o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-webhook",
      )!;
      assert.deepEqual(webhook.spec.ingress[0].from, [{ ipBlock: { cidr: "10.0.0.0/24" } }]);
    });
    it("a NetworkSources without metricsFrom fails the render, naming the field", () => {
      assert.throws(() => renderWith("manifests/base", block("network-sources-object").replace(/metricsFrom:[\s\S]*$/, "")), /metricsFrom/);
    });
  });
});

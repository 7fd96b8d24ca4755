/**
 * Every rendered manifest (the base and each overlay) against a schema, and the references between them.
 * Schemas: kubernetes-models for the built-in kinds, @kubernetes-models/cert-manager, /knative and
 * /prometheus-operator for the CRD-typed ones; an object of any other group fails (add its models).
 * These schemas check types and required fields but accept unknown fields; the e2e suite's server-side
 * dry-run (kubectl's strict field validation) rejects those.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ROOT, podSpec, render, variants, type Manifest } from "../fixtures/manifests.js";

const NAMESPACE = "quartermaster";
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "PriorityClass",
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
  "ClusterIssuer",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
  "MutatingAdmissionPolicy",
  "MutatingAdmissionPolicyBinding",
]);

/**
 * Kinds kubernetes-models has no schema for (admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, GA in
 * Kubernetes 1.36): the real apiserver validates them instead, by a server-side dry run in
 * test/e2e/map-parity.test.ts.
 */
const SERVER_VALIDATED = new Set(["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]);

/** The module holding the model of an apiVersion/kind. */
function modelModule(apiVersion: string, kind: string): string {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
  if (group.endsWith("cert-manager.io")) return `@kubernetes-models/cert-manager/${apiVersion}/${kind}`;
  if (group.endsWith("knative.dev")) return `@kubernetes-models/knative/${apiVersion}/${kind}`;
  if (group === "monitoring.coreos.com") return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  if (group === "" || !group.includes(".") || group.endsWith(".k8s.io")) return `kubernetes-models/${apiVersion}/${kind}`;
  throw new Error(`no schema models for ${apiVersion} ${kind}: add the @kubernetes-models package for its group`);
}

async function schemaErrors(o: Manifest): Promise<string | undefined> {
  const id = `${o.kind}/${o.metadata?.name}`;
  if (SERVER_VALIDATED.has(o.kind)) return undefined;
  let Model: new (data: unknown) => { validate(): void };
  try {
    Model = (await import(modelModule(o.apiVersion, o.kind)))[o.kind];
  } catch (err) {
    return `${id}: ${(err as Error).message}`;
  }
  try {
    new Model(o).validate();
    return undefined;
  } catch (err) {
    return `${id}: ${(err as Error).message}`;
  }
}

const rendered = variants().map((v) => ({ ...v, objects: render(v.dir) }));
const byKind = (objects: Manifest[], kind: string): Manifest[] => objects.filter((o) => o.kind === kind);
const containersOf = (spec: Record<string, any>): Array<Record<string, any>> => [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
/** `--name=value` from a container's args. */
const flag = (args: string[], name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

describe("rendered manifests", () => {
  it("there is a base and at least the four overlays of issue #7", () => {
    const names = rendered.map((v) => v.name);
    for (const want of ["base", "cert-manager", "knative", "resident-reconciler", "self-managed"])
      assert.ok(names.includes(want), `missing ${want} in ${names.join(", ")}`);
  });

  for (const v of rendered) {
    describe(v.name, () => {
      it("every object passes its schema", async () => {
        const errors = (await Promise.all(v.objects.map(schemaErrors))).filter(Boolean);
        assert.deepEqual(errors, []);
      });

      it(`every namespaced object is in ${NAMESPACE} (RBAC also where a component reads), and keeps the base's namespace`, () => {
        const base = new Map(rendered[0]!.objects.map((o) => [`${o.kind}/${o.metadata.name}`, o.metadata.namespace]));
        const wrong = v.objects
          .filter((o) => !CLUSTER_SCOPED.has(o.kind))
          .filter((o) => {
            const id = `${o.kind}/${o.metadata.name}`;
            // An overlay's `namespace:` would move a base Role out of the namespace it grants in.
            if (base.has(id)) return o.metadata.namespace !== base.get(id);
            return o.metadata.namespace !== NAMESPACE;
          })
          .map((o) => `${o.kind}/${o.metadata.name}: ${o.metadata.namespace}`);
        assert.deepEqual(wrong, []);
        const elsewhere = rendered[0]!.objects.filter((o) => !CLUSTER_SCOPED.has(o.kind) && o.metadata.namespace !== NAMESPACE);
        assert.deepEqual(
          elsewhere.filter((o) => !["Role", "RoleBinding"].includes(o.kind)).map((o) => `${o.kind}/${o.metadata.name}`),
          [],
        );
      });

      it("every ServiceAccount, ConfigMap, Secret and role a workload or binding names is there (or made by a certificate manager)", () => {
        const names = (kind: string): Set<string> => new Set(byKind(v.objects, kind).map((o) => o.metadata.name));
        const secrets = names("Secret");
        for (const c of byKind(v.objects, "Certificate")) secrets.add(c.spec.secretName);
        for (const o of v.objects) {
          const spec = podSpec(o);
          const args: string[] = spec ? containersOf(spec).flatMap((c) => c.args ?? []) : [];
          if (args[0] === "certs" && args[1] === "ensure") for (const f of ["secret", "ca-secret"]) secrets.add(flag(args, f)!);
        }
        // Without a certificate manager (base, resident-reconciler), the manual step of docs/deploy.md ("Install") creates it.
        const managed = v.objects.some((o) => o.kind === "Certificate" || (o.kind === "CronJob" && o.metadata.name === "quartermaster-certs"));
        if (!managed) secrets.add("quartermaster-webhook-tls");
        const missing: string[] = [];
        for (const o of v.objects) {
          const spec = podSpec(o);
          if (!spec) continue;
          const id = `${o.kind}/${o.metadata.name}`;
          if (!names("ServiceAccount").has(spec.serviceAccountName)) missing.push(`${id}: ServiceAccount ${spec.serviceAccountName}`);
          for (const vol of spec.volumes ?? []) {
            if (vol.configMap && !names("ConfigMap").has(vol.configMap.name)) missing.push(`${id}: ConfigMap ${vol.configMap.name}`);
            if (vol.secret && !secrets.has(vol.secret.secretName)) missing.push(`${id}: Secret ${vol.secret.secretName}`);
          }
        }
        for (const b of [...byKind(v.objects, "RoleBinding"), ...byKind(v.objects, "ClusterRoleBinding")]) {
          if (!names(b.roleRef.kind).has(b.roleRef.name)) missing.push(`${b.kind}/${b.metadata.name}: ${b.roleRef.kind} ${b.roleRef.name}`);
          for (const s of b.subjects ?? [])
            if (s.kind === "ServiceAccount" && !names("ServiceAccount").has(s.name)) missing.push(`${b.kind}/${b.metadata.name}: ServiceAccount ${s.name}`);
        }
        assert.deepEqual(missing, []);
      });

      it("both webhook configurations are there and call a Service of this render", () => {
        const configs = v.objects.filter((o) => /^(Mutating|Validating)WebhookConfiguration$/.test(o.kind));
        assert.deepEqual(configs.map((c) => c.kind).sort(), ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]);
        const services = new Set(byKind(v.objects, "Service").map((s) => `${s.metadata.namespace}/${s.metadata.name}`));
        for (const c of configs) {
          for (const w of c.webhooks)
            assert.ok(
              services.has(`${w.clientConfig.service.namespace}/${w.clientConfig.service.name}`),
              `${c.kind} ${w.name} calls ${JSON.stringify(w.clientConfig)}`,
            );
        }
      });

      it("every container runs the one Quartermaster image, hardened (non-root, read-only root, no privilege escalation, no capabilities)", () => {
        const problems: string[] = [];
        const images = new Set<string>();
        for (const o of v.objects) {
          const spec = podSpec(o);
          if (!spec) continue;
          for (const c of containersOf(spec)) {
            const id = `${o.kind}/${o.metadata.name} ${c.name}`;
            images.add(c.image);
            const sc = c.securityContext ?? {};
            if (!(sc.runAsNonRoot ?? spec.securityContext?.runAsNonRoot)) problems.push(`${id}: runAsNonRoot`);
            if (sc.readOnlyRootFilesystem !== true) problems.push(`${id}: readOnlyRootFilesystem`);
            if (sc.allowPrivilegeEscalation !== false) problems.push(`${id}: allowPrivilegeEscalation`);
            if (JSON.stringify(sc.capabilities?.drop) !== '["ALL"]') problems.push(`${id}: capabilities.drop`);
            if (!c.resources?.requests || !c.resources?.limits) problems.push(`${id}: requests and limits`);
          }
        }
        assert.deepEqual(problems, []);
        assert.equal(images.size, 1, `one image to change on upgrade (kustomize images:), found ${[...images].join(", ")}`);
      });
    });
  }
});

describe("overlay specifics", () => {
  const get = (name: string): Manifest[] => rendered.find((v) => v.name === name)!.objects;
  const webhookTimeout = (objects: Manifest[]): number =>
    Math.max(
      ...objects.filter((o) => /WebhookConfiguration$/.test(o.kind)).flatMap((c) => c.webhooks.map((w: { timeoutSeconds: number }) => w.timeoutSeconds)),
    );

  it("self-managed: the Job and CronJob run `certs ensure` on the Secret the webhook mounts and the configurations in the render, never two at once", () => {
    const objects = get("self-managed");
    const deployment = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-webhook")!;
    const mounted = podSpec(deployment)!.volumes.find((vol: { secret?: unknown }) => vol.secret).secret.secretName;
    const configs = new Set(objects.filter((o) => /WebhookConfiguration$/.test(o.kind)).map((o) => o.metadata.name));
    const runs = objects.filter((o) => (o.kind === "Job" || o.kind === "CronJob") && podSpec(o)!.containers[0].args?.[1] === "ensure");
    assert.deepEqual(runs.map((o) => o.kind).sort(), ["CronJob", "Job"]);
    for (const o of runs) {
      const args: string[] = podSpec(o)!.containers[0].args;
      assert.deepEqual(args.slice(0, 2), ["certs", "ensure"]);
      assert.equal(flag(args, "secret"), mounted);
      assert.ok(configs.has(flag(args, "webhook-configuration")!), args.join(" "));
      assert.equal(flag(args, "service"), deployment.metadata.name === "quartermaster-webhook" ? "quartermaster-webhook" : undefined);
      assert.equal(flag(args, "namespace"), NAMESPACE);
      assert.equal(podSpec(o)!.serviceAccountName, "quartermaster-certs");
    }
    assert.equal(runs.find((o) => o.kind === "CronJob")!.spec.concurrencyPolicy, "Forbid");
  });

  it("cert-manager: both configurations take their caBundle from the Certificate whose Secret the webhook mounts", () => {
    const objects = get("cert-manager");
    const deployment = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-webhook")!;
    const mounted = podSpec(deployment)!.volumes.find((vol: { secret?: unknown }) => vol.secret).secret.secretName;
    const certificate = objects.find((o) => o.kind === "Certificate" && o.spec.secretName === mounted);
    assert.ok(certificate, `no Certificate writes ${mounted}`);
    for (const c of objects.filter((o) => /WebhookConfiguration$/.test(o.kind))) {
      assert.equal(c.metadata.annotations?.["cert-manager.io/inject-ca-from"], `${certificate.metadata.namespace}/${certificate.metadata.name}`);
    }
    const issuer = objects.find((o) => o.kind === "Issuer" && o.metadata.name === certificate.spec.issuerRef.name);
    assert.ok(issuer?.spec.ca, "the serving certificate comes from a CA Issuer (renewals keep the CA)");
    const ca = objects.find((o) => o.kind === "Certificate" && o.spec.secretName === issuer.spec.ca.secretName);
    assert.equal(ca?.spec.isCA, true);
    assert.equal(ca?.spec.privateKey.rotationPolicy, "Never", "a renewed CA keeps its key, so certificates it issued still verify");
  });

  it("knative: a Knative Service with min scale >= 1 (no cold start on admission), plain HTTP inside, timeout above the webhooks'; no Deployment", () => {
    const objects = get("knative");
    const ksvc = objects.find((o) => o.apiVersion === "serving.knative.dev/v1" && o.kind === "Service")!;
    assert.ok(ksvc, "no Knative Service");
    assert.ok(Number(ksvc.spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]) >= 1);
    assert.ok(ksvc.spec.template.spec.timeoutSeconds > webhookTimeout(objects));
    assert.ok(ksvc.spec.template.spec.containers[0].args.includes("--plain-http"));
    assert.deepEqual(
      objects.filter((o) => o.kind === "Deployment").map((o) => o.metadata.name),
      [],
    );
  });

  it("resident-reconciler: one replica of `reconcile --schedule`, replaced with Recreate; no reconciler CronJob", () => {
    const objects = get("resident-reconciler");
    const d = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-reconciler")!;
    assert.equal(d.spec.replicas, 1);
    assert.equal(d.spec.strategy.type, "Recreate");
    const args: string[] = podSpec(d)!.containers[0].args;
    assert.equal(args[0], "reconcile");
    assert.ok(flag(args, "schedule"), args.join(" "));
    assert.deepEqual(
      objects.filter((o) => o.kind === "CronJob").map((o) => o.metadata.name),
      [],
    );
  });

  it("resident-reconciler: serves its pass metrics on the port named metrics, the one the PodMonitor scrapes; the NetworkPolicy admits it from monitoring", () => {
    const objects = get("resident-reconciler");
    const d = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-reconciler")!;
    const container = podSpec(d)!.containers[0];
    const port = container.ports.find((p: { name: string }) => p.name === "metrics");
    assert.equal(flag(container.args, "metrics-port"), String(port.containerPort));
    const np = objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-reconciler")!;
    assert.deepEqual(np.spec.podSelector.matchLabels, d.spec.selector.matchLabels);
    assert.deepEqual(
      np.spec.ingress.flatMap((r: { ports: Array<{ port: number }> }) => r.ports.map((p) => p.port)),
      [port.containerPort],
    );
    const monitor = get("monitoring").find((o) => o.kind === "PodMonitor")!;
    assert.equal(monitor.spec.podMetricsEndpoints[0].port, "metrics");
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(d.spec.template.metadata.labels[k], v, k);
  });

  it("job-controller: two replicas of `reconcile --watch` rolled one at a time, spread over nodes; no reconciler CronJob", () => {
    const objects = get("job-controller");
    const d = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-reconciler")!;
    assert.equal(d.spec.replicas, 2, "the Lease makes a second replica a warm standby");
    assert.deepEqual([d.spec.strategy.type, d.spec.strategy.rollingUpdate.maxUnavailable], ["RollingUpdate", 0]);
    assert.equal(podSpec(d)!.topologySpreadConstraints[0].topologyKey, "kubernetes.io/hostname");
    const args: string[] = podSpec(d)!.containers[0].args;
    assert.deepEqual([args[0], args[1]], ["reconcile", "--watch"]);
    assert.equal(flag(args, "schedule"), undefined);
    assert.deepEqual(
      objects.filter((o) => o.kind === "CronJob").map((o) => o.metadata.name),
      [],
      "its full passes replace the CronJob's (which would only find the Lease busy)",
    );
  });

  it("job-controller: metrics on the port named metrics (the PodMonitor's), ready once synced; the NetworkPolicy admits the port from monitoring", () => {
    const objects = get("job-controller");
    const d = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "quartermaster-reconciler")!;
    const container = podSpec(d)!.containers[0];
    const port = container.ports.find((p: { name: string }) => p.name === "metrics");
    assert.equal(flag(container.args, "metrics-port"), String(port.containerPort));
    assert.deepEqual([container.livenessProbe.httpGet.path, container.readinessProbe.httpGet.path], ["/healthz", "/readyz"]);
    assert.equal(container.readinessProbe.httpGet.port, "metrics");
    const np = objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-reconciler")!;
    assert.deepEqual(np.spec.podSelector.matchLabels, d.spec.selector.matchLabels);
    assert.deepEqual(
      np.spec.ingress.flatMap((r: { ports: Array<{ port: number }> }) => r.ports.map((p) => p.port)),
      [port.containerPort],
    );
    const monitor = get("monitoring").find((o) => o.kind === "PodMonitor")!;
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(d.spec.template.metadata.labels[k], v, k);
  });

  it("monitoring: the Grafana dashboard ConfigMap in quartermaster, labelled for Grafana's sidecar, holding the dashboard JSON", () => {
    const cm = get("monitoring").find((o) => o.kind === "ConfigMap" && o.metadata.name === "quartermaster-grafana-dashboard")!;
    assert.equal(cm.metadata.namespace, NAMESPACE);
    assert.equal(cm.metadata.labels.grafana_dashboard, "1");
    assert.equal(JSON.parse(cm.data["quartermaster-dashboard.json"]).uid, "quartermaster");
  });
});

describe("the image (Dockerfile, .dockerignore)", () => {
  const text = readFileSync(join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
  const stages = text
    .split(/^FROM /m)
    .slice(1)
    .map((s) => ({
      from: s.split(/\s/)[0]!,
      lines: s
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("#")),
    }));
  const final = stages.at(-1)!;
  const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim());

  it("is multi-stage; the runtime stage has no shell (distroless), runs nothing at build time and copies only built output", () => {
    assert.ok(stages.length >= 2, `${stages.length} stage(s)`);
    assert.match(final.from, /^gcr\.io\/distroless\/nodejs\d+-debian\d+:nonroot$/);
    assert.deepEqual(
      final.lines.filter((l) => l.startsWith("RUN ")),
      [],
    );
    const copied = final.lines.filter((l) => l.startsWith("COPY ")).map((l) => l.split(/\s+/).slice(-1)[0]);
    assert.deepEqual(copied.sort(), ["./", "./bin", "./dist", "./node_modules"]);
  });

  it("its node_modules come from a stage that installs production dependencies only", () => {
    const from = final.lines.find((l) => l.startsWith("COPY --from=") && l.includes("node_modules"))!.match(/--from=(\S+)/)![1];
    const deps = text
      .split(/^FROM /m)
      .slice(1)
      .find((s) => new RegExp(`AS ${from}\\b`).test(s.split("\n")[0]!))!;
    assert.match(deps, /npm ci --omit=dev/);
  });

  it("runs as a non-root user with node as its exec-form entry point", () => {
    const user = final.lines.find((l) => l.startsWith("USER "))!.split(/\s+/)[1]!;
    assert.ok(Number(user.split(":")[0]) > 0, `USER ${user}`);
    const entry = JSON.parse(final.lines.find((l) => l.startsWith("ENTRYPOINT "))!.slice("ENTRYPOINT ".length)) as string[];
    assert.match(entry[0]!, /\/node$/);
    assert.equal(entry[1], "/app/bin/quartermaster.js");
  });

  it("the runtime user matches the manifests' runAsUser, and the build context leaves out what the image never needs", () => {
    const user = Number(
      final.lines
        .find((l) => l.startsWith("USER "))!
        .split(/\s+/)[1]!
        .split(":")[0],
    );
    for (const v of rendered)
      for (const o of v.objects) {
        const spec = podSpec(o);
        const runAs = spec?.securityContext?.runAsUser ?? spec?.containers?.[0]?.securityContext?.runAsUser;
        if (spec) assert.equal(runAs, user, `${v.name} ${o.kind}/${o.metadata.name}`);
      }
    for (const path of ["node_modules", "dist", ".git", "test", "certs"]) assert.ok(ignored.includes(path), `.dockerignore lacks ${path}`);
  });
});

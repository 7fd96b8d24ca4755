/**
 * The Helm chart (charts/quartermaster) with a real helm (test/e2e/helm/build.sh; QM_HELM_BIN is the binary):
 *
 * 1. `helm lint --strict` and `helm template` for each values combination; values that values.schema.json
 *    refuses (a bad mode, a misspelt key, an invalid policy) fail the render with the path named.
 * 2. Chart and kustomize render the same objects: each combination against the kustomize directory it stands
 *    for (the default values against manifests/overlays/self-managed, `certificates.mode=none` against
 *    manifests/base, ...), after dropping Helm's own labels (helm.sh/chart, app.kubernetes.io/managed-by,
 *    /instance, /version) and hook annotations (the self-managed certificates' first Job is a Helm hook),
 *    the hash suffix of the policy ConfigMap's name (kustomize's and the chart's hash
 *    differ) and the policy's comments (compared parsed), and ignoring order.
 * 3. Every combination is accepted by a server-side dry-run apply on the e2e control plane. cert-manager and
 *    Prometheus Operator kinds get minimal CRDs that accept any content (as test/e2e/deploy.test.ts does):
 *    the apiserver checks their envelope, test/unit/manifests.test.ts their schema in the kustomize renders
 *    the chart is compared with.
 * 4. `helm install` / `helm upgrade` / `helm uninstall` on the control plane (hooks off: it runs no pods): the
 *    upgrade keeps the caBundle written after install (the chart never sets it) and applies changed values.
 * The values table in charts/quartermaster/README.md is checked against values.yaml (without helm).
 * The knative overlay has no chart equivalent (the chart installs the Deployment form only).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments, parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { runCli } from "../../src/cli/commands.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { assertDryRunAccepted, installMinimalCrds } from "./harness/crds.js";
import { ROOT } from "./harness/webhook.js";

type Obj = Record<string, any>;

const HELM = process.env.QM_HELM_BIN;
const CHART = join(ROOT, "charts/quartermaster");
const NS = "quartermaster";
/** The e2e control plane's version: `helm template` assumes v1.20 otherwise, below the chart's kubeVersion. */
const KUBE = ["--kube-version", "1.33.0"];

/** Each values combination, and the kustomize directory rendering the same objects (if any). */
const CASES: Array<{ name: string; set: string[]; kustomize?: string; dropKinds?: string[] }> = [
  // The default values leave the Namespace to `helm install --create-namespace`; kustomize's is not compared.
  { name: "default values", set: [], kustomize: "manifests/overlays/self-managed", dropKinds: ["Namespace"] },
  { name: "certificates none, namespace created", set: ["certificates.mode=none", "namespace.create=true"], kustomize: "manifests/base" },
  { name: "self-managed certificates", set: ["certificates.mode=self-managed", "namespace.create=true"], kustomize: "manifests/overlays/self-managed" },
  { name: "cert-manager", set: ["certificates.mode=cert-manager", "namespace.create=true"], kustomize: "manifests/overlays/cert-manager" },
  {
    name: "resident reconciler",
    set: ["reconciler.mode=resident", "certificates.mode=none", "namespace.create=true"],
    kustomize: "manifests/overlays/resident-reconciler",
  },
  {
    name: "job controller (reconcile --watch)",
    set: ["reconciler.mode=watch", "certificates.mode=none", "namespace.create=true"],
    kustomize: "manifests/overlays/job-controller",
  },
  { name: "monitoring", set: ["monitoring.enabled=true", "certificates.mode=none", "namespace.create=true"], kustomize: "manifests/overlays/monitoring" },
  {
    name: "everything else",
    set: ["monitoring.enabled=true", "reconciler.mode=resident", "certificates.mode=cert-manager", "webhook.networkPolicy.enabled=false"],
  },
];

/**
 * The chart renders nothing until told the control plane's source (webhook.networkPolicy.apiserverFrom); the
 * kustomize base admits the webhook port from namespaces labelled quartermaster.dev/control-plane=true until
 * told. Every render here says the base's source, so the two agree, unless the case sets apiserverFrom itself.
 */
const BASE_SOURCE = ["--set-json", 'webhook.networkPolicy.apiserverFrom=[{"namespaceSelector":{"matchLabels":{"quartermaster.dev/control-plane":"true"}}}]'];
const RENDERS = new Set(["template", "lint", "install", "upgrade"]);

let helmHome = "";
/** `helm args`, with {@link BASE_SOURCE} on a render that names no apiserverFrom (`told: false`: as given). */
function helm(args: string[], told = true): Promise<{ code: number; stdout: string; stderr: string }> {
  if (told && RENDERS.has(args[0]!) && !args.some((a) => a.includes("apiserverFrom"))) args = [...args, ...BASE_SOURCE];
  const env = { ...process.env, HELM_CACHE_HOME: join(helmHome, "cache"), HELM_CONFIG_HOME: join(helmHome, "config"), HELM_DATA_HOME: join(helmHome, "data") };
  return new Promise((resolve) =>
    execFile(HELM!, args, { env, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

const setArgs = (set: string[]): string[] => set.flatMap((s) => ["--set", s]);
const parseStream = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);

async function template(set: string[]): Promise<Obj[]> {
  const r = await helm(["template", "quartermaster", CHART, "-n", NS, ...KUBE, ...setArgs(set)]);
  assert.equal(r.code, 0, r.stderr);
  return parseStream(r.stdout);
}

const HELM_LABELS = ["helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"];
const POLICY_NAME = /^quartermaster-policy-[a-z0-9]{10}$/;

/** One object as both renders must agree on it (see the module comment). */
function normalize(o: Obj): Obj {
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return POLICY_NAME.test(v) ? "quartermaster-policy-<hash>" : v;
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(structuredClone(o)) as Obj;
  const labels = out.metadata?.labels as Record<string, string> | undefined;
  if (labels) for (const l of HELM_LABELS) delete labels[l];
  const annotations = out.metadata?.annotations as Record<string, string> | undefined;
  if (annotations) {
    for (const a of Object.keys(annotations)) if (a.startsWith("helm.sh/hook")) delete annotations[a];
    if (Object.keys(annotations).length === 0) delete out.metadata.annotations;
  }
  if (out.kind === "ConfigMap" && out.metadata.name === "quartermaster-policy-<hash>") out.data = { "policy.yaml": parseYaml(out.data["policy.yaml"]) };
  return out;
}

const key = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
const byKey = (objects: Obj[]): Map<string, Obj> => new Map(objects.map((o) => normalize(o)).map((o) => [key(o), o]));

describe("the chart's values table (charts/quartermaster/README.md)", () => {
  it("documents every value in values.yaml, and only those", () => {
    const values = parseYaml(readFileSync(join(CHART, "values.yaml"), "utf8")) as Obj;
    const documented = [...readFileSync(join(CHART, "README.md"), "utf8").matchAll(/^\| `([\w.]+)` \|/gm)].map((m) => m[1]!);
    const lookup = (path: string): unknown => path.split(".").reduce<any>((v, k) => (v && typeof v === "object" ? v[k] : undefined), values);
    for (const d of documented) assert.notEqual(lookup(d), undefined, `${d} is documented but not in values.yaml`);
    const leaves = (v: unknown, path: string): string[] =>
      v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0 && !documented.includes(path)
        ? Object.entries(v).flatMap(([k, x]) => leaves(x, path ? `${path}.${k}` : k))
        : [path];
    for (const leaf of leaves(values, ""))
      assert.ok(
        documented.some((d) => leaf === d || leaf.startsWith(`${d}.`)),
        `${leaf} is not in the values table`,
      );
  });
});

describe("the Helm chart", { skip: HELM ? false : "QM_HELM_BIN is unset (QM_HELM_BIN=$(bash test/e2e/helm/build.sh)/helm)" }, () => {
  let cp: ControlPlane;
  const rendered = new Map<string, Obj[]>();

  before(async () => {
    helmHome = mkdtempSync(join(tmpdir(), "qm-helm-"));
    for (const c of CASES) rendered.set(c.name, await template(c.set));
    cp = await startControlPlane();
    await installMinimalCrds(cp, [...rendered.values()].flat());
    // As `helm install --create-namespace` would: namespaced objects are dry-run into it.
    assert.equal((await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } })).status, 201);
  });

  after(async () => {
    await cp?.stop();
    if (helmHome) rmSync(helmHome, { recursive: true, force: true });
  });

  for (const c of CASES) {
    it(`${c.name}: helm lint --strict passes`, async () => {
      const r = await helm(["lint", "--strict", CHART, "-n", NS, ...KUBE, ...setArgs(c.set)]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    });
  }

  // values.schema.json (src/manifests/chart.ts): the chart's own keys, and the policy's JSON Schema.
  const invalid: Array<[string, string, RegExp]> = [
    ["an unknown reconciler.mode", "reconciler.mode=daemon", /at '\/reconciler\/mode': value must be one of 'cronjob', 'resident', 'watch'/],
    ["an unknown certificates.mode", "certificates.mode=vault", /at '\/certificates\/mode': value must be one of 'self-managed', 'cert-manager', 'none'/],
    ["a misspelt key", "certificate.mode=none", /additional properties 'certificate' not allowed/],
    ["an invalid policy", "policy.clusterSpec.clusterDomain=Not_A_Domain", /at '\/policy\/clusterSpec\/clusterDomain': 'Not_A_Domain' does not match pattern/],
    ["an unknown policy field", "policy.limits.gpus=1", /at '\/policy\/limits': additional properties 'gpus' not allowed/],
    ["an apiserverFrom entry that is no CIDR", "webhook.networkPolicy.apiserverFrom={nope}", /at '\/webhook\/networkPolicy\/apiserverFrom\/0'/],
  ];
  for (const [name, set, message] of invalid) {
    it(`${name} fails the render with a clear error`, async () => {
      const r = await helm(["template", "quartermaster", CHART, "-n", NS, ...KUBE, "--set", set]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, message);
    });
  }

  it("without apiserverFrom the render fails, naming the value, an example and the documented opening", async () => {
    const r = await helm(["template", "quartermaster", CHART, "-n", NS, ...KUBE], false);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /webhook\.networkPolicy\.apiserverFrom is required/);
    assert.match(r.stderr, /apiserverFrom=\{10\.0\.0\.0\/24\}/);
    assert.match(r.stderr, /apiserverFrom=\{0\.0\.0\.0\/0,::\/0\}/);
    // Not needed when the chart makes no NetworkPolicy.
    assert.equal((await helm(["template", "quartermaster", CHART, "-n", NS, ...KUBE, "--set", "webhook.networkPolicy.enabled=false"], false)).code, 0);
  });

  it("the documented opening admits the webhook port from every address, and only then", async () => {
    const objs = await template(["webhook.networkPolicy.apiserverFrom={0.0.0.0/0,::/0}"]);
    const policy = objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "quartermaster-webhook")!;
    assert.deepEqual(policy.spec.ingress[0].from, [{ ipBlock: { cidr: "0.0.0.0/0" } }, { ipBlock: { cidr: "::/0" } }]);
  });

  it("an empty apiserverFrom or metricsFrom fails the render (an empty `from` admits every source: say 0.0.0.0/0 and ::/0)", async () => {
    for (const key of ["apiserverFrom", "metricsFrom"]) {
      const r = await helm(["template", "quartermaster", CHART, "-n", NS, ...KUBE, "--set-json", `webhook.networkPolicy.${key}=[]`]);
      assert.notEqual(r.code, 0, key);
      assert.match(r.stderr, new RegExp(`at '/webhook/networkPolicy/${key}': minItems: got 0, want 1`));
      if (key === "apiserverFrom") assert.match(r.stderr, /got array, want null/, "nor is it taken for `not set`");
    }
  });

  for (const c of CASES.filter((x) => x.kustomize)) {
    it(`${c.name}: the chart renders the same objects as kubectl kustomize ${c.kustomize}`, async () => {
      const k = await cp.kubectl(["kustomize", join(ROOT, c.kustomize!)]);
      assert.equal(k.code, 0, k.stderr);
      const want = byKey(parseStream(k.stdout).filter((o) => !(c.dropKinds ?? []).includes(o.kind)));
      const got = byKey(rendered.get(c.name)!);
      assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort(), "the same objects");
      for (const [k2, o] of want) assert.deepEqual(got.get(k2), o, k2);
    });
  }

  it("values reach the objects (a changed policy renames its ConfigMap, and the Deployment follows)", async () => {
    const base = await template([]);
    const changed = await template([
      "webhook.replicas=3",
      "policy.clusterSpec.clusterDomain=example.org",
      "reconciler.schedule=*/7 * * * *",
      "image.tag=9.9.9",
    ]);
    const find = (objs: Obj[], kind: string, name: RegExp) => objs.find((o) => o.kind === kind && name.test(o.metadata.name))!;
    const cm0 = find(base, "ConfigMap", POLICY_NAME);
    const cm1 = find(changed, "ConfigMap", POLICY_NAME);
    assert.notEqual(cm1.metadata.name, cm0.metadata.name);
    assert.equal(parseYaml(cm1.data["policy.yaml"]).clusterSpec.clusterDomain, "example.org");
    const dep = find(changed, "Deployment", /^quartermaster-webhook$/);
    assert.equal(dep.spec.replicas, 3);
    assert.equal(dep.spec.template.spec.containers[0].image, "quartermaster:9.9.9");
    assert.ok(dep.spec.template.spec.volumes.some((v: Obj) => v.configMap?.name === cm1.metadata.name));
    assert.equal(find(changed, "CronJob", /^quartermaster-reconciler$/).spec.schedule, "*/7 * * * *");
  });

  it("network sources: CIDRs become ipBlocks, peers are kept, on the webhook's and the resident reconciler's policies", async () => {
    const objs = await template([
      "webhook.networkPolicy.apiserverFrom={10.0.0.0/24,fd00:10::/64}",
      "webhook.networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=observability",
      "webhook.networkPolicy.metricsFrom[1]=192.168.0.0/16",
      "reconciler.mode=resident",
    ]);
    const policy = (name: string) => objs.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === name)!;
    const metrics = [{ namespaceSelector: { matchLabels: { team: "observability" } } }, { ipBlock: { cidr: "192.168.0.0/16" } }];
    assert.deepEqual(policy("quartermaster-webhook").spec.ingress[0].from, [{ ipBlock: { cidr: "10.0.0.0/24" } }, { ipBlock: { cidr: "fd00:10::/64" } }]);
    assert.deepEqual(policy("quartermaster-webhook").spec.ingress[1].from, metrics);
    assert.deepEqual(policy("quartermaster-reconciler").spec.ingress[0].from, metrics);
  });

  it("another release namespace reaches every reference to it", async () => {
    const r = await helm([
      "template",
      "quartermaster",
      CHART,
      "-n",
      "qm-elsewhere",
      ...KUBE,
      "--set",
      "certificates.mode=cert-manager",
      "--set",
      "monitoring.enabled=true",
    ]);
    assert.equal(r.code, 0, r.stderr);
    const text = r.stdout;
    assert.doesNotMatch(
      text.replace(/kube-node-lease/g, ""),
      /namespace: quartermaster\b|\.quartermaster\.svc|"quartermaster"\}|quartermaster\/quartermaster-webhook/,
    );
    const objs = parseStream(text);
    const mwc = objs.find((o) => o.kind === "MutatingWebhookConfiguration")!;
    assert.equal(mwc.webhooks[0].clientConfig.service.namespace, "qm-elsewhere");
    assert.equal(mwc.metadata.annotations["cert-manager.io/inject-ca-from"], "qm-elsewhere/quartermaster-webhook");
    assert.ok(mwc.webhooks[0].namespaceSelector.matchExpressions.some((e: Obj) => (e.values ?? []).includes("qm-elsewhere")));
  });

  for (const c of CASES) {
    it(`${c.name}: every object is accepted by a server-side dry-run apply`, async () => {
      const objects = rendered.get(c.name)!;
      const r = await cp.kubectl(["apply", "--dry-run=server", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }));
      assertDryRunAccepted(r, objects);
    });
  }

  // Last: it leaves a release behind until its uninstall. Hooks off: the control plane runs no pods, so the
  // self-managed certificates' Job would never finish.
  it("helm install, then helm upgrade keeps the caBundle that certs ensure or cert-manager wrote; helm uninstall removes the webhooks", async () => {
    const kube = ["--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"];
    const install = await helm(["install", "quartermaster", CHART, ...kube]);
    assert.equal(install.code, 0, install.stderr);
    const caBundle = Buffer.from(cp.tls.ca).toString("base64");
    for (const kind of ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"]) {
      const p = await cp.kubectl([
        "patch",
        kind,
        "quartermaster",
        "--type=json",
        "-p",
        JSON.stringify([{ op: "add", path: "/webhooks/0/clientConfig/caBundle", value: caBundle }]),
      ]);
      assert.equal(p.code, 0, p.stderr);
    }
    const upgrade = await helm(["upgrade", "quartermaster", CHART, ...kube, "--set", "webhook.replicas=3"]);
    assert.equal(upgrade.code, 0, upgrade.stderr);
    assert.equal((await cp.api("GET", `/apis/apps/v1/namespaces/${NS}/deployments/quartermaster-webhook`)).body.spec.replicas, 3);
    for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
      const r = await cp.api("GET", `/apis/admissionregistration.k8s.io/v1/${kind}/quartermaster`);
      assert.equal(r.body.webhooks[0].clientConfig.caBundle, caBundle, `${kind}: caBundle kept`);
    }
    const uninstall = await helm(["uninstall", "quartermaster", "--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"]);
    assert.equal(uninstall.code, 0, uninstall.stderr);
    for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
      assert.equal((await cp.api("GET", `/apis/admissionregistration.k8s.io/v1/${kind}/quartermaster`)).status, 404, kind);
    }
  });

  // The chart follows the policy in values (issue 47): a policy changing gpu.resources and jobKinds through install,
  // upgrade and rollback; after each step `doctor --policy <the policy in force>` finds the webhook configurations
  // and the confinement as that policy renders them. An upgrade whose renders are missing or stale is refused
  // and leaves the cluster as it was (test/integration/chart-policy.test.ts has the render table).
  it("helm install, upgrade and rollback with a policy changing gpu.resources and jobKinds: doctor finds the webhooks as the policy in force renders them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-chart-policy-"));
    try {
      const kube = ["--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"];
      const custom = {
        gpu: { resources: [{ pattern: "nvidia.com/gpu" }, { pattern: "intel.com/gpu" }] },
        jobKinds: [
          { kind: "PyTorchJob", group: "kubeflow.org", version: "v1", plural: "pytorchjobs", framework: "pytorch" },
          { kind: "JAXJob", group: "kubeflow.org", version: "v1", plural: "jaxjobs", framework: "jax" },
        ],
      };
      const changed = {
        gpu: { resources: [...custom.gpu.resources, { pattern: "amd.com/gpu" }] },
        jobKinds: [...custom.jobKinds, { kind: "TFJob", group: "kubeflow.org", version: "v1", plural: "tfjobs", framework: "tensorflow" }],
      };
      const policyFile = (name: string, policy: Obj): string => {
        const f = join(dir, `${name}.yaml`);
        writeFileSync(f, stringifyYaml(policy));
        return f;
      };
      const files = { custom: policyFile("custom", custom), changed: policyFile("changed", changed) };
      const cli = async (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(args, { stdout: (l) => out.push(l), stderr: (l) => err.push(l), cwd: ROOT, shutdown: new Promise(() => undefined) });
        return { code, stdout: out.join("\n"), stderr: err.join("\n") };
      };
      const chartValues = async (name: keyof typeof files): Promise<string> => {
        const r = await cli(["manifests", "chart-values", "--policy", files[name], "--namespace", NS]);
        assert.equal(r.code, 0, r.stderr);
        const f = join(dir, `${name}-values.yaml`);
        writeFileSync(f, r.stdout);
        return f;
      };
      /** doctor's findings on the webhook configurations and the confinement that are not ok, against `policy`. */
      const disagreements = async (step: string, policy?: keyof typeof files): Promise<void> => {
        const r = await cli(["doctor", "-o", "json", "--namespace", NS, "--kubeconfig", cp.kubeconfig, ...(policy ? ["--policy", files[policy]] : [])]);
        const report = JSON.parse(r.stdout) as { findings: Array<{ check: string; severity: string; subject: string; message: string }> };
        const checks = ["webhook-configuration", "webhook-render", "confinement"];
        const loud = report.findings.filter((f) => checks.includes(f.check) && f.severity !== "ok").map((f) => `${f.check} ${f.subject}: ${f.message}`);
        assert.deepEqual(loud, [], step);
        assert.ok(
          report.findings.some((f) => f.check === "webhook-render" && f.severity === "ok"),
          `${step}: doctor compared the renders`,
        );
      };
      const revision = async (): Promise<number> => {
        const r = await helm(["status", "quartermaster", "--kubeconfig", cp.kubeconfig, "-n", NS, "-o", "json"]);
        return (JSON.parse(r.stdout) as { version: number }).version;
      };

      assert.equal((await helm(["install", "quartermaster", CHART, ...kube])).code, 0, "install with the built-in policy");
      const builtIn = await revision();
      await disagreements("install, built-in policy");

      const refused = await helm(["upgrade", "quartermaster", CHART, ...kube, "--set-json", `policy=${JSON.stringify(custom)}`]);
      assert.notEqual(refused.code, 0, "an upgrade to the custom policy without its renders is refused");
      assert.match(refused.stderr, /quartermaster manifests chart-values --policy my-policy\.yaml --namespace quartermaster/);
      assert.equal(await revision(), builtIn, "and leaves the release as it was");
      await disagreements("after the refused upgrade, built-in policy");

      const customValues = await chartValues("custom");
      const up = await helm(["upgrade", "quartermaster", CHART, ...kube, "-f", customValues]);
      assert.equal(up.code, 0, up.stderr);
      const customRevision = await revision();
      await disagreements("upgrade with chart-values of the custom policy", "custom");
      const mwc = await cp.api("GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/quartermaster");
      assert.match(JSON.stringify(mwc.body.webhooks), /intel\.com\/gpu/);

      const stale = await helm(["upgrade", "quartermaster", CHART, ...kube, "-f", customValues, "--set-json", `policy=${JSON.stringify(changed)}`]);
      assert.notEqual(stale.code, 0, "an upgrade changing the policy with the previous renders is refused");
      assert.match(stale.stderr, /rendered for another policy/);
      await disagreements("after the refused stale upgrade, custom policy", "custom");

      const up2 = await helm(["upgrade", "quartermaster", CHART, ...kube, "-f", await chartValues("changed")]);
      assert.equal(up2.code, 0, up2.stderr);
      await disagreements("upgrade with chart-values of the changed policy", "changed");

      assert.equal((await helm(["rollback", "quartermaster", String(customRevision), "--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"])).code, 0);
      await disagreements("rollback to the custom policy's revision", "custom");
      assert.equal((await helm(["rollback", "quartermaster", String(builtIn), "--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"])).code, 0);
      await disagreements("rollback to the install, built-in policy");

      assert.equal((await helm(["uninstall", "quartermaster", "--kubeconfig", cp.kubeconfig, "-n", NS, "--no-hooks"])).code, 0);
      for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
        assert.equal((await cp.api("GET", `/apis/admissionregistration.k8s.io/v1/${kind}/quartermaster`)).status, 404, kind);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

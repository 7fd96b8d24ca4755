/**
 * End to end (issue 19): enforcement modes and PolicyReports against a real kube-apiserver.
 * - `warn` through the apiserver: kubectl prints the webhook's warning (rule and field path) and the pod is
 *   created; the same pod in a `deny` namespace is refused.
 * - The reconciler's pass (`reconciler.policyReports: true`, run as the reconciler's ServiceAccount with the
 *   RBAC of manifests/base): without the PolicyReport CRD it logs one line and writes nothing; with the CRD
 *   (test/e2e/crds/wgpolicyk8s.io_policyreports.yaml, kubernetes-sigs/wg-policy-prototypes' v1alpha2
 *   definition) it writes one report per opted-in namespace listing the violating objects; a fixed job is
 *   gone from the report at the next pass, and a namespace with nothing left loses its report.
 * - `quartermaster audit` lists the same violations.
 * - A report whose ownership label a tenant removed is still Quartermaster's (its managedFields name the field
 *   manager `quartermaster-reconciler`): the next pass rewrites it (label restored), and deletes it when its
 *   namespace has nothing left (issue 29).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { ROOT, applyOwnManifests, cli, createNamespace, installKubeflowCrds, startOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

const POLICY = [
  "limits:",
  "  container: {gpus: {nvidia.com/gpu: 4}}",
  "  job: {replicas: {Worker: 4}}",
  "enforcement:",
  "  namespaces:",
  "    - pattern: team-w",
  "      mode: warn",
  "reconciler:",
  "  policyReports: true",
  "",
].join("\n");

const FIELD = "spec.containers[0].resources.limits[nvidia.com/gpu]";

const gpuPod = (name: string, gpus: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: {
    containers: [
      {
        name: "c",
        image: "busybox",
        resources: { limits: { "nvidia.com/gpu": String(gpus) }, requests: { cpu: "100m", memory: "64Mi", "nvidia.com/gpu": String(gpus) } },
      },
    ],
  },
});
const pytorchJob = (name: string, workers: number) => {
  const template = { spec: { containers: [{ name: "pytorch", image: "pytorch/pytorch" }] } };
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name },
    spec: { runPolicy: { ttlSecondsAfterFinished: 600 }, pytorchReplicaSpecs: { Master: { replicas: 1, template }, Worker: { replicas: workers, template } } },
  };
};

describe("enforcement modes and PolicyReports against a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let reconciler: Awaited<ReturnType<ControlPlane["serviceAccount"]>>;
  let policyFile: string;

  const create = (ns: string, object: unknown) => cp.kubectl(["create", "-n", ns, "-f", "-"], JSON.stringify(object));
  const pass = async () => {
    const r = await cli(["reconcile", "--once", "--namespace", "quartermaster", "--policy", policyFile, "--kubeconfig", reconciler.kubeconfig]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    return r.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  const report = async (ns: string) => {
    const r = await cp.api("GET", `/apis/wgpolicyk8s.io/v1alpha2/namespaces/${ns}/policyreports/quartermaster`);
    return r.status === 404 ? undefined : (assert.equal(r.status, 200, JSON.stringify(r.body)), r.body);
  };
  const failing = (rep: any): string[] =>
    (rep.results as any[])
      .filter((x) => x.result !== "pass")
      .map((x) => `${x.resources[0].kind}/${x.resources[0].name} ${x.rule} ${x.result} ${x.properties.field}`)
      .sort();

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    for (const ns of ["team-p", "team-w"]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "elsewhere");
    await applyOwnManifests(cp);
    reconciler = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    policyFile = join(cp.dir, "qm-policy.yaml");
    writeFileSync(policyFile, POLICY);

    // What already runs, from before the limits: created before the webhooks are registered.
    for (const [ns, obj] of [
      ["team-p", gpuPod("big", 8)],
      ["team-p", gpuPod("small", 2)],
      ["team-p", pytorchJob("wide", 6)],
      ["elsewhere", gpuPod("ignored", 8)],
    ] as const) {
      const r = await create(ns, obj);
      assert.equal(r.code, 0, r.stderr);
    }

    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
    assert.equal(applied.code, 0, applied.stderr);
    let probes = 0;
    await cp.until("the pod validating webhook to take effect", async () => {
      const name = `probe-${++probes}`;
      await cp.api("POST", "/api/v1/namespaces/team-p/pods?dryRun=All", gpuPod(name, 1));
      return (await wh.awaitAdmissions(name, 2, 1000)).some((l) => l.webhook === "validate-pods");
    });
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("warn: the pod is created and kubectl prints the warning with rule and field path; deny: refused", async () => {
    const warned = await create("team-w", gpuPod("warned", 8));
    assert.equal(warned.code, 0, warned.stderr);
    const warnings = warned.stderr.split("\n").filter((l) => l.startsWith("Warning: "));
    // The mutating webhook's own warning, then the validating webhook's (the apiserver keeps both, in order).
    assert.deepEqual(warnings, [
      "Warning: quartermaster: added tolerations for nvidia.com/gpu",
      `Warning: quartermaster: container-limits (warn): ${FIELD}: 8 exceeds the per-containe…`,
    ]);
    const line = (await wh.awaitAdmissions("warned", 2)).find((l) => l.webhook === "validate-pods");
    assert.equal(line?.outcome, "allowed");
    assert.deepEqual(line?.admittedViolations, [
      { rule: "container-limits", mode: "warn", field: FIELD, message: "8 exceeds the per-container limit of 4", value: 8 },
    ]);

    const denied = await create("team-p", gpuPod("refused", 8));
    assert.notEqual(denied.code, 0);
    assert.match(
      denied.stderr,
      /denied the request: 1 policy violation: spec\.containers\[0\]\.resources\.limits\[nvidia\.com\/gpu\]: 8 exceeds the per-container limit of 4/,
    );
  });

  it("without the PolicyReport CRD: the pass logs one line and writes no report", async () => {
    const lines = await pass();
    assert.deepEqual(
      lines.filter((l) => String(l.msg).startsWith("policy reports")).map((l) => l.msg),
      ["policy reports: the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed; skipped"],
    );
  });

  it("with the CRD: one report per opted-in namespace listing the violating objects; a fixed job and a deleted pod are cleared", async () => {
    for (const args of [
      ["apply", "-f", join(ROOT, "test/e2e/crds/wgpolicyk8s.io_policyreports.yaml")],
      ["wait", "--for=condition=Established", "crd/policyreports.wgpolicyk8s.io", "--timeout=60s"],
    ]) {
      const r = await cp.kubectl(args);
      assert.equal(r.code, 0, r.stderr);
    }
    // Established is not served yet: for a moment the new resource answers 429 "storage is (re)initializing".
    await cp.until("PolicyReports to be served", async () => (await cp.api("GET", "/apis/wgpolicyk8s.io/v1alpha2/policyreports?limit=1")).status === 200);
    await pass();
    const p = await report("team-p");
    assert.equal(p.metadata.labels["app.kubernetes.io/managed-by"], "quartermaster");
    assert.deepEqual(failing(p), [`Pod/big container-limits fail ${FIELD}`, "PyTorchJob/wide job-replicas fail spec.pytorchReplicaSpecs.Worker.replicas"]);
    assert.deepEqual(p.summary, { pass: 1, fail: 2, warn: 0, error: 0, skip: 0 });
    const passing = (p.results as any[]).filter((x) => x.result === "pass").map((x) => x.resources[0].name);
    assert.deepEqual(passing, ["small"]);
    const bigResult = (p.results as any[]).find((x) => x.resources[0].name === "big");
    assert.equal(bigResult.policy, "validate-pods");
    assert.equal(bigResult.properties.mode, "deny");
    assert.match(bigResult.resources[0].uid, /^[0-9a-f-]{36}$/);
    assert.deepEqual(failing(await report("team-w")), [`Pod/warned container-limits warn ${FIELD}`]);
    assert.equal(await report("elsewhere"), undefined, "not opted in");

    // `quartermaster audit` sees the same (as the reconciler's ServiceAccount: its RBAC is enough).
    const audit = await cli(["audit", "-o", "json", "--policy", policyFile, "--kubeconfig", reconciler.kubeconfig]);
    assert.equal(audit.code, 1, audit.stderr);
    const listed = (JSON.parse(audit.stdout).objects as any[]).flatMap((o) =>
      o.violations.map((v: any) => `${o.namespace} ${o.kind}/${o.name} ${v.rule} ${v.mode}`),
    );
    assert.deepEqual(listed, ["team-p Pod/big container-limits deny", "team-p PyTorchJob/wide job-replicas deny", "team-w Pod/warned container-limits warn"]);

    // Fix the job (an UPDATE that makes it better is admitted); the warned pod goes away.
    const fixed = await cp.api(
      "PATCH",
      "/apis/kubeflow.org/v1/namespaces/team-p/pytorchjobs/wide",
      { spec: { pytorchReplicaSpecs: { Worker: { replicas: 4 } } } },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
    assert.equal((await cp.api("DELETE", "/api/v1/namespaces/team-w/pods/warned", { gracePeriodSeconds: 0 })).status, 200);
    await cp.until("the pod to be gone", async () => (await cp.api("GET", "/api/v1/namespaces/team-w/pods/warned")).status === 404);

    await pass();
    const after = await report("team-p");
    assert.deepEqual(failing(after), [`Pod/big container-limits fail ${FIELD}`]);
    assert.deepEqual(after.summary, { pass: 2, fail: 1, warn: 0, error: 0, skip: 0 });
    assert.equal(await report("team-w"), undefined, "nothing left in team-w: its report is deleted");
  });

  it("someone else's report named quartermaster (no label) is left alone", async () => {
    const theirs = await cp.api("POST", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-w/policyreports", {
      apiVersion: "wgpolicyk8s.io/v1alpha2",
      kind: "PolicyReport",
      metadata: { name: "quartermaster", namespace: "team-w" },
      summary: { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 },
    });
    assert.equal(theirs.status, 201, JSON.stringify(theirs.body));
    const r = await create("team-w", gpuPod("again", 8));
    assert.equal(r.code, 0, r.stderr);
    const lines = await pass();
    assert.ok(
      lines.some((l) => String(l.msg).includes("is not labelled app.kubernetes.io/managed-by=quartermaster")),
      JSON.stringify(lines.map((l) => l.msg)),
    );
    const still = await report("team-w");
    assert.equal(still.results, undefined, "not rewritten");
  });

  it("the label removed by a tenant: still Quartermaster's by its field manager, rewritten (label restored), then deleted", async () => {
    const unlabel = async () => {
      const r = await cp.kubectl(["label", "-n", "team-p", "policyreports.wgpolicyk8s.io/quartermaster", "app.kubernetes.io/managed-by-"]);
      assert.equal(r.code, 0, r.stderr);
      const rep = await report("team-p");
      assert.equal(rep.metadata.labels?.["app.kubernetes.io/managed-by"], undefined);
      assert.ok(
        (rep.metadata.managedFields as any[]).some((f) => f.manager === "quartermaster-reconciler"),
        JSON.stringify(rep.metadata.managedFields),
      );
      return rep;
    };
    const gone = async (path: string, what: string) => {
      assert.equal((await cp.api("DELETE", path, { gracePeriodSeconds: 0 })).status, 200);
      await cp.until(what, async () => (await cp.api("GET", path)).status === 404);
    };

    const before = await unlabel();
    await gone("/api/v1/namespaces/team-p/pods/big", "pod big to be gone");
    let lines = await pass();
    assert.ok(
      !lines.some((l) => String(l.msg).includes("not Quartermaster's") && JSON.stringify(l).includes("team-p")),
      JSON.stringify(lines.map((l) => l.msg)),
    );
    const rewritten = await report("team-p");
    assert.notEqual(rewritten.metadata.resourceVersion, before.metadata.resourceVersion, "rewritten");
    assert.equal(rewritten.metadata.labels["app.kubernetes.io/managed-by"], "quartermaster", "label restored");
    assert.deepEqual(failing(rewritten), [], "pod big is gone from it");
    assert.deepEqual(rewritten.summary, { pass: 2, fail: 0, warn: 0, error: 0, skip: 0 });

    await unlabel();
    await gone("/api/v1/namespaces/team-p/pods/small", "pod small to be gone");
    await gone("/apis/kubeflow.org/v1/namespaces/team-p/pytorchjobs/wide", "job wide to be gone");
    lines = await pass();
    assert.equal(await report("team-p"), undefined, "nothing left in team-p: its unlabelled report is deleted too");
  });
});

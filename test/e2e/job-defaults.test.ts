/**
 * End to end: `/mutate/jobs` behind a real kube-apiserver. A job created with `kubectl create -f` comes back
 * with the policy's job defaults in `spec.runPolicy` and kubectl prints a warning per field; what the job
 * sets is kept; a namespace's own defaults win; a job that existed before the webhook was registered is
 * never defaulted, not even when it is updated afterwards; Caffe2Job and namespaces that did not opt in
 * are left alone.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { createNamespace, installKubeflowCrds, type WebhookProcess, startOwnWebhook } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${++seq}`;

const POLICY = [
  "limits:",
  "  runPolicy: {maxTtlSecondsAfterFinished: 604800, allowedCleanPodPolicies: [All, Running, None]}",
  "jobDefaults:",
  "  ttlSecondsAfterFinished: 86400",
  "  cleanPodPolicy: Running",
  "  backoffLimit: 3",
  "namespaces:",
  "  - pattern: research-*",
  "    jobDefaults: {ttlSecondsAfterFinished: 600}",
  "",
].join("\n");

function pytorchJob(name: string, runPolicy?: Record<string, unknown>): Record<string, unknown> {
  const template = { spec: { containers: [{ name: "pytorch", image: "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime" }] } };
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name },
    spec: { ...(runPolicy ? { runPolicy } : {}), pytorchReplicaSpecs: { Master: { replicas: 1, template }, Worker: { replicas: 2, template } } },
  };
}

/**
 * The `/mutate/jobs` webhook as the mutating configuration carries it. Until manifests/base has it, the same
 * shape is added here from the job validating webhook's rules and selectors: CREATE only, fails open, reinvoked.
 */
function withMutateJobs(configs: Array<Record<string, any>>): Array<Record<string, any>> {
  const mutating = configs.find((c) => c.kind === "MutatingWebhookConfiguration")!;
  const hooks = mutating.webhooks as Array<Record<string, any>>;
  if (hooks.some((h) => String(h.clientConfig.url).endsWith("/mutate/jobs"))) return configs;
  const validating = configs.find((c) => c.kind === "ValidatingWebhookConfiguration")!;
  const jobs = (validating.webhooks as Array<Record<string, any>>).find((h) => String(h.clientConfig.url).endsWith("/validate/jobs"))!;
  hooks.push({
    name: "jobs.mutate.quartermaster.dev",
    admissionReviewVersions: ["v1"],
    sideEffects: "None",
    reinvocationPolicy: "IfNeeded",
    timeoutSeconds: jobs.timeoutSeconds,
    failurePolicy: "Ignore",
    matchPolicy: "Equivalent",
    clientConfig: { ...jobs.clientConfig, url: String(jobs.clientConfig.url).replace(/\/validate\/jobs$/, "/mutate/jobs") },
    rules: jobs.rules.map((r: Record<string, unknown>) => ({ ...r, operations: ["CREATE"] })),
    namespaceSelector: jobs.namespaceSelector,
  });
  return configs;
}

/** The configurations without `/mutate/jobs`: Quartermaster as it was before the upgrade. */
function withoutMutateJobs(configs: Array<Record<string, any>>): Array<Record<string, any>> {
  return configs.map((c) => ({
    ...c,
    webhooks: (c.webhooks as Array<Record<string, any>>).filter((h) => !String(h.clientConfig.url).endsWith("/mutate/jobs")),
  }));
}

describe("/mutate/jobs through a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  /** A PyTorchJob created before `/mutate/jobs` was registered. */
  const existing = unique("existing");

  const getJob = async (ns: string, name: string): Promise<Record<string, any>> => {
    const r = await cp.api("GET", `/apis/kubeflow.org/v1/namespaces/${ns}/pytorchjobs/${name}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };
  const create = (ns: string, object: Record<string, unknown>) => cp.kubectl(["create", "-n", ns, "-f", "-"], JSON.stringify(object));
  const apply = async (configs: Array<Record<string, any>>): Promise<void> => {
    const r = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(r.code, 0, r.stderr);
  };

  const until = (what: string, cond: () => boolean | Promise<boolean>, ms?: number): Promise<void> => cp.until(what, cond, ms);

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    for (const ns of ["team-a", "research-nlp"]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "team-b");
    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const configs = own.configs;

    // Before the upgrade: the webhooks without /mutate/jobs, and a job created then.
    await apply(withoutMutateJobs(configs));
    await until("the validating job webhook to take effect", async () => {
      const name = unique("probe-old");
      await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs?dryRun=All", pytorchJob(name));
      return (await wh.awaitAdmissions(name, 1, 1000)).some((l) => l.webhook === "validate-jobs");
    });
    const old = await create("team-a", pytorchJob(existing));
    assert.equal(old.code, 0, old.stderr);

    // The upgrade: /mutate/jobs registered.
    await apply(withMutateJobs(configs));
    await until("the mutating job webhook to take effect", async () => {
      const name = unique("probe");
      await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs?dryRun=All", pytorchJob(name));
      return (await wh.awaitAdmissions(name, 2, 1000)).some((l) => l.webhook === "mutate-jobs");
    });
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("kubectl create -f: kubectl prints a warning per default, and the job is stored with them", async () => {
    const name = unique("bert");
    const r = await create("team-a", pytorchJob(name));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`pytorchjob.kubeflow.org/${name} created`));
    const warnings = r.stderr.split("\n").filter((l) => l.startsWith("Warning: "));
    assert.deepEqual(warnings, [
      "Warning: quartermaster: set spec.runPolicy.ttlSecondsAfterFinished=86400 (platform default)",
      "Warning: quartermaster: set spec.runPolicy.cleanPodPolicy=Running (platform default)",
      "Warning: quartermaster: set spec.runPolicy.backoffLimit=3 (platform default)",
    ]);
    const stored = await getJob("team-a", name);
    assert.deepEqual(stored.spec.runPolicy, { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", backoffLimit: 3 });
    assert.equal(stored.spec.pytorchReplicaSpecs.Worker.replicas, 2, "the rest of the job as it was sent");
    const lines = await wh.awaitAdmissions(name, 2);
    assert.deepEqual(lines.map((l) => `${l.webhook} ${l.operation} ${l.outcome}`).sort(), ["mutate-jobs CREATE patched", "validate-jobs CREATE allowed"]);
  });

  it("what the job sets is kept; only the rest is filled", async () => {
    const name = unique("keep");
    const r = await create("team-a", pytorchJob(name, { cleanPodPolicy: "None", ttlSecondsAfterFinished: 30 }));
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      r.stderr.split("\n").filter((l) => l.startsWith("Warning: ")),
      ["Warning: quartermaster: set spec.runPolicy.backoffLimit=3 (platform default)"],
    );
    assert.deepEqual((await getJob("team-a", name)).spec.runPolicy, { cleanPodPolicy: "None", ttlSecondsAfterFinished: 30, backoffLimit: 3 });
  });

  it("a namespace's own defaults win over the top-level ones", async () => {
    const name = unique("nlp");
    const r = await create("research-nlp", pytorchJob(name));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Warning: quartermaster: set spec\.runPolicy\.ttlSecondsAfterFinished=600 \(platform default\)/);
    assert.deepEqual((await getJob("research-nlp", name)).spec.runPolicy, { ttlSecondsAfterFinished: 600, cleanPodPolicy: "Running", backoffLimit: 3 });
  });

  it("a job that existed before is not changed, not even by an update afterwards", async () => {
    assert.equal((await getJob("team-a", existing)).spec.runPolicy, undefined);
    const labelled = await cp.kubectl(["label", "-n", "team-a", "pytorchjob", existing, "team=ml"]);
    assert.equal(labelled.code, 0, labelled.stderr);
    assert.doesNotMatch(labelled.stderr, /Warning/);
    const after = await getJob("team-a", existing);
    assert.equal(after.metadata.labels.team, "ml");
    assert.equal(after.spec.runPolicy, undefined);
    const lines = await wh.awaitAdmissions(existing, 2);
    assert.deepEqual(
      lines.map((l) => `${l.webhook} ${l.operation}`),
      ["validate-jobs CREATE", "validate-jobs UPDATE"],
      "no /mutate/jobs call for the existing job",
    );
  });

  it("Caffe2Job (no runPolicy in caffe2-operator) is created as sent", async () => {
    const name = unique("caffe2");
    const job = {
      apiVersion: "kubeflow.org/v1alpha1",
      kind: "Caffe2Job",
      metadata: { name },
      spec: { backend: "redis", replicaSpecs: { replicas: 2, template: { spec: { containers: [{ name: "caffe2", image: "caffe2" }] } } } },
    };
    const r = await create("team-a", job);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /Warning/);
    const stored = (await cp.api("GET", `/apis/kubeflow.org/v1alpha1/namespaces/team-a/caffe2jobs/${name}`)).body;
    assert.deepEqual(stored.spec, job.spec);
    assert.ok((await wh.awaitAdmissions(name, 2)).some((l) => l.webhook === "mutate-jobs" && l.outcome === "allowed"));
  });

  it("a namespace that did not opt in never reaches Quartermaster: the job is stored as sent", async () => {
    const name = unique("elsewhere");
    const r = await create("team-b", pytorchJob(name));
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /Warning/);
    assert.equal((await getJob("team-b", name)).spec.runPolicy, undefined);
    await sleep(200);
    assert.deepEqual(wh.admissions(name), []);
  });
});

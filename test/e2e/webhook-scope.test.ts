/**
 * End to end: the webhook configurations that `quartermaster manifests webhooks --policy F` renders, applied
 * to a real kube-apiserver (which compiles their CEL), decide which pods reach the webhook server. Pods in a
 * namespace without the opt-in label, and in kube-system even with it, never reach it; in an opted-in
 * namespace a pod requesting a GPU resource reaches it exactly when the policy names that resource.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, webhookProcess, type WebhookProcess } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${++seq}`;

/** A pod without job labels (unless given) requesting one `resource`, or nothing. */
function pod(name: string, resource?: string, labels: Record<string, string> = {}): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels },
    spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox", ...(resource ? { resources: { limits: { [resource]: "1" } } } : {}) }] },
  };
}

describe("webhook scope and match conditions through a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  const policyFile = (): string => join(cp.dir, "scope-policy.yaml");

  /** Renders the configurations for `policy` (undefined: built-in) with the CLI, pointed at the local server, and applies them. */
  async function applyRender(policy: string | undefined): Promise<void> {
    const r = await cli(["manifests", "webhooks", ...(policy ? ["--policy", policy] : [])]);
    assert.equal(r.code, 0, r.stderr);
    const configs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Record<string, any>);
    for (const c of configs) {
      for (const h of c.webhooks)
        h.clientConfig = { url: `https://127.0.0.1:${wh.port}${h.clientConfig.service.path}`, caBundle: Buffer.from(wh.caPem).toString("base64") };
    }
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
  }

  /** Waits until a dry-run probe created with `probe` is seen by both pod webhooks (configuration changes apply asynchronously). */
  async function settle(ns: string, probe: (name: string) => Record<string, unknown>): Promise<void> {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const name = unique("probe");
      await cp.api("POST", `/api/v1/namespaces/${ns}/pods?dryRun=All`, probe(name));
      if ((await wh.awaitAdmissions(name, 2, 1000)).length >= 2) return;
      if (performance.now() > deadline) throw new Error(`the webhook configurations did not take effect\n${cp.logs()}`);
      await sleep(200);
    }
  }

  /** Creates the pod for real and reports whether any webhook saw it (waiting a moment for trailing log lines). */
  async function reachesWebhook(ns: string, body: Record<string, unknown>): Promise<{ seen: boolean; annotations: Record<string, string> }> {
    const name = (body.metadata as { name: string }).name;
    const r = await cp.api("POST", `/api/v1/namespaces/${ns}/pods`, body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const seen = (await wh.awaitAdmissions(name, 1, 1500)).length > 0;
    return { seen, annotations: r.body.metadata.annotations ?? {} };
  }

  before(async () => {
    cp = await startControlPlane();
    await createNamespace(cp, "team-in", { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "team-out");
    // kube-system carrying the opt-in label: excluded by name all the same.
    const labelled = await cp.kubectl(["label", "namespace", "kube-system", "quartermaster.dev/enabled=true"]);
    assert.equal(labelled.code, 0, labelled.stderr);
    // A policy that adds two GPU resources: one exact, one whose pattern becomes a CEL `matches`; and a cpu cap,
    // which a pod the webhooks should skip must never meet.
    writeFileSync(
      join(cp.dir, "scope-policy.yaml"),
      'gpu:\n  resources:\n    - pattern: nvidia.com/gpu\n    - pattern: example.com/gpu\n    - pattern: example.com/tpu-*-shared\nlimits:\n  container:\n    cpu: "8"\n',
    );
    wh = await webhookProcess({ kubeconfig: cp.kubeconfig, policy: policyFile() });
    await wh.start();
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("with the built-in render, a GPU-looking example.com/gpu reaches the webhook (gpu-unknown under a cap), example.com/tpu-v5-shared does not", async () => {
    await applyRender(undefined);
    await settle("team-in", (n) => pod(n, "nvidia.com/gpu"));
    assert.equal((await reachesWebhook("team-in", pod(unique("ex-builtin"), "example.com/gpu"))).seen, true);
    assert.equal((await reachesWebhook("team-in", pod(unique("tpu-builtin"), "example.com/tpu-v5-shared"))).seen, false);
    // A name that only contains "mig" or "gpu" is no GPU: such a pod never meets the webhooks (nor their cpu caps).
    assert.equal((await reachesWebhook("team-in", pod(unique("mig-builtin"), "example.com/migration-slot"))).seen, false);
    assert.equal((await reachesWebhook("team-in", pod(unique("nic-builtin"), "deviceclass.resource.kubernetes.io/nic.example.com"))).seen, false);
  });

  it("with the policy's render, it does, and so does a resource matching a pattern with a star inside", async () => {
    await applyRender(policyFile());
    await settle("team-in", (n) => pod(n, "example.com/gpu"));
    const r = await reachesWebhook("team-in", pod(unique("ex-policy"), "example.com/gpu"));
    assert.equal(r.seen, true);
    assert.equal((await reachesWebhook("team-in", pod(unique("tpu"), "example.com/tpu-v5-shared"))).seen, true);
    assert.equal((await reachesWebhook("team-in", pod(unique("tpu-no"), "example.com/tpu-v5"))).seen, false);
  });

  it("amd.com/gpu, dropped from this policy, still reaches it (it looks like a GPU); a pod with no GPU and no job labels never does", async () => {
    assert.equal((await reachesWebhook("team-in", pod(unique("amd"), "amd.com/gpu"))).seen, true);
    assert.equal((await reachesWebhook("team-in", pod(unique("cpu")))).seen, false);
  });

  it("a Caffe2 pod labelled by caffe2-operator reaches it without a GPU", async () => {
    const labels = {
      group_name: "kubeflow.org",
      caffe2_job_key: "team-in-resnet",
      caffe2_replica_type: "worker",
      caffe2_replica_index: "0",
      runtime_id: "abc12",
    };
    assert.equal((await reachesWebhook("team-in", pod(unique("caffe2"), undefined, labels))).seen, true);
  });

  /**
   * The condition's parts one by one (policy render: nvidia.com/gpu, example.com/gpu, example.com/tpu-*-shared),
   * as the apiserver evaluates them: which containers, which side of resources, which labels.
   */
  const container = (name: string, resources?: Record<string, unknown>): Record<string, unknown> => ({
    name,
    image: "busybox",
    ...(resources ? { resources } : {}),
  });
  const shaped = (name: string, spec: Record<string, unknown>, labels: Record<string, string> = {}): Record<string, unknown> => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels },
    spec: { restartPolicy: "Never", ...spec },
  });
  const gpu = { limits: { "nvidia.com/gpu": "1" } };
  /**
   * `init` init containers and `n` containers, each limiting `resources` extended resources that are no GPUs (or,
   * with none, cpu far over any cap); `gpuLast` makes the last container's last one `nvidia.com/gpu`.
   */
  const widePod = (init: number, n: number, resources: number, gpuLast = false): Record<string, unknown> => {
    const limits = resources === 0 ? { cpu: "1000" } : Object.fromEntries(Array.from({ length: resources }, (_, i) => [`example.com/r-${i}`, "1"]));
    const many = (prefix: string, k: number): Array<Record<string, unknown>> => Array.from({ length: k }, (_, i) => container(`${prefix}-${i}`, { limits }));
    const containers = many("c", n);
    if (gpuLast) containers[n - 1] = container(`c-${n - 1}`, { limits: { ...limits, [`example.com/r-${resources - 1}`]: undefined, "nvidia.com/gpu": "1" } });
    return { ...(init > 0 ? { initContainers: many("init", init) } : {}), containers };
  };
  const conditionCases: Array<{ name: string; body: (n: string) => Record<string, unknown>; seen: boolean }> = [
    {
      name: "a GPU in an init container only",
      body: (n) => shaped(n, { initContainers: [container("init", gpu)], containers: [container("main")] }),
      seen: true,
    },
    {
      name: "a GPU in the second container, none in the first",
      body: (n) => shaped(n, { containers: [container("a", { requests: { cpu: "1" } }), container("b", gpu)] }),
      seen: true,
    },
    {
      name: "a GPU requested and limited",
      body: (n) => shaped(n, { containers: [container("main", { requests: { "nvidia.com/gpu": "2" }, limits: { "nvidia.com/gpu": "2" } })] }),
      seen: true,
    },
    {
      name: "a pattern resource in an init container's limits",
      body: (n) => shaped(n, { initContainers: [container("init", { limits: { "example.com/tpu-v5-shared": "1" } })], containers: [container("main")] }),
      seen: true,
    },
    {
      name: "empty resources, cpu and memory only",
      body: (n) =>
        shaped(n, { containers: [container("a", {}), container("b", { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } })] }),
      seen: false,
    },
    {
      name: "the job-name label without a GPU",
      body: (n) => shaped(n, { containers: [container("main")] }, { "training.kubeflow.org/job-name": "mnist" }),
      seen: true,
    },
    {
      name: "only one of caffe2-operator's two labels",
      body: (n) => shaped(n, { containers: [container("main")] }, { caffe2_job_key: "team-in-resnet" }),
      seen: false,
    },
    {
      name: "other labels, no GPU",
      body: (n) => shaped(n, { containers: [container("main")] }, { app: "web", "training.kubeflow.org/replica-type": "worker" }),
      seen: false,
    },
    // The condition's work is bounded (CONDITION_MAX_CONTAINERS, CONDITION_MAX_RESOURCES: requests and limits
    // together, and the apiserver defaults an extended resource's request to its limit, so 16 limits are 32
    // entries): a wider pod is sent on unwalked, and the webhooks' guard skips it unless it is a training pod.
    // Unbounded, the 1,500-container pod passed the apiserver's CEL budget, and the failing condition took the
    // validating webhook's failurePolicy (Fail): 403 for a pod that is none of Quartermaster's business. Every
    // case here must be created.
    { name: "1,500 containers and init containers of 16 resources, no GPU (sent on, skipped)", body: (n) => shaped(n, widePod(500, 1000, 16)), seen: true },
    { name: "65 containers over the cpu cap, no GPU (one over the bound: sent on, skipped)", body: (n) => shaped(n, widePod(0, 65, 0)), seen: true },
    { name: "a container of 17 resources, no GPU (34 entries: sent on, skipped)", body: (n) => shaped(n, widePod(0, 1, 17)), seen: true },
    { name: "64 containers of 16 resources, no GPU (the most the condition walks)", body: (n) => shaped(n, widePod(0, 64, 16)), seen: false },
    // (With 16 resources each it would be over the validating webhook's own cost bound: denied, as intended.)
    { name: "64 containers of 8 resources, a GPU in the last one's limits", body: (n) => shaped(n, widePod(0, 64, 8, true)), seen: true },
  ];
  for (const c of conditionCases) {
    it(`the condition, through the apiserver: ${c.name} ${c.seen ? "reaches" : "does not reach"} the webhook`, async () => {
      assert.equal((await reachesWebhook("team-in", c.body(unique("cond")))).seen, c.seen);
    });
  }

  const outOfScope: Array<{ name: string; ns: string }> = [
    { name: "a namespace without the opt-in label", ns: "team-out" },
    { name: "kube-system, although labelled to opt in", ns: "kube-system" },
  ];
  for (const c of outOfScope) {
    it(`pods in ${c.name} are neither seen nor mutated`, async () => {
      for (const resource of ["nvidia.com/gpu", "example.com/gpu"]) {
        const r = await reachesWebhook(c.ns, pod(unique("out"), resource, { "training.kubeflow.org/job-name": "mnist" }));
        assert.equal(r.seen, false, `${resource} in ${c.ns} reached the webhook`);
        assert.equal(r.annotations["quartermaster.dev/mutations"], undefined);
      }
    });
  }
});

/**
 * End to end: a job's GPU cap is not passed by creating its ResourceClaimTemplate again asking more (red team), on
 * a real kube-apiserver with the real job and resourceclaim controllers (kube-controller-manager), the webhook
 * running as its ServiceAccount with the manifests' RBAC. Policy `pod.gpus: 8, job.gpus: 8`:
 * - a batch Job of 4 pods × a 2-GPU template runs its 4 pods (8 GPUs: the cap); the template is deleted and created
 *   again asking 8 (within the per-pod cap, so its own CREATE is allowed); a pod is deleted: the job controller's
 *   replacement (the Job now 4 × 8 = 32 GPUs) is refused at its CREATE, its FailedCreate Event says why, and only
 *   the three pods made before remain;
 * - a suspended Job admitted with a 2-GPU template, the template created again asking 8, then resumed: the resume is
 *   refused (judged like a CREATE, the template read as it is now).
 * Before this, both got 32 GPUs under a cap of 8. Skipped where `resource.k8s.io/v1` is not served (Kubernetes < 1.34).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { createNamespace, registerOwnWebhook, waitForPodWebhook, type WebhookProcess } from "./harness/webhook.js";

const NS = "swap";
const POLICY = `
limits:
  pod: { gpus: 8 }
  job: { gpus: 8 }
`;
const DRA = "/apis/resource.k8s.io/v1";

const template = (name: string, count: number) => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name },
  spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count } }] } } },
});

const job = (name: string, claim: string, suspend = false) => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name },
  spec: {
    parallelism: 4,
    completions: 4,
    suspend,
    backoffLimit: 100,
    template: {
      spec: {
        restartPolicy: "Never",
        resourceClaims: [{ name: "gpus", resourceClaimTemplateName: claim }],
        containers: [{ name: "main", image: "registry.invalid/train:1", resources: { claims: [{ name: "gpus" }] } }],
      },
    },
  },
});

type Obj = Record<string, any>;

describe("a ResourceClaimTemplate created again asking more does not pass a job's GPU cap (real job and resourceclaim controllers)", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess | undefined;
  let served = true;

  before(async () => {
    cp = await startControlPlane({ controllers: ["job-controller", "resourceclaim-controller"] });
    served = (await cp.api("GET", DRA)).status === 200;
    if (!served) return;
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    wh = await registerOwnWebhook(cp, POLICY);
    await waitForPodWebhook(cp, wh, NS);
  });
  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  const podsOf = async (jobName: string): Promise<Obj[]> =>
    (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?labelSelector=batch.kubernetes.io/job-name%3D${jobName}`)).body.items.filter(
      (p: Obj) => !p.metadata.deletionTimestamp,
    );
  /** Deletes the template and creates it again asking `count` (what `kubectl replace --force` does). */
  const swap = async (name: string, count: number) => {
    assert.equal((await cp.api("DELETE", `${DRA}/namespaces/${NS}/resourceclaimtemplates/${name}`)).status, 200);
    const again = await cp.api("POST", `${DRA}/namespaces/${NS}/resourceclaimtemplates`, template(name, count));
    assert.equal(again.status, 201, `the template's own CREATE is within the per-pod cap: ${JSON.stringify(again.body)}`);
  };

  it("the job controller's replacement pods, made from the template created again, are refused", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    assert.equal((await cp.api("POST", `${DRA}/namespaces/${NS}/resourceclaimtemplates`, template("two", 2))).status, 201);
    const made = await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, job("run", "two"));
    assert.equal(made.status, 201, JSON.stringify(made.body));
    await cp.until("the Job's 4 pods (4 × 2 GPUs: the cap)", async () => (await podsOf("run")).length === 4, 60_000, 250);

    await swap("two", 8);
    // One pod deleted (one failure: the job controller's first back-off, 10 s, before it makes a replacement).
    const before = (await podsOf("run")).map((p) => p.metadata.name as string);
    const gone = (await podsOf("run"))[0]!;
    assert.equal((await cp.api("DELETE", `/api/v1/namespaces/${NS}/pods/${gone.metadata.name}`, { gracePeriodSeconds: 0 })).status, 200);

    const refusals = async (): Promise<Obj[]> =>
      (await cp.api("GET", `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name%3Drun,reason%3DFailedCreate`)).body.items.filter(
        (e: Obj) => e.involvedObject.kind === "Job",
      );
    await cp
      .until("the job controller's FailedCreate Events", async () => (await refusals()).length > 0, 90_000, 500)
      .catch(async (err: Error) => {
        const status = (await cp.api("GET", `/apis/batch/v1/namespaces/${NS}/jobs/run`)).body.status;
        const events = (await cp.api("GET", `/api/v1/namespaces/${NS}/events`)).body.items.map(
          (e: Obj) => `${e.involvedObject.kind}/${e.involvedObject.name} ${e.reason}: ${e.message}`,
        );
        const pods = (await cp.api("GET", `/api/v1/namespaces/${NS}/pods`)).body.items.map(
          (p: Obj) => `${p.metadata.name} ${p.status?.phase} ${p.metadata.deletionTimestamp ?? ""} ${JSON.stringify(p.metadata.finalizers)}`,
        );
        throw new Error(`${err.message.split("\n")[0]}\njob status ${JSON.stringify(status)}\nevents:\n${events.join("\n")}\npods:\n${pods.join("\n")}`);
      });
    const message = (await refusals()).map((e) => e.message).join("\n");
    assert.match(message, /denied the request/);
    assert.match(message, /Job swap\/run: the Job runs 32 GPUs at once in all \(4 pods × 8\), over the per-job limit of 8/);
    // The three pods made before stay; no replacement got through.
    assert.deepEqual((await podsOf("run")).map((p) => p.metadata.name).sort(), before.filter((n) => n !== gone.metadata.name).sort());
  });

  it("a suspended Job resumed after its template was created again asking more: the resume is refused", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    assert.equal((await cp.api("POST", `${DRA}/namespaces/${NS}/resourceclaimtemplates`, template("held", 2))).status, 201);
    assert.equal((await cp.api("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, job("held", "held", true))).status, 201);
    await swap("held", 8);
    const resumed = await cp.api(
      "PATCH",
      `/apis/batch/v1/namespaces/${NS}/jobs/held`,
      { spec: { suspend: false } },
      {
        "Content-Type": "application/merge-patch+json",
      },
    );
    assert.equal(resumed.status, 403, JSON.stringify(resumed.body));
    assert.match(resumed.body.message, /32 GPUs at once in all \(4 pods × 8\), over the per-job limit of 8/);
    assert.deepEqual(await podsOf("held"), []);
  });
});

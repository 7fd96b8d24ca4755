/**
 * Issue 33 through the real Kueue v0.19.2 (QM_KUEUE_BIN, `./harness/kueue.ts`) and Quartermaster's webhooks as
 * its manifests install them (`startOwnWebhook`: the server runs as its ServiceAccount, so the base's RBAC is what
 * lets it read Kueue's queues and write Events), both registered on the e2e control plane:
 *
 * 1. queue-capacity: a queued PyTorchJob larger than its ClusterQueue can ever admit is refused at CREATE, naming
 *    the queue, the flavor and its quota (the webhook read the LocalQueue, ClusterQueue and ResourceFlavor);
 * 2. a refused admission: the ClusterQueue's one flavor, `h100`, has `nodeLabels` selecting an accelerator the
 *    policy's `allowedAccelerators` excludes. A queued PyTorchJob within quota is created (suspended by Kueue's
 *    webhook, outfitted and admitted by Quartermaster's), its Workload admitted into `h100`, and Kueue's
 *    unsuspend UPDATE refused by `/validate/jobs` naming the node labels Kueue wrote; the job stays suspended, and
 *    a Warning Event `KueueAdmissionRefused` from `quartermaster-webhook` on the job says the same, once while
 *    Kueue retries the UPDATE within the writer's minute.
 *
 * No training operator, scheduler or nodes: nothing here needs pods. Every wait is bounded (cp.until).
 * Skips, saying why, when QM_KUEUE_BIN is unset.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { type Controller, createQueues, hasCondition, installKueueCrds, kueueBin, QUEUE_LABEL, startKueue, workloadFor } from "./harness/kueue.js";
import { createNamespace, installKubeflowCrds, registerOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

type Obj = Record<string, any>;
const bins = kueueBin();
const SKIP = "skip" in bins ? bins.skip : false;

const NS = "team-strand";
const CLUSTER_QUEUE = "strand-cq";
const LOCAL_QUEUE = "training";
const PRODUCT = "nvidia.com/gpu.product";
const H100 = "H100-SXM5-80GB";
const GPU = "nvidia.com/gpu";
const POLICY = ["limits:", "  allowedAccelerators: [A100-SXM4-80GB]", ""].join("\n");

/** A queued PyTorchJob, Master 1 and `workers` Workers of 2 GPUs each; never sets `suspend`. */
const pytorchJob = (name: string, workers: number): Obj => {
  const template = {
    spec: { containers: [{ name: "pytorch", image: "registry.invalid/train:1", resources: { limits: { [GPU]: "2" } } }] },
  };
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name, labels: { [QUEUE_LABEL]: LOCAL_QUEUE } },
    spec: {
      runPolicy: { ttlSecondsAfterFinished: 600 },
      pytorchReplicaSpecs: { Master: { replicas: 1, template }, Worker: { replicas: workers, template } },
    },
  };
};
const JOBS = `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`;

describe("Kueue's admission refused by Quartermaster: an Event on the job; a job over its queue refused at CREATE", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let kueue: Controller | undefined;
  let wh: WebhookProcess | undefined;
  const started = performance.now();

  before(async () => {
    if ("skip" in bins) return;
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    await installKueueCrds(cp);
    kueue = await startKueue(cp, bins.bin);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    await createQueues(cp, {
      namespace: NS,
      flavors: [{ name: "h100", nodeLabels: { [PRODUCT]: H100 } }],
      clusterQueue: CLUSTER_QUEUE,
      localQueue: LOCAL_QUEUE,
      quota: () => ({ [GPU]: 8, cpu: 64, memory: "512Gi" }),
    });
    wh = await registerOwnWebhook(cp, POLICY);
  });
  after(async () => {
    await wh?.stop();
    await kueue?.stop();
    await cp?.stop();
    console.log(`kueue-strand suite run time: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  const logs = (): string =>
    `\n--- kueue\n${kueue?.logs(30) ?? ""}\n--- quartermaster\n${(wh?.lines ?? [])
      .slice(-15)
      .map((l) => JSON.stringify(l))
      .join("\n")}`;

  it("queue-capacity: a queued job over what its ClusterQueue can ever admit is refused at CREATE, naming queue, flavor and quota", async () => {
    let reply: Obj = {};
    // The configurations take a moment to be seen: retried until Quartermaster answers (Kueue alone would store it).
    await cp.until(
      "Quartermaster's /validate/jobs to refuse the oversized queued job",
      async () => {
        reply = await cp.api("POST", `${JOBS}?dryRun=All`, pytorchJob("too-big", 7));
        return reply.status === 403 || reply.status === 400 || reply.status === 422;
      },
      60_000,
      250,
    );
    const message = String(reply.body?.message);
    console.log(`Refusal: ${message}`);
    assert.match(message, /Worker asks for 7 × 2 = 14 nvidia\.com\/gpu/, message);
    assert.match(
      message,
      /more than ClusterQueue strand-cq \(queue training\) can ever admit into one flavor: h100 8 \(nominalQuota 8, no cohort to borrow from\)/,
      message,
    );
  });

  it("Kueue's unsuspend UPDATE into a flavor the policy does not allow is refused, the job stays suspended, and an Event says why", async () => {
    const r = await cp.api("POST", JOBS, pytorchJob("strand", 1));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.spec.runPolicy.suspend, true, "Kueue's webhook suspended the job at CREATE");
    // Outfitted at CREATE by /mutate/jobs (a queued job's templates get the pod mutations Kueue reads).
    assert.match(String(r.body.spec.pytorchReplicaSpecs.Worker.template.metadata?.annotations?.["quartermaster.dev/mutations"]), /resources/);
    const uid = String(r.body.metadata.uid);

    await cp.until(
      "the Workload of PyTorchJob strand to be admitted into h100",
      async () => hasCondition(await workloadFor(cp, NS, "PyTorchJob", "strand"), "QuotaReserved"),
      120_000,
      250,
    );
    let events: Obj[] = [];
    await cp
      .until(
        "an Event KueueAdmissionRefused on PyTorchJob strand",
        async () => {
          const list = await cp.api("GET", `/api/v1/namespaces/${NS}/events?fieldSelector=reason%3DKueueAdmissionRefused`);
          events = (list.body.items ?? []) as Obj[];
          return events.length > 0;
        },
        120_000,
        250,
      )
      .catch((err: unknown) => assert.fail(`${String(err)}${logs()}`));
    const e = events[0]!;
    assert.deepEqual(
      {
        kind: e.involvedObject.kind,
        apiVersion: e.involvedObject.apiVersion,
        name: e.involvedObject.name,
        namespace: e.involvedObject.namespace,
        uid: e.involvedObject.uid,
      },
      { kind: "PyTorchJob", apiVersion: "kubeflow.org/v1", name: "strand", namespace: NS, uid },
    );
    assert.equal(e.type, "Warning");
    assert.equal(e.source?.component, "quartermaster-webhook");
    assert.match(
      String(e.message),
      /nodeSelector\[nvidia\.com\/gpu\.product\]: the node labels Kueue wrote \(nvidia\.com\/gpu\.product=H100-SXM5-80GB\) at admission from queue training: accelerator H100-SXM5-80GB is not allowed/,
    );
    // The webhook logged the same refusal; the job is still suspended (Kueue's UPDATE did not go through).
    assert.ok(
      wh!.lines.some((l) => /Kueue's admission of a job refused/.test(String(l.msg)) && l.job === `${NS}/strand`),
      `no refusal log line${logs()}`,
    );
    // Kueue retries the refused UPDATE with back-off; within the writer's minute the same Event is written once.
    const refusals = () => wh!.lines.filter((l) => /Kueue's admission of a job refused/.test(String(l.msg)) && l.job === `${NS}/strand`).length;
    await cp.until("Kueue to retry the refused UPDATE", () => refusals() >= 2, 60_000, 250);
    const again = await cp.api("GET", `/api/v1/namespaces/${NS}/events?fieldSelector=reason%3DKueueAdmissionRefused`);
    assert.equal(again.body.items.length, 1, `${refusals()} refusals, Events: ${JSON.stringify(again.body.items.map((x: Obj) => x.metadata.name))}`);
    const job = (await cp.api("GET", `${JOBS}/strand`)).body;
    assert.equal(job.spec.runPolicy.suspend, true);
    assert.equal(job.spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector?.[PRODUCT], undefined);
    console.log(`Event: ${e.message}`);
  });
});

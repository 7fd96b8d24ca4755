/**
 * @module
 * The Trainer v2 conformance stack, shared by `test/conformance/trainer.test.ts` and
 * `test/conformance/trainer-tfconfig.test.ts`: the e2e control plane with kube-controller-manager's
 * job-controller, Trainer v2's and the training operator v1's CRDs, the JobSet controller, Trainer v2's
 * controller manager and the v1 training operator, Trainer's default runtimes, and Quartermaster's webhooks as
 * its manifests install them (`startOwnWebhook`), in effect before it resolves. Stopped in the reverse order.
 */
import assert from "node:assert/strict";
import { startControlPlane, type ControlPlane } from "./controlplane.js";
import { installOperatorCrds, startOperator, type Operator } from "./operator.js";
import { JOB_CONTROLLER, installDefaultRuntimes, installTrainerCrds, startJobSet, startTrainer, type Controller } from "./trainer.js";
import { createNamespace, startOwnWebhook, waitForPodWebhook, type WebhookProcess } from "./webhook.js";

export interface TrainerStack {
  cp: ControlPlane;
  jobset: Controller;
  trainer: Controller;
  operator: Operator;
  wh: WebhookProcess;
  stop(): Promise<void>;
}

export interface TrainerStackOptions {
  bins: { trainer: string; jobset: string; operator: string };
  /** Quartermaster's policy (YAML). */
  policy: string;
  /** Namespaces to create: opted in to Quartermaster, or not; the first opted-in one probes the webhooks. */
  namespaces: Array<{ name: string; optedIn: boolean }>;
}

export async function startTrainerStack(o: TrainerStackOptions): Promise<TrainerStack> {
  const cp = await startControlPlane({ controllers: [JOB_CONTROLLER] });
  const started: Array<{ stop(): Promise<void> }> = [];
  const stop = async (): Promise<void> => {
    for (const s of started.reverse()) await s.stop();
    await cp.stop();
  };
  try {
    await installTrainerCrds(cp);
    await installOperatorCrds(cp);
    const jobset = await startJobSet(cp, o.bins.jobset);
    started.push(jobset);
    const trainer = await startTrainer(cp, o.bins.trainer);
    started.push(trainer);
    const operator = await startOperator(cp, o.bins.operator);
    started.push(operator);
    const runtimes = await installDefaultRuntimes(cp);
    assert.ok(runtimes.includes("torch-distributed"), `default runtimes: ${runtimes.join(", ")}`);
    const own = await startOwnWebhook(cp, o.policy);
    started.push({ stop: () => own.wh.stop() });
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
    assert.equal(applied.code, 0, applied.stderr);
    for (const ns of o.namespaces) await createNamespace(cp, ns.name, ns.optedIn ? { "quartermaster.dev/enabled": "true" } : {});
    const probe = o.namespaces.find((n) => n.optedIn);
    if (probe) await waitForPodWebhook(cp, own.wh, probe.name);
    return { cp, jobset, trainer, operator, wh: own.wh, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

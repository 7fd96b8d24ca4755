/**
 * End to end, under faults: what a real kube-apiserver does with Quartermaster's webhook configurations
 * (rendered from manifests/) when a webhook process dies or hangs, and what the mutating webhook does
 * when the apiserver it reads jobs from is unreachable, hung or slow.
 *
 * The mutating and validating webhooks run in two processes here, so each can fail alone and the
 * failurePolicy of each shows. admission.test.ts covers the single process killed outright (training
 * pods refused; other namespaces, non-training pods and kube-system unaffected); this file adds the
 * mutating side alone (Ignore), job validation, hung processes (the timeout path), and job-lookup faults.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { startTcpProxy, type TcpProxy } from "./harness/tcp-proxy.js";
import {
  applyOwnManifests,
  createNamespace,
  installKubeflowCrds,
  renderWebhookConfigurations,
  webhookProcess,
  type WebhookProcess,
} from "./harness/webhook.js";

let seq = 0;
const unique = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${++seq}`;

/** The webhooks' timeout in manifests/ (asserted below), and the policy's default job-lookup bound. */
const WEBHOOK_TIMEOUT_S = 5;
const JOB_LOOKUP_TIMEOUT_MS = 1500;

type Obj = Record<string, any>;

/** A training pod: the Kubeflow job-name label and a GPU, so both matchConditions and the mutations apply. */
function trainingPod(name: string, opts: { labels?: Record<string, string>; gpu?: boolean; owner?: { job: string; uid: string } } = {}): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      labels: opts.labels ?? { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker" },
      ...(opts.owner
        ? {
            ownerReferences: [
              { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: opts.owner.job, uid: opts.owner.uid, controller: true, blockOwnerDeletion: true },
            ],
          }
        : {}),
    },
    spec: {
      restartPolicy: "Never",
      containers: [
        { name: "tensorflow", image: "tensorflow/tensorflow:2.16.1", ...(opts.gpu === false ? {} : { resources: { limits: { "nvidia.com/gpu": "1" } } }) },
      ],
    },
  };
}

function tfjob(name: string): Obj {
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "TFJob",
    metadata: { name },
    spec: { tfReplicaSpecs: { Worker: { replicas: 2, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
  };
}

/** True when Quartermaster's mutating webhook outfitted `pod` (its record annotation and GPU toleration). */
function outfitted(pod: Obj): boolean {
  const mark = pod.metadata?.annotations?.["quartermaster.dev/mutations"];
  const toleration = (pod.spec?.tolerations ?? []).some((t: Obj) => t.key === "nvidia.com/gpu" && t.operator === "Exists");
  assert.equal(mark !== undefined, toleration, `record annotation and toleration disagree: ${JSON.stringify(pod.metadata?.annotations)}`);
  return toleration;
}

describe("faults: webhook processes down or hung, the apiserver unreachable or slow during a job lookup", () => {
  let cp: ControlPlane;
  let mutator: WebhookProcess;
  let validator: WebhookProcess;
  let apiProxy: TcpProxy;
  let configs: Obj[];

  const createPod = (ns: string, pod: Obj, dryRun = false) => cp.api("POST", `/api/v1/namespaces/${ns}/pods${dryRun ? "?dryRun=All" : ""}`, pod);
  /** Creates and times a pod; the time is reported, never asserted. */
  async function timedCreate(t: TestContext, what: string, ns: string, pod: Obj): Promise<Awaited<ReturnType<typeof createPod>>> {
    const started = performance.now();
    const r = await createPod(ns, pod);
    t.diagnostic(`${what}: ${r.status} after ${Math.round(performance.now() - started)} ms`);
    return r;
  }

  const until = (what: string, cond: () => boolean | Promise<boolean>, ms?: number): Promise<void> => cp.until(what, cond, ms);

  /** Both webhooks answer again: a dry-run training pod comes back outfitted and is not refused. */
  const healthy = (): Promise<void> =>
    until("both webhooks to answer", async () => {
      const r = await createPod("team-a", trainingPod(unique("probe")), true);
      return r.status === 201 && outfitted(r.body);
    });

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    await createNamespace(cp, "team-a", { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "team-b");
    // kube-system labelled as if opted in: the configurations must exclude it by name regardless.
    const label = await cp.kubectl(["label", "namespace", "kube-system", "quartermaster.dev/enabled=true", "--overwrite"]);
    assert.equal(label.code, 0, label.stderr);
    await applyOwnManifests(cp);
    const sa = await cp.serviceAccount("quartermaster", "quartermaster-webhook");

    // The mutating webhook reads jobs through a proxy in front of the apiserver, so lookups can be failed.
    apiProxy = await startTcpProxy(cp.apiPort);
    const proxied = join(cp.dir, "kubeconfig-webhook-via-proxy");
    writeFileSync(proxied, readFileSync(sa.kubeconfig, "utf8").replace(`https://127.0.0.1:${cp.apiPort}`, `https://127.0.0.1:${apiProxy.port}`), {
      mode: 0o600,
    });
    mutator = await webhookProcess({ kubeconfig: proxied });
    validator = await webhookProcess({ kubeconfig: sa.kubeconfig });
    await Promise.all([mutator.start(), validator.start()]);

    const mutating = (await renderWebhookConfigurations(cp, mutator.port, mutator.caPem)).find((c) => c.kind === "MutatingWebhookConfiguration")!;
    const validating = (await renderWebhookConfigurations(cp, validator.port, validator.caPem)).find((c) => c.kind === "ValidatingWebhookConfiguration")!;
    configs = [mutating, validating];
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
    await healthy();
  });

  after(async () => {
    for (const w of [mutator, validator]) w?.signal("SIGCONT");
    await Promise.all([mutator?.stop(), validator?.stop()]);
    await apiProxy?.close();
    await cp?.stop();
  });

  it(`the manifests: mutating fails open (Ignore), validating fails closed (Fail), ${WEBHOOK_TIMEOUT_S} s timeouts, kube-system excluded`, () => {
    const hooks = configs.flatMap((c) => (c.webhooks as Obj[]).map((h): Obj => ({ kind: c.kind as string, ...h })));
    assert.deepEqual(
      hooks.map((h) => [h.name, h.failurePolicy, h.timeoutSeconds]),
      [
        ["pods.mutate.quartermaster.dev", "Ignore", WEBHOOK_TIMEOUT_S],
        ["jobs.mutate.quartermaster.dev", "Ignore", WEBHOOK_TIMEOUT_S],
        ["pods.validate.quartermaster.dev", "Fail", WEBHOOK_TIMEOUT_S],
        ["jobs.validate.quartermaster.dev", "Fail", WEBHOOK_TIMEOUT_S],
        ["claims.validate.quartermaster.dev", "Fail", WEBHOOK_TIMEOUT_S],
      ],
    );
    for (const h of hooks) {
      const byName = (h.namespaceSelector.matchExpressions as Obj[]).find((e) => e.key === "kubernetes.io/metadata.name");
      assert.equal(byName?.operator, "NotIn", h.name);
      assert.ok(byName.values.includes("kube-system"), h.name);
    }
  });

  it("mutating webhook's process killed: a training pod is admitted unmutated (Ignore) and still validated; restarted, pods are outfitted again", async () => {
    await mutator.stop("SIGKILL");
    try {
      const name = unique("no-mutator");
      const r = await createPod("team-a", trainingPod(name));
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(outfitted(r.body), false);
      assert.doesNotMatch(String(r.headers.warning ?? ""), /quartermaster/);
      assert.deepEqual(
        (await validator.awaitAdmissions(name, 1)).map((l) => l.webhook),
        ["validate-pods"],
      );
    } finally {
      await mutator.start();
    }
    await healthy();
    const back = await createPod("team-a", trainingPod(unique("mutator-back")));
    assert.equal(back.status, 201);
    assert.equal(outfitted(back.body), true);
  });

  it("validating webhooks' process killed: training pods and TFJobs in an opted-in namespace are refused (Fail), naming the webhook; a TFJob elsewhere is not", async () => {
    await validator.stop("SIGKILL");
    try {
      const job = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob(unique("no-validator")));
      assert.equal(job.status, 500, JSON.stringify(job.body));
      assert.match(job.body.message, /failed calling webhook "jobs\.validate\.quartermaster\.dev"/);
      const pod = await createPod("team-a", trainingPod(unique("no-validator")));
      assert.equal(pod.status, 500, JSON.stringify(pod.body));
      assert.match(pod.body.message, /failed calling webhook "pods\.validate\.quartermaster\.dev"/);
      assert.equal((await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-b/tfjobs", tfjob(unique("elsewhere")))).status, 201);
    } finally {
      await validator.start();
    }
    await healthy();
    assert.equal((await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob(unique("validator-back")))).status, 201);
  });

  it(`mutating webhook hung (SIGSTOP): after the ${WEBHOOK_TIMEOUT_S} s timeout the training pod is admitted unmutated (Ignore)`, async (t) => {
    mutator.signal("SIGSTOP");
    try {
      const r = await timedCreate(t, "training pod, mutator hung", "team-a", trainingPod(unique("mutator-hung")));
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(outfitted(r.body), false);
    } finally {
      mutator.signal("SIGCONT");
    }
    await healthy();
  });

  it("validating webhooks hung (SIGSTOP): a training pod is refused after the timeout (Fail); team-b, kube-system and non-training pods are created, so they never reach the webhook", async (t) => {
    validator.signal("SIGSTOP");
    try {
      // Concurrently: the refused one waits out the timeout; the others would be refused too if matched.
      const [training, other, system, web] = await Promise.all([
        timedCreate(t, "training pod in team-a, validator hung", "team-a", trainingPod(unique("validator-hung"))),
        timedCreate(t, "training pod in team-b", "team-b", trainingPod(unique("other"))),
        timedCreate(t, "training pod in kube-system", "kube-system", trainingPod(unique("sys"))),
        timedCreate(t, "non-training pod in team-a", "team-a", trainingPod(unique("web"), { labels: { app: "web" }, gpu: false })),
      ]);
      assert.equal(training.status, 500, JSON.stringify(training.body));
      assert.match(training.body.message, /failed calling webhook "pods\.validate\.quartermaster\.dev".*(deadline|timeout|Timeout)/);
      for (const r of [other, system, web]) assert.equal(r.status, 201, JSON.stringify(r.body));
      for (const r of [other, system, web]) assert.equal(outfitted(r.body), false);
    } finally {
      validator.signal("SIGCONT");
    }
    await healthy();
  });

  const lookupFaults: Array<{
    name: string;
    fault: () => Promise<void> | void;
    restore: () => Promise<void> | void;
    /** The warning expected (cut to 120 characters), or undefined when the job is read and TF_CONFIG set. */
    warning?: (ns: string, job: string) => RegExp;
  }> = [
    {
      name: "apiserver unreachable (connection refused)",
      fault: () => apiProxy.down(),
      restore: () => apiProxy.up(),
      warning: (ns, job) => new RegExp(`^299 - "quartermaster: no cluster spec: reading job ${ns}/${job} failed: `),
    },
    {
      name: "apiserver hung (accepts the connection, never answers)",
      fault: () => apiProxy.setMode({ kind: "stall" }),
      restore: () => apiProxy.setMode({ kind: "forward" }),
      warning: (ns, job) => new RegExp(`^299 - "quartermaster: no cluster spec: reading job ${ns}/${job} timed out after ${JOB_LOOKUP_TIMEOUT_MS} ms"`),
    },
    {
      name: "apiserver slow (every answer held 200 ms), within the lookup bound",
      fault: () => apiProxy.setMode({ kind: "forward", delayMs: 200 }),
      restore: () => apiProxy.setMode({ kind: "forward" }),
    },
  ];
  for (const tc of lookupFaults) {
    it(`job lookup, ${tc.name}: the pod is admitted, outfitted${tc.warning ? ", without a cluster spec and with a warning" : " with its TF_CONFIG"}`, async (t) => {
      const job = unique("lookup");
      const created = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob(job));
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const pod = trainingPod(`${job}-worker-0`, { labels: {}, owner: { job, uid: created.body.metadata.uid } });
      await tc.fault();
      let r: Awaited<ReturnType<typeof createPod>>;
      try {
        r = await timedCreate(t, tc.name, "team-a", pod);
      } finally {
        await tc.restore();
      }
      assert.equal(r.status, 201, JSON.stringify(r.body));
      // Outfitted at all means the webhook answered within the apiserver's timeout: past it, the
      // apiserver would have skipped the webhook (Ignore) and the pod would carry none of this.
      assert.equal(outfitted(r.body), true);
      const env = (r.body.spec.containers[0].env ?? []) as Array<{ name: string }>;
      const warnings = String(r.headers.warning ?? "");
      if (tc.warning) {
        assert.match(warnings, tc.warning("team-a", job));
        assert.deepEqual(
          env.filter((e) => e.name === "TF_CONFIG"),
          [],
        );
      } else {
        assert.doesNotMatch(warnings, /no cluster spec/);
        assert.deepEqual(
          env.map((e) => e.name),
          ["TF_CONFIG"],
        );
      }
      const [line] = await mutator.awaitAdmissions(pod.metadata.name, 1);
      t.diagnostic(
        `the mutating webhook answered in ${String(line?.durationMs)} ms (lookup bound ${JOB_LOOKUP_TIMEOUT_MS} ms, webhook timeout ${WEBHOOK_TIMEOUT_S} s)`,
      );
    });
  }
});

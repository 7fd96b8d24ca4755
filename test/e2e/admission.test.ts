/**
 * End to end: Quartermaster's webhook server behind a real kube-apiserver, registered with the webhook
 * configurations rendered from manifests/. Objects are created through the API, as users do.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { ROOT, createNamespace, installKubeflowCrds, renderBase, servingPair, type WebhookProcess, startOwnWebhook } from "./harness/webhook.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${++seq}`;

function trainingPod(name: string, opts: { labels?: Record<string, string>; gpu?: boolean } = {}): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: opts.labels ?? { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker" } },
    spec: {
      restartPolicy: "Never",
      containers: [
        {
          name: "tensorflow",
          image: "tensorflow/tensorflow:2.16.1",
          ...(opts.gpu ? { resources: { limits: { "nvidia.com/gpu": "1" } } } : {}),
        },
      ],
    },
  };
}

describe("admission through a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let saApi: ControlPlane["api"];

  const createPod = (ns: string, pod: Record<string, unknown>, dryRun = false) =>
    cp.api("POST", `/api/v1/namespaces/${ns}/pods${dryRun ? "?dryRun=All" : ""}`, pod);

  const until = (what: string, cond: () => boolean | Promise<boolean>, ms?: number): Promise<void> => cp.until(what, cond, ms);

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    await installKubeflowCrds(cp);
    await createNamespace(cp, "team-a", { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "team-b");
    // Quartermaster's own objects from manifests/base (namespace, ServiceAccount, RBAC), applied for real;
    // the webhook then runs with its ServiceAccount's token, so its RBAC is what these tests exercise.
    const own = await startOwnWebhook(cp, "limits:\n  container:\n    gpus: {nvidia.com/gpu: 8}\n  pod:\n    gpus: 8\n  job:\n    replicas: {Worker: 16}\n");
    wh = own.wh;
    const configs = own.configs;
    saApi = own.sa.api;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: configs }));
    assert.equal(applied.code, 0, applied.stderr);
    // A new configuration takes effect asynchronously: dry-run probes until both webhooks see one.
    await until("the webhook configurations to take effect", async () => {
      const name = unique("probe");
      await createPod("team-a", trainingPod(name), true);
      const seen = new Set((await wh.awaitAdmissions(name, 2, 1000)).map((l) => l.webhook));
      return seen.has("mutate-pods") && seen.has("validate-pods");
    });
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("a training pod in an opted-in namespace passes through the mutating and validating webhooks", async () => {
    const name = unique("trainer");
    const r = await createPod("team-a", trainingPod(name));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const lines = await wh.awaitAdmissions(name, 2);
    assert.deepEqual(lines.map((l) => l.webhook).sort(), ["mutate-pods", "validate-pods"]);
    for (const l of lines) {
      assert.equal(l.namespace, "team-a");
      assert.equal(l.operation, "CREATE");
      assert.equal(l.dryRun, false);
    }
  });

  it("a GPU pod comes back from the API outfitted, with the warnings shown to the client; a pod elsewhere is untouched", async () => {
    const name = unique("outfit");
    const pod = trainingPod(name, { gpu: true });
    (pod.metadata as Record<string, unknown>).annotations = { "quartermaster.dev/accelerator": "A100-SXM4-40GB" };
    const r = await createPod("team-a", pod);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const warning = String(r.headers.warning ?? "");
    assert.match(warning, /299 - "quartermaster: added tolerations for nvidia.com\/gpu"/);
    const got = (await cp.api("GET", `/api/v1/namespaces/team-a/pods/${name}`)).body;
    assert.equal(got.metadata.annotations["quartermaster.dev/mutations"], "resources,gpu-tolerations,accelerator");
    assert.ok(got.spec.tolerations.some((t: Record<string, string>) => t.key === "nvidia.com/gpu" && t.operator === "Exists" && t.effect === "NoSchedule"));
    assert.deepEqual(got.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
      { matchExpressions: [{ key: "nvidia.com/gpu.product", operator: "In", values: ["A100-SXM4-40GB"] }] },
    ]);
    assert.deepEqual(got.spec.containers[0].resources.requests, { cpu: "1", memory: "1Gi", "nvidia.com/gpu": "1" });

    const elsewhere = unique("outfit-b");
    assert.equal((await createPod("team-b", trainingPod(elsewhere, { gpu: true }))).status, 201);
    const plain = (await cp.api("GET", `/api/v1/namespaces/team-b/pods/${elsewhere}`)).body;
    assert.equal(plain.metadata.annotations?.["quartermaster.dev/mutations"], undefined);
    assert.equal(plain.spec.affinity, undefined);
  });

  it("a GPU pod without Kubeflow labels is a training pod too (matchConditions)", async () => {
    const name = unique("gpu");
    assert.equal((await createPod("team-a", trainingPod(name, { labels: {}, gpu: true }))).status, 201);
    assert.equal((await wh.awaitAdmissions(name, 2)).length, 2);
  });

  const notSent: Array<{ name: string; ns: string; pod: (n: string) => Record<string, unknown> }> = [
    { name: "a pod in a namespace that did not opt in", ns: "team-b", pod: (n) => trainingPod(n) },
    { name: "a pod with no job label and no GPU (matchConditions)", ns: "team-a", pod: (n) => trainingPod(n, { labels: { app: "web" } }) },
  ];
  for (const tc of notSent) {
    it(`${tc.name} is created without reaching Quartermaster`, async () => {
      const name = unique("plain");
      assert.equal((await createPod(tc.ns, tc.pod(name))).status, 201);
      await sleep(200);
      assert.deepEqual(wh.admissions(name), []);
    });
  }

  it("kube-system never reaches Quartermaster, even when labelled as opted in", async () => {
    const label = await cp.kubectl(["label", "namespace", "kube-system", "quartermaster.dev/enabled=true", "--overwrite"]);
    assert.equal(label.code, 0, label.stderr);
    const name = unique("system");
    assert.equal((await createPod("kube-system", trainingPod(name))).status, 201);
    await sleep(200);
    assert.deepEqual(wh.admissions(name), []);
  });

  it("kubectl create --dry-run=server works (sideEffects: None) and persists nothing", async () => {
    const name = unique("dry");
    const r = await cp.kubectl(["create", "-n", "team-a", "--dry-run=server", "-o", "json", "-f", "-"], JSON.stringify(trainingPod(name)));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).metadata.name, name);
    const lines = await wh.awaitAdmissions(name, 2);
    assert.equal(lines.length, 2);
    assert.ok(lines.every((l) => l.dryRun === true));
    assert.equal((await cp.api("GET", `/api/v1/namespaces/team-a/pods/${name}`)).status, 404);
  });

  it("a training job (TFJob) is validated on create and update", async () => {
    const name = unique("mnist");
    const job = {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: { tfReplicaSpecs: { Worker: { replicas: 2, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
    };
    const created = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", job);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const patched = await cp.api(
      "PATCH",
      `/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/${name}`,
      { metadata: { labels: { x: "y" } } },
      {
        "content-type": "application/merge-patch+json",
      },
    );
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    // The validating webhook's lines (a CREATE also reaches /mutate/jobs once the configuration registers it).
    await until("both validate-jobs admissions", async () => wh.admissions(name).filter((l) => l.webhook === "validate-jobs").length >= 2, 5000);
    assert.deepEqual(
      wh
        .admissions(name)
        .filter((l) => l.webhook === "validate-jobs")
        .map((l) => `${l.webhook} ${l.operation}`),
      ["validate-jobs CREATE", "validate-jobs UPDATE"],
    );
  });

  it("a TFJob's replica pod gets its TF_CONFIG and labels from the job read through the API", async () => {
    const name = unique("mnist");
    const created = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", {
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: {
        tfReplicaSpecs: {
          Chief: { replicas: 1, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } },
          Worker: {
            replicas: 2,
            template: { spec: { containers: [{ name: "tensorflow", image: "tf", ports: [{ name: "tfjob-port", containerPort: 3333 }] }] } },
          },
        },
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: `${name}-worker-1`,
        ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name, uid: created.body.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: { restartPolicy: "Never", containers: [{ name: "tensorflow", image: "tf", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
    };
    const r = await createPod("team-a", pod);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const got = (await cp.api("GET", `/api/v1/namespaces/team-a/pods/${name}-worker-1`)).body;
    assert.deepEqual(got.spec.containers[0].env, [
      {
        name: "TF_CONFIG",
        value: `{"cluster":{"chief":["${name}-chief-0.team-a.svc:2222"],"worker":["${name}-worker-0.team-a.svc:3333","${name}-worker-1.team-a.svc:3333"]},"task":{"type":"worker","index":1},"environment":"cloud"}`,
      },
    ]);
    assert.equal(got.metadata.labels["training.kubeflow.org/job-name"], name);
    assert.equal(got.metadata.labels["training.kubeflow.org/replica-type"], "worker");
    assert.equal(got.metadata.labels["training.kubeflow.org/job-role"], undefined);
    assert.match(got.metadata.annotations["quartermaster.dev/mutations"], /^training-labels,cluster-spec,/);
  });

  it("a TFJob deleted and made again under its name at once: its new pod gets the new job's TF_CONFIG, not the cached old one's", async () => {
    const name = unique("remade");
    const make = async (workers: number) => {
      const r = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", {
        apiVersion: "kubeflow.org/v1",
        kind: "TFJob",
        metadata: { name },
        spec: { tfReplicaSpecs: { Worker: { replicas: workers, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
      });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body.metadata.uid as string;
    };
    const podOf = (uid: string, index: number) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `${name}-worker-${index}`, ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name, uid, controller: true }] },
      spec: { restartPolicy: "Never", containers: [{ name: "tensorflow", image: "tf", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
    });
    const hosts = (n: number) => Array.from({ length: n }, (_, i) => `${name}-worker-${i}.team-a.svc:2222`);
    /** The workers the pod's TF_CONFIG lists, or why there are none. */
    const workers = async (index: number): Promise<string[] | string> => {
      const env = (await cp.api("GET", `/api/v1/namespaces/team-a/pods/${name}-worker-${index}`)).body.spec.containers[0].env;
      return env?.[0]?.name === "TF_CONFIG"
        ? (JSON.parse(env[0].value) as { cluster: { worker: string[] } }).cluster.worker
        : `no TF_CONFIG: ${JSON.stringify(env)}`;
    };
    // The old job of 2 workers, read (and cached) at its pod's admission.
    assert.equal((await createPod("team-a", podOf(await make(2), 1))).status, 201);
    assert.deepEqual(await workers(1), hosts(2));
    assert.equal((await cp.api("DELETE", `/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/${name}`)).status, 200);
    // Made again with 4, well within the cache's 5 s: its worker 3 is the new job's.
    const r = await createPod("team-a", podOf(await make(4), 3));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(await workers(3), hosts(4));
  });

  it("a pod over a limit is refused, and kubectl prints every violation with its field path", async () => {
    const name = unique("greedy");
    const pod = trainingPod(name, { labels: {} });
    (pod.spec as { containers: Array<Record<string, unknown>> }).containers[0]!.resources = { limits: { "nvidia.com/gpu": "16" } };
    const r = await cp.kubectl(["create", "-n", "team-a", "-f", "-"], JSON.stringify(pod));
    assert.equal(r.code, 1);
    const lines = r.stderr.trim().split("\n");
    for (const w of lines.slice(0, -1)) assert.match(w, /^Warning: quartermaster: /);
    assert.equal(
      lines.at(-1),
      'Error from server (Forbidden): error when creating "STDIN": admission webhook "pods.validate.quartermaster.dev" denied the request: ' +
        "2 policy violations: spec.containers[0].resources.limits[nvidia.com/gpu]: 16 exceeds the per-container limit of 8; " +
        "spec: the pod requests 16 GPUs, over the per-pod limit of 8",
    );
    const api = await createPod("team-a", pod);
    assert.equal(api.status, 403);
    assert.equal(api.body.reason, "Forbidden");
    assert.deepEqual(
      api.body.details.causes.map((c: { field: string }) => c.field),
      ["spec.containers[0].resources.limits[nvidia.com/gpu]", "spec"],
    );
  });

  it("a TFJob over a replica limit is refused; one already over can still be relabelled", async () => {
    const name = unique("wide");
    const tfjob = (workers: number) => ({
      apiVersion: "kubeflow.org/v1",
      kind: "TFJob",
      metadata: { name },
      spec: { tfReplicaSpecs: { Worker: { replicas: workers, template: { spec: { containers: [{ name: "tensorflow", image: "tf" }] } } } } },
    });
    const refused = await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob(17));
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.match(refused.body.message, /spec\.tfReplicaSpecs\.Worker\.replicas: 17 exceeds the limit of 16 Worker replicas/);
    assert.equal((await cp.api("POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob(16))).status, 201);
  });

  it("RBAC: the webhook's ServiceAccount may get training jobs and nothing else", async () => {
    const allowed = [
      ["GET", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/does-not-exist", 404],
      ["GET", "/apis/kubeflow.org/v1/namespaces/team-b/pytorchjobs/does-not-exist", 404],
      ["GET", "/apis/kubeflow.org/v1alpha1/namespaces/team-a/caffe2jobs/does-not-exist", 404],
    ] as const;
    for (const [method, path, status] of allowed) assert.equal((await saApi(method, path)).status, status, `${method} ${path}`);
    const refused = [
      ["GET", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs"],
      ["GET", "/api/v1/namespaces/team-a/pods"],
      ["GET", "/api/v1/namespaces/kube-system/secrets"],
      ["POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs"],
      ["DELETE", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/x"],
    ] as const;
    for (const [method, path] of refused) {
      const r = await saApi(method, path, method === "POST" ? { apiVersion: "kubeflow.org/v1", kind: "TFJob", metadata: { name: "x" } } : undefined);
      assert.equal(r.status, 403, `${method} ${path} → ${r.status}`);
      assert.match(r.body.message, /system:serviceaccount:quartermaster:quartermaster-webhook/);
    }
  });

  it("every manifest in manifests/ is accepted by a server-side dry-run apply", async () => {
    const objects = (await renderBase(cp)) as Array<{ kind: string; metadata: { name: string } }>;
    const r = await cp.kubectl(["apply", "-k", join(ROOT, "manifests/base"), "--dry-run=server"]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    assert.equal(lines.length, objects.length, r.stdout);
    for (const o of objects) {
      assert.ok(
        lines.some((l) => l.toLowerCase().startsWith(o.kind.toLowerCase()) && l.includes(`/${o.metadata.name} `) && l.endsWith("(server dry run)")),
        `${o.kind}/${o.metadata.name} not accepted: ${r.stdout}`,
      );
    }
  });

  it("serving certificate rotated under load: no admission fails", async () => {
    let stop = false;
    let created = 0;
    const failures: string[] = [];
    const worker = async (): Promise<void> => {
      while (!stop) {
        const r = await createPod("team-a", trainingPod(unique("rot")));
        if (r.status === 201) created++;
        else failures.push(`${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    await sleep(1000);
    const before = wh.lines.filter((l) => l.msg === "tls: serving key pair reloaded").length;
    const rotated = await servingPair(wh.certDir, ["--ca-cert", join(wh.certDir, "ca.crt"), "--ca-key", join(wh.certDir, "ca.key")]);
    assert.equal(rotated.code, 0, rotated.stderr);
    await until("the server to reload its key pair", async () => wh.lines.filter((l) => l.msg === "tls: serving key pair reloaded").length > before, 15_000);
    await sleep(1500);
    stop = true;
    await Promise.all(workers);
    assert.deepEqual(failures, []);
    assert.ok(created >= 10, `only ${created} pods created during the rotation`);
  });

  it("webhook server down → training pods are refused (validation fails closed); other namespaces and kube-system are unaffected", async () => {
    await wh.stop("SIGKILL");
    try {
      const refused = await createPod("team-a", trainingPod(unique("down")));
      assert.equal(refused.status, 500, JSON.stringify(refused.body));
      assert.match(refused.body.message, /failed calling webhook "pods\.validate\.quartermaster\.dev"/);
      assert.equal((await createPod("team-a", trainingPod(unique("web"), { labels: { app: "web" } }))).status, 201);
      assert.equal((await createPod("team-b", trainingPod(unique("other")))).status, 201);
      assert.equal((await createPod("kube-system", trainingPod(unique("sys")))).status, 201);
    } finally {
      await wh.start();
    }
    await until("admission to recover", async () => (await createPod("team-a", trainingPod(unique("back")), true)).status === 201);
  });
});

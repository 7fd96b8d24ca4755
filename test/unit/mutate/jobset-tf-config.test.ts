/**
 * TF_CONFIG on the pods of a TensorFlow TrainJob's JobSet (src/mutate/jobset-tf-config.ts): conformance with the
 * v1 operator's TF_CONFIG for the equivalent TFJob (src/mutate/frameworks.ts, itself checked byte for byte
 * against training-operator in test/conformance): for each topology, every pod's TF_CONFIG is the v1 pod's
 * byte for byte once each v2 hostname is mapped back to its v1 twin; then the cases that get none, the
 * mutation (with reinvocation: mutating twice changes nothing) and the webhook's JobSet lookup.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, Pod } from "../../../src/core/kube.js";
import { clusterSpec } from "../../../src/mutate/frameworks.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { injectJobSetTfConfig, jobSetTfConfig } from "../../../src/mutate/jobset-tf-config.js";
import { applyPatch } from "../../../src/admission/patch.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { tfJobSetRef } from "../../../src/membership/jobset.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, job, topology } from "../../fixtures/jobs.js";
import { jobSetPod, tfJobSet, type RJob } from "../../fixtures/jobsets.js";
import { ctx } from "../../fixtures/pods.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

const NS = "team-a";
const V1_TYPE: Record<string, string> = { chief: "Chief", worker: "Worker", ps: "PS", evaluator: "Evaluator", master: "Master" };

interface Topo {
  name: string;
  rjobs: RJob[];
  clusterDomain?: string;
}

const TOPOLOGIES: Topo[] = [
  { name: "worker only, 1 (not distributed)", rjobs: [{ name: "worker", pods: 1 }] },
  { name: "worker only, 4", rjobs: [{ name: "worker", pods: 4 }] },
  {
    name: "chief + 2 workers",
    rjobs: [
      { name: "chief", pods: 1 },
      { name: "worker", pods: 2 },
    ],
  },
  {
    name: "chief + 2 workers + 1 ps",
    rjobs: [
      { name: "chief", pods: 1 },
      { name: "worker", pods: 2 },
      { name: "ps", pods: 1 },
    ],
  },
  {
    name: "chief + 2 workers + evaluator",
    rjobs: [
      { name: "chief", pods: 1 },
      { name: "worker", pods: 2 },
      { name: "evaluator", pods: 1 },
    ],
  },
  {
    name: "chief + 3 workers + 2 ps, ports per type, cluster domain",
    rjobs: [
      { name: "chief", pods: 1, port: 3333 },
      { name: "worker", pods: 3 },
      { name: "ps", pods: 2, port: 4444 },
    ],
    clusterDomain: "cluster.local",
  },
  {
    name: "workers as 2 Jobs × 2 pods (JobSet replicas)",
    rjobs: [
      { name: "worker", replicas: 2, pods: 2 },
      { name: "ps", pods: 1 },
    ],
  },
  {
    name: "master + workers, containers named tensorflow",
    rjobs: [
      { name: "master", pods: 1, container: "tensorflow" },
      { name: "worker", pods: 2, container: "tensorflow" },
    ],
  },
];

/** The equivalent TFJob: one replica type per replicatedJob, replicas = Jobs × pods per Job, same ports. */
function v1Twin(t: Topo): KubeObject {
  const replicas: Record<string, { replicas: number; port?: number }> = {};
  for (const r of t.rjobs) replicas[V1_TYPE[r.name]!] = { replicas: (r.replicas ?? 1) * r.pods, ...(r.port ? { port: r.port } : {}) };
  return job("TFJob", "mnist", NS, replicas);
}

/** A v2 address mapped to its v1 twin: `mnist-<type>-<j>-<p>.mnist.<ns>.svc` → `mnist-<type>-<j×pods+p>.<ns>.svc`. */
function toV1Hosts(tfConfig: string, t: Topo): string {
  return tfConfig.replace(/mnist-([a-z]+)-(\d+)-(\d+)\.mnist\.team-a\.svc/g, (_m, type: string, j: string, p: string) => {
    const pods = t.rjobs.find((r) => r.name === type)!.pods;
    return `mnist-${type}-${Number(j) * pods + Number(p)}.team-a.svc`;
  });
}

function v2Pods(t: Topo): Array<{ pod: Pod; type: string; index: number }> {
  const out: Array<{ pod: Pod; type: string; index: number }> = [];
  for (const r of t.rjobs) {
    for (let j = 0; j < (r.replicas ?? 1); j++) {
      for (let p = 0; p < r.pods; p++)
        out.push({ pod: jobSetPod("mnist", NS, r.name, j, p, { containers: [r.container ?? "node"] }), type: r.name, index: j * r.pods + p });
    }
  }
  return out;
}

describe("TF_CONFIG on JobSet pods equals the v1 operator's for the equivalent TFJob, hostnames aside", () => {
  for (const t of TOPOLOGIES) {
    it(t.name, () => {
      const jobSet = tfJobSet("mnist", NS, t.rjobs);
      const twin = v1Twin(t);
      const pods = v2Pods(t);
      for (const { pod, type, index } of pods) {
        const v1 = clusterSpec(topology(twin, V1_TYPE[type]!, index), NS, t.clusterDomain ?? "");
        const v2 = jobSetTfConfig(jobSet, pod, NS, t.clusterDomain ?? "");
        if ("skip" in v1) {
          assert.ok("skip" in v2, `${type}-${index}: v1 sets none (${v1.skip}), nor must v2`);
          continue;
        }
        assert.ok(!("skip" in v2), `${type}-${index}: ${"skip" in v2 ? v2.skip : ""}`);
        const v1Config = v1.env.find((e) => e.name === "TF_CONFIG")!.value!;
        // Byte for byte once the hostnames are mapped back (the cluster domain is kept, as v1 appends it).
        const mapped = toV1Hosts(v2.tfConfig, t);
        assert.equal(mapped, v1Config, `${type}-${index}`);
        // And structurally: the same task types, counts, task.
        const a = JSON.parse(v1Config) as { cluster: Record<string, string[]>; task: unknown; environment: string };
        const b = JSON.parse(v2.tfConfig) as typeof a;
        assert.deepEqual(Object.keys(b.cluster), Object.keys(a.cluster));
        assert.deepEqual(
          Object.values(b.cluster).map((h) => h.length),
          Object.values(a.cluster).map((h) => h.length),
        );
        assert.deepEqual(b.task, a.task);
        assert.equal(b.environment, "cloud");
        // The pod's own address is its JobSet hostname and subdomain.
        assert.ok(b.cluster[type]![index]!.startsWith(`${v2.hostname}.${v2.subdomain}.`));
      }
    });
  }

  it("exact bytes: chief + 2 workers + 1 ps, worker 1", () => {
    const js = tfJobSet("mnist", "kubeflow", [
      { name: "chief", pods: 1 },
      { name: "worker", pods: 2 },
      { name: "ps", pods: 1 },
    ]);
    const got = jobSetTfConfig(js, jobSetPod("mnist", "kubeflow", "worker", 0, 1), "kubeflow", "");
    assert.deepEqual(got, {
      tfConfig:
        '{"cluster":{"chief":["mnist-chief-0-0.mnist.kubeflow.svc:2222"],"ps":["mnist-ps-0-0.mnist.kubeflow.svc:2222"],' +
        '"worker":["mnist-worker-0-0.mnist.kubeflow.svc:2222","mnist-worker-0-1.mnist.kubeflow.svc:2222"]},' +
        '"task":{"type":"worker","index":1},"environment":"cloud"}',
      hostname: "mnist-worker-0-1",
      subdomain: "mnist",
    });
  });

  it("network.subdomain, when set, is the subdomain", () => {
    const js = tfJobSet("mnist", NS, [{ name: "worker", pods: 2 }], { subdomain: "tf" });
    const got = jobSetTfConfig(js, jobSetPod("mnist", NS, "worker", 0, 0, { subdomain: "tf" }), NS, "");
    assert.ok(!("skip" in got));
    assert.equal(JSON.parse(got.tfConfig).cluster.worker[1], "mnist-worker-0-1.tf.team-a.svc:2222");
  });
});

describe("JobSet pods that get no TF_CONFIG, and why", () => {
  const two: RJob[] = [{ name: "worker", pods: 2 }];
  const cases: Array<{ name: string; jobSet: KubeObject; pod: Pod; reason: RegExp }> = [
    {
      name: "JobSet not labelled tensorflow",
      jobSet: tfJobSet("mnist", NS, two, { labels: { "trainer.kubeflow.org/framework": "torch" } }),
      pod: jobSetPod("mnist", NS, "worker", 0, 0),
      reason: /not labelled/,
    },
    {
      name: "DNS hostnames off",
      jobSet: tfJobSet("mnist", NS, two, { dns: false }),
      pod: jobSetPod("mnist", NS, "worker", 0, 0),
      reason: /enableDNSHostnames/,
    },
    {
      name: "an initializer's pod",
      jobSet: tfJobSet("mnist", NS, [...two, { name: "dataset-initializer", pods: 1 }]),
      pod: jobSetPod("mnist", NS, "dataset-initializer", 0, 0),
      reason: /not a TensorFlow task type/,
    },
    { name: "index beyond the replicatedJob", jobSet: tfJobSet("mnist", NS, two), pod: jobSetPod("mnist", NS, "worker", 0, 2), reason: /beyond/ },
    {
      name: "hostname not JobSet's",
      jobSet: tfJobSet("mnist", NS, two),
      pod: deepFreeze({ ...jobSetPod("mnist", NS, "worker", 0, 0), spec: { hostname: "x", containers: [{ name: "node" }] } }) as Pod,
      reason: /hostname/,
    },
    {
      name: "over the replica ceiling",
      jobSet: tfJobSet("mnist", NS, [{ name: "worker", replicas: 1000, pods: 11 }]),
      pod: jobSetPod("mnist", NS, "worker", 0, 0),
      reason: /ceiling/,
    },
    {
      name: "no completion index",
      jobSet: tfJobSet("mnist", NS, two),
      pod: (() => {
        const p = structuredClone(jobSetPod("mnist", NS, "worker", 0, 0));
        delete p.metadata!.labels!["batch.kubernetes.io/job-completion-index"];
        delete p.metadata!.annotations!["batch.kubernetes.io/job-completion-index"];
        return deepFreeze(p);
      })(),
      reason: /completion-index/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = jobSetTfConfig(c.jobSet, c.pod, NS, "");
      assert.ok("skip" in got && c.reason.test(got.skip), JSON.stringify(got));
      assert.equal(injectJobSetTfConfig.mutate(c.pod, { ...ctx(), jobSet: c.jobSet }), c.pod, "unchanged, same reference");
    });
  }
});

describe("jobset-tf-config mutation", () => {
  const js = tfJobSet("mnist", NS, [
    { name: "chief", pods: 1 },
    { name: "worker", pods: 2 },
  ]);
  const cases: Array<{ name: string; pod: Pod; target: number | "none" }> = [
    { name: "one container node → TF_CONFIG there", pod: jobSetPod("mnist", NS, "worker", 0, 1), target: 0 },
    { name: "sidecar first, node second → node", pod: jobSetPod("mnist", NS, "worker", 0, 1, { containers: ["sidecar", "node"] }), target: 1 },
    {
      name: "tensorflow and sidecar → tensorflow (v1's container)",
      pod: jobSetPod("mnist", NS, "chief", 0, 0, { containers: ["sidecar", "tensorflow"] }),
      target: 1,
    },
    { name: "no node or tensorflow container → unchanged", pod: jobSetPod("mnist", NS, "worker", 0, 0, { containers: ["main"] }), target: "none" },
    { name: "TF_CONFIG already set → unchanged", pod: jobSetPod("mnist", NS, "worker", 0, 0, { env: [{ name: "TF_CONFIG", value: "{}" }] }), target: "none" },
  ];
  for (const c of cases) {
    const context = { ...ctx(), jobSet: js };
    it(c.name, () => {
      const got = injectJobSetTfConfig.mutate(c.pod, context);
      if (c.target === "none") return assert.equal(got, c.pod);
      const env = got.spec!.containers[c.target]!.env!;
      assert.equal(env.length, 1);
      assert.equal(env[0]!.name, "TF_CONFIG");
      const spec = jobSetTfConfig(js, c.pod, NS, "");
      assert.equal(env[0]!.value, "skip" in spec ? undefined : spec.tfConfig);
      got.spec!.containers.forEach((ct, i) => i !== c.target && assert.equal(ct, c.pod.spec!.containers[i], "other containers untouched"));
    });
    it(`${c.name} (reinvocation: no further change)`, () => {
      const once = deepFreeze(injectJobSetTfConfig.mutate(c.pod, context));
      assert.equal(injectJobSetTfConfig.mutate(once, context), once);
      const pipeline = mutatePod(c.pod, context);
      assert.equal(mutatePod(pipeline.pod, context).pod, pipeline.pod, "the whole pipeline, twice");
    });
  }

  it("without a JobSet in the context, or with clusterSpec disabled → unchanged", () => {
    const pod = jobSetPod("mnist", NS, "worker", 0, 0);
    assert.equal(injectJobSetTfConfig.mutate(pod, ctx()), pod);
    assert.equal(injectJobSetTfConfig.mutate(pod, { ...ctx({ clusterSpec: { enabled: false } }), jobSet: js }), pod);
  });

  it("tfJobSetRef: only pods with the jobset-name and the tensorflow framework labels", () => {
    assert.deepEqual(tfJobSetRef(jobSetPod("mnist", NS, "worker", 0, 0), NS), { namespace: NS, name: "mnist" });
    const torch = structuredClone(jobSetPod("mnist", NS, "worker", 0, 0));
    torch.metadata!.labels!["trainer.kubeflow.org/framework"] = "torch";
    assert.equal(tfJobSetRef(torch, NS), undefined);
  });
});

describe("/mutate/pods reads the JobSet of a TensorFlow TrainJob's pod", () => {
  const js = tfJobSet("mnist", NS, [
    { name: "chief", pods: 1 },
    { name: "worker", pods: 2 },
  ]);
  async function admit(jobs: KubeObject[], pod: Pod, policy = defaultPolicy()): Promise<{ pod: Pod; warnings: string[]; allowed: boolean | undefined }> {
    const webhooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(jobs), now: () => new Date("2026-11-29T00:00:00Z") });
    const res = await webhooks["/mutate/pods"]!.admit(review({ object: pod as KubeObject, namespace: NS }));
    const r = res.review.response!;
    const ops = r.patch ? JSON.parse(Buffer.from(r.patch, "base64").toString()) : [];
    return { pod: applyPatch(pod as KubeObject, ops) as Pod, warnings: r.warnings ?? [], allowed: r.allowed };
  }

  it("found: TF_CONFIG set, the mutation recorded", async () => {
    const pod = jobSetPod("mnist", NS, "worker", 0, 1);
    const got = await admit([js], pod);
    const spec = jobSetTfConfig(js, pod, NS, "");
    assert.equal(got.pod.spec!.containers[0]!.env?.find((e) => e.name === "TF_CONFIG")?.value, "skip" in spec ? "" : spec.tfConfig);
    assert.match(got.pod.metadata!.annotations!["quartermaster.dev/mutations"]!, /jobset-tf-config/);
    const again = await admit([js], got.pod);
    assert.deepEqual(again.pod, got.pod, "reinvocation through the webhook changes nothing");
  });

  it("missing JobSet: admitted without TF_CONFIG, with a warning", async () => {
    const got = await admit([], jobSetPod("mnist", NS, "worker", 0, 1));
    assert.equal(got.allowed, true);
    assert.equal(got.pod.spec!.containers[0]!.env, undefined);
    assert.ok(
      got.warnings.some((w) => /no TF_CONFIG: JobSet team-a\/mnist not found/.test(w)),
      got.warnings.join("\n"),
    );
  });
});

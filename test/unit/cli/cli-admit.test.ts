/**
 * `quartermaster admit`: objects from files through the real webhooks, offline. Pods, pod templates in other
 * objects, training jobs (their pods' cluster spec from the job among the inputs), what is not admitted, bad
 * input; admitting the output again changes nothing; the command's output formats and exit codes.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { admitObjects, apiserverPodDefaults, type Admitted } from "../../../src/cli/admit.js";
import { parseObjects, readInputs, type InputObject } from "../../../src/cli/admit-input.js";
import { runCli } from "../../../src/cli/commands.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const LIMITS = checkPolicy({ limits: { container: { gpus: { "nvidia.com/gpu": 4 } } } }, "test");

const pod = (name: string, gpus: string, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "team-a", ...extra },
  spec: { containers: [{ name: "main", image: "img", resources: { limits: { "nvidia.com/gpu": gpus } } }] },
});

const pytorchJob: KubeObject = {
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "ddp", namespace: "team-a" },
  spec: {
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/gpu": "1" } } }] } } },
      Worker: { replicas: 2, template: { spec: { containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/gpu": "1" } } }] } } },
    },
  },
};

/** A replica pod as the training operator creates it (labels and controller ownerReference). */
const workerPod = (index: number): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: `ddp-worker-${index}`,
    namespace: "team-a",
    labels: { "training.kubeflow.org/job-name": "ddp", "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": String(index) },
    ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "ddp", uid: "u", controller: true }],
  },
  spec: { containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
});

/** A ResourceClaimTemplate asking for `count` NVIDIA GPUs through DRA. */
const claimTemplate = (name: string, count: number): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaimTemplate",
  metadata: { name, namespace: "team-a" },
  spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", count } }] } } },
});

/** A pod whose one container uses the claim made from `template`. */
/** A ClusterTrainingRuntime whose trainer Job (`node`) asks for `gpus` a node. */
const trainingRuntime = (name: string, gpus: number): KubeObject => ({
  apiVersion: "trainer.kubeflow.org/v1alpha1",
  kind: "ClusterTrainingRuntime",
  metadata: { name },
  spec: {
    mlPolicy: { numNodes: 1 },
    template: {
      spec: {
        replicatedJobs: [
          {
            name: "node",
            replicas: 1,
            template: {
              metadata: { labels: { "trainer.kubeflow.org/trainjob-ancestor-step": "trainer" } },
              spec: {
                template: {
                  spec: {
                    restartPolicy: "Never",
                    containers: [{ name: "node", image: "trainer:1", resources: { limits: { "nvidia.com/gpu": String(gpus) } } }],
                  },
                },
              },
            },
          },
        ],
      },
    },
  },
});

const trainJob = (name: string, runtime: string, numNodes: number): KubeObject => ({
  apiVersion: "trainer.kubeflow.org/v1alpha1",
  kind: "TrainJob",
  metadata: { name, namespace: "team-a" },
  spec: { runtimeRef: { name: runtime }, trainer: { numNodes } },
});

const draPod = (name: string, template: string): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "team-a" },
  spec: {
    containers: [{ name: "main", image: "img", resources: { claims: [{ name: "gpu" }] } }],
    resourceClaims: [{ name: "gpu", resourceClaimTemplateName: template }],
  },
});

const deployment = (gpus: string): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "infer", namespace: "team-a" },
  spec: {
    selector: { matchLabels: { app: "infer" } },
    template: {
      metadata: { labels: { app: "infer" } },
      spec: { containers: [{ name: "server", image: "img", resources: { limits: { "nvidia.com/gpu": gpus } } }] },
    },
  },
});

const cronJob: KubeObject = {
  apiVersion: "batch/v1",
  kind: "CronJob",
  metadata: { name: "nightly", namespace: "team-a" },
  spec: {
    schedule: "0 0 * * *",
    jobTemplate: {
      spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "main", image: "img", resources: { limits: { "nvidia.com/gpu": "8" } } }] } } },
    },
  },
};

const inputs = (...objects: KubeObject[]): InputObject[] => objects.map((object, i) => ({ source: `in.yaml#${i + 1}`, object }));
const envOf = (o: KubeObject, container = 0): Record<string, string | undefined> =>
  Object.fromEntries(
    ((o.spec as { containers: Array<{ env?: Array<{ name: string; value?: string }> }> }).containers[container]!.env ?? []).map((e) => [e.name, e.value]),
  );
const byName = (results: Admitted[], name: string): Admitted => {
  const found = results.find((r) => r.name === name);
  assert.ok(found, `no result for ${name} in ${results.map((r) => r.name).join(", ")}`);
  return found;
};

describe("admitObjects: the real webhooks, offline", () => {
  const cases: Array<{ name: string; policy?: ReturnType<typeof defaultPolicy>; objects: KubeObject[]; pods?: boolean; check(results: Admitted[]): void }> = [
    {
      name: "a GPU pod is outfitted (toleration, requests) and allowed, with the webhook's warnings",
      objects: [pod("p", "1")],
      check: ([r]) => {
        assert.equal(r!.allowed, true);
        assert.equal(r!.role, "pod");
        assert.ok(r!.patch.length > 0);
        assert.ok(
          r!.warnings.some((w) => /added tolerations for nvidia.com\/gpu/.test(w)),
          r!.warnings.join("\n"),
        );
        assert.deepEqual((r!.object.spec as { tolerations: unknown[] }).tolerations, [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }]);
      },
    },
    {
      name: "a pod over the container limit is denied, with the rule and the field path",
      policy: LIMITS,
      objects: [pod("big", "8")],
      check: ([r]) => {
        assert.equal(r!.allowed, false);
        assert.deepEqual(r!.deniedRules, ["container-limits"]);
        assert.deepEqual(
          r!.violations.map((v) => v.field),
          ["spec.containers[0].resources.limits[nvidia.com/gpu]"],
        );
      },
    },
    {
      name: "a Deployment's template is admitted as its pod: violation under spec.template, outfitted template written back",
      policy: LIMITS,
      objects: [deployment("8"), { ...deployment("2"), metadata: { name: "small", namespace: "team-a" } }],
      check: ([big, small]) => {
        assert.equal(big!.role, "templates");
        assert.deepEqual(
          big!.violations.map((v) => [v.rule, v.field]),
          [["container-limits", "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"]],
        );
        assert.equal(small!.allowed, true);
        const t = (small!.object.spec as { template: { metadata: { labels: object; annotations?: object }; spec: { tolerations?: unknown[] } } }).template;
        assert.deepEqual(t.metadata.labels, { app: "infer" });
        assert.equal(t.spec.tolerations?.length, 1);
        assert.ok(
          small!.patch.every((op) => op.path.startsWith("/spec/template/")),
          JSON.stringify(small!.patch),
        );
      },
    },
    {
      name: "a CronJob's template, two levels down",
      policy: LIMITS,
      objects: [cronJob],
      check: ([r]) =>
        assert.deepEqual(
          r!.violations.map((v) => v.field),
          ["spec.jobTemplate.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]"],
        ),
    },
    {
      name: "a replica pod gets its cluster spec from the training job among the inputs (given after it, too)",
      objects: [workerPod(1), pytorchJob],
      check: (results) => {
        const env = envOf(byName(results, "ddp-worker-1").object);
        assert.equal(env.MASTER_ADDR, "ddp-master-0");
        assert.equal(env.WORLD_SIZE, "3");
        assert.equal(env.RANK, "2");
        assert.equal(byName(results, "ddp").role, "job");
      },
    },
    {
      name: "a replica pod whose job is not among the inputs: admitted without a cluster spec, with the webhook's warning",
      objects: [workerPod(0)],
      check: ([r]) => {
        assert.equal(r!.allowed, true);
        assert.equal(envOf(r!.object).MASTER_ADDR, undefined);
        assert.ok(
          r!.warnings.some((w) => /no cluster spec/.test(w)),
          r!.warnings.join("\n"),
        );
      },
    },
    {
      name: "... and denied by job-lookup when the policy says so",
      policy: checkPolicy({ clusterSpec: { onJobLookupFailure: "deny" } }, "test"),
      objects: [workerPod(0)],
      check: ([r]) => assert.deepEqual([r!.allowed, r!.deniedRules], [false, ["job-lookup"]]),
    },
    {
      name: "--pods: every replica of a training job, as the operator creates it, with ranks 0..n-1",
      objects: [pytorchJob],
      pods: true,
      check: (results) => {
        assert.deepEqual(
          results.map((r) => r.name),
          ["ddp", "ddp-master-0", "ddp-worker-0", "ddp-worker-1"],
        );
        assert.deepEqual(
          results.slice(1).map((r) => envOf(r.object).RANK),
          ["0", "1", "2"],
        );
        assert.ok(results.slice(1).every((r) => r.from === "PyTorchJob/ddp"));
      },
    },
    {
      name: "a job over the job GPU limit is denied by job-gpus",
      policy: checkPolicy({ limits: { job: { gpus: 2 } } }, "test"),
      objects: [pytorchJob],
      check: ([r]) => assert.deepEqual([r!.role, r!.allowed, r!.deniedRules], ["job", false, ["job-gpus"]]),
    },
    {
      name: "DRA: a pod's claim template among the inputs is resolved, its devices held to the caps as the webhook holds them",
      policy: LIMITS,
      objects: [claimTemplate("eight", 8), draPod("big", "eight"), claimTemplate("two", 2), draPod("small", "two")],
      check: (results) => {
        assert.deepEqual(
          results.map((r) => [r.kind, r.name, r.allowed, r.deniedRules]),
          [
            ["ResourceClaimTemplate", "eight", false, ["container-limits"]],
            ["Pod", "big", false, ["container-limits"]],
            ["ResourceClaimTemplate", "two", true, []],
            ["Pod", "small", true, []],
          ],
        );
        // Outfitted like its extended-resource twin: the GPU toleration.
        const tolerations = (results[3]!.object.spec as { tolerations?: { key?: string }[] }).tolerations ?? [];
        assert.ok(
          tolerations.some((t) => t.key === "nvidia.com/gpu"),
          JSON.stringify(tolerations),
        );
      },
    },
    {
      name: "DRA: a claim template not among the inputs is unknown, refused under a GPU cap (gpu-unknown), never counted as nothing",
      policy: LIMITS,
      objects: [draPod("big", "elsewhere")],
      check: ([r]) => {
        assert.deepEqual([r!.allowed, r!.deniedRules], [false, ["gpu-unknown"]]);
        assert.ok(
          r!.violations.some((v) => v.field === "spec.resourceClaims[0]" && /create ResourceClaimTemplate elsewhere before the pod/.test(v.message)),
          JSON.stringify(r!.violations),
        );
      },
    },
    {
      name: "DRA: a claim template not among the inputs, no GPU cap: admitted, and says so",
      policy: checkPolicy({}, "test"),
      objects: [draPod("big", "elsewhere")],
      check: ([r]) => {
        assert.deepEqual([r!.allowed, r!.deniedRules], [true, []]);
        assert.ok(
          r!.warnings.some((w) => /ResourceClaimTemplate elsewhere .* not found/.test(w)),
          JSON.stringify(r!.warnings),
        );
      },
    },
    {
      name: "Trainer: a TrainJob's ClusterTrainingRuntime among the inputs is what its runtime lookup finds (4 GPUs a node × 3 nodes over a cap of 8)",
      policy: checkPolicy({ limits: { job: { gpus: 8 } } }, "test"),
      objects: [trainingRuntime("four-a-node", 4), trainJob("llm", "four-a-node", 3)],
      check: (results) => {
        const tj = results.find((r) => r.kind === "TrainJob")!;
        assert.deepEqual([tj.allowed, tj.deniedRules], [false, ["job-gpus"]]);
        assert.ok(!tj.warnings.some((w) => /could not be read/.test(w)), JSON.stringify(tj.warnings));
        assert.ok(
          tj.violations.some((v) => /12 GPUs/.test(v.message)),
          JSON.stringify(tj.violations),
        );
      },
    },
    {
      name: "Trainer: a TrainJob whose runtime is not among the inputs says it could not be read",
      policy: checkPolicy({ limits: { job: { gpus: 8 } } }, "test"),
      objects: [trainJob("llm", "elsewhere", 3)],
      check: ([r]) =>
        assert.ok(
          r!.warnings.some((w) => /runtime could not be read \(ClusterTrainingRuntime \/elsewhere not found\)/.test(w)),
          JSON.stringify(r!.warnings),
        ),
    },
    {
      name: "not admitted: a ConfigMap, and anything in a protected namespace",
      objects: [
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } },
        { ...pod("sys", "1"), metadata: { name: "sys", namespace: "kube-system" } },
      ],
      check: (results) => {
        assert.deepEqual(
          results.map((r) => [r.role, r.allowed, r.patch.length]),
          [
            ["other", true, 0],
            ["other", true, 0],
          ],
        );
        assert.match(results[0]!.skipped!, /no pod, pod template or training job/);
        assert.match(results[1]!.skipped!, /kube-system is never in Quartermaster's scope/);
      },
    },
  ];
  for (const c of cases) {
    it(c.name, async () => c.check(await admitObjects(inputs(...c.objects), { policy: c.policy ?? defaultPolicy(), pods: c.pods ?? false })));
  }

  it("admitting the outfitted objects again changes nothing (every kind of input)", async () => {
    const first = await admitObjects(inputs(pod("p", "1"), deployment("2"), cronJob, pytorchJob, workerPod(0)), { policy: defaultPolicy(), pods: true });
    // The replica pods are among the outputs now (without --pods they are not made again).
    const again = await admitObjects(inputs(...first.map((r) => r.object)), { policy: defaultPolicy(), pods: false });
    assert.equal(again.length, first.length);
    for (const r of again) assert.deepEqual(r.patch, [], `${r.kind}/${r.name} changed again: ${JSON.stringify(r.patch)}`);
  });

  it("the input objects are left as they were", async () => {
    const objects = [pod("p", "1"), deployment("2"), pytorchJob];
    const before = structuredClone(objects);
    await admitObjects(inputs(...objects), { policy: defaultPolicy(), pods: true });
    assert.deepEqual(objects, before);
  });
});

describe("reading inputs", () => {
  it("multi-document YAML and Lists, each object with file#document", () => {
    const text =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n- {apiVersion: v1, kind: Pod, metadata: {name: c}}\n";
    assert.deepEqual(
      parseObjects(text, "x.yaml").map((o) => o.source),
      ["x.yaml#1", "x.yaml#3.1", "x.yaml#3.2"],
    );
  });
  const bad: Array<[string, string, RegExp]> = [
    ["a YAML syntax error names the document and line", "apiVersion: v1\nkind: Pod\n---\nkind: [\n", /^x\.yaml#2: line \d+: /],
    ["a document that is no mapping", "- a\n- b\n", /^x\.yaml#1: not a Kubernetes object/],
    ["a document without kind", "apiVersion: v1\nmetadata: {}\n", /^x\.yaml#1: missing kind/],
    ["a List item without apiVersion", "apiVersion: v1\nkind: List\nitems: [{kind: Pod}]\n", /^x\.yaml#1\.items\[0\]: missing apiVersion/],
  ];
  for (const [name, text, message] of bad) it(name, () => assert.throws(() => parseObjects(text, "x.yaml"), { name: "InputError", message }));

  // The apiserver refuses a body over 3 MiB (413 Request Entity Too Large); kubectl sends a List's items one by one.
  const bigPod = (name: string, bytes: number): string =>
    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"${name}","annotations":{"blob":"${"x".repeat(bytes)}"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`;
  it("one object over the apiserver's 3 MiB request limit is refused as the apiserver would, naming it", () =>
    assert.throws(() => parseObjects(bigPod("huge", 3 * 1024 * 1024), "x.json"), {
      name: "InputError",
      message:
        /^x\.json#1: Pod huge is 314\d{4} bytes as JSON, over the apiserver's request limit of 3145728 bytes \(3 MiB\): the apiserver would refuse it \(413/,
    }));
  it("a List of 3 MiB in all whose items are each under the limit is read (kubectl sends them one by one)", () => {
    const list = `{"apiVersion":"v1","kind":"List","items":[${bigPod("a", 1_200_000)},${bigPod("b", 1_200_000)},${bigPod("c", 1_200_000)}]}`;
    assert.equal(parseObjects(list, "x.json").length, 3);
  });
  it("a pod just under the limit is read", () => assert.equal(parseObjects(bigPod("fits", 3 * 1024 * 1024 - 200), "x.json").length, 1));

  it("a directory: its YAML and JSON files in name order", async () => {
    const dir = mkdtempSync(join(tmpdir(), "qm-admit-"));
    writeFileSync(join(dir, "b.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n");
    writeFileSync(join(dir, "a.json"), JSON.stringify(pod("a", "1")));
    writeFileSync(join(dir, "notes.txt"), "not read");
    assert.deepEqual(
      (await readInputs([dir], "/")).map((o) => (o.object.metadata as { name: string }).name),
      ["a", "b"],
    );
  });
});

describe("quartermaster admit", () => {
  async function cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: (l: string) => out.push(l), stderr: (l: string) => err.push(l), cwd: ROOT, shutdown: new Promise<string>(() => undefined) };
    const code = await runCli(args, stdin === undefined ? io : { ...io, stdin: () => Promise.resolve(stdin) });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  }
  const dir = mkdtempSync(join(tmpdir(), "qm-admit-cli-"));
  writeFileSync(join(dir, "limits.yaml"), "limits:\n  container:\n    gpus: {nvidia.com/gpu: 4}\n");
  writeFileSync(join(dir, "deploy.yaml"), JSON.stringify(deployment("8")));

  it("examples/: exit 0, the outfitted objects as YAML on stdout, the report on stderr", async () => {
    const r = await cli(["admit", "-f", "examples/gpu-pod.yaml", "examples/pytorchjob.yaml", "-n", "team-a", "--pods"]);
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout) as Array<{ toJS(): KubeObject }>;
    assert.deepEqual(
      docs.map((d) => `${String(d.toJS().kind)}/${(d.toJS().metadata as { name: string }).name}`),
      ["Pod/gpu-smoke", "PyTorchJob/mnist-ddp", "Pod/mnist-ddp-master-0", "Pod/mnist-ddp-worker-0", "Pod/mnist-ddp-worker-1"],
    );
    assert.match(r.stderr, /^Pod team-a\/gpu-smoke \(examples\/gpu-pod\.yaml#1\): allowed, outfitted/m);
    assert.match(r.stderr, /warning: quartermaster: added tolerations for nvidia\.com\/gpu/);
    assert.match(r.stderr, /5 objects: 5 allowed, 0 denied$/);
  });

  it("a denial: exit 1, the violation with its rule and field path", async () => {
    const r = await cli(["admit", "-f", join(dir, "deploy.yaml"), "--policy", join(dir, "limits.yaml")]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Deployment team-a\/infer .*: DENIED by container-limits/);
    assert.match(r.stderr, /violation \[container-limits\] spec\.template\.spec\.containers\[0\]\.resources\.limits\[nvidia\.com\/gpu\]: 8 exceeds/);
  });

  it("-o json: a List of the outfitted objects; -o patch: the JSON patch of each", async () => {
    const json = await cli(["admit", "-f", "examples/gpu-pod.yaml", "-o", "json"]);
    assert.equal(json.code, 0, json.stderr);
    const list = JSON.parse(json.stdout) as { kind: string; items: KubeObject[] };
    assert.equal(list.kind, "List");
    assert.ok((list.items[0]!.spec as { tolerations?: unknown[] }).tolerations);
    const patch = await cli(["admit", "-f", "examples/gpu-pod.yaml", "-o", "patch"]);
    const [entry] = JSON.parse(patch.stdout) as Array<{ object: string; patch: Array<{ op: string; path: string }> }>;
    assert.equal(entry!.object, "Pod default/gpu-smoke");
    assert.ok(
      entry!.patch.some((op) => op.path === "/spec/tolerations"),
      JSON.stringify(entry!.patch),
    );
  });

  const errors: Array<[string, string[], number, RegExp]> = [
    ["no -f", ["admit"], 2, /admit: give the objects with -f FILE/],
    ["an unknown output", ["admit", "-f", "examples/gpu-pod.yaml", "-o", "table"], 2, /-o must be yaml, json or patch/],
    ["a missing file", ["admit", "-f", "nonexistent.yaml"], 1, /^quartermaster: cannot read -f nonexistent\.yaml: no such file$/],
    ["an invalid policy", ["admit", "-f", "examples/gpu-pod.yaml", "--policy", "examples/gpu-pod.yaml"], 1, /invalid policy/],
  ];
  it("-f - reads standard input (kubectl's -f -), not a file named -", async () => {
    const r = await cli(
      ["admit", "-f", "-", "-o", "json"],
      "apiVersion: v1\nkind: Pod\nmetadata: {name: from-stdin}\nspec: {containers: [{name: c, image: x}]}\n",
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(((JSON.parse(r.stdout) as { items: KubeObject[] }).items[0]!.metadata as { name?: string }).name, "from-stdin");
  });

  it("a directory with one file that holds no Kubernetes object: that file reported and skipped, the rest admitted", async () => {
    const d = mkdtempSync(join(tmpdir(), "qm-admit-dir-"));
    writeFileSync(join(d, "a-values.yaml"), "replicas: 3\nimage: x\n");
    writeFileSync(join(d, "b-pod.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: kept}\nspec: {containers: [{name: c, image: x}]}\n");
    const r = await cli(["admit", "-f", d, "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /^quartermaster: warning: .*a-values\.yaml.*: missing apiVersion; skipped$/m);
    assert.deepEqual(
      (JSON.parse(r.stdout) as { items: KubeObject[] }).items.map((o) => (o.metadata as { name?: string }).name),
      ["kept"],
    );
  });

  const kinds = join(dir, "kinds.yaml");
  writeFileSync(
    kinds,
    "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: c, image: x}]}}}\n---\n" +
      "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n",
  );
  const kindCases: Array<[string, string[], number, RegExp]> = [
    [
      "a mistyped kind: warned",
      ["admit", "-f", kinds],
      0,
      /^quartermaster: warning: .*kinds\.yaml#1: unknown kind Deploymnet in apps\/v1: did you mean Deployment\?$/m,
    ],
    [
      "apps/v1 with kind Pod: warned",
      ["admit", "-f", kinds],
      0,
      /^quartermaster: warning: .*kinds\.yaml#2: apiVersion apps\/v1 has no kind Pod \(Pod is v1\): fix apiVersion or kind$/m,
    ],
    ["--strict: the same, exit 1", ["admit", "--strict", "-f", kinds], 1, /^quartermaster: .*kinds\.yaml#1: unknown kind Deploymnet/m],
  ];
  it("warnings whole, not cut at the 120 characters of an AdmissionResponse", async () => {
    const pod = join(dir, "long-warning.yaml");
    writeFileSync(
      pod,
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {training.kubeflow.org/job-name: missing-job-with-a-long-name}\n" +
        "spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n",
    );
    const r = await cli(["admit", "-f", pod, "-o", "patch"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: quartermaster: no cluster spec: job default\/missing-job-with-a-long-name \(TFJob or .* or Caffe2Job\) not found$/m);
    assert.doesNotMatch(r.stderr, /…/);
  });

  for (const [name, args, code, message] of kindCases) {
    it(`${name} (exit ${code})`, async () => {
      const r = await cli(args);
      assert.equal(r.code, code, r.stderr);
      assert.match(r.stderr, message);
    });
  }

  for (const [name, args, code, message] of errors) {
    it(`${name}: exit ${code}`, async () => {
      const r = await cli(args);
      assert.equal(r.code, code, r.stderr);
      assert.match(r.stderr, message);
    });
  }
});

describe("apiserverPodDefaults: requests from limits, as the apiserver defaults a pod before and after each webhook", () => {
  const withResources = (containers: Array<Record<string, unknown>>, init: Array<Record<string, unknown>> = []): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p" },
    spec: {
      containers: containers.map((resources, i) => ({ name: `c${i}`, resources })),
      ...(init.length ? { initContainers: init.map((resources, i) => ({ name: `i${i}`, resources })) } : {}),
    },
  });
  const requests = (pod: KubeObject): unknown[] => {
    const spec = pod.spec as { containers: Array<{ resources: { requests?: unknown } }>; initContainers?: Array<{ resources: { requests?: unknown } }> };
    return [...spec.containers, ...(spec.initContainers ?? [])].map((c) => c.resources.requests);
  };
  const cases: Array<[string, KubeObject, unknown[]]> = [
    ["limits only: requests copied", withResources([{ limits: { "nvidia.com/gpu": "1", cpu: "4" } }]), [{ "nvidia.com/gpu": "1", cpu: "4" }]],
    [
      "a request given is kept, the missing one copied",
      withResources([{ limits: { cpu: "4", memory: "8Gi" }, requests: { cpu: "1" } }]),
      [{ cpu: "1", memory: "8Gi" }],
    ],
    ["init containers too", withResources([{}], [{ limits: { "nvidia.com/gpu": "2" } }]), [undefined, { "nvidia.com/gpu": "2" }]],
  ];
  for (const [name, pod, want] of cases) {
    it(name, () => {
      const before = structuredClone(pod);
      assert.deepEqual(requests(apiserverPodDefaults(pod)), want);
      assert.deepEqual(pod, before, "the input is not changed");
    });
  }
  it("nothing to default: the same object", () => {
    const pod = withResources([{ limits: { cpu: "1" }, requests: { cpu: "1" } }, {}]);
    assert.equal(apiserverPodDefaults(pod), pod);
  });
});

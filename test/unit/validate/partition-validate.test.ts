/**
 * accelerator-allowed (src/validate/accelerator.ts): allowedAccelerators / allowedPartitions hold however
 * a pod asks, not only through the annotations: nodeSelector, required node affinity, MIG resources.
 * Cases marked "bypass" were admitted before the rule looked past the annotations.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod, V1PodSpec } from "@kubernetes/client-node";
import { checkPolicy } from "../../../src/policy/load.js";
import { parseProduct, validateAccelerators } from "../../../src/validate/accelerator.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { CORPUS_SKIP, corpusJobs, corpusPods } from "../../fixtures/corpus.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { container, testPod } from "../../fixtures/pods.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const policy = checkPolicy(
  {
    limits: { allowedAccelerators: ["A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"], allowedPartitions: ["1g.5gb", "none"] },
    namespaces: [
      { pattern: "open-*", limits: { allowedAccelerators: ["A100-SXM4-40GB", "Tesla-T4"], allowedPartitions: ["1g.5gb", "2g.10gb", "3g.20gb"] } },
      { pattern: "empty", limits: { allowedAccelerators: [], allowedPartitions: [] } },
    ],
  },
  "test",
);
const ctx = (namespace = "team-a", p = policy): ValidationContext => ({ policy: p, namespace, limits: effectiveLimits(p, namespace) });
type Want = Array<[field: string, message: string]>;
const got = (pod: V1Pod, c = ctx()): Want =>
  validatePod(deepFreeze(pod), c)
    .violations.filter((v) => v.rule === "accelerator-allowed")
    .map((v) => [v.field, v.message]);

const PRODUCT = "nvidia.com/gpu.product";
const TERM0 = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions";
const TERM1 = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions";
const notAllowed = (a: string, ns = "team-a", allowed = "A100-SXM4-40GB, NVIDIA-H100-80GB-HBM3") =>
  `accelerator ${a} is not allowed in namespace ${ns}; allowed: ${allowed}`;
const partNotAllowed = (p: string, ns = "team-a", allowed = "1g.5gb, none") => `GPU partition ${p} is not allowed in namespace ${ns}; allowed: ${allowed}`;
const gpu = (limits: Record<string, string> = { "nvidia.com/gpu": "1" }) => container({ limits });
const pod = (spec: Partial<V1PodSpec> = {}, annotations?: Record<string, string>) => testPod({ annotations, spec: { containers: [gpu()], ...spec } });
const required = (...terms: object[]) => ({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } } });
const expr = (key: string, operator: string, values?: string[]) => ({ key, operator, ...(values ? { values } : {}) });

describe("accelerator-allowed: allowed", () => {
  const cases: Array<[string, V1Pod, ValidationContext?]> = [
    ["nothing asked", pod()],
    ["annotation allowed", pod({}, { "quartermaster.dev/accelerator": "A100-SXM4-40GB", "quartermaster.dev/gpu-partition": "1g.5gb" })],
    ["nodeSelector on an allowed product", pod({ nodeSelector: { [PRODUCT]: "NVIDIA-H100-80GB-HBM3" } })],
    ["nodeSelector on an allowed product, time-sliced (-SHARED)", pod({ nodeSelector: { [PRODUCT]: "A100-SXM4-40GB-SHARED" } })],
    ["nodeSelector on an allowed single-strategy MIG product", pod({ nodeSelector: { [PRODUCT]: "A100-SXM4-40GB-MIG-1g.5gb" } })],
    ["affinity In allowed values only", pod(required({ matchExpressions: [expr(PRODUCT, "In", ["A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"])] }))],
    ["affinity DoesNotExist on the accelerator label (off GPU nodes)", pod(required({ matchExpressions: [expr(PRODUCT, "DoesNotExist")] }))],
    [
      "preferred affinity is not binding",
      pod({
        affinity: {
          nodeAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [expr(PRODUCT, "In", ["Tesla-T4"])] } }],
          },
        },
      }),
    ],
    ["an allowed MIG resource", pod({ containers: [gpu({ "nvidia.com/mig-1g.5gb": "1" })] })],
    ["the mixed-strategy label of an allowed profile", pod(required({ matchExpressions: [expr("nvidia.com/mig-1g.5gb.count", "Gt", ["0"])] }))],
    ["NotIn on a MIG profile label keeps away from it", pod(required({ matchExpressions: [expr("nvidia.com/mig-2g.10gb.count", "DoesNotExist")] }))],
    [
      "per-namespace override allows T4 and 3g.20gb",
      pod({ nodeSelector: { [PRODUCT]: "Tesla-T4" }, containers: [gpu({ "nvidia.com/mig-3g.20gb": "1" })] }),
      ctx("open-lab"),
    ],
    [
      "no lists: anything goes",
      pod({ nodeSelector: { [PRODUCT]: "Tesla-T4" }, ...required({ matchExpressions: [expr(PRODUCT, "Exists")] }) }),
      ctx("x", checkPolicy({}, "none")),
    ],
    ["another label's values are not accelerators", pod({ nodeSelector: { "topology.kubernetes.io/zone": "Tesla-T4" } })],
  ];
  for (const [name, p, c] of cases) it(name, () => assert.deepEqual(got(p, c), []));
});

describe("accelerator-allowed: violations", () => {
  const cases: Array<[string, V1Pod, Want, ValidationContext?]> = [
    [
      "annotation accelerator",
      pod({}, { "quartermaster.dev/accelerator": "Tesla-T4" }),
      [["metadata.annotations[quartermaster.dev/accelerator]", notAllowed("Tesla-T4")]],
    ],
    [
      "annotation partition",
      pod({}, { "quartermaster.dev/gpu-partition": "3g.20gb" }),
      [["metadata.annotations[quartermaster.dev/gpu-partition]", partNotAllowed("3g.20gb")]],
    ],
    [
      "bypass: nodeSelector on the accelerator label",
      pod({ nodeSelector: { [PRODUCT]: "Tesla-T4" } }),
      [[`spec.nodeSelector[${PRODUCT}]`, notAllowed("Tesla-T4")]],
    ],
    [
      "bypass: nodeSelector, time-sliced product",
      pod({ nodeSelector: { [PRODUCT]: "Tesla-T4-SHARED" } }),
      [[`spec.nodeSelector[${PRODUCT}]`, notAllowed("Tesla-T4")]],
    ],
    [
      "bypass: nodeSelector on a single-strategy MIG product: product and profile",
      pod({ nodeSelector: { [PRODUCT]: "A100-SXM4-80GB-MIG-3g.40gb" } }),
      [
        [`spec.nodeSelector[${PRODUCT}]`, notAllowed("A100-SXM4-80GB")],
        [`spec.nodeSelector[${PRODUCT}]`, partNotAllowed("3g.40gb")],
      ],
    ],
    [
      "bypass: required affinity In with one value outside the list, in the second term",
      pod(
        required(
          { matchExpressions: [expr(PRODUCT, "In", ["A100-SXM4-40GB"])] },
          { matchExpressions: [expr("zone", "In", ["a"]), expr(PRODUCT, "In", ["A100-SXM4-40GB", "Tesla-T4"])] },
        ),
      ),
      [[`${TERM1}[1]`, notAllowed("Tesla-T4")]],
    ],
    ...(["NotIn", "Exists", "Gt", "Lt"] as const).map((op): [string, V1Pod, Want] => [
      `bypass: required affinity ${op} could select any accelerator`,
      pod(required({ matchExpressions: [expr(PRODUCT, op, op === "Exists" ? undefined : op === "NotIn" ? ["Tesla-T4"] : ["1"])] })),
      [
        [
          `${TERM0}[0]`,
          `${PRODUCT} ${op} may select any accelerator; namespace team-a allows only: A100-SXM4-40GB, NVIDIA-H100-80GB-HBM3 (use In with allowed values)`,
        ],
      ],
    ]),
    [
      "bypass: MIG resources outside allowedPartitions, per container and side",
      pod({
        initContainers: [gpu({ "nvidia.com/mig-2g.10gb": "1" })],
        containers: [container({ limits: { "nvidia.com/mig-3g.20gb": "1" }, requests: { "nvidia.com/mig-3g.20gb": "1" } })],
      }),
      [
        ["spec.initContainers[0].resources.limits[nvidia.com/mig-2g.10gb]", partNotAllowed("2g.10gb")],
        ["spec.containers[0].resources.limits[nvidia.com/mig-3g.20gb]", partNotAllowed("3g.20gb")],
      ],
    ],
    [
      "bypass: GFD's mixed-strategy label of another profile",
      pod({ nodeSelector: { "nvidia.com/mig-2g.10gb.count": "16" }, ...required({ matchExpressions: [expr("nvidia.com/mig-3g.20gb.product", "Exists")] }) }),
      [
        ["spec.nodeSelector[nvidia.com/mig-2g.10gb.count]", partNotAllowed("2g.10gb")],
        [`${TERM0}[0]`, partNotAllowed("3g.20gb")],
      ],
    ],
    [
      "an empty list allows nothing",
      pod({ nodeSelector: { [PRODUCT]: "A100-SXM4-40GB" } }, { "quartermaster.dev/gpu-partition": "none" }),
      [
        ["metadata.annotations[quartermaster.dev/gpu-partition]", partNotAllowed("none", "empty", "none")],
        [`spec.nodeSelector[${PRODUCT}]`, notAllowed("A100-SXM4-40GB", "empty", "none")],
      ],
      ctx("empty"),
    ],
  ];
  for (const [name, p, want, c] of cases) it(`${name} → exactly these`, () => assert.deepEqual(got(p, c), want));

  it("an explicit partitionNodeLabel is checked like the accelerator label", () => {
    const p = checkPolicy({ accelerator: { partitionNodeLabel: "cloud.google.com/gke-gpu-partition-size" }, limits: { allowedPartitions: ["1g.5gb"] } }, "gke");
    const c = ctx("team-a", p);
    assert.deepEqual(got(pod({ nodeSelector: { "cloud.google.com/gke-gpu-partition-size": "3g.20gb" } }), c), [
      ["spec.nodeSelector[cloud.google.com/gke-gpu-partition-size]", partNotAllowed("3g.20gb", "team-a", "1g.5gb")],
    ]);
    assert.deepEqual(got(pod(required({ matchExpressions: [expr("cloud.google.com/gke-gpu-partition-size", "Exists")] })), c), [
      [
        `${TERM0}[0]`,
        "cloud.google.com/gke-gpu-partition-size Exists may select any GPU partition; namespace team-a allows only: 1g.5gb (use In with allowed values)",
      ],
    ]);
  });

  it("a template's paths are the ones given", () => {
    const base = "spec.pytorchReplicaSpecs.Worker.template";
    const f = validateAccelerators(
      { annotations: { "quartermaster.dev/accelerator": "Tesla-T4" } },
      { containers: [], nodeSelector: { [PRODUCT]: "Tesla-T4" } },
      ctx(),
      { metadata: `${base}.metadata`, spec: `${base}.spec` },
    );
    assert.deepEqual(
      f.violations.map((v) => v.field),
      [`${base}.metadata.annotations[quartermaster.dev/accelerator]`, `${base}.spec.nodeSelector[${PRODUCT}]`],
    );
  });

  it("hostile shapes do not throw", () => {
    const weird = {
      containers: [null, { resources: { limits: null } }],
      nodeSelector: { [PRODUCT]: 5 },
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [null, { matchExpressions: [null, { key: PRODUCT, operator: "In", values: [1, "Tesla-T4"] }] }],
          },
        },
      },
    };
    const f = validateAccelerators({ annotations: { "quartermaster.dev/accelerator": 7 as never } }, weird as never, ctx());
    assert.deepEqual(
      f.violations.map((v) => v.field),
      [`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[1]`],
    );
  });
});

describe("accelerator-allowed on job templates", () => {
  it("a replica template's annotation, nodeSelector and MIG resources, at the template's paths", () => {
    const base = job("PyTorchJob", "pt", "team-a", { Master: 1, Worker: { replicas: 2, annotations: { "quartermaster.dev/accelerator": "Tesla-T4" } } });
    const spec = base.spec as { pytorchReplicaSpecs: Record<string, { template: { spec: Record<string, unknown> } }> };
    const w = spec.pytorchReplicaSpecs.Worker!;
    const j = deepFreeze({
      ...base,
      spec: {
        pytorchReplicaSpecs: {
          ...spec.pytorchReplicaSpecs,
          Worker: {
            ...w,
            template: {
              ...w.template,
              spec: {
                ...w.template.spec,
                nodeSelector: { [PRODUCT]: "Tesla-T4" },
                containers: [{ name: "pytorch", image: "img", resources: { limits: { "nvidia.com/mig-3g.20gb": "1" } } }],
              },
            },
          },
        },
      },
    });
    const f = validateJob(j, kindOf("PyTorchJob"), ctx()).violations.filter((v) => v.rule === "accelerator-allowed");
    const t = "spec.pytorchReplicaSpecs.Worker.template";
    assert.deepEqual(
      f.map((v) => [v.field, v.message]),
      [
        [`${t}.metadata.annotations[quartermaster.dev/accelerator]`, notAllowed("Tesla-T4")],
        [`${t}.spec.nodeSelector[${PRODUCT}]`, notAllowed("Tesla-T4")],
        [`${t}.spec.containers[0].resources.limits[nvidia.com/mig-3g.20gb]`, partNotAllowed("3g.20gb")],
      ],
    );
  });

  it("corpus jobs asking for 3g.20gb slices are refused at the template", { skip: CORPUS_SKIP }, () => {
    const refused = corpusJobs().filter(({ job: j, kind }) =>
      validateJob(j, kind, ctx()).violations.some((v) => v.rule === "accelerator-allowed" && v.field.endsWith("[nvidia.com/mig-3g.20gb]")),
    );
    assert.deepEqual(
      refused.map((r) => r.file),
      ["instaslice-operator__samples_kueue_02-pytorchjob.yaml"],
    );
  });
});

describe("parseProduct", () => {
  const cases: Array<[string, ReturnType<typeof parseProduct>]> = [
    ["A100-SXM4-40GB", { accelerator: "A100-SXM4-40GB" }],
    ["A100-SXM4-40GB-MIG-1g.5gb", { accelerator: "A100-SXM4-40GB", partition: "1g.5gb" }],
    ["Tesla-T4-SHARED", { accelerator: "Tesla-T4" }],
    ["A100-SXM4-40GB-MIG-1g.5gb-SHARED", { accelerator: "A100-SXM4-40GB", partition: "1g.5gb" }],
  ];
  for (const [v, want] of cases) it(v, () => assert.deepEqual(parseProduct(v), want));
});

describe("corpus under allowed lists", { skip: CORPUS_SKIP }, () => {
  it("the gpu-operator test Deployment pinned to Tesla-T4-SHARED by nodeSelector is refused; MIG pods outside 1g.5gb too", () => {
    const bad = new Map<string, string[]>();
    for (const { source, pod: p } of corpusPods()) {
      const fields = got(p as V1Pod).map(([f]) => f);
      if (fields.length) bad.set(source, fields);
    }
    const sources = [...bad.keys()];
    assert.ok(
      sources.some((s) => s.startsWith("gpu-operator__tests_plugin-test.yaml") && bad.get(s)!.includes(`spec.nodeSelector[${PRODUCT}]`)),
      sources.join("\n"),
    );
    assert.ok(
      sources.some((s) => s.startsWith("HAMi__examples_nvidia_mig_example.yaml")),
      sources.join("\n"),
    );
    assert.ok(!sources.some((s) => s.startsWith("instaslice-operator__samples_test-pod.yaml")), "a 1g.5gb pod is allowed");
  });
});

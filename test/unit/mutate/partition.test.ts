/**
 * Partition and accelerator placement against nodes labelled as NVIDIA's GPU operator labels them
 * (test/fixtures/nodes.ts): where a pod can be scheduled after the accelerator mutation, with the
 * scheduler's own node-affinity rules, for hand-written pods and for the corpus pods that ask for MIG
 * slices or GPUs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { V1NodeAffinity, V1NodeSelectorRequirement, V1Pod } from "@kubernetes/client-node";
import { placeOnAccelerator, withRequiredNodeAlternatives } from "../../../src/mutate/accelerator.js";
import { mutatePod } from "../../../src/mutate/index.js";
import type { MutationContext } from "../../../src/mutate/types.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { CORPUS_SKIP, corpusPods } from "../../fixtures/corpus.js";
import {
  A100_MIG_DISABLED,
  A100_MIXED,
  A100_SINGLE,
  AMD_MI250,
  CPU_NODE,
  H100_NO_MIG,
  NODES,
  affinityMatches,
  matchesNodeAffinity,
  matchesRequirement,
  schedulableOn,
  withLabels,
  type FixtureNode,
} from "../../fixtures/nodes.js";
import { container, testPod } from "../../fixtures/pods.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const ctxOf = (accelerator: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): MutationContext => ({
  policy: checkPolicy({ accelerator, ...extra }, "test"),
  namespace: "team-a",
});
const WITH_PRODUCTS = ctxOf({ migProducts: ["A100-SXM4-40GB", "A100-SXM4-80GB"] });
const DEFAULTS = ctxOf();

const gpuPod = (annotations: Record<string, string>, limits: Record<string, string> = { "nvidia.com/gpu": "1" }, spec: Partial<V1Pod["spec"]> = {}): V1Pod =>
  testPod({ annotations, spec: { containers: [container({ limits })], ...spec } });
const part = (p: string, extra: Record<string, string> = {}) => ({ "quartermaster.dev/gpu-partition": p, ...extra });
const acc = (a: string) => ({ "quartermaster.dev/accelerator": a });

const ALL = NODES.map((n) => n.name);
const names = (...nodes: FixtureNode[]) => nodes.map((n) => n.name);

describe("fixture matcher: kube-scheduler's node affinity", () => {
  const labels = { a: "1", b: "x", n: "7" };
  const cases: Array<[string, V1NodeSelectorRequirement, boolean]> = [
    ["In, value listed", { key: "b", operator: "In", values: ["y", "x"] }, true],
    ["In, value not listed", { key: "b", operator: "In", values: ["y"] }, false],
    ["In, label missing", { key: "z", operator: "In", values: ["x"] }, false],
    ["NotIn, value listed", { key: "b", operator: "NotIn", values: ["x"] }, false],
    ["NotIn, label missing → matches", { key: "z", operator: "NotIn", values: ["x"] }, true],
    ["Exists", { key: "a", operator: "Exists" }, true],
    ["Exists, missing", { key: "z", operator: "Exists" }, false],
    ["DoesNotExist", { key: "z", operator: "DoesNotExist" }, true],
    ["DoesNotExist, present", { key: "a", operator: "DoesNotExist" }, false],
    ["Gt, integer compare", { key: "n", operator: "Gt", values: ["6"] }, true],
    ["Gt, equal", { key: "n", operator: "Gt", values: ["7"] }, false],
    ["Gt, label not an integer", { key: "b", operator: "Gt", values: ["0"] }, false],
    ["Gt, label missing", { key: "z", operator: "Gt", values: ["0"] }, false],
    ["Lt", { key: "n", operator: "Lt", values: ["10"] }, true],
    ["Lt, compares numbers not strings (7 < 10)", { key: "n", operator: "Lt", values: ["10"] }, true],
  ];
  for (const [name, r, want] of cases) it(name, () => assert.equal(matchesRequirement(r, labels), want));

  const node: FixtureNode = { name: "n1", labels, allocatable: {}, offers: { migProfiles: [], fullGpus: 0 } };
  const pod = (affinity?: V1NodeAffinity, nodeSelector?: Record<string, string>) =>
    testPod({ spec: { ...(affinity ? { affinity: { nodeAffinity: affinity } } : {}), ...(nodeSelector ? { nodeSelector } : {}) } });
  const req = (...terms: object[]): V1NodeAffinity => ({ requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } });
  const podCases: Array<[string, V1Pod, boolean]> = [
    ["no constraints", pod(), true],
    [
      "terms are ORed",
      pod(req({ matchExpressions: [{ key: "b", operator: "In", values: ["no"] }] }, { matchExpressions: [{ key: "a", operator: "Exists" }] })),
      true,
    ],
    [
      "expressions in a term are ANDed",
      pod(
        req({
          matchExpressions: [
            { key: "a", operator: "Exists" },
            { key: "b", operator: "In", values: ["no"] },
          ],
        }),
      ),
      false,
    ],
    ["an empty term matches nothing", pod(req({})), false],
    ["an empty term beside a matching one", pod(req({}, { matchExpressions: [{ key: "a", operator: "Exists" }] })), true],
    ["matchFields on metadata.name", pod(req({ matchFields: [{ key: "metadata.name", operator: "In", values: ["n1"] }] })), true],
    ["nodeSelector ANDed with affinity", pod(req({ matchExpressions: [{ key: "a", operator: "Exists" }] }), { b: "y" }), false],
    ["nodeSelector alone", pod(undefined, { b: "x", a: "1" }), true],
    [
      "preferred terms do not filter",
      pod({ preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "z", operator: "Exists" }] } }] }),
      true,
    ],
  ];
  for (const [name, p, want] of podCases) it(`pod: ${name}`, () => assert.equal(matchesNodeAffinity(p, node), want));
});

describe("partition placement on GPU-operator-labelled nodes", () => {
  // [name, ctx, pod, nodes whose labels match after mutation, nodes where the pod also fits]
  const cases: Array<[string, MutationContext, V1Pod, string[], string[]]> = [
    [
      "1g.5gb as a MIG resource (mixed strategy)",
      WITH_PRODUCTS,
      gpuPod(part("1g.5gb"), { "nvidia.com/mig-1g.5gb": "1" }),
      names(A100_MIXED, A100_SINGLE),
      names(A100_MIXED),
    ],
    ["1g.5gb as nvidia.com/gpu (single strategy)", WITH_PRODUCTS, gpuPod(part("1g.5gb")), names(A100_MIXED, A100_SINGLE), names(A100_SINGLE)],
    ["1g.5gb without migProducts: mixed strategy only", DEFAULTS, gpuPod(part("1g.5gb")), names(A100_MIXED), []],
    [
      "2g.10gb: only the node that has that profile",
      WITH_PRODUCTS,
      gpuPod(part("2g.10gb"), { "nvidia.com/mig-2g.10gb": "1" }),
      names(A100_MIXED),
      names(A100_MIXED),
    ],
    ["3g.20gb: no node offers it", WITH_PRODUCTS, gpuPod(part("3g.20gb"), { "nvidia.com/mig-3g.20gb": "1" }), [], []],
    [
      "1g.5gb on accelerator A100-SXM4-40GB (product label carries the profile under single)",
      DEFAULTS,
      gpuPod(part("1g.5gb", acc("A100-SXM4-40GB"))),
      names(A100_MIXED, A100_SINGLE),
      names(A100_SINGLE),
    ],
    ["1g.5gb on accelerator NVIDIA-H100-80GB-HBM3: none", WITH_PRODUCTS, gpuPod(part("1g.5gb", acc("NVIDIA-H100-80GB-HBM3"))), [], []],
    [
      "none: every node whose GPUs are not MIG-enabled",
      WITH_PRODUCTS,
      gpuPod(part("none")),
      names(A100_MIG_DISABLED, H100_NO_MIG, AMD_MI250, CPU_NODE),
      names(A100_MIG_DISABLED, H100_NO_MIG),
    ],
    [
      "none on A100-SXM4-40GB: the MIG-disabled A100 only",
      DEFAULTS,
      gpuPod(part("none", acc("A100-SXM4-40GB"))),
      names(A100_MIG_DISABLED),
      names(A100_MIG_DISABLED),
    ],
    [
      "none with 8 GPUs",
      DEFAULTS,
      gpuPod(part("none"), { "nvidia.com/gpu": "8" }),
      names(A100_MIG_DISABLED, H100_NO_MIG, AMD_MI250, CPU_NODE),
      names(A100_MIG_DISABLED, H100_NO_MIG),
    ],
    ["accelerator alone", DEFAULTS, gpuPod(acc("NVIDIA-H100-80GB-HBM3")), names(H100_NO_MIG), names(H100_NO_MIG)],
    [
      "nodeSelector on another product ANDs with the partition",
      WITH_PRODUCTS,
      gpuPod(part("1g.5gb"), undefined, { nodeSelector: { "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" } }),
      [],
      [],
    ],
    [
      "custom accelerator label: ANDed into both strategies' terms",
      ctxOf({ nodeLabel: "example.com/gpu-model", migProducts: ["A100-SXM4-40GB"] }),
      gpuPod(part("1g.5gb", acc("a100"))),
      [],
      [],
    ],
    // The old default (partitionNodeLabel: nvidia.com/mig.config) is still there on request, and shows the bug.
    [
      "explicit partitionNodeLabel nvidia.com/mig.config: 1g.5gb matches no node",
      ctxOf({ partitionNodeLabel: "nvidia.com/mig.config" }),
      gpuPod(part("1g.5gb")),
      [],
      [],
    ],
    [
      "explicit partitionNodeLabel nvidia.com/mig.config: none excludes the MIG-disabled A100",
      ctxOf({ partitionNodeLabel: "nvidia.com/mig.config" }),
      gpuPod(part("none")),
      names(H100_NO_MIG, AMD_MI250, CPU_NODE),
      names(H100_NO_MIG),
    ],
    [
      "unpartitionedRequirement overrides none",
      ctxOf({ unpartitionedRequirement: { key: "nvidia.com/mig.config", operator: "In", values: ["all-disabled"] } }),
      gpuPod(part("none")),
      names(A100_MIG_DISABLED),
      names(A100_MIG_DISABLED),
    ],
  ];
  for (const [name, ctx, pod, matching, fitting] of cases) {
    it(`${name}: labels match ${matching.join(", ") || "no node"}; fits ${fitting.join(", ") || "nowhere"}`, () => {
      const out = placeOnAccelerator.mutate(deepFreeze(pod), ctx);
      assert.deepEqual(affinityMatches(out), matching);
      assert.deepEqual(schedulableOn(out), fitting);
      assert.equal(placeOnAccelerator.mutate(deepFreeze(out), ctx), out, "a second run changes the pod");
    });
  }

  it("a custom accelerator label: the nodes that carry it match", () => {
    const ctx = ctxOf({ nodeLabel: "example.com/gpu-model", migProducts: ["A100-SXM4-40GB"] });
    const nodes = [
      withLabels(A100_MIXED, { "example.com/gpu-model": "a100" }),
      withLabels(A100_SINGLE, { "example.com/gpu-model": "a100" }),
      withLabels(H100_NO_MIG, { "example.com/gpu-model": "h100" }),
    ];
    const out = placeOnAccelerator.mutate(gpuPod(part("1g.5gb", acc("a100"))), ctx);
    assert.deepEqual(affinityMatches(out, nodes), names(A100_MIXED, A100_SINGLE));
  });

  it("the mixed and single strategies are separate terms (ORed)", () => {
    const out = placeOnAccelerator.mutate(gpuPod(part("1g.5gb")), WITH_PRODUCTS);
    assert.deepEqual(out.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms, [
      { matchExpressions: [{ key: "nvidia.com/mig-1g.5gb.count", operator: "Gt", values: ["0"] }] },
      {
        matchExpressions: [
          { key: "nvidia.com/mig.strategy", operator: "In", values: ["single"] },
          { key: "nvidia.com/gpu.product", operator: "In", values: ["A100-SXM4-40GB-MIG-1g.5gb", "A100-SXM4-80GB-MIG-1g.5gb"] },
        ],
      },
    ]);
  });

  it("a profile too long for GFD's label key is ignored with a warning", () => {
    const p = "1g." + "5".repeat(52);
    const pod = gpuPod(part(p));
    assert.equal(placeOnAccelerator.mutate(pod, DEFAULTS), pod);
    assert.deepEqual(placeOnAccelerator.advise!(pod, DEFAULTS), [
      `quartermaster: quartermaster.dev/gpu-partition=${p} ignored: not a MIG profile usable in a node label (nvidia.com/mig-<profile>.count)`,
    ]);
  });

  const advice: Array<[string, V1Pod, string[]]> = [
    ["a MIG resource of the partition asked", gpuPod(part("1g.5gb"), { "nvidia.com/mig-1g.5gb": "1" }), []],
    [
      "a MIG resource of another profile",
      gpuPod(part("1g.5gb"), { "nvidia.com/mig-2g.10gb": "1" }),
      ["quartermaster: nvidia.com/mig-2g.10gb does not match quartermaster.dev/gpu-partition=1g.5gb; no node will fit"],
    ],
    [
      "none with a MIG resource",
      gpuPod(part("none"), { "nvidia.com/mig-2g.10gb": "1" }),
      ["quartermaster: nvidia.com/mig-2g.10gb does not match quartermaster.dev/gpu-partition=none; no node will fit"],
    ],
    ["whole GPUs", gpuPod(part("1g.5gb")), []],
  ];
  for (const [name, pod, want] of advice) it(`advice: ${name}`, () => assert.deepEqual(placeOnAccelerator.advise!(pod, WITH_PRODUCTS), want));

  const explained: Array<[string, MutationContext, Record<string, string>, string]> = [
    ["a partition, both strategies", WITH_PRODUCTS, part("1g.5gb"), "MIG 1g.5gb (mixed or single strategy)"],
    ["a partition, mixed only", DEFAULTS, part("1g.5gb"), "MIG 1g.5gb (mixed strategy)"],
    [
      "accelerator and partition",
      DEFAULTS,
      part("2g.10gb", acc("A100-SXM4-40GB")),
      "nvidia.com/gpu.product=A100-SXM4-40GB and MIG 2g.10gb (mixed or single strategy)",
    ],
    ["none", DEFAULTS, part("none"), "GPUs without MIG"],
    ["none on an explicit label", ctxOf({ partitionNodeLabel: "nvidia.com/mig.config" }), part("none"), "nvidia.com/mig.config DoesNotExist"],
    ["a partition on an explicit label", ctxOf({ partitionNodeLabel: "nvidia.com/mig.config" }), part("all-1g.5gb"), "nvidia.com/mig.config=all-1g.5gb"],
  ];
  for (const [name, ctx, annotations, want] of explained) {
    it(`explanation, ${name}: short enough for a warning`, () => {
      const pod = gpuPod(annotations);
      const text = placeOnAccelerator.explain(pod, placeOnAccelerator.mutate(pod, ctx), ctx);
      assert.equal(text, `quartermaster: placed on nodes with ${want}`);
      assert.ok(text.length <= 120, text);
    });
  }
});

describe("merging alternatives into the pod's own required terms", () => {
  const zones = ["a", "b", "c"];
  // Every fixture node in every zone, plus one pinned by name: enough to tell any two selectors apart here.
  const nodes = NODES.flatMap((n) => zones.map((z) => withLabels(n, { "topology.kubernetes.io/zone": z }, `${n.name}-${z}`)));
  const zone = (...z: string[]) => ({ key: "topology.kubernetes.io/zone", operator: "In", values: z });
  const affinity = (...terms: object[]) => ({ affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } } });
  const existing: Array<[string, Partial<V1Pod["spec"]>]> = [
    ["no affinity", {}],
    ["one term", affinity({ matchExpressions: [zone("a")] })],
    [
      "two terms",
      affinity({ matchExpressions: [zone("a")] }, { matchExpressions: [zone("b", "c"), { key: "nvidia.com/gpu.count", operator: "Gt", values: ["4"] }] }),
    ],
    ["a term by node name", affinity({ matchFields: [{ key: "metadata.name", operator: "In", values: ["a100-mixed-b", "h100-no-mig-c"] }] })],
    ["an empty term beside a real one", affinity({}, { matchExpressions: [zone("c")] })],
    [
      "a term that already holds the mixed alternative",
      affinity({ matchExpressions: [zone("a"), { key: "nvidia.com/mig-1g.5gb.count", operator: "Gt", values: ["0"] }] }, { matchExpressions: [zone("b")] }),
    ],
    ["nodeSelector and a term", { nodeSelector: { "topology.kubernetes.io/zone": "b" }, ...affinity({ matchExpressions: [zone("a", "b")] }) }],
  ];
  const asks: Array<[string, Record<string, string>]> = [
    ["1g.5gb", part("1g.5gb")],
    ["none", part("none")],
    ["A100 + 1g.5gb", part("1g.5gb", acc("A100-SXM4-40GB"))],
    ["A100", acc("A100-SXM4-40GB")],
  ];
  for (const [en, spec] of existing) {
    for (const [an, annotations] of asks) {
      it(`${en} × ${an}: selects exactly (the pod's own selection) ∩ (the placement alone); idempotent`, () => {
        const pod = deepFreeze(gpuPod(annotations, undefined, spec));
        const out = placeOnAccelerator.mutate(pod, WITH_PRODUCTS);
        const alone = placeOnAccelerator.mutate(gpuPod(annotations), WITH_PRODUCTS);
        const want = nodes.filter((n) => matchesNodeAffinity(pod, n) && matchesNodeAffinity(alone, n)).map((n) => n.name);
        assert.deepEqual(affinityMatches(out, nodes), want);
        assert.equal(placeOnAccelerator.mutate(deepFreeze(out), WITH_PRODUCTS), out);
        assert.deepEqual(
          out.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution,
          pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution,
        );
      });
    }
  }

  it("cross product: two terms × two alternatives → four terms", () => {
    const out = withRequiredNodeAlternatives(deepFreeze(testPod({ spec: affinity({ matchExpressions: [zone("a")] }, { matchExpressions: [zone("b")] }) })), [
      [{ key: "x", operator: "Exists" }],
      [{ key: "y", operator: "Exists" }],
    ]);
    assert.deepEqual(out.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms, [
      { matchExpressions: [zone("a"), { key: "x", operator: "Exists" }] },
      { matchExpressions: [zone("a"), { key: "y", operator: "Exists" }] },
      { matchExpressions: [zone("b"), { key: "x", operator: "Exists" }] },
      { matchExpressions: [zone("b"), { key: "y", operator: "Exists" }] },
    ]);
  });

  it("whole pipeline, twice: the second run changes nothing (with interruptible requirements after it)", () => {
    const ctx = ctxOf(
      { migProducts: ["A100-SXM4-40GB"], addTolerations: true },
      { interruptible: { nonInterruptibleNodeRequirement: { key: "x/interruptible", operator: "DoesNotExist" } } },
    );
    for (const [, spec] of existing) {
      for (const [, annotations] of asks) {
        const first = mutatePod(deepFreeze(gpuPod(annotations, undefined, spec)), ctx);
        const again = mutatePod(deepFreeze(first.pod), ctx);
        assert.equal(again.pod, first.pod);
        assert.deepEqual(again.applied, []);
      }
    }
  });
});

describe("corpus pods that ask for MIG slices or GPUs, given a partition", { skip: CORPUS_SKIP }, () => {
  const ctx = WITH_PRODUCTS;
  const resources = (pod: V1Pod): string[] =>
    [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].flatMap((c) => Object.keys({ ...c.resources?.requests, ...c.resources?.limits }));
  const annotate = (pod: V1Pod, partition: string): V1Pod =>
    deepFreeze({ ...pod, metadata: { ...pod.metadata, annotations: { ...pod.metadata?.annotations, "quartermaster.dev/gpu-partition": partition } } });
  const migPods = corpusPods().filter(({ pod }) => resources(pod as V1Pod).some((r) => r.startsWith("nvidia.com/mig-")));
  const gpuPods = corpusPods().filter(({ pod }) => (pod as V1Pod).spec?.containers?.some((c) => c.resources?.limits?.["nvidia.com/gpu"] !== undefined));

  it("the corpus has such pods (the suite is not vacuous)", () => {
    assert.ok(migPods.length >= 4, `only ${migPods.length} MIG pods`);
    assert.ok(gpuPods.length >= 10, `only ${gpuPods.length} GPU pods`);
  });

  for (const { source, pod } of migPods) {
    const profiles = [
      ...new Set(
        resources(pod as V1Pod)
          .filter((r) => r.startsWith("nvidia.com/mig-"))
          .map((r) => r.slice("nvidia.com/mig-".length)),
      ),
    ];
    it(`${source} (${profiles.join(", ")}): schedulable exactly on the nodes offering its profile`, () => {
      const out = mutatePod(annotate(pod as V1Pod, profiles[0]!), ctx).pod;
      const want = NODES.filter((n) => profiles.every((p) => n.offers.migProfiles.includes(p)) && n.allocatable[`nvidia.com/mig-${profiles[0]}`]).map(
        (n) => n.name,
      );
      assert.deepEqual(schedulableOn(out), want);
      assert.equal(mutatePod(deepFreeze(out), ctx).pod, out);
    });
  }

  for (const { source, pod } of gpuPods) {
    it(`${source}: partition 1g.5gb → only the single-strategy 1g.5gb node; none → only nodes without MIG`, () => {
      const p = pod as V1Pod;
      const sliced = mutatePod(annotate(p, "1g.5gb"), ctx).pod;
      const whole = mutatePod(annotate(p, "none"), ctx).pod;
      // Independently of the labels: where the pod's own selectors and GPU count allow, by what nodes offer.
      const own = (n: FixtureNode) => matchesNodeAffinity(p, n) && schedulableOn(p, [n]).length === 1;
      assert.deepEqual(
        schedulableOn(sliced),
        NODES.filter((n) => own(n) && n.offers.migProfiles.includes("1g.5gb")).map((n) => n.name),
      );
      assert.deepEqual(
        schedulableOn(whole),
        NODES.filter((n) => own(n) && n.offers.migProfiles.length === 0).map((n) => n.name),
      );
      assert.ok(!schedulableOn(whole).includes(A100_SINGLE.name) && !schedulableOn(whole).includes(A100_MIXED.name));
    });
  }

  it("every node label used by the fixture placement is a valid label (names ≤ 63 characters)", () => {
    for (const n of NODES) for (const k of Object.keys(n.labels)) assert.ok(k.split("/").pop()!.length <= 63, k);
    assert.deepEqual(ALL.length, NODES.length);
  });
});

describe("merging, generated: any required terms × any placement", () => {
  const keys = ["topology.kubernetes.io/zone", "nvidia.com/gpu.product", "nvidia.com/gpu.replicas", "nvidia.com/mig-1g.5gb.count", "nvidia.com/mig.strategy"];
  const vals = ["a", "b", "0", "1", "A100-SXM4-40GB", "A100-SXM4-40GB-MIG-1g.5gb", "single", "mixed"];
  const requirement = fc.oneof(
    fc.record({
      key: fc.constantFrom(...keys),
      operator: fc.constantFrom("In", "NotIn"),
      values: fc.uniqueArray(fc.constantFrom(...vals), { minLength: 1, maxLength: 2 }),
    }),
    fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom("Exists", "DoesNotExist") }),
    fc.record({ key: fc.constantFrom(...keys), operator: fc.constantFrom("Gt", "Lt"), values: fc.constantFrom(["0"], ["4"]) }),
  );
  const term = fc.oneof(
    { weight: 8, arbitrary: fc.record({ matchExpressions: fc.array(requirement, { minLength: 1, maxLength: 3 }) }) },
    { weight: 1, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: fc.record({ matchFields: fc.constant([{ key: "metadata.name", operator: "In", values: ["a100-single-a", "h100-no-mig-b"] }]) }) },
  );
  const annotations = fc.record(
    {
      "quartermaster.dev/gpu-partition": fc.constantFrom("1g.5gb", "2g.10gb", "none"),
      "quartermaster.dev/accelerator": fc.constantFrom("A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"),
    },
    { requiredKeys: [] },
  );
  const nodes = NODES.flatMap((n) => ["a", "b"].map((z) => withLabels(n, { "topology.kubernetes.io/zone": z }, `${n.name}-${z}`)));

  it("selects exactly (own ∩ placement) and a second run is a no-op (2,000 pods)", () => {
    fc.assert(
      fc.property(fc.option(fc.array(term, { minLength: 1, maxLength: 4 }), { nil: undefined }), annotations, (terms, ann) => {
        const spec = terms ? { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } } } : {};
        const pod = deepFreeze(gpuPod(ann, undefined, spec as Partial<V1Pod["spec"]>));
        const out = placeOnAccelerator.mutate(pod, WITH_PRODUCTS);
        const alone = placeOnAccelerator.mutate(gpuPod(ann), WITH_PRODUCTS);
        const want = nodes.filter((n) => matchesNodeAffinity(pod, n) && matchesNodeAffinity(alone, n)).map((n) => n.name);
        assert.deepEqual(affinityMatches(out, nodes), want);
        assert.equal(placeOnAccelerator.mutate(deepFreeze(out), WITH_PRODUCTS), out);
        const before = terms?.length ?? 1;
        assert.ok(
          (out.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms?.length ?? 0) <= 2 * before,
          "at most two terms per term",
        );
      }),
      { numRuns: 2000, seed: 15016 },
    );
  });
});

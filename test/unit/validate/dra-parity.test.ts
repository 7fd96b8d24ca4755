// A held-out table of GPU requests, each written two ways: as an extended resource in the container's limits,
// and as a ResourceClaimTemplate of the DRA class that stands for it. Both must get the same verdict (the same
// rules broken) from /validate/pods' rules and the same tolerations and node affinity from the mutations.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import type { ClaimSpec, KnownClaims } from "../../../src/core/dra.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import { validateClaimObject } from "../../../src/validate/claims.js";

const policy = checkPolicy(
  {
    limits: {
      container: { gpus: { "nvidia.com/gpu": 4, "nvidia.com/mig-*": 2 } },
      pod: { gpus: 8 },
      allowedAccelerators: ["NVIDIA-A100-SXM4-80GB"],
      allowedPartitions: ["1g.10gb", "2g.20gb"],
    },
  },
  "test",
);
const NS = "team-a";
const ctx = (claims?: KnownClaims) => ({ policy, namespace: NS, limits: effectiveLimits(policy, NS), ...(claims ? { claims } : {}) });

/** One GPU ask of one container: how many, of which product or MIG profile. */
interface Ask {
  count: number;
  product?: string;
  profile?: string;
}
interface Case {
  name: string;
  asks: Ask[];
  annotations?: Record<string, string>;
  /** The rules the pod breaks, both ways (empty: admitted). */
  broken: string[];
}

const CASES: Case[] = [
  { name: "one GPU", asks: [{ count: 1 }], broken: [] },
  { name: "four GPUs, at the per-container cap", asks: [{ count: 4 }], broken: [] },
  { name: "five GPUs, over the per-container cap", asks: [{ count: 5 }], broken: ["container-limits"] },
  { name: "two containers of four: eight, at the per-pod cap", asks: [{ count: 4 }, { count: 4 }], broken: [] },
  { name: "three containers of three: nine, over the per-pod cap", asks: [{ count: 3 }, { count: 3 }, { count: 3 }], broken: ["pod-gpus"] },
  { name: "two containers of five: both caps", asks: [{ count: 5 }, { count: 5 }], broken: ["container-limits", "pod-gpus"] },
  { name: "an allowed accelerator", asks: [{ count: 2, product: "NVIDIA A100-SXM4-80GB" }], broken: [] },
  { name: "an accelerator not allowed", asks: [{ count: 2, product: "NVIDIA H100 80GB HBM3" }], broken: ["accelerator-allowed"] },
  { name: "an allowed MIG profile", asks: [{ count: 1, profile: "1g.10gb" }], broken: [] },
  { name: "a MIG profile not allowed", asks: [{ count: 1, profile: "3g.40gb" }], broken: ["accelerator-allowed"] },
  { name: "three MIG slices, over their per-container cap", asks: [{ count: 3, profile: "2g.20gb" }], broken: ["container-limits"] },
  {
    name: "an accelerator annotation for placement",
    asks: [{ count: 1 }],
    annotations: { "quartermaster.dev/accelerator": "NVIDIA-A100-SXM4-80GB" },
    broken: [],
  },
];

const label = (product: string): string => product.replace(/ /g, "-");

/** The ask as an extended resource: `nvidia.com/gpu` (or the MIG resource) in limits, the product by node selector. */
function extendedPod(c: Case): V1Pod {
  const containers: V1Container[] = c.asks.map((a, i) => ({
    name: `c${i}`,
    image: "trainer",
    resources: { limits: { [a.profile ? `nvidia.com/mig-${a.profile}` : "nvidia.com/gpu"]: String(a.count) } },
  }));
  const product = c.asks.find((a) => a.product)?.product;
  return {
    metadata: { name: "p", namespace: NS, ...(c.annotations ? { annotations: c.annotations } : {}) },
    spec: { containers, ...(product ? { nodeSelector: { "nvidia.com/gpu.product": label(product) } } : {}) },
  };
}

/** The same ask through DRA: one claim template per container, the product or profile pinned by a CEL selector. */
function draPod(c: Case): { pod: V1Pod; claims: KnownClaims; templates: ClaimSpec[] } {
  const templates = new Map<string, ClaimSpec>();
  const containers: V1Container[] = c.asks.map((a, i) => {
    const selectors = [
      ...(a.product ? [{ cel: { expression: `device.attributes['gpu.nvidia.com'].productName == '${a.product}'` } }] : []),
      ...(a.profile ? [{ cel: { expression: `device.attributes['gpu.nvidia.com'].profile == '${a.profile}'` } }] : []),
    ];
    const deviceClassName = a.profile ? "mig.nvidia.com" : "gpu.nvidia.com";
    templates.set(`t${i}`, {
      devices: { requests: [{ name: "gpu", exactly: { deviceClassName, count: a.count, ...(selectors.length ? { selectors } : {}) } }] },
    });
    return { name: `c${i}`, image: "trainer", resources: { claims: [{ name: `g${i}` }] } };
  });
  const pod: V1Pod = {
    metadata: { name: "p", namespace: NS, ...(c.annotations ? { annotations: c.annotations } : {}) },
    spec: { containers, resourceClaims: c.asks.map((_, i) => ({ name: `g${i}`, resourceClaimTemplateName: `t${i}` })) },
  };
  return { pod, claims: { claims: new Map(), templates }, templates: [...templates.values()] };
}

const rules = (found: { violations: { rule: string }[] }): string[] => [...new Set(found.violations.map((v) => v.rule))].sort();

describe("GPU requests written both ways (extended resource and DRA) get the same verdict", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const er = validatePod(extendedPod(c), ctx());
      const dra = draPod(c);
      const viaClaims = validatePod(dra.pod, ctx(dra.claims));
      assert.deepEqual(rules(er), c.broken, `extended resource: ${JSON.stringify(er.violations)}`);
      assert.deepEqual(rules(viaClaims), c.broken, `DRA: ${JSON.stringify(viaClaims.violations)}`);
    });
  }
  it("without its claims known, the DRA pod is counted as asking for nothing (what the webhook's lookup is for)", () => {
    assert.deepEqual(rules(validatePod(draPod(CASES[2]!).pod, ctx())), []);
  });
  it("each claim template on its own, at its CREATE: refused for what one container may not have", () => {
    for (const c of CASES.filter((x) => x.asks.length === 1)) {
      const [template] = draPod(c).templates;
      assert.deepEqual(rules(validateClaimObject(template, "spec.spec", ctx())), c.broken, c.name);
    }
  });
});

describe("GPU requests written both ways get the same tolerations and node affinity", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const dra = draPod(c);
      const er = mutatePod(extendedPod(c), ctx()).pod;
      const viaClaims = mutatePod(dra.pod, ctx(dra.claims)).pod;
      assert.ok((er.spec?.tolerations ?? []).length > 0, "the extended-resource pod is tolerated");
      assert.deepEqual(viaClaims.spec?.tolerations, er.spec?.tolerations);
      assert.deepEqual(viaClaims.spec?.affinity, er.spec?.affinity);
      // Reinvocation: mutating the outfitted pod again changes nothing.
      assert.deepEqual(mutatePod(viaClaims, ctx(dra.claims)).pod, viaClaims);
    });
  }
});

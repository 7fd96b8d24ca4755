/**
 * Issue 16, item 1: every mutation linear in the size of the pod, and the cost bound per review.
 * Linearity is checked by counting reads of the container and toleration lists (through a Proxy), not by
 * timing: replacing containers one at a time read the whole list per container (n² reads).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Container } from "@kubernetes/client-node";
import { MAX_REVIEW_COST, jobTemplateSpecs, specsCost } from "../../../src/core/cost.js";
import type { AdmissionReview } from "../../../src/admission/types.js";
import { mutatePod, type Pod } from "../../../src/mutate/index.js";
import { mapContainers, withTolerations } from "../../../src/mutate/pod.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { Topology } from "../../../src/membership/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { countArrayWork, reviewOf, wideJob, widePod } from "../../fixtures/array-work.js";
import { fakeJobReader, job, topology } from "../../fixtures/jobs.js";
import { testPod, container } from "../../fixtures/pods.js";
import { deepFreeze } from "../../fixtures/reviews.js";
import { CORPUS_SKIP, corpusJobs, corpusPods } from "../../fixtures/corpus.js";
import { replicaSpecsField } from "../../../src/kinds/index.js";
import { silentLogger } from "../../../src/log.js";

/** `items` behind a Proxy that counts reads of its elements. */
function counted<T>(items: T[]): { list: T[]; reads: () => number } {
  let reads = 0;
  const list = new Proxy(items, {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key)) reads++;
      return Reflect.get(target, key, receiver);
    },
  });
  return { list, reads: () => reads };
}

function podWith(spec: Record<string, unknown>): Pod {
  return { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "team-a" }, spec } as unknown as Pod;
}

describe("mapContainers", () => {
  const bump = (c: V1Container): V1Container => (c.name === "b" ? { ...c, image: "new" } : c);
  it("nothing changed → the very same pod", () => {
    const pod = testPod({ spec: { containers: [container({ name: "a" })], initContainers: [container({ name: "i" })] } });
    assert.equal(
      mapContainers(pod, ["initContainers", "containers"], (c) => c),
      pod,
    );
  });
  it("one change → the list copied once, the other list and containers shared, input untouched", () => {
    const pod = testPod({ spec: { containers: [container({ name: "a" }), container({ name: "b" })], initContainers: [container({ name: "i" })] } });
    const next = mapContainers(pod, ["initContainers", "containers"], bump);
    assert.notEqual(next, pod);
    assert.equal(next.spec!.initContainers, pod.spec!.initContainers);
    assert.equal(next.spec!.containers[0], pod.spec!.containers[0]);
    assert.equal(next.spec!.containers[1]!.image, "new");
    assert.equal(pod.spec!.containers[1]!.image, "busybox");
  });
  it("passes the list name and index, in order (init containers first)", () => {
    const seen: string[] = [];
    const pod = testPod({ spec: { containers: [container({ name: "a" }), container({ name: "b" })], initContainers: [container({ name: "i" })] } });
    mapContainers(pod, ["initContainers", "containers"], (c, list, i) => (seen.push(`${list}[${i}]=${c.name}`), c));
    assert.deepEqual(seen, ["initContainers[0]=i", "containers[0]=a", "containers[1]=b"]);
  });
  it("a list that is not an array is left alone", () => {
    const pod = podWith({ containers: { not: "a list" } });
    assert.equal(
      mapContainers(pod, ["containers"], () => ({ name: "x" })),
      pod,
    );
  });
  it("reads each container once however many change (2,000 containers)", () => {
    const { list, reads } = counted(Array.from({ length: 2000 }, (_, i) => ({ name: `c${i}`, image: "x" })));
    mapContainers(podWith({ containers: list }), ["containers"], (c) => ({ ...c, image: "y" }));
    assert.ok(reads() <= 2 * 2000, `${reads()} reads`);
  });
});

describe("the mutation pipeline is linear in the pod's size", () => {
  const policy = defaultPolicy();
  // Elements iterated or copied by the whole pipeline, for n and 2n containers: linear work doubles, quadratic
  // quadruples. Before: 1,010,044 and 4,020,028 for resources alone (each container's update copied the list).
  const work = (n: number, topology?: Topology): number => {
    const pod = widePod({ containers: n }) as Pod;
    const c = { policy, namespace: "team-a", ...(topology ? { topology } : {}) };
    return countArrayWork(() => void mutatePod(pod, c));
  };
  it("resources and tolerations for 1,000 vs 2,000 containers: list work doubles", () => {
    const [a, b] = [work(1000), work(2000)];
    assert.ok(b <= 2.2 * a && b <= 20 * 2000, `${a} → ${b}`);
  });
  it("cluster spec into every container of a PyTorchJob worker, 1,000 vs 2,000 containers: list work doubles", () => {
    const t = topology(job("PyTorchJob", "big", "team-a", { Master: 1, Worker: 2 }), "Worker", 0);
    const [a, b] = [work(1000, t), work(2000, t)];
    assert.ok(b <= 2.2 * a && b <= 40 * 2000, `${a} → ${b}`);
    const out = mutatePod(widePod({ containers: 3 }) as Pod, { policy, namespace: "team-a", topology: t });
    assert.ok(out.applied.includes("cluster-spec"), out.applied.join());
  });
  it("1,000 existing tolerations × 1,000 wanted: each read a bounded number of times", () => {
    const existing = counted(Array.from({ length: 1000 }, (_, i) => ({ key: `example.com/t-${i}`, operator: "Exists" })));
    const wanted = Array.from({ length: 1000 }, (_, i) => ({ key: `nvidia.com/mig-${i}`, operator: "Exists", effect: "NoSchedule" }));
    const next = withTolerations(podWith({ containers: [], tolerations: existing.list }), wanted);
    assert.equal(next.spec!.tolerations!.length, 2000);
    assert.ok(existing.reads() <= 4 * 1000, `${existing.reads()} reads of the tolerations`);
  });
  const tolerationCases: Array<{ name: string; existing: Array<Record<string, unknown>>; wanted: Array<Record<string, unknown>>; added: number }> = [
    { name: "equal after defaults (operator Equal, empty value)", existing: [{ key: "k", operator: "Equal", value: "" }], wanted: [{ key: "k" }], added: 0 },
    {
      name: "tolerationSeconds differs",
      existing: [{ key: "k", operator: "Exists", tolerationSeconds: 5 }],
      wanted: [{ key: "k", operator: "Exists" }],
      added: 1,
    },
    {
      name: "duplicates among the wanted",
      existing: [],
      wanted: [
        { key: "k", operator: "Exists" },
        { key: "k", operator: "Exists" },
      ],
      added: 1,
    },
    { name: "a number key is not the string key", existing: [{ key: 5, operator: "Exists" }], wanted: [{ key: "5", operator: "Exists" }], added: 1 },
  ];
  for (const tc of tolerationCases) {
    for (const pad of [0, 100]) {
      it(`tolerations: ${tc.name} (${pad === 0 ? "compared pairwise" : "indexed"}) → ${tc.added} added`, () => {
        const filler = Array.from({ length: pad }, (_, i) => ({ key: `filler-${i}`, operator: "Exists" }));
        const pod = podWith({ containers: [], tolerations: [...filler, ...tc.existing] });
        const next = withTolerations(pod, tc.wanted as never);
        assert.equal((next.spec?.tolerations?.length ?? 0) - pad - tc.existing.length, tc.added);
      });
    }
  }
  it("cluster spec into containers with 100 env variables (indexed): a set variable is kept; run twice: nothing more", () => {
    const t = topology(job("PyTorchJob", "big", "team-a", { Master: 1, Worker: 2 }), "Worker", 0);
    const wide = widePod({ containers: 5, env: 100, gpu: false }) as Pod;
    wide.spec!.containers[0]!.env!.push({ name: "MASTER_PORT", value: "1234" });
    const pod = deepFreeze(wide);
    const c = { policy, namespace: "team-a", topology: t };
    const once = mutatePod(pod, c);
    assert.ok(once.applied.includes("cluster-spec"));
    const env0 = once.pod.spec!.containers[0]!.env!;
    assert.deepEqual(
      env0.filter((e) => e.name === "MASTER_PORT").map((e) => e.value),
      ["1234"],
    );
    assert.equal(once.pod.spec!.containers[1]!.env!.filter((e) => e.name === "MASTER_PORT").length, 1);
    assert.equal(mutatePod(once.pod, c).pod, once.pod);
  });
});

describe("specsCost", () => {
  const gpu = defaultPolicy().gpu.resources;
  const cases: Array<{ name: string; specs: unknown[]; rules: number; want: Partial<ReturnType<typeof specsCost>> }> = [
    { name: "one container, no resources", specs: [{ containers: [{ name: "a" }] }], rules: 6, want: { items: 2, passes: 6, cost: 12, over: false } },
    {
      name: "a GPU adds a pass",
      specs: [{ containers: [{ name: "a", resources: { limits: { "nvidia.com/gpu": "1", cpu: "1" } } }] }],
      rules: 6,
      want: { items: 4, passes: 7, cost: 28, over: false },
    },
    {
      name: "init, regular and ephemeral containers, requests and limits",
      specs: [
        { initContainers: [{ resources: { requests: { cpu: "1" } } }], containers: [{}], ephemeralContainers: [{ resources: { limits: { memory: "1Gi" } } }] },
      ],
      rules: 1,
      want: { items: 6, passes: 1, cost: 6, over: false },
    },
    {
      name: "not a spec counts itself only",
      specs: ["x", null, { containers: "many" }, { containers: [{ resources: "r" }, { resources: { limits: ["a"] } }] }],
      rules: 1,
      want: { items: 6, over: false },
    },
    {
      name: "40,000 containers: over, counting stopped at the bound",
      specs: [widePod({ containers: 40_000 }).spec],
      rules: 6,
      want: { over: true, partial: true },
    },
    {
      name: "one container with 20,000 resource names: over",
      specs: [{ containers: [{ resources: { limits: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`x.io/r${i}`, "1"])) } }] }],
      rules: 1,
      want: { over: true, partial: true },
    },
    {
      name: "exactly at the bound: not over",
      specs: [{ containers: Array.from({ length: MAX_REVIEW_COST - 1 }, () => ({})) }],
      rules: 1,
      want: { items: MAX_REVIEW_COST, cost: MAX_REVIEW_COST, over: false },
    },
    { name: "one past the bound: over", specs: [{ containers: Array.from({ length: MAX_REVIEW_COST }, () => ({})) }], rules: 1, want: { over: true } },
    {
      name: "distinct GPU names push a pod over that the rules alone would not",
      specs: [{ containers: Array.from({ length: 300 }, (_, i) => ({ resources: { limits: { [`nvidia.com/mig-${i}`]: "1" } } })) }],
      rules: 6,
      want: { items: 601, passes: 306, over: true, partial: false },
    },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const c = specsCost(tc.specs, tc.rules, gpu);
      for (const [k, v] of Object.entries(tc.want)) assert.equal(c[k as keyof typeof c], v, `${k}: ${JSON.stringify(c)}`);
    });
  }
  it("pricing a 40,000-container pod reads a bounded part of it", () => {
    const { list, reads } = counted((widePod({ containers: 40_000 }).spec as { containers: unknown[] }).containers);
    assert.equal(specsCost([{ containers: list }], 6, gpu).over, true);
    assert.ok(reads() <= MAX_REVIEW_COST, `${reads()} reads`);
  });
  it("every corpus pod and job (and job UPDATE) is priced far under the bound", { skip: CORPUS_SKIP }, () => {
    let most = 0;
    for (const p of corpusPods()) most = Math.max(most, specsCost([p.pod.spec], 6, gpu).cost);
    for (const j of corpusJobs()) {
      const specs = jobTemplateSpecs(j.job, replicaSpecsField(j.kind), j.kind.framework === "caffe2");
      most = Math.max(most, specsCost([...specs, ...specs], 8, gpu).cost);
    }
    assert.ok(most > 0 && most * 10 < MAX_REVIEW_COST, `most expensive: ${most}`);
  });
  it("jobTemplateSpecs: every replica type's template spec; Caffe2's single pool", () => {
    assert.equal(jobTemplateSpecs(wideJob(3), "pytorchReplicaSpecs", false).length, 1);
    assert.deepEqual(jobTemplateSpecs({ spec: { replicaSpecs: { template: { spec: { containers: [] } } } } }, "replicaSpecs", true), [{ containers: [] }]);
    assert.deepEqual(jobTemplateSpecs({ spec: { x: { A: {}, B: { template: { spec: 1 } } } } }, "x", false), [undefined, 1]);
    assert.deepEqual(jobTemplateSpecs({ spec: null }, "x", false), []);
  });
});

describe("reviews over the cost bound are answered at once", () => {
  const hooks = createWebhooks({ policy: defaultPolicy(), log: silentLogger(), jobs: fakeJobReader(), now: () => new Date() });
  const huge = widePod({ containers: 40_000 });
  const admit = (path: string, review: Record<string, unknown>) => {
    const out = hooks[path]!.admit(review);
    assert.ok(!(out instanceof Promise), "answered synchronously");
    return out;
  };
  it("/mutate/pods: admitted unchanged, no patch, a warning naming the bound", () => {
    const res = admit("/mutate/pods", reviewOf(huge));
    assert.equal(res.outcome, "skipped");
    assert.equal(res.review.response?.allowed, true);
    assert.equal(res.review.response?.patch, undefined);
    assert.match(res.review.response!.warnings![0]!, /^quartermaster: admitted unchanged: too large to check: cost at least \d+ is over the bound of 10000$/);
  });
  it("/validate/pods: denied, 403, rule review-cost", () => {
    const res = admit("/validate/pods", reviewOf(huge));
    assert.equal(res.outcome, "denied");
    assert.deepEqual(res.deniedRules, ["review-cost"]);
    assert.equal(res.review.response?.status?.code, 403);
    assert.match(
      res.review.response!.status!.message!,
      /^spec: too large to check: cost at least \d+ is over the bound of 10000 \(at least \d+ pod specs, containers and resource entries × 4 rule passes\); split the workload/,
    );
  });
  it("/validate/jobs: a job with a 40,000-container template is denied", () => {
    const res = admit(
      "/validate/jobs",
      reviewOf(wideJob(40_000), { kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" }, resource: "pytorchjobs" }),
    );
    assert.equal(res.outcome, "denied");
    assert.deepEqual(res.deniedRules, ["review-cost"]);
  });
  it("/validate/jobs UPDATE: the old object counts too", () => {
    const half = wideJob(300); // 901 items × 8 passes: within the bound once, over it twice
    const res = admit(
      "/validate/jobs",
      reviewOf(half, { kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" }, resource: "pytorchjobs", operation: "UPDATE", oldObject: half }),
    );
    assert.deepEqual(res.deniedRules, ["review-cost"]);
    const create = admit("/validate/jobs", reviewOf(half, { kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" }, resource: "pytorchjobs" }));
    assert.notDeepEqual(create.deniedRules, ["review-cost"]);
  });
  it("a pod within the bound is still outfitted", () => {
    const res = hooks["/mutate/pods"]!.admit(reviewOf(widePod({ containers: 500 }))) as { outcome: string; review: AdmissionReview };
    assert.equal(res.outcome, "patched");
  });
});

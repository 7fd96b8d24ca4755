// Issue 45 findings 3, 6 and 7 against the DRA rules (src/validate/claims.ts): unknown is not zero. Under a GPU cap
// a claim that does not exist or could not be read, a count nothing bounds (allocationMode: All) and a GPU-looking
// DeviceClass the policy does not list are refused (gpu-unknown) at their field; every firstAvailable alternative is
// judged on its own (the scheduler takes the first that fits, not the largest). The same objects with no GPU cap set
// are not refused.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import type { ClaimSpec, KnownClaims } from "../../../src/core/dra.js";
import { pinnedValues } from "../../../src/core/dra.js";
import { MAX_DEVICE_CLASS_READS } from "../../../src/admission/claims.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { validateClaimObject } from "../../../src/validate/claims.js";
import { enforce } from "../../../src/validate/enforcement.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import type { Findings } from "../../../src/validate/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { review } from "../../fixtures/reviews.js";

const NS = "team-a";
type Limits = Record<string, unknown>;
const policyOf = (limits: Limits, extra: Record<string, unknown> = {}) => checkPolicy({ limits, ...extra }, "test");
const ctxOf = (limits: Limits, claims?: KnownClaims, extra: Record<string, unknown> = {}) => {
  const policy = policyOf(limits, extra);
  return { policy, namespace: NS, limits: effectiveLimits(policy, NS), ...(claims ? { claims } : {}) };
};

const sel = (expression: string) => ({ cel: { expression } });
const product = (name: string) => sel(`device.attributes['gpu.nvidia.com'].productName == '${name}'`);
const exactly = (deviceClassName: string, count: number, extra: Record<string, unknown> = {}) => ({ exactly: { deviceClassName, count, ...extra } });
const claimSpec = (...requests: Record<string, unknown>[]): ClaimSpec => ({ devices: { requests: requests.map((r, i) => ({ name: `r${i}`, ...r })) } });

/** A pod whose one container uses every claim it names, each from a template `t<i>`. */
function podNaming(n: number): V1Pod {
  const names = Array.from({ length: n }, (_, i) => `g${i}`);
  return {
    metadata: { name: "p", namespace: NS },
    spec: {
      containers: [{ name: "c", image: "x", resources: { claims: names.map((name) => ({ name })) } }],
      resourceClaims: names.map((name, i) => ({ name, resourceClaimTemplateName: `t${i}` })),
    },
  };
}

/** What the webhook's lookup found: templates by name (undefined: absent), and names whose read failed. */
const known = (templates: Record<string, ClaimSpec | undefined>, failed: Record<string, string> = {}): KnownClaims => ({
  claims: new Map(),
  templates: new Map(Object.entries(templates)),
  unreadable: { claims: new Map(), templates: new Map(Object.entries(failed)) },
});

const at = (f: Findings): string[] => f.violations.map((v) => `${v.rule} ${v.field}`).sort();

const POD_CAP = { pod: { gpus: 8 } };
const NO_CAP = {};

describe("gpu-unknown and the per-alternative rules on a pod's claims", () => {
  const cases: { name: string; limits: Limits; pod: V1Pod; claims: KnownClaims; want: string[] }[] = [
    {
      name: "finding 3: four claim templates that do not exist yet, pod cap 8 → each refused at its field",
      limits: POD_CAP,
      pod: podNaming(4),
      claims: known({ t0: undefined, t1: undefined, t2: undefined, t3: undefined }),
      want: [0, 1, 2, 3].map((i) => `gpu-unknown spec.resourceClaims[${i}]`),
    },
    {
      name: "finding 3: the same, only a per-container GPU cap → refused",
      limits: { container: { gpus: { "nvidia.com/gpu": 8 } } },
      pod: podNaming(1),
      claims: known({ t0: undefined }),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    {
      name: "finding 3: the same, only a job cap → refused",
      limits: { job: { gpus: 64 } },
      pod: podNaming(1),
      claims: known({ t0: undefined }),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    { name: "finding 3: the same with no GPU cap → no refusal", limits: NO_CAP, pod: podNaming(4), claims: known({ t0: undefined }), want: [] },
    {
      name: "finding 3: a template whose read failed, pod cap → refused at its field",
      limits: POD_CAP,
      pod: podNaming(2),
      claims: known({ t0: claimSpec(exactly("gpu.nvidia.com", 1)) }, { t1: "timed out after 2000 ms" }),
      want: ["gpu-unknown spec.resourceClaims[1]"],
    },
    { name: "a failed read with no GPU cap → no refusal", limits: NO_CAP, pod: podNaming(1), claims: known({}, { t0: "HTTP 403" }), want: [] },
    {
      name: "a claim the lookup never read (a runtime's template, say), pod cap → refused",
      limits: POD_CAP,
      pod: podNaming(1),
      claims: known({}),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    {
      name: "only non-GPU claims, all of them there, pod cap → no finding",
      limits: POD_CAP,
      pod: podNaming(2),
      claims: known({ t0: claimSpec(exactly("nic.example.com", 8)), t1: claimSpec(exactly("fpga.example.com", 2)) }),
      want: [],
    },
    {
      name: "allocationMode All, no capacity known, pod cap → gpu-unknown (was pod-gpus)",
      limits: POD_CAP,
      pod: podNaming(1),
      claims: known({ t0: claimSpec({ exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "All" } }) }),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    {
      name: "allocationMode All, no capacity known, no GPU cap → no refusal",
      limits: NO_CAP,
      pod: podNaming(1),
      claims: known({ t0: claimSpec({ exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "All" } }) }),
      want: [],
    },
    {
      name: "finding 6: firstAvailable [6 GPUs, 7 MIG slices] under a per-container cap of 4 nvidia.com/gpu → container-limits",
      limits: { container: { gpus: { "nvidia.com/gpu": 4 } } },
      pod: podNaming(1),
      claims: known({
        t0: claimSpec({
          firstAvailable: [
            { name: "gpus", deviceClassName: "gpu.nvidia.com", count: 6 },
            { name: "mig", deviceClassName: "mig.nvidia.com", count: 7 },
          ],
        }),
      }),
      want: ["container-limits spec.containers[0].resources.claims"],
    },
    {
      name: "finding 6: the same with no GPU cap → no refusal",
      limits: NO_CAP,
      pod: podNaming(1),
      claims: known({
        t0: claimSpec({
          firstAvailable: [
            { name: "gpus", deviceClassName: "gpu.nvidia.com", count: 6 },
            { name: "mig", deviceClassName: "mig.nvidia.com", count: 7 },
          ],
        }),
      }),
      want: [],
    },
    {
      name: "finding 6: firstAvailable [1 H100, 2 A100] with only A100 allowed → accelerator-allowed",
      limits: { allowedAccelerators: ["A100"] },
      pod: podNaming(1),
      claims: known({
        t0: claimSpec({
          firstAvailable: [
            { name: "h100", deviceClassName: "gpu.nvidia.com", count: 1, selectors: [product("H100")] },
            { name: "a100", deviceClassName: "gpu.nvidia.com", count: 2, selectors: [product("A100")] },
          ],
        }),
      }),
      want: ["accelerator-allowed spec.resourceClaims[0]"],
    },
    {
      name: "finding 6: the same with both allowed → no refusal",
      limits: { allowedAccelerators: ["A100", "H100"] },
      pod: podNaming(1),
      claims: known({
        t0: claimSpec({
          firstAvailable: [
            { name: "h100", deviceClassName: "gpu.nvidia.com", count: 1, selectors: [product("H100")] },
            { name: "a100", deviceClassName: "gpu.nvidia.com", count: 2, selectors: [product("A100")] },
          ],
        }),
      }),
      want: [],
    },
    {
      name: "finding 6: productName read through an index (['productName']), not allowed → accelerator-allowed",
      limits: { allowedAccelerators: ["A100"] },
      pod: podNaming(1),
      claims: known({ t0: claimSpec(exactly("gpu.nvidia.com", 1, { selectors: [sel(`device.attributes['gpu.nvidia.com']['productName'] == 'H100'`)] })) }),
      want: ["accelerator-allowed spec.resourceClaims[0]"],
    },
    {
      name: "a GPU request with no product selector while allowedAccelerators is set → no refusal (as an extended-resource pod without an accelerator annotation)",
      limits: { allowedAccelerators: ["A100"] },
      pod: podNaming(1),
      claims: known({ t0: claimSpec(exactly("gpu.nvidia.com", 1)) }),
      want: [],
    },
    {
      name: "finding 7: 64 devices of vfio.gpu.nvidia.com (not in the policy), pod cap 8 → gpu-unknown at the claim",
      limits: POD_CAP,
      pod: podNaming(1),
      claims: known({ t0: claimSpec(exactly("vfio.gpu.nvidia.com", 64)) }),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    {
      name: "finding 7: a custom class gpu.example.com as a firstAvailable alternative, pod cap 8 → gpu-unknown",
      limits: POD_CAP,
      pod: podNaming(1),
      claims: known({
        t0: claimSpec({
          firstAvailable: [
            { name: "own", deviceClassName: "gpu.example.com", count: 64 },
            { name: "nv", deviceClassName: "gpu.nvidia.com", count: 1 },
          ],
        }),
      }),
      want: ["gpu-unknown spec.resourceClaims[0]"],
    },
    {
      name: "finding 7: the same classes with no GPU cap → no refusal",
      limits: NO_CAP,
      pod: podNaming(2),
      claims: known({ t0: claimSpec(exactly("vfio.gpu.nvidia.com", 64)), t1: claimSpec(exactly("gpu.example.com", 64)) }),
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = validatePod(c.pod, ctxOf(c.limits, c.claims));
      assert.deepEqual(at(found), c.want, JSON.stringify(found.violations));
    });
  }

  it("the refusal says what is unknown and the fix", () => {
    const missing = validatePod(podNaming(1), ctxOf(POD_CAP, known({ t0: undefined })));
    assert.match(missing.violations[0]!.message, /ResourceClaimTemplate t0 \(claim g0\) does not exist.*create ResourceClaimTemplate t0 before the pod/);
    const failed = validatePod(podNaming(1), ctxOf(POD_CAP, known({}, { t0: "HTTP 403: forbidden" })));
    assert.match(failed.violations[0]!.message, /could not be read \(HTTP 403: forbidden\).*retry.*resourceclaimtemplates\.resource\.k8s\.io/);
    const vfio = validatePod(podNaming(1), ctxOf(POD_CAP, known({ t0: claimSpec(exactly("vfio.gpu.nvidia.com", 64)) })));
    assert.match(vfio.violations[0]!.message, /DeviceClass vfio\.gpu\.nvidia\.com.*add it to gpu\.deviceClasses with the resource it stands for/);
  });

  it("with no GPU cap, an absent or unreadable claim is a warning", () => {
    const found = validatePod(podNaming(2), ctxOf(NO_CAP, known({ t0: undefined }, { t1: "HTTP 403" })));
    assert.equal(found.warnings.length, 2, JSON.stringify(found.warnings));
  });

  it("enforcement gpu-unknown: warn → admitted with a warning", () => {
    const ctx = ctxOf(POD_CAP, known({ t0: undefined }), { enforcement: { rules: { "gpu-unknown": "warn" } } });
    const result = enforce(validatePod(podNaming(1), ctx), ctx.policy.enforcement, NS);
    assert.deepEqual(result.violations, []);
    assert.ok(
      result.warnings.some((w) => w.startsWith("quartermaster: gpu-unknown (warn): spec.resourceClaims[0]")),
      JSON.stringify(result.warnings),
    );
  });
});

describe("gpu-unknown and the per-alternative rules at a claim template's own CREATE", () => {
  const cases: { name: string; limits: Limits; spec: ClaimSpec; want: string[] }[] = [
    {
      name: "finding 7: vfio.gpu.nvidia.com, pod cap 8 → gpu-unknown at the request",
      limits: POD_CAP,
      spec: claimSpec(exactly("vfio.gpu.nvidia.com", 64)),
      want: ["gpu-unknown spec.spec.devices.requests[0].exactly"],
    },
    {
      name: "finding 7: gpu.example.com as the second alternative → gpu-unknown at that alternative",
      limits: POD_CAP,
      spec: claimSpec({
        firstAvailable: [
          { name: "nv", deviceClassName: "gpu.nvidia.com", count: 1 },
          { name: "own", deviceClassName: "gpu.example.com", count: 64 },
        ],
      }),
      want: ["gpu-unknown spec.spec.devices.requests[0].firstAvailable[1]"],
    },
    { name: "finding 7: the same with no GPU cap → no refusal", limits: NO_CAP, spec: claimSpec(exactly("vfio.gpu.nvidia.com", 64)), want: [] },
    { name: "a NIC class, pod cap → no finding", limits: POD_CAP, spec: claimSpec(exactly("nic.example.com", 64)), want: [] },
    {
      name: "finding 6: [6 GPUs, 7 MIG slices] under a per-container cap of 4 nvidia.com/gpu → container-limits",
      limits: { container: { gpus: { "nvidia.com/gpu": 4 } } },
      spec: claimSpec({
        firstAvailable: [
          { name: "gpus", deviceClassName: "gpu.nvidia.com", count: 6 },
          { name: "mig", deviceClassName: "mig.nvidia.com", count: 7 },
        ],
      }),
      want: ["container-limits spec.spec.devices.requests"],
    },
    {
      name: "finding 6: [1 H100, 2 A100], only A100 allowed → accelerator-allowed at the H100 alternative",
      limits: { allowedAccelerators: ["A100"] },
      spec: claimSpec({
        firstAvailable: [
          { name: "h100", deviceClassName: "gpu.nvidia.com", count: 1, selectors: [product("H100")] },
          { name: "a100", deviceClassName: "gpu.nvidia.com", count: 2, selectors: [product("A100")] },
        ],
      }),
      want: ["accelerator-allowed spec.spec.devices.requests[0].firstAvailable[0]"],
    },
    {
      name: "allocationMode All with no known capacity, pod cap → gpu-unknown (was pod-gpus)",
      limits: POD_CAP,
      spec: claimSpec({ exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "All" } }),
      want: ["gpu-unknown spec.spec.devices.requests[0].exactly"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = validateClaimObject(c.spec, "spec.spec", ctxOf(c.limits));
      assert.deepEqual(at(found), c.want, JSON.stringify(found.violations));
    });
  }
});

describe("pinnedValues: the attribute read through an index, and what cannot be read", () => {
  const cases: { name: string; expr: string; values: string[]; open: boolean }[] = [
    { name: "index, single quotes", expr: "device.attributes['gpu.nvidia.com']['productName'] == 'H100'", values: ["H100"], open: false },
    {
      name: "index, double quotes, in a list",
      expr: `device.attributes["gpu.nvidia.com"]["productName"] in ["A100", "H100"]`,
      values: ["A100", "H100"],
      open: false,
    },
    { name: "field after a double-quoted domain", expr: `device.attributes["gpu.nvidia.com"].productName == "H100"`, values: ["H100"], open: false },
    { name: "an index that is not a name may read any attribute: open", expr: "device.attributes['gpu.nvidia.com'][k] == 'H100'", values: [], open: true },
    { name: "a concatenated key: open", expr: "device.attributes['gpu.nvidia.com']['product' + 'Name'] == 'H100'", values: [], open: true },
    { name: "an escape in the key: open", expr: "device.attributes['gpu.nvidia.com']['product\\u004eame'] == 'H100'", values: [], open: true },
    { name: "!= through an index: open", expr: "device.attributes['gpu.nvidia.com']['productName'] != 'A100'", values: [], open: true },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(pinnedValues(c.expr, "productName"), { values: c.values, open: c.open }));

  it("a list far after its `in` (past the 32 characters looked at) is still read as the list it is", () => {
    const expr = `device.attributes['gpu.nvidia.com'].productName in${" ".repeat(40)}['A100', 'H100']`;
    assert.deepEqual(pinnedValues(expr, "productName"), { values: ["A100", "H100"], open: false });
  });

  it("linear in the selector's length (review finding: 10 KiB of indexes took 4.5 ms, growing with the square)", () => {
    const term = "device.attributes['a.b']['c'] == 1 && ";
    const time = (n: number): number => {
      const expr = term.repeat(n) + "device.attributes['gpu.nvidia.com']['productName'] == 'H100'";
      const t = performance.now();
      for (let i = 0; i < 5; i++) pinnedValues(expr, "productName");
      return performance.now() - t;
    };
    time(500); // warm up
    const small = time(2_000);
    const large = time(16_000); // 8× the text, ~600 KiB
    assert.ok(large < small * 8 * 3, `2,000 terms ${small.toFixed(1)} ms, 16,000 terms ${large.toFixed(1)} ms: not linear`);
  });
});

describe("/validate/claims: a claim template of an unlisted DeviceClass at its CREATE (its name, or its object as read)", () => {
  const template = (deviceClassName: string) => ({
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaimTemplate",
    metadata: { name: "t", namespace: NS },
    spec: { spec: claimSpec(exactly(deviceClassName, 64)) },
  });
  const deviceClass = (name: string, spec: Record<string, unknown>) => ({ apiVersion: "resource.k8s.io/v1", kind: "DeviceClass", metadata: { name }, spec });
  /** The cluster's DeviceClasses (an administrator's): a NIC class, and classes that select GPUs without being listed. */
  const CLASSES = new Map(
    [
      deviceClass("nic.example.com", { selectors: [sel(`device.driver == "nic.example.com"`)] }),
      deviceClass("fast", { selectors: [sel(`device.driver == "gpu.nvidia.com"`)] }),
      deviceClass("h100s", { selectors: [sel(`device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`)] }),
      deviceClass("any", {}),
      deviceClass("accel", { extendedResourceName: "nvidia.com/gpu", selectors: [sel(`device.driver == "accel.example.com"`)] }),
    ].map((c) => [c.metadata.name, c]),
  );
  const cases: { name: string; limits: Limits; deviceClassName: string; allowed: boolean; field?: string; message?: RegExp; reads?: number }[] = [
    {
      name: "vfio.gpu.nvidia.com (its name looks like a GPU class's), pod cap 8 → refused at the request, nothing read",
      limits: POD_CAP,
      deviceClassName: "vfio.gpu.nvidia.com",
      allowed: false,
      field: "spec.spec.devices.requests[0].exactly",
      message: /DeviceClass vfio\.gpu\.nvidia\.com, which looks like a GPU class/,
      reads: 0,
    },
    { name: "vfio.gpu.nvidia.com, no GPU cap → allowed", limits: NO_CAP, deviceClassName: "vfio.gpu.nvidia.com", allowed: true },
    {
      name: "nic.example.com (selects its NIC driver), pod cap 8 → allowed, the class read once",
      limits: POD_CAP,
      deviceClassName: "nic.example.com",
      allowed: true,
      reads: 1,
    },
    {
      name: "fast, an administrator's class selecting NVIDIA's driver, pod cap 8 → refused",
      limits: POD_CAP,
      deviceClassName: "fast",
      allowed: false,
      field: "spec.spec.devices.requests[0].exactly",
      message: /DeviceClass fast, which may select GPUs \(its selector names gpu\.nvidia\.com\).*add it to gpu\.deviceClasses/,
    },
    {
      name: "h100s, selecting by NVIDIA's attributes → refused",
      limits: POD_CAP,
      deviceClassName: "h100s",
      allowed: false,
      message: /its selector names gpu\.nvidia\.com/,
    },
    {
      name: "any, a class without selectors (every device) → refused",
      limits: POD_CAP,
      deviceClassName: "any",
      allowed: false,
      message: /no selectors, so it selects every device/,
    },
    {
      name: "accel, serving nvidia.com/gpu as its extended resource → refused",
      limits: POD_CAP,
      deviceClassName: "accel",
      allowed: false,
      message: /extendedResourceName nvidia\.com\/gpu/,
    },
    {
      name: "a class that does not exist → refused (not known)",
      limits: POD_CAP,
      deviceClassName: "later.example.com",
      allowed: false,
      message: /does not exist, so what it selects is not known/,
    },
    {
      name: "a class that cannot be read → refused (not known)",
      limits: POD_CAP,
      deviceClassName: "forbidden.example.com",
      allowed: false,
      message: /could not be read \(.*403/,
    },
    { name: "fast, no GPU cap → allowed, nothing read", limits: NO_CAP, deviceClassName: "fast", allowed: true, reads: 0 },
  ];
  for (const c of cases)
    it(c.name, async () => {
      const asked: string[] = [];
      const jobs = {
        get: (kind: { plural: string }, namespace: string, name: string) => {
          asked.push(`${kind.plural}/${namespace}/${name}`);
          if (name === "forbidden.example.com") return Promise.reject(new Error(`HTTP 403: deviceclasses "${name}" is forbidden`));
          return Promise.resolve(kind.plural === "deviceclasses" && namespace === "" ? CLASSES.get(name) : undefined);
        },
      };
      const hooks = createWebhooks({ policy: policyOf(c.limits), log: capturingLogger().log, jobs, now: () => new Date() });
      const body = review({
        kind: { group: "resource.k8s.io", version: "v1", kind: "ResourceClaimTemplate" },
        resource: { group: "resource.k8s.io", version: "v1", resource: "resourceclaimtemplates" },
        operation: "CREATE",
        namespace: NS,
        object: template(c.deviceClassName),
      });
      const response = (await hooks["/validate/claims"]!.admit(body)).review.response!;
      assert.equal(response.allowed, c.allowed, JSON.stringify(response.status));
      const causes = (response.status?.details?.causes ?? []) as Array<{ field?: string; message?: string }>;
      if (c.field)
        assert.deepEqual(
          causes.map((x) => x.field),
          [c.field],
        );
      if (c.message) assert.match(causes.map((x) => x.message).join("\n"), c.message);
      if (c.reads !== undefined) assert.equal(asked.length, c.reads, asked.join(", "));
    });
  it(`past ${MAX_DEVICE_CLASS_READS} unlisted classes in one review: the rest not read, and under a GPU cap refused (unknown, not zero)`, async () => {
    // 17 NIC classes, each selecting its own driver: every one read would pass; the 17th is never read.
    const names = Array.from({ length: MAX_DEVICE_CLASS_READS + 1 }, (_, i) => `nic-${i}.example.com`);
    const nics = new Map(names.map((n) => [n, deviceClass(n, { selectors: [sel(`device.driver == "${n}"`)] })]));
    const asked: string[] = [];
    const jobs = {
      get: (kind: { plural: string }, _ns: string, name: string) => {
        asked.push(name);
        return Promise.resolve(kind.plural === "deviceclasses" ? nics.get(name) : undefined);
      },
    };
    const body = () =>
      review({
        kind: { group: "resource.k8s.io", version: "v1", kind: "ResourceClaimTemplate" },
        resource: { group: "resource.k8s.io", version: "v1", resource: "resourceclaimtemplates" },
        operation: "CREATE",
        namespace: NS,
        object: { ...template("unused"), spec: { spec: claimSpec(...names.map((n) => exactly(n, 1))) } },
      });
    const admit = async (limits: Limits) => {
      asked.length = 0;
      const hooks = createWebhooks({ policy: policyOf(limits), log: capturingLogger().log, jobs, now: () => new Date() });
      return (await hooks["/validate/claims"]!.admit(body())).review.response!;
    };
    const capped = await admit(POD_CAP);
    assert.equal(capped.allowed, false);
    assert.deepEqual(asked, names.slice(0, MAX_DEVICE_CLASS_READS), "the first 16 read, each once, and no more");
    const causes = (capped.status?.details?.causes ?? []) as Array<{ field?: string; message?: string }>;
    assert.deepEqual(
      causes.map((x) => x.field),
      [`spec.spec.devices.requests[${MAX_DEVICE_CLASS_READS}].exactly`],
    );
    assert.match(causes[0]!.message ?? "", /DeviceClass nic-16\.example\.com.*was not read \(more DeviceClasses than one review reads\)/);
    // Without a GPU cap nothing is read, and nothing refused.
    const uncapped = await admit(NO_CAP);
    assert.equal(uncapped.allowed, true);
    assert.deepEqual(asked, []);
  });
});

describe("/validate/pods: a pod's claim of an unlisted DeviceClass that selects GPUs (the claim made before its namespace opted in)", () => {
  const claim = { apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim", metadata: { name: "c", namespace: NS }, spec: claimSpec(exactly("fast", 64)) };
  const fast = {
    apiVersion: "resource.k8s.io/v1",
    kind: "DeviceClass",
    metadata: { name: "fast" },
    spec: { selectors: [sel(`device.driver == "gpu.nvidia.com"`)] },
  };
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: NS },
    spec: { resourceClaims: [{ name: "g", resourceClaimName: "c" }], containers: [{ name: "c", image: "x", resources: { claims: [{ name: "g" }] } }] },
  };
  for (const [name, limits, allowed] of [
    ["pod cap 8 → refused at the pod's claim", POD_CAP, false],
    ["no GPU cap → allowed", NO_CAP, true],
  ] as const)
    it(name, async () => {
      const jobs = {
        get: (kind: { plural: string }, _ns: string, n: string) =>
          Promise.resolve(kind.plural === "deviceclasses" ? (n === "fast" ? fast : undefined) : kind.plural === "resourceclaims" ? claim : undefined),
      };
      const hooks = createWebhooks({ policy: policyOf(limits), log: capturingLogger().log, jobs, now: () => new Date() });
      const body = review({ namespace: NS, object: pod }); // a pod's CREATE: review's defaults
      const response = (await hooks["/validate/pods"]!.admit(body)).review.response!;
      assert.equal(response.allowed, allowed, JSON.stringify(response.status));
      if (!allowed) {
        const causes = (response.status?.details?.causes ?? []) as Array<{ field?: string; message?: string }>;
        assert.ok(
          causes.some((x) => x.field === "spec.resourceClaims[0]" && /DeviceClass fast, which may select GPUs/.test(x.message ?? "")),
          JSON.stringify(causes),
        );
      }
    });
});

// GPUs through Dynamic Resource Allocation read as the extended resources they stand for (src/core/dra.ts).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimGpuRequests, claimReferences, pinnedValues, podClaimGpuNanos, type ClaimSpec, type ResolvedClaim } from "../../../src/core/dra.js";
import { defaultPolicy } from "../../../src/policy/load.js";

const classes = defaultPolicy().gpu.deviceClasses;
const exactly = (deviceClassName: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ exactly: { deviceClassName, ...extra } });
const claim = (...requests: Record<string, unknown>[]): ClaimSpec => ({ devices: { requests: requests.map((r, i) => ({ name: `r${i}`, ...r })) } });
const sel = (expression: string): { cel: { expression: string } } => ({ cel: { expression } });

describe("claimGpuRequests: how many devices each request can be given", () => {
  const capacity = new Map([["gpu.nvidia.com", 8]]);
  const cases: { name: string; spec: unknown; want: { resourceName: string; count: number | undefined }[] }[] = [
    { name: "exactly, count defaults to 1", spec: claim(exactly("gpu.nvidia.com")), want: [{ resourceName: "nvidia.com/gpu", count: 1 }] },
    { name: "exactly, count 4", spec: claim(exactly("gpu.nvidia.com", { count: 4 })), want: [{ resourceName: "nvidia.com/gpu", count: 4 }] },
    { name: "AMD class", spec: claim(exactly("gpu.amd.com", { count: 2 })), want: [{ resourceName: "amd.com/gpu", count: 2 }] },
    { name: "a class that is not a GPU", spec: claim(exactly("nic.example.com", { count: 2 })), want: [] },
    {
      name: "allocationMode All, capacity known: the largest node's",
      spec: claim(exactly("gpu.nvidia.com", { allocationMode: "All" })),
      want: [{ resourceName: "nvidia.com/gpu", count: 8 }],
    },
    {
      name: "allocationMode All on an AMD class, capacity unknown: unbounded",
      spec: claim(exactly("gpu.amd.com", { allocationMode: "All" })),
      want: [{ resourceName: "amd.com/gpu", count: undefined }],
    },
    {
      name: "firstAvailable: the largest alternative",
      spec: claim({
        firstAvailable: [
          { name: "small", deviceClassName: "gpu.nvidia.com", count: 1 },
          { name: "big", deviceClassName: "gpu.nvidia.com", count: 4 },
        ],
      }),
      want: [{ resourceName: "nvidia.com/gpu", count: 4 }],
    },
    {
      name: "firstAvailable: a GPU alternative after a CPU one still counts",
      spec: claim({
        firstAvailable: [
          { name: "cpu", deviceClassName: "cpu.example.com", count: 8 },
          { name: "gpu", deviceClassName: "gpu.nvidia.com", count: 2 },
        ],
      }),
      want: [{ resourceName: "nvidia.com/gpu", count: 2 }],
    },
    {
      name: "MIG class with a pinned profile",
      spec: claim(exactly("mig.nvidia.com", { count: 2, selectors: [sel("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")] })),
      want: [{ resourceName: "nvidia.com/mig-1g.10gb", count: 2 }],
    },
    { name: "MIG class with no profile", spec: claim(exactly("mig.nvidia.com")), want: [{ resourceName: "nvidia.com/mig-any", count: 1 }] },
    {
      name: "two requests",
      spec: claim(exactly("gpu.nvidia.com", { count: 2 }), exactly("gpu.amd.com")),
      want: [
        { resourceName: "nvidia.com/gpu", count: 2 },
        { resourceName: "amd.com/gpu", count: 1 },
      ],
    },
    {
      name: "a negative count reads as the default",
      spec: claim(exactly("gpu.nvidia.com", { count: -3 })),
      want: [{ resourceName: "nvidia.com/gpu", count: 1 }],
    },
    { name: "malformed: requests not a list", spec: { devices: { requests: "x" } }, want: [] },
    { name: "malformed: not an object", spec: "claim", want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = claimGpuRequests(c.spec as ClaimSpec, classes, capacity).map((r) => ({ resourceName: r.resourceName, count: r.count }));
      assert.deepEqual(got, c.want);
    });
  }
  it("All without capacity on a class the capacity map does not know is unbounded", () => {
    assert.equal(claimGpuRequests(claim(exactly("gpu.nvidia.com", { allocationMode: "All" })), classes)[0]?.count, undefined);
  });
});

describe("pinnedValues: what a selector pins an attribute to", () => {
  const cases: { name: string; expr: string; values: string[]; open: boolean }[] = [
    {
      name: "==, single quotes",
      expr: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'",
      values: ["NVIDIA A100-SXM4-80GB"],
      open: false,
    },
    { name: "==, reversed", expr: `"H100" == device.attributes["gpu.nvidia.com"].productName`, values: ["H100"], open: false },
    { name: "in a list", expr: "device.attributes['gpu.nvidia.com'].productName in ['A100', \"H100\"]", values: ["A100", "H100"], open: false },
    {
      name: "with another test joined by &&",
      expr: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'A100'",
      values: ["A100"],
      open: false,
    },
    { name: "!= selects anything else", expr: "device.attributes['gpu.nvidia.com'].productName != 'A100'", values: [], open: true },
    { name: "matches is open", expr: "device.attributes['gpu.nvidia.com'].productName.matches('A.*')", values: [], open: true },
    { name: "|| around a pinned value is open", expr: "device.attributes['gpu.nvidia.com'].productName == 'A100' || true", values: ["A100"], open: true },
    { name: "no mention", expr: "device.driver == 'gpu.nvidia.com'", values: [], open: false },
    { name: "an attribute whose name only starts the same is not it", expr: "device.attributes['x'].productNameX == 'A'", values: [], open: false },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(pinnedValues(c.expr, "productName"), { values: c.values, open: c.open }));
  }
});

describe("podClaimGpuNanos: a pod's GPUs through its claims", () => {
  const spec = (claims: unknown[]): V1PodSpec =>
    ({ containers: [{ name: "c", resources: { claims: [{ name: "gpus" }] } }], resourceClaims: claims }) as V1PodSpec;
  const resolved = (entries: Record<string, ResolvedClaim>): Map<string, ResolvedClaim> => new Map(Object.entries(entries));
  it("counts each claim once, by resource name", () => {
    const s = spec([
      { name: "gpus", resourceClaimTemplateName: "t" },
      { name: "more", resourceClaimName: "c" },
    ]);
    const got = podClaimGpuNanos(
      s,
      resolved({
        gpus: { source: "ResourceClaimTemplate/t", spec: claim(exactly("gpu.nvidia.com", { count: 2 })) },
        more: { source: "ResourceClaim/c", spec: claim(exactly("gpu.nvidia.com", { count: 3 })) },
      }),
      classes,
    );
    assert.deepEqual([...got], [["nvidia.com/gpu", 5_000_000_000n]]);
  });
  it("leaves out a claim made for an extended-resource request", () => {
    const s = spec([{ name: "gpus", resourceClaimName: "made" }]);
    const got = podClaimGpuNanos(
      s,
      resolved({ gpus: { source: "ResourceClaim/made", spec: claim(exactly("gpu.nvidia.com", { count: 2 })), forExtendedResource: true } }),
      classes,
    );
    assert.equal(got.size, 0);
  });
  it("leaves out what could not be resolved", () => {
    assert.equal(podClaimGpuNanos(spec([{ name: "gpus", resourceClaimName: "gone" }]), new Map(), classes).size, 0);
  });
  it("claimReferences names what to look up", () => {
    assert.deepEqual(claimReferences(spec([{ name: "a", resourceClaimName: "c" }, { name: "b", resourceClaimTemplateName: "t" }, { nameless: true }])), [
      { name: "a", claim: "c" },
      { name: "b", template: "t" },
    ]);
  });
});

describe("claimGpuRequests keeps its answer per claim spec (bench:dra-pods)", () => {
  const classes = [{ name: "gpu.nvidia.com", resourceName: "nvidia.com/gpu" }];
  const spec = { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "All" } }] } };
  it("the same spec, classes and capacity: the same answer, read once; another capacity or classes: read again", () => {
    const capacity = new Map([["gpu.nvidia.com", 8]]);
    const first = claimGpuRequests(spec, classes, capacity);
    assert.equal(claimGpuRequests(spec, classes, capacity), first, "kept");
    assert.equal(first[0]!.count, 8);
    assert.ok(Object.isFrozen(first), "shared answers cannot be changed by a caller");
    const larger = claimGpuRequests(spec, classes, new Map([["gpu.nvidia.com", 16]]));
    assert.notEqual(larger, first);
    assert.equal(larger[0]!.count, 16, "read with the new capacity");
    assert.equal(claimGpuRequests(spec, [...classes], undefined)[0]!.count, undefined, "other classes, no capacity: read again");
  });
});

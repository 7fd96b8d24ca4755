/**
 * `doctor`'s DeviceClass check (src/doctor/device-classes.ts, issue 45 finding 7): the cluster's DeviceClasses that
 * look like GPUs but are not in the policy's gpu.deviceClasses, and those whose spec.extendedResourceName the policy
 * neither lists in gpu.resources nor maps (gpu.deviceClasses[].extendedResourceName). A table of cases that fire and
 * cases that do not, and `diagnose` carrying the warning into the exit code.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkDeviceClasses } from "../../../src/doctor/device-classes.js";
import { diagnose } from "../../../src/doctor/index.js";
import type { DeviceClassesState, DoctorFinding, DoctorSnapshot } from "../../../src/doctor/types.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";

const deviceClass = (name: string, extendedResourceName?: string): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "DeviceClass",
  metadata: { name },
  spec: { selectors: [{ cel: { expression: `device.driver == '${name}'` } }], ...(extendedResourceName ? { extendedResourceName } : {}) },
});

const brief = (findings: readonly DoctorFinding[]): string[] => findings.map((f) => `${f.severity} ${f.check} ${f.subject}`);
const policy = defaultPolicy();
const mapped = checkPolicy(
  {
    gpu: {
      deviceClasses: [
        ...defaultPolicy().gpu.deviceClasses,
        { name: "gpu.example.com", resourceName: "example.com/gpu", extendedResourceName: "example.com/accel" },
      ],
    },
  },
  "mapped",
);

describe("doctor device-classes: the cluster's DeviceClasses against the policy", () => {
  const cases: Array<{ name: string; state: DeviceClassesState | undefined; policy?: Policy; want: string[]; message?: RegExp }> = [
    {
      name: "the vendors' classes, all in the policy → ok",
      state: [deviceClass("gpu.nvidia.com"), deviceClass("mig.nvidia.com"), deviceClass("gpu.amd.com")],
      want: ["ok device-classes DeviceClasses"],
    },
    {
      name: "vfio.gpu.nvidia.com not in the policy → warning",
      state: [deviceClass("gpu.nvidia.com"), deviceClass("vfio.gpu.nvidia.com")],
      want: ["warning device-classes DeviceClass vfio.gpu.nvidia.com"],
      message: /looks like a GPU class but is not in the policy's gpu\.deviceClasses/,
    },
    {
      name: "a custom gpu.example.com not in the policy → warning",
      state: [deviceClass("gpu.example.com")],
      want: ["warning device-classes DeviceClass gpu.example.com"],
    },
    {
      name: "gpu.example.com listed, with its extendedResourceName mapped → ok",
      state: [deviceClass("gpu.example.com", "example.com/accel")],
      policy: mapped,
      want: ["ok device-classes DeviceClasses"],
    },
    {
      name: "a listed class serving an extended resource the policy does not know → warning",
      state: [deviceClass("gpu.nvidia.com", "example.com/accel")],
      want: ["warning device-classes DeviceClass gpu.nvidia.com"],
      message: /serves the extended resource example\.com\/accel .* neither lists in gpu\.resources nor maps/,
    },
    {
      name: "a listed class serving a gpu.resources name (nvidia.com/gpu) → ok",
      state: [deviceClass("gpu.nvidia.com", "nvidia.com/gpu")],
      want: ["ok device-classes DeviceClasses"],
    },
    {
      name: "an unlisted GPU-looking class with an unknown extendedResourceName → two warnings",
      state: [deviceClass("vgpu.example.com", "example.com/vgpu")],
      want: ["warning device-classes DeviceClass vgpu.example.com", "warning device-classes DeviceClass vgpu.example.com"],
    },
    {
      name: "a NIC class serving its own extended resource → info, not a warning",
      state: [deviceClass("nic.example.com", "example.com/nic")],
      want: ["info device-classes DeviceClass nic.example.com"],
    },
    { name: "a NIC class with none → ok", state: [deviceClass("nic.example.com")], want: ["ok device-classes DeviceClasses"] },
    {
      name: "an administrator's class `fast` selecting NVIDIA's driver, not listed → warning",
      state: [{ ...deviceClass("fast"), spec: { selectors: [{ cel: { expression: `device.driver == "gpu.nvidia.com"` } }] } }],
      want: ["warning device-classes DeviceClass fast"],
      message: /may select GPUs \(its selector names gpu\.nvidia\.com\) but is not in the policy's gpu\.deviceClasses/,
    },
    {
      name: "a class without selectors (every device, GPUs included) → warning",
      state: [{ ...deviceClass("everything"), spec: {} }],
      want: ["warning device-classes DeviceClass everything"],
      message: /no selectors/,
    },
    { name: "no DeviceClass API (404) → nothing", state: "absent", want: [] },
    { name: "not read → nothing", state: undefined, want: [] },
    {
      name: "cannot list → warning, not checked",
      state: { error: "HTTP 403: forbidden" },
      want: ["warning device-classes DeviceClasses"],
      message: /not checked/,
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      const found = checkDeviceClasses(c.state, c.policy ?? policy);
      assert.deepEqual(brief(found), c.want);
      if (c.message) assert.match(found[0]!.message, c.message);
      for (const f of found) if (f.severity === "warning" && f.subject !== "DeviceClasses") assert.ok(f.fix.length > 0, "a warning says what to do");
    });

  it("diagnose carries the warning into the exit code", () => {
    const snapshot: DoctorSnapshot = {
      now: new Date("2026-12-04T12:00:00Z"),
      namespace: "quartermaster",
      webhookConfigurations: { error: "not read" },
      services: {},
      certificates: {},
      protectedNamespaces: {},
      reconciler: { error: "not read" },
      ledger: "absent",
      access: [],
      deviceClasses: [deviceClass("vfio.gpu.nvidia.com")],
    };
    const r = diagnose(snapshot, policy);
    assert.ok(brief(r.findings).includes("warning device-classes DeviceClass vfio.gpu.nvidia.com"), brief(r.findings).join("\n"));
    assert.ok(r.exitCode >= 1);
  });
});

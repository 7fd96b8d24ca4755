/**
 * End to end: GPUs asked for through Dynamic Resource Allocation (`resource.k8s.io/v1`), proven by the real
 * kube-scheduler. A stand-in driver publishes ResourceSlices for two virtual GPU nodes (an A100 and an H100
 * node, tainted `nvidia.com/gpu` as GPU nodes are) and a DeviceClass `gpu.nvidia.com`; no kubelet plugin is
 * needed for allocation. Pods ask for GPUs through ResourceClaims, in a namespace where Quartermaster's webhooks
 * act and in one where they do not:
 * - a DRA pod is outfitted like its extended-resource twin (the same GPU toleration) and the scheduler allocates
 *   its claim's devices and binds it; without Quartermaster the same pod stays Pending on the GPU taint;
 * - a selector pinning a product places the pod on that product's node;
 * - the caps refuse the same requests written as claims: a claim over the per-container cap at its own CREATE,
 *   a pod whose claims sum over the per-pod cap, a product outside `allowedAccelerators`.
 * Skipped where the apiserver does not serve `resource.k8s.io/v1` (before Kubernetes 1.34).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { A100_MIG_DISABLED, H100_NO_MIG, NVIDIA_GPU_TAINT, clusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { createNamespace, startOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

const WITH = "dra-placed";
const WITHOUT = "dra-unplaced";
const DRIVER = "gpu.nvidia.com";
const NODES = [
  clusterNode(A100_MIG_DISABLED, { name: "a100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  clusterNode(H100_NO_MIG, { name: "h100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 128, memoryGi: 1024 }),
];
const PRODUCT: Record<string, string> = { a100: "NVIDIA A100-SXM4-40GB", h100: "NVIDIA H100 80GB HBM3" };

const POLICY = `
limits:
  container: { gpus: { "nvidia.com/gpu": 4 } }
  pod: { gpus: 6 }
namespaces:
  - pattern: dra-strict
    limits: { allowedAccelerators: [NVIDIA-H100-80GB-HBM3] }
`;

const claim = (name: string, count: number, product?: string) => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaim",
  metadata: { name },
  spec: {
    devices: {
      requests: [
        {
          name: "gpu",
          exactly: {
            deviceClassName: DRIVER,
            count,
            ...(product ? { selectors: [{ cel: { expression: `device.attributes['${DRIVER}'].productName == '${product}'` } }] } : {}),
          },
        },
      ],
    },
  },
});

const draPod = (name: string, claims: string[]) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: {
    containers: claims.map((c, i) => ({ name: `c${i}`, image: "trainer", resources: { claims: [{ name: c }] } })),
    resourceClaims: claims.map((c) => ({ name: c, resourceClaimName: c })),
  },
});

const twinPod = (name: string, gpus: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "c0", image: "trainer", resources: { limits: { "nvidia.com/gpu": String(gpus) } } }] },
});

describe("DRA: GPUs through ResourceClaims, outfitted and limited like extended resources, allocated by the real scheduler", () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let wh: WebhookProcess | undefined;
  let served = true;

  before(async () => {
    cp = await startControlPlane({ scheduler: true });
    served = (await cp.api("GET", "/apis/resource.k8s.io/v1")).status === 200;
    if (!served) return;
    nodes = await startVirtualNodes(cp, NODES);
    await createNamespace(cp, WITH, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "dra-strict", { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, WITHOUT);
    const deviceClass = {
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: DRIVER },
      spec: { selectors: [{ cel: { expression: `device.driver == '${DRIVER}'` } }] },
    };
    assert.equal((await cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", deviceClass)).status, 201);
    for (const n of NODES) {
      const slice = {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceSlice",
        metadata: { name: `${n.name}-gpus` },
        spec: {
          driver: DRIVER,
          nodeName: n.name,
          pool: { name: n.name, generation: 1, resourceSliceCount: 1 },
          devices: Array.from({ length: 8 }, (_, i) => ({ name: `gpu-${i}`, attributes: { productName: { string: PRODUCT[n.name] } } })),
        },
      };
      const r = await cp.api("POST", "/apis/resource.k8s.io/v1/resourceslices", slice);
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
    assert.equal(applied.code, 0, applied.stderr);
    let probe = 0;
    await cp.until("the webhook configurations to take effect", async () => {
      const name = `probe-${++probe}`;
      await cp.api("POST", `/api/v1/namespaces/${WITH}/pods?dryRun=All`, twinPod(name, 1));
      return (await wh!.awaitAdmissions(name, 1, 1000)).some((l) => l.webhook === "mutate-pods");
    });
  });

  after(async () => {
    nodes?.stop();
    await wh?.stop();
    await cp?.stop();
  });

  const create = (ns: string, plural: string, body: unknown, group = "api/v1") =>
    cp.api("POST", group === "api/v1" ? `/api/v1/namespaces/${ns}/${plural}` : `/apis/${group}/namespaces/${ns}/${plural}`, body);
  const podOf = async (ns: string, name: string) => (await cp.api("GET", `/api/v1/namespaces/${ns}/pods/${name}`)).body;

  it("a DRA pod is outfitted like its extended-resource twin, and the scheduler allocates its claim and binds it", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    for (const ns of [WITH, WITHOUT]) {
      assert.equal((await create(ns, "resourceclaims", claim("two", 2), "resource.k8s.io/v1")).status, 201);
      const r = await create(ns, "pods", draPod("dra", ["two"]));
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    assert.equal((await create(WITH, "pods", twinPod("twin", 2))).status, 201);
    const dra = await podOf(WITH, "dra");
    const twin = await podOf(WITH, "twin");
    assert.ok(
      (dra.spec.tolerations ?? []).some((x: { key?: string }) => x.key === "nvidia.com/gpu"),
      JSON.stringify(dra.spec.tolerations),
    );
    const gpuTolerations = (p: { spec: { tolerations?: { key?: string }[] } }) => (p.spec.tolerations ?? []).filter((x) => x.key?.includes("gpu"));
    assert.deepEqual(gpuTolerations(dra), gpuTolerations(twin));
    await cp.until("the DRA pod bound", async () => Boolean((await podOf(WITH, "dra")).spec.nodeName), 60_000, 500);
    const allocated = (await cp.api("GET", `/apis/resource.k8s.io/v1/namespaces/${WITH}/resourceclaims/two`)).body;
    const results = allocated.status?.allocation?.devices?.results ?? [];
    assert.equal(results.length, 2, JSON.stringify(allocated.status));
    assert.equal(results[0].pool, (await podOf(WITH, "dra")).spec.nodeName, "the devices are on the node the pod was bound to");
    // Without Quartermaster, the same pod stays Pending on the GPU taint.
    await cp.until(
      "the unoutfitted DRA pod found unschedulable",
      async () =>
        ((await podOf(WITHOUT, "dra")).status?.conditions ?? []).some(
          (c: { type: string; reason?: string }) => c.type === "PodScheduled" && c.reason === "Unschedulable",
        ),
      60_000,
      500,
    );
    assert.equal((await podOf(WITHOUT, "dra")).spec.nodeName, undefined);
  });

  it("a selector pinning a product places the pod on that product's node", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    assert.equal((await create(WITH, "resourceclaims", claim("h100-one", 1, PRODUCT.h100), "resource.k8s.io/v1")).status, 201);
    assert.equal((await create(WITH, "pods", draPod("on-h100", ["h100-one"]))).status, 201);
    await cp.until("the pinned pod bound", async () => Boolean((await podOf(WITH, "on-h100")).spec.nodeName), 60_000, 500);
    assert.equal((await podOf(WITH, "on-h100")).spec.nodeName, "h100");
  });

  it("the caps refuse the same requests written as claims", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    // Over the per-container cap (4), at the claim's own CREATE; its extended-resource twin too.
    const five = await create(WITH, "resourceclaims", claim("five", 5), "resource.k8s.io/v1");
    assert.equal(five.status, 403, JSON.stringify(five.body));
    assert.match(five.body.message, /container-limits|per-container limit of 4/);
    const twin = await create(WITH, "pods", twinPod("twin-five", 5));
    assert.equal(twin.status, 403);
    // Two claims of 4 (each allowed) in one pod: 8, over the per-pod cap of 6.
    for (const name of ["four-a", "four-b"]) assert.equal((await create(WITH, "resourceclaims", claim(name, 4), "resource.k8s.io/v1")).status, 201);
    const wide = await create(WITH, "pods", draPod("eight", ["four-a", "four-b"]));
    assert.equal(wide.status, 403, JSON.stringify(wide.body));
    assert.match(wide.body.message, /8 GPUs, over the per-pod limit of 6/);
    // A product the namespace may not use, pinned by the claim's selector.
    const a100 = await create("dra-strict", "resourceclaims", claim("a100", 1, PRODUCT.a100), "resource.k8s.io/v1");
    assert.equal(a100.status, 403, JSON.stringify(a100.body));
    assert.match(a100.body.message, /accelerator NVIDIA A100-SXM4-40GB, not allowed/);
  });
});

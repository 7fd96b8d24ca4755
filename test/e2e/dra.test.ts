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
 *   a pod whose claims sum over the per-pod cap, a product outside `allowedAccelerators`, a claim of an
 *   administrator's DeviceClass that selects the GPU driver but is not listed in `gpu.deviceClasses`.
 * - a held-out table of GPU requests written both ways (extended resources and claims, templates, `All`,
 *   `firstAvailable`, product pins, a restricted namespace) gets the same verdicts and placements (PARITY);
 * - one reconcile pass as the reconciler's ServiceAccount: the ledger's DRA devices per node equal the devices
 *   the scheduler allocated in the claims, and its allocated GPUs the bound pods' requests plus those devices.
 * Each node offers PER_NODE GPUs both ways (a device plugin's count and the stand-in driver's devices); the
 * resourceclaim controller makes the claims of templates.
 * Skipped where the apiserver does not serve `resource.k8s.io/v1` (before Kubernetes 1.34).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ANNOTATION_ACCELERATOR } from "../../src/core/keys.js";
import { A100_MIG_DISABLED, H100_NO_MIG, NVIDIA_GPU_TAINT, clusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { publishDevices, startVirtualNodes, type VirtualNodes } from "./harness/nodes.js";
import { cli, createNamespace, installKubeflowCrds, startOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

const WITH = "dra-placed";
const WITHOUT = "dra-unplaced";
const DRIVER = "gpu.nvidia.com";
/** GPUs per node, both ways: the device plugin's `nvidia.com/gpu` and the stand-in driver's devices. */
const PER_NODE = 32;
const NODES = [
  clusterNode(A100_MIG_DISABLED, { name: "a100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 96, memoryGi: 1024 }),
  clusterNode(H100_NO_MIG, { name: "h100", zone: "zone-a", taints: [NVIDIA_GPU_TAINT], cpu: 128, memoryGi: 1024 }),
].map((n) => ({ ...n, allocatable: { "nvidia.com/gpu": PER_NODE } }));
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

/** A product pin in a DRA selector (`productName`, as NVIDIA's driver publishes it). */
const pin = (product: string) => [{ cel: { expression: `device.attributes['${DRIVER}'].productName == '${product}'` } }];
/** One device request of a claim spec: `exactly` (count or All) or `firstAvailable` alternatives. */
type DeviceRequest = { count?: number; all?: true; product?: string } | { firstAvailable: number[] };
const claimSpec = (req: DeviceRequest) => ({
  devices: {
    requests: [
      "firstAvailable" in req
        ? { name: "gpu", firstAvailable: req.firstAvailable.map((count, i) => ({ name: `alt${i}`, deviceClassName: DRIVER, count })) }
        : {
            name: "gpu",
            exactly: {
              deviceClassName: DRIVER,
              ...(req.all ? { allocationMode: "All" } : { count: req.count ?? 1 }),
              ...(req.product ? { selectors: pin(req.product) } : {}),
            },
          },
    ],
  },
});

/**
 * The held-out table: GPU requests written both ways. `twin` is the extended-resource pod (containers' GPUs,
 * and the accelerator annotation where the DRA side pins a product); `dra` the same request as claims (one per
 * container) or a template. Both must get the same verdict, refused with a message matching `refused`, and the
 * same placement: bound, on `node` where a product is pinned. The expectations are written from the policy
 * (per-container cap 4, per-pod 6, dra-strict allows only H100), not from either side's answer.
 */
interface ParityCase {
  name: string;
  ns: string;
  /** GPUs per container (the twin's limits; the DRA side's requests, one claim or template each). */
  containers: DeviceRequest[];
  /** Write the DRA side as ResourceClaimTemplates rather than ResourceClaims. */
  template?: boolean;
  refused?: RegExp;
  node?: string;
}
const PARITY: ParityCase[] = [
  { name: "one GPU, any product", ns: WITH, containers: [{ count: 1 }] },
  { name: "two GPUs pinned to the H100", ns: WITH, containers: [{ count: 2, product: PRODUCT.h100! }], node: "h100" },
  { name: "three GPUs through a template, pinned to the A100", ns: WITH, containers: [{ count: 3, product: PRODUCT.a100! }], template: true, node: "a100" },
  { name: "3 + 3 GPUs in two containers: at the per-pod cap", ns: WITH, containers: [{ count: 3 }, { count: 3 }] },
  { name: "4 + 3 GPUs in two containers: over the per-pod cap", ns: WITH, containers: [{ count: 4 }, { count: 3 }], refused: /per-pod limit of 6/ },
  { name: "five GPUs: over the per-container cap", ns: WITH, containers: [{ count: 5 }], refused: /per-container limit of 4/ },
  { name: "firstAvailable 4 or 2: counted as 4, allowed", ns: WITH, containers: [{ firstAvailable: [4, 2] }] },
  { name: "firstAvailable 8 or 2: counted as 8, refused", ns: WITH, containers: [{ firstAvailable: [8, 2] }], refused: /per-container limit of 4/ },
  {
    name: "every device of the class (All): refused under a cap",
    ns: WITH,
    containers: [{ all: true }],
    refused: /per-container limit of 4|per-pod limit|cannot be held|All/,
  },
  { name: "the A100 where only the H100 is allowed", ns: "dra-strict", containers: [{ count: 1, product: PRODUCT.a100! }], refused: /not allowed/ },
  { name: "the H100 where it is allowed", ns: "dra-strict", containers: [{ count: 1, product: PRODUCT.h100! }], node: "h100" },
];

/** The twin's GPUs for a request: `All` as the largest node's, `firstAvailable` as its largest alternative. */
const twinGpus = (req: DeviceRequest): number => ("firstAvailable" in req ? Math.max(...req.firstAvailable) : req.all ? PER_NODE : (req.count ?? 1));
/** The GFD product label of the node whose devices the stand-in driver publishes as `product`. */
const productLabel = (product: string) => NODES.find((n) => PRODUCT[n.name] === product)!.labels["nvidia.com/gpu.product"]!;

describe("DRA: GPUs through ResourceClaims, outfitted and limited like extended resources, allocated by the real scheduler", () => {
  let cp: ControlPlane;
  let nodes: VirtualNodes | undefined;
  let wh: WebhookProcess | undefined;
  let served = true;

  before(async () => {
    // The resourceclaim controller makes the claims of ResourceClaimTemplates (and releases them).
    cp = await startControlPlane({ scheduler: true, controllers: ["resourceclaim-controller"] });
    served = (await cp.api("GET", "/apis/resource.k8s.io/v1")).status === 200;
    if (!served) return;
    nodes = await startVirtualNodes(cp, NODES);
    await installKubeflowCrds(cp); // the reconciler's pass lists the training jobs
    await createNamespace(cp, WITH, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "dra-strict", { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, WITHOUT);
    await publishDevices(cp, { driver: DRIVER, nodes: NODES.map((n) => n.name), perNode: PER_NODE, product: (node) => PRODUCT[node]! });
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
    // An administrator's DeviceClass selecting the GPU driver's devices, not listed in gpu.deviceClasses (red team:
    // counted as 0 GPUs): read by the webhook (its RBAC's get on deviceclasses) and refused; a NIC class's claim is not.
    const deviceClass = (name: string, driver: string) => ({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name },
      spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] },
    });
    for (const [name, driver] of [
      ["fast", DRIVER],
      ["nic.example.com", "nic.example.com"],
    ] as const)
      assert.equal((await cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", deviceClass(name, driver))).status, 201);
    const ofClass = (name: string, deviceClassName: string) => ({
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceClaim",
      metadata: { name },
      spec: { devices: { requests: [{ name: "dev", exactly: { deviceClassName, count: 1 } }] } },
    });
    const fast = await create(WITH, "resourceclaims", ofClass("fast-one", "fast"), "resource.k8s.io/v1");
    assert.equal(fast.status, 403, JSON.stringify(fast.body));
    assert.match(fast.body.message, /DeviceClass fast, which may select GPUs \(its selector names gpu\.nvidia\.com\)/);
    assert.equal((await create(WITH, "resourceclaims", ofClass("nic-one", "nic.example.com"), "resource.k8s.io/v1")).status, 201);
    // A product the namespace may not use, pinned by the claim's selector.
    const a100 = await create("dra-strict", "resourceclaims", claim("a100", 1, PRODUCT.a100), "resource.k8s.io/v1");
    assert.equal(a100.status, 403, JSON.stringify(a100.body));
    assert.match(a100.body.message, /accelerator NVIDIA A100-SXM4-40GB, not allowed/);
  });

  it("a held-out table of GPU requests written both ways gets the same verdicts and placements", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    const outcomes: string[] = [];
    for (const [i, c] of PARITY.entries()) {
      const product = c.containers.map((r) => ("product" in r ? r.product : undefined)).find(Boolean);
      const twin = await create(c.ns, "pods", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `twin-${i}`, ...(product ? { annotations: { [ANNOTATION_ACCELERATOR]: productLabel(product) } } : {}) },
        spec: {
          containers: c.containers.map((r, j) => ({ name: `c${j}`, image: "trainer", resources: { limits: { "nvidia.com/gpu": String(twinGpus(r)) } } })),
        },
      });
      // The DRA side: its claims (or templates), then the pod; refused at whichever CREATE refuses first.
      let dra: { status: number; body: { message?: string } } | undefined;
      const names = c.containers.map((_, j) => `par-${i}-${j}`);
      for (const [j, r] of c.containers.entries()) {
        const object = c.template
          ? { apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", metadata: { name: names[j] }, spec: { spec: claimSpec(r) } }
          : { apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim", metadata: { name: names[j] }, spec: claimSpec(r) };
        const made = await create(c.ns, c.template ? "resourceclaimtemplates" : "resourceclaims", object, "resource.k8s.io/v1");
        if (made.status !== 201) {
          dra = made;
          break;
        }
      }
      dra ??= await create(c.ns, "pods", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `dra-${i}` },
        spec: {
          containers: names.map((n, j) => ({ name: `c${j}`, image: "trainer", resources: { claims: [{ name: n }] } })),
          resourceClaims: names.map((n) => (c.template ? { name: n, resourceClaimTemplateName: n } : { name: n, resourceClaimName: n })),
        },
      });
      const verdict = (r: { status: number }) => (r.status === 201 ? "admitted" : r.status === 403 ? "refused" : `HTTP ${r.status}`);
      outcomes.push(`${c.name}: extended resource ${verdict(twin)}, DRA ${verdict(dra)}`);
      assert.equal(verdict(dra), verdict(twin), `${c.name}: ${JSON.stringify(twin.body.message)} vs ${JSON.stringify(dra.body.message)}`);
      assert.equal(verdict(twin), c.refused ? "refused" : "admitted", `${c.name}: ${JSON.stringify(twin.body.message)}`);
      if (c.refused) {
        assert.match(twin.body.message, c.refused, c.name);
        assert.match(dra.body.message ?? "", c.refused, c.name);
        continue;
      }
      const bound = async (name: string) => (await podOf(c.ns, name)).spec.nodeName as string | undefined;
      await cp
        .until(`${c.name}: both pods bound`, async () => Boolean((await bound(`twin-${i}`)) && (await bound(`dra-${i}`))), 60_000, 500)
        .catch(async (err: Error) => {
          const why = async (name: string) => JSON.stringify((await podOf(c.ns, name)).status?.conditions ?? []);
          throw new Error(`${err.message.split("\n")[0]}; twin: ${await why(`twin-${i}`)}; dra: ${await why(`dra-${i}`)}`);
        });
      if (c.node) {
        assert.equal(await bound(`twin-${i}`), c.node, `${c.name}: the extended-resource pod's node`);
        assert.equal(await bound(`dra-${i}`), c.node, `${c.name}: the DRA pod's node`);
      }
    }
    console.log(outcomes.join("\n"));
  });

  it("the ledger's GPUs equal what the scheduler allocated: DRA devices from the claims, extended resources from the bound pods", async (t) => {
    if (!served) return t.skip("resource.k8s.io/v1 is not served by this apiserver (Kubernetes < 1.34)");
    const reconciler = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    const pass = await cli(["reconcile", "--once", "--kubeconfig", reconciler.kubeconfig]);
    assert.equal(pass.code, 0, pass.stderr);
    const read = await cli(["ledger", "-o", "json", "--namespace", "quartermaster", "--kubeconfig", reconciler.kubeconfig]);
    assert.equal(read.code, 0, read.stderr);
    const ledger = JSON.parse(read.stdout);
    // The truth, from the apiserver: every allocated device of the driver, on its pool's node (the stand-in
    // driver names each pool after its node); every bound pod's extended-resource GPUs.
    const draByNode = new Map<string, number>();
    for (const claim of (await cp.api("GET", "/apis/resource.k8s.io/v1/resourceclaims")).body.items) {
      for (const r of claim.status?.allocation?.devices?.results ?? []) if (r.driver === DRIVER) draByNode.set(r.pool, (draByNode.get(r.pool) ?? 0) + 1);
    }
    const extByNode = new Map<string, number>();
    for (const pod of (await cp.api("GET", "/api/v1/pods")).body.items) {
      if (!pod.spec.nodeName || ["Succeeded", "Failed"].includes(pod.status?.phase)) continue;
      for (const ctr of pod.spec.containers) {
        const n = Number(ctr.resources?.limits?.["nvidia.com/gpu"] ?? 0);
        if (n) extByNode.set(pod.spec.nodeName, (extByNode.get(pod.spec.nodeName) ?? 0) + n);
      }
    }
    assert.ok([...draByNode.values()].reduce((a, b) => a + b, 0) >= 10, `the earlier tests allocated devices: ${JSON.stringify([...draByNode])}`);
    const figures = (name: string) => ledger.nodes.find((n: { name: string }) => n.name === name)?.resources?.["nvidia.com/gpu"];
    const rows: string[] = [];
    for (const node of NODES.map((n) => n.name)) {
      const f = figures(node);
      rows.push(
        `${node}: ledger dra ${JSON.stringify(f?.dra)} allocated ${f?.allocated}; scheduler ${draByNode.get(node) ?? 0} devices, ${extByNode.get(node) ?? 0} extended`,
      );
      assert.equal(f?.dra?.allocated ?? 0, draByNode.get(node) ?? 0, `${node}: DRA devices allocated`);
      assert.equal(f?.dra?.capacity, PER_NODE, `${node}: DRA devices published`);
      // allocated: the bound pods' container requests plus the claims' devices (src/ledger/compute.ts).
      assert.equal(f?.allocated ?? 0, (extByNode.get(node) ?? 0) + (draByNode.get(node) ?? 0), `${node}: GPUs allocated both ways`);
    }
    const total = ledger.totals["nvidia.com/gpu"];
    assert.equal(
      total.dra.allocated,
      [...draByNode.values()].reduce((a, b) => a + b, 0),
      "the totals' DRA devices allocated",
    );
    console.log(rows.join("\n"));
  });
});

/**
 * Nodes without machines for the end-to-end tests: Node objects with labels, taints, capacity and a Ready
 * status (written through the status subresource, as a kubelet does), and their Leases in kube-node-lease
 * renewed from the test process while it runs, as a virtual kubelet would. kube-scheduler binds pods to
 * them; nothing runs the pods, so a bound pod stays Pending with `spec.nodeName` set.
 */
import type { ControlPlane } from "./controlplane.js";
import type { ClusterNode } from "../../fixtures/nodes.js";

export interface VirtualNodes {
  names: string[];
  /** Stops renewing (the Node objects stay). */
  stop(): void;
}

/** metav1.MicroTime wants six fractional digits. */
const microTime = (d: Date): string => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

function status(node: ClusterNode, now: Date, since: Date): Record<string, unknown> {
  const resources: Record<string, string> = { cpu: String(node.cpu), memory: `${node.memoryGi}Gi`, pods: String(node.pods), "ephemeral-storage": "1Ti" };
  for (const [name, n] of Object.entries(node.allocatable)) resources[name] = String(n);
  const condition = (type: string, value: string, reason: string): Record<string, string> => ({
    type,
    status: value,
    reason,
    message: "virtual node (quartermaster e2e)",
    lastHeartbeatTime: now.toISOString(),
    lastTransitionTime: since.toISOString(),
  });
  return {
    capacity: resources,
    allocatable: resources,
    conditions: [
      condition("Ready", "True", "KubeletReady"),
      condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
      condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
      condition("PIDPressure", "False", "KubeletHasSufficientPID"),
    ],
    addresses: [{ type: "Hostname", address: node.name }],
    nodeInfo: {
      architecture: "amd64",
      operatingSystem: "linux",
      kubeletVersion: "v1.33.13",
      kubeProxyVersion: "",
      containerRuntimeVersion: "virtual://0",
      kernelVersion: "",
      osImage: "",
      bootID: "",
      machineID: "",
      systemUUID: "",
    },
  };
}

async function must(what: string, reply: Promise<{ status: number; body: unknown }>, ok: number[] = [200, 201]): Promise<any> {
  const r = await reply;
  if (!ok.includes(r.status)) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

const MERGE = { "content-type": "application/merge-patch+json" };

/**
 * Creates `nodes` Ready and keeps them so: every `renewMs` each Lease's renewTime and each Ready condition's
 * heartbeat are renewed (kubelet's defaults: 10 s and 40 s lease duration).
 */
export async function startVirtualNodes(cp: ControlPlane, nodes: readonly ClusterNode[], renewMs = 10_000): Promise<VirtualNodes> {
  const since = new Date();
  for (const node of nodes) {
    const created = await must(
      `creating node ${node.name}`,
      cp.api("POST", "/api/v1/nodes", { apiVersion: "v1", kind: "Node", metadata: { name: node.name, labels: node.labels }, spec: { taints: node.taints } }),
    );
    await must(`status of node ${node.name}`, cp.api("PATCH", `/api/v1/nodes/${node.name}/status`, { status: status(node, since, since) }, MERGE));
    await must(
      `lease of node ${node.name}`,
      cp.api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: {
          name: node.name,
          ownerReferences: [{ apiVersion: "v1", kind: "Node", name: node.name, uid: created.metadata.uid }],
        },
        spec: { holderIdentity: node.name, leaseDurationSeconds: 40, renewTime: microTime(new Date()) },
      }),
    );
  }
  let running = false;
  const renew = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      for (const node of nodes) {
        const now = new Date();
        await cp.api("PATCH", `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${node.name}`, { spec: { renewTime: microTime(now) } }, MERGE);
        await cp.api("PATCH", `/api/v1/nodes/${node.name}/status`, { status: { conditions: status(node, now, since).conditions } }, MERGE);
      }
    } catch {
      // The control plane may be stopping; the next tick tries again.
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void renew(), renewMs);
  timer.unref();
  return { names: nodes.map((n) => n.name), stop: () => clearInterval(timer) };
}

/**
 * A stand-in DRA driver for virtual nodes: the DeviceClass `driver` (selecting the driver's devices) and, for each
 * node, one ResourceSlice of `perNode` devices `gpu-<i>` whose `productName` is `product(node)`. No kubelet plugin is
 * needed for kube-scheduler to allocate them.
 */
export async function publishDevices(
  cp: ControlPlane,
  o: { driver: string; nodes: readonly string[]; perNode: number; product: (node: string) => string },
): Promise<void> {
  const dc = await cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
    apiVersion: "resource.k8s.io/v1",
    kind: "DeviceClass",
    metadata: { name: o.driver },
    spec: { selectors: [{ cel: { expression: `device.driver == '${o.driver}'` } }] },
  });
  if (dc.status !== 201) throw new Error(`DeviceClass ${o.driver}: ${dc.status} ${JSON.stringify(dc.body)}`);
  for (const node of o.nodes) {
    const r = await cp.api("POST", "/apis/resource.k8s.io/v1/resourceslices", {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: { name: `${node}-gpus` },
      spec: {
        driver: o.driver,
        nodeName: node,
        pool: { name: node, generation: 1, resourceSliceCount: 1 },
        devices: Array.from({ length: o.perNode }, (_, i) => ({ name: `gpu-${i}`, attributes: { productName: { string: o.product(node) } } })),
      },
    });
    if (r.status !== 201) throw new Error(`ResourceSlice of ${node}: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

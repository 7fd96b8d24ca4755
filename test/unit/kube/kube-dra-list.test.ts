/** The reconciler's DRA lists against a stand-in apiserver: trimmed objects, and 404 (no resource.k8s.io/v1) as no DRA. */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { connectCluster } from "../../../src/kube/cluster.js";

let server: Server;
let kubeconfig = "";
let dra = true;

before(async () => {
  server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    res.setHeader("Content-Type", "application/json");
    if (!dra || !path?.startsWith("/apis/resource.k8s.io/v1/")) {
      res.statusCode = 404;
      res.end(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 }));
      return;
    }
    const items =
      path === "/apis/resource.k8s.io/v1/resourceslices"
        ? [
            {
              metadata: { name: "s", managedFields: [{}] },
              spec: {
                driver: "gpu.nvidia.com",
                nodeName: "a",
                pool: { name: "a", generation: 2, resourceSliceCount: 1 },
                devices: [{ name: "gpu-0", attributes: { type: { string: "gpu" } }, capacity: { memory: { value: "80Gi" } } }],
              },
            },
          ]
        : [
            {
              metadata: { name: "c", namespace: "team-a", uid: "u" },
              spec: { devices: { requests: [{ name: "g", exactly: { deviceClassName: "gpu.nvidia.com" } }] } },
              status: {
                allocation: { devices: { results: [{ request: "g", driver: "gpu.nvidia.com", pool: "a", device: "gpu-0" }], config: [] } },
                reservedFor: [{ resource: "pods", name: "p", uid: "pu" }],
              },
            },
          ];
    res.end(JSON.stringify({ kind: "List", apiVersion: "v1", metadata: {}, items }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), "qm-dra-"));
  kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
  );
});
after(() => server.close());

describe("kube: ResourceSlices and ResourceClaims for the ledger", () => {
  it("lists both, trimmed to what the ledger reads", async () => {
    dra = true;
    const cluster = await connectCluster(kubeconfig);
    const [slices, claims] = await Promise.all([cluster.listResourceSlices!(), cluster.listResourceClaims!()]);
    assert.deepEqual(slices, [
      {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceSlice",
        metadata: { name: "s" },
        spec: {
          driver: "gpu.nvidia.com",
          nodeName: "a",
          pool: { name: "a", generation: 2, resourceSliceCount: 1 },
          devices: [{ name: "gpu-0", attributes: { type: { string: "gpu" } } }],
        },
      },
    ]);
    assert.deepEqual(claims[0]!.status, {
      allocation: { devices: { results: [{ request: "g", driver: "gpu.nvidia.com", pool: "a", device: "gpu-0" }] } },
      reservedFor: [{ resource: "pods", name: "p", uid: "pu" }],
    });
  });

  it("a cluster without resource.k8s.io/v1 (404) has no DRA, and no error", async () => {
    dra = false;
    const cluster = await connectCluster(kubeconfig);
    assert.deepEqual(await cluster.listResourceSlices!(), []);
    assert.deepEqual(await cluster.listResourceClaims!(), []);
  });
});

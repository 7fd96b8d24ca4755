/**
 * `quartermaster explain` against a fake API (a 127.0.0.1 HTTP server answering canned objects by path): the
 * reads it makes (src/run/explain-read.ts) and the verdict it prints, for a running job, one pending for GPUs,
 * one waiting in a Kueue queue and one whose controller is absent; and its usage errors.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../../src/cli/commands.js";
import { clusterQueue, job, localQueue, node, pendingPods, pod, workload } from "../../fixtures/explain.js";

/** What the fake API answers, by path without the query; absent paths are 404. */
let objects: Record<string, unknown> = {};
const seen: string[] = [];
const list = (items: unknown[]): unknown => ({ kind: "List", items });

function handler(req: IncomingMessage, res: ServerResponse): void {
  seen.push(req.url!);
  const path = req.url!.split("?")[0]!;
  const body = objects[path];
  if (body === undefined)
    return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 404, message: "not found" }));
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
}

const server = createServer(handler).listen(0, "127.0.0.1");
const dir = mkdtempSync(join(tmpdir(), "qm-explain-"));
const kubeconfig = join(dir, "kubeconfig");
before(async () => {
  if (!server.listening) await new Promise((r) => server.once("listening", r));
  const { port } = server.address() as AddressInfo;
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
current-context: fake
contexts: [{ name: fake, context: { cluster: fake, user: fake } }]
clusters: [{ name: fake, cluster: { server: "http://127.0.0.1:${port}" } }]
users: [{ name: fake, user: { token: t0k } }]
`,
  );
});
after(() => server.close());

async function explain(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(["explain", ...args, "--kubeconfig", kubeconfig], {
    stdout: (l) => out.push(l),
    stderr: (l) => err.push(l),
    cwd: dir,
    shutdown: new Promise(() => {}),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

const PODS = "/api/v1/namespaces/team-a/pods";
const JOB = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/llm";
const base = (over: Record<string, unknown>): Record<string, unknown> => ({
  "/apis/kubeflow.org/v1": { kind: "APIResourceList" },
  "/apis/apps/v1/deployments": list([{ metadata: { name: "training-operator", namespace: "kubeflow" }, spec: { replicas: 1 }, status: { readyReplicas: 1 } }]),
  [JOB]: job(),
  [PODS]: list([pod({ name: "llm-worker-0", node: "gpu-a1" }), pod({ name: "llm-worker-1", node: "gpu-a2" })]),
  "/api/v1/namespaces/team-a/events": list([]),
  "/api/v1/nodes": list([node("gpu-a1"), node("gpu-a2")]),
  ...over,
});

describe("quartermaster explain", () => {
  it("a running PyTorchJob → running, exit 0; the kind is found case-insensitively and the pods by the job-name label", async () => {
    objects = base({});
    seen.length = 0;
    const r = await explain("PYTORCHJOB/llm", "-n", "team-a");
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^PyTorchJob\/llm: RUNNING: running: 2 pod\(s\)/);
    assert.ok(
      seen.some((u) => u.startsWith(`${PODS}?labelSelector=${encodeURIComponent("training.kubeflow.org/job-name=llm")}&limit=500`)),
      seen.join("\n"),
    );
    assert.ok(
      seen.every((u) => !u.includes("/pods?") || u.includes("limit=")),
      "every list is bounded",
    );
  });

  it("pods asking 8 GPUs on nodes of 4 → no-gpu-shape with the largest free block, exit 1", async () => {
    objects = base({ [PODS]: list(pendingPods()), "/api/v1/nodes": list([node("gpu-a1", { gpus: 4 }), node("gpu-a2", { gpus: 2 })]) });
    const r = await explain("pytorchjobs.kubeflow.org/llm", "-n", "team-a");
    assert.equal(r.code, 1);
    assert.match(r.out, /NO-GPU-SHAPE/);
    assert.match(r.out, /largest free block 4 on gpu-a1 of 2 node\(s\) it may use \(allocatable: no ledger\)/);
    assert.match(r.out, /NEXT {2}ask at most 4 nvidia.com\/gpu per pod/);
  });

  it("suspended in a full queue → queued with Kueue's position from the visibility API (-o json)", async () => {
    const wl = workload({
      conditions: [
        { type: "QuotaReserved", status: "False", reason: "Pending", message: "insufficient unused quota", lastTransitionTime: new Date().toISOString() },
      ],
    });
    objects = base({
      [JOB]: {
        ...job({ suspend: true, queue: "gpu", conditions: [] }),
        metadata: { name: "llm", namespace: "team-a", uid: "uid-llm", labels: { "kueue.x-k8s.io/queue-name": "gpu" } },
      },
      [PODS]: list([]),
      "/apis/kueue.x-k8s.io/v1beta1": { kind: "APIResourceList" },
      "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads": list([wl]),
      "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/gpu": localQueue,
      "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/gpu-cq": clusterQueue(16, 16),
      "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/gpu/pendingworkloads": list([
        { metadata: { name: "pytorchjob-llm-1a2b3" }, positionInClusterQueue: 4, positionInLocalQueue: 2 },
      ]),
    });
    seen.length = 0;
    const r = await explain("pytorchjob/llm", "-n", "team-a", "-o", "json");
    assert.equal(r.code, 1, r.err);
    const v = JSON.parse(r.out) as { reason: string; evidence: Array<{ text: string }>; next: string };
    assert.equal(v.reason, "queued");
    assert.ok(
      v.evidence.some((e) => e.text === "position 4 in ClusterQueue gpu-cq, 2 in LocalQueue gpu"),
      JSON.stringify(v.evidence),
    );
    assert.ok(v.evidence.some((e) => /nominal 16, reserved 16, free 0/.test(e.text)));
    assert.ok(
      seen.some((u) => u.includes(`labelSelector=${encodeURIComponent("kueue.x-k8s.io/job-uid=uid-llm")}`)),
      seen.join("\n"),
    );
  });

  it("no pods and no training-operator Deployment → no-controller (-o yaml)", async () => {
    objects = base({ [PODS]: list([]), "/apis/apps/v1/deployments": list([]), [JOB]: job({ conditions: [] }) });
    const r = await explain("pytorchjob/llm", "-n", "team-a", "-o", "yaml");
    assert.equal(r.code, 1);
    assert.match(r.out, /^job: PyTorchJob\/llm\nreason: no-controller/);
    assert.match(r.out, /no Deployment training-operator in any namespace/);
  });

  it("a job that does not exist → not-found, exit 1", async () => {
    objects = base({ [JOB]: undefined });
    const r = await explain("pytorchjob/nope", "-n", "team-a");
    assert.equal(r.code, 1);
    assert.match(r.out, /NOT-FOUND: no PyTorchJob nope in namespace team-a/);
  });

  it("an unknown kind or no name → usage error, exit 2", async () => {
    objects = base({});
    const unknown = await explain("rayjob/x");
    assert.equal(unknown.code, 2);
    assert.match(unknown.err, /unknown kind rayjob; known: TFJob, PyTorchJob/);
    assert.equal((await explain("pytorchjob")).code, 2);
  });
});

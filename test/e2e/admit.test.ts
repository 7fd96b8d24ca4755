/**
 * `quartermaster admit` against the real thing: the same files admitted offline and created through a real
 * kube-apiserver with Quartermaster's webhooks registered (same policy). The verdicts must agree; a denial's
 * every violation (field path and message) must be in the apiserver's answer; every value the offline patch
 * sets must be in what the apiserver stored. The PyTorchJob is created for real, so the webhook's job lookup finds
 * it; its replica pods (as `admit --pods` makes them) are then created with dryRun=All.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { admitObjects, type Admitted } from "../../src/cli/admit.js";
import { readInputs } from "../../src/cli/admit-input.js";
import { contains } from "../../src/cli/policy-test.js";
import type { KubeObject } from "../../src/core/kube.js";
import { parsePolicy } from "../../src/policy/parse.js";
import { startControlPlane, type ApiReply, type ControlPlane } from "./harness/controlplane.js";
import { ROOT, createNamespace, installKubeflowCrds, startOwnWebhook, type WebhookProcess } from "./harness/webhook.js";

const POLICY = "limits:\n  container:\n    gpus: {nvidia.com/gpu: 4}\n  allowedAccelerators: [NVIDIA-H100-80GB-HBM3]\n";
const NS = "team-a";

/** The value at a JSON pointer (RFC 6901). */
function at(doc: unknown, pointer: string): unknown {
  let node = doc;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    node = node === null || typeof node !== "object" ? undefined : (node as Record<string, unknown>)[key];
  }
  return node;
}

function agree(offline: Admitted, reply: ApiReply): void {
  const what = `${offline.kind}/${offline.name}`;
  assert.equal(
    reply.status === 201,
    offline.allowed,
    `${what}: offline ${offline.allowed ? "allowed" : `denied by ${offline.deniedRules.join(", ")}`}, apiserver ${reply.status} ${JSON.stringify(reply.body?.message)}`,
  );
  if (!offline.allowed) {
    for (const v of offline.violations)
      assert.ok(String(reply.body.message).includes(`${v.field}: ${v.message}`), `${what}: "${v.field}: ${v.message}" not in ${reply.body.message}`);
    return;
  }
  for (const op of offline.patch) {
    if (op.op === "remove") continue;
    // Contained, not equal: the apiserver's own admission plugins add to some lists (DefaultTolerationSeconds).
    const value = (op as { value: unknown }).value;
    assert.ok(
      contains(at(reply.body, op.path), value),
      `${what}: ${op.path}: admit set ${JSON.stringify(value)}, the apiserver stored ${JSON.stringify(at(reply.body, op.path))}`,
    );
  }
}

describe("admit offline agrees with a real kube-apiserver and Quartermaster's webhooks", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let results: Admitted[];

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    const own = await startOwnWebhook(cp, POLICY);
    wh = own.wh;
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: own.configs }));
    assert.equal(applied.code, 0, applied.stderr);
    const probe = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "probe" },
      spec: { containers: [{ name: "c", image: "img", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
    };
    await cp.until("the webhook configurations to take effect", async () => {
      const r = await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, probe);
      return r.status === 201 && Array.isArray(r.body?.spec?.tolerations);
    });
    const inputs = await readInputs(["examples/policy-tests/resources/pods.yaml", "examples/pytorchjob.yaml"], ROOT);
    results = await admitObjects(inputs, { policy: parsePolicy(POLICY, "policy.yaml"), namespace: NS, pods: true });
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it("pods: allowed and outfitted alike, or denied with the same violations", async () => {
    const pods = results.filter((r) => r.role === "pod" && !r.from);
    assert.deepEqual(
      pods.map((p) => [p.name, p.allowed]),
      [
        ["one-gpu", true],
        ["eight-gpus", false],
        ["on-h100", true],
        ["on-t4", false],
      ],
    );
    for (const p of pods) agree(p, await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, p.original));
  });

  it("a PyTorchJob, then its replica pods: the cluster spec the webhook reads from the job is the one admit computed", async () => {
    const job = results.find((r) => r.role === "job")!;
    const created = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`, job.original);
    agree(job, created);
    const replicas = results.filter((r) => r.from === "PyTorchJob/mnist-ddp");
    assert.equal(replicas.length, 3);
    for (const p of replicas) {
      const pod = structuredClone(p.original) as KubeObject & { metadata: { ownerReferences: Array<{ uid: string }> } };
      pod.metadata.ownerReferences[0]!.uid = created.body.metadata.uid;
      const reply = await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, pod);
      agree(p, reply);
      assert.ok(
        p.patch.some((op) => op.path === "/spec/containers/0/env"),
        `${p.name}: no env in the offline patch`,
      );
    }
  });
});

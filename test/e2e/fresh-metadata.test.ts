/**
 * Issue 46: a TrainJob's runtime is read fresh on CREATE and unsuspend (issue 45), and the webhook's reader does that,
 * with a copy at hand, by reading the runtime's metadata alone (`Accept: application/json;as=PartialObjectMetadata;
 * g=meta.k8s.io;v=v1`, `getMetadata` in src/kube/rest.ts) and answering the copy when its uid and resourceVersion are
 * the runtime's now (`fresh` in src/kube/jobs.ts). This proves a real kube-apiserver serves that for a custom resource
 * (a ClusterTrainingRuntime under a CRD): the metadata without the spec, the same uid and resourceVersion as the
 * object, a new resourceVersion after any write (so a copy is never taken for an edited runtime), 404 once deleted.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../src/core/kube.js";
import { cachedJobReader, jobPath, restGetObject } from "../../src/kube/jobs.js";
import { restClient, type RestClient } from "../../src/kube/rest.js";
import { upstream } from "../fixtures/trainer-v2.js";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { installMinimalCrds } from "./harness/crds.js";

const RUNTIME: ObjectKind = { kind: "ClusterTrainingRuntime", group: "trainer.kubeflow.org", version: "v1alpha1", plural: "clustertrainingruntimes" };

/** The upstream torch-distributed runtime, named `name`, with `containers` containers (a wide one is ~1 MiB). */
function runtime(name: string, containers: number): KubeObject {
  const r = structuredClone(upstream("torch_distributed.yaml")) as unknown as {
    metadata: Record<string, unknown>;
    spec: { template: { spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: Record<string, unknown> } } } }> } } };
  };
  r.metadata = { name };
  r.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec.containers = Array.from({ length: containers }, (_, i) => ({
    name: `c${i}`,
    image: "busybox",
    resources: { limits: { "nvidia.com/gpu": "1" } },
  }));
  return r as unknown as KubeObject;
}

const version = (o: unknown): string => {
  const m = (o as { metadata?: { uid?: string; resourceVersion?: string } } | undefined)?.metadata;
  return `${m?.uid}/${m?.resourceVersion}`;
};

describe("a fresh read by metadata against a real kube-apiserver (issue 46)", () => {
  let cp: ControlPlane;
  let rest: RestClient;
  before(async () => {
    cp = await startControlPlane();
    await installMinimalCrds(cp, [upstream("torch_distributed.yaml")]);
    rest = (await restClient(cp.kubeconfig))!;
    const created = await cp.api("POST", `/apis/${RUNTIME.group}/${RUNTIME.version}/${RUNTIME.plural}`, runtime("wide", 10_000));
    assert.equal(created.status, 201, JSON.stringify(created.body).slice(0, 300));
  });
  after(async () => {
    await cp?.stop();
  });

  it("serves a custom resource's metadata alone: no spec, the object's uid and resourceVersion", async () => {
    const path = jobPath(RUNTIME, "", "wide");
    const whole = (await rest.get(path)) as KubeObject;
    const meta = (await rest.getMetadata(path)) as KubeObject;
    assert.deepEqual(
      { apiVersion: meta.apiVersion, kind: meta.kind, spec: "spec" in meta, version: version(meta), size: JSON.stringify(meta).length < 2048 },
      { apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", spec: false, version: version(whole), size: true },
    );
    assert.equal(await rest.getMetadata(jobPath(RUNTIME, "", "no-such-runtime")), undefined);
  });

  it("the reader: one whole read, then metadata while unchanged; whole again after an edit; gone after a delete", async () => {
    const counted = restGetObject(rest);
    const reads = { whole: 0, metadata: 0 };
    const get = Object.assign((k: ObjectKind, ns: string, n: string) => (reads.whole++, counted(k, ns, n)), {
      metadata: (k: ObjectKind, ns: string, n: string) => (reads.metadata++, counted.metadata!(k, ns, n)),
    });
    const reader = cachedJobReader(() => Promise.resolve(get), { ttlMs: 1 });
    const first = await reader.fresh!(RUNTIME, "", "wide");
    const again = await reader.fresh!(RUNTIME, "", "wide");
    assert.deepEqual({ ...reads, same: first === again }, { whole: 1, metadata: 1, same: true });

    // An edit (a label is enough: every write makes a new resourceVersion) is read whole.
    const patched = await cp.api(
      "PATCH",
      jobPath(RUNTIME, "", "wide"),
      { metadata: { labels: { edited: "yes" } } },
      { "content-type": "application/merge-patch+json" },
    );
    assert.equal(patched.status, 200);
    const edited = await reader.fresh!(RUNTIME, "", "wide");
    assert.deepEqual({ ...reads, label: (edited?.metadata as { labels?: Record<string, string> }).labels?.edited }, { whole: 2, metadata: 2, label: "yes" });
    assert.notEqual(version(edited), version(first));

    const deleted = await cp.api("DELETE", jobPath(RUNTIME, "", "wide"));
    assert.equal(deleted.status, 200);
    assert.equal(await reader.fresh!(RUNTIME, "", "wide"), undefined);
    assert.deepEqual(reads, { whole: 2, metadata: 3 });
  });
});

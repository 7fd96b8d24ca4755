/**
 * End to end: the MutatingAdmissionPolicy that `quartermaster policy export-map --policy F` prints, with the pods
 * webhook in its reduced mode (`webhook.podMutation: reduced`), stores exactly the pod the full `/mutate/pods`
 * webhook stores, on a real kube-apiserver (which compiles the CEL, applies the JSON patches, defaults after each
 * mutation, and reinvokes the policy after the webhook's change). Every corpus pod (when the corpus is there; the
 * corpus's Kubeflow jobs are created first, so their pods get their cluster spec) and 420 generated pods
 * (test/fixtures/map-pods.ts: training and non-training GPU pods, MIG, interruptible, user-set tolerations,
 * affinity and resources) are sent as dry-run creates twice: first with only the full webhook registered, then
 * with the policy and the reduced webhook. The stored pods (the apiserver's answer) must be identical, and GPU pods
 * without a job must have been outfitted with no webhook call.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, installKubeflowCrds, ROOT, webhookProcess, type WebhookProcess } from "./harness/webhook.js";
import { MAP_MANIFEST } from "../../src/manifests/generate.js";
import { CORPUS_SKIP, corpusJobs, corpusPods } from "../fixtures/corpus.js";
import { generatedMapPods, interactionMapPods, MAP_POLICY_YAML, mapJob } from "../fixtures/map-pods.js";
import { MAP_NAME } from "../../src/manifests/map.js";

type Obj = Record<string, any>;
interface Case {
  id: string;
  kind: string;
  pod: Obj;
}
interface Stored {
  status: number;
  /** The stored pod without what differs between any two creates (uid, timestamps, managed fields), or the refusal. */
  text: string;
  annotated: boolean;
}

const NS = "map-a";
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function storedOf(status: number, body: Obj): Stored {
  if (status !== 201) return { status, text: String(body?.message ?? JSON.stringify(body)), annotated: false };
  const meta = { ...body.metadata };
  for (const k of ["uid", "creationTimestamp", "managedFields", "resourceVersion"]) delete meta[k];
  return { status, text: JSON.stringify({ ...body, metadata: meta }, null, 1), annotated: meta.annotations?.["quartermaster.dev/mutations"] !== undefined };
}

/** The lines only one side has (`-` the webhook's, `+` the policy's), with a line of context before each. */
function lineDiff(a: string, b: string): string {
  const count = (text: string): Map<string, number> => {
    const m = new Map<string, number>();
    for (const l of text.split("\n")) m.set(l, (m.get(l) ?? 0) + 1);
    return m;
  };
  const [ca, cb] = [count(a), count(b)];
  const only = (text: string, self: Map<string, number>, other: Map<string, number>, mark: string): string[] => {
    const lines = text.split("\n");
    return lines.flatMap((l, i) => ((self.get(l) ?? 0) > (other.get(l) ?? 0) ? [`${mark} ${lines[i - 1]?.trim()} >> ${l.trim()}`] : []));
  };
  return [...only(a, ca, cb, "-"), ...only(b, cb, ca, "+")].join("\n");
}

/** The corpus pods as cases in the test's namespace, their owners kept (the corpus jobs are created there). */
function corpusCases(): Case[] {
  return corpusPods().map(({ source, pod }, i) => {
    const meta = { ...(pod.metadata as Obj) };
    for (const k of ["namespace", "resourceVersion", "uid", "generateName"]) delete meta[k];
    return { id: `corpus ${source}`, kind: "corpus", pod: { ...pod, metadata: { ...meta, name: `corpus-${i}` } } };
  });
}

describe("the exported MutatingAdmissionPolicy + the reduced pods webhook against the full webhook, through a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let fullPolicy: string;
  let reducedPolicy: string;
  const byWebhook = new Map<string, Stored>();
  const byPolicy = new Map<string, Stored>();
  /** Webhook admissions per pod during the second run. */
  const reached = new Map<string, number>();
  const corpus = CORPUS_SKIP ? [] : corpusCases();
  const generated: Case[] = generatedMapPods(420).map((g) => ({ id: g.name, kind: g.kind, pod: g.pod }));
  const interactions: Case[] = interactionMapPods().map((g) => ({ id: g.name, kind: g.kind, pod: g.pod }));
  const all = [...corpus, ...generated, ...interactions];
  let seq = 0;

  /** The jobs' uids as created (`Kind/name` → uid): a pod's ownerReference names its controller's, as a controller's pods do. */
  const liveUids = new Map<string, string>();
  const withLiveOwners = (pod: Obj): Obj => {
    const meta = pod.metadata as Obj;
    const refs = meta.ownerReferences as Obj[] | undefined;
    if (!refs) return pod;
    const owners = refs.map((o) => ({ ...o, uid: liveUids.get(`${String(o.kind)}/${String(o.name)}`) ?? o.uid }));
    return { ...pod, metadata: { ...meta, ownerReferences: owners } };
  };

  const createDry = async (pod: Obj): Promise<Stored> => {
    const r = await cp.api("POST", `/api/v1/namespaces/${NS}/pods?dryRun=All`, withLiveOwners(pod));
    return storedOf(r.status, r.body);
  };

  async function runAll(into: Map<string, Stored>): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < all.length) {
        const c = all[next++]!;
        into.set(c.id, await createDry(c.pod));
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
  }

  const gpuProbe = (): Obj => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `probe-${++seq}` },
    spec: { containers: [{ name: "c", image: "busybox", resources: { limits: { "nvidia.com/gpu": "1" } } }] },
  });

  /** Polls with a probe until `done` (admission configuration changes apply asynchronously). */
  async function settle(what: string, done: (s: Stored, name: string) => boolean | Promise<boolean>): Promise<void> {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const pod = gpuProbe();
      if (await done(await createDry(pod), pod.metadata.name)) return;
      if (performance.now() > deadline) throw new Error(`${what} did not take effect\n${cp.logs()}`);
      await sleep(200);
    }
  }

  async function mutatingConfig(policyFile: string): Promise<Obj> {
    const r = await cli(["manifests", "webhooks", "--policy", policyFile]);
    assert.equal(r.code, 0, r.stderr);
    const mutating = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Obj)
      .find((c) => c.kind === "MutatingWebhookConfiguration")!;
    mutating.webhooks = mutating.webhooks.filter((h: Obj) => h.name === "pods.mutate.quartermaster.dev");
    for (const h of mutating.webhooks)
      h.clientConfig = { url: `https://127.0.0.1:${wh.port}${h.clientConfig.service.path}`, caBundle: Buffer.from(wh.caPem).toString("base64") };
    return mutating;
  }

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
    fullPolicy = join(cp.dir, "map-policy.yaml");
    writeFileSync(fullPolicy, MAP_POLICY_YAML);
    reducedPolicy = join(cp.dir, "map-policy-reduced.yaml");
    writeFileSync(reducedPolicy, `${MAP_POLICY_YAML}webhook: {podMutation: reduced}\n`);
    // The jobs the pods belong to, so the webhook finds them (cluster spec) in both runs.
    const jobs = [
      mapJob(NS),
      ...(CORPUS_SKIP ? [] : corpusJobs().map(({ job }) => ({ ...job, metadata: { name: (job.metadata as Obj).name, namespace: NS } }))),
    ];
    for (const job of jobs as Obj[]) {
      await cp.kubectl(["apply", "-f", "-"], JSON.stringify(job));
      const [kind, name] = [String(job.kind), String((job.metadata as Obj).name)];
      const uid = await cp.kubectl(["get", "-n", NS, kind.toLowerCase(), name, "-o", "jsonpath={.metadata.uid}"]);
      assert.equal(uid.code, 0, uid.stderr);
      liveUids.set(`${kind}/${name}`, uid.stdout.trim());
    }
    wh = await webhookProcess({ kubeconfig: cp.kubeconfig, policy: fullPolicy });
    await wh.start();
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it(`the full webhook outfits ${all.length} pods`, async () => {
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(await mutatingConfig(fullPolicy)));
    assert.equal(applied.code, 0, applied.stderr);
    await settle("the webhook", (s) => s.annotated);
    await runAll(byWebhook);
    const outfitted = [...byWebhook.values()].filter((s) => s.annotated).length;
    assert.ok(outfitted >= 300, `only ${outfitted} pods outfitted by the webhook`);
  });

  it("the exported policy is accepted, and the reduced webhook lets GPU pods without a job pass by", async () => {
    const r = await cli(["policy", "export-map", "--policy", reducedPolicy]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /not in the exported policy \(left to \/mutate\/pods\): training-labels, cluster-spec/);
    // failurePolicy Fail here, so a CEL or patch error shows as a refusal (and a difference) instead of a pod
    // silently left as it came.
    const applied = await cp.kubectl(["apply", "-f", "-"], r.stdout.replace("failurePolicy: Ignore", "failurePolicy: Fail"));
    assert.equal(
      applied.code,
      0,
      applied.stderr
        .split("\n")
        .filter((l) => !l.startsWith(" | "))
        .join("\n")
        .slice(0, 4000),
    );
    const narrowed = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(await mutatingConfig(reducedPolicy)));
    assert.equal(narrowed.code, 0, narrowed.stderr);
    // In effect once a GPU pod without a job is outfitted and the webhook never sees it.
    await settle("the policy and the reduced webhook", async (s, name) => s.annotated && (await wh.awaitAdmissions(name, 1, 500)).length === 0);
    const before = new Map(all.map((c) => [c.id, wh.admissions(c.pod.metadata.name).length]));
    await runAll(byPolicy);
    await sleep(1000); // the server logs after answering
    for (const c of all) reached.set(c.id, wh.admissions(c.pod.metadata.name).length - before.get(c.id)!);
    const live = await cp.api("GET", `/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/${MAP_NAME}`);
    assert.equal(live.status, 200);
  });

  function compare(cases: Case[], t: { diagnostic(message: string): void }): void {
    const problems: string[] = [];
    for (const c of cases) {
      const w = byWebhook.get(c.id);
      const p = byPolicy.get(c.id);
      assert.ok(w && p, `${c.id} was not run`);
      if (w.status !== p.status || w.text !== p.text) problems.push(`${c.id} (webhook ${w.status}, policy ${p.status}):\n${lineDiff(w.text, p.text)}`);
    }
    const outfitted = cases.filter((c) => byPolicy.get(c.id)!.annotated);
    const bypassed = outfitted.filter((c) => reached.get(c.id) === 0);
    t.diagnostic(
      `${cases.length} pods compared, ${problems.length} differ; ${outfitted.length} outfitted, ${bypassed.length} of them with no webhook call; ` +
        `${cases.filter((c) => byPolicy.get(c.id)!.status !== 201).length} refused by the apiserver (in both runs alike)`,
    );
    if (problems.length > 0) writeFileSync(join(tmpdir(), "map-parity-differences.txt"), problems.join("\n\n"));
    assert.deepEqual(
      problems.length,
      0,
      `${problems.length} of ${cases.length} differ (all in ${join(tmpdir(), "map-parity-differences.txt")}):\n${problems.slice(0, 3).join("\n")}`,
    );
  }

  it("the overlay's MutatingAdmissionPolicy and binding (manifests/overlays/mutating-admission-policy) pass the apiserver's validation", async () => {
    // kubernetes-models has no schema for admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (GA in 1.36):
    // the rendered-manifests suite leaves their schema to this server-side dry run. Renamed, so it is a create
    // (validated in full) whatever an earlier test installed under the same name.
    const docs = parseAllDocuments(readFileSync(join(ROOT, MAP_MANIFEST), "utf8")).map((d) => d.toJS() as Record<string, any>);
    assert.deepEqual(
      docs.map((d) => d.kind),
      ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"],
    );
    for (const d of docs) d.metadata.name = "qm-overlay-schema-check";
    docs[1]!.spec.policyName = "qm-overlay-schema-check";
    const r = await cp.kubectl(["create", "--dry-run=server", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: docs }));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /mutatingadmissionpolicy\.admissionregistration\.k8s\.io\/\S+ created \(server dry run\)/);
    assert.match(r.stdout, /mutatingadmissionpolicybinding\.admissionregistration\.k8s\.io\/\S+ created \(server dry run\)/);
  });

  it("corpus pods: the same stored pods", { skip: CORPUS_SKIP }, (t) => {
    assert.ok(corpus.length >= 40, `only ${corpus.length} corpus pods`);
    compare(corpus, t);
  });

  it(`${generated.length} generated pods: the same stored pods; GPU pods without a job never reach the webhook`, (t) => {
    compare(generated, t);
    const of = (kind: string): Case[] => generated.filter((c) => c.kind === kind && byPolicy.get(c.id)!.status === 201);
    // Not vacuous: many GPU pods outfitted by the policy alone, training pods by both (cluster spec from the webhook).
    const gpu = of("gpu");
    assert.ok(gpu.length >= 150, `only ${gpu.length} GPU pods admitted`);
    for (const c of gpu) assert.equal(reached.get(c.id), 0, `${c.id} reached the webhook`);
    // (A pod that already has all the mutations would add, say its own tolerations and requests, gets nothing.)
    const outfitted = gpu.filter((c) => byPolicy.get(c.id)!.annotated).length;
    assert.ok(outfitted >= 150, `only ${outfitted} of ${gpu.length} GPU pods without a job outfitted by the policy`);
    const training = of("training");
    assert.ok(training.length >= 80, `only ${training.length} training pods admitted`);
    for (const c of training) {
      assert.ok((reached.get(c.id) ?? 0) > 0, `${c.id} (a job's pod) did not reach the webhook`);
      assert.match(byPolicy.get(c.id)!.text, /"name": "MASTER_ADDR"/, `${c.id} has no cluster spec`);
      assert.match(byPolicy.get(c.id)!.text, /"quartermaster.dev\/mutations": "[^"]*cluster-spec/, c.id);
    }
  });
  it(`${interactions.length} pods where the steps meet (tolerations and required terms from several steps, none there before): the same stored pods`, (t) => {
    compare(interactions, t);
    for (const c of interactions) assert.ok(byPolicy.get(c.id)!.annotated, `${c.id} not outfitted`);
  });

  it("the policy applied again to the pods it outfitted changes nothing (it is reinvoked IfNeeded)", async (t) => {
    // GPU pods of no job: only the policy touches them. Their stored pods sent again, as they came back (the
    // apiserver sets the status and metadata again), must come back the same.
    const outfitted = [...generated, ...interactions].filter((c) => c.kind === "gpu" && byPolicy.get(c.id)!.annotated);
    assert.ok(outfitted.length >= 150, `only ${outfitted.length}`);
    const changed: string[] = [];
    for (const c of outfitted) {
      const first = byPolicy.get(c.id)!;
      const { status: _status, ...again } = JSON.parse(first.text) as Obj;
      const second = await createDry(again);
      if (second.status !== 201 || second.text !== first.text) changed.push(`${c.id}:\n${lineDiff(first.text, second.text)}`);
    }
    t.diagnostic(`${outfitted.length} outfitted pods sent again, ${changed.length} changed`);
    assert.equal(changed.length, 0, changed.slice(0, 3).join("\n"));
  });
});

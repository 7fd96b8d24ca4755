/**
 * End to end: the ValidatingAdmissionPolicy that `quartermaster policy export-vap --policy F` prints, applied
 * to a real kube-apiserver (which compiles its CEL and runs it within its cost limits), denies exactly the pods
 * `/validate/pods` denies, with the same message: every corpus pod (when the corpus is there), 240 generated
 * pods around the policy's limits in two namespaces (one under an override), values at the edges of the
 * quantity rules (out of range, native sidecars at and over the per-pod cap), enforcement modes (100 of the
 * generated pods again in a namespace where container-limits warns and pod-gpus audits, gpu-mig-mixing denying
 * in one namespace only, a denial listing only what denies), and large pods (under, just over
 * and far over the webhook's cost bound; and one whose violation list is longer than the apiserver allows a
 * policy's message, which then says so). Each pod is sent as a dry-run create twice: first with only the
 * `/validate/pods` webhook registered, then with only the exported policy.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { cli, createNamespace, webhookProcess, type WebhookProcess } from "./harness/webhook.js";
import { CORPUS_SKIP, corpusPods } from "../fixtures/corpus.js";
import { BEYOND_BOUNDS_CONDITION, beyondBoundsExpression } from "../../src/manifests/vap.js";
import { generatedPods, manyViolationsPod, VAP_MODE_NAMESPACE, VAP_NAMESPACES, VAP_POLICY_YAML, widePod } from "../fixtures/vap-pods.js";

type Obj = Record<string, any>;
interface Case {
  id: string;
  namespace: string;
  pod: Obj;
}
interface Verdict {
  status: number;
  /** The denial's own text: after the apiserver's `admission webhook "…" denied the request: ` or `pods "…" is forbidden: ValidatingAdmissionPolicy '…' with binding '…' denied request: ` prefix. */
  message: string;
  raw: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const WEBHOOK_PREFIX = /^admission webhook "pods\.validate\.quartermaster\.dev" denied the request: /;
const VAP_PREFIX = /^pods "[^"]*" is forbidden: ValidatingAdmissionPolicy 'quartermaster-pod-limits' with binding 'quartermaster-pod-limits' denied request: /;
/** The apiserver's limit on a policy's evaluated message (celconfig.MaxEvaluatedMessageExpressionSizeBytes). */
const MAX_MESSAGE_BYTES = 5 * 1024;
const FALLBACK = "the pod is over Quartermaster's limits (too many violations to list; /validate/pods lists them all)";

function verdictOf(status: number, body: Obj): Verdict {
  const raw = status === 201 ? "" : String(body?.message ?? JSON.stringify(body));
  return { status, raw, message: raw.replace(WEBHOOK_PREFIX, "").replace(VAP_PREFIX, "") };
}

/** The corpus pods as cases: renamed, in the test's namespaces (alternating), without owners or server-set fields. */
function corpusCases(): Case[] {
  return corpusPods().map(({ source, pod }, i) => {
    const meta = { ...(pod.metadata as Obj) };
    delete meta.ownerReferences;
    delete meta.namespace;
    delete meta.resourceVersion;
    delete meta.uid;
    delete meta.generateName;
    return { id: `corpus ${source}`, namespace: VAP_NAMESPACES[i % 2]!, pod: { ...pod, metadata: { ...meta, name: `corpus-${i}` } } };
  });
}

const generated: Case[] = generatedPods(240).map((g) => ({ id: g.name, namespace: g.namespace, pod: g.pod }));
// The first 100 again in the namespace where container-limits warns and pod-gpus audits (gpu-mig-mixing
// warns everywhere but in team-a): the policy must admit what the webhook only warns about or records.
const moded: Case[] = generated.slice(0, 100).map((c) => ({ id: `${c.id} in ${VAP_MODE_NAMESPACE}`, namespace: VAP_MODE_NAMESPACE, pod: c.pod }));
// Cost bound (src/core/cost.ts, 10,000; 4 rule passes + 1 per distinct GPU name): 250 containers of 3
// resources are 1 + 250 + 1,500 = 1,751 items × 5 passes, under it; 300 are 2,101 × 5, over; 450 pass 2,500
// items, where counting stops.
const large: Case[] = [
  { id: "250 containers (under the cost bound, over the per-pod GPU limit)", namespace: "team-a", pod: widePod("wide-250", 250) },
  { id: "400 containers without GPUs (2,001 items × 4 passes: under the bound, admitted)", namespace: "team-a", pod: widePod("wide-400", 400, false) },
  { id: "300 containers (just over the cost bound)", namespace: "team-a", pod: widePod("wide-300", 300) },
  { id: "450 containers (far over: counting stops)", namespace: "team-a", pod: widePod("wide-450", 450) },
  { id: "40 containers each over two caps (81 violations: a message past 5 KiB)", namespace: "team-a", pod: manyViolationsPod("many-40", 40) },
  { id: "8 containers over caps (a long message under 5 KiB)", namespace: "team-b", pod: manyViolationsPod("many-8", 8) },
  // Past the policy's bounds (64 containers, 32 entries per container): left to the webhook, no CEL cost denial.
  {
    id: "no job label, no GPU, 100 containers of 40 env and 16 resource entries (wide, not a training pod: admitted)",
    namespace: "team-a",
    pod: envPod("wide-env-100", 100, 40, 16),
  },
  {
    id: "no job label, no GPU, 2 containers, one of 40 resource entries (past the entry bound: admitted)",
    namespace: "team-a",
    pod: extendedPod("wide-entries-40", 2, 40),
  },
];

/** A one-container training pod with these limits (and requests, when given). */
function edgePod(name: string, limits: Record<string, string>, requests?: Record<string, string>): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: { "training.kubeflow.org/job-name": name } },
    spec: { containers: [{ name: "c", image: "busybox", resources: { limits, ...(requests ? { requests } : {}) } }] },
  };
}
// Values at the edges of the quantity rules: out of range (capped and uncapped GPU resources), far over a cap
// in another notation, and a request over the cap below its (also over) limit.
const edges: Case[] = [
  { id: "cpu 1e19 (out of range, capped)", namespace: "team-a", pod: edgePod("edge-cpu-huge", { cpu: "1e19" }) },
  { id: "amd.com/gpu 1e19 (out of range, uncapped GPU resource)", namespace: "team-a", pod: edgePod("edge-amd-huge", { "amd.com/gpu": "1e19" }) },
  { id: "memory 1Ti written in bytes", namespace: "team-b", pod: edgePod("edge-mem-bytes", { memory: "1099511627776" }) },
  { id: "cpu request 4500m under a limit of 5", namespace: "team-a", pod: edgePod("edge-req", { cpu: "5" }, { cpu: "4500m" }) },
  { id: "a native sidecar and an init container: exactly team-b's per-pod cap of 2", namespace: "team-b", pod: sidecarPod("edge-sidecar-2", 1) },
  { id: "a native sidecar, an init container of 2: over team-b's per-pod cap (init 2 + sidecar 1)", namespace: "team-b", pod: sidecarPod("edge-sidecar-3", 2) },
  // Not training pods (no job label, no GPU): out of scope whatever they ask for; training by a GPU alone: in.
  {
    id: "no job label, no GPU, over the cpu cap (not a training pod: admitted)",
    namespace: "team-a",
    pod: unlabelled(edgePod("edge-plain-cpu", { cpu: "64", memory: "1Ti" })),
  },
  { id: "no job label, no GPU, 9 containers over caps (not a training pod: admitted)", namespace: "team-a", pod: plainPod("edge-plain-9", 9) },
  // Wider than the webhooks' match condition walks (src/manifests/webhooks.ts, CONDITION_MAX_*): their guard skips it.
  {
    id: "no job label, no GPU, 1,500 containers of 16 resources (not a training pod: admitted)",
    namespace: "team-a",
    pod: extendedPod("edge-plain-wide", 1500, 16),
  },
  {
    id: "no job label, a GPU, over the cpu cap (a training pod by its GPU: denied)",
    namespace: "team-a",
    pod: unlabelled(edgePod("edge-gpu-cpu", { cpu: "64", "nvidia.com/gpu": "1" })),
  },
];

// VAP_POLICY_YAML's enforcement: container-limits warns and pod-gpus audits in team-c*; gpu-mig-mixing denies
// in team-a only.
const mixed = { "nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": "1" };
const modeEdges: Case[] = [
  {
    id: "cpu 5 and 9 GPUs in team-c (container-limits warns, pod-gpus audits): admitted",
    namespace: VAP_MODE_NAMESPACE,
    pod: edgePod("mode-warn", { cpu: "5", "nvidia.com/gpu": "9" }),
  },
  {
    id: "cpu 5 and memory 1e30 in team-c: only the quantity violations deny, and are the only ones listed",
    namespace: VAP_MODE_NAMESPACE,
    pod: edgePod("mode-quantity", { cpu: "5", memory: "1e30" }),
  },
  { id: "whole GPUs and a MIG slice in team-a (gpu-mig-mixing denies there)", namespace: "team-a", pod: edgePod("mode-mixing-a", mixed) },
  { id: "whole GPUs and a MIG slice in team-b (gpu-mig-mixing only warns)", namespace: "team-b", pod: edgePod("mode-mixing-b", mixed) },
];

/** `pod` without its labels. */
function unlabelled(pod: Obj): Obj {
  return { ...pod, metadata: { name: pod.metadata.name } };
}

/** A pod of `n` containers each over the cpu and memory caps, without labels or GPUs. */
function plainPod(name: string, n: number): Obj {
  const containers = Array.from({ length: n }, (_, j) => ({ name: `c-${j}`, image: "busybox", resources: { limits: { cpu: "8", memory: "17Gi" } } }));
  return { apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { restartPolicy: "Never", containers } };
}

/** A pod of `n` containers each limiting `k` extended resources that are no GPUs, without labels. */
function extendedPod(name: string, n: number, k: number): Obj {
  const limits = Object.fromEntries(Array.from({ length: k }, (_, i) => [`example.com/r-${i}`, "1"]));
  const containers = Array.from({ length: n }, (_, j) => ({ name: `c-${j}`, image: "busybox", resources: { limits } }));
  return { apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { restartPolicy: "Never", containers } };
}

/** `pod` of `n` containers, each with `env` variables and `k` extended resources that are no GPUs, without labels. */
function envPod(name: string, n: number, env: number, k: number): Obj {
  const pod = extendedPod(name, n, k);
  for (const c of pod.spec.containers) c.env = Array.from({ length: env }, (_, i) => ({ name: `V_${i}`, value: `value-${i}` }));
  return pod;
}

/** A native sidecar with 1 GPU, then an init container with `init` GPUs, then a container with 1. */
function sidecarPod(name: string, init: number): Obj {
  const c = (n: string, gpus: number, extra: Obj = {}): Obj => ({
    name: n,
    image: "busybox",
    ...extra,
    resources: { limits: { "nvidia.com/gpu": String(gpus) } },
  });
  return { ...edgePod(name, {}), spec: { initContainers: [c("s", 1, { restartPolicy: "Always" }), c("i", init)], containers: [c("c", 1)] } };
}

describe("the exported ValidatingAdmissionPolicy against /validate/pods through a real kube-apiserver", () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let policyFile: string;
  let webhookConfig: Obj;
  const byWebhook = new Map<string, Verdict>();
  const byPolicy = new Map<string, Verdict>();
  const corpus = CORPUS_SKIP ? [] : corpusCases();
  const all = [...corpus, ...generated, ...moded, ...modeEdges, ...large, ...edges];
  let seq = 0;

  async function createDry(namespace: string, pod: Obj): Promise<Verdict> {
    const r = await cp.api("POST", `/api/v1/namespaces/${namespace}/pods?dryRun=All`, pod);
    return verdictOf(r.status, r.body);
  }

  /** Every case, a few at a time. */
  async function runAll(into: Map<string, Verdict>): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < all.length) {
        const c = all[next++]!;
        into.set(c.id, await createDry(c.namespace, c.pod));
      }
    };
    await Promise.all(Array.from({ length: 6 }, worker));
  }

  /** Polls with a probe pod until `done(verdict)` (admission configuration changes apply asynchronously). */
  async function settle(what: string, probe: () => Obj, done: (v: Verdict, name: string) => boolean | Promise<boolean>): Promise<void> {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const pod = probe();
      if (await done(await createDry("team-a", pod), pod.metadata.name)) return;
      if (performance.now() > deadline) throw new Error(`${what} did not take effect\n${cp.logs()}`);
      await sleep(200);
    }
  }
  const overProbe = (): Obj => ({
    ...widePod(`probe-${++seq}`, 1),
    spec: { containers: [{ name: "c", image: "busybox", resources: { limits: { "nvidia.com/gpu": "9" } } }] },
  });
  const okProbe = (): Obj => widePod(`probe-${++seq}`, 1);

  before(async () => {
    cp = await startControlPlane();
    for (const ns of [...VAP_NAMESPACES, VAP_MODE_NAMESPACE]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    policyFile = join(cp.dir, "vap-policy.yaml");
    writeFileSync(policyFile, VAP_POLICY_YAML);
    wh = await webhookProcess({ kubeconfig: cp.kubeconfig, policy: policyFile });
    await wh.start();
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  it(`the webhook's verdicts over ${all.length} pods (only pods.validate registered)`, async () => {
    const r = await cli(["manifests", "webhooks", "--policy", policyFile]);
    assert.equal(r.code, 0, r.stderr);
    const validating = parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Obj)
      .find((c) => c.kind === "ValidatingWebhookConfiguration")!;
    validating.webhooks = validating.webhooks.filter((h: Obj) => h.name === "pods.validate.quartermaster.dev");
    webhookConfig = validating;
    for (const h of validating.webhooks)
      h.clientConfig = { url: `https://127.0.0.1:${wh.port}${h.clientConfig.service.path}`, caBundle: Buffer.from(wh.caPem).toString("base64") };
    const applied = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(validating));
    assert.equal(applied.code, 0, applied.stderr);
    await settle("the webhook", overProbe, (v) => WEBHOOK_PREFIX.test(v.raw));
    await runAll(byWebhook);
    const denied = [...byWebhook.values()].filter((v) => WEBHOOK_PREFIX.test(v.raw)).length;
    // Not vacuous: the generated pods are drawn around the limits, so many are denied and many admitted.
    assert.ok(denied >= 60, `only ${denied} pods denied by the webhook`);
    assert.ok([...byWebhook.values()].filter((v) => v.status === 201).length >= 40);
  });

  it("the exported policy is accepted by the apiserver, and replaces the webhook", async () => {
    const r = await cli(["policy", "export-vap", "--policy", policyFile]);
    assert.equal(r.code, 0, r.stderr);
    const applied = await cp.kubectl(["apply", "-f", "-"], r.stdout);
    // The CEL compiler's errors, without the echo of every expression.
    assert.equal(
      applied.code,
      0,
      applied.stderr
        .split("\n")
        .map((l) => (l.includes('Invalid value: "') ? l.slice(0, l.indexOf("Invalid value")) + l.slice(l.lastIndexOf('": ') + 3) : l))
        .join("\n"),
    );
    // As the overlay: the webhook keeps only what the policy leaves (pods past its bounds, resizes).
    for (const h of webhookConfig.webhooks)
      h.matchConditions = [...(h.matchConditions ?? []), { name: BEYOND_BOUNDS_CONDITION, expression: beyondBoundsExpression() }];
    const narrowed = await cp.kubectl(["apply", "-f", "-"], JSON.stringify(webhookConfig));
    assert.equal(narrowed.code, 0, narrowed.stderr);
    await settle("the policy", overProbe, (v) => VAP_PREFIX.test(v.raw));
    // The webhook is out of the path once an admitted probe no longer reaches it.
    await settle("removing the webhook", okProbe, async (v, name) => v.status === 201 && (await wh.awaitAdmissions(name, 1, 500)).length === 0);
    await runAll(byPolicy);
  });

  /** Same status; for a denial the same text (or, past the apiserver's message limit, the policy's fallback). */
  function compare(cases: Case[], t: { diagnostic(message: string): void }): void {
    const count = (f: (v: Verdict) => boolean): number => cases.filter((c) => f(byWebhook.get(c.id)!)).length;
    t.diagnostic(
      `${cases.length} pods: ${count((v) => v.status === 201)} admitted, ${count((v) => WEBHOOK_PREFIX.test(v.raw))} denied by the webhook (and the policy), ` +
        `${count((v) => v.status !== 201 && !WEBHOOK_PREFIX.test(v.raw))} refused by the apiserver before admission`,
    );
    const problems: string[] = [];
    for (const c of cases) {
      const w = byWebhook.get(c.id);
      const p = byPolicy.get(c.id);
      assert.ok(w && p, `${c.id} was not run`);
      const expected = Buffer.byteLength(w.message) > MAX_MESSAGE_BYTES && WEBHOOK_PREFIX.test(w.raw) ? FALLBACK : w.message;
      if (w.status !== p.status || expected !== p.message)
        problems.push(`${c.id} (${c.namespace}):\n  webhook ${w.status} ${w.raw}\n  policy  ${p.status} ${p.raw}`);
    }
    assert.deepEqual(problems, [], `${problems.length} of ${cases.length} differ:\n${problems.slice(0, 10).join("\n")}`);
  }

  it("corpus pods: the same verdicts and messages", { skip: CORPUS_SKIP }, (t) => {
    assert.ok(corpus.length >= 40, `only ${corpus.length} corpus pods`);
    compare(corpus, t);
  });

  it(`${generated.length} generated pods: the same verdicts and messages`, (t) => {
    compare(generated, t);
    // Not vacuous either way: drawn around the limits, many are denied and many admitted.
    const denied = generated.filter((c) => VAP_PREFIX.test(byPolicy.get(c.id)!.raw)).length;
    assert.ok(denied >= 60 && generated.length - denied >= 60, `${denied} of ${generated.length} generated pods denied by the policy`);
  });

  it(`${moded.length} generated pods where rules only warn or audit: the same verdicts and messages`, (t) => {
    compare(moded, t);
    // Not vacuous: fewer denials than for the same pods where every rule denies, and some all the same.
    const denied = (cases: Case[]) => cases.filter((c) => VAP_PREFIX.test(byPolicy.get(c.id)!.raw)).length;
    const strict = generated.slice(0, moded.length).filter((c) => c.namespace === "team-a");
    const same = moded.filter((m) => strict.some((c) => m.id.startsWith(`${c.id} `)));
    assert.ok(denied(same) < denied(strict), `${denied(same)} of ${same.length} denied in ${VAP_MODE_NAMESPACE}, ${denied(strict)} in team-a`);
  });

  it("enforcement modes at the edges: denied only where the rule's mode is deny, listing only what denies", (t) => {
    compare(modeEdges, t);
    const by = (i: number) => byPolicy.get(modeEdges[i]!.id)!;
    assert.equal(by(0).status, 201);
    // API defaulting copied the limits to the requests: memory twice, cpu 5 (over its cap, but warn) never.
    assert.match(
      by(1).message,
      /^2 policy violations: spec\.containers\[0\]\.resources\.requests\[memory\]: 1e30 is out of range.*; spec\.containers\[0\]\.resources\.limits\[memory\]: 1e30 is out of range/,
    );
    assert.doesNotMatch(by(1).message, /cpu/);
    assert.match(by(2).message, /^1 policy violation: .*asks for whole GPUs \(nvidia\.com\/gpu\) and MIG slices/);
    assert.equal(by(3).status, 201);
  });

  it("quantities at the edges: the same verdicts and messages", (t) => {
    compare(edges, t);
    assert.match(byWebhook.get(edges[0]!.id)!.message, /out of range|Invalid value/);
    // Not vacuous: the pods out of scope are admitted, the one in scope by its GPU denied.
    const at = (prefix: string): Verdict => byPolicy.get(edges.find((c) => c.id.startsWith(prefix))!.id)!;
    assert.equal(at("no job label, no GPU, over").status, 201);
    assert.equal(at("no job label, no GPU, 9").status, 201);
    assert.match(at("no job label, a GPU").raw, VAP_PREFIX);
  });

  it("large pods: within the apiserver's CEL cost limits, the same verdicts and messages", (t) => {
    compare(large, t);
    assert.match(byPolicy.get(large[0]!.id)!.message, /^1 policy violation: spec: the pod requests 250 GPUs, over the per-pod limit of 8$/);
    assert.equal(byPolicy.get(large[1]!.id)!.status, 201);
    assert.match(byPolicy.get(large[2]!.id)!.message, /^spec: too large to check: cost 10505 is over the bound of 10000/);
    assert.match(byPolicy.get(large[3]!.id)!.message, /^spec: too large to check: cost at least /);
    assert.equal(byPolicy.get(large[4]!.id)!.message, FALLBACK);
    // Past the policy's bounds the webhook judges (its prefix); within them the policy does.
    for (const i of [0, 2, 3]) assert.match(byPolicy.get(large[i]!.id)!.raw, WEBHOOK_PREFIX, large[i]!.id);
    assert.match(byPolicy.get(large[4]!.id)!.raw, VAP_PREFIX);
    for (const i of [6, 7]) assert.equal(byPolicy.get(large[i]!.id)!.status, 201, `${large[i]!.id}: ${byPolicy.get(large[i]!.id)!.raw}`);
  });
});

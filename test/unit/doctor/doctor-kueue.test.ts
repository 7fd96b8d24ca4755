/**
 * `doctor`'s Kueue checks (src/doctor/kueue.ts), each as a table of cases that fire and cases that do not:
 * a flavor's GPU quota above its nodes' GPUs (kueue-quota), Kueue's and Quartermaster's webhooks configured so
 * one undoes the other (kueue-webhooks), a flavor's nodeLabels outside a queued namespace's allow-lists
 * (kueue-flavors); and `diagnose` leaving Kueue out when it is not installed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { diagnose } from "../../../src/doctor/index.js";
import { checkKueue, checkKueueFlavors, checkKueueQuota, checkKueueWebhooks, isKueueConfiguration, type KueueState } from "../../../src/doctor/kueue.js";
import type { DoctorFinding, DoctorSnapshot, WebhookConfiguration } from "../../../src/doctor/types.js";
import { renderWebhookConfigurations } from "../../../src/manifests/webhooks.js";
import { checkPolicy, defaultPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";
import { node } from "../../fixtures/cluster.js";
import { clusterQueue, flavor } from "../../fixtures/kueue.js";

const PRODUCT = "nvidia.com/gpu.product";
const NS = "quartermaster";
const policy = defaultPolicy();
const brief = (findings: readonly DoctorFinding[]): string[] => findings.map((f) => `${f.severity} ${f.check} ${f.subject}`);
const notOk = (findings: readonly DoctorFinding[]): string[] => brief(findings.filter((f) => f.severity !== "ok"));

function gpuNode(name: string, labels: Record<string, string>, gpus: Record<string, string>): KubeObject {
  const n = node(name, gpus);
  return { ...n, metadata: { ...(n.metadata as object), labels } };
}

const localQueue = (namespace: string, name: string, cq: string): KubeObject => ({ metadata: { namespace, name }, spec: { clusterQueue: cq } });
const optedIn = (name: string) => ({ name, labels: { "quartermaster.dev/enabled": "true" } });

function state(o: Partial<KueueState>): KueueState {
  return { resourceFlavors: [], clusterQueues: [], localQueues: [], nodes: [], namespaces: [], webhookConfigurations: [], ...o };
}

const H100_NODES = [
  gpuNode("h100-1", { [PRODUCT]: "H100-SXM5-80GB" }, { "nvidia.com/gpu": "8" }),
  gpuNode("h100-2", { [PRODUCT]: "H100-SXM5-80GB" }, { "nvidia.com/gpu": "8" }),
];

describe("doctor kueue-quota: a flavor's GPU quota above its nodes' GPUs", () => {
  const cases: Array<{ name: string; state: KueueState; want: string[]; message?: RegExp }> = [
    {
      name: "quota equal to the nodes' GPUs → ok",
      state: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "16" } } })],
      }),
      want: [],
    },
    {
      name: "one ClusterQueue over → warning naming queue, flavor, resource, quota and physical count",
      state: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "24" } } })],
      }),
      want: ["warning kueue-quota ResourceFlavor h100"],
      message:
        /^ClusterQueue team-a \(24\) gives flavor h100 a nominal quota of 24 nvidia\.com\/gpu, but the 2 nodes its nodeLabels \(nvidia\.com\/gpu\.product=H100-SXM5-80GB\) select have 16 allocatable/,
    },
    {
      name: "two ClusterQueues each within, over in sum → warning naming both",
      state: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [
          clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "12" } } }),
          clusterQueue("team-b", { h100: { "nvidia.com/gpu": { nominalQuota: "12" } } }),
        ],
      }),
      want: ["warning kueue-quota ResourceFlavor h100"],
      message: /^ClusterQueues team-a \(12\), team-b \(12\) give flavor h100 a nominal quota of 24 nvidia\.com\/gpu/,
    },
    {
      name: "a MIG flavor over its nodes' MIG devices → warning",
      state: state({
        nodes: [gpuNode("mig-1", { [PRODUCT]: "A100-SXM4-40GB-MIG-1g.5gb" }, { "nvidia.com/mig-1g.5gb": "7" })],
        resourceFlavors: [flavor("mig", { [PRODUCT]: "A100-SXM4-40GB-MIG-1g.5gb" })],
        clusterQueues: [clusterQueue("team-a", { mig: { "nvidia.com/mig-1g.5gb": { nominalQuota: "14" } } })],
      }),
      want: ["warning kueue-quota ResourceFlavor mig"],
      message: /quota of 14 nvidia\.com\/mig-1g\.5gb, but the 1 node .* has 7 allocatable/,
    },
    {
      name: "a flavor selecting no nodes with GPU quota → warning",
      state: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("b200", { [PRODUCT]: "B200" })],
        clusterQueues: [clusterQueue("team-a", { b200: { "nvidia.com/gpu": { nominalQuota: "8" } } })],
      }),
      want: ["warning kueue-quota ResourceFlavor b200"],
      message: /the 0 nodes its nodeLabels .* select have 0 allocatable/,
    },
    {
      name: "a CPU flavor (cpu quota only, no GPU nodes) → ok: CPU is not the ledger's",
      state: state({
        nodes: [gpuNode("cpu-1", { pool: "cpu" }, {})],
        resourceFlavors: [flavor("cpu", { pool: "cpu" })],
        clusterQueues: [clusterQueue("team-a", { cpu: { cpu: { nominalQuota: "1000" } } })],
      }),
      want: [],
    },
    {
      name: "a flavor without nodeLabels counts every node's GPUs",
      state: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("any")],
        clusterQueues: [clusterQueue("team-a", { any: { "nvidia.com/gpu": { nominalQuota: "16" } } })],
      }),
      want: [],
    },
    {
      name: "a flavor named by a ClusterQueue that does not exist → warning saying so",
      state: state({ nodes: H100_NODES, clusterQueues: [clusterQueue("team-a", { ghost: { "nvidia.com/gpu": { nominalQuota: "8" } } })] }),
      want: ["warning kueue-quota ResourceFlavor ghost"],
      message: /no ResourceFlavor of that name exists/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = checkKueueQuota(c.state, policy);
      assert.deepEqual(notOk(found), c.want);
      if (c.want.length === 0) assert.deepEqual(brief(found), ["ok kueue-quota Kueue ResourceFlavors"]);
      if (c.message) assert.match(found[0]!.message, c.message);
    });
  }
});

/** Kueue's configurations as upstream names them (kueue config/components/webhook, namePrefix kueue-). */
function kueueConfigs(o: { kinds?: string[]; name?: string } = {}): WebhookConfiguration[] {
  const hook = (name: string, path: string, group: string, resource: string) => ({
    name,
    clientConfig: { service: { namespace: "kueue-system", name: "kueue-webhook-service", path } },
    rules: [{ apiGroups: [group], apiVersions: ["v1"], operations: ["CREATE"], resources: [resource] }],
  });
  return [
    {
      kind: "MutatingWebhookConfiguration",
      metadata: { name: o.name ?? "kueue-mutating-webhook-configuration" },
      webhooks: [
        hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload", "kueue.x-k8s.io", "workloads"),
        hook("mjob.kb.io", "/mutate-batch-v1-job", "batch", "jobs"),
        ...(o.kinds ?? ["pytorchjobs", "tfjobs"]).map((k) => hook(`m${k.slice(0, -1)}.kb.io`, `/mutate-kubeflow-org-v1-${k.slice(0, -1)}`, "kubeflow.org", k)),
      ],
    },
  ];
}

/** Quartermaster's configurations as rendered, changed by `edit`. */
function ours(edit: (c: WebhookConfiguration[]) => void = () => {}): WebhookConfiguration[] {
  const c = structuredClone(renderWebhookConfigurations(policy, { namespace: NS })) as unknown as WebhookConfiguration[];
  edit(c);
  return c;
}
const hookOf = (c: WebhookConfiguration[], name: string) => c.flatMap((x) => x.webhooks ?? []).find((h) => h.name === name)!;

describe("doctor kueue-webhooks: Kueue's and Quartermaster's webhooks", () => {
  it("Kueue's configuration is told from others by its own API's paths (service or URL)", () => {
    assert.equal(isKueueConfiguration(kueueConfigs()[0]!), true);
    assert.equal(
      isKueueConfiguration({ webhooks: [{ name: "x.kb.io", clientConfig: { url: "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-workload" } }] }),
      true,
    );
    assert.equal(isKueueConfiguration(ours()[0]!), false);
  });
  const cases: Array<{ name: string; kueue: WebhookConfiguration[]; qm: WebhookConfiguration[]; want: string[]; message?: RegExp }> = [
    { name: "as rendered, with Kueue's upstream configuration → ok", kueue: kueueConfigs(), qm: ours(), want: [] },
    {
      name: "jobs.mutate missing → warning: queued jobs not outfitted",
      kueue: kueueConfigs(),
      qm: ours((c) => (c[0]!.webhooks = c[0]!.webhooks!.filter((h) => h.name !== "jobs.mutate.quartermaster.dev"))),
      want: ["warning kueue-webhooks jobs.mutate.quartermaster.dev"],
      message:
        /Kueue mutates kubeflow\.org\/pytorchjobs, kubeflow\.org\/tfjobs at CREATE \(kueue-mutating-webhook-configuration\) but Quartermaster's jobs\.mutate\.quartermaster\.dev is not registered/,
    },
    {
      name: "jobs.mutate not covering a kind Kueue mutates → warning naming it",
      kueue: kueueConfigs(),
      qm: ours((c) => {
        for (const r of hookOf(c, "jobs.mutate.quartermaster.dev").rules!) r.resources = r.resources!.filter((x) => x !== "tfjobs");
      }),
      want: ["warning kueue-webhooks jobs.mutate.quartermaster.dev"],
      message: /Kueue mutates kubeflow\.org\/tfjobs at CREATE but quartermaster's jobs\.mutate\.quartermaster\.dev does not match their CREATE/,
    },
    {
      name: "reinvocationPolicy Never and Quartermaster's configuration called first (sorts before Kueue's) → warning",
      kueue: kueueConfigs(),
      qm: ours((c) => {
        c[0]!.metadata.name = "aa-quartermaster";
        hookOf(c, "jobs.mutate.quartermaster.dev").reinvocationPolicy = "Never";
      }),
      want: ["warning kueue-webhooks jobs.mutate.quartermaster.dev"],
      message:
        /aa-quartermaster is called before Kueue's kueue-mutating-webhook-configuration .* a job that gets its queue name from Kueue's LocalQueue defaulting is never outfitted/,
    },
    {
      name: "reinvocationPolicy unset but called after Kueue's → info (works by name order alone)",
      kueue: kueueConfigs(),
      qm: ours((c) => delete hookOf(c, "jobs.mutate.quartermaster.dev").reinvocationPolicy),
      want: ["info kueue-webhooks jobs.mutate.quartermaster.dev"],
      message: /sorts after kueue-mutating-webhook-configuration: renaming either configuration breaks it/,
    },
    {
      name: "jobs.validate without UPDATE → warning: Kueue's admission UPDATE never checked",
      kueue: kueueConfigs(),
      qm: ours((c) => {
        const h = hookOf(c, "jobs.validate.quartermaster.dev");
        h.rules = h.rules!.map((r) => ({ ...r, operations: ["CREATE"] }));
      }),
      want: ["warning kueue-webhooks jobs.validate.quartermaster.dev"],
      message: /does not match UPDATE of kubeflow\.org\/pytorchjobs, kubeflow\.org\/tfjobs/,
    },
    {
      name: "Kueue's webhooks mutate none of the policy's kinds (batch Jobs only) → info, nothing else",
      kueue: kueueConfigs({ kinds: [] }),
      qm: ours((c) => (c[0]!.webhooks = [])),
      want: ["info kueue-webhooks Kueue webhooks"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = checkKueueWebhooks(c.kueue, c.qm, policy);
      assert.deepEqual(notOk(found), c.want);
      if (c.want.length === 0) assert.deepEqual(brief(found), ["ok kueue-webhooks Kueue webhooks"]);
      if (c.message) assert.match(found.find((f) => f.severity !== "ok")!.message, c.message);
    });
  }
});

const ALLOW: Policy = checkPolicy(
  {
    limits: { allowedAccelerators: ["A100-SXM4-80GB"] },
    namespaces: [
      { pattern: "research-*", limits: { allowedAccelerators: ["A100-SXM4-80GB", "H100-SXM5-80GB"] } },
      { pattern: "mig-*", limits: { allowedPartitions: ["1g.5gb"] } },
    ],
  },
  "test",
);

describe("doctor kueue-flavors: a flavor's nodeLabels against the allow-lists of the namespaces queued into it", () => {
  const FLAVORS = [
    flavor("a100", { [PRODUCT]: "A100-SXM4-80GB" }),
    flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" }),
    flavor("mig-3g", { [PRODUCT]: "A100-SXM4-40GB-MIG-3g.20gb" }),
    flavor("any"),
  ];
  const QUEUES = [
    clusterQueue("a100-only", { a100: { "nvidia.com/gpu": { nominalQuota: "8" } } }),
    clusterQueue("gpus", { a100: { "nvidia.com/gpu": { nominalQuota: "8" } }, h100: { "nvidia.com/gpu": { nominalQuota: "8" } } }),
    clusterQueue("mig", { "mig-3g": { "nvidia.com/mig-3g.20gb": { nominalQuota: "8" } } }),
    clusterQueue("anywhere", { any: { "nvidia.com/gpu": { nominalQuota: "8" } } }),
  ];
  const cases: Array<{
    name: string;
    localQueues: KubeObject[];
    namespaces?: Array<{ name: string; labels?: Record<string, string> }>;
    p?: Policy;
    want: string[];
    message?: RegExp;
  }> = [
    { name: "a namespace queued only into allowed flavors → ok", localQueues: [localQueue("team-a", "q", "a100-only")], want: [] },
    {
      name: "a namespace queued into a ClusterQueue with an H100 flavor it may not use → warning",
      localQueues: [localQueue("team-a", "q", "gpus")],
      want: ["warning kueue-flavors ResourceFlavor h100"],
      message:
        /^LocalQueue team-a\/q feeds ClusterQueue gpus, which admits into flavor h100 \(nodeLabels nvidia\.com\/gpu\.product=H100-SXM5-80GB\): accelerator H100-SXM5-80GB is not allowed in namespace team-a; allowed: A100-SXM4-80GB\. Jobs Kueue admits there are refused/,
    },
    { name: "the same ClusterQueue from a namespace whose override allows H100 → ok", localQueues: [localQueue("research-x", "q", "gpus")], want: [] },
    {
      name: "a MIG flavor whose profile is outside allowedPartitions → warning",
      localQueues: [localQueue("mig-team", "q", "mig")],
      want: ["warning kueue-flavors ResourceFlavor mig-3g"],
      message: /GPU partition 3g\.20gb is not allowed in namespace mig-team/,
    },
    { name: "a flavor without nodeLabels selects no accelerator → ok", localQueues: [localQueue("team-a", "q", "anywhere")], want: [] },
    {
      name: "a namespace that has not opted in: Quartermaster's webhooks never see its jobs → ok",
      localQueues: [localQueue("team-a", "q", "gpus")],
      namespaces: [{ name: "team-a" }],
      want: [],
    },
    { name: "a policy without allow-lists → ok", localQueues: [localQueue("team-a", "q", "gpus")], p: policy, want: [] },
    {
      name: "two LocalQueues of one namespace into the flavor → one warning naming both",
      localQueues: [localQueue("team-a", "q1", "gpus"), localQueue("team-a", "q2", "gpus")],
      want: ["warning kueue-flavors ResourceFlavor h100"],
      message: /^LocalQueue team-a\/q1, team-a\/q2 feeds ClusterQueue gpus/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const namespaces = c.namespaces ?? [...new Set(c.localQueues.map((q) => String((q.metadata as { namespace: string }).namespace)))].map(optedIn);
      const found = checkKueueFlavors(state({ resourceFlavors: FLAVORS, clusterQueues: QUEUES, localQueues: c.localQueues, namespaces }), c.p ?? ALLOW, NS);
      assert.deepEqual(notOk(found), c.want);
      if (c.message) assert.match(found[0]!.message, c.message);
    });
  }
});

describe("doctor: Kueue in the report", () => {
  it("not installed (or not read): no Kueue finding; unreadable: one warning", () => {
    assert.deepEqual(checkKueue("absent", [], policy, NS), []);
    assert.deepEqual(checkKueue(undefined, [], policy, NS), []);
    assert.deepEqual(brief(checkKueue({ error: "HTTP 403: forbidden" }, [], policy, NS)), ["warning kueue-quota Kueue"]);
  });
  it("diagnose carries the over-quota warning into the exit code", () => {
    const snapshot: DoctorSnapshot = {
      now: new Date("2026-11-29T12:00:00Z"),
      namespace: NS,
      webhookConfigurations: { error: "not read" },
      services: {},
      certificates: {},
      protectedNamespaces: {},
      reconciler: { error: "not read" },
      ledger: "absent",
      access: [],
      kueue: state({
        nodes: H100_NODES,
        resourceFlavors: [flavor("h100", { [PRODUCT]: "H100-SXM5-80GB" })],
        clusterQueues: [clusterQueue("team-a", { h100: { "nvidia.com/gpu": { nominalQuota: "32" } } })],
      }),
    };
    const r = diagnose(snapshot, policy);
    assert.ok(brief(r.findings).includes("warning kueue-quota ResourceFlavor h100"), brief(r.findings).join("\n"));
    assert.ok(r.exitCode >= 1);
  });
});

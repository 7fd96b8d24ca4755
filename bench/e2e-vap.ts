/**
 * bench/e2e-vap: pod creates through a real kube-apiserver with the pod limits judged by the `/validate/pods`
 * webhook versus by the exported ValidatingAdmissionPolicy (`quartermaster policy export-vap`), against a
 * baseline with neither, in the same run: client latency (p50/p99) and CPU per pod create of kube-apiserver,
 * etcd and the webhook process.
 *
 *   npm run bench:e2e:vap [-- --pods 1000 --clients 10 --rounds 2 --warmup 100 --no-keep-alive --json FILE]
 *
 * Needs QM_K8S_BIN_DIR (test/e2e/controlplane/build.sh). A separate script rather than a scenario of
 * bench/e2e.ts: that one registers every webhook (mutations too) with the built-in policy; this one isolates pod
 * validation, under a policy with per-container and per-pod caps so every rule the export carries runs (the
 * pods are at the caps, not over: every create must succeed). Scenarios run interleaved, `--rounds` times, the
 * order rotated each round, so drift of the shared machine falls on all three alike. Target: the exported policy
 * saves at least a third of the apiserver CPU per pod the webhook adds (webhook − baseline versus policy −
 * baseline).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Agent } from "node:https";
import { parseArgs } from "node:util";
import { startControlPlane, type ControlPlane } from "../test/e2e/harness/controlplane.js";
import { cli, createNamespace, webhookProcess, type WebhookProcess } from "../test/e2e/harness/webhook.js";
import { childPid, cpuSeconds, createPod as createApiPod } from "./lib/apiserver.js";
import { summarize, table } from "./lib/stats.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "1000" },
    clients: { type: "string", default: "10" },
    rounds: { type: "string", default: "2" },
    warmup: { type: "string", default: "100" },
    "no-keep-alive": { type: "boolean", default: false },
    json: { type: "string" },
  },
});
const PODS = Number(values.pods);
const CLIENTS = Number(values.clients);
const ROUNDS = Number(values.rounds);
const WARMUP = Number(values.warmup);
const NS = "bench";
// Caps the bench pod meets exactly (so the webhook also computes its near-limit warnings).
const POLICY = 'limits:\n  container: {cpu: "64", memory: 512Gi, gpus: {nvidia.com/gpu: 8, "nvidia.com/mig-*": 7}}\n  pod: {gpus: 8}\n';

type Obj = Record<string, any>;
type Scenario = "baseline" | "webhook" | "policy";

/** A training pod as the training operator creates one: job labels, 8 GPUs, at the policy's caps. */
function trainingPod(i: number, gpus = "8"): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: `llm-pretrain-worker-${i % 7}-`,
      labels: {
        "training.kubeflow.org/job-name": "llm-pretrain",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": String(i % 7),
      },
    },
    spec: {
      restartPolicy: "OnFailure",
      containers: [
        {
          name: "pytorch",
          image: "registry.example.com/ml/llm-train:2026.11.3-cuda12.4",
          command: ["torchrun"],
          args: ["--nnodes=8", "--nproc-per-node=8", "/workspace/train.py"],
          env: [{ name: "NCCL_DEBUG", value: "INFO" }],
          resources: { requests: { cpu: "48", memory: "480Gi" }, limits: { cpu: "64", memory: "512Gi", "nvidia.com/gpu": gpus } },
        },
      ],
    },
  };
}

interface Outcome {
  status: number;
  ms: number;
  message: string;
}

async function createPod(cp: ControlPlane, body: string, agent: Agent | false, dryRun = false): Promise<Outcome> {
  const r = await createApiPod(cp, NS, body, agent, dryRun);
  const message = r.status === 0 ? (r.error ?? "") : r.status !== 201 ? ((JSON.parse(r.text) as Obj).message ?? r.text.slice(0, 200)) : "";
  return { status: r.status, ms: r.ms, message };
}

async function run(cp: ControlPlane, total: number): Promise<Outcome[]> {
  const agent = values["no-keep-alive"] ? false : new Agent({ keepAlive: true, maxSockets: CLIENTS });
  const out: Outcome[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < total) out.push(await createPod(cp, JSON.stringify(trainingPod(next++)), agent));
    }),
  );
  if (agent) agent.destroy();
  return out;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const cp = await startControlPlane();
let wh: WebhookProcess | undefined;
try {
  await createNamespace(cp, NS, { "quartermaster.dev/enabled": "true" });
  const policyFile = join(cp.dir, "bench-policy.yaml");
  writeFileSync(policyFile, POLICY);
  wh = await webhookProcess({ kubeconfig: cp.kubeconfig, policy: policyFile, logLevel: "warn" });
  await wh.start();

  const rendered = await cli(["manifests", "webhooks", "--policy", policyFile]);
  if (rendered.code !== 0) throw new Error(rendered.stderr);
  const { parseAllDocuments } = await import("yaml");
  const validating = parseAllDocuments(rendered.stdout)
    .map((d) => d.toJS() as Obj)
    .find((c) => c.kind === "ValidatingWebhookConfiguration")!;
  validating.webhooks = validating.webhooks.filter((h: Obj) => h.name === "pods.validate.quartermaster.dev");
  for (const h of validating.webhooks)
    h.clientConfig = { url: `https://127.0.0.1:${wh.port}${h.clientConfig.service.path}`, caBundle: Buffer.from(wh.caPem).toString("base64") };
  const exported = await cli(["policy", "export-vap", "--policy", policyFile]);
  if (exported.code !== 0) throw new Error(exported.stderr);

  const kubectl = async (args: string[], stdin?: string): Promise<void> => {
    const r = await cp.kubectl(args, stdin);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  };
  /** Which validator answers an over-limit probe (none, the webhook or the policy). */
  const answering = async (): Promise<Scenario> => {
    const r = await createPod(cp, JSON.stringify(trainingPod(0, "9")), false, true);
    if (r.status === 201) return "baseline";
    return r.message.includes("ValidatingAdmissionPolicy") ? "policy" : "webhook";
  };
  const register = async (s: Scenario): Promise<void> => {
    await kubectl(["delete", "validatingwebhookconfiguration", "quartermaster", "--ignore-not-found"]);
    await kubectl(["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "quartermaster-pod-limits", "--ignore-not-found"]);
    if (s === "webhook") await kubectl(["apply", "-f", "-"], JSON.stringify(validating));
    if (s === "policy") await kubectl(["apply", "-f", "-"], exported.stdout);
    let streak = 0;
    await until(`${s} in effect`, async () => ((streak = (await answering()) === s ? streak + 1 : 0), streak >= 3));
  };

  const pids = { apiserver: childPid("kube-apiserver"), etcd: childPid("etcd"), webhook: wh.pid()! };
  const acc = new Map<Scenario, { ms: number[]; cpu: Record<string, number>; failures: number; pods: number }>();
  for (let round = 0; round < ROUNDS; round++) {
    // The order rotated each round, so what one scenario leaves behind (its pods' deletion) falls on each alike.
    const order = (["baseline", "webhook", "policy"] as const).map((_, i, all) => all[(i + round) % all.length]!);
    for (const s of order) {
      await register(s);
      if (WARMUP > 0) await run(cp, WARMUP);
      const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
      const outcomes = await run(cp, PODS);
      const after = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
      const a = acc.get(s) ?? { ms: [], cpu: { apiserver: 0, etcd: 0, webhook: 0 }, failures: 0, pods: 0 };
      a.ms.push(...outcomes.map((o) => o.ms));
      for (const k of Object.keys(pids)) a.cpu[k]! += after[k]! - before[k]!;
      a.failures += outcomes.filter((o) => o.status !== 201).length;
      a.pods += PODS;
      acc.set(s, a);
      const failed = outcomes.find((o) => o.status !== 201);
      console.error(`round ${round + 1} ${s}: ${outcomes.length} creates${failed ? `, failures such as ${failed.status} ${failed.message}` : ""}`);
      const del = await cp.api("DELETE", `/api/v1/namespaces/${NS}/pods`);
      if (del.status !== 200) throw new Error(`deleting pods: ${del.status}`);
      await until("the pods to be gone", async () => (await cp.api("GET", `/api/v1/namespaces/${NS}/pods?limit=1`)).body.items.length === 0);
    }
  }

  const rows = (["baseline", "webhook", "policy"] as const).map((s) => {
    const a = acc.get(s)!;
    const l = summarize(a.ms);
    const perPod = (k: string): number => (a.cpu[k]! * 1000) / a.pods;
    return {
      scenario: s,
      pods: a.pods,
      failures: a.failures,
      p50: l.p50,
      p99: l.p99,
      avg: l.avg,
      apiserverMs: perPod("apiserver"),
      etcdMs: perPod("etcd"),
      webhookMs: perPod("webhook"),
    };
  });
  const [base, hook, vap] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
  const cpuModel = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
  console.log(
    `\nbench/e2e-vap: pod creates through kube-apiserver v1.33.13 + etcd on loopback, node ${process.version}, ${(await import("node:os")).availableParallelism()} CPUs (${cpuModel}), ` +
      `${CLIENTS} clients, ${values["no-keep-alive"] ? "a new TLS connection per create" : "connections kept alive"}, ${ROUNDS} interleaved rounds of ${PODS} pods per scenario (${WARMUP} warm-up pods each, not counted)\n`,
  );
  console.log(
    table(
      ["validated by", "pods", "fail", "p50 ms", "p99 ms", "avg ms", "apiserver CPU ms/pod", "etcd CPU ms/pod", "webhook CPU ms/pod"],
      rows.map((r) => [
        r.scenario === "baseline" ? "nothing (baseline)" : r.scenario === "webhook" ? "/validate/pods webhook" : "exported policy (VAP)",
        r.pods,
        r.failures,
        r.p50,
        r.p99,
        r.avg,
        r.apiserverMs,
        r.etcdMs,
        r.webhookMs,
      ]),
    ),
  );
  const addedHook = hook.apiserverMs - base.apiserverMs;
  const addedVap = vap.apiserverMs - base.apiserverMs;
  const saving = addedHook > 0 ? (addedHook - addedVap) / addedHook : NaN;
  console.log(
    `\nadded apiserver CPU per pod over the baseline: webhook ${addedHook.toFixed(3)} ms, exported policy ${addedVap.toFixed(3)} ms; ` +
      `the policy saves ${(saving * 100).toFixed(0)} % of the webhook's (target >= 33 %: ${saving >= 1 / 3 ? "met" : "NOT met"})`,
  );
  console.log(
    `added CPU per pod with the webhook process counted: webhook ${(addedHook + hook.webhookMs).toFixed(3)} ms, policy ${(addedVap + vap.webhookMs).toFixed(3)} ms; ` +
      `latency p50/p99 over the baseline: webhook +${(hook.p50 - base.p50).toFixed(2)}/+${(hook.p99 - base.p99).toFixed(2)} ms, policy +${(vap.p50 - base.p50).toFixed(2)}/+${(vap.p99 - base.p99).toFixed(2)} ms`,
  );
  const result = {
    bench: "e2e-vap",
    pods: PODS,
    clients: CLIENTS,
    rounds: ROUNDS,
    rows,
    addedApiserverCpuMs: { webhook: addedHook, policy: addedVap },
    saving,
  };
  if (values.json) writeFileSync(values.json, JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result));
} finally {
  await wh?.stop();
  await cp.stop();
}

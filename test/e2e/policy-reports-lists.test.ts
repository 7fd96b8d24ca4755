/**
 * End to end (issue 50): one listing per pass. With `reconciler.policyReports` the PolicyReports are planned
 * over the pass's own snapshot (its namespaces, jobs and pods, src/run/pass.ts), so a pass with them makes the
 * same LISTs as one without: counted by the apiserver itself (`apiserver_request_total`, as
 * test/e2e/watch-hygiene.test.ts counts them), resource by resource; the only read more is the PolicyReports'
 * own (which reports exist). The reports are still written from that snapshot: the violating pod and job.
 * Before issue 50 the audit listed the namespaces, each opted-in namespace's pods and every job kind again.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startControlPlane, type ControlPlane } from "./harness/controlplane.js";
import { ROOT, applyOwnManifests, cli, createNamespace, installKubeflowCrds } from "./harness/webhook.js";

const policy = (reports: boolean): string =>
  ["limits:", "  container: {gpus: {nvidia.com/gpu: 4}}", "  job: {replicas: {Worker: 4}}", "reconciler:", `  policyReports: ${reports}`, ""].join("\n");

const gpuPod = (name: string, gpus: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "c", image: "busybox", resources: { limits: { "nvidia.com/gpu": String(gpus) } } }] },
});
const pytorchJob = (name: string, workers: number) => {
  const template = { spec: { containers: [{ name: "pytorch", image: "pytorch/pytorch" }] } };
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name },
    spec: { runPolicy: { ttlSecondsAfterFinished: 600 }, pytorchReplicaSpecs: { Master: { replicas: 1, template }, Worker: { replicas: workers, template } } },
  };
};

describe("PolicyReports over the pass's own snapshot (a real kube-apiserver)", () => {
  let cp: ControlPlane;
  let kubeconfig: string;
  const policies = { with: "", without: "" };

  /** The apiserver's own count of LISTs, by resource (`apiserver_request_total`, every client). */
  const lists = async (): Promise<Map<string, number>> => {
    const r = await cp.api("GET", "/metrics");
    assert.equal(r.status, 200);
    const out = new Map<string, number>();
    for (const line of String(r.body).split("\n")) {
      if (!line.startsWith("apiserver_request_total{") || !line.includes('verb="LIST"')) continue;
      const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? "";
      out.set(resource, (out.get(resource) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
    }
    return out;
  };
  /** One `reconcile --once` pass under `policyFile`, and the LISTs it made, by resource. */
  const passLists = async (policyFile: string): Promise<Record<string, number>> => {
    const before = await lists();
    const r = await cli(["reconcile", "--once", "--namespace", "quartermaster", "--policy", policyFile, "--kubeconfig", kubeconfig]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const after = await lists();
    const delta: Record<string, number> = {};
    for (const [resource, n] of after) if (n - (before.get(resource) ?? 0) > 0) delta[resource] = n - (before.get(resource) ?? 0);
    return delta;
  };

  before(async () => {
    cp = await startControlPlane();
    await installKubeflowCrds(cp);
    for (const args of [
      ["apply", "-f", join(ROOT, "test/e2e/crds/wgpolicyk8s.io_policyreports.yaml")],
      ["wait", "--for=condition=Established", "crd/policyreports.wgpolicyk8s.io", "--timeout=60s"],
    ]) {
      const r = await cp.kubectl(args);
      assert.equal(r.code, 0, r.stderr);
    }
    await cp.until("PolicyReports to be served", async () => (await cp.api("GET", "/apis/wgpolicyk8s.io/v1alpha2/policyreports?limit=1")).status === 200);
    for (const ns of ["team-a", "team-b"]) await createNamespace(cp, ns, { "quartermaster.dev/enabled": "true" });
    await createNamespace(cp, "elsewhere");
    await applyOwnManifests(cp);
    kubeconfig = (await cp.serviceAccount("quartermaster", "quartermaster-reconciler")).kubeconfig;
    for (const [ns, obj] of [
      ["team-a", gpuPod("big", 8)],
      ["team-a", gpuPod("small", 2)],
      ["team-b", gpuPod("fine", 1)],
      ["team-a", pytorchJob("wide", 6)],
      ["elsewhere", gpuPod("ignored", 8)],
    ] as const) {
      const r = await cp.kubectl(["create", "-n", ns, "-f", "-"], JSON.stringify(obj));
      assert.equal(r.code, 0, r.stderr);
    }
    for (const reports of [true, false]) {
      const file = join(cp.dir, `qm-policy-${reports ? "with" : "without"}-reports.yaml`);
      writeFileSync(file, policy(reports));
      policies[reports ? "with" : "without"] = file;
    }
  });

  after(async () => {
    await cp?.stop();
  });

  it("a pass with PolicyReports LISTs namespaces, pods and every job kind as often as one without; the report is written", async (t) => {
    await passLists(policies.without); // the first pass writes the ledger: from here on the passes read the same
    const without = await passLists(policies.without);
    const withReports = await passLists(policies.with);
    const again = await passLists(policies.without);
    assert.deepEqual(again, without, "passes without PolicyReports list alike");
    const seen = `LISTs by resource with PolicyReports ${JSON.stringify(withReports)}, without ${JSON.stringify(without)}`;
    t.diagnostic(seen);
    assert.equal(without.policyreports, undefined, seen);
    // Which reports exist (a LIST by name, `fieldSelector=metadata.name=quartermaster`) is the pass's one read
    // more; the apiserver may count it under another verb, so it is left out of the comparison.
    assert.ok((withReports.policyreports ?? 0) <= 1, seen);
    const { policyreports: _reports, ...rest } = withReports;
    assert.deepEqual(rest, without, seen);
    for (const resource of ["namespaces", "pods", "pytorchjobs"]) assert.ok((without[resource] ?? 0) >= 1, `${resource} listed: ${JSON.stringify(without)}`);

    const r = await cp.api("GET", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-a/policyreports/quartermaster");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const results = (r.body as { results: Array<{ result: string; rule: string; resources: Array<{ kind: string; name: string }> }> }).results;
    assert.deepEqual(
      results
        .filter((x) => x.result !== "pass")
        .map((x) => `${x.resources[0]!.kind}/${x.resources[0]!.name} ${x.rule} ${x.result}`)
        .sort(),
      ["Pod/big container-limits fail", "PyTorchJob/wide job-replicas fail"],
    );
    const b = await cp.api("GET", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-b/policyreports/quartermaster");
    assert.equal(b.status, 200, "a report for every opted-in namespace with objects, violating or not");
    assert.equal((await cp.api("GET", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/elsewhere/policyreports/quartermaster")).status, 404);
  });
});

/**
 * Differential conformance of the per-replica Services (issue 17 item 3) with the real Kubeflow training
 * operator v1.9.4 (QM_OPERATOR_BIN) on the e2e control plane: for jobs of the five frameworks it serves (every
 * layout of `operator-jobs.ts`) the operator creates its pods and Services. The reconciler's snapshot of the
 * cluster (`src/run/pass.ts`, as a pass reads it) then goes through the Service planner
 * (`planReplicaServices`) for each job as though the operator did not serve it (its status left out, no
 * Service there, and its pods as though the reconciler had adopted them: their managedFields say the reconciler
 * set the job's controller reference), and each planned Service, defaulted by the apiserver (a dry-run create), must equal the
 * operator's: the same names, and labels, annotations, ownerReferences and the whole spec (clusterIP None,
 * selector, ports in name order, the apiserver's defaults) the same. A planned Service the apiserver refuses
 * counts as not created, as the operator's refused create does. Failures print both sides. The same job and pods
 * as listed (the operator set their references) plan no Service, status or not: the window before the
 * operator's first status write, replayed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { KubeObject } from "../../src/core/kube.js";
import { connectCluster } from "../../src/kube/cluster.js";
import { snapshot } from "../../src/run/pass.js";
import { defaultPolicy } from "../../src/policy/load.js";
import type { Snapshot } from "../../src/reconcile/plan.js";
import { RECONCILER_FIELD_MANAGER } from "../../src/core/keys.js";
import { planReplicaServices } from "../../src/reconcile/services.js";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { installOperatorCrds, operatorBin, startOperator, type Operator } from "../e2e/harness/operator.js";
import { capturingLogger } from "../fixtures/https.js";
import { awaitOperator, controllerOf, createJobs, jobCases, list, serviceView, type Obj } from "./operator-jobs.js";

const bin = operatorBin();
const SKIP = bin ? false : "QM_OPERATOR_BIN is not set (export QM_OPERATOR_BIN=$(bash test/e2e/operator/build.sh)/training-operator)";
const NS = "services";

const cases = jobCases(NS);

/** The pod as though the reconciler had adopted it: the record of who set the job's reference is the reconciler's. */
const adopted = (pod: KubeObject, jobUid: string): KubeObject => {
  const entry = {
    manager: RECONCILER_FIELD_MANAGER,
    operation: "Update",
    fieldsV1: { "f:metadata": { "f:ownerReferences": { [`k:${JSON.stringify({ uid: jobUid })}`]: {} } } },
  };
  return { ...pod, metadata: { ...(pod.metadata as Obj), managedFields: [entry] } };
};

describe("per-replica Services: the reconciler's plan against the Kubeflow training operator v1.9.4", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let operator: Operator;
  let snap: Snapshot;
  let services: Obj[];
  let started = 0;
  const compared = { services: 0, unserved: 0, refused: 0 };

  before(async () => {
    started = performance.now();
    cp = await startControlPlane();
    await installOperatorCrds(cp);
    operator = await startOperator(cp, bin!);
    const ns = await cp.api("POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: NS, labels: { "quartermaster.dev/enabled": "true" } },
    });
    assert.equal(ns.status, 201, JSON.stringify(ns.body));
    const uids = await createJobs(cp, NS, cases);
    await awaitOperator(cp, NS, cases, uids, () => operator.logs(60));
    const cluster = await connectCluster(cp.kubeconfig);
    snap = await snapshot(cluster, defaultPolicy(), "quartermaster", capturingLogger().log);
    services = await list(cp, `/api/v1/namespaces/${NS}/services`);
    console.log(
      `services: ${cases.length} jobs, ${snap.pods.length} operator pods, ${services.length} operator Services in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  after(async () => {
    await operator?.stop();
    await cp?.stop();
    console.log(
      `services: compared ${compared.services} Services; ${compared.unserved} pods of layouts upstream serves none for (${compared.refused} planned Services refused by the apiserver); suite took ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  for (const c of cases) {
    const name = c.job.metadata.name as string;
    it(`${c.f.kind} ${name} (${c.layout.name}${c.layout.served ? "" : ", no Service upstream"})`, async () => {
      const entry = snap.jobs.find((j) => j.kind.kind === c.f.kind && (j.job.metadata as Obj).name === name);
      assert.ok(entry, `${name} not in the snapshot`);
      const uid = (entry.job.metadata as Obj).uid as string;
      const pods = snap.pods.filter((p) => controllerOf(p as Obj) === uid);
      const theirs = new Map(services.filter((s) => controllerOf(s) === uid).map((s) => [s.metadata.name as string, s]));
      if (c.layout.served) assert.equal(pods.length, c.replicas, "the operator's pods");
      else compared.unserved += pods.length;
      // The plan for the same job and pods, were the operator not serving it and no Service there.
      const { status: _status, ...unserved } = entry.job as KubeObject & { status?: unknown };
      assert.deepEqual(planReplicaServices(unserved as KubeObject, entry.kind, pods, new Map()), [], "the operator's own pods, no status: no Service");
      const planned = planReplicaServices(
        unserved as KubeObject,
        entry.kind,
        pods.map((p) => adopted(p, uid)),
        new Map(),
      );
      const ours = new Map<string, Obj>();
      const refused: string[] = [];
      for (const p of planned) {
        const { name: _n, ...meta } = p.body.metadata as Obj;
        const dry = await cp.api("POST", `/api/v1/namespaces/${NS}/services?dryRun=All`, { ...p.body, metadata: { ...meta, generateName: "dry-" } });
        if (dry.status === 201) ours.set(p.name, dry.body);
        else if (dry.status === 422) refused.push(`${p.name}: ${dry.body.message}`);
        else assert.fail(`dry-run create of ${p.name}: ${dry.status} ${JSON.stringify(dry.body)}`);
      }
      compared.refused += refused.length;
      const diffs: string[] = [];
      const names = [...new Set([...theirs.keys(), ...ours.keys()])].sort();
      for (const n of names) {
        const [op, qm] = [theirs.get(n), ours.get(n)];
        const [want, got] = [op ? serviceView(op) : "(none)", qm ? serviceView(qm) : "(none)"];
        try {
          assert.deepEqual(got, want);
          compared.services++;
        } catch {
          diffs.push(`service ${n}\n  operator:      ${JSON.stringify(want)}\n  quartermaster: ${JSON.stringify(got)}`);
        }
      }
      if (c.layout.served) assert.equal(theirs.size, c.replicas, `the operator's Services: ${[...theirs.keys()].join(", ")}`);
      assert.equal(diffs.length, 0, `${diffs.join("\n")}${refused.length ? `\nrefused: ${refused.join("; ")}` : ""}`);
    });
  }

  it("covers the five frameworks, at least 60 Services, and pods upstream gives no Service", () => {
    assert.deepEqual([...new Set(cases.map((c) => c.f.kind))].sort(), ["JAXJob", "PaddleJob", "PyTorchJob", "TFJob", "XGBoostJob"]);
    assert.ok(compared.services >= 60, `only ${compared.services} Services compared`);
    assert.ok(compared.unserved > 0, "no pod of a layout upstream serves none for: the 'none' side is untested");
  });
});

/**
 * examples/trainer/tensorflow-runtime.yaml is a valid ClusterTrainingRuntime: checked with ajv against the
 * openAPIV3Schema of the upstream CRD (kubeflow/trainer v2.3.0 manifests/base/crds/
 * trainer.kubeflow.org_clustertrainingruntimes.yaml, copied with the default runtimes to test/fixtures/trainer-v2.3.0/
 * so this runs on any clone), and shaped as Quartermaster's TF_CONFIG mutation expects.
 * The same schema check runs over the upstream default runtimes, and rejects a wrong type or a missing required
 * field. (Unknown fields pass: CRD schemas are structural, and the apiserver prunes such fields rather than refusing.)
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Ajv } from "ajv";
import { parse, parseAllDocuments } from "yaml";
import { ROOT } from "../../fixtures/manifests.js";

/** The upstream files, at their upstream paths (see its README). */
const trainerDir = join(ROOT, "test/fixtures/trainer-v2.3.0");

const compiled = new Map<string, (doc: unknown) => string[]>();
function crdValidator(file: string): (doc: unknown) => string[] {
  const known = compiled.get(file);
  if (known) return known;
  const crd = parse(readFileSync(join(trainerDir, "manifests/base/crds", file), "utf8")) as {
    spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: object } }> };
  };
  const schema = crd.spec.versions.find((v) => v.name === "v1alpha1")!.schema.openAPIV3Schema;
  // x-kubernetes-* keywords and formats (int32, int-or-string) are the apiserver's, not JSON Schema's.
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  const validate = ajv.compile(schema);
  const check = (doc: unknown): string[] => (validate(doc) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ""}`));
  compiled.set(file, check);
  return check;
}

describe("examples/trainer/tensorflow-runtime.yaml", () => {
  const runtime = parse(readFileSync(join(ROOT, "examples/trainer/tensorflow-runtime.yaml"), "utf8")) as {
    kind: string;
    metadata: { labels: Record<string, string> };
    spec: { template: { metadata: { labels: Record<string, string> }; spec: { replicatedJobs: Array<Record<string, unknown>> } } };
  };

  it("is valid against the upstream ClusterTrainingRuntime CRD schema", () => {
    assert.equal(runtime.kind, "ClusterTrainingRuntime");
    assert.deepEqual(crdValidator("trainer.kubeflow.org_clustertrainingruntimes.yaml")(runtime), []);
  });

  it("the schema check rejects what the apiserver would (it is not vacuous)", () => {
    const validate = crdValidator("trainer.kubeflow.org_clustertrainingruntimes.yaml");
    const bad = structuredClone(runtime) as { spec: Record<string, unknown> };
    (bad.spec.mlPolicy as Record<string, unknown>).numNodes = "two";
    assert.notDeepEqual(validate(bad), []);
    const noContainers = structuredClone(runtime) as unknown as {
      spec: { template: { spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: Record<string, unknown> } } } }> } } };
    };
    delete noContainers.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec.containers;
    assert.notDeepEqual(validate(noContainers), []);
  });

  it("the upstream default runtimes pass the same check", () => {
    const validate = crdValidator("trainer.kubeflow.org_clustertrainingruntimes.yaml");
    const dir = join(trainerDir, "manifests/base/runtimes");
    const files = readdirSync(dir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    assert.ok(files.length >= 4);
    for (const f of files) {
      for (const doc of parseAllDocuments(readFileSync(join(dir, f), "utf8"))) {
        const obj = doc.toJS() as { kind?: string } | null;
        if (obj?.kind === "ClusterTrainingRuntime") assert.deepEqual(validate(obj), [], f);
      }
    }
  });

  it("is labelled tensorflow on the runtime, the JobSet template and every pod template; worker is the trainer step", () => {
    const FW = "trainer.kubeflow.org/framework";
    assert.equal(runtime.metadata.labels[FW], "tensorflow");
    assert.equal(runtime.spec.template.metadata.labels[FW], "tensorflow");
    const rjobs = runtime.spec.template.spec.replicatedJobs as Array<{
      name: string;
      template: {
        metadata?: { labels?: Record<string, string> };
        spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: Array<{ name: string }> } } };
      };
    }>;
    assert.deepEqual(
      rjobs.map((r) => r.name),
      ["chief", "worker", "ps"],
    );
    for (const r of rjobs) {
      assert.equal(r.template.spec.template.metadata.labels[FW], "tensorflow", r.name);
      assert.equal(r.template.spec.template.spec.containers[0]!.name, "node", r.name);
    }
    assert.deepEqual(
      rjobs.filter((r) => r.template.metadata?.labels?.["trainer.kubeflow.org/trainjob-ancestor-step"] === "trainer").map((r) => r.name),
      ["worker"],
    );
  });
});

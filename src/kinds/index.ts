/**
 * @module
 * The shapes a training-job kind can have, one adapter each (a shape is one file beside this one plus one line in
 * {@link KIND_SHAPES}), and the lookups every rule, mutation, render and reconciler decision makes through them.
 * A job kind (the policy's `jobKinds[]`: kind, group, version, plural, framework) has the shape whose adapter
 * serves its framework: Kubeflow v1's six frameworks are `replica-map` (`spec.<framework>ReplicaSpecs`, a map of
 * replica types), caffe2-operator's Caffe2Job is `pool` (one replica pool under `spec.replicaSpecs`), Kubeflow
 * Trainer v2's TrainJob (framework `trainer`) is `trainjob` (replicas from its runtime's JobSet template).
 *
 * Every lookup takes the registry as its last parameter, the built-in {@link KIND_SHAPES} by default; a policy
 * may carry another (`Policy.kindShapes`, set by code, never by a policy file: test/unit/kinds/kind-registry.test.ts
 * adds a test-only shape that way). The policy schema's `framework` enum is {@link frameworkNames} of the
 * built-in registry (`npm run generate` compiles it into the validator).
 */
import { POOL } from "./pool.js";
import { REPLICA_MAP } from "./replica-map.js";
import { TRAINJOB } from "./trainjob.js";
import type { JobShape, KindFramework, KindRef, KindShape, LabelScheme } from "./types.js";

export type { JobReplica, JobShape, KindFramework, KindRef, KindShape, LabelScheme, ReplicaSpec, RunPolicyField, RunPolicyView } from "./types.js";
export { replicaName, TRAINING_OPERATOR_MANAGER } from "./v1.js";
export { CAFFE2_GROUP_NAME, CAFFE2_LABELS, caffe2RuntimeId } from "./pool.js";

/** The registry: one line per shape. */
export const KIND_SHAPES: readonly KindShape[] = [REPLICA_MAP, POOL, TRAINJOB];

/** The built-in frameworks (`trainer`: Kubeflow Trainer v2's TrainJob, whose framework is its runtime's). */
export type Framework = "tensorflow" | "pytorch" | "mxnet" | "xgboost" | "paddle" | "jax" | "caffe2" | "trainer";

/** Every framework of `shapes`, in registry order: the policy schema's `jobKinds[].framework` enum. */
export function frameworkNames(shapes: readonly KindShape[] = KIND_SHAPES): string[] {
  return shapes.flatMap((s) => Object.keys(s.frameworks));
}

const BUILT_IN: ReadonlySet<string> = new Set(frameworkNames());

/** Whether `framework` is one of the built-in frameworks (those of {@link KIND_SHAPES}). */
export function isBuiltInFramework(framework: string): framework is Framework {
  return BUILT_IN.has(framework);
}

function entryOf(framework: string, shapes: readonly KindShape[]): { shape: KindShape; framework: KindFramework } {
  for (const s of shapes) if (Object.hasOwn(s.frameworks, framework)) return { shape: s, framework: s.frameworks[framework]! };
  throw new Error(`no job-kind shape serves framework ${JSON.stringify(framework)} (frameworks: ${frameworkNames(shapes).join(", ")})`);
}

/** The registry entry of `kind`'s shape. Throws for a framework no shape serves (the policy schema refuses those). */
export function kindShape(kind: KindRef, shapes: readonly KindShape[] = KIND_SHAPES): KindShape {
  return entryOf(kind.framework, shapes).shape;
}

/** The shape descriptor of `kind`. */
export function jobShape(kind: KindRef, shapes: readonly KindShape[] = KIND_SHAPES): JobShape {
  return kindShape(kind, shapes).shape;
}

/** The label scheme of `kind`'s pods. */
export function labelScheme(kind: KindRef, shapes: readonly KindShape[] = KIND_SHAPES): LabelScheme {
  return entryOf(kind.framework, shapes).framework.labelScheme;
}

/** The field of `kind`'s spec holding its replica specs (`tfReplicaSpecs`, `replicaSpecs`, ...). */
export function replicaSpecsField(kind: KindRef, shapes: readonly KindShape[] = KIND_SHAPES): string {
  return entryOf(kind.framework, shapes).framework.replicaSpecsField;
}

/** The training operator's controller name of `kind` (`training.kubeflow.org/operator-name`), where it has one. */
export function operatorName(kind: KindRef, shapes: readonly KindShape[] = KIND_SHAPES): string | undefined {
  return entryOf(kind.framework, shapes).framework.operatorName;
}

/** Who runs `kind`'s jobs: `jobKinds[].controller`, else its shape's default. */
export function controllerOf(
  kind: KindRef & { controller?: "operator" | "quartermaster" },
  shapes: readonly KindShape[] = KIND_SHAPES,
): "operator" | "quartermaster" {
  return kind.controller ?? kindShape(kind, shapes).defaultController;
}

/** The distinct label schemes of `kinds`, in registry order (Kubeflow's, caffe2-operator's, JobSet's, ...). */
export function schemesOf(kinds: readonly KindRef[], shapes: readonly KindShape[] = KIND_SHAPES): LabelScheme[] {
  const used = new Set(kinds.map((k) => k.framework));
  const found = new Map<string, LabelScheme>();
  for (const s of shapes)
    for (const [framework, f] of Object.entries(s.frameworks))
      if (used.has(framework) && !found.has(f.labelScheme.name)) found.set(f.labelScheme.name, f.labelScheme);
  return [...found.values()];
}

/** Every distinct label scheme of `shapes`, in registry order. */
export function labelSchemes(shapes: readonly KindShape[] = KIND_SHAPES): LabelScheme[] {
  const found = new Map<string, LabelScheme>();
  for (const s of shapes) for (const f of Object.values(s.frameworks)) if (!found.has(f.labelScheme.name)) found.set(f.labelScheme.name, f.labelScheme);
  return [...found.values()];
}

/** The distinct `key` labels of the claimed schemes of `shapes` (for indexing orphans by the job they name). */
export function keyLabels(shapes: readonly KindShape[] = KIND_SHAPES): string[] {
  return [
    ...new Set(
      labelSchemes(shapes)
        .filter((s) => s.claimed)
        .map((s) => s.key.label),
    ),
  ];
}

/** {@link keyLabels} of the built-in shapes. */
export const KEY_LABELS: readonly string[] = keyLabels();

/**
 * @module
 * accelerator-allowed: the accelerators and GPU partitions a pod asks for must be among
 * `limits.allowedAccelerators` / `allowedPartitions` for its namespace (when the policy lists them),
 * however it asks:
 * - the `quartermaster.dev/accelerator` and `quartermaster.dev/gpu-partition` annotations;
 * - `spec.nodeSelector` and required node affinity on `accelerator.nodeLabel` (`In` values are checked;
 *   `NotIn`, `Exists`, `Gt` and `Lt` could select any accelerator, so they are refused while a list is
 *   set; `DoesNotExist` selects nodes without one and passes). A GPU feature discovery product value
 *   `<product>[-MIG-<profile>][-SHARED]` is the accelerator `<product>` and, with `-MIG-`, the partition
 *   `<profile>`;
 * - for partitions also: MIG resources `nvidia.com/mig-<profile>` in any container's requests or limits,
 *   node selection on GFD's mixed-strategy labels `nvidia.com/mig-<profile>.*` (any operator but
 *   `DoesNotExist`/`NotIn`), and on `accelerator.partitionNodeLabel` when the policy sets one.
 * Preferred affinity does not bind the scheduler and is not checked. Each violation names its field.
 */
import type { V1NodeSelectorRequirement, V1ObjectMeta, V1PodSpec } from "@kubernetes/client-node";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION } from "../core/keys.js";
import { GFD } from "../mutate/accelerator.js";
import type { Findings, ValidationContext } from "./types.js";

const MIG_RESOURCE = "nvidia.com/mig-";
/** `nvidia.com/mig-<profile>.<attribute>`: the profile is everything up to the last dot-separated attribute GFD writes. */
const MIG_LABEL = /^nvidia\.com\/mig-(.+)\.(count|product|replicas|memory|multiprocessors|slices\.gi|slices\.ci|engines\.[a-z]+)$/;
const MIG_PRODUCT = /^(.+)-MIG-(.+)$/;

/** A GFD product value split into the accelerator and the MIG profile it names (if any). */
export function parseProduct(value: string): { accelerator: string; partition?: string } {
  const v = value.endsWith("-SHARED") ? value.slice(0, -"-SHARED".length) : value;
  const m = MIG_PRODUCT.exec(v);
  return m ? { accelerator: m[1]!, partition: m[2]! } : { accelerator: v };
}

export interface AcceleratorPaths {
  /** Where the pod's metadata is, e.g. `metadata` or `spec.pytorchReplicaSpecs.Worker.template.metadata`. */
  metadata: string;
  /** Where the pod spec is, e.g. `spec` or `...template.spec`. */
  spec: string;
}

/** `v` when it is an array, else none: the rule never throws on a malformed object. */
const arrayOf = <T>(v: T[] | undefined | null): T[] => (Array.isArray(v) ? v : []);

const ANY_VALUE_OPERATORS = new Set(["NotIn", "Exists", "Gt", "Lt"]);

/** accelerator-allowed for one pod (or pod template). */
export function validateAccelerators(
  metadata: V1ObjectMeta | undefined,
  spec: V1PodSpec | undefined,
  ctx: ValidationContext,
  paths: AcceleratorPaths = { metadata: "metadata", spec: "spec" },
): Findings {
  const out: Findings = { violations: [], warnings: [] };
  const { allowedAccelerators, allowedPartitions } = ctx.limits;
  if (!allowedAccelerators && !allowedPartitions) return out;
  const { nodeLabel, partitionNodeLabel } = ctx.policy.accelerator;
  const list = (allowed: string[]): string => allowed.join(", ") || "none";
  const seen = new Set<string>();
  const report = (field: string, message: string): void => {
    const id = `${field}\n${message}`;
    if (seen.has(id)) return;
    seen.add(id);
    out.violations.push({ rule: "accelerator-allowed", field, message });
  };
  const accelerator = (value: string, field: string): void => {
    if (allowedAccelerators && !allowedAccelerators.includes(value)) {
      report(field, `accelerator ${value} is not allowed in namespace ${ctx.namespace}; allowed: ${list(allowedAccelerators)}`);
    }
  };
  const partition = (value: string, field: string): void => {
    if (allowedPartitions && !allowedPartitions.includes(value)) {
      report(field, `GPU partition ${value} is not allowed in namespace ${ctx.namespace}; allowed: ${list(allowedPartitions)}`);
    }
  };
  /** A value of the accelerator label: the value itself or its product, and a MIG profile it carries. */
  const acceleratorValue = (value: string, field: string): void => {
    const parsed = parseProduct(value);
    if (!allowedAccelerators?.includes(value)) accelerator(parsed.accelerator, field);
    if (parsed.partition && nodeLabel === GFD.product) partition(parsed.partition, field);
  };
  const anyValue = (r: V1NodeSelectorRequirement, field: string, what: string, allowed: string[]): void => {
    report(field, `${r.key} ${r.operator} may select any ${what}; namespace ${ctx.namespace} allows only: ${list(allowed)} (use In with allowed values)`);
  };

  const annotations = metadata?.annotations ?? {};
  const askedAccelerator = typeof annotations[ANNOTATION_ACCELERATOR] === "string" ? annotations[ANNOTATION_ACCELERATOR].trim() : "";
  if (askedAccelerator) accelerator(askedAccelerator, `${paths.metadata}.annotations[${ANNOTATION_ACCELERATOR}]`);
  const askedPartition = typeof annotations[ANNOTATION_GPU_PARTITION] === "string" ? annotations[ANNOTATION_GPU_PARTITION].trim() : "";
  if (askedPartition) partition(askedPartition, `${paths.metadata}.annotations[${ANNOTATION_GPU_PARTITION}]`);
  if (!spec || typeof spec !== "object") return out;

  const selector = spec.nodeSelector && typeof spec.nodeSelector === "object" ? spec.nodeSelector : {};
  for (const [key, value] of Object.entries(selector)) {
    if (typeof value !== "string") continue;
    const field = `${paths.spec}.nodeSelector[${key}]`;
    if (key === nodeLabel) acceleratorValue(value, field);
    else if (nodeLabel !== GFD.product && key === GFD.product) {
      const p = parseProduct(value).partition;
      if (p) partition(p, field);
    }
    if (partitionNodeLabel && key === partitionNodeLabel) partition(value, field);
    const mig = MIG_LABEL.exec(key);
    if (mig) partition(mig[1]!, field);
  }

  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  arrayOf(terms).forEach((term, i) => {
    arrayOf(term?.matchExpressions).forEach((r, j) => {
      if (!r || typeof r.key !== "string") return;
      const field = `${paths.spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[${i}].matchExpressions[${j}]`;
      const values = Array.isArray(r.values) ? r.values.filter((v): v is string => typeof v === "string") : [];
      if (r.key === nodeLabel) {
        if (r.operator === "In") for (const v of values) acceleratorValue(v, field);
        else if (allowedAccelerators && ANY_VALUE_OPERATORS.has(r.operator)) anyValue(r, field, "accelerator", allowedAccelerators);
      } else if (r.key === GFD.product && r.operator === "In") {
        for (const v of values) {
          const p = parseProduct(v).partition;
          if (p) partition(p, field);
        }
      }
      if (partitionNodeLabel && r.key === partitionNodeLabel) {
        if (r.operator === "In") for (const v of values) partition(v, field);
        else if (allowedPartitions && ANY_VALUE_OPERATORS.has(r.operator)) anyValue(r, field, "GPU partition", allowedPartitions);
      }
      const mig = MIG_LABEL.exec(r.key);
      if (mig && r.operator !== "DoesNotExist" && r.operator !== "NotIn") partition(mig[1]!, field);
    });
  });

  for (const [listName, containers] of [["initContainers", spec.initContainers], ["containers", spec.containers]] as const) {
    arrayOf(containers).forEach((c, i) => {
      const names = new Set<string>();
      for (const side of ["limits", "requests"] as const) {
        for (const name of Object.keys(c?.resources?.[side] ?? {})) {
          if (!name.startsWith(MIG_RESOURCE) || names.has(name)) continue;
          names.add(name);
          partition(name.slice(MIG_RESOURCE.length), `${paths.spec}.${listName}[${i}].resources.${side}[${name}]`);
        }
      }
    });
  }
  return out;
}

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
import { GFD } from "../vendors/nvidia.js";
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
  const { allowedAccelerators, allowedPartitions } = ctx.limits;
  if (!allowedAccelerators && !allowedPartitions) return { violations: [], warnings: [] };
  const check = new AcceleratorCheck(ctx);
  check.annotations(metadata, paths.metadata);
  if (!spec || typeof spec !== "object") return check.out;
  check.nodeSelector(spec, paths.spec);
  check.requiredTerms(spec, paths.spec);
  check.migResources(spec, paths.spec);
  return check.out;
}

/** One pod's (or template's) accelerator-allowed findings, each field and message once. */
class AcceleratorCheck {
  readonly out: Findings = { violations: [], warnings: [] };
  private readonly seen = new Set<string>();
  private readonly allowedAccelerators: string[] | undefined;
  private readonly allowedPartitions: string[] | undefined;
  private readonly nodeLabel: string;
  private readonly partitionNodeLabel: string | undefined;

  constructor(private readonly ctx: ValidationContext) {
    this.allowedAccelerators = ctx.limits.allowedAccelerators;
    this.allowedPartitions = ctx.limits.allowedPartitions;
    this.nodeLabel = ctx.policy.accelerator.nodeLabel;
    this.partitionNodeLabel = ctx.policy.accelerator.partitionNodeLabel;
  }

  private report(field: string, message: string): void {
    const id = `${field}\n${message}`;
    if (this.seen.has(id)) return;
    this.seen.add(id);
    this.out.violations.push({ rule: "accelerator-allowed", field, message });
  }

  private accelerator(value: string, field: string): void {
    const allowed = this.allowedAccelerators;
    if (allowed && !allowed.includes(value))
      this.report(field, `accelerator ${value} is not allowed in namespace ${this.ctx.namespace}; allowed: ${list(allowed)}`);
  }

  private partition(value: string, field: string): void {
    const allowed = this.allowedPartitions;
    if (allowed && !allowed.includes(value))
      this.report(field, `GPU partition ${value} is not allowed in namespace ${this.ctx.namespace}; allowed: ${list(allowed)}`);
  }

  /** A value of the accelerator label: the value itself or its product, and a MIG profile it carries. */
  private acceleratorValue(value: string, field: string): void {
    const parsed = parseProduct(value);
    if (!this.allowedAccelerators?.includes(value)) this.accelerator(parsed.accelerator, field);
    if (parsed.partition && this.nodeLabel === GFD.product) this.partition(parsed.partition, field);
  }

  private anyValue(r: V1NodeSelectorRequirement, field: string, what: string, allowed: string[]): void {
    this.report(
      field,
      `${r.key} ${r.operator} may select any ${what}; namespace ${this.ctx.namespace} allows only: ${list(allowed)} (use In with allowed values)`,
    );
  }

  /** The accelerator and partition annotations. */
  annotations(metadata: V1ObjectMeta | undefined, path: string): void {
    const annotations = metadata?.annotations ?? {};
    const asked = (key: string): string => (typeof annotations[key] === "string" ? annotations[key].trim() : "");
    const accelerator = asked(ANNOTATION_ACCELERATOR);
    if (accelerator) this.accelerator(accelerator, `${path}.annotations[${ANNOTATION_ACCELERATOR}]`);
    const partition = asked(ANNOTATION_GPU_PARTITION);
    if (partition) this.partition(partition, `${path}.annotations[${ANNOTATION_GPU_PARTITION}]`);
  }

  /** `nodeSelector`: the accelerator label, GFD's product label, the partition label and MIG labels. */
  nodeSelector(spec: V1PodSpec, path: string): void {
    const selector = spec.nodeSelector && typeof spec.nodeSelector === "object" ? spec.nodeSelector : {};
    for (const [key, value] of Object.entries(selector)) {
      if (typeof value !== "string") continue;
      const field = `${path}.nodeSelector[${key}]`;
      if (key === this.nodeLabel) this.acceleratorValue(value, field);
      else if (this.nodeLabel !== GFD.product && key === GFD.product) this.productPartition(value, field);
      if (this.partitionNodeLabel && key === this.partitionNodeLabel) this.partition(value, field);
      const mig = MIG_LABEL.exec(key);
      if (mig) this.partition(mig[1]!, field);
    }
  }

  private productPartition(value: string, field: string): void {
    const p = parseProduct(value).partition;
    if (p) this.partition(p, field);
  }

  /** Required node affinity: each expression on those labels, `In` by its values, the others for selecting any. */
  requiredTerms(spec: V1PodSpec, path: string): void {
    const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
    arrayOf(terms).forEach((term, i) => {
      arrayOf(term?.matchExpressions).forEach((r, j) => {
        if (!r || typeof r.key !== "string") return;
        this.requirement(r, `${path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[${i}].matchExpressions[${j}]`);
      });
    });
  }

  private requirement(r: V1NodeSelectorRequirement, field: string): void {
    const values = Array.isArray(r.values) ? r.values.filter((v): v is string => typeof v === "string") : [];
    if (r.key === this.nodeLabel) {
      if (r.operator === "In") for (const v of values) this.acceleratorValue(v, field);
      else if (this.allowedAccelerators && ANY_VALUE_OPERATORS.has(r.operator)) this.anyValue(r, field, "accelerator", this.allowedAccelerators);
    } else if (r.key === GFD.product && r.operator === "In") {
      for (const v of values) this.productPartition(v, field);
    }
    if (this.partitionNodeLabel && r.key === this.partitionNodeLabel) {
      if (r.operator === "In") for (const v of values) this.partition(v, field);
      else if (this.allowedPartitions && ANY_VALUE_OPERATORS.has(r.operator)) this.anyValue(r, field, "GPU partition", this.allowedPartitions);
    }
    const mig = MIG_LABEL.exec(r.key);
    if (mig && r.operator !== "DoesNotExist" && r.operator !== "NotIn") this.partition(mig[1]!, field);
  }

  /** MIG resources a container asks for, each name once per container. */
  migResources(spec: V1PodSpec, path: string): void {
    for (const [listName, containers] of [
      ["initContainers", spec.initContainers],
      ["containers", spec.containers],
    ] as const) {
      arrayOf(containers).forEach((c, i) => {
        const names = new Set<string>();
        for (const side of ["limits", "requests"] as const) {
          for (const name of Object.keys(c?.resources?.[side] ?? {})) {
            if (!name.startsWith(MIG_RESOURCE) || names.has(name)) continue;
            names.add(name);
            this.partition(name.slice(MIG_RESOURCE.length), `${path}.${listName}[${i}].resources.${side}[${name}]`);
          }
        }
      });
    }
  }
}

const list = (allowed: string[]): string => allowed.join(", ") || "none";

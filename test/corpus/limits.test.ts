/**
 * The corpus under a strict policy: every real pod and job is validated, and the container-limit
 * violations must be exactly the ones an independent scan of the manifests finds, at the same field
 * paths; every field path named must exist in the object.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import { parseQuantity, compareQuantities } from "../../src/core/quantity.js";
import { validateJob } from "../../src/validate/job.js";
import { effectiveLimits } from "../../src/validate/limits.js";
import { validatePod } from "../../src/validate/pod.js";
import { CORPUS_SKIP, corpusJobs, corpusObjects, corpusPods } from "../fixtures/corpus.js";

const MAX: Record<string, string> = { cpu: "2", memory: "8Gi", "nvidia.com/gpu": "1" };
const policy = checkPolicy({ limits: { container: { cpu: MAX.cpu, memory: MAX.memory, gpus: { "nvidia.com/gpu": 1 } } } }, "strict");
const ctx = { policy, namespace: "default", limits: effectiveLimits(policy, "default") };

/** Resolves `spec.containers[0].resources.limits[nvidia.com/gpu]` in `obj`. */
function resolve(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const m of path.matchAll(/([^.[\]]+)|\[([^\]]+)\]/g)) {
    const key = m[1] ?? m[2]!;
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/** Independent oracle: every resources.{requests,limits} entry over MAX, found by walking the object. */
function overLimit(obj: unknown, path = ""): string[] {
  if (!obj || typeof obj !== "object") return [];
  if (Array.isArray(obj)) return obj.flatMap((v, i) => overLimit(v, `${path}[${i}]`));
  const out: string[] = [];
  for (const [k, v] of Object.entries(obj)) {
    const p = path ? `${path}.${k}` : k;
    if (k === "resources" && v && typeof v === "object" && /containers\[\d+\]$|initContainers\[\d+\]$/.test(path)) {
      const res = v as Record<string, Record<string, string> | undefined>;
      for (const side of ["requests", "limits"]) {
        for (const [name, q] of Object.entries(res[side] ?? {})) {
          const max = MAX[name];
          // A request equal to its limit is reported once, at the limit.
          const limit = res.limits?.[name];
          if (side === "requests" && limit !== undefined && compareQuantities(parseQuantity(q)!, parseQuantity(limit)!) === 0) continue;
          if (max && compareQuantities(parseQuantity(q)!, parseQuantity(max)!) > 0) out.push(`${p}.${side}[${name}]`);
        }
      }
    } else out.push(...overLimit(v, p));
  }
  return out;
}

describe("corpus under a strict policy", { skip: CORPUS_SKIP }, () => {
  let total = 0;
  const pods = corpusPods().filter((p) => !(p.pod.metadata as { ownerReferences?: unknown }).ownerReferences);
  for (const { source, pod } of pods) {
    it(`pod ${source}: container-limit violations are exactly the over-limit entries`, () => {
      const f = validatePod(pod as V1Pod, ctx);
      const fields = f.violations
        .filter((v) => v.rule === "container-limits")
        .map((v) => v.field)
        .sort();
      const expected = overLimit(pod.spec, "spec").sort();
      assert.deepEqual(fields, expected);
      total += fields.length;
      for (const v of f.violations) if (v.field !== "spec") assert.notEqual(resolve(pod, v.field), undefined, `${v.field} does not exist`);
    });
  }
  for (const { file, job, kind } of corpusJobs()) {
    it(`job ${file}#${kind.kind}: template violations are exactly the over-limit entries`, () => {
      const f = validateJob(job, kind, ctx);
      const fields = f.violations
        .filter((v) => v.rule === "container-limits")
        .map((v) => v.field)
        .sort();
      const expected = overLimit((job as KubeObject).spec, "spec").sort();
      assert.deepEqual(fields, expected);
      total += fields.length;
      for (const v of f.violations)
        if (!["spec", "metadata.name"].includes(v.field)) assert.notEqual(resolve(job, v.field), undefined, `${v.field} does not exist`);
    });
  }
  it("the strict policy does find violations in the corpus (the test is not vacuous)", () => {
    assert.ok(total > 5, `only ${total} violations found`);
    assert.ok(corpusObjects().length > 40);
  });
});

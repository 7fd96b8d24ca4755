/**
 * Stand-in arrays (`src/core/stand-in.ts`): what the worker sends back for a long array of a large body.
 * The guard and the cost bound decide from a stand-in's length and resource names exactly what they decide from
 * the whole list, or throw StandInUndecided (the server then parses the body again on the main thread).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { specsCost } from "../../../src/core/cost.js";
import { unwalkedPodGuard } from "../../../src/admission/guards.js";
import { STAND_IN_NAMES, standInNames, StandInUndecided } from "../../../src/core/stand-in.js";
import type { AdmissionRequest } from "../../../src/admission/types.js";
import { CONDITION_MAX_CONTAINERS } from "../../../src/core/gpu.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { request } from "../../fixtures/reviews.js";

const policy = checkPolicy({ limits: { container: { cpu: "4" } } }, "cpu-cap");
const guard = unwalkedPodGuard(policy);

/** A stand-in of `length` holes carrying `names` (null: too many to keep). */
function standIn(length: number, names: string[] | null): unknown[] {
  const a = new Array(length);
  (a as unknown as Record<string, unknown>)[STAND_IN_NAMES] = names;
  return a;
}
const podWith = (containers: unknown[], initContainers?: unknown[]): AdmissionRequest =>
  request({
    object: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "team-a" },
      spec: { containers, ...(initContainers ? { initContainers } : {}) },
    },
  });

describe("stand-in arrays", () => {
  it("standInNames: the names of a stand-in, null when none were kept, undefined for a real array", () => {
    assert.deepEqual(standInNames(standIn(300, ["cpu"])), ["cpu"]);
    assert.equal(standInNames(standIn(300, null)), null);
    assert.equal(standInNames(new Array(300)), undefined);
    assert.equal(standInNames([{ resources: {} }]), undefined);
    assert.equal(standInNames({ [STAND_IN_NAMES]: ["cpu"] }), undefined);
  });

  it("unwalkedPodGuard: a label-less wide pod is skipped unless a stand-in names a GPU resource", () => {
    assert.match(guard(podWith(standIn(3_000, ["cpu", "memory"])))!, /^not a training pod/);
    assert.equal(guard(podWith(standIn(3_000, ["cpu", "nvidia.com/gpu"]))), undefined);
    // A GPU in a real init container list beside a stand-in: not skipped either.
    assert.equal(guard(podWith(standIn(3_000, ["cpu"]), [{ name: "i", resources: { limits: { "nvidia.com/gpu": "1" } } }])), undefined);
    assert.match(guard(podWith(standIn(3_000, []), [{ name: "i" }]))!, /^not a training pod/);
  });

  it("unwalkedPodGuard: throws StandInUndecided when the names were not kept, or a stand-in is not wide by its length", () => {
    assert.throws(() => guard(podWith(standIn(3_000, null))), StandInUndecided);
    assert.throws(() => guard(podWith(standIn(CONDITION_MAX_CONTAINERS, ["cpu"]))), StandInUndecided);
  });

  it("specsCost: over the bound by a stand-in's length as by the list's; throws where it would look inside", () => {
    const real = Array.from({ length: 3_000 }, () => ({ resources: { limits: { "nvidia.com/gpu": "1" } } }));
    assert.deepEqual(
      specsCost([{ containers: standIn(3_000, ["nvidia.com/gpu"]) }], 6, policy.gpu.resources),
      specsCost([{ containers: real }], 6, policy.gpu.resources),
    );
    assert.throws(() => specsCost([{ containers: standIn(300, ["nvidia.com/gpu"]) }], 6, policy.gpu.resources), StandInUndecided);
    // A stand-in met after the bound is passed is never looked at.
    assert.equal(specsCost([{ containers: real }, { containers: standIn(300, null) }], 6, policy.gpu.resources).over, true);
  });
});

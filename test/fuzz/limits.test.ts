/**
 * Fuzz (fast-check): random quantities — long zero padding, huge and tiny exponents, binary and decimal
 * suffixes, signs, numbers — never make a cap pass that an independent BigInt reference says must fail.
 * The reference computes each value as an exact fraction straight from the grammar (no digit trimming, no
 * shortcuts), rounds up to a nano-unit as Kubernetes does, and applies the range bound.
 *
 *   QM_FUZZ_SEED=<n> replays a run; QM_FUZZ_SCALE=<x> multiplies the case counts (default 1).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import { MAX_QUANTITY_LENGTH, MAX_QUANTITY_UNITS, checkQuantity } from "../../src/core/quantity.js";
import { validateCapacity, validateJob } from "../../src/validate/job.js";
import { effectiveLimits } from "../../src/validate/limits.js";
import { validatePod } from "../../src/validate/pod.js";
import type { ValidationContext } from "../../src/validate/types.js";
import { job, kindOf } from "../fixtures/jobs.js";
import { container, testPod } from "../fixtures/pods.js";

const SCALE = Number(process.env.QM_FUZZ_SCALE ?? "1");
const SEED = Number(process.env.QM_FUZZ_SEED ?? Date.now() % 2 ** 31);
const RUNS = Math.round(3000 * SCALE);

interface Parts {
  sign: "" | "+" | "-";
  whole: string;
  frac: string | undefined;
  suffix: { kind: "binary"; s: string; k: number } | { kind: "decimal"; s: string; p: number } | { kind: "exp"; s: string; e: bigint };
}

const BIN: Array<[string, number]> = [
  ["Ki", 10],
  ["Mi", 20],
  ["Gi", 30],
  ["Ti", 40],
  ["Pi", 50],
  ["Ei", 60],
];
const DEC: Array<[string, number]> = [
  ["n", -9],
  ["u", -6],
  ["m", -3],
  ["", 0],
  ["k", 3],
  ["M", 6],
  ["G", 9],
  ["T", 12],
  ["P", 15],
  ["E", 18],
];

const digits = (max: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: 1, maxLength: max });
const zeros = fc.oneof(
  fc.constant(""),
  fc.nat(12).map((n) => "0".repeat(n)),
  fc.nat(1100).map((n) => "0".repeat(n)),
);

const partsArb: fc.Arbitrary<Parts> = fc.record({
  sign: fc.constantFrom("", "", "+", "-") as fc.Arbitrary<"" | "+" | "-">,
  // Leading zeros, then a few digits, or a long run of them.
  whole: fc.tuple(zeros, digits(25)).map(([z, d]) => z + d),
  frac: fc.option(
    fc.tuple(digits(12), zeros, fc.option(digits(3), { nil: "" })).map(([d, z, t]) => d + z + t),
    { nil: undefined },
  ),
  suffix: fc.oneof(
    fc.constantFrom(...BIN).map(([s, k]) => ({ kind: "binary" as const, s, k })),
    fc.constantFrom(...DEC).map(([s, p]) => ({ kind: "decimal" as const, s, p })),
    fc
      .tuple(
        fc.constantFrom("e", "E"),
        fc.constantFrom("", "+", "-"),
        fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 2000 }), fc.bigInt({ min: 0n, max: 10n ** 30n })),
      )
      .map(([m, sg, n]) => ({ kind: "exp" as const, s: `${m}${sg}${n}`, e: sg === "-" ? -BigInt(n) : BigInt(n) })),
  ),
});

function textOf(p: Parts): string {
  return `${p.sign}${p.whole}${p.frac === undefined ? "" : `.${p.frac}`}${p.suffix.s}`;
}

/** The reference: exact nano-units, or why the text must be refused. Deliberately naive (and slow on huge exponents, so those are decided by magnitude first). */
function reference(p: Parts): bigint | "too long" | "out of range" {
  if (textOf(p).length > MAX_QUANTITY_LENGTH) return "too long";
  const frac = p.frac ?? "";
  let num = BigInt(p.whole + frac) * 1_000_000_000n;
  let den = 10n ** BigInt(frac.length);
  if (num === 0n) return 0n;
  let e = 0n;
  if (p.suffix.kind === "binary") num *= 1n << BigInt(p.suffix.k);
  else if (p.suffix.kind === "decimal") e = BigInt(p.suffix.p);
  else e = p.suffix.e;
  // |value| ≥ 10^-(frac digits) × 10^e: past 10^40 it is out of range whatever the digits; below 10^-3000, under a nano.
  if (e > 4000n) return "out of range";
  if (e < -4000n) return p.sign === "-" ? -1n : 1n;
  if (e >= 0n) num *= 10n ** e;
  else den *= 10n ** -e;
  let nano = num / den + (num % den === 0n ? 0n : 1n);
  if (nano > MAX_QUANTITY_UNITS * 1_000_000_000n) return "out of range";
  if (p.sign === "-") nano = -nano;
  return nano;
}

describe(`fuzz: quantities against limits (seed ${SEED}, ${RUNS} runs each)`, () => {
  it("the parser agrees with the reference: same value, or refused", () => {
    fc.assert(
      fc.property(partsArb, (p) => {
        const want = reference(p);
        const got = checkQuantity(textOf(p));
        if (typeof want === "bigint") assert.equal(got.ok && got.quantity.nano, want, textOf(p).slice(0, 80));
        else assert.equal(!got.ok && got.problem, want, textOf(p).slice(0, 80));
      }),
      { seed: SEED, numRuns: RUNS * 3 },
    );
  });

  const policy = checkPolicy(
    { limits: { container: { cpu: "4", memory: "16Gi", gpus: { "nvidia.com/gpu": 8 } }, pod: { gpus: 8 }, job: { gpus: 32 } } },
    "fuzz",
  );
  const ctx: ValidationContext = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };
  const NANO = 1_000_000_000n;

  it("a container's cpu and GPUs pass their caps only when the reference says they are within", () => {
    fc.assert(
      fc.property(partsArb, fc.constantFrom("cpu", "nvidia.com/gpu"), (p, resource) => {
        const text = textOf(p);
        const pod = testPod({ spec: { containers: [container({ limits: { [resource]: text } })] } }) as V1Pod;
        const f = validatePod(pod, ctx);
        const field = `spec.containers[0].resources.limits[${resource}]`;
        const flagged = f.violations.some((v) => v.field === field);
        const want = reference(p);
        const cap = resource === "cpu" ? 4n * NANO : 8n * NANO;
        const mustFail = typeof want !== "bigint" || want < 0n || want > cap || (resource !== "cpu" && want % NANO !== 0n);
        if (mustFail) assert.ok(flagged, `${text.slice(0, 80)} (${String(want)}) passed the ${resource} cap`);
        else assert.ok(!flagged, `${text.slice(0, 80)} (${String(want)}) refused: ${JSON.stringify(f.violations)}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a job's GPU total passes the 32-GPU cap and the capacity check only when replicas × reference ≤ 32", () => {
    // GPU counts near the caps, written every way: 8, 8.000…, 0.008e3, 8000m, 8e0, 8000000000n.
    const gpuText = fc.oneof(
      partsArb.map(textOf),
      fc
        .tuple(fc.integer({ min: 0, max: 40 }), fc.constantFrom("", ".", ".0", "." + "0".repeat(309), "e0", "000m", "000000000n"))
        .map(([n, form]) => `${n}${form}`),
      fc.tuple(fc.integer({ min: 0, max: 40 }), fc.nat(20)).map(([n, k]) => `0.${"0".repeat(k)}${n}e${k + String(n).length}`),
    );
    fc.assert(
      fc.property(gpuText, fc.integer({ min: 0, max: 20 }), (text, workers) => {
        const j = structuredClone(job("PyTorchJob", "fz", "team-a", { Master: 1, Worker: workers }, { runPolicy: { ttlSecondsAfterFinished: 60 } })) as any;
        for (const t of ["Master", "Worker"]) j.spec.pytorchReplicaSpecs[t].template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": text } };
        const kind = kindOf("PyTorchJob");
        const f = validateJob(j as KubeObject, kind, ctx);
        const cap = validateCapacity(j as KubeObject, kind, ctx, { total: () => 32 });
        const r = checkQuantity(text);
        // The reference for this text: parsed by the parser checked above against the naive one.
        const per = r.ok ? r.quantity.nano : undefined;
        const total = per === undefined ? undefined : BigInt(workers + 1) * per;
        const mustFail = per === undefined || per < 0n || per % NANO !== 0n || per > 8n * NANO || total! > 32n * NANO;
        if (mustFail) assert.ok(f.violations.length + cap.violations.length > 0, `${text.slice(0, 60)} × ${workers + 1} passed`);
        if (total !== undefined && total > 32n * NANO) {
          assert.ok(
            f.violations.some((v) => v.rule === "job-gpus" || v.rule === "container-limits" || v.rule === "pod-gpus"),
            `${text.slice(0, 60)} × ${workers + 1}: no GPU cap violation`,
          );
          assert.ok(
            cap.violations.some((v) => v.rule === "capacity"),
            `${text.slice(0, 60)} × ${workers + 1}: capacity passed`,
          );
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

/**
 * bench/pprof-admission: where kube-apiserver's CPU went in the profiles `npm run bench:e2e -- --pprof DIR` writes,
 * by admission stage: each sample goes to the first marker frame below the admission plugin it ran in (the
 * MutatingAdmissionPolicy plugin, or the webhook plugins), the rest to the Go GC's background work or to everything
 * else (TLS, decoding, storage, encoding, GC assists).
 *
 *   node --import tsx bench/pprof-admission.ts DIR/apiserver-map-only-gpu-10c-r*.pprof
 *
 * Needs `go` on PATH (or GO=/path/to/go): it reads `go tool pprof -traces` of all the files given, merged. The
 * markers follow kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating
 * (dispatcher.go, patch/json_patch.go): per mutation, the patch expression in CEL, the object encoded to JSON, the
 * patch applied (evanphx/json-patch), the result decoded.
 */
import { execFileSync } from "node:child_process";

/** Marker frames below the MutatingAdmissionPolicy plugin, first match from the plugin down. */
const POLICY_STAGES: ReadonlyArray<[marker: string, stage: string]> = [
  ["matchconditions.(*matcher).Match", "policy: match conditions (CEL)"],
  ["evaluatePatchExpression", "policy: patch expressions (CEL, variables included)"],
  ["json-patch", "policy: applying the JSON patches"],
  ["serializer/json.(*Serializer).Decode", "policy: decoding each patched object"],
  ["runtime.Encode", "policy: encoding the object for each patch"],
  ["DeepEqual", "policy: reinvocation comparison"],
  ["ConvertToVersion", "policy: conversion"],
];
const POLICY_PLUGIN = "k8s.io/apiserver/pkg/admission/plugin/policy/mutating.(*Plugin).Admit";
const WEBHOOK_PLUGINS = ["k8s.io/apiserver/pkg/admission/plugin/webhook/mutating", "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"];
const VALIDATING_POLICIES = "k8s.io/apiserver/pkg/admission/plugin/policy/validating";
const GC_WORKERS = ["runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"];
const UNIT: Record<string, number> = { s: 1, ms: 1e-3, us: 1e-6, µs: 1e-6, ns: 1e-9 };

/** The stage of one sample's stack (root first). */
export function stageOf(frames: readonly string[]): string {
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i]!;
    if (f.startsWith(POLICY_PLUGIN)) {
      for (const below of frames.slice(i + 1)) for (const [marker, stage] of POLICY_STAGES) if (below.includes(marker)) return stage;
      return "policy: other";
    }
    if (WEBHOOK_PLUGINS.some((p) => f.startsWith(p))) return "webhooks (mutating and validating)";
    if (f.startsWith(VALIDATING_POLICIES)) return "validating admission policies";
  }
  if (GC_WORKERS.some((g) => frames[0]?.startsWith(g))) return "Go GC (background)";
  return "rest (TLS, decoding, storage, encoding, GC assists)";
}

/** Samples (seconds, stack root first) of `go tool pprof -traces` output. */
export function parseTraces(text: string): Array<{ seconds: number; frames: string[] }> {
  const out: Array<{ seconds: number; frames: string[] }> = [];
  for (const block of text.split(/^-+\+-+$/m)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const m = /^\s*([\d.]+)(s|ms|us|µs|ns)\s+(.*)$/.exec(lines[0] ?? "");
    if (!m) continue;
    const frames = [m[3]!.trim(), ...lines.slice(1).map((l) => l.trim())].reverse();
    out.push({ seconds: Number(m[1]) * UNIT[m[2]!]!, frames });
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const files = process.argv.slice(2);
  if (files.length === 0) throw new Error("usage: bench/pprof-admission.ts FILE.pprof...");
  const text = execFileSync(process.env.GO ?? "go", ["tool", "pprof", "-traces", ...files], { encoding: "utf8", maxBuffer: 1 << 28 });
  const by = new Map<string, number>();
  for (const s of parseTraces(text)) by.set(stageOf(s.frames), (by.get(stageOf(s.frames)) ?? 0) + s.seconds);
  const total = [...by.values()].reduce((a, b) => a + b, 0);
  console.log(`${total.toFixed(2)} s sampled in ${files.length} profile(s)`);
  for (const [stage, seconds] of [...by].sort((a, b) => b[1] - a[1]))
    console.log(`${stage.padEnd(55)} ${seconds.toFixed(2).padStart(6)} s ${((100 * seconds) / total).toFixed(1).padStart(5)} %`);
}

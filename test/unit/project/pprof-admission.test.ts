/**
 * bench/pprof-admission.ts: samples of `go tool pprof -traces` go to the admission stage they ran in (the first
 * marker below the MutatingAdmissionPolicy plugin, or the webhook plugins); the profile figures for
 * issue 35 in docs/benchmarks.md come from it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseTraces, stageOf } from "../../../bench/pprof-admission.js";

const POLICY = "k8s.io/apiserver/pkg/admission/plugin/policy/mutating.(*Plugin).Admit";
const PATCH = "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch.(*jsonPatcher).Patch";

describe("stageOf", () => {
  const cases: Array<{ name: string; frames: string[]; stage: string }> = [
    {
      name: "a sample outside admission is the rest",
      frames: ["net/http.(*conn).serve", "crypto/tls.(*Conn).Read"],
      stage: "rest (TLS, decoding, storage, encoding, GC assists)",
    },
    { name: "the GC's background worker", frames: ["runtime.gcBgMarkWorker", "runtime.gcDrain"], stage: "Go GC (background)" },
    {
      name: "a webhook call",
      frames: ["handlers.createHandler", "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating.(*Plugin).Admit", "k8s.io/client-go/rest.(*Request).Do"],
      stage: "webhooks (mutating and validating)",
    },
    {
      name: "the decode after a patch, with the JSON parser below it",
      frames: ["handlers.createHandler", POLICY, PATCH, "k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).Decode", "encoding/json.Unmarshal"],
      stage: "policy: decoding each patched object",
    },
    {
      name: "CEL variables resolved inside a patch expression are the patch expression's, not the decode's",
      frames: [
        POLICY,
        PATCH,
        "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch.(*jsonPatcher).evaluatePatchExpression",
        "github.com/google/cel-go/cel.(*prog).Eval",
      ],
      stage: "policy: patch expressions (CEL, variables included)",
    },
    {
      name: "the policy's match conditions",
      frames: [POLICY, "k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions.(*matcher).Match"],
      stage: "policy: match conditions (CEL)",
    },
    { name: "the policy plugin with no marker below", frames: [POLICY, "runtime.mallocgc"], stage: "policy: other" },
  ];
  for (const c of cases) it(c.name, () => assert.equal(stageOf(c.frames), c.stage));
});

describe("parseTraces", () => {
  it("reads each sample's value and puts its stack root first", () => {
    const text = [
      "File: kube-apiserver",
      "-----------+-------------------------------------------------------",
      "      10ms   encoding/json.Unmarshal",
      "             k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).Decode",
      `             ${PATCH}`,
      `             ${POLICY}`,
      "-----------+-------------------------------------------------------",
      "     1.20s   runtime.gcDrain",
      "             runtime.gcBgMarkWorker",
      "-----------+-------------------------------------------------------",
    ].join("\n");
    const samples = parseTraces(text);
    assert.equal(samples.length, 2);
    assert.equal(samples[0]!.seconds, 0.01);
    assert.equal(samples[0]!.frames[0], POLICY);
    assert.equal(stageOf(samples[0]!.frames), "policy: decoding each patched object");
    assert.equal(samples[1]!.seconds, 1.2);
    assert.equal(stageOf(samples[1]!.frames), "Go GC (background)");
  });
});

/**
 * Validation parity with the real Kubeflow training operator v1.9.4 (QM_OPERATOR_BIN): for every job of the
 * generated table (`./validation-cases.ts`: TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob, valid and
 * invalid) the verdict of the whole create path with the operator must be Quartermaster's verdict, and
 * where the operator refuses, Quartermaster refuses naming the same fields.
 *
 * How each side is asked (one e2e control plane with the operator's CRDs; every create is `dryRun=All`, so
 * nothing is stored and the operator's controllers never act on a job — v1.8.1 panicked on some shapes):
 * 1. Schema only, no webhook registered: the apiserver's verdict from the CRDs' OpenAPI schemas, and for a
 *    job it accepts, the object exactly as it would reach a validating webhook (pruned, defaulted).
 * 2. The operator's path: its validating webhooks (its module's `manifests/base/webhook/manifests.yaml`)
 *    registered by URL, the job created again: 201, or the refusal with its field paths (the schema's
 *    `details.causes`, or the webhook's aggregated `field.ErrorList` in the message).
 * 3. Quartermaster's path: the same CRD schema stage (step 1: a job the schema refuses never reaches any
 *    webhook, in either path), then `/validate/jobs` (the handler `quartermaster serve` mounts, with the
 *    built-in policy: no limits) given step 1's object as an AdmissionReview CREATE. In-process rather than
 *    through a served Quartermaster: the AdmissionReview is the apiserver's own object, so the verdict is
 *    the same, and the violations come back with Quartermaster's own field paths. The built-in policy has
 *    no `jobDefaults`, so `/mutate/jobs` changes nothing and is left out.
 * Field paths are compared with map keys as `.Key` (upstream writes `spec.tfReplicaSpecs[Worker]`,
 * Quartermaster `spec.tfReplicaSpecs.Worker`). Every field the operator names must be one Quartermaster names.
 *
 * Where Quartermaster is deliberately stricter the case is listed in STRICTER below with the field it
 * refuses and why (also in docs/testing.md, "Validation parity"); such a case must still
 * be accepted by the operator, so the list cannot go stale silently.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AdmissionResponse } from "../../src/admission/types.js";
import { defaultPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { startControlPlane, type ApiReply, type ControlPlane } from "../e2e/harness/controlplane.js";
import { installOperatorCrds, operatorBin, registerOperatorWebhooks, startOperator, type Operator } from "../e2e/harness/operator.js";
import { capturingLogger } from "../fixtures/https.js";
import { fakeJobReader } from "../fixtures/jobs.js";
import { review } from "../fixtures/reviews.js";
import { KINDS, validationCases, type ParityCase } from "./validation-cases.js";

const bin = operatorBin();
const SKIP = bin ? false : "QM_OPERATOR_BIN is not set (export QM_OPERATOR_BIN=$(bash test/e2e/operator/build.sh)/training-operator)";
const NS = "parity";
const MIN_JOBS = 100;

/** Why Quartermaster refuses what the operator accepts, and the field it names. */
interface Stricter {
  field: string;
  reason: string;
}

const POD_NAMES = "a pod name <job>-<type>-<index> over 63 characters: the operator's Services of the same names cannot be created (DNS-1035 labels)";
const NEGATIVE = "a negative replica count is no count (the CRD's int32 has no minimum; the operator would read it as no pods)";
const GPUS = "GPUs are extended resources: whole numbers, request equal to limit, or the apiserver refuses every pod of the job";
const NO_SPECS = "a job with no replica spec has nothing to run";

const STRICTER: Record<string, Stricter> = {
  ...Object.fromEntries(
    Object.entries(KINDS).flatMap(([kind, k]) => [
      [`${kind} 55-character name with 11 workers`, { field: "metadata.name", reason: POD_NAMES }],
      [`${kind} name of 63 characters`, { field: "metadata.name", reason: POD_NAMES }],
      // PyTorchJob and PaddleJob declare a scale subresource on Worker (the apiserver refuses a negative count there);
      // JAXJob's CRD gives replicas a minimum of 0.
      ...(["PyTorchJob", "PaddleJob", "JAXJob"].includes(kind)
        ? []
        : [[`${kind} Worker replicas -1`, { field: `spec.${k.specsField}.Worker.replicas`, reason: NEGATIVE }]]),
      [
        `${kind} Worker asks for half a GPU`,
        { field: `spec.${k.specsField}.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu`, reason: GPUS },
      ],
      [
        `${kind} Worker GPU request 1, limit 2`,
        { field: `spec.${k.specsField}.Worker.template.spec.containers[0].resources.requests.nvidia.com/gpu`, reason: GPUS },
      ],
      ...(kind === "XGBoostJob" ? [] : [[`${kind} empty replica specs`, { field: `spec.${k.specsField}`, reason: NO_SPECS }]]),
    ]),
  ),
  // The apiserver drops the null entry; the operator accepts the empty map left, as for "empty replica specs".
  "JAXJob Worker spec null": { field: "spec.jaxReplicaSpecs", reason: NO_SPECS },
  "TFJob Chief with 2 replicas": { field: "spec.tfReplicaSpecs", reason: "TensorFlow has one chief; upstream counts Chief/Master replica types, not replicas" },
  "TFJob chief (lower case) and Master": {
    field: "spec.tfReplicaSpecs",
    reason: "the operator's defaulting camel-cases chief to Chief, which makes two chiefs; upstream's webhook compares the spelling",
  },
};

/**
 * Map keys as `.Key`, list indexes kept: `spec.x[Worker].a[0]` → `spec.x.Worker.a[0]`; no leading dot (the
 * apiserver writes `.spec.x.Worker.replicas` for a scale subresource's replicas path).
 */
const normField = (f: string): string => f.replace(/^\./, "").replace(/\[([^\]]*)\]/g, (m, key: string) => (/^\d+$/.test(key) ? m : `.${key}`));

const ERROR_TYPES = "Required value|Invalid value|Forbidden|Unsupported value|Duplicate value|Not found|Too long|Too many|Internal error";

interface Verdict {
  allowed: boolean;
  /** schema: the CRD's OpenAPI schema; webhook: a validating webhook. */
  stage?: "schema" | "webhook";
  fields: string[];
  message?: string;
}

/** The apiserver's verdict on a create, with field paths from the Status causes or the webhook's message. */
function apiVerdict(r: ApiReply): Verdict {
  if (r.status === 201) return { allowed: true, fields: [] };
  const message = String(r.body?.message ?? JSON.stringify(r.body));
  assert.doesNotMatch(message, /failed calling webhook/, `a webhook was not reached: ${message}`);
  const denied = /admission webhook "[^"]+" denied the request: ([\s\S]*)$/.exec(message);
  if (denied) {
    const fields = [...denied[1]!.matchAll(new RegExp(`(?<![\\w.\\]])((?:metadata|spec)(?:\\.[\\w-]+|\\[[^\\]]*\\])*): (?:${ERROR_TYPES})`, "g"))].map(
      (m) => m[1]!,
    );
    return { allowed: false, stage: "webhook", fields, message };
  }
  const causes = ((r.body?.details?.causes ?? []) as Array<{ field?: string }>).map((c) => c.field ?? "").filter((f) => f && f !== "<nil>");
  return { allowed: false, stage: "schema", fields: causes, message };
}

const policy = defaultPolicy();
const validate = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() })["/validate/jobs"]!;

/** `/validate/jobs` on `object` as the apiserver would send it for a CREATE. */
async function quartermaster(c: ParityCase, object: Record<string, any>): Promise<Verdict> {
  const res = await validate.admit(
    review({
      kind: { group: "kubeflow.org", version: "v1", kind: c.kind },
      resource: { group: "kubeflow.org", version: "v1", resource: c.plural },
      name: object.metadata?.name,
      namespace: NS,
      operation: "CREATE",
      object,
    }),
  );
  assert.notEqual(res.outcome, "error", String(res.error));
  const response = res.review.response as AdmissionResponse;
  const causes = ((response.status?.details?.causes ?? []) as Array<{ field?: string }>).map((x) => x.field ?? "");
  return { allowed: response.allowed, stage: "webhook", fields: causes, ...(response.status?.message ? { message: response.status.message } : {}) };
}

const cases = validationCases();

/** Dry-run creates of every case, 8 at a time. */
async function createAll(cp: ControlPlane): Promise<ApiReply[]> {
  const out: ApiReply[] = new Array(cases.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const i = next++;
      const c = cases[i]!;
      out[i] = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/${c.plural}?dryRun=All`, {
        ...c.job,
        metadata: { ...c.job.metadata, namespace: NS },
      });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return out;
}

describe("validation parity with the Kubeflow training operator v1.9.4", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let operator: Operator;
  let started = 0;
  const schema: ApiReply[] = [];
  const upstream: ApiReply[] = [];
  const tally = { agree: 0, stricter: 0, schemaStage: 0, webhookStage: 0, accepted: 0, schemaAlsoOurs: 0 };

  before(async () => {
    started = performance.now();
    cp = await startControlPlane();
    await installOperatorCrds(cp);
    operator = await startOperator(cp, bin!);
    const ns = await cp.api("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
    assert.equal(ns.status, 201, JSON.stringify(ns.body));
    schema.push(...(await createAll(cp)));
    const unregister = await registerOperatorWebhooks(cp, operator, NS);
    upstream.push(...(await createAll(cp)));
    await unregister();
    console.log(`validation parity: ${cases.length} jobs through the apiserver twice in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await operator?.stop();
    await cp?.stop();
    console.log(
      `validation parity: ${cases.length} jobs: operator accepts ${tally.accepted}, refuses ${tally.schemaStage} at the CRD schema and ${tally.webhookStage} in its webhooks; ` +
        `${tally.agree} verdicts agree, ${tally.stricter} deliberately stricter; of the schema's refusals /validate/jobs alone would refuse ${tally.schemaAlsoOurs}; suite took ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  it(`has at least ${MIN_JOBS} jobs of all five kinds, both verdicts, both refusal stages`, () => {
    assert.ok(cases.length >= MIN_JOBS, `only ${cases.length} jobs`);
    assert.deepEqual([...new Set(cases.map((c) => c.kind))].sort(), ["JAXJob", "PaddleJob", "PyTorchJob", "TFJob", "XGBoostJob"]);
    const verdicts = upstream.map(apiVerdict);
    assert.ok(verdicts.filter((v) => v.allowed).length >= 30, "too few jobs the operator accepts");
    assert.ok(verdicts.filter((v) => v.stage === "webhook").length >= 30, "too few jobs the operator's webhooks refuse");
    assert.ok(verdicts.filter((v) => v.stage === "schema").length >= 10, "too few jobs the CRD schema refuses");
    for (const name of Object.keys(STRICTER))
      assert.ok(
        cases.some((c) => c.name === name),
        `STRICTER names no case: ${name}`,
      );
  });

  cases.forEach((c, i) => {
    it(c.name, async () => {
      const theirs = apiVerdict(upstream[i]!);
      const shared = apiVerdict(schema[i]!);
      if (theirs.stage === "webhook" && theirs.fields.length === 0) assert.match(theirs.message!, /cannot unmarshal/, "a webhook refusal naming no field");
      if (theirs.allowed) tally.accepted++;
      else if (theirs.stage === "schema") tally.schemaStage++;
      else tally.webhookStage++;
      // A schema refusal is the same with or without the operator's webhooks.
      if (theirs.stage === "schema" || !shared.allowed) assert.deepEqual(shared, theirs, "the CRD schema's verdict differs with the webhooks registered");
      const ours = shared.allowed ? await quartermaster(c, schema[i]!.body) : shared;
      // For the record only: what /validate/jobs alone says of a job the schema stops first.
      if (!shared.allowed && !(await quartermaster(c, { ...c.job, metadata: { ...c.job.metadata, namespace: NS } })).allowed) tally.schemaAlsoOurs++;
      const show = `\n  operator:      ${JSON.stringify(theirs)}\n  quartermaster: ${JSON.stringify(ours)}`;
      const stricter = STRICTER[c.name];
      if (stricter) {
        assert.ok(theirs.allowed, `listed as stricter, but the operator refuses it too${show}`);
        assert.ok(
          !ours.allowed && ours.fields.map(normField).includes(normField(stricter.field)),
          `Quartermaster should refuse ${stricter.field} (${stricter.reason})${show}`,
        );
        tally.stricter++;
        return;
      }
      assert.equal(ours.allowed, theirs.allowed, `verdicts differ${show}`);
      if (!theirs.allowed) {
        const named = new Set(ours.fields.map(normField));
        const missing = theirs.fields.map(normField).filter((f) => !named.has(f));
        assert.deepEqual(missing, [], `Quartermaster does not name every field the operator does${show}`);
      }
      tally.agree++;
    });
  });
});

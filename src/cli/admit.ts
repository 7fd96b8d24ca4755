/**
 * @module
 * Offline evaluation: objects from files through the very webhooks the server mounts (webhooks/index.ts, the
 * pipeline of src/admission/handler.ts with src/mutate and src/validate), in the order the apiserver calls
 * them: the mutating webhook, its patch applied, then the validating webhook on the result. No cluster:
 *
 * - a training job among the inputs is what a pod's job lookup finds (the webhook reads it from the
 *   apiserver, after its own mutation; here it is the outfitted job from the inputs);
 * - a pod template anywhere in another object (Deployment, StatefulSet, Job, CronJob, JobSet, ...) is admitted
 *   as the pod it stamps out, and the outfitted pod is written back into the template; a batch Job or JobSet is
 *   also judged whole by `/validate/jobs` (job-gpus on the pods it runs at once), as the apiserver sends it;
 * - with `pods`, every replica of a training job is also admitted as the training operator would create it
 *   (name `<job>-<type>-<index>`, replica labels, controller ownerReference), so its cluster spec shows.
 *
 * A pod gets the apiserver's one defaulting the webhooks' decisions depend on (requests from limits,
 * {@link apiserverPodDefaults}) before the mutating webhook and after its patch, as the apiserver does; the
 * printed objects carry those requests. test/e2e/admit.test.ts holds the result to a real kube-apiserver.
 *
 * What the apiserver decides before calling a webhook is assumed: the namespace is opted in and the request
 * matches the webhook configurations' matchConditions. Protected namespaces are never in scope, so objects
 * there are reported as not admitted.
 */
import { isObject } from "../core/object.js";
import { createWebhooks } from "../../webhooks/index.js";
import type { WebhookResult } from "../admission/handler.js";
import { applyPatch, createPatch, type PatchOperation } from "../admission/patch.js";
import type { AdmissionReview } from "../admission/types.js";
import { RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE } from "../admission/claims.js";
import type { GroupVersionKind, GroupVersionResource, KubeObject, ObjectKind } from "../core/kube.js";
import { HeldInput, headOf, type InputObject } from "./admit-input.js";
import { silentLogger } from "../log.js";
import type { JobKind, Policy } from "../policy/types.js";
import { SYSTEM_NAMESPACES } from "../core/scope.js";
import { QUEUED_WORKLOAD_KINDS, TRAINER } from "../core/job-shapes.js";
import { labelScheme } from "../kinds/index.js";
import { replicaSpecs, replicasOf } from "../membership/resolve.js";
import type { JobReader } from "../membership/types.js";

export interface Finding {
  rule: string;
  /** Field path in the printed object (a template's violations under the template's path). */
  field: string;
  message: string;
}

export interface Admitted {
  source: string;
  kind: string;
  namespace: string;
  name: string;
  /** A pod, a training job, an object holding pod templates, or one Quartermaster does not admit. */
  role: "pod" | "job" | "templates" | "other";
  original: KubeObject;
  /** The outfitted object (the original when nothing changed or it was denied). */
  object: KubeObject;
  /** JSON Patch from `original` to `object`. */
  patch: PatchOperation[];
  allowed: boolean;
  warnings: string[];
  violations: Finding[];
  /** The rules that denied it, once each. */
  deniedRules: string[];
  /** Why it was not admitted at all (role `other`, a protected namespace). */
  skipped?: string;
  /** For a replica pod made from a training job: the job, `PyTorchJob/mnist-ddp`. */
  from?: string;
}

export interface AdmitOptions {
  policy: Policy;
  /** The namespace of objects that name none (kubectl's `-n`); default `default`. */
  namespace?: string;
  /** Also admit every replica pod of each training job. */
  pods?: boolean;
  now?: () => Date;
}

const POD_KIND: GroupVersionKind = { group: "", version: "v1", kind: "Pod" };
const POD_RESOURCE: GroupVersionResource = { group: "", version: "v1", resource: "pods" };
/** A replica pod per type and index is made for at most this many replicas of a type (a 1000-worker job stays readable). */
export const MAX_PODS_PER_REPLICA_TYPE = 16;

type Meta = { name?: string; generateName?: string; namespace?: string; uid?: string; labels?: Record<string, string> };
const metaOf = (o: KubeObject): Meta => o.metadata ?? {};

/** `a` with its `original` built again from `held` at each read. */
const withHeldOriginal = (a: Admitted, held: HeldInput): Admitted => {
  const { original: _, ...rest } = a;
  return Object.defineProperty(rest, "original", { get: () => held.object, enumerable: true }) as Admitted;
};

/** The input with its object built, once. */
const taken = (input: InputObject): InputObject => (input instanceof HeldInput ? { source: input.source, object: input.object } : input);

function groupVersion(apiVersion: unknown): { group: string; version: string } {
  const s = String(apiVersion ?? "");
  const i = s.indexOf("/");
  return i < 0 ? { group: "", version: s } : { group: s.slice(0, i), version: s.slice(i + 1) };
}

function jobKindOf(object: KubeObject, policy: Policy): JobKind | undefined {
  const { group } = groupVersion(object.apiVersion);
  return policy.jobKinds.find((k) => k.group === group && k.kind === object.kind);
}

/** Jobs by kind, namespace and name: what the pods' job lookups find (the outfitted jobs of the inputs). */
function offlineJobs(): JobReader & { add(kind: ObjectKind, namespace: string, job: KubeObject): void } {
  const jobs = new Map<string, KubeObject>();
  const key = (kind: ObjectKind, namespace: string, name: string): string => `${kind.group}/${kind.kind}/${namespace}/${name}`;
  return {
    add: (kind, namespace, job) => void jobs.set(key(kind, namespace, String(metaOf(job).name ?? "")), job),
    get: (kind, namespace, name) => Promise.resolve(jobs.get(key(kind, namespace, name))),
    peek: (kind, namespace, name) => jobs.get(key(kind, namespace, name)),
  };
}

let uids = 0;
function review(object: KubeObject, kind: GroupVersionKind, resource: GroupVersionResource, namespace: string): AdmissionReview {
  const name = metaOf(object).name;
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `quartermaster-admit-${++uids}`,
      kind,
      resource,
      requestKind: kind,
      requestResource: resource,
      ...(name ? { name } : {}),
      namespace,
      operation: "CREATE",
      userInfo: { username: "quartermaster-admit" },
      object,
      oldObject: null,
      dryRun: true,
    },
  };
}

/** What one webhook said, in the terms of the report. */
function heard(r: WebhookResult, warnings: string[], violations: Finding[]): void {
  const response = r.review.response;
  // Whole, not cut to the 120 characters an AdmissionResponse's warnings are held to: a terminal has room.
  for (const w of r.warningTexts ?? response?.warnings ?? []) if (!warnings.includes(w)) warnings.push(w);
  if (r.outcome === "denied")
    violations.push(...r.policyViolations.filter((v) => v.mode === "deny").map((v) => ({ rule: v.rule, field: v.field, message: v.message })));
  else if (response && !response.allowed) violations.push({ rule: "webhook-error", field: "", message: response.status?.message ?? "refused" });
}

function patchOf(r: WebhookResult): PatchOperation[] {
  const patch = r.review.response?.patch;
  return patch ? (JSON.parse(Buffer.from(patch, "base64").toString("utf8")) as PatchOperation[]) : [];
}

/**
 * The apiserver's defaulting that the pod webhooks' decisions depend on: a container's or init container's
 * requests default to its limits (kubernetes `pkg/apis/core/v1/defaults.go`, `SetDefaults_Pod`). The apiserver
 * defaults a pod before the first mutating webhook and again after each one's patch
 * (`k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go`), so the webhooks never see a limit
 * without its request; neither do they here. Other defaults (dnsPolicy, terminationMessagePath, ...) change no
 * decision and are left out of the printed objects. Returns `pod` itself when there is nothing to default.
 */
export function apiserverPodDefaults(pod: KubeObject): KubeObject {
  type Container = { resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> } };
  const spec = pod.spec as { containers?: Container[]; initContainers?: Container[] } | undefined;
  const needs = (c: Container): boolean => Object.keys(c.resources?.limits ?? {}).some((k) => c.resources?.requests?.[k] === undefined);
  if (![...(spec?.containers ?? []), ...(spec?.initContainers ?? [])].some((c) => isObject(c) && needs(c))) return pod;
  const out = structuredClone(pod);
  const s = out.spec as { containers?: Container[]; initContainers?: Container[] };
  for (const c of [...(s.containers ?? []), ...(s.initContainers ?? [])]) {
    if (!isObject(c) || !needs(c)) continue;
    const resources = c.resources!;
    resources.requests = { ...(resources.requests ?? {}) };
    for (const [k, v] of Object.entries(resources.limits ?? {})) if (resources.requests[k] === undefined) resources.requests[k] = v;
  }
  return out;
}

interface Pipeline {
  /** Mutate, then validate the outfitted object; `object` is the outfitted one unless the mutation denied it. */
  run(
    object: KubeObject,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    namespace: string,
    paths: { mutate?: string; validate: string },
  ): Promise<{ object: KubeObject; warnings: string[]; violations: Finding[] }>;
}

function pipeline(opts: AdmitOptions, jobs: JobReader): Pipeline {
  const webhooks = createWebhooks({ policy: opts.policy, log: silentLogger(), jobs, now: opts.now ?? (() => new Date()) });
  return {
    async run(object, kind, resource, namespace, paths) {
      const warnings: string[] = [];
      const violations: Finding[] = [];
      const defaults = paths === POD_PATHS ? apiserverPodDefaults : (o: KubeObject) => o;
      const given = defaults(object);
      let outfitted = given;
      if (paths.mutate !== undefined) {
        const mutated = await webhooks[paths.mutate]!.admit(review(given, kind, resource, namespace));
        heard(mutated, warnings, violations);
        if (violations.length > 0) return { object: given, warnings, violations };
        outfitted = defaults(applyPatch(given, patchOf(mutated)));
      }
      heard(await webhooks[paths.validate]!.admit(review(outfitted, kind, resource, namespace)), warnings, violations);
      return { object: outfitted, warnings, violations };
    },
  };
}

const POD_PATHS = { mutate: "/mutate/pods", validate: "/validate/pods" };
const JOB_PATHS = { mutate: "/mutate/jobs", validate: "/validate/jobs" };
/** ResourceClaims and ResourceClaimTemplates (DRA): validated at CREATE, never mutated. */
const CLAIM_PATHS = { validate: "/validate/claims" };

/** The DRA claim kind `object` is (`resource.k8s.io/v1`), if it is one. */
function claimKindOf(object: KubeObject): ObjectKind | undefined {
  if (object.apiVersion !== "resource.k8s.io/v1") return undefined;
  return [RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE].find((k) => k.kind === object.kind);
}

/**
 * A Trainer runtime among the inputs (ClusterTrainingRuntime, cluster-scoped: read with namespace "", or
 * TrainingRuntime), as a TrainJob's runtime lookup asks for it (src/membership/lookup.ts `readRuntime`).
 */
function runtimeKindOf(object: KubeObject): { kind: ObjectKind; clusterScoped: boolean } | undefined {
  if (object.apiVersion !== `${TRAINER.group}/${TRAINER.version}` || !TRAINER.runtimeKinds.includes(String(object.kind))) return undefined;
  const kind = String(object.kind);
  return { kind: { kind, group: TRAINER.group, version: TRAINER.version, plural: `${kind.toLowerCase()}s` }, clusterScoped: kind === "ClusterTrainingRuntime" };
}

/** Every pod template in `object` (a mapping under `template` with `spec.containers`), with its path. */
export function templatesIn(object: KubeObject): Array<{ path: Array<string | number>; template: Record<string, unknown> }> {
  const found: Array<{ path: Array<string | number>; template: Record<string, unknown> }> = [];
  const visit = (node: unknown, path: Array<string | number>): void => {
    if (Array.isArray(node)) return node.forEach((v, i) => visit(v, [...path, i]));
    if (!isObject(node)) return;
    const t = node.template;
    if (isObject(t) && isObject(t.spec) && Array.isArray(t.spec.containers)) {
      found.push({ path: [...path, "template"], template: t });
      return;
    }
    for (const [k, v] of Object.entries(node)) if (k !== "metadata" && k !== "status") visit(v, [...path, k]);
  };
  visit(object, []);
  return found;
}

/** `["spec", "template"]` → `spec.template`, `[..., 0]` → `[0]` (the notation of violation fields). */
function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(p) ? `${i ? "." : ""}${p}` : `[${p}]`)).join("");
}

function setAt(root: KubeObject, path: ReadonlyArray<string | number>, value: unknown): void {
  let node = root as Record<string | number, unknown>;
  for (const p of path.slice(0, -1)) node = node[p] as Record<string | number, unknown>;
  node[path.at(-1)!] = value;
}

/** The replica pods the training operator would create for `job` (at most {@link MAX_PODS_PER_REPLICA_TYPE} per type). */
export function replicaPods(job: KubeObject, kind: JobKind, namespace: string): KubeObject[] {
  const meta = metaOf(job);
  const name = String(meta.name ?? "");
  const scheme = labelScheme(kind);
  const pods: KubeObject[] = [];
  for (const [type, spec] of replicaSpecs(job, kind)) {
    const template = (isObject(spec.template) ? spec.template : {}) as { metadata?: Meta & Record<string, unknown>; spec?: KubeObject };
    for (let i = 0; i < Math.min(MAX_PODS_PER_REPLICA_TYPE, replicasOf(spec)); i++) {
      pods.push({
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          ...(template.metadata ?? {}),
          name: `${name}-${type.toLowerCase()}-${i}`,
          namespace,
          labels: {
            ...(template.metadata?.labels ?? {}),
            ...scheme.selector(job),
            [scheme.replicaTypeLabel]: type.toLowerCase(),
            [scheme.replicaIndexLabel]: String(i),
          },
          ownerReferences: [
            {
              apiVersion: `${kind.group}/${kind.version}`,
              kind: kind.kind,
              name,
              uid: meta.uid ?? `offline-${name}`,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: structuredClone(template.spec ?? { containers: [] }),
      });
    }
  }
  return pods;
}

function finish(base: Omit<Admitted, "patch" | "allowed" | "deniedRules">): Admitted {
  const deniedRules = [...new Set(base.violations.map((v) => v.rule))];
  return { ...base, patch: base.object === base.original ? [] : createPatch(base.original, base.object), allowed: deniedRules.length === 0, deniedRules };
}

/** What every result of one input shares: where it came from, what it is, the object as given. */
type Described = Pick<Admitted, "source" | "kind" | "namespace" | "name" | "original">;

/** One offline run: the webhooks, the jobs their lookups find so far, the options. */
interface Offline {
  run: Pipeline;
  jobs: ReturnType<typeof offlineJobs>;
  opts: AdmitOptions;
}

/**
 * A training job, then (with `pods`) each of its replica pods as the training operator would create them; the
 * outfitted job is what the pods' job lookups find from then on.
 */
async function admitJob(input: InputObject, d: Described, kind: JobKind, { run, jobs, opts }: Offline): Promise<Admitted[]> {
  const { version } = groupVersion(input.object.apiVersion);
  const out = await run.run(
    input.object,
    { group: kind.group, version, kind: kind.kind },
    { group: kind.group, version, resource: kind.plural },
    d.namespace,
    JOB_PATHS,
  );
  jobs.add(kind, d.namespace, out.object);
  const admitted = [finish({ ...d, role: "job", object: out.object, warnings: out.warnings, violations: out.violations })];
  if (!opts.pods) return admitted;
  for (const pod of replicaPods(out.object, kind, d.namespace)) {
    const p = await run.run(pod, POD_KIND, POD_RESOURCE, d.namespace, POD_PATHS);
    admitted.push(
      finish({
        source: input.source,
        kind: "Pod",
        namespace: d.namespace,
        name: String(metaOf(pod).name),
        original: pod,
        role: "pod",
        object: p.object,
        warnings: p.warnings,
        violations: p.violations,
        from: `${kind.kind}/${d.name}`,
      }),
    );
  }
  return admitted;
}

/**
 * An object holding pod templates: each admitted as the pod it stamps out, the outfitted pod written back.
 * `whole`: what `/validate/jobs` said of the object itself (a batch Job or JobSet), reported first; a template's
 * violation it already reported at the same field and rule is not repeated.
 */
async function admitTemplates(
  input: InputObject,
  d: Described,
  templates: ReturnType<typeof templatesIn>,
  run: Pipeline,
  whole: { warnings: string[]; violations: Finding[] } = { warnings: [], violations: [] },
): Promise<Admitted> {
  const object = structuredClone(input.object);
  const warnings: string[] = [...whole.warnings];
  const violations: Finding[] = [...whole.violations];
  const reported = new Set(whole.violations.map((v) => `${v.rule} ${v.field}`));
  for (const { path, template } of templates) {
    const tmeta = (isObject(template.metadata) ? template.metadata : {}) as Meta & Record<string, unknown>;
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { ...tmeta, name: tmeta.name ?? `${d.name}-pod`, namespace: d.namespace },
      spec: template.spec,
    };
    const p = await run.run(pod, POD_KIND, POD_RESOURCE, d.namespace, POD_PATHS);
    const at = fieldPath(path);
    warnings.push(...p.warnings.map((w) => (templates.length > 1 ? `${at}: ${w}` : w)));
    violations.push(...p.violations.map((v) => ({ ...v, field: v.field ? `${at}.${v.field}` : at })).filter((v) => !reported.has(`${v.rule} ${v.field}`)));
    if (p.object !== pod) {
      const { name, namespace, ...rest } = metaOf(p.object) as Meta & Record<string, unknown>;
      const metadata = { ...rest, ...("name" in tmeta ? { name } : {}), ...("namespace" in tmeta ? { namespace } : {}) };
      // metadata first, where it was or before everything else (a key keeps its first position).
      const withMeta = Object.keys(metadata).length > 0 || "metadata" in template ? { metadata } : {};
      setAt(object, path, { ...withMeta, ...template, ...withMeta, spec: p.object.spec });
    }
  }
  return finish({ ...d, role: "templates", object, warnings, violations });
}

/** Anything but a training job: a pod, an object holding pod templates, or one not admitted (and why). */
async function admitOther(input: InputObject, d: Described, run: Pipeline): Promise<Admitted> {
  const skipped = (why: string): Admitted => finish({ ...d, role: "other", object: input.object, warnings: [], violations: [], skipped: why });
  if (SYSTEM_NAMESPACES.includes(d.namespace)) return skipped(`namespace ${d.namespace} is never in Quartermaster's scope`);
  if (input.object.kind === "Pod" && input.object.apiVersion === "v1") {
    const p = await run.run(input.object, POD_KIND, POD_RESOURCE, d.namespace, POD_PATHS);
    return finish({ ...d, role: "pod", object: p.object, warnings: p.warnings, violations: p.violations });
  }
  const claim = claimKindOf(input.object);
  if (claim) {
    const gvk = { group: claim.group, version: claim.version, kind: claim.kind };
    const p = await run.run(input.object, gvk, { group: claim.group, version: claim.version, resource: claim.plural }, d.namespace, CLAIM_PATHS);
    return finish({ ...d, role: "other", object: p.object, warnings: p.warnings, violations: p.violations });
  }
  const templates = templatesIn(input.object);
  if (templates.length === 0) return skipped(`${d.kind} is no pod, pod template or training job`);
  // A batch Job or JobSet is also judged whole, as /validate/jobs judges it (job-gpus on the pods it runs at once).
  const workload = QUEUED_WORKLOAD_KINDS.find((k) => input.object.apiVersion === `${k.group}/${k.version}` && input.object.kind === k.kind);
  if (!workload) return admitTemplates(input, d, templates, run);
  const gvk = { group: workload.group, version: workload.version, kind: workload.kind };
  const whole = await run.run(input.object, gvk, { group: workload.group, version: workload.version, resource: workload.plural }, d.namespace, {
    validate: JOB_PATHS.validate,
  });
  return admitTemplates(input, d, templates, run, whole);
}

/**
 * Admits `inputs` offline: training jobs first (the pods' lookups find them), then everything else in input order.
 * ResourceClaims and ResourceClaimTemplates among them are found by the claim lookups of the pods and jobs, as
 * the webhooks find them in the cluster, and are themselves judged as at their CREATE.
 */
export async function admitObjects(inputs: readonly InputObject[], opts: AdmitOptions): Promise<Admitted[]> {
  const all: Admitted[] = [];
  for await (const a of admitEach([...inputs], opts)) all.push(a);
  return all;
}

/**
 * {@link admitObjects} one result at a time, in the same order and with the same results: the training jobs are
 * admitted first (and held until their turn; the outfitted jobs are held anyway, for the pods' lookups), every
 * other input only when the result before it has been taken. It takes the inputs out of `given` (left empty) and
 * lets go of each once its results are taken, so a caller that writes each result out holds at the end no more
 * than the jobs. `onInput` is told after each input is admitted.
 */
export async function* admitEach(given: InputObject[], opts: AdmitOptions, onInput?: () => void): AsyncGenerator<Admitted> {
  const inputs = given.splice(0);
  const jobs = offlineJobs();
  const run = pipeline(opts, jobs);
  const offline: Offline = { run, jobs, opts };
  const defaultNamespace = opts.namespace ?? "default";
  const results = new Map<InputObject, Admitted[]>();

  const namespaceOf = (input: InputObject): string => metaOf(headOf(input)).namespace ?? defaultNamespace;
  const describe = (input: InputObject): Described => ({
    source: input.source,
    kind: String(input.object.kind),
    namespace: namespaceOf(input),
    name: metaOf(input.object).name ?? metaOf(input.object).generateName ?? "",
    original: input.object,
  });

  // The claims and templates among the inputs are what the pods' and jobs' claim lookups find (DRA), and the
  // Trainer runtimes what the TrainJobs' runtime lookups find: objects given together are resolved together.
  for (const input of inputs) {
    const claim = claimKindOf(headOf(input));
    if (claim) jobs.add(claim, namespaceOf(input), input.object);
    const runtime = runtimeKindOf(headOf(input));
    if (runtime) jobs.add(runtime.kind, runtime.clusterScoped ? "" : namespaceOf(input), input.object);
  }
  for (const raw of inputs) {
    const kind = jobKindOf(headOf(raw), opts.policy);
    if (!kind || SYSTEM_NAMESPACES.includes(namespaceOf(raw))) continue;
    const input = taken(raw);
    const admitted = await admitJob(input, describe(input), kind, offline);
    // Held until its turn without the job as given: a held input builds it again when asked.
    results.set(raw, raw instanceof HeldInput ? admitted.map((a) => (a.original === input.object ? withHeldOriginal(a, raw) : a)) : admitted);
    onInput?.();
  }
  // In input order, each let go of once taken: the rest kept reversed, the next one popped off the end.
  inputs.reverse();
  for (let raw = inputs.pop(); raw; raw = inputs.pop()) {
    const held = results.get(raw);
    if (held) {
      yield* held;
      continue;
    }
    const input = taken(raw);
    const admitted = await admitOther(input, describe(input), run);
    onInput?.();
    yield admitted;
  }
}

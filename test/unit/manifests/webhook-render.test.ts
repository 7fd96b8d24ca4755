/**
 * The webhook configurations rendered from the policy (src/manifests/webhooks.ts): the committed manifest is
 * the render of the built-in policy, the match conditions follow the policy's GPU patterns (and agree with
 * the glob matcher the mutations use), no pattern can break out of its CEL string, the selector is the
 * scope's, and every hook and rule the issue asks for is registered.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { matchesGlob } from "../../../src/core/glob.js";
import { generatedWebhookManifest, WEBHOOK_MANIFEST } from "../../../src/manifests/generate.js";
import {
  ALL_CONTAINERS,
  celString,
  globCondition,
  gpuWorkloadExpression,
  limitsOf,
  renderWebhookConfigurations,
  requestsOf,
  JOBS_OR_QUEUED_EXPRESSION,
  trainingPodExpression,
  type RenderedWebhook,
} from "../../../src/manifests/webhooks.js";
import { CONDITION_MAX_CONTAINERS, CONDITION_MAX_REPLICATED_JOBS, CONDITION_MAX_RESOURCES } from "../../../src/core/gpu.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";
import { namespaceScope, namespaceSelector } from "../../../src/core/scope.js";
import { ROOT } from "../../fixtures/manifests.js";

const policy = defaultPolicy();
const withPatterns = (...patterns: string[]): Policy => ({
  ...policy,
  gpu: { ...policy.gpu, resources: patterns.map((pattern) => ({ pattern, tolerations: [] })) },
});
const hooks = (p: Policy, ns?: string): RenderedWebhook[] => renderWebhookConfigurations(p, ns ? { namespace: ns } : {}).flatMap((c) => c.webhooks);
const hook = (p: Policy, name: string): RenderedWebhook => hooks(p).find((h) => h.name === name)!;

/**
 * Splits CEL source into its code (every string literal replaced by `S`) and the decoded values of its
 * single-quoted literals, following the CEL spec's escapes; throws on an unterminated literal.
 */
function lexCel(src: string): { code: string; strings: string[] } {
  let code = "";
  const strings: string[] = [];
  for (let i = 0; i < src.length;) {
    if (src[i] !== "'") {
      code += src[i++];
      continue;
    }
    let value = "";
    i++;
    for (;;) {
      if (i >= src.length) throw new Error(`unterminated string in ${src}`);
      const c = src[i]!;
      if (c === "'") break;
      if (c === "\n") throw new Error("newline in a single-quoted CEL string");
      if (c !== "\\") {
        value += c;
        i++;
        continue;
      }
      const e = src[i + 1]!;
      if (e === "\\" || e === "'" || e === '"' || e === "?" || e === "`") ((value += e), (i += 2));
      else if (e === "u") ((value += String.fromCodePoint(parseInt(src.slice(i + 2, i + 6), 16))), (i += 6));
      else if (e === "U") ((value += String.fromCodePoint(parseInt(src.slice(i + 2, i + 10), 16))), (i += 10));
      else if (e === "n") ((value += "\n"), (i += 2));
      else throw new Error(`unexpected escape \\${e}`);
    }
    i++;
    code += "S";
    strings.push(value);
  }
  return { code, strings };
}

/** Evaluates one globCondition on `name` (its four forms only; RE2 and JS agree on escaped literals and `.*`). */
function evalCondition(cond: string, name: string): boolean {
  const { code, strings } = lexCel(cond);
  const [s] = strings;
  switch (code) {
    case "true":
      return true;
    case "r == S":
      return name === s;
    case "r.startsWith(S)":
      return name.startsWith(s!);
    case "r.endsWith(S)":
      return name.endsWith(s!);
    case "r.matches(S)":
      return new RegExp(s!).test(name);
    default:
      throw new Error(`unexpected form ${code}`);
  }
}

describe("webhook configurations render", () => {
  it(`${WEBHOOK_MANIFEST} is the render of the built-in policy (run npm run generate)`, async () => {
    assert.equal(readFileSync(join(ROOT, WEBHOOK_MANIFEST), "utf8"), await generatedWebhookManifest());
  });

  it("the committed YAML parses back to the render", () => {
    const docs = parseAllDocuments(readFileSync(join(ROOT, WEBHOOK_MANIFEST), "utf8")).map((d) => d.toJS());
    assert.deepEqual(docs, renderWebhookConfigurations(policy));
  });

  it("registers the five webhooks with their paths, failure and reinvocation policies (the claims one only with GPU device classes)", () => {
    const got = hooks(policy).map((h) => [h.name, h.clientConfig.service.path, h.failurePolicy, h.reinvocationPolicy ?? "-", h.sideEffects, h.timeoutSeconds]);
    assert.deepEqual(got, [
      ["pods.mutate.quartermaster.dev", "/mutate/pods", "Ignore", "IfNeeded", "None", 5],
      ["jobs.mutate.quartermaster.dev", "/mutate/jobs", "Ignore", "IfNeeded", "None", 5],
      ["pods.validate.quartermaster.dev", "/validate/pods", "Fail", "-", "None", 5],
      // NoneOnDryRun: a refused Kueue admission writes an Event on the job (never on a dry run).
      ["jobs.validate.quartermaster.dev", "/validate/jobs", "Fail", "-", "NoneOnDryRun", 5],
      ["claims.validate.quartermaster.dev", "/validate/claims", "Fail", "-", "None", 5],
    ]);
    const withoutDra = hooks({ ...policy, gpu: { ...policy.gpu, deviceClasses: [] } }).map((h) => h.name);
    assert.ok(!withoutDra.includes("claims.validate.quartermaster.dev"));
    // Without device classes the match condition does not let pods through for their claims either.
    const condition = (p: typeof policy) => hooks(p).find((h) => h.name === "pods.validate.quartermaster.dev")!.matchConditions![0]!.expression;
    assert.match(condition(policy), /resourceClaims/);
    assert.doesNotMatch(condition({ ...policy, gpu: { ...policy.gpu, deviceClasses: [] } }), /resourceClaims/);
  });

  it("timeouts come from policy.webhook.timeoutSeconds", () => {
    assert.deepEqual(new Set(hooks({ ...policy, webhook: { ...policy.webhook, timeoutSeconds: 3 } }).map((h) => h.timeoutSeconds)), new Set([3]));
  });

  const resources = (h: RenderedWebhook, op: string) =>
    h.rules
      .filter((r) => r.operations.includes(op))
      .flatMap((r) => r.resources.map((res) => `${r.apiGroups[0]}/${r.apiVersions[0]}/${res}`))
      .sort();
  const kinds = (suffix = "") => policy.jobKinds.map((k) => `${k.group}/${k.version}/${k.plural}${suffix}`).sort();

  it("jobs.mutate: CREATE of every policy job kind, at its own version, and of the batch Jobs and JobSets Kueue queues", () => {
    assert.deepEqual(
      resources(hook(policy, "jobs.mutate.quartermaster.dev"), "CREATE"),
      [...kinds(), "batch/v1/jobs", "jobset.x-k8s.io/v1alpha2/jobsets"].sort(),
    );
    assert.deepEqual(resources(hook(policy, "jobs.mutate.quartermaster.dev"), "UPDATE"), []);
  });

  it("jobs.validate: CREATE/UPDATE of every job kind, of batch Jobs and JobSets and of the Trainer's runtimes, and UPDATE of each /scale", () => {
    const h = hook(policy, "jobs.validate.quartermaster.dev");
    // Batch Jobs and JobSets make GPU pods too (issue 45 finding 8): judged with the GPU rules, when they ask for GPUs.
    const workloads = ["batch/v1/jobs", "jobset.x-k8s.io/v1alpha2/jobsets"];
    // The Trainer's runtimes are checked themselves (issue 45), the ClusterTrainingRuntime cluster-scoped.
    const runtimes = ["trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", "trainer.kubeflow.org/v1alpha1/trainingruntimes"];
    assert.deepEqual(resources(h, "CREATE"), [...kinds(), ...workloads, ...runtimes].sort());
    // TrainJob's CRD has no scale subresource (only status): no /scale rule for it; nor for Jobs and JobSets.
    const scaled = kinds("/scale").filter((r) => !r.endsWith("/trainjobs/scale"));
    assert.deepEqual(resources(h, "UPDATE"), [...kinds(), ...scaled, ...workloads, ...runtimes].sort());
    assert.deepEqual(
      h.rules.filter((r) => r.resources.includes("clustertrainingruntimes")).map((r) => r.scope),
      ["Cluster"],
    );
    // Without a Trainer job kind, no runtime rule.
    const noTrainer = { ...policy, jobKinds: policy.jobKinds.filter((k) => k.framework !== "trainer") };
    assert.ok(!resources(hook(noTrainer, "jobs.validate.quartermaster.dev"), "CREATE").some((r) => r.includes("runtimes")));
  });

  it("pods.validate: CREATE of pods and UPDATE of pods/resize; pods.mutate: CREATE only", () => {
    assert.deepEqual(resources(hook(policy, "pods.validate.quartermaster.dev"), "CREATE"), ["/v1/pods"]);
    assert.deepEqual(resources(hook(policy, "pods.validate.quartermaster.dev"), "UPDATE"), ["/v1/pods/resize"]);
    assert.deepEqual(resources(hook(policy, "pods.mutate.quartermaster.dev"), "UPDATE"), []);
  });

  it("a job kind added to the policy is registered in all three job rules", () => {
    const p = {
      ...policy,
      jobKinds: [...policy.jobKinds, { kind: "MPIJob", group: "kubeflow.org", version: "v2beta1", plural: "mpijobs", framework: "pytorch" as const }],
    };
    for (const [name, op] of [
      ["jobs.mutate.quartermaster.dev", "CREATE"],
      ["jobs.validate.quartermaster.dev", "CREATE"],
      ["jobs.validate.quartermaster.dev", "UPDATE"],
    ] as const) {
      assert.ok(resources(hook(p, name), op).includes("kubeflow.org/v2beta1/mpijobs"), `${name} ${op}`);
    }
    assert.ok(resources(hook(p, "jobs.validate.quartermaster.dev"), "UPDATE").includes("kubeflow.org/v2beta1/mpijobs/scale"));
  });

  it("every webhook's namespaceSelector is the scope's, for the namespace rendered", () => {
    for (const ns of ["quartermaster", "platform"]) {
      for (const h of hooks(policy, ns)) {
        assert.deepEqual(h.namespaceSelector, namespaceSelector(namespaceScope(ns)), h.name);
        assert.equal(h.clientConfig.service.namespace, ns);
      }
    }
  });

  it("no caBundle unless one is given", () => {
    assert.ok(hooks(policy).every((h) => h.clientConfig.caBundle === undefined));
    assert.ok(
      renderWebhookConfigurations(policy, { caBundle: "Q0E=" })
        .flatMap((c) => c.webhooks)
        .every((h) => h.clientConfig.caBundle === "Q0E="),
    );
  });

  it("the pod webhooks share one training-pods-only condition, bounded; jobs.mutate passes training jobs and queued objects; jobs.validate training jobs and GPU workloads", () => {
    const expression = trainingPodExpression(policy, { bounded: true });
    for (const h of hooks(policy)) {
      if (h.name.startsWith("pods.")) assert.deepEqual(h.matchConditions, [{ name: "training-pods-only", expression }]);
      else if (h.name === "jobs.mutate.quartermaster.dev")
        assert.deepEqual(h.matchConditions, [{ name: "training-jobs-or-queued", expression: JOBS_OR_QUEUED_EXPRESSION }]);
      else if (h.name === "jobs.validate.quartermaster.dev")
        assert.deepEqual(h.matchConditions, [{ name: "training-jobs-or-gpu-workloads", expression: gpuWorkloadExpression(policy) }]);
      else assert.equal(h.matchConditions, undefined);
    }
  });
});

describe("training-pods-only expression", () => {
  const cases: Array<{ name: string; patterns: string[]; has: string[]; hasNot: string[] }> = [
    {
      name: "built-in policy",
      patterns: policy.gpu.resources.map((r) => r.pattern),
      has: ["r == 'nvidia.com/gpu'", "r.startsWith('nvidia.com/mig-')", "r == 'amd.com/gpu'", "r == 'gpu'"],
      hasNot: ["intel.com", "r.startsWith('nvidia.com/')"],
    },
    {
      name: "a pattern added to the policy reaches the CEL",
      patterns: ["nvidia.com/gpu", "intel.com/gpu"],
      has: ["r == 'intel.com/gpu'"],
      hasNot: ["r == 'amd.com/gpu'"],
    },
    { name: "a suffix pattern", patterns: ["*/gpu"], has: ["r.endsWith('/gpu')"], hasNot: [] },
    { name: "a pattern with a star inside", patterns: ["example.com/gpu-*-shared"], has: ["r.matches('^example\\\\.com/gpu-.*-shared$')"], hasNot: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const e = trainingPodExpression(withPatterns(...c.patterns));
      for (const s of c.has) assert.ok(e.includes(s), `missing ${s} in\n${e}`);
      for (const s of c.hasNot) assert.ok(!e.includes(s), `unexpected ${s} in\n${e}`);
    });
  }

  it("matches pods of Kubeflow jobs and of caffe2-operator by their labels", () => {
    const e = trainingPodExpression(policy);
    assert.ok(e.includes("'training.kubeflow.org/job-name' in object.metadata.?labels.orValue({})"));
    assert.ok(e.includes("'caffe2_job_key' in object.metadata.?labels.orValue({}) && 'group_name' in object.metadata.?labels.orValue({})"));
    const noCaffe2 = trainingPodExpression({ ...policy, jobKinds: policy.jobKinds.filter((k) => k.framework !== "caffe2") });
    assert.ok(!noCaffe2.includes("caffe2_job_key"));
  });

  it("its string literals are all well formed", () => {
    assert.doesNotThrow(() => lexCel(trainingPodExpression(policy)));
    assert.doesNotThrow(() => lexCel(trainingPodExpression(policy, { bounded: true })));
  });

  it("bounded: a pod wider than the bounds is sent on before any container is walked", () => {
    const e = trainingPodExpression(policy, { bounded: true });
    const containers = `size${ALL_CONTAINERS} > ${CONDITION_MAX_CONTAINERS}`;
    const entries = `size(${requestsOf("c")}) + size(${limitsOf("c")}) > ${CONDITION_MAX_RESOURCES} || `;
    assert.ok(e.includes(containers), e);
    assert.ok(e.indexOf(containers) < e.indexOf(".exists(c,"), "the container count is tested before the walk");
    assert.ok(e.includes(`.exists(c, ${entries}`), "each container's width is tested before its resources are");
    // The VAP's training test (src/manifests/vap.ts) is the webhooks' guard, exactly: no bounds.
    assert.ok(!trainingPodExpression(policy).includes(`> ${CONDITION_MAX_CONTAINERS}`));
  });
});

describe("glob patterns in CEL", () => {
  const patterns = ["nvidia.com/gpu", "nvidia.com/mig-*", "*/gpu", "a*b*c", "*", "x.y+z?(w)[v]{2}|^$\\*", "example.com/gpu-*-shared"];
  const names = [
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.5gb",
    "nvidia.comXgpu",
    "amd.com/gpu",
    "abc",
    "aXbYc",
    "acb",
    "",
    "x.y+z?(w)[v]{2}|^$\\anything",
    "example.com/gpu-a100-shared",
    "example.com/gpu--shared",
    "exampleXcom/gpu-a-shared",
  ];
  for (const p of patterns) {
    it(`${JSON.stringify(p)} agrees with the glob matcher on every name`, () => {
      const cond = globCondition("r", p);
      for (const n of names) assert.equal(evalCondition(cond, n), matchesGlob(p, n), `${cond} on ${JSON.stringify(n)}`);
    });
  }

  const hostile: Array<{ name: string; pattern: string; benign: string }> = [
    { name: "a quote that would end the string", pattern: "x') || true || ('", benign: "xyz" },
    { name: "a backslash before the closing quote", pattern: "evil\\", benign: "good" },
    { name: "an escaped quote", pattern: "a\\'b", benign: "abcd" },
    { name: "a newline", pattern: "a\nb", benign: "abc" },
    { name: "a double quote and a backtick", pattern: 'a"b`c', benign: "abcde" },
    { name: "non-ASCII", pattern: "gpü/𝔾", benign: "gpu/G" },
    { name: "a quote in a prefix pattern", pattern: "x')||true||('*", benign: "abc*" },
    { name: "a quote in a regex pattern", pattern: "a*')||true||('*b", benign: "a*c*b" },
  ];
  for (const h of hostile) {
    it(`cannot break out of the string: ${h.name}`, () => {
      const cond = globCondition("r", h.pattern);
      const lexed = lexCel(cond);
      assert.equal(lexed.code, lexCel(globCondition("r", h.benign)).code, `the code around the literal changed: ${cond}`);
      assert.equal(lexed.strings.length, 1);
      const value = lexed.strings[0]!;
      if (lexed.code === "r == S") assert.equal(value, h.pattern);
      for (const n of [h.pattern, h.pattern.replaceAll("*", "ZZ"), "x", ""])
        assert.equal(evalCondition(cond, n), matchesGlob(h.pattern, n), `${cond} on ${JSON.stringify(n)}`);
    });
  }

  it("celString round-trips through the CEL lexer", () => {
    for (const s of ["", "'", "\\", "\\'", "\u0000\u001f\u007f", "é", "😀", "a'b\\c"]) assert.deepEqual(lexCel(celString(s)).strings, [s]);
  });

  it("celString refuses a lone surrogate", () => {
    assert.throws(() => celString("\ud800"), /lone surrogate/);
  });
});

// Its meaning is checked against kube-apiserver's CEL (k8s.io/apiserver v0.37.2's environment) outside the unit
// suite; here, its form: every literal well formed, the policy's patterns in both walks, the bounds before them.
describe("training-jobs-or-gpu-workloads expression (jobs.validate)", () => {
  it("passes every training job, and a batch Job or JobSet only by its templates", () => {
    const e = gpuWorkloadExpression(policy);
    assert.doesNotThrow(() => lexCel(e));
    assert.ok(e.startsWith("!(request.resource.group + '/' + request.resource.resource in ['batch/jobs', 'jobset.x-k8s.io/jobsets']) ||"), e);
    assert.ok(e.includes("request.resource.resource == 'jobs' && ("));
    assert.ok(e.includes("request.resource.resource == 'jobsets' && ("));
  });

  it("each GPU pattern of the policy is tested in a Job's template and in every replicated Job's", () => {
    const e = gpuWorkloadExpression(withPatterns("nvidia.com/gpu", "intel.com/gpu"));
    for (const p of ["nvidia.com/gpu", "intel.com/gpu"]) assert.equal(e.split(globCondition("r", p)).length - 1, 2, p);
    assert.ok(e.includes("object.spec.?template.?spec.?containers.orValue([])"));
    assert.ok(e.includes("object.spec.?replicatedJobs.orValue([]).exists(j, "));
    assert.ok(e.includes("j.?template.?spec.?template.?spec.?containers.orValue([])"));
  });

  it("bounded: replicated Jobs, containers over all templates and entries per container are counted before the walk", () => {
    const e = gpuWorkloadExpression(policy);
    const walk = e.indexOf("object.spec.?replicatedJobs.orValue([]).exists(j, ");
    for (const bound of [`size(object.spec.?replicatedJobs.orValue([])) > ${CONDITION_MAX_REPLICATED_JOBS}`, `.sum() > ${CONDITION_MAX_CONTAINERS}`])
      assert.ok(e.includes(bound) && e.indexOf(bound) < walk, bound);
    assert.ok(
      e.includes(
        `size(object.spec.?template.?spec.?initContainers.orValue([]) + object.spec.?template.?spec.?containers.orValue([])) > ${CONDITION_MAX_CONTAINERS}`,
      ),
    );
    assert.equal(e.split(`.exists(c, size(${requestsOf("c")}) + size(${limitsOf("c")}) > ${CONDITION_MAX_RESOURCES} || `).length - 1, 2);
  });

  it("names ResourceClaims only when the policy knows GPU device classes", () => {
    assert.match(gpuWorkloadExpression(policy), /resourceClaims/);
    assert.doesNotMatch(gpuWorkloadExpression({ ...policy, gpu: { ...policy.gpu, deviceClasses: [] } }), /resourceClaims/);
  });
});

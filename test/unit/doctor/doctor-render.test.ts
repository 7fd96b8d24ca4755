/**
 * doctor's `webhook-render` check: the registered webhook configurations against the render of the loaded
 * policy (rules, namespaceSelector, matchConditions), as a table of one change each.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DoctorSnapshot, WebhookEntry as Webhook, WebhookConfiguration } from "../../../src/doctor/types.js";
import { checkWebhooks, expectedWebhooks, renderDifferences } from "../../../src/doctor/webhooks.js";
import { renderWebhookConfigurations, type WebhookPolicy } from "../../../src/manifests/webhooks.js";
import { defaultPolicy } from "../../../src/policy/load.js";

/**
 * The built-in policy without GPU device classes: the four webhooks these cases enumerate. With them (the
 * default) the claims webhook joins; "the claims webhook" below shows doctor expecting it.
 */
function policyWithoutDra(): ReturnType<typeof defaultPolicy> {
  const p = defaultPolicy();
  return { ...p, gpu: { ...p.gpu, deviceClasses: [] } };
}

const NS = "quartermaster";
const POLICY = policyWithoutDra();
const MUTATE = "pods.mutate.quartermaster.dev";
const JMUTATE = "jobs.mutate.quartermaster.dev";
const PODS = "pods.validate.quartermaster.dev";
const JOBS = "jobs.validate.quartermaster.dev";

function snapshot(configs: WebhookConfiguration[], namespace = NS): DoctorSnapshot {
  return {
    now: new Date(),
    namespace,
    webhookConfigurations: configs,
    services: {},
    certificates: {},
    protectedNamespaces: {},
    reconciler: { jobs: [] },
    ledger: "absent",
    access: [],
  };
}
const registered = (p: WebhookPolicy = POLICY, namespace = NS): WebhookConfiguration[] =>
  renderWebhookConfigurations(p, { namespace, caBundle: "Q0E=" }).map((c) => structuredClone(c) as WebhookConfiguration);
const hook = (configs: WebhookConfiguration[], name: string): Webhook => configs.flatMap((c) => c.webhooks ?? []).find((h) => h.name === name)!;
const renderFindings = (configs: WebhookConfiguration[], p: WebhookPolicy = POLICY, namespace = NS) =>
  checkWebhooks(snapshot(configs, namespace), p).filter((f) => f.check === "webhook-render");
const notOk = (configs: WebhookConfiguration[], p?: WebhookPolicy, ns?: string): string[] =>
  renderFindings(configs, p, ns)
    .filter((f) => f.severity !== "ok")
    .map((f) => `${f.severity} ${f.subject}`);

const withGpu = (pattern: string): WebhookPolicy => ({ ...POLICY, gpu: { ...POLICY.gpu, resources: [...POLICY.gpu.resources, { pattern, tolerations: [] }] } });

interface Case {
  name: string;
  /** Changes the registered configurations (rendered from the built-in policy). */
  change?: (c: WebhookConfiguration[]) => void;
  /** The policy doctor is run with (default: the built-in one). */
  policy?: WebhookPolicy;
  namespace?: string;
  want: string[];
  message?: RegExp;
}

const cases: Case[] = [
  { name: "registered as rendered → ok for each of the four", want: [] },
  {
    name: "selector values and requirements in another order → ok",
    change: (c) => {
      const sel = hook(c, PODS).namespaceSelector!;
      sel.matchExpressions!.reverse();
      sel.matchExpressions![0]!.values!.reverse();
    },
    want: [],
  },
  {
    name: "CEL reflowed (whitespace only) → ok",
    change: (c) => (hook(c, PODS).matchConditions![0]!.expression = hook(c, PODS).matchConditions![0]!.expression.replace(/\n\s*/g, " ")),
    want: [],
  },
  {
    name: "a GPU pattern added to the policy, configurations not re-applied → both pod webhooks and jobs.validate (its GPU-workload condition)",
    policy: withGpu("intel.com/gpu"),
    want: [`warning ${MUTATE}`, `warning ${PODS}`, `warning ${JOBS}`],
    message: /matchConditions training-pods-only differ from the policy's/,
  },
  {
    name: "the hard-coded matchConditions of earlier releases → warning",
    change: (c) =>
      (hook(c, PODS).matchConditions = [
        {
          name: "training-pods-only",
          expression: "object.spec.containers.exists(c, has(c.resources) && c.resources.limits.exists(r, r.startsWith('nvidia.com/')))",
        },
      ]),
    want: [`warning ${PODS}`],
  },
  {
    name: "matchConditions removed → warning naming what is missing",
    change: (c) => delete hook(c, MUTATE).matchConditions,
    want: [`warning ${MUTATE}`],
    message: /matchConditions are \[none\], the policy's are \[training-pods-only\]/,
  },
  {
    name: "pods/resize not registered → warning naming the rule",
    change: (c) => (hook(c, PODS).rules = hook(c, PODS).rules!.filter((r) => !r.resources!.includes("pods/resize"))),
    want: [`warning ${PODS}`],
    message: /rules lack core\/v1 UPDATE pods\/resize \(Namespaced\)/,
  },
  {
    name: "the /scale rules missing → warning",
    change: (c) => (hook(c, JOBS).rules = hook(c, JOBS).rules!.filter((r) => !r.resources!.some((x) => x.endsWith("/scale")))),
    want: [`warning ${JOBS}`],
    message: /rules lack .*kubeflow\.org\/v1 UPDATE tfjobs\/scale/,
  },
  {
    name: "a rule the policy does not have → warning",
    change: (c) =>
      hook(c, JMUTATE).rules!.push({ apiGroups: ["kubeflow.org"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["mpijobs"], scope: "Namespaced" }),
    want: [`warning ${JMUTATE}`],
    message: /rules also match kubeflow\.org\/v1 CREATE mpijobs \(Namespaced\), which the policy does not/,
  },
  {
    name: "one rule split in two, same combinations → ok",
    change: (c) => {
      const [first, ...rest] = hook(c, JMUTATE).rules!;
      hook(c, JMUTATE).rules = [{ ...first!, resources: first!.resources!.slice(0, 2) }, { ...first!, resources: first!.resources!.slice(2) }, ...rest];
    },
    want: [],
  },
  {
    name: "a job kind added to the policy → every job webhook",
    policy: {
      ...POLICY,
      jobKinds: [...POLICY.jobKinds, { kind: "MPIJob", group: "kubeflow.org", version: "v2beta1", plural: "mpijobs", framework: "pytorch" }],
    },
    want: [`warning ${JMUTATE}`, `warning ${JOBS}`],
  },
  {
    name: "a namespaceSelector that is not the scope's → warning",
    change: (c) => (hook(c, JMUTATE).namespaceSelector = { matchLabels: { "quartermaster.dev/enabled": "true" } }),
    want: [`warning ${JMUTATE}`],
    message: /namespaceSelector is quartermaster\.dev\/enabled=true, the scope's is/,
  },
  {
    name: "rendered for another namespace than doctor's → every webhook's selector",
    namespace: "platform",
    want: [`warning ${MUTATE}`, `warning ${JMUTATE}`, `warning ${PODS}`, `warning ${JOBS}`],
  },
  {
    name: "a webhook the render does not have → warning",
    change: (c) => c[1]!.webhooks!.push({ ...structuredClone(hook(c, JOBS)), name: "old.validate.quartermaster.dev" }),
    want: ["warning old.validate.quartermaster.dev"],
    message: /the policy's render has no such webhook/,
  },
  { name: "a webhook missing → left to the webhook-configuration check", change: (c) => c[0]!.webhooks!.pop(), want: [] },
];

describe("doctor: webhook-render", () => {
  for (const c of cases) {
    it(c.name, () => {
      const configs = registered();
      c.change?.(configs);
      const findings = renderFindings(configs, c.policy, c.namespace);
      assert.deepEqual(notOk(configs, c.policy, c.namespace), c.want);
      if (c.message)
        assert.ok(
          findings.some((f) => c.message!.test(f.message)),
          findings.map((f) => f.message).join("\n"),
        );
      for (const f of findings) assert.equal(f.fix === "", f.severity === "ok", `${f.subject}: a fix exactly when there is something to do`);
      if (c.want.length === 0 && !c.change?.toString().includes("pop")) assert.equal(findings.filter((f) => f.severity === "ok").length, 4);
    });
  }

  it("the expected webhooks come from the render: a policy without job kinds still expects the pod webhooks", () => {
    assert.deepEqual(
      expectedWebhooks(POLICY, NS).map((e) => `${e.kind} ${e.name}`),
      [
        `MutatingWebhookConfiguration ${MUTATE}`,
        `MutatingWebhookConfiguration ${JMUTATE}`,
        `ValidatingWebhookConfiguration ${PODS}`,
        `ValidatingWebhookConfiguration ${JOBS}`,
      ],
    );
    for (const e of expectedWebhooks(POLICY, NS)) assert.ok(!/its checks do not run/.test(e.lost), e.name);
  });

  it("the claims webhook: the built-in policy's GPU device classes add /validate/claims (Fail), and doctor expects it", () => {
    const expected = expectedWebhooks(defaultPolicy(), NS);
    const claims = expected.find((e) => e.name === "claims.validate.quartermaster.dev");
    assert.ok(claims, "expected among the webhooks");
    assert.equal(claims.kind, "ValidatingWebhookConfiguration");
    assert.equal(claims.hook.failurePolicy, "Fail");
    assert.equal(claims.hook.clientConfig.service.path, "/validate/claims");
    assert.deepEqual(claims.hook.rules, [
      {
        apiGroups: ["resource.k8s.io"],
        apiVersions: ["v1"],
        operations: ["CREATE"],
        resources: ["resourceclaims", "resourceclaimtemplates"],
        scope: "Namespaced",
      },
    ]);
    assert.match(claims.lost, /ResourceClaims/);
    // Registered without it: doctor names it missing.
    const [m, v] = renderWebhookConfigurations(defaultPolicy(), { namespace: NS });
    v.webhooks = v.webhooks.filter((h) => h.name !== claims.name);
    const findings = checkWebhooks(snapshot([m, v] as WebhookConfiguration[]), defaultPolicy());
    assert.ok(
      findings.some((f) => f.severity !== "ok" && f.message.includes("ResourceClaims")),
      JSON.stringify(findings.map((f) => f.message)),
    );
  });

  it("renderDifferences is empty for a hook against itself and names each field that differs", () => {
    const [m] = renderWebhookConfigurations(POLICY);
    const h = m.webhooks[0]!;
    assert.deepEqual(renderDifferences(structuredClone(h), h), []);
    const changed = { ...structuredClone(h), rules: [], namespaceSelector: {}, matchConditions: [] } as Webhook;
    assert.equal(renderDifferences(changed, h).length, 3);
  });
});

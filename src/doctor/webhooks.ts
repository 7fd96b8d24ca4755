/**
 * @module
 * Checks of Quartermaster's webhook configurations against what would make them an outage: a webhook
 * missing, a `Fail` webhook whose Service has no ready endpoint (every matching request refused), a
 * caBundle that does not verify the certificate the server presents (same), certificates about to
 * expire, a namespaceSelector that reaches kube-system or Quartermaster's own namespace, side effects
 * that break dry runs, and timeouts that stall pod creation. Severity follows the failure policy: what
 * refuses requests under `Fail` only skips the webhook under `Ignore`.
 */
import type { X509Certificate } from "node:crypto";
import { altNames, chainsTo, commonName, coversHost, daysLeft, describeExpiry, expirySeverity, keyMatches, parsePemBundle } from "./certs.js";
import { describeSelector, excludesByName, NAMESPACE_NAME_LABEL, selectorMatches } from "../core/selector.js";
import { renderWebhookConfigurations, WEBHOOK_PURPOSE, type RenderedWebhook, type WebhookPolicy } from "../manifests/webhooks.js";
import { namespaceScope } from "../core/scope.js";
import type { LabelSelector } from "../core/selector.js";
import {
  isUnreadable,
  targetKey,
  type CertificateEvidence,
  type DoctorSnapshot,
  type DoctorFinding,
  type ServiceState,
  type Severity,
  type WebhookEntry,
  type WebhookConfiguration,
} from "./types.js";

/** The webhooks the policy's render registers (src/manifests/webhooks.ts), and what is lost without each. */
export function expectedWebhooks(
  policy: WebhookPolicy,
  namespace: string,
): Array<{ kind: WebhookConfiguration["kind"]; name: string; lost: string; hook: RenderedWebhook }> {
  return renderWebhookConfigurations(policy, { namespace }).flatMap((c) =>
    c.webhooks.map((hook) => ({ kind: c.kind, name: hook.name, lost: WEBHOOK_PURPOSE[hook.name] ?? "its checks do not run", hook })),
  );
}

const APPLY_FIX = "kubectl apply -k manifests/base (or your overlay)";

interface HookRef {
  config: WebhookConfiguration;
  hook: WebhookEntry;
  failClosed: boolean;
  /** The severity of anything that makes calls to this webhook fail. */
  outage: Severity;
}

function refs(configs: readonly WebhookConfiguration[]): HookRef[] {
  return configs.flatMap((config) =>
    (config.webhooks ?? []).map((hook) => {
      // failurePolicy defaults to Fail in admissionregistration.k8s.io/v1.
      const failClosed = (hook.failurePolicy ?? "Fail") === "Fail";
      return { config, hook, failClosed, outage: failClosed ? ("critical" as const) : ("warning" as const) };
    }),
  );
}

function consequence(r: HookRef): string {
  return r.failClosed ? "every request it matches is refused (failurePolicy Fail)" : "requests it matches skip it (failurePolicy Ignore)";
}

function configurationFindings(
  configs: readonly WebhookConfiguration[],
  hooks: readonly HookRef[],
  expected: ReturnType<typeof expectedWebhooks>,
): DoctorFinding[] {
  const out: DoctorFinding[] = [];
  for (const e of expected) {
    const found = hooks.find((r) => r.hook.name === e.name && r.config.kind === e.kind);
    if (!found) {
      out.push({ check: "webhook-configuration", severity: "warning", subject: e.name, message: `not registered in any ${e.kind}: ${e.lost}`, fix: APPLY_FIX });
    }
  }
  if (configs.length === 0) return out;
  for (const r of hooks) {
    const { hook } = r;
    const where = `${r.config.kind}/${r.config.metadata.name}`;
    const problems: string[] = [];
    const versions = hook.admissionReviewVersions ?? [];
    if (!versions.includes("v1")) problems.push(`admissionReviewVersions [${versions.join(", ")}] lacks v1, the only version Quartermaster answers`);
    if (!hook.clientConfig.service && !hook.clientConfig.url) problems.push("clientConfig names neither a service nor a url");
    out.push(
      problems.length > 0
        ? {
            check: "webhook-configuration",
            severity: r.outage,
            subject: hook.name,
            message: `${where}: ${problems.join("; ")}: ${consequence(r)}`,
            fix: `restore the webhook from manifests/base: ${APPLY_FIX}`,
          }
        : {
            check: "webhook-configuration",
            severity: "ok",
            subject: hook.name,
            message: `registered in ${where}, failurePolicy ${r.failClosed ? "Fail" : "Ignore"}`,
            fix: "",
          },
    );
  }
  return out;
}

// ---- registered vs rendered -----------------------------------------------------------------------------

/** `group/version/operation/resource/scope` for every combination a webhook's rules match (the apiserver's defaults: scope `*`). */
function ruleTuples(rules: WebhookEntry["rules"]): string[] {
  const out = new Set<string>();
  for (const r of rules ?? []) {
    for (const g of r.apiGroups ?? [])
      for (const v of r.apiVersions ?? [])
        for (const o of r.operations ?? []) for (const res of r.resources ?? []) out.add(`${g || "core"}/${v} ${o} ${res} (${r.scope ?? "*"})`);
  }
  return [...out].sort();
}

/** A selector with its requirements and values in a fixed order, for comparison. */
function canonicalSelector(sel: LabelSelector | undefined): string {
  const labels = Object.entries(sel?.matchLabels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const exprs = (sel?.matchExpressions ?? []).map((e) => `${e.key} ${e.operator} ${[...(e.values ?? [])].sort().join(",")}`).sort();
  return JSON.stringify({ labels, exprs });
}

/** CEL is compared with its whitespace collapsed (YAML folding and indentation change none of its meaning here). */
const canonicalConditions = (conds: WebhookEntry["matchConditions"]): string[] =>
  (conds ?? []).map((c) => `${c.name}: ${c.expression.replace(/\s+/g, " ").trim()}`).sort();

const setDiff = (a: readonly string[], b: readonly string[]): string[] => a.filter((x) => !b.includes(x));

/** What in `have` differs from the render `want`: rules, namespaceSelector, matchConditions. */
export function renderDifferences(have: WebhookEntry, want: RenderedWebhook): string[] {
  const problems: string[] = [];
  const [h, w] = [ruleTuples(have.rules), ruleTuples(want.rules)];
  const missing = setDiff(w, h);
  const extra = setDiff(h, w);
  if (missing.length > 0) problems.push(`rules lack ${missing.join(", ")}`);
  if (extra.length > 0) problems.push(`rules also match ${extra.join(", ")}, which the policy does not`);
  if (canonicalSelector(have.namespaceSelector) !== canonicalSelector(want.namespaceSelector)) {
    problems.push(`namespaceSelector is ${describeSelector(have.namespaceSelector)}, the scope's is ${describeSelector(want.namespaceSelector)}`);
  }
  const [hc, wc] = [canonicalConditions(have.matchConditions), canonicalConditions(want.matchConditions)];
  if (hc.join("\n") !== wc.join("\n")) {
    const names = (c: WebhookEntry["matchConditions"]) => (c ?? []).map((x) => x.name).join(", ") || "none";
    problems.push(
      names(have.matchConditions) === names(want.matchConditions)
        ? `matchConditions ${names(want.matchConditions)} differ from the policy's (its GPU resource patterns or job labels changed)`
        : `matchConditions are [${names(have.matchConditions)}], the policy's are [${names(want.matchConditions)}]`,
    );
  }
  return problems;
}

function renderFindings(hooks: readonly HookRef[], expected: ReturnType<typeof expectedWebhooks>, namespace: string): DoctorFinding[] {
  const fix = `quartermaster manifests webhooks --policy <the policy> --namespace ${namespace} | kubectl apply -f - (the caBundle is kept)`;
  const out: DoctorFinding[] = [];
  for (const e of expected) {
    const found = hooks.find((r) => r.hook.name === e.name && r.config.kind === e.kind);
    if (!found) continue; // reported by webhook-configuration
    const problems = renderDifferences(found.hook, e.hook);
    out.push(
      problems.length > 0
        ? {
            check: "webhook-render",
            severity: "warning",
            subject: e.name,
            message: `${e.kind}/${found.config.metadata.name} disagrees with the policy: ${problems.join("; ")}`,
            fix,
          }
        : {
            check: "webhook-render",
            severity: "ok",
            subject: e.name,
            message: "rules, namespaceSelector and matchConditions as the policy renders them",
            fix: "",
          },
    );
  }
  for (const r of hooks) {
    if (expected.some((e) => e.name === r.hook.name && e.kind === r.config.kind)) continue;
    out.push({
      check: "webhook-render",
      severity: "warning",
      subject: r.hook.name,
      message: `${r.config.kind}/${r.config.metadata.name} registers it, but the policy's render has no such webhook: ${consequence(r)}`,
      fix: `remove it (kubectl edit ${r.config.kind.toLowerCase()} ${r.config.metadata.name}), or ${fix}`,
    });
  }
  return out;
}

/** The ready addresses behind a Service port, from its EndpointSlices, or why there are none. */
export function readyAddresses(state: ServiceState, port: number): { addresses: string[]; notReady: number } | { problem: string } {
  const svc = state.service;
  if (!svc) return { problem: "the Service does not exist" };
  const servicePort = (svc.spec?.ports ?? []).find((p) => p.port === port);
  if (!servicePort) return { problem: `the Service has no port ${port} (ports: ${(svc.spec?.ports ?? []).map((p) => p.port).join(", ") || "none"})` };
  const portName = servicePort.name ?? "";
  const addresses: string[] = [];
  let notReady = 0;
  for (const slice of state.endpointSlices) {
    if (!(slice.ports ?? []).some((p) => (p.name ?? "") === portName)) continue;
    for (const ep of slice.endpoints ?? []) {
      // A nil ready condition means unknown, which consumers treat as ready (discovery/v1 EndpointConditions).
      if (ep.conditions?.ready === false) notReady += ep.addresses.length;
      else addresses.push(...ep.addresses);
    }
  }
  return { addresses, notReady };
}

function endpointFindings(s: DoctorSnapshot, hooks: readonly HookRef[]): DoctorFinding[] {
  return hooks.flatMap((r): DoctorFinding[] => {
    const { hook } = r;
    const svcRef = hook.clientConfig.service;
    if (svcRef) {
      const name = `${svcRef.namespace}/${svcRef.name}`;
      const state = s.services[name];
      if (!state || isUnreadable(state)) {
        return [
          {
            check: "endpoints",
            severity: "warning",
            subject: hook.name,
            message: `not checked: Service ${name} could not be read: ${state ? state.error : "not read"}`,
            fix: "run doctor with read access to services and endpointslices",
          },
        ];
      }
      if (state.service?.spec?.type === "ExternalName") {
        return [
          {
            check: "endpoints",
            severity: "info",
            subject: hook.name,
            message: `Service ${name} is an ExternalName service; its endpoints are outside the cluster and not checked`,
            fix: "",
          },
        ];
      }
      const ready = readyAddresses(state, svcRef.port ?? 443);
      if ("problem" in ready) {
        return [
          { check: "endpoints", severity: r.outage, subject: hook.name, message: `Service ${name}: ${ready.problem}: ${consequence(r)}`, fix: APPLY_FIX },
        ];
      }
      if (ready.addresses.length === 0) {
        return [
          {
            check: "endpoints",
            severity: r.outage,
            subject: hook.name,
            message: `Service ${name} has no ready endpoint${ready.notReady > 0 ? ` (${ready.notReady} not ready)` : ""}: ${consequence(r)}`,
            fix: `kubectl -n ${svcRef.namespace} get deploy,pods -l app.kubernetes.io/component=webhook; scale the webhook Deployment up or fix its pods`,
          },
        ];
      }
      return [
        {
          check: "endpoints",
          severity: "ok",
          subject: hook.name,
          message: `Service ${name}: ${ready.addresses.length} ready endpoint${ready.addresses.length === 1 ? "" : "s"}`,
          fix: "",
        },
      ];
    }
    const url = hook.clientConfig.url;
    if (!url) return [];
    const handshakes = (s.certificates[`url:${url}`] ?? []).filter((e) => e.source === "handshake");
    const answered = handshakes.find((e) => !("error" in e));
    if (answered) return [{ check: "endpoints", severity: "ok", subject: hook.name, message: `a server answers at ${url}`, fix: "" }];
    const why = handshakes.map((e) => ("error" in e ? e.error : "")).join("; ") || "not probed";
    return [
      {
        check: "endpoints",
        severity: r.outage,
        subject: hook.name,
        message: `no server answers at ${url} (${why}): ${consequence(r)}`,
        fix: "start the webhook server at that address, or point clientConfig at the Service",
      },
    ];
  });
}

/** The host name the apiserver's TLS client checks the served certificate against. */
export function expectedHost(hook: WebhookEntry): string | undefined {
  const { service, url } = hook.clientConfig;
  if (service) return `${service.name}.${service.namespace}.svc`;
  if (url) {
    try {
      return new URL(url).hostname;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The leaf (and any intermediates) a piece of evidence holds, or why there is none. */
function evidenceChain(e: CertificateEvidence): { chain: X509Certificate[]; where: string; keyPem?: string } | { where: string; error: string } {
  const where = e.source === "handshake" ? `served at ${e.address ?? "?"}` : `in Secret ${e.secret ?? "?"}`;
  if ("error" in e) return { where, error: e.error };
  try {
    if (e.source === "handshake") return { chain: e.chainPem.flatMap((p) => parsePemBundle(p)), where };
    return { chain: parsePemBundle(e.certPem), where, keyPem: e.keyPem };
  } catch (err) {
    return { where, error: `the certificate does not parse: ${(err as Error).message}` };
  }
}

/** The CAs in a webhook's caBundle, or why they cannot be had. */
export function bundleCertificates(hook: WebhookEntry): X509Certificate[] | { problem: string } {
  const b64 = hook.clientConfig.caBundle;
  if (!b64) return { problem: "caBundle is empty, so the apiserver checks the server against its system roots, which do not hold Quartermaster's CA" };
  try {
    return parsePemBundle(Buffer.from(b64, "base64").toString("utf8"));
  } catch (err) {
    return { problem: `caBundle does not parse: ${(err as Error).message}` };
  }
}

function caBundleFindings(s: DoctorSnapshot, hooks: readonly HookRef[]): DoctorFinding[] {
  return hooks.flatMap((r): DoctorFinding[] => {
    const { hook } = r;
    const key = targetKey(hook);
    if (!key) return [];
    const fix =
      "put the CA that signed the serving certificate into caBundle: quartermaster certs install --ca CA.crt (or let cert-manager's CA injector do it)";
    const roots = bundleCertificates(hook);
    if (!Array.isArray(roots)) return [{ check: "ca-bundle", severity: r.outage, subject: hook.name, message: `${roots.problem}: ${consequence(r)}`, fix }];
    const svc = hook.clientConfig.service;
    const state = svc ? s.services[`${svc.namespace}/${svc.name}`] : undefined;
    if (state && !isUnreadable(state) && state.service?.spec?.type === "ExternalName") {
      return [
        {
          check: "ca-bundle",
          severity: "info",
          subject: hook.name,
          message: `Service ${svc!.namespace}/${svc!.name} is an ExternalName service: TLS is served beyond it (Knative's gateway, say), not checked here`,
          fix: "",
        },
      ];
    }
    const evidence = (s.certificates[key] ?? []).map(evidenceChain);
    const usable = evidence.filter((e): e is Extract<typeof e, { chain: X509Certificate[] }> => "chain" in e);
    if (usable.length === 0) {
      const why = evidence.map((e) => `${e.where}: ${"error" in e ? e.error : ""}`).join("; ") || "no serving Secret or server found";
      return [
        {
          check: "ca-bundle",
          severity: "warning",
          subject: hook.name,
          message: `not checked: no certificate to check the caBundle against (${why})`,
          fix: "make the webhook's Service reach pods that mount the serving Secret, or run doctor where it can reach the webhook URL",
        },
      ];
    }
    const host = expectedHost(hook);
    const { problems, good } = certificateProblems(usable, roots, host);
    if (problems.length > 0) return [{ check: "ca-bundle", severity: r.outage, subject: hook.name, message: `${problems.join("; ")}: ${consequence(r)}`, fix }];
    return [
      {
        check: "ca-bundle",
        severity: "ok",
        subject: hook.name,
        message: `caBundle verifies the certificate ${good.join(" and ")}${host ? `, which names ${host}` : ""}`,
        fix: "",
      },
    ];
  });
}

/** What is wrong with each served or stored certificate against the caBundle and the host, and what verifies. */
function certificateProblems(
  usable: ReadonlyArray<{ where: string; chain: X509Certificate[]; keyPem?: string }>,
  roots: X509Certificate[],
  host: string | undefined,
): { problems: string[]; good: string[] } {
  const problems: string[] = [];
  const good: string[] = [];
  for (const e of usable) {
    const leaf = e.chain[0]!;
    const verdict = chainsTo(e.chain, roots);
    if (!verdict.ok) problems.push(`caBundle does not verify the certificate ${e.where}: ${verdict.reason}`);
    if (host && !coversHost(leaf, host)) problems.push(`the certificate ${e.where} does not name ${host} (it names ${altNames(leaf)})`);
    if (e.keyPem !== undefined && !keyMatches(leaf, e.keyPem))
      problems.push(`tls.key ${e.where} does not belong to its tls.crt: a server that restarts cannot load it`);
    if (verdict.ok) good.push(`${e.where} (CA "${commonName(verdict.root)}")`);
  }
  return { problems, good };
}

function expiryFindings(s: DoctorSnapshot, hooks: readonly HookRef[]): DoctorFinding[] {
  const cas = new Map<string, { cert: X509Certificate; hooks: string[] }>();
  const leaves = new Map<string, { cert: X509Certificate; where: string[] }>();
  for (const r of hooks) {
    const roots = bundleCertificates(r.hook);
    if (Array.isArray(roots)) {
      for (const cert of roots) {
        const entry = cas.get(cert.fingerprint256) ?? { cert, hooks: [] };
        entry.hooks.push(r.hook.name);
        cas.set(cert.fingerprint256, entry);
      }
    }
  }
  for (const evidence of Object.values(s.certificates)) {
    for (const e of evidence.map(evidenceChain)) {
      if (!("chain" in e)) continue;
      const leaf = e.chain[0]!;
      const entry = leaves.get(leaf.fingerprint256) ?? { cert: leaf, where: [] };
      if (!entry.where.includes(e.where)) entry.where.push(e.where);
      leaves.set(leaf.fingerprint256, entry);
    }
  }
  const finding = (cert: X509Certificate, subject: string, context: string, fix: string): DoctorFinding => {
    const notBefore = new Date(cert.validFrom);
    if (notBefore > s.now) {
      return {
        check: "certificate-expiry",
        severity: "critical",
        subject,
        message: `not valid before ${notBefore.toISOString()}; ${context}`,
        fix: "check the clock of whoever issued it, or re-issue it",
      };
    }
    const severity = expirySeverity(daysLeft(cert, s.now));
    return { check: "certificate-expiry", severity, subject, message: `${describeExpiry(cert, s.now)}; ${context}`, fix: severity === "ok" ? "" : fix };
  };
  return [
    ...[...cas.values()].map(({ cert, hooks: names }) =>
      finding(
        cert,
        `CA "${commonName(cert)}"`,
        `in the caBundle of ${names.join(", ")}`,
        "rotate the CA with an overlap: add the new CA to caBundle, re-issue the serving certificate, then drop the old CA (docs/operations.md, Certificate rotation)",
      ),
    ),
    ...[...leaves.values()].map(({ cert, where }) =>
      finding(
        cert,
        `serving certificate "${commonName(cert)}"`,
        where.join(", "),
        "renew it: quartermaster certs ensure (or certs generate --ca-cert/--ca-key) and update the Secret; the server reloads it without a restart",
      ),
    ),
  ];
}

/** Namespaces no Quartermaster webhook may see. */
export function protectedNamespaceNames(ownNamespace: string): string[] {
  return [...namespaceScope(ownNamespace).excluded];
}

function selectorFindings(s: DoctorSnapshot, hooks: readonly HookRef[]): DoctorFinding[] {
  const names = protectedNamespaceNames(s.namespace);
  return hooks.map((r): DoctorFinding => {
    const selector = r.hook.namespaceSelector;
    const matched: string[] = [];
    const byLabelOnly: string[] = [];
    for (const name of names) {
      const labels = s.protectedNamespaces[name] ?? { [NAMESPACE_NAME_LABEL]: name };
      if (selectorMatches(selector, labels)) matched.push(name);
      else if (!excludesByName(selector, name)) byLabelOnly.push(name);
    }
    const fix = `add {key: ${NAMESPACE_NAME_LABEL}, operator: NotIn, values: [${names.join(", ")}]} to its namespaceSelector (manifests/base/webhook-configurations.yaml)`;
    if (matched.length > 0) {
      return {
        check: "namespace-selector",
        severity: r.outage,
        subject: r.hook.name,
        message: `namespaceSelector ${describeSelector(selector)} matches ${matched.join(", ")}: ${r.failClosed ? "system pods wait on Quartermaster and are refused when it is down" : "system pods wait on Quartermaster up to its timeout when it is down"}`,
        fix,
      };
    }
    if (byLabelOnly.length > 0) {
      return {
        check: "namespace-selector",
        severity: "warning",
        subject: r.hook.name,
        message: `${byLabelOnly.join(", ")} ${byLabelOnly.length === 1 ? "is" : "are"} excluded only by labels (${describeSelector(selector)}): one kubectl label away from being matched`,
        fix,
      };
    }
    return { check: "namespace-selector", severity: "ok", subject: r.hook.name, message: `never matches ${names.join(", ")} (excluded by name)`, fix: "" };
  });
}

function sideEffectFindings(hooks: readonly HookRef[]): DoctorFinding[] {
  return hooks.map((r): DoctorFinding => {
    const value = r.hook.sideEffects ?? "(unset)";
    if (value === "None" || value === "NoneOnDryRun")
      return { check: "side-effects", severity: "ok", subject: r.hook.name, message: `sideEffects ${value}`, fix: "" };
    return {
      check: "side-effects",
      severity: "warning",
      subject: r.hook.name,
      message: `sideEffects ${value}: the apiserver refuses dry-run requests it matches (kubectl diff, --dry-run=server)`,
      fix: "set sideEffects: None (Quartermaster's webhooks write nothing)",
    };
  });
}

function timeoutFindings(hooks: readonly HookRef[], policyTimeoutSeconds: number): DoctorFinding[] {
  return hooks.map((r): DoctorFinding => {
    // The v1 API defaults timeoutSeconds to 10.
    const t = r.hook.timeoutSeconds ?? 10;
    if (t <= policyTimeoutSeconds) return { check: "timeout", severity: "ok", subject: r.hook.name, message: `timeoutSeconds ${t}`, fix: "" };
    return {
      check: "timeout",
      severity: "warning",
      subject: r.hook.name,
      message: `timeoutSeconds ${t} is above the policy's webhook.timeoutSeconds ${policyTimeoutSeconds}: a slow or unreachable server holds each matching request up to ${t} s, past the latency histogram's top bucket`,
      fix: `set timeoutSeconds: ${policyTimeoutSeconds} (or raise webhook.timeoutSeconds in the policy to match)`,
    };
  });
}

/** Every webhook finding for the snapshot, against the webhook configurations the policy renders. */
export function checkWebhooks(s: DoctorSnapshot, policy: WebhookPolicy): DoctorFinding[] {
  if (isUnreadable(s.webhookConfigurations)) {
    return [
      {
        check: "webhook-configuration",
        severity: "warning",
        subject: "webhook configurations",
        message: `not checked: ${s.webhookConfigurations.error}`,
        fix: "run doctor with read access to mutating/validatingwebhookconfigurations",
      },
    ];
  }
  const configs = s.webhookConfigurations;
  const hooks = refs(configs);
  const expected = expectedWebhooks(policy, s.namespace);
  return [
    ...configurationFindings(configs, hooks, expected),
    ...renderFindings(hooks, expected, s.namespace),
    ...endpointFindings(s, hooks),
    ...caBundleFindings(s, hooks),
    ...expiryFindings(s, hooks),
    ...selectorFindings(s, hooks),
    ...sideEffectFindings(hooks),
    ...timeoutFindings(hooks, policy.webhook.timeoutSeconds),
  ];
}

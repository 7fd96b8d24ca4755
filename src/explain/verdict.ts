/**
 * @module
 * Why a job is not running, as one verdict (issue 49): every reason that holds for the job in its evidence, the
 * first by {@link REASONS}' order as the main one and the rest in `also`, each with the objects, numbers and
 * messages it rests on and a concrete next step. Pure: the same evidence and time give the same verdict.
 */
import { effectivePodGpus } from "../core/gpu.js";
import { QUEUED_WORKLOAD_KINDS } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import { KUEUE_ADMISSION_REFUSED, WEBHOOK_EVENT_SOURCE } from "../admission/events.js";
import { jobReplicaTotal } from "../membership/ceiling.js";
import { workloadShape } from "../membership/workload.js";
import { queueFinding, reservationText } from "./kueue.js";
import { MAX_PODS_QUOTED, phaseOf, podFindings, podSpec, verdictMemo, type VerdictMemo } from "./pods.js";
import { conditionOf, conditionText, conditionsOf, duration, eventView, metaOf, nameOf, objectRef, secondsSince, uidOf, type EventView } from "./read.js";
import { REASONS, type EvidenceItem, type ExplainEvidence, type Finding, type Reason, type Verdict } from "./types.js";

const isActive = (pod: KubeObject): boolean => !["Succeeded", "Failed"].includes(phaseOf(pod)) && metaOf(pod).deletionTimestamp === undefined;

/** Whether the job is held suspended (`spec.suspend`, Kubeflow v1 `spec.runPolicy.suspend`). */
function suspendedOf(job: KubeObject): boolean {
  const spec = objectOr(job.spec);
  return spec.suspend === true || objectOr(spec.runPolicy).suspend === true;
}

/** How many pods the job runs at once: Kueue's pod sets, else the kind's replicas; undefined when unknown. */
export function expectedPods(ev: ExplainEvidence): number | undefined {
  const sets = objectOr(ev.workload?.spec).podSets;
  if (Array.isArray(sets) && sets.length > 0)
    return (sets as unknown[]).reduce<number>((n, s) => n + (isObject(s) && typeof s.count === "number" ? s.count : 1), 0);
  if (!ev.job) return undefined;
  if (ev.kind.jobKind && ev.kind.jobKind.framework !== "trainer") return jobReplicaTotal(ev.job, ev.kind.jobKind);
  if (QUEUED_WORKLOAD_KINDS.some((k) => k.group === ev.kind.group && k.kind === ev.kind.kind)) {
    let n = 0;
    for (const p of workloadShape(ev.kind).pods(ev.job)) {
      if (!("pods" in p.count)) return undefined;
      n += Number(p.count.pods);
    }
    return n;
  }
  return undefined;
}

/** A Kubernetes timestamp's age, as `for 4m10s` (empty when not a time). */
function forHow(at: unknown, now: Date): string {
  const s = secondsSince(at, now);
  return s === undefined ? "" : ` for ${duration(s)}`;
}

function finished(ev: ExplainEvidence, job: KubeObject, now: Date): Finding | undefined {
  const done = conditionsOf(job).find((c) => ev.kind.finishedConditions.includes(c.type) && c.status === "True");
  if (!done) return undefined;
  return {
    reason: "finished",
    summary: `the job has finished: ${done.type}${done.reason ? ` (${done.reason})` : ""}`,
    evidence: [{ object: objectRef(job, ev.kind.kind), text: conditionText(done, now) }],
    next:
      done.type === "Failed"
        ? `read the failed pods' logs (kubectl logs -n ${ev.ref.namespace} -l <the job's pod labels> --previous), fix, and create the job again`
        : "nothing: it ran to completion (its pods and GPUs are released per its cleanPodPolicy/TTL)",
  };
}

function refused(ev: ExplainEvidence, job: KubeObject, events: EventView[], stillHeld: boolean): Finding | undefined {
  const jobUid = uidOf(job);
  // A refusal Event outlives the refusal (Events are kept an hour): it counts while the job is still held back.
  const denial = !stillHeld
    ? undefined
    : events.find((e) => e.reason === KUEUE_ADMISSION_REFUSED && e.kind === ev.kind.kind && e.name === ev.ref.name && (!e.uid || e.uid === jobUid));
  const deny = ev.policyResults.filter((r) => r.result === "fail" && (r.mode ?? "deny") === "deny");
  if (!denial && deny.length === 0) return undefined;
  const evidence: EvidenceItem[] = [];
  if (denial)
    evidence.push({
      object: objectRef(job, ev.kind.kind),
      text: `Event ${denial.reason} (${denial.source}, ×${denial.count}${denial.at ? `, last ${denial.at}` : ""}): ${denial.message}`,
    });
  for (const r of deny) evidence.push({ object: r.object, text: `rule ${r.rule}${r.field ? ` at ${r.field}` : ""} (deny): ${r.message}` });
  const fields = [...new Set(deny.map((r) => r.field).filter(Boolean))];
  const fromEvent = denial ? [...denial.message.matchAll(/(?:: |; )([\w.[\]"/-]+): /g)].map((m) => m[1]!) : [];
  const where = [...new Set([...fields, ...fromEvent])].join(", ");
  return {
    reason: "refused",
    summary: denial
      ? "Quartermaster refused Kueue's admission of the job, so it stays suspended"
      : `the job breaks ${deny.map((r) => r.rule).join(", ")} (deny)`,
    evidence,
    next: `change ${where || "the fields named"} to be within the policy (or have the platform team change the rule); ${denial ? "Kueue admits the job again on its next try" : "an UPDATE that keeps the violation is refused"}`,
  };
}

function warned(ev: ExplainEvidence): Finding | undefined {
  const warns = ev.policyResults.filter((r) => r.result === "warn" || (r.result === "fail" && r.mode !== undefined && r.mode !== "deny"));
  if (warns.length === 0) return undefined;
  return {
    reason: "warned",
    summary: `Quartermaster warned about ${[...new Set(warns.map((r) => r.rule))].join(", ")}`,
    evidence: warns.map((r) => ({ object: r.object, text: `rule ${r.rule}${r.field ? ` at ${r.field}` : ""} (${r.mode ?? r.result}): ${r.message}` })),
    next: `fix ${[...new Set(warns.map((r) => r.field ?? r.rule))].join(", ")} before the rule moves to deny (the warning does not stop the job by itself)`,
  };
}

function noController(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], now: Date): Finding | undefined {
  const jobRef = objectRef(job, ev.kind.kind);
  const c = ev.kind.controller;
  const wl = ev.workload;
  const startedAt = wl ? conditionOf(wl, "Admitted")?.lastTransitionTime : metaOf(job).creationTimestamp;
  const silent = c.state === "unknown" && conditionsOf(job).length === 0 && (secondsSince(startedAt, now) ?? 0) >= ev.settings.graceSeconds;
  if (active.length > 0 || (ev.kind.served && c.state !== "not-running" && c.state !== "absent" && !silent)) return undefined;
  const evidence: EvidenceItem[] = [{ object: jobRef, text: `${wl ? "admitted by Kueue" : "not suspended"}${forHow(startedAt, now)}, and no pods` }];
  if (!ev.kind.served) evidence.push({ object: `CRD ${ev.kind.plural}.${ev.kind.group}`, text: `${ev.kind.group}/${ev.kind.version} is not served` });
  if (c.state !== "unknown" || c.detail) evidence.push({ object: `controller ${c.name}`, text: c.detail ?? c.state });
  if (silent) evidence.push({ object: jobRef, text: "status.conditions is empty: no controller has written the job's status" });
  return !ev.kind.served
    ? {
        reason: "no-controller",
        summary: `${ev.kind.kind}'s CRD is not served`,
        evidence,
        next: `install the CRD of ${ev.kind.plural}.${ev.kind.group} (version ${ev.kind.version}) and its controller`,
      }
    : {
        reason: "no-controller",
        summary: `${ev.kind.kind}'s controller (${c.name}) is ${c.state === "unknown" ? "not acting on it" : c.state}`,
        evidence,
        next: `install or restart ${c.name} (kubectl get deploy -A | grep ${c.name}; its logs say why it does not run)`,
      };
}

function controllerError(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], events: EventView[], now: Date): Finding | undefined {
  const jobRef = objectRef(job, ev.kind.kind);
  const bad = conditionsOf(job).filter(
    (x) => x.status === "True" && !ev.kind.finishedConditions.includes(x.type) && /error|fail|invalid|backoff/i.test(`${x.type} ${x.reason ?? ""}`),
  );
  const warnings = events.filter(
    (e) =>
      e.type === "Warning" &&
      e.kind === ev.kind.kind &&
      e.name === ev.ref.name &&
      e.source !== WEBHOOK_EVENT_SOURCE &&
      e.reason !== KUEUE_ADMISSION_REFUSED &&
      /fail|error|invalid|backoff/i.test(e.reason),
  );
  const expected = expectedPods(ev);
  if ((bad.length > 0 || warnings.length > 0) && (expected === undefined || active.length < expected)) {
    return {
      reason: "controller-error",
      summary: `${ev.kind.kind}'s controller reports an error: ${bad[0] ? `${bad[0].type}: ${bad[0].message ?? bad[0].reason}` : `${warnings[0]!.reason}: ${warnings[0]!.message}`}`,
      evidence: [
        ...bad.map((x) => ({ object: jobRef, text: conditionText(x, now) })),
        ...warnings.slice(0, MAX_PODS_QUOTED).map((e) => ({ object: jobRef, text: `Event ${e.reason} (${e.source || "?"}, ×${e.count}): ${e.message}` })),
      ],
      next: "fix what the message names in the job (or the quota/webhook that refused its pods); the controller retries by itself",
    };
  }
  return undefined;
}

/**
 * Pods deleted but not gone, that are not finished: within their grace period (`deletionTimestamp` still ahead)
 * they still hold their devices, and Kueue rightly keeps their quota; past it (a finalizer, a kubelet gone) they
 * hold nothing but the reservation.
 */
function terminating(pods: readonly KubeObject[], now: Date): { within: KubeObject[]; past: KubeObject[] } {
  const within: KubeObject[] = [];
  const past: KubeObject[] = [];
  for (const p of pods) {
    const at = metaOf(p).deletionTimestamp;
    if (at === undefined || ["Succeeded", "Failed"].includes(phaseOf(p))) continue;
    const t = typeof at === "string" ? Date.parse(at) : NaN;
    (Number.isNaN(t) || t > now.getTime() ? within : past).push(p);
  }
  return { within, past };
}

function phantom(ev: ExplainEvidence, job: KubeObject, active: KubeObject[], now: Date): Finding | undefined {
  const wl = ev.workload;
  if (!wl || active.length > 0) return undefined;
  const reserved = conditionOf(wl, "QuotaReserved");
  if (reserved?.status !== "True") return undefined;
  const age = secondsSince(reserved.lastTransitionTime, now) ?? 0;
  const evicted = conditionOf(wl, "Evicted");
  const wasEvicted = evicted?.status === "True";
  if (age < ev.settings.graceSeconds && !wasEvicted) return undefined;
  const dying = terminating(ev.pods, now);
  if (dying.within.length > 0) return undefined;
  const wlRef = objectRef(wl, "Workload");
  const podsText =
    dying.past.length === 0
      ? "the job has no pods"
      : `the job's only pods are ${dying.past.length} terminating past their deletion time (${dying.past
          .slice(0, MAX_PODS_QUOTED)
          .map((p) => `${nameOf(p)} since ${String(metaOf(p).deletionTimestamp)}${finalizersText(p)}`)
          .join(", ")})`;
  const evidence: EvidenceItem[] = [{ object: wlRef, text: `${reservationText(wl)}${forHow(reserved.lastTransitionTime, now)}, and ${podsText}` }];
  if (wasEvicted) evidence.push({ object: wlRef, text: conditionText(evicted, now) });
  if (suspendedOf(job)) evidence.push({ object: objectRef(job, ev.kind.kind), text: "spec.suspend is true" });
  const noPods = dying.past.length === 0 ? "no pods" : "only pods stuck terminating";
  return {
    reason: "phantom-reservation",
    summary: wasEvicted
      ? `quota still reserved ${duration(secondsSince(evicted.lastTransitionTime, now) ?? 0)} after Kueue evicted the workload${evicted.reason ? ` (${evicted.reason})` : ""}, with ${noPods} (reserved ${duration(age)} in all)`
      : `quota reserved with ${noPods} for ${duration(age)}`,
    evidence,
    next: `the reservation blocks other jobs' quota (kubernetes-sigs/kueue#14811): ${
      wasEvicted
        ? `Kueue releases it once the job's controller reports no active replicas (see why ${ev.kind.controller.name} does not update the job's status${dying.past.length > 0 ? ", or what keeps the terminating pods" : ""})`
        : "if the job should run, see why its controller makes no pods"
    }; else delete the job (or kubectl delete workload -n ${ev.ref.namespace} ${nameOf(wl)}) to release it`,
  };
}

/** ` (finalizers a, b)` of a pod, or empty. */
function finalizersText(p: KubeObject): string {
  const f = metaOf(p).finalizers;
  return Array.isArray(f) && f.length > 0 ? ` (finalizers ${f.join(", ")})` : "";
}

function gang(ev: ExplainEvidence, active: KubeObject[], now: Date): Finding | undefined {
  const expected = expectedPods(ev);
  const running = active.filter((p) => phaseOf(p) === "Running");
  if (running.length === 0 || expected === undefined || running.length >= expected) return undefined;
  const held = new Map<string, number>();
  for (const p of running) for (const [r, n] of effectivePodGpus(podSpec(p), ev.settings.gpu)) held.set(r, (held.get(r) ?? 0) + n);
  const starts = running
    .map((p) => objectOr(p.status).startTime)
    .filter((t): t is string => typeof t === "string")
    .sort();
  const since = secondsSince(starts[0], now);
  const gpus = [...held].map(([r, n]) => `${n} ${r}`).join(", ") || "no GPUs";
  return {
    reason: "gang-partial",
    summary: `${running.length} of ${expected} pods running: ${gpus} held idle${since !== undefined ? ` for ${duration(since)}` : ""}`,
    evidence: [
      { object: objectRef(ev.job, ev.kind.kind), text: `${expected} pods expected, ${running.length} running, ${active.length - running.length} not running` },
      { object: "Pods", text: `the running pods hold ${gpus}${starts[0] ? ` since ${starts[0]}` : ""}` },
    ],
    next: "a distributed job waits for all its pods: fix the missing pods' cause (also below), or scale the job to what fits; with Kueue, waitForPodsReady evicts such a gang after its timeout",
  };
}

function running(ev: ExplainEvidence, active: KubeObject[]): Finding | undefined {
  const run = active.filter((p) => phaseOf(p) === "Running");
  const expected = expectedPods(ev);
  if (run.length === 0 || (expected !== undefined && run.length < expected) || run.length < active.length) return undefined;
  return {
    reason: "running",
    summary: `running: ${run.length} pod(s)`,
    evidence: [{ object: objectRef(ev.job, ev.kind.kind), text: `${run.length} of ${expected ?? run.length} pods Running` }],
    next: "nothing: the job is running",
  };
}

function pendingFallback(ev: ExplainEvidence, active: KubeObject[], expected: number | undefined): Finding {
  return {
    reason: "pending",
    summary: active.length === 0 ? "no pods yet" : `${active.length} pod(s) not running yet`,
    evidence: [
      {
        object: objectRef(ev.job, ev.kind.kind),
        text: `${active.length} active pod(s)${expected !== undefined ? ` of ${expected}` : ""}; no cause found in the evidence`,
      },
    ],
    next: `wait a little (pods being created, images pulled), then kubectl describe ${ev.kind.kind.toLowerCase()} -n ${ev.ref.namespace} ${ev.ref.name}`,
  };
}

/** The verdict on the job in `ev` at `now`; `memo` shares the node work between verdicts over the same nodes. */
export function explainJob(ev: ExplainEvidence, now: Date, memo: VerdictMemo = verdictMemo()): Verdict {
  const name = `${ev.kind.kind}/${ev.ref.name}`;
  const job = ev.job;
  if (!job) {
    const evidence: EvidenceItem[] = [{ object: `${ev.kind.kind} ${ev.ref.namespace}/${ev.ref.name}`, text: "not found" }];
    if (!ev.kind.served) evidence.push({ object: `CRD ${ev.kind.plural}.${ev.kind.group}`, text: `${ev.kind.group}/${ev.kind.version} is not served` });
    return {
      job: name,
      reason: "not-found",
      summary: `no ${ev.kind.kind} ${ev.ref.name} in namespace ${ev.ref.namespace}`,
      evidence,
      next: ev.kind.served
        ? "check the name and namespace; a job Quartermaster refused at CREATE was never stored (kubectl apply printed the refusal)"
        : `install the CRD of ${ev.kind.plural}.${ev.kind.group}`,
      also: [],
    };
  }
  const done = finished(ev, job, now);
  if (done) return { job: name, ...done, also: [] };
  const events = ev.events.map(eventView);
  const active = ev.pods.filter(isActive);
  const suspended = suspendedOf(job);
  const found: Finding[] = [];
  const add = (f: Finding | undefined): void => void (f && found.push(f));
  add(refused(ev, job, events, suspended || active.length === 0));
  const queue = queueFinding(ev, suspended, now);
  add(queue);
  if (!queue && !suspended) {
    add(noController(ev, job, active, now));
    add(controllerError(ev, job, active, events, now));
  }
  add(phantom(ev, job, active, now));
  for (const f of podFindings(ev, active, now, memo)) add(f);
  add(gang(ev, active, now));
  add(warned(ev));
  add(running(ev, active));
  if (!found.some((f) => f.reason !== "warned")) add(pendingFallback(ev, active, expectedPods(ev)));
  found.sort((a, b) => REASONS.indexOf(a.reason) - REASONS.indexOf(b.reason));
  // A warned job that runs is running, its warnings in `also`.
  const run = found.findIndex((f) => f.reason === "running");
  if (run > 0 && found.every((f, i) => i >= run || f.reason === "warned")) found.unshift(...found.splice(run, 1));
  const [main, ...also] = found;
  return { job: name, ...main!, also };
}

/** Whether the reason means the job is held back (every reason but running and finished). */
export const isBlocked = (r: Reason): boolean => r !== "running" && r !== "finished";

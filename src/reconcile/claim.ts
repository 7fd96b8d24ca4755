/**
 * @module
 * Adoption and release of a job's pods and services, as Kubernetes' controller ref manager decides them
 * (`ClaimObject` in github.com/kubernetes/kubernetes, pkg/controller/controller_ref_manager.go), pure: the job and the objects of its namespace in, patches out.
 *
 * | row | object's controller ref          | condition                                    | here                |
 * |-----|----------------------------------|----------------------------------------------|---------------------|
 * | A   | someone else's                   | —                                            | never touched       |
 * | B   | this job                         | selector matches                             | owned               |
 * | C   | this job                         | no match, job being deleted                  | nothing             |
 * | D   | this job                         | no match                                     | release             |
 * | E   | none                             | job being deleted, or no match               | nothing             |
 * | F   | none                             | object being deleted                         | nothing             |
 * | G   | none                             | match                                        | adopt               |
 *
 * The selector is the kind's label scheme (the kinds registry, `src/kinds/`): Kubeflow's `{operator-name,
 * job-name}`, caffe2-operator's `{group_name, caffe2_job_key, runtime_id}`. DECIDE: act only when certain.
 * Adoption needs the full selector (an orphan with only a job-name label could belong to a TFJob or a
 * PyTorchJob of the same name); release needs a real mismatch — the scheme's key label (job-name,
 * caffe2_job_key) missing or naming another job, or another selector label set to another value — so pods
 * made by hand, by other tools, or labelled by another scheme are never cut loose from their job (and its
 * garbage collection). The patches are upstream's strategic-merge documents, byte for byte: the object's own
 * `metadata.uid` rides along as a precondition (a recreated object makes the patch fail with 422), and
 * `ownerReferences` merges by uid so other owners are kept. The fresh GET of the job before its first
 * adoption (`CanAdopt`) is I/O and happens where the plan is applied.
 */
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { labelScheme } from "../kinds/index.js";
import { meta, type Meta } from "./meta.js";

export interface ClaimAction {
  verb: "adopt" | "release";
  kind: "Pod" | "Service";
  namespace: string;
  name: string;
  /** The object's own uid, the patch's precondition. */
  uid: string;
  /** `<Kind>/<name>` of the job. */
  job: string;
  jobUid: string;
  jobKind: JobKind;
  reason: string;
  /** The strategic-merge patch, exactly as upstream sends it. */
  patch: string;
}

export interface Claimed {
  /** The objects the job controls and that match its selector (B). */
  owned: KubeObject[];
  /** The orphans it adopts in this pass (G). */
  adopted: KubeObject[];
  actions: ClaimAction[];
}

/** The labels an object must carry to belong to the job (the kind's label scheme: upstream `GenLabels` / `genLabels`). */
export function claimSelector(job: KubeObject, kind: JobKind): Record<string, string> {
  return labelScheme(kind).selector(job);
}

/** Every label of the selector is on the object with its value. */
export function matches(selector: Record<string, string>, o: KubeObject): boolean {
  const labels = meta(o).labels ?? {};
  for (const k in selector) if (labels[k] !== selector[k]) return false;
  return true;
}

/** The object's labels contradict the selector: the key label differs or is missing, or another label is set to another value. */
function contradicts(selector: Record<string, string>, keyLabel: string, o: KubeObject): boolean {
  const labels = meta(o).labels ?? {};
  for (const k in selector) {
    const have = labels[k];
    if (have !== selector[k] && (k === keyLabel || have !== undefined)) return true;
  }
  return false;
}

/** The uid of the object's controller ownerReference, if it has one. */
export function controllerUid(o: KubeObject): string | undefined {
  return meta(o).ownerReferences?.find((r) => r.controller === true)?.uid;
}

/** Upstream's adoption patch (`ownerRefControllerPatch`): the job as controller, the object's uid as precondition. */
export function adoptPatch(job: KubeObject, kind: JobKind, objectUid: string): string {
  const jm = meta(job);
  const ref = { apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: jm.name, uid: jm.uid, controller: true, blockOwnerDeletion: true };
  return JSON.stringify({ metadata: { ownerReferences: [ref], uid: objectUid } });
}

/** Upstream's release patch: delete the ownerReference whose uid is the job's. */
export function releasePatch(jobUid: string, objectUid: string): string {
  return JSON.stringify({ metadata: { ownerReferences: [{ $patch: "delete", uid: jobUid }], uid: objectUid } });
}

/**
 * Rows A–G for one kind of object. `objects` are the candidates of the job's namespace: those the job controls
 * and the orphans (others are row A and may be left out by the caller; they are skipped here too).
 */
export function claim(job: KubeObject, kind: JobKind, objectKind: "Pod" | "Service", objects: readonly KubeObject[]): Claimed {
  const jm = meta(job);
  const jobUid = String(jm.uid ?? "");
  const jobId = `${kind.kind}/${jm.name}`;
  const selector = claimSelector(job, kind);
  const keyLabel = labelScheme(kind).key.label;
  const jobDeleting = Boolean(jm.deletionTimestamp);
  const out: Claimed = { owned: [], adopted: [], actions: [] };
  const act = (om: Meta, verb: ClaimAction["verb"], patch: string, reason: string): void => {
    out.actions.push({ verb, kind: objectKind, namespace: om.namespace!, name: om.name!, uid: om.uid!, job: jobId, jobUid, jobKind: kind, reason, patch });
  };
  for (const o of objects) {
    const om = meta(o);
    if (om.namespace !== jm.namespace || !om.uid || !om.name) continue;
    const owner = controllerUid(o);
    if (owner !== undefined) {
      if (owner !== jobUid) continue; // A
      if (!contradicts(selector, keyLabel, o))
        out.owned.push(o); // B
      else if (!jobDeleting) act(om, "release", releasePatch(jobUid, om.uid), `controlled by ${jobId} but its labels no longer match the job's selector`); // D (C: nothing)
      continue;
    }
    if (jobDeleting || !matches(selector, o) || om.deletionTimestamp) continue; // E, F
    act(om, "adopt", adoptPatch(job, kind, om.uid), `matches the selector of ${jobId} and has no controller`); // G
    out.adopted.push(o);
  }
  return out;
}

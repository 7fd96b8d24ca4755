/**
 * @module
 * Are the cluster's Kubeflow Trainer v2 runtimes within the GPU caps? A runtime's trainer nodes that ask for more
 * GPUs per pod than a pod may have make every TrainJob naming it refused (issue 45: runtimes are checked at their
 * own CREATE and UPDATE from now on, `src/validate/runtime.ts`, but those created before, or before a cap was
 * lowered, are still there). Each runtime is judged as the webhook judges it: a ClusterTrainingRuntime against the
 * policy's own limits, a TrainingRuntime against its namespace's; one warning per runtime over them, naming the
 * fields. No Trainer CRDs (404) means nothing to check.
 */
import type { KubeObject } from "../core/kube.js";
import type { Policy } from "../policy/types.js";
import { runtimeContext, validateRuntime } from "../validate/runtime.js";
import { findingsOf, isUnreadable, type DoctorFinding, type RuntimesState } from "./types.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});

export function checkRuntimes(state: RuntimesState | undefined, policy: Policy): DoctorFinding[] {
  if (state === undefined || state === "absent") return [];
  const finding = findingsOf("trainer-runtimes");
  if (isUnreadable(state))
    return [
      finding(
        "warning",
        "Trainer runtimes",
        `not checked: cannot list trainingruntimes or clustertrainingruntimes (${state.error})`,
        "let the user running doctor list them (trainer.kubeflow.org)",
      ),
    ];
  const out: DoctorFinding[] = [];
  for (const runtime of state as readonly KubeObject[]) {
    const m = obj(runtime.metadata);
    const cluster = runtime.kind === "ClusterTrainingRuntime";
    const namespace = typeof m.namespace === "string" ? m.namespace : "";
    const subject = cluster ? `ClusterTrainingRuntime ${String(m.name)}` : `TrainingRuntime ${namespace}/${String(m.name)}`;
    const { violations } = validateRuntime(runtime, runtimeContext(policy, cluster ? "Cluster" : "Namespaced", namespace));
    if (violations.length === 0) continue;
    out.push(
      finding(
        "warning",
        subject,
        `its pods are over the GPU limits${cluster ? "" : ` of namespace ${namespace}`}, so every TrainJob naming it is refused: ${violations.map((v) => `${v.field}: ${v.message}`).join("; ")}`,
        "lower the GPUs of its replicated Jobs' pod templates, or the policy's limits if they are meant",
      ),
    );
  }
  if (out.length === 0) out.push(finding("ok", "Trainer runtimes", `${state.length} runtime${state.length === 1 ? "" : "s"}, all within the GPU limits`));
  return out;
}

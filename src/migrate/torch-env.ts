/**
 * @module
 * The distributed env Kubeflow Trainer v2.3.0 gives the trainer container of a TrainJob on a torch runtime, for
 * the pod with completion index `rank` (kubeflow/trainer `pkg/runtime/framework/plugins/torch/torch.go`
 * EnforceMLPolicy): the TrainJob's `trainer.env`, then PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (a fieldRef to
 * the completion index, resolved here), PET_MASTER_ADDR `<job>-node-0-0.<job>`, PET_MASTER_PORT 29500 (upserted
 * in that order). `auto` without a GPU in resourcesPerNode becomes the CPU count (at least 1). Used to show that a
 * migrated PyTorchJob's pods get the environment the v1 operator gave the original (test/unit/migrate/migrate.test.ts).
 */
import type { V1EnvVar } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { COMPLETION_INDEX_FIELD, TRAINER_PORT } from "./migrate.js";

interface Trainer {
  numNodes?: number;
  numProcPerNode?: number;
  env?: V1EnvVar[];
  resourcesPerNode?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> };
}

/** A CPU quantity's whole cores, as resource.Quantity.Value() rounds (up). */
function cores(q: unknown): number {
  if (q === undefined) return 0;
  const s = String(q);
  const n = s.endsWith("m") ? Number(s.slice(0, -1)) / 1000 : Number(s);
  return Number.isFinite(n) ? Math.ceil(n) : 0;
}

function upsert(env: V1EnvVar[], v: V1EnvVar): void {
  const i = env.findIndex((e) => e.name === v.name);
  if (i >= 0) env[i] = v;
  else env.push(v);
}

/** PET_NPROC_PER_NODE: numProcPerNode, else auto, which without a GPU becomes the CPU count (at least 1). */
function nprocOf(trainer: Trainer): string {
  if (trainer.numProcPerNode !== undefined) return String(trainer.numProcPerNode);
  const res = trainer.resourcesPerNode ?? {};
  const gpu = [...Object.keys(res.limits ?? {}), ...Object.keys(res.requests ?? {})].some((r) => r.includes("gpu"));
  return gpu ? "auto" : String(Math.max(1, cores(res.requests?.cpu) || cores(res.limits?.cpu)));
}

/** name → value of the trainer container's env on the node of completion index `rank`. */
export function trainerTorchEnv(trainJob: KubeObject, rank: number): Map<string, string> {
  const name = String((trainJob.metadata as { name?: string } | undefined)?.name ?? "");
  const trainer: Trainer = (trainJob.spec as { trainer?: Trainer } | undefined)?.trainer ?? {};
  const nproc = nprocOf(trainer);
  const env: V1EnvVar[] = [...(trainer.env ?? [])];
  upsert(env, { name: "PET_NNODES", value: String(trainer.numNodes ?? 1) });
  upsert(env, { name: "PET_NPROC_PER_NODE", value: nproc });
  upsert(env, { name: "PET_NODE_RANK", valueFrom: { fieldRef: { fieldPath: COMPLETION_INDEX_FIELD } } });
  upsert(env, { name: "PET_MASTER_ADDR", value: `${name}-node-0-0.${name}` });
  upsert(env, { name: "PET_MASTER_PORT", value: String(TRAINER_PORT) });
  const out = new Map<string, string>();
  for (const e of env) out.set(e.name, e.valueFrom?.fieldRef?.fieldPath === COMPLETION_INDEX_FIELD ? String(rank) : (e.value ?? JSON.stringify(e.valueFrom)));
  return out;
}

/**
 * `validateJob` against the training operator v1.9.4's validating webhooks (`pkg/webhooks/<framework>/`):
 * the job shapes upstream refuses, found by the validation-parity suite (test/conformance/validation-parity.test.ts),
 * each refused here with the same field. The built-in policy: no limit plays a part.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { job, kindOf, type ReplicaOpts } from "../../fixtures/jobs.js";

const policy = defaultPolicy();
const ctx: ValidationContext = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };
type Want = Array<[rule: string, field: string, message: string]>;
const check = (j: KubeObject): Want => validateJob(j, kindOf(String(j.kind)), ctx).violations.map((v) => [v.rule, v.field, v.message]);
const make = (kind: string, replicas: Record<string, number | ReplicaOpts>, spec: Record<string, unknown> = {}): KubeObject =>
  job(kind, "parity", "team-a", replicas, spec);

describe("validateJob: what the training operator v1.9.4 refuses", () => {
  const refused: Array<[string, KubeObject, Want]> = [
    [
      "PyTorchJob with lower-case replica types",
      make("PyTorchJob", { master: 1, worker: 2 }),
      [
        ["job-shape", "spec.pytorchReplicaSpecs.master", '"master": PyTorchJob replica types are Master and Worker, spelled so'],
        ["job-shape", "spec.pytorchReplicaSpecs.worker", '"worker": PyTorchJob replica types are Master and Worker, spelled so'],
      ],
    ],
    [
      "PyTorchJob with a Launcher",
      make("PyTorchJob", { Launcher: 1, Worker: 2 }),
      [["job-shape", "spec.pytorchReplicaSpecs.Launcher", '"Launcher": PyTorchJob replica types are Master and Worker, spelled so']],
    ],
    [
      "PyTorchJob whose Master leaves replicas unset",
      make("PyTorchJob", { Master: {}, Worker: 2 }),
      [["job-shape", "spec.pytorchReplicaSpecs.Master.replicas", "the Master replica type must have exactly 1 replica, replicas is not set"]],
    ],
    [
      "PaddleJob with a PS replica type",
      make("PaddleJob", { PS: 1, Worker: 2 }),
      [["job-shape", "spec.paddleReplicaSpecs.PS", '"PS": PaddleJob replica types are Master and Worker, spelled so']],
    ],
    [
      "XGBoostJob without a Master",
      make("XGBoostJob", { Worker: 2 }),
      [["job-shape", "spec.xgbReplicaSpecs.Master", "is required: an XGBoostJob has one Master"]],
    ],
    [
      "XGBoostJob with 2 Masters",
      make("XGBoostJob", { Master: 2, Worker: 2 }),
      [["job-shape", "spec.xgbReplicaSpecs.Master.replicas", "the Master replica type must have exactly 1 replica, got 2"]],
    ],
    [
      "XGBoostJob whose Master leaves replicas unset",
      make("XGBoostJob", { Master: {} }),
      [["job-shape", "spec.xgbReplicaSpecs.Master.replicas", "the Master replica type must have exactly 1 replica, replicas is not set"]],
    ],
    [
      "XGBoostJob with a Launcher and no Master",
      make("XGBoostJob", { Launcher: 1 }),
      [
        ["job-shape", "spec.xgbReplicaSpecs.Launcher", '"Launcher": XGBoostJob replica types are Master and Worker, spelled so'],
        ["job-shape", "spec.xgbReplicaSpecs.Master", "is required: an XGBoostJob has one Master"],
      ],
    ],
    [
      "XGBoostJob with a Master of 0 replicas",
      make("XGBoostJob", { Master: 0, Worker: 2 }),
      [["job-shape", "spec.xgbReplicaSpecs.Master.replicas", "the Master replica type must have exactly 1 replica, got 0"]],
    ],
    [
      "XGBoostJob with lower-case master and worker",
      make("XGBoostJob", { master: 1, worker: 2 }),
      [
        ["job-shape", "spec.xgbReplicaSpecs.master", '"master": XGBoostJob replica types are Master and Worker, spelled so'],
        ["job-shape", "spec.xgbReplicaSpecs.worker", '"worker": XGBoostJob replica types are Master and Worker, spelled so'],
        ["job-shape", "spec.xgbReplicaSpecs.Master", "is required: an XGBoostJob has one Master"],
      ],
    ],
    [
      "XGBoostJob with a PS besides its Master",
      make("XGBoostJob", { Master: 1, PS: 1 }),
      [["job-shape", "spec.xgbReplicaSpecs.PS", '"PS": XGBoostJob replica types are Master and Worker, spelled so']],
    ],
    [
      "XGBoostJob with no replica specs",
      make("XGBoostJob", {}),
      [
        ["job-shape", "spec.xgbReplicaSpecs", "at least one replica spec is required"],
        ["job-shape", "spec.xgbReplicaSpecs.Master", "is required: an XGBoostJob has one Master"],
      ],
    ],
    [
      "PaddleJob with a lower-case worker",
      make("PaddleJob", { worker: 2 }),
      [["job-shape", "spec.paddleReplicaSpecs.worker", '"worker": PaddleJob replica types are Master and Worker, spelled so']],
    ],
    [
      "PyTorchJob Worker×0 (v1.8.1 accepted it)",
      make("PyTorchJob", { Worker: 0 }),
      [["job-shape", "spec.pytorchReplicaSpecs.Worker.replicas", "must be at least 1, got 0"]],
    ],
    [
      "PyTorchJob elastic, no Worker spec (v1.8.1 accepted it)",
      make("PyTorchJob", { Master: 1 }, { elasticPolicy: { minReplicas: 4, maxReplicas: 2 } }),
      [["job-shape", "spec.pytorchReplicaSpecs.Worker", "is required when spec.elasticPolicy is set"]],
    ],
    [
      "TFJob managed by another controller",
      make("TFJob", { Worker: 2 }, { runPolicy: { managedBy: "example.com/other" } }),
      [["run-policy", "spec.runPolicy.managedBy", '"example.com/other" is not supported: kubeflow.org/training-operator or kueue.x-k8s.io/multikueue']],
    ],
    [
      "JAXJob with a lower-case worker and a Master",
      make("JAXJob", { worker: 2, Master: 1 }),
      [
        ["job-shape", "spec.jaxReplicaSpecs.worker", '"worker": JAXJob replica types are Worker, spelled so'],
        ["job-shape", "spec.jaxReplicaSpecs.Master", '"Master": JAXJob replica types are Worker, spelled so'],
      ],
    ],
    [
      "TFJob with a Chief of 0 replicas and a Master",
      make("TFJob", { Chief: 0, Master: 1, Worker: 2 }),
      [["job-shape", "spec.tfReplicaSpecs", "at most one Chief or Master replica type, got Chief and Master"]],
    ],
  ];
  for (const [name, j, want] of refused) it(`${name} → refused`, () => assert.deepEqual(check(j), want));
});

describe("validateJob: what the training operator v1.9.4 accepts (no limits)", () => {
  const accepted: Array<[string, KubeObject]> = [
    ["PyTorchJob Master×1 Worker×3", make("PyTorchJob", { Master: 1, Worker: 3 })],
    ["PyTorchJob managed by MultiKueue", make("PyTorchJob", { Master: 1, Worker: 3 }, { runPolicy: { managedBy: "kueue.x-k8s.io/multikueue" } })],
    ["JAXJob Worker×4", make("JAXJob", { Worker: 4 })],
    ["XGBoostJob Master×1", make("XGBoostJob", { Master: 1 })],
    ["PaddleJob Master×2 Worker×2", make("PaddleJob", { Master: 2, Worker: 2 })],
    ["TFJob with replica types of any name", make("TFJob", { Foo: 1, worker: 2 })],
    ["TFJob with a Chief, no Master", make("TFJob", { Chief: 1, Worker: 2, PS: 1 })],
    ["MXJob with the tuner replica types", make("MXJob", { TunerTracker: 1, TunerServer: 1, Tuner: 1 }, { jobMode: "MXTune" })],
  ];
  for (const [name, j] of accepted) it(`${name} → allowed`, () => assert.deepEqual(check(j), []));
});

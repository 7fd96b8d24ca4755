/**
 * @module
 * The facts of each built-in framework a cluster spec and the replica Services use: the default container, the
 * port's name and number (Kubeflow training-operator `pkg/apis/kubeflow.org/v1/*_types.go` constants; Trainer v2's
 * `pkg/constants`). Model data beside the kinds' shapes: the webhooks (src/mutate, src/validate) and the reconciler
 * read it.
 */
import { type Framework, isBuiltInFramework } from "./index.js";

export interface FrameworkInfo {
  container: string;
  portName: string;
  port: number;
}

/** Default container, port name and port per framework (training-operator `*_types.go` constants). */
export const FRAMEWORKS: Record<Framework, FrameworkInfo> = {
  tensorflow: { container: "tensorflow", portName: "tfjob-port", port: 2222 },
  pytorch: { container: "pytorch", portName: "pytorchjob-port", port: 23456 },
  mxnet: { container: "mxnet", portName: "mxjob-port", port: 9091 },
  xgboost: { container: "xgboost", portName: "xgboostjob-port", port: 9999 },
  paddle: { container: "paddle", portName: "master", port: 36543 },
  jax: { container: "jax", portName: "jaxjob-port", port: 6666 },
  caffe2: { container: "caffe2", portName: "caffe2-port", port: 2222 },
  // Trainer v2's trainer container (`pkg/constants` Node); the Trainer writes its own env and JobSet its Service.
  trainer: { container: "node", portName: "", port: 0 },
};

const NO_FRAMEWORK: FrameworkInfo = Object.freeze({ container: "", portName: "", port: 0 });

/**
 * The framework facts of `framework`: none (no default container, no port) for a framework that is not built in
 * (a kind shape added to the registry brings its label scheme and replica field, not a cluster spec).
 */
export function frameworkInfo(framework: string): FrameworkInfo {
  return isBuiltInFramework(framework) ? FRAMEWORKS[framework] : NO_FRAMEWORK;
}

#!/usr/bin/env bash
# Builds the Kubeflow Trainer v2 controller manager (github.com/kubeflow/trainer/v2,
# cmd/trainer-controller-manager) from its Go module, pinned in trainer-bin/go.mod and go.sum, through the Go
# module proxy, into a cache directory keyed by version. A warm cache returns at once. Used by the Trainer v2
# conformance (test/conformance/trainer.test.ts) through QM_TRAINER_BIN; nothing built lives in the repository.
# Its CRDs (manifests/base/crds), default runtimes (manifests/base/runtimes) and webhook manifests are read
# from the same module in the Go module cache, which this build fills.
#
# Usage: build.sh            prints the directory holding the `trainer-controller-manager` binary on stdout
# Env:   QM_TRAINER_BIN_CACHE cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
TRAINER_VERSION=v2.3.0               # github.com/kubeflow/trainer/v2 in trainer-bin/go.mod
ROOT=${QM_TRAINER_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
build_go_tool trainer-controller-manager "$TRAINER_VERSION" "$HERE/trainer-bin" github.com/kubeflow/trainer/v2 \
  github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "$ROOT/trainer-$TRAINER_VERSION"

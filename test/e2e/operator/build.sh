#!/usr/bin/env bash
# Builds the Kubeflow training operator (github.com/kubeflow/training-operator, cmd/training-operator.v1)
# from its Go module, pinned in operator-bin/go.mod and go.sum, through the Go module proxy, into a cache
# directory keyed by version. A warm cache returns at once. Used by the conformance suite
# (test/conformance/) through QM_OPERATOR_BIN; nothing built lives in the repository. Its CRDs are read
# from the same module in the Go module cache (manifests/base/crds), which this build fills.
#
# Usage: build.sh            prints the directory holding the `training-operator` binary on stdout
# Env:   QM_OPERATOR_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
OPERATOR_VERSION=v1.9.4              # github.com/kubeflow/training-operator in operator-bin/go.mod
ROOT=${QM_OPERATOR_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
build_go_tool training-operator "$OPERATOR_VERSION" "$HERE/operator-bin" github.com/kubeflow/training-operator \
  github.com/kubeflow/training-operator/cmd/training-operator.v1 "$ROOT/training-operator-$OPERATOR_VERSION"

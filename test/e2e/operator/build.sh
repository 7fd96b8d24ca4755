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
OPERATOR_VERSION=v1.8.1              # github.com/kubeflow/training-operator in operator-bin/go.mod
ROOT=${QM_OPERATOR_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
OUT=$ROOT/training-operator-$OPERATOR_VERSION

if [[ -x $OUT/training-operator ]]; then echo "$OUT"; exit 0; fi

command -v go >/dev/null || {
  echo "build.sh: 'go' is not on PATH. Go and the Go module proxy are needed to build the training operator." >&2
  exit 1; }
grep -q "github.com/kubeflow/training-operator $OPERATOR_VERSION" "$HERE/operator-bin/go.mod" || {
  echo "build.sh: operator-bin/go.mod does not pin github.com/kubeflow/training-operator $OPERATOR_VERSION" >&2; exit 1; }
mkdir -p "$OUT"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
start=$(date +%s)
echo "build.sh: building training-operator $OPERATOR_VERSION into $OUT (cold: a few minutes)" >&2
(cd "$HERE/operator-bin" && go build -pgo=off -ldflags "-s -w" -o "$OUT/training-operator.tmp" \
  github.com/kubeflow/training-operator/cmd/training-operator.v1)
mv "$OUT/training-operator.tmp" "$OUT/training-operator"
echo "build.sh: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"

#!/usr/bin/env bash
# Builds the helm CLI from its Go module helm.sh/helm/v3 (pinned in helm-bin/go.mod and go.sum) through the
# Go module proxy, into a cache directory keyed by version. A warm cache returns at once. Used by the chart
# tests (test/e2e/chart.test.ts) through QM_HELM_BIN; nothing built lives in the repository.
#
# Usage: build.sh            prints the directory holding the `helm` binary on stdout (progress on stderr)
# Env:   QM_HELM_BIN_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HELM_VERSION=v3.22.0                 # helm.sh/helm/v3 in helm-bin/go.mod; it needs Go >= 1.26
ROOT=${QM_HELM_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
OUT=$ROOT/helm-$HELM_VERSION

if [[ -x $OUT/helm ]]; then echo "$OUT"; exit 0; fi

command -v go >/dev/null || {
  echo "build.sh: 'go' is not on PATH. Go >= 1.26 and the Go module proxy are needed to build helm." >&2
  exit 1; }
grep -q "helm.sh/helm/v3 $HELM_VERSION" "$HERE/helm-bin/go.mod" || {
  echo "build.sh: helm-bin/go.mod does not pin helm.sh/helm/v3 $HELM_VERSION" >&2; exit 1; }
mkdir -p "$OUT"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
start=$(date +%s)
# helm reports its version from these variables (its Makefile sets them the same way).
ldf="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldf+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
echo "build.sh: building helm $HELM_VERSION into $OUT (cold: a few minutes)" >&2
(cd "$HERE/helm-bin" && go build -pgo=off -ldflags "$ldf" -o "$OUT/helm.tmp" helm.sh/helm/v3/cmd/helm)
mv "$OUT/helm.tmp" "$OUT/helm"
echo "build.sh: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"

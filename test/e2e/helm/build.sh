#!/usr/bin/env bash
# Builds the helm CLI from its Go module helm.sh/helm/v3 (pinned in helm-bin/go.mod and go.sum) through the
# Go module proxy, into a cache directory keyed by version. A warm cache returns at once. Used by the chart
# tests (test/e2e/chart.test.ts) through QM_HELM_BIN; nothing built lives in the repository.
#
# Usage: build.sh            prints the directory holding the `helm` binary on stdout (progress on stderr)
# Env:   QM_HELM_BIN_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
HELM_VERSION=v3.22.0                 # helm.sh/helm/v3 in helm-bin/go.mod; it needs Go >= 1.26
ROOT=${QM_HELM_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
# helm reports its version from these variables (its Makefile sets them the same way).
ldf="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldf+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
build_go_tool helm "$HELM_VERSION" "$HERE/helm-bin" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm "$ROOT/helm-$HELM_VERSION" "$ldf"

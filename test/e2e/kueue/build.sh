#!/usr/bin/env bash
# Builds the Kueue controller manager (sigs.k8s.io/kueue, cmd/kueue) from its Go module, pinned in
# kueue-bin/go.mod and go.sum, through the Go module proxy, into a cache directory keyed by version. A warm
# cache returns at once. Used by the Kueue e2e suite (test/e2e/kueue.test.ts) through QM_KUEUE_BIN; nothing
# built lives in the repository. Its CRDs (config/components/crd/bases) and webhook manifests
# (config/components/webhook/manifests.yaml) are read from the same module in the Go module cache, which this
# build fills.
#
# Usage: build.sh            prints the directory holding the `kueue` binary on stdout (progress on stderr)
# Env:   QM_KUEUE_BIN_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
KUEUE_VERSION=v0.19.2                # sigs.k8s.io/kueue in kueue-bin/go.mod
ROOT=${QM_KUEUE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
build_go_tool kueue "$KUEUE_VERSION" "$HERE/kueue-bin" sigs.k8s.io/kueue sigs.k8s.io/kueue/cmd/kueue "$ROOT/kueue-$KUEUE_VERSION"

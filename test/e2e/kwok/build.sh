#!/usr/bin/env bash
# Builds kwok (sigs.k8s.io/kwok, cmd/kwok: "Kubernetes WithOut Kubelet", which plays the kubelet for Node
# and Pod objects it manages) from its Go module, pinned in kwok-bin/go.mod and go.sum, through the Go
# module proxy, into a cache directory keyed by version. A warm cache returns at once. Used by the kwok e2e
# suite (test/e2e/kwok.test.ts, harness test/e2e/harness/kwok.ts) through QM_KWOK_BIN; nothing built lives in
# the repository. The Stage documents kwok runs are committed under stages/ (see README.md there).
#
# Usage: build.sh            prints the directory holding the `kwok` binary on stdout (progress on stderr)
# Env:   QM_KWOK_BIN_CACHE    cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
KWOK_VERSION=v0.8.0                  # sigs.k8s.io/kwok in kwok-bin/go.mod
ROOT=${QM_KWOK_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
build_go_tool kwok "$KWOK_VERSION" "$HERE/kwok-bin" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok "$ROOT/kwok-$KWOK_VERSION"

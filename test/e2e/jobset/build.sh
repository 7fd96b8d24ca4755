#!/usr/bin/env bash
# Builds the JobSet controller (sigs.k8s.io/jobset: the controller is the module root package main) from its
# Go module, pinned in jobset-bin/go.mod and go.sum, through the Go module proxy, into a cache directory keyed
# by version. A warm cache returns at once. Used by the Trainer v2 conformance (test/conformance/trainer.test.ts)
# through QM_JOBSET_BIN; nothing built lives in the repository. Its CRD and webhook manifests are read from the
# same module in the Go module cache (config/components/crd/bases, config/components/webhook), which this
# build fills.
#
# Usage: build.sh            prints the directory holding the `jobset` binary on stdout (progress on stderr)
# Env:   QM_JOBSET_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
JOBSET_VERSION=v0.12.0               # sigs.k8s.io/jobset in jobset-bin/go.mod
ROOT=${QM_JOBSET_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
build_go_tool jobset "$JOBSET_VERSION" "$HERE/jobset-bin" sigs.k8s.io/jobset sigs.k8s.io/jobset "$ROOT/jobset-$JOBSET_VERSION"

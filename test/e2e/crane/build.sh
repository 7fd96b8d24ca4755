#!/usr/bin/env bash
# Builds crane (github.com/google/go-containerregistry/cmd/crane: pull, push, append and mutate OCI images
# without a daemon; `crane registry serve` is its in-memory OCI registry) from its Go module, pinned in
# crane-bin/go.mod and go.sum, through the Go module proxy, into a cache directory keyed by version. A warm
# cache returns at once. Used by the release build (release/build.ts, `npm run release`) to assemble and push
# the image, and by its test (test/e2e/release.test.ts) for the local registry, through QM_CRANE_BIN; nothing
# built lives in the repository.
#
# Usage: build.sh            prints the directory holding the `crane` binary on stdout (progress on stderr)
# Env:   QM_CRANE_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
CRANE_VERSION=v0.22.1                # github.com/google/go-containerregistry in crane-bin/go.mod
ROOT=${QM_CRANE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
# `crane version` prints this variable (go-containerregistry, cmd/crane/cmd/version.go).
ldf="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION"
build_go_tool crane "$CRANE_VERSION" "$HERE/crane-bin" github.com/google/go-containerregistry \
  github.com/google/go-containerregistry/cmd/crane "$ROOT/crane-$CRANE_VERSION" "$ldf"

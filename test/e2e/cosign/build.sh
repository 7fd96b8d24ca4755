#!/usr/bin/env bash
# Builds cosign (github.com/sigstore/cosign/v2/cmd/cosign: signs and verifies container images, key-based and
# offline with --tlog-upload=false / --insecure-ignore-tlog) from its Go module, pinned in cosign-bin/go.mod and
# go.sum, through the Go module proxy, into a cache directory keyed by version. A warm cache returns at once.
# Used to sign the release's image (docs/release.md, "Signatures") and by test/e2e/release.test.ts through
# QM_COSIGN_BIN; nothing built lives in the repository. Cold, it is the slowest tool here: 880 s measured on the
# 2-core CI machine under load (docs/release.md), so .ci/run does not build it; set QM_COSIGN_BIN to run the test.
#
# Usage: build.sh            prints the directory holding the `cosign` binary on stdout (progress on stderr)
# Env:   QM_COSIGN_BIN_CACHE cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/go-tool.sh"
COSIGN_VERSION=v2.4.3                # github.com/sigstore/cosign/v2 in cosign-bin/go.mod
ROOT=${QM_COSIGN_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster}
# `cosign version` prints this variable (sigs.k8s.io/release-utils, version/version.go).
ldf="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION"
build_go_tool cosign "$COSIGN_VERSION" "$HERE/cosign-bin" github.com/sigstore/cosign/v2 \
  github.com/sigstore/cosign/v2/cmd/cosign "$ROOT/cosign-$COSIGN_VERSION" "$ldf"

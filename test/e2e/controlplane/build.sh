#!/usr/bin/env bash
# Builds the end-to-end control plane: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
# from the Go
# module k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3, through the Go module proxy, into a
# cache directory keyed by version. A warm cache returns at once. Nothing built lives in the repository.
#
# Usage: build.sh [VERSION]  prints the bin directory on stdout (progress goes to stderr)
#        VERSION             a k8s.io/kubernetes tag with a module in k8s-bin/<VERSION>/ (default: the newest,
#                            v1.37.2; `build.sh oldest` builds the oldest version CI tests, see OLDEST below)
# Env:   QM_K8S_BIN_CACHE    cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster/k8s-bins)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NEWEST=v1.37.2
OLDEST=v1.30.14
K8S_VERSION=${1:-$NEWEST}            # every staging replace in k8s-bin/<VERSION>/go.mod matches it
[[ $K8S_VERSION == newest ]] && K8S_VERSION=$NEWEST
[[ $K8S_VERSION == oldest ]] && K8S_VERSION=$OLDEST
MODULE=$HERE/k8s-bin/$K8S_VERSION
[[ -f $MODULE/go.mod ]] || { echo "build.sh: no module for $K8S_VERSION in $MODULE (versions: $(ls "$HERE/k8s-bin" | tr '\n' ' '))" >&2; exit 1; }
# One etcd for every version: v3.5.21 (what 1.33 pins) serves 1.30 to 1.37 (1.37 pins 3.7.0; the apiserver's
# etcd client speaks to any 3.5+ server), and building one etcd instead of one per version saves minutes.
ETCD_VERSION=v3.5.21
ROOT=${QM_K8S_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quartermaster/k8s-bins}
OUT=$ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)

complete() { for b in "${BINS[@]}"; do [[ -x $OUT/$b ]] || return 1; done; }
if complete; then echo "$OUT"; exit 0; fi

command -v go >/dev/null || {
  echo "build.sh: 'go' is not on PATH. Go >= 1.24 and the Go module proxy are needed to build the e2e control plane." >&2
  exit 1; }
mkdir -p "$OUT"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
start=$(date +%s)

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldf="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldf+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldf+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
# Only what is missing is built: a cache from before a binary joined BINS gains it without the others being
# rewritten (they may be running).
cmds=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [[ -x $OUT/$b ]] || cmds+=("k8s.io/kubernetes/cmd/$b")
done
if (( ${#cmds[@]} )); then
  echo "build.sh: building ${cmds[*]##*/} (kubernetes $K8S_VERSION) into $OUT (cold: tens of minutes)" >&2
  (cd "$MODULE" && go build -pgo=off -ldflags "$ldf" -o "$OUT/" "${cmds[@]}")
fi
if [[ ! -x $OUT/etcd ]]; then
  # The same etcd serves every version: copied from another version's cache when one has it.
  shared=$(ls "$ROOT"/k8s-*-etcd-"$ETCD_VERSION"/etcd 2>/dev/null | head -1 || true)
  if [[ -n $shared && -x $shared ]]; then
    echo "build.sh: etcd $ETCD_VERSION from $shared" >&2
    cp "$shared" "$OUT/etcd.tmp" && mv "$OUT/etcd.tmp" "$OUT/etcd"
  else
    echo "build.sh: building etcd $ETCD_VERSION" >&2
    (cd "$HERE/etcd-bin" && go build -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3)
  fi
fi

complete || { echo "build.sh: build finished but a binary is missing in $OUT" >&2; exit 1; }
echo "build.sh: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"

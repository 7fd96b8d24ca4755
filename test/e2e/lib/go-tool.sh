# Sourced by the build scripts of the Go tools the tests run (helm, the training operator): builds one
# command of a Go module pinned in a scratch module (go.mod and go.sum committed beside the script) through
# the Go module proxy into a cache directory keyed by version, and prints that directory. A warm cache
# returns at once.
#
# build_go_tool NAME VERSION MODULE_DIR MODULE PACKAGE OUT [LDFLAGS]
#   NAME        the binary's name in OUT          MODULE   the module path pinned at VERSION in MODULE_DIR/go.mod
#   MODULE_DIR  the scratch module's directory    PACKAGE  the command's package
build_go_tool() {
  local name=$1 version=$2 dir=$3 module=$4 package=$5 out=$6 ldflags=${7:-"-s -w"}
  if [[ -x $out/$name ]]; then echo "$out"; return 0; fi
  command -v go >/dev/null || {
    echo "build.sh: 'go' is not on PATH. Go ($(sed -n 's/^go //p' "$dir/go.mod") or newer) and the Go module proxy are needed to build $name." >&2
    return 1; }
  grep -q "$module $version" "$dir/go.mod" || { echo "build.sh: $dir/go.mod does not pin $module $version" >&2; return 1; }
  mkdir -p "$out"
  local start
  start=$(date +%s)
  echo "build.sh: building $name $version into $out (cold: a few minutes)" >&2
  (cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
    go build -pgo=off -ldflags "$ldflags" -o "$out/$name.tmp" "$package")
  mv "$out/$name.tmp" "$out/$name"
  echo "build.sh: done in $(( $(date +%s) - start )) s" >&2
  echo "$out"
}

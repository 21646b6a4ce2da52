#!/usr/bin/env bash
# Build another version of a component than hack/harness/tools/go.mod pins, from its own module directory
# hack/harness/tools/<component>-<major.minor>/, into
#
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/<component>/v<version>-<key>
#
# <key> hashes that directory's go.mod + go.sum, BUILD_VERSION and the Go version (a warm cache: a no-op).
#   kueue:             the controller `kueue` and its manifests share/kueue.yaml (KUEUE_VERSION=0.17.0)
#   scheduler-plugins: its kube-scheduler build with the Coscheduling plugin, as `kube-scheduler`
#
# Usage: build-pinned.sh COMPONENT VERSION [--print-bin-dir]
#   The Kueue version go.mod pins prints build.sh's directory and builds nothing here.
set -euo pipefail

BUILD_VERSION=1   # bump when the way binaries are built changes

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/harness/tools/lib.sh
. "$HERE/lib.sh"

args=()
print_only=0
for a in "$@"; do
  case "$a" in
    --print-bin-dir) print_only=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
component=${args[0]:-}
version=${args[1]:-}
version=${version#v}
case "$component" in
  kueue) module=sigs.k8s.io/kueue pkg=sigs.k8s.io/kueue/cmd/kueue bin=kueue
         ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v$version" ;;
  scheduler-plugins) module=sigs.k8s.io/scheduler-plugins pkg=sigs.k8s.io/scheduler-plugins/cmd/scheduler
         bin=kube-scheduler ldflags="-s -w" ;;
  *) echo "build-pinned.sh: give kueue or scheduler-plugins and a version (got '${component}')" >&2; exit 2 ;;
esac
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.]+)?$ ]] || { echo "build-pinned.sh: give a version like 0.17.0 (got '$version')" >&2; exit 2; }
if [[ $component == kueue && v$version == "$(mod_version sigs.k8s.io/kueue)" ]]; then
  if [[ $print_only == 1 ]]; then tools_bin_dir; exit 0; fi
  exec bash "$HERE/build.sh" --with-kueue
fi

MOD_DIR="$HERE/$component-${version%.*}"
pinned=$( [[ -f $MOD_DIR/go.mod ]] && mod_version "$module" "$MOD_DIR" || true)
if [[ $pinned != "v$version" ]]; then
  echo "build-pinned.sh: no module pins $component v$version (hack/harness/tools/$component-${version%.*}/go.mod:" \
    "${pinned:-absent}); another version needs its own directory, made like hack/harness/tools/kueue-0.17" >&2
  exit 2
fi

key=$({ cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; echo "BUILD_VERSION=$BUILD_VERSION"; GOTOOLCHAIN=local go env GOVERSION; } | sha256sum | cut -c1-16)
BIN="$(tools_cache_root)/$component/v$version-$key"
if [[ $print_only == 1 ]]; then echo "$BIN"; exit 0; fi
warm() { [[ -f $BIN/VERSION ]] && echo "tools: $component v$version up to date in $BIN"; }
warm && exit 0
mkdir -p "$BIN" "$(tools_cache_root)/logs"
LOG_DIR=$(cd "$(tools_cache_root)/logs" && pwd)
exec 9>"$BIN.lock"
flock -n 9 || { echo "tools: another build holds $BIN.lock, waiting..."; flock 9; }
warm && exit 0

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
t_start=$(date +%s)
(cd "$MOD_DIR" && go_build "$component-v$version" "$component v$version" -- \
  -trimpath -tags "$GO_TAGS" -ldflags "$ldflags" -o "$BIN/$bin" "$pkg")
if [[ $component == kueue ]]; then
  # The manifests, rendered with the default set's kubectl (build.sh builds it first).
  bash "$HERE/build.sh" >/dev/null
  mkdir -p "$BIN/share"
  "$(tools_bin_dir)/kubectl" kustomize "$(mod_dir "$module" "$MOD_DIR")/config/default" >"$BIN/share/kueue.yaml"
  echo "kueue v$version" >"$BIN/share/VERSIONS"
fi
echo "v$version" >"$BIN/VERSION"   # written last: its presence marks a complete build
echo "tools: [$(ts)] done; $component v$version in $BIN ($(du -sh "$BIN" | cut -f1)), built in $(( $(date +%s) - t_start ))s"

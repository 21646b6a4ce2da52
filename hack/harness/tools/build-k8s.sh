#!/usr/bin/env bash
# Build the Kubernetes control-plane binaries (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) of one Kubernetes version
# other than the one hack/harness/tools/go.mod pins, from its own module directory
# hack/harness/tools/k8s-<major.minor>/ (one Go module holds one k8s.io/kubernetes
# version), into
#
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/k8s/v<version>-<key>
#
# <key> hashes that directory's go.mod + go.sum, BUILD_VERSION and the Go
# version, so a warm cache makes this a no-op. etcd, kwok, JobSet and Kueue are
# not rebuilt: the cluster takes them from build.sh's directory.
#
# Usage: build-k8s.sh VERSION [--print-bin-dir]
#   VERSION: 1.37.2 (or v1.37.2). The version hack/harness/tools/go.mod pins prints
#   build.sh's directory and builds nothing here.
set -euo pipefail

BUILD_VERSION=1   # bump when the way binaries are built changes

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/harness/tools/lib.sh
. "$HERE/lib.sh"

version=""
print_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print-bin-dir) print_only=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "build-k8s.sh: unknown argument $1" >&2; exit 2 ;;
    *) version=${1#v} ;;
  esac
  shift
done
if [[ ! $version =~ ^1\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-k8s.sh: give a Kubernetes version like 1.37.2 (got '${version}')" >&2
  exit 2
fi

default=$(mod_version k8s.io/kubernetes)
if [[ v$version == "$default" ]]; then
  # The default version: build.sh builds and owns it.
  if [[ $print_only == 1 ]]; then tools_bin_dir; exit 0; fi
  exec bash "$HERE/build.sh"
fi

minor=${version%.*}
MOD_DIR="$HERE/k8s-$minor"
if [[ ! -f $MOD_DIR/go.mod ]]; then
  echo "build-k8s.sh: no module for Kubernetes $minor (hack/harness/tools/k8s-$minor/go.mod); versions here:" \
    "${default#v} (hack/harness/tools/go.mod)$(cd "$HERE" && for d in k8s-*/; do [[ -f $d/go.mod ]] && printf ', %s' "$(mod_version k8s.io/kubernetes "$HERE/$d" | sed 's/^v//')"; done)" >&2
  exit 2
fi
pinned=$(mod_version k8s.io/kubernetes "$MOD_DIR")
if [[ $pinned != "v$version" ]]; then
  echo "build-k8s.sh: hack/harness/tools/k8s-$minor/go.mod pins $pinned, not v$version" >&2
  exit 2
fi

key=$({ cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; echo "BUILD_VERSION=$BUILD_VERSION"; GOTOOLCHAIN=local go env GOVERSION; } | sha256sum | cut -c1-16)
BIN="$(tools_cache_root)/k8s/v$version-$key"
if [[ $print_only == 1 ]]; then echo "$BIN"; exit 0; fi

bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
complete() { local b; for b in "${bins[@]}"; do [[ -x $BIN/$b ]] || return 1; done; [[ -f $BIN/VERSION ]]; }
if complete; then echo "tools: Kubernetes v$version up to date in $BIN"; exit 0; fi

mkdir -p "$BIN" "$(tools_cache_root)/logs"
LOG_DIR=$(cd "$(tools_cache_root)/logs" && pwd)
exec 9>"$BIN.lock"
if ! flock -n 9; then
  echo "tools: another build holds $BIN.lock, waiting..."
  flock 9
fi
if complete; then echo "tools: Kubernetes v$version up to date in $BIN"; exit 0; fi

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
t_start=$(date +%s)
rm -f "$BIN/VERSION"
(cd "$MOD_DIR" && go_build "k8s-v$version" "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl v$version" -- \
  -trimpath -tags "$GO_TAGS" -ldflags "$(k8s_ldflags "v$version")" -o "$BIN/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)
echo "v$version" >"$BIN/VERSION"   # written last: its presence marks a complete build
echo "tools: [$(ts)] done; Kubernetes v$version in $BIN ($(du -sh "$BIN" | cut -f1)), built in $(( $(date +%s) - t_start ))s"

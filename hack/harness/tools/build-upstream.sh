#!/usr/bin/env bash
# Build the upstream Kubeflow Trainer controller (v2.3.0, pinned by
# hack/harness/tools/go.mod, the control plane's module: the packages it shares with
# the core come from the Go cache) for the differential test, into the tool
# cache of hack/harness/tools/build.sh:
#
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/bin/<key>/trainer-controller-manager
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/bin/<key>/share/trainer/   (upstream CRDs, webhook
#                                                                          configurations, runtimes)
#
# <key> hashes hack/harness/tools/go.mod + go.sum, this script's BUILD_VERSION and
# the Go version (the same recipe as hack/harness/tools/lib.sh's tools_key), so a
# warm cache makes this a no-op.
#
# Usage: build-upstream.sh [--print-bin-dir]
#   TRAINJOB_UPSTREAM_BIN=<dir> uses binaries from <dir> instead of the cache.
set -euo pipefail

BUILD_VERSION=1   # bump when the way the binary is built changes

UPSTREAM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/harness/tools/lib.sh
. "$UPSTREAM_DIR/lib.sh"
MODULE_DIR=$CLUSTER_HACK_DIR   # the Go module that pins the controller (its `tool` block)

upstream_key() {
  {
    cat "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum"
    grep -m1 '^BUILD_VERSION=' "$UPSTREAM_DIR/build-upstream.sh"
    GOTOOLCHAIN=local go env GOVERSION
  } | sha256sum | cut -c1-16
}

upstream_bin_dir() {
  if [[ -n ${TRAINJOB_UPSTREAM_BIN:-} ]]; then
    echo "$TRAINJOB_UPSTREAM_BIN"
  else
    echo "$(tools_cache_root)/bin/upstream-$(upstream_key)"
  fi
}

case "${1:-}" in
  --print-bin-dir) upstream_bin_dir; exit 0 ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  "") ;;
  *) echo "build-upstream.sh: unknown argument $1" >&2; exit 2 ;;
esac

BIN=$(upstream_bin_dir)
if [[ -x $BIN/trainer-controller-manager && -f $BIN/share/VERSIONS && -d $BIN/share/trainer/webhook ]]; then
  echo "upstream: up to date in $BIN"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
mkdir -p "$BIN" "$(tools_cache_root)/logs"
LOG_DIR=$(cd "$(tools_cache_root)/logs" && pwd)

exec 9>"$BIN.lock"
if ! flock -n 9; then
  echo "upstream: another build holds $BIN.lock, waiting..."
  flock 9
fi

MOD=github.com/kubeflow/trainer/v2
VERSION=$(mod_version "$MOD" "$MODULE_DIR")
t_start=$(date +%s)
if [[ ! -x $BIN/trainer-controller-manager ]]; then
  # lib.sh's go_build: progress lines every 20 s, the log's tail on failure.
  (cd "$MODULE_DIR" && go_build upstream-trainer "$MOD/cmd/trainer-controller-manager $VERSION" -- \
    -trimpath -tags "$GO_TAGS" -ldflags "-s -w" -o "$BIN/trainer-controller-manager.tmp" "$MOD/cmd/trainer-controller-manager")
  mv "$BIN/trainer-controller-manager.tmp" "$BIN/trainer-controller-manager"
fi

# Upstream's CRDs and default runtimes, copied out of the module cache so the
# differential test needs only this directory. They are applied only to the
# throw-away cluster of the differential run and never committed.
src=$(mod_dir "$MOD" "$MODULE_DIR")
tmp="$BIN/share.tmp"
rm -rf "$tmp"; mkdir -p "$tmp/trainer/crds" "$tmp/trainer/runtimes" "$tmp/trainer/webhook"
cp "$src"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$tmp/trainer/crds/"
cp "$src"/manifests/base/webhook/*.yaml "$tmp/trainer/webhook/"   # a kustomization: kubectl kustomize it
cp "$src"/manifests/base/rbac/role.yaml "$tmp/trainer/"
find "$src/manifests/base/runtimes" -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$tmp/trainer/runtimes/" \;
chmod -R u+w "$tmp"
echo "trainer $VERSION" >"$tmp/VERSIONS"
rm -rf "$BIN/share"; mv "$tmp" "$BIN/share"
echo "upstream: [$(ts)] done; $BIN ($(du -sh "$BIN" | cut -f1))"

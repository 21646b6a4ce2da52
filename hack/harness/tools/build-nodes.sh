#!/usr/bin/env bash
# Build the parts of real nodes (issue 23) from pinned Go modules into a cache
# outside the repository, beside the control plane's:
#
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/nodes/<key>/{bin,cni}
#
# | part                                   | module (hack/harness/tools/...)                              |
# | kubelet, kube-proxy                    | go.mod: k8s.io/kubernetes, as the control plane       |
# | containerd, containerd-shim-runc-v2, ctr | containerd/go.mod: github.com/containerd/containerd/v2 |
# | runc (cgo, seccomp via libseccomp-dev) | runc/go.mod: github.com/opencontainers/runc            |
# | CNI bridge, host-local, loopback, portmap | cni/go.mod: github.com/containernetworking/plugins  |
# | coredns (the Corefile's four plugins)  | coredns/main.go, coredns/go.mod: github.com/coredns/coredns |
#
# <key> hashes those go.mod/go.sum files, NODES_BUILD_VERSION, the Go version
# and the libseccomp runc links against, so a warm cache makes this a no-op.
# The control plane's own key (build.sh) does not change.
#
# Usage: build-nodes.sh [--print-dir] [--without-kubelet]  (the latter: the parts outside the control plane's
# module only, beside its compile: `make demo`'s background build)
# Needs Debian's libseccomp-dev, gcc and pkg-config (make tools-nodes-debs).
set -euo pipefail

NODES_BUILD_VERSION=2   # bump when the way node parts are built changes

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/harness/tools/lib.sh
. "$HERE/lib.sh"

print_only=0 without_kubelet=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print-dir) print_only=1 ;;
    --without-kubelet) without_kubelet=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-nodes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

nodes_key() {
  {
    local d
    for d in "$HERE" "$HERE/containerd" "$HERE/runc" "$HERE/cni" "$HERE/coredns"; do
      cat "$d/go.mod" "$d/go.sum"
    done
    cat "$HERE/coredns/main.go"
    grep -m1 '^NODES_BUILD_VERSION=' "$HERE/build-nodes.sh"
    GOTOOLCHAIN=local go env GOVERSION
    dpkg-query -W -f '${Version}' libseccomp-dev 2>/dev/null || echo "no libseccomp-dev"
  } | sha256sum | cut -c1-16
}

OUT=${TRAINJOB_NODES_DIR:-$(tools_cache_root)/nodes/$(nodes_key)}
if [[ $print_only == 1 ]]; then
  echo "$OUT"
  exit 0
fi

bins=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc coredns)
plugins=(bridge host-local loopback portmap)
missing_bins() {
  local b
  for b in "${bins[@]}"; do [[ -x "$OUT/bin/$b" ]] || { echo "$b"; }; done
  for b in "${plugins[@]}"; do [[ -x "$OUT/cni/$b" ]] || { echo "cni/$b"; }; done
}
if [[ -z $(missing_bins) && -f $OUT/VERSIONS ]]; then
  echo "tools-nodes: up to date in $OUT"
  exit 0
fi

if ! pkg-config --exists libseccomp 2>/dev/null || ! command -v gcc >/dev/null; then
  echo "tools-nodes: runc needs gcc, pkg-config and libseccomp-dev (Debian); run: make tools-nodes-debs" >&2
  exit 1
fi

mkdir -p "$OUT/bin" "$OUT/cni" "$(tools_cache_root)/logs"
LOG_DIR=$(cd "$(tools_cache_root)/logs" && pwd)
exec 9>"$OUT.lock"
if ! flock -n 9; then
  echo "tools-nodes: another build holds $OUT.lock, waiting..."
  flock 9
fi

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
t_start=$(date +%s)
K8S_VERSION=$(mod_version k8s.io/kubernetes)
CONTAINERD_VERSION=$(mod_version github.com/containerd/containerd/v2 "$HERE/containerd")
RUNC_VERSION=$(mod_version github.com/opencontainers/runc "$HERE/runc")
CNI_VERSION=$(mod_version github.com/containernetworking/plugins "$HERE/cni")
COREDNS_VERSION=$(mod_version github.com/coredns/coredns "$HERE/coredns")

has() { [[ -x "$OUT/$1" ]]; }

if [[ $without_kubelet == 0 ]] && { ! has bin/kubelet || ! has bin/kube-proxy; }; then
  # Same module, versions and stamps as the control plane (build.sh).
  (cd "$HERE" && go_build kubelet "kubelet, kube-proxy $K8S_VERSION" -- \
    -trimpath -tags "$GO_TAGS" -ldflags "$(k8s_ldflags "$K8S_VERSION")" -o "$OUT/bin/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
fi
if ! has bin/containerd || ! has bin/containerd-shim-runc-v2 || ! has bin/ctr; then
  # btrfs/devmapper/zfs snapshotters need cgo headers and are not used (overlayfs, native).
  (cd "$HERE/containerd" && go_build containerd "containerd, containerd-shim-runc-v2, ctr $CONTAINERD_VERSION" -- \
    -trimpath -tags no_btrfs,no_devmapper,no_zfs,urfave_cli_no_docs \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" -o "$OUT/bin/" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr)
fi
if ! has bin/runc; then
  # runc's nsenter is C (cgo is required). seccomp is compiled in, linked against Debian's
  # libseccomp: pods with seccompProfile RuntimeDefault (the chart's restricted securityContext)
  # are refused by a runc without it. libpathrs (a Rust library) is not packaged: left out.
  (cd "$HERE/runc" && CGO_ENABLED=1 go_build runc "runc $RUNC_VERSION (cgo, seccomp)" -- \
    -trimpath -tags seccomp,urfave_cli_no_docs \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$OUT/bin/runc" github.com/opencontainers/runc)
fi
cni_missing=0
for p in "${plugins[@]}"; do has "cni/$p" || cni_missing=1; done
if [[ $cni_missing == 1 ]]; then
  (cd "$HERE/cni" && go_build cni "CNI plugins ${plugins[*]} $CNI_VERSION" -- \
    -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION" \
    -o "$OUT/cni/" \
    github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/meta/portmap)
fi
if ! has bin/coredns; then
  (cd "$HERE/coredns" && go_build coredns "coredns $COREDNS_VERSION" -- \
    -trimpath -ldflags "-s -w" -o "$OUT/bin/coredns" .)
fi

[[ -z $(missing_bins) ]] || { echo "tools-nodes: [$(ts)] all but kubelet and kube-proxy built (--without-kubelet)"; exit 0; }
{
  echo "kubelet kube-proxy $K8S_VERSION"
  echo "containerd $CONTAINERD_VERSION"
  echo "runc $RUNC_VERSION (libseccomp $(pkg-config --modversion libseccomp))"
  echo "cni-plugins $CNI_VERSION (${plugins[*]})"
  echo "coredns $COREDNS_VERSION"
} >"$OUT/VERSIONS"
echo "tools-nodes: [$(ts)] done; node parts in $OUT ($(du -sh "$OUT" | cut -f1))"

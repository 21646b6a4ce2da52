#!/usr/bin/env bash
# Build the local control-plane toolset from the Go modules pinned in
# hack/harness/tools (the optional Kueue and helm among them) into a cache outside
# the repository:
#
#   ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/bin/<key>
#
# <key> hashes go.mod + go.sum of every pinned module, this script's
# BUILD_VERSION and the Go version, so a warm cache makes this a no-op.
#
# Usage: build.sh [--print-bin-dir] [--with-kueue] [--with-helm] [--all]
#   TRAINJOB_TOOLS_EXTRA="kueue helm" has the same effect as the flags.
#
# The default set (kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, etcd, kwok, kwokctl, jobset) is what the cluster tests need.
set -euo pipefail

BUILD_VERSION=1   # bump when the way binaries are built changes

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/harness/tools/lib.sh
. "$HERE/lib.sh"

want_kueue=0
want_helm=0
print_only=0
for extra in ${TRAINJOB_TOOLS_EXTRA:-}; do
  case "$extra" in
    kueue) want_kueue=1 ;;
    helm) want_helm=1 ;;
  esac
done
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print-bin-dir) print_only=1 ;;
    --with-kueue) want_kueue=1 ;;
    --with-helm) want_helm=1 ;;
    --all) want_kueue=1; want_helm=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

BIN=$(tools_bin_dir)
if [[ $print_only == 1 ]]; then
  echo "$BIN"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
mkdir -p "$BIN" "$BIN/../../logs"
LOG_DIR=$(cd "$BIN/../../logs" && pwd)

missing() {
  local b
  for b in "$@"; do [[ -x "$BIN/$b" ]] || return 0; done
  return 1
}
core=(kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl jobset etcd controller-gen)
wanted=("${core[@]}")
[[ $want_kueue == 1 ]] && wanted+=(kueue)
[[ $want_helm == 1 ]] && wanted+=(helm)
# Fast path without the lock: everything asked for is already in the cache.
if ! missing "${wanted[@]}" && [[ -f $BIN/share/VERSIONS ]] \
   && { [[ $want_kueue == 0 ]] || [[ -f $BIN/share/kueue.yaml ]]; }; then
  echo "tools: up to date in $BIN"
  exit 0
fi

# Serialise concurrent builds (parallel make, pytest-xdist workers).
exec 9>"$BIN.lock"
if ! flock -n 9; then
  echo "tools: another build holds $BIN.lock, waiting..."
  flock 9
fi

K8S_VERSION=$(mod_version k8s.io/kubernetes)
KWOK_VERSION=$(mod_version sigs.k8s.io/kwok)
JOBSET_VERSION=$(mod_version sigs.k8s.io/jobset)

# Version stamps: without them kube-apiserver reports
# v0.0.0-master+$Format:%H$ and components that parse the server version
# (Kueue) exit at start-up.
LD=$(k8s_ldflags "$K8S_VERSION")
LD="$LD -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}"
LD="$LD -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION"

t_start=$(date +%s)

built_any=0
if missing kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl jobset; then
  built_any=1
  (cd "$HERE" && go_build core "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $K8S_VERSION; kwok, kwokctl $KWOK_VERSION; jobset $JOBSET_VERSION" -- \
    -trimpath -tags "$GO_TAGS" -ldflags "$LD" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl \
    sigs.k8s.io/kwok/cmd/kwok \
    sigs.k8s.io/kwok/cmd/kwokctl \
    sigs.k8s.io/jobset)
fi
if missing etcd; then
  built_any=1
  # The main package path ends in /v3: name the binary explicitly.
  (cd "$HERE" && go_build etcd "etcd $(mod_version go.etcd.io/etcd/server/v3)" -- \
    -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
fi
if missing controller-gen; then
  built_any=1
  (cd "$HERE/volcano" && go_build controller-gen "controller-gen $(mod_version sigs.k8s.io/controller-tools "$HERE/volcano") (Volcano PodGroup CRD)" -- \
    -trimpath -ldflags "-s -w" -o "$BIN/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
fi
if [[ $want_kueue == 1 ]] && missing kueue; then
  built_any=1
  KUEUE_VERSION=$(mod_version sigs.k8s.io/kueue)
  # In the control plane's own module (go.mod): the packages Kueue shares with the core come from the Go cache.
  (cd "$HERE" && go_build kueue "kueue $KUEUE_VERSION" -- \
    -trimpath -tags "$GO_TAGS" -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    -o "$BIN/kueue" sigs.k8s.io/kueue/cmd/kueue)
fi
if [[ $want_helm == 1 ]] && missing helm; then
  built_any=1
  HELM_VERSION=$(mod_version helm.sh/helm/v3)
  (cd "$HERE" && go_build helm "helm $HELM_VERSION" -- \
    -trimpath -tags "$GO_TAGS" -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    -o "$BIN/helm" helm.sh/helm/v3/cmd/helm)
fi

# Upstream manifests the harness installs, copied out of the pinned modules
# so cluster start-up needs only this directory (not the module cache).
SHARE="$BIN/share"
export_manifests() {
  local tmp="$BIN/share.tmp" kwok jobset sp trainer
  rm -rf "$tmp"; mkdir -p "$tmp/kwok-stages" "$tmp/crds"
  kwok=$(mod_dir sigs.k8s.io/kwok)
  jobset=$(mod_dir sigs.k8s.io/jobset)
  sp=$(mod_dir sigs.k8s.io/scheduler-plugins)
  trainer=$(mod_dir github.com/kubeflow/trainer/v2)
  local d
  for d in "$kwok" "$jobset" "$sp" "$trainer"; do
    [[ -n $d && -d $d ]] || { echo "tools: a pinned module is missing from the module cache" >&2; return 1; }
  done
  cp "$kwok/kustomize/stage/node/fast/node-initialize.yaml" \
     "$kwok/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$kwok/kustomize/stage/pod/fast/pod-ready.yaml" \
     "$kwok/kustomize/stage/pod/fast/pod-delete.yaml" "$tmp/kwok-stages/"
  "$BIN/kubectl" kustomize "$jobset/config/default" >"$tmp/jobset.yaml" 2>>"$LOG_DIR/kustomize.log"
  cp "$sp/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$tmp/crds/scheduler-plugins-podgroups.yaml"
  # Volcano's PodGroup CRD, generated from its Go types (volcano.sh/apis) by controller-gen.
  (cd "$HERE/volcano" && "$BIN/controller-gen" crd:crdVersions=v1 \
    paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 output:crd:dir="$tmp/volcano-gen") \
    >>"$LOG_DIR/controller-gen.log" 2>&1 || { echo "tools: controller-gen failed, see $LOG_DIR/controller-gen.log" >&2; return 1; }
  cp "$tmp/volcano-gen/scheduling.volcano.sh_podgroups.yaml" "$tmp/crds/volcano-podgroups.yaml"
  rm -rf "$tmp/volcano-gen"
  mkdir -p "$tmp/trainer"
  cp "$trainer"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$tmp/trainer/"
  if [[ -x "$BIN/kueue" ]]; then
    "$BIN/kubectl" kustomize "$(mod_dir sigs.k8s.io/kueue)/config/default" >"$tmp/kueue.yaml" 2>>"$LOG_DIR/kustomize.log"
  fi
  chmod -R u+w "$tmp"
  {
    echo "kwok $(mod_version sigs.k8s.io/kwok)"
    echo "jobset $(mod_version sigs.k8s.io/jobset)"
    echo "scheduler-plugins $(mod_version sigs.k8s.io/scheduler-plugins)"
    echo "trainer $(mod_version github.com/kubeflow/trainer/v2)"
    echo "volcano-podgroup-crd volcano.sh/apis $(mod_version volcano.sh/apis "$HERE/volcano") (controller-gen $(mod_version sigs.k8s.io/controller-tools "$HERE/volcano"))"
    [[ -x "$BIN/kueue" ]] && echo "kueue $(mod_version sigs.k8s.io/kueue)"
    true
  } >"$tmp/VERSIONS"
  rm -rf "$SHARE"; mv "$tmp" "$SHARE"
}
if [[ ! -f $SHARE/VERSIONS ]] || { [[ -x $BIN/kueue ]] && [[ ! -f $SHARE/kueue.yaml ]]; }; then
  built_any=1
  echo "tools: [$(ts)] exporting manifests (kwok stages, JobSet, PodGroup CRDs, Trainer CRDs) to $SHARE"
  export_manifests
fi

if [[ $built_any == 1 ]]; then
  echo "tools: [$(ts)] done; binaries in $BIN ($(du -sh "$BIN" | cut -f1))"
else
  echo "tools: up to date in $BIN"
fi

# Shared helpers for hack/harness/tools scripts (sourced, not executed).
# shellcheck shell=bash

CLUSTER_HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$CLUSTER_HACK_DIR/../../.." && pwd)

# Cache key: go.mod + go.sum of every pinned module, the build script's
# BUILD_VERSION line and the Go version in use.
tools_key() {
  {
    local d
    for d in "$CLUSTER_HACK_DIR" "$CLUSTER_HACK_DIR/volcano"; do
      [[ -f $d/go.mod ]] && cat "$d/go.mod"
      [[ -f $d/go.sum ]] && cat "$d/go.sum"
    done
    grep -m1 '^BUILD_VERSION=' "$CLUSTER_HACK_DIR/build.sh"
    GOTOOLCHAIN=local go env GOVERSION
  } | sha256sum | cut -c1-16
}

tools_cache_root() {
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/trainjob-operator"
}

tools_bin_dir() {
  if [[ -n ${TRAINJOB_TOOLS_BIN:-} ]]; then
    echo "$TRAINJOB_TOOLS_BIN"
  else
    echo "$(tools_cache_root)/bin/$(tools_key)"
  fi
}

# mod_version MODULE [DIR]: the version DIR/go.mod requires (no network).
mod_version() {
  local mod=$1 dir=${2:-$CLUSTER_HACK_DIR}
  awk -v m="$mod" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$dir/go.mod"
}

# mod_dir MODULE [DIR]: module cache directory of MODULE as pinned by DIR/go.mod
# (downloads it if needed).
mod_dir() {
  local mod=$1 dir=${2:-$CLUSTER_HACK_DIR}
  # go list -m only reports modules already in the cache; go mod download
  # fetches (and verifies) the pinned version first.
  (cd "$dir" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go mod download -json "$mod" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
}

# ts: seconds since the script set t_start (for progress lines).
ts() { echo "$(( $(date +%s) - t_start ))s"; }

# go_build LOGNAME DESCRIPTION -- go build args...
# Runs go build -v, printing a progress line every 20 s (packages compiled).
go_build() {
  local name=$1 desc=$2; shift 3
  local log="$LOG_DIR/build-$name.log"
  echo "tools: [$(ts)] building $desc (log: $log)"
  : >"$log"
  ( go build -v "$@" >>"$log" 2>&1 ) &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    local i
    for i in $(seq 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "tools: [$(ts)]   $desc: $(grep -vc '^go: ' "$log" || true) packages compiled so far, last: $(tail -n1 "$log")"
    fi
  done
  if ! wait "$pid"; then
    echo "tools: [$(ts)] FAILED building $desc; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
  echo "tools: [$(ts)] built $desc"
}

# The build tags of every Go binary built from the control plane's module (hack/harness/tools/go.mod: the core, kubelet
# and kube-proxy, Kueue, helm, upstream's Trainer controller). The Go build cache keys a package by its sources, its
# dependencies' versions and the flags: one module and one set of tags and flags mean each shared package is
# compiled once, so cold, Kueue and upstream's controller compile only their own packages.
GO_TAGS=selinux,notest,grpcnotrace

# k8s_ldflags VERSION: -ldflags for Kubernetes binaries of k8s.io/kubernetes VERSION (vX.Y.Z).
# Without the version stamps kube-apiserver reports v0.0.0-master+$Format:%H$ and
# components that parse the server version (Kueue) exit at start-up. The build date
# is fixed, which keeps builds reproducible.
k8s_ldflags() {
  local version=$1 minor p ld="-s -w"
  minor=$(echo "$version" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=2000-01-01T00:00:00Z"
  done
  echo "$ld"
}

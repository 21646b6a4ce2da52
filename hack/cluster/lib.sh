# Shared helpers for hack/cluster scripts (sourced, not executed).
# shellcheck shell=bash

CLUSTER_HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$CLUSTER_HACK_DIR/../.." && pwd)

# Cache key: go.mod + go.sum of every pinned module, the build script's
# BUILD_VERSION line and the Go version in use.
tools_key() {
  {
    local d
    for d in "$CLUSTER_HACK_DIR" "$CLUSTER_HACK_DIR/kueue" "$CLUSTER_HACK_DIR/helm" "$CLUSTER_HACK_DIR/volcano"; do
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

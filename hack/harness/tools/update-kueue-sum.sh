#!/usr/bin/env bash
# Regenerate hack/harness/tools/go.sum after changing hack/harness/tools/go.mod (Kueue is one of its tools).
# sigs.k8s.io/scheduler-library v0.1.0-alpha1 (imported by Kueue v0.19.x) is
# served by the module proxy but unknown to sum.golang.org, so this one
# module is exempted from the checksum database *here only*; the resulting
# go.sum line is committed and every build verifies against it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GOTOOLCHAIN=local GONOSUMDB=sigs.k8s.io/scheduler-library go mod tidy
grep scheduler-library go.sum

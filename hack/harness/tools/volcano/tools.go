//go:build tools

// Pins controller-gen and Volcano's API types: build.sh builds controller-gen and
// generates the podgroups.scheduling.volcano.sh CRD from volcano.sh/apis, so the
// local control plane validates Volcano PodGroups exactly as a Volcano install does
// (spec.queue, spec.networkTopology, ...).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

//go:build tools

// Blank imports keep the API modules whose CRD manifests the harness
// installs (scheduler-plugins PodGroup, Volcano PodGroup, Trainer) in
// go.mod/go.sum, so their versions are pinned and hashed into the cache key.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	_ "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

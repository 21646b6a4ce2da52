# Local Kubernetes control plane for tests (issue 3). Included from the top
# Makefile; every path is relative to the repository root.
#
#   make tools                 build the pinned binaries into the cache (no-op when warm)
#   make tools WITH_KUEUE=1    ... plus the optional Kueue controller
#   make tools WITH_HELM=1     ... plus helm
#   make cluster-up            start the cluster; kubeconfig in .cluster/kubeconfig
#   make cluster-up WITH_KUEUE=1
#   make cluster-down          stop it (idempotent)
#   make cluster-test          run the harness self-test (brings a cluster up and down)
#   make cluster-status        print the kubeconfig path if a cluster is answering

CLUSTER_HACK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CLUSTER_PYTHON ?= python3
CLUSTER_PYTEST ?= $(CLUSTER_PYTHON) -m pytest
CLUSTER_SCRIPT := hack/trainjob_dev/cluster.py
WITH_KUEUE ?= 0
WITH_HELM ?= 0

cluster_kueue_flag = $(if $(filter-out 0,$(WITH_KUEUE)),--with-kueue)
cluster_helm_flag = $(if $(filter-out 0,$(WITH_HELM)),--with-helm)

.PHONY: tools cluster-up cluster-down cluster-test cluster-status

tools:
	@bash $(CLUSTER_HACK_DIR)/build.sh $(cluster_kueue_flag) $(cluster_helm_flag)

cluster-up: tools
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) up --no-build $(if $(filter-out 0,$(WITH_KUEUE)),--kueue)

cluster-down:
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) down

cluster-status:
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) status

cluster-test: tools
	TRAINJOB_OPERATOR_CLUSTER_KUEUE=$(WITH_KUEUE) $(CLUSTER_PYTEST) \
		tests/integration/test_cluster_harness.py -m cluster -v

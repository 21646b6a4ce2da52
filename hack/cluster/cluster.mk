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
#   make tools-nodes-debs      install the Debian packages real nodes need (no-op when present)
#   make tools-nodes           build the real nodes' parts into the cache (kubelet, containerd, runc, CNI, CoreDNS)
#   make tools WITH_NODES=1    ... both sets
#   make cluster-up REAL_NODES=2   the cluster with 2 real nodes beside the kwok ones
#   make tools K8S_VERSION=1.37.2       ... plus that Kubernetes version's control plane (hack/cluster/k8s-1.37)
#   make cluster-up K8S_VERSION=1.37.2 K8S_FEATURE_GATES=GenericWorkload=true K8S_RUNTIME_CONFIG=scheduling.k8s.io/v1beta1=true
#                              that version with those gates; the test fixtures read the same variables

CLUSTER_HACK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CLUSTER_PYTHON ?= python3
CLUSTER_PYTEST ?= $(CLUSTER_PYTHON) -m pytest
CLUSTER_SCRIPT := hack/trainjob_dev/cluster.py
WITH_KUEUE ?= 0
WITH_HELM ?= 0
WITH_NODES ?= 0
REAL_NODES ?= 0
# Another Kubernetes version than hack/cluster/go.mod's (empty: that one); passed to the scripts as the environment.
K8S_VERSION ?=
# Debian packages of the real nodes: iptables (kube-proxy, the pod network's forwarding rules), buildah (images
# without a daemon), mmdebstrap (root filesystems of training images), libseccomp-dev, gcc, pkg-config (runc's
# cgo build), busybox-static (the pause and test images).
NODES_DEBS := iptables buildah mmdebstrap libseccomp-dev gcc pkg-config busybox-static

cluster_kueue_flag = $(if $(filter-out 0,$(WITH_KUEUE)),--with-kueue)
cluster_helm_flag = $(if $(filter-out 0,$(WITH_HELM)),--with-helm)

.PHONY: tools tools-nodes tools-nodes-debs cluster-up cluster-down cluster-test cluster-status

tools:
	@bash $(CLUSTER_HACK_DIR)/build.sh $(cluster_kueue_flag) $(cluster_helm_flag)
	@$(if $(strip $(K8S_VERSION)),bash $(CLUSTER_HACK_DIR)/build-k8s.sh $(K8S_VERSION))
	@$(if $(filter-out 0,$(WITH_NODES) $(REAL_NODES)),$(MAKE) --no-print-directory tools-nodes)

# Idempotent: apt-get runs only when a package is missing.
tools-nodes-debs:
	@missing=$$(for p in $(NODES_DEBS); do dpkg-query -W -f '$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo ">> real-node Debian packages present"; else \
		echo ">> installing $$missing (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The builds share the machine: nice keeps them behind interactive work.
tools-nodes: tools-nodes-debs
	@nice -n 10 bash $(CLUSTER_HACK_DIR)/build-nodes.sh

cluster-up: tools
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) up --no-build $(if $(filter-out 0,$(WITH_KUEUE)),--kueue --topology) $(if $(filter-out 0,$(REAL_NODES)),--real-nodes $(REAL_NODES))

cluster-down:
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) down

cluster-status:
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) status

cluster-test: tools
	TRAINJOB_OPERATOR_CLUSTER_KUEUE=$(WITH_KUEUE) $(CLUSTER_PYTEST) \
		tests/integration/test_cluster_harness.py -m cluster -v

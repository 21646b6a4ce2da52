# The development harness (hack/harness/README.md): every target that builds tools, runs a local cluster, real nodes
# or the demo. Included from the top Makefile; paths are relative to the repository root. Switches: WITH_KUEUE,
# WITH_HELM, WITH_NODES, WITH_KWOK (0 or 1); REAL_NODES is a count; K8S_VERSION a Kubernetes version.

HARNESS_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CLUSTER_HACK_DIR := $(HARNESS_DIR)/tools
CLUSTER_PYTHON ?= python3
CLUSTER_PYTEST ?= $(CLUSTER_PYTHON) -m pytest
CLUSTER_SCRIPT := $(HARNESS_DIR)/cluster.py
REALNODE_PREBUILD = $(CLUSTER_PYTHON) $(HARNESS_DIR)/realnode_prebuild.py
WITH_KUEUE ?= 0
WITH_HELM ?= 0
WITH_NODES ?= 0
WITH_KWOK ?= 0
REAL_NODES ?=
# Another Kubernetes version than hack/harness/tools/go.mod's (empty: that one), e.g. 1.37.2 (hack/harness/tools/k8s-1.37);
# K8S_FEATURE_GATES and K8S_RUNTIME_CONFIG pass gates and API settings to that control plane. The test fixtures read
# the same variables from the environment.
K8S_VERSION ?=
# Another Kueue than hack/harness/tools/go.mod's (empty: that one), e.g. 0.17.0 (hack/harness/tools/kueue-0.17); the
# test fixtures read it too.
KUEUE_VERSION ?=
# One real-node cluster per machine (fixed pod subnet, global kube-proxy chains): real-node runs take this lock.
REALNODE_LOCK ?= /tmp/trainjob-realnode.lock
DEMO_PREBUILD_DIR ?= $(or $(TMPDIR),/tmp)/trainjob-operator-demo-prebuild
IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1)
# Debian packages of the real nodes: iptables (kube-proxy, the pod network's forwarding rules), buildah (images
# without a daemon), mmdebstrap (root filesystems of training images), libseccomp-dev, gcc, pkg-config (runc's
# cgo build), busybox-static (the pause and test images).
NODES_DEBS := iptables buildah mmdebstrap libseccomp-dev gcc pkg-config busybox-static

switch = $(filter-out 0,$(1))
cluster_kueue_flag = $(if $(call switch,$(WITH_KUEUE)),--with-kueue)
cluster_helm_flag = $(if $(call switch,$(WITH_HELM)),--with-helm)

.PHONY: tools tools-helm tools-kueue tools-coscheduling tools-nodes tools-nodes-debs tools-upstream tools-browser cluster-up cluster-down
.PHONY: cluster-status cluster-test test-realnodes bench-realnodes demo demo-down

##@ Harness: tools and clusters (hack/harness)
tools: ## build the control plane's binaries into the tool cache (no-op when warm; WITH_KUEUE=1, WITH_HELM=1, WITH_NODES=1 add theirs)
	@bash $(CLUSTER_HACK_DIR)/build.sh $(cluster_kueue_flag) $(cluster_helm_flag)
	@$(if $(strip $(K8S_VERSION)),bash $(CLUSTER_HACK_DIR)/build-k8s.sh $(K8S_VERSION))
	@$(if $(call switch,$(WITH_NODES) $(REAL_NODES)),$(MAKE) --no-print-directory tools-nodes)

tools-helm: ## build the control plane's binaries and helm into the tool cache (no-op when warm)
	@bash $(CLUSTER_HACK_DIR)/build.sh --with-helm

tools-kueue: ## build the control plane's binaries and Kueue into the tool cache (no-op when warm; KUEUE_VERSION, K8S_VERSION too)
	@bash $(CLUSTER_HACK_DIR)/build.sh --with-kueue
	@$(if $(strip $(KUEUE_VERSION)),bash $(CLUSTER_HACK_DIR)/build-pinned.sh kueue $(KUEUE_VERSION))
	@$(if $(strip $(K8S_VERSION)),bash $(CLUSTER_HACK_DIR)/build-k8s.sh $(K8S_VERSION))

tools-coscheduling: ## build scheduler-plugins' kube-scheduler (the Coscheduling plugin) into the tool cache (no-op when warm)
	@bash $(CLUSTER_HACK_DIR)/build-pinned.sh scheduler-plugins 0.35.4-devel

tools-upstream: ## build upstream Kubeflow Trainer v2.3.0's controller into the tool cache (no-op when warm)
	@bash $(CLUSTER_HACK_DIR)/build-upstream.sh

# Idempotent: apt-get runs only when a package is missing.
tools-nodes-debs: ## install the Debian packages real nodes need (no-op when present)
	@missing=$$(for p in $(NODES_DEBS); do dpkg-query -W -f '$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo ">> real-node Debian packages present"; else \
		echo ">> installing $$missing (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The builds share the machine: nice keeps them behind interactive work.
tools-nodes: tools-nodes-debs ## build the real nodes' parts into the tool cache (kubelet, containerd, runc, CNI, CoreDNS)
	@nice -n 10 bash $(CLUSTER_HACK_DIR)/build-nodes.sh

# The UI's browser test (tests/integration/test_ui.py) drives Debian's Chromium through its WebDriver; it skips, saying
# why, when they are absent.
tools-browser: ## install Chromium and chromedriver for the UI browser test (Debian/Ubuntu; no-op when present)
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		echo ">> chromium and chromedriver present"; \
	else \
		echo ">> installing chromium and chromium-driver (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

cluster-up: tools ## start a local control plane, kubeconfig in .cluster/kubeconfig (WITH_KUEUE=1; REAL_NODES=2 adds real nodes)
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) up --no-build $(if $(call switch,$(WITH_KUEUE)),--kueue --topology) $(if $(call switch,$(REAL_NODES)),--real-nodes $(REAL_NODES))

cluster-down: ## stop the local control plane (idempotent)
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) down

cluster-status: ## print the kubeconfig path if a local control plane is answering
	@$(CLUSTER_PYTHON) $(CLUSTER_SCRIPT) status

cluster-test: tools ## the harness's self-test (brings a control plane up and down; WITH_KUEUE=1 with Kueue)
	@TRAINJOB_OPERATOR_CLUSTER_KUEUE=$(WITH_KUEUE) $(CLUSTER_PYTEST) tests/integration/test_cluster_harness.py -m cluster -v

##@ Test sessions (each defined once; `make test` runs them in lanes)
# Not root: no real nodes can run here, the tests skip saying why, so nothing is built for them.
test-realnodes: $(STAMP) tools tools-helm $(if $(IS_ROOT),tools-nodes) ## session 4: every real-node test (tests/realnode) on 2 real nodes, under the machine's real-node lock
	@flock -w 3600 $(REALNODE_LOCK) $(CLUSTER_PYTEST) tests/realnode -q -m realnode $(call junit,4-realnode)

##@ Benchmarks
bench-realnodes: $(STAMP) tools tools-nodes tools-upstream ## pod start latency on 2 real nodes (root): ours vs upstream v2.3.0, medians of 7, and the real torch run's wall time
	@flock $(REALNODE_LOCK) $(CLUSTER_PYTHON) bench/realnode_bench.py

##@ Start here
# As root the demo trains the examples on 2 real nodes. Its training images (network: Debian packages, PyPI wheels)
# build in the background from the start while the control plane and the node parts compile (CPU) in the
# foreground; where real nodes cannot run, the demo says why in one line and runs on kwok's fake nodes.
demo_real = $(if $(call switch,$(WITH_KWOK)),,1)
demo: $(STAMP) ## the operator on a local control plane: the example TrainJobs train on 2 real nodes (root; else or WITH_KWOK=1: kwok) to Complete
	@$(if $(demo_real),$(REALNODE_PREBUILD) start --demo --dir $(DEMO_PREBUILD_DIR))
	@$(MAKE) --no-print-directory tools
	@$(if $(and $(IS_ROOT),$(demo_real)),$(MAKE) --no-print-directory tools-nodes || echo "demo: the real nodes' parts could not be installed or built (above)")
	@$(if $(demo_real),$(REALNODE_PREBUILD) wait --dir $(DEMO_PREBUILD_DIR) || echo "demo: the training images could not be built (above); the demo tries again")
	@$(if $(demo_real),,TRAINJOB_DEMO_KWOK=1) flock -w 3600 $(REALNODE_LOCK) $(CLUSTER_PYTHON) $(HARNESS_DIR)/demo.py

demo-down: ## stop the demo's operator and cluster
	@$(CLUSTER_PYTHON) $(HARNESS_DIR)/demo.py down

# Upstream Kubeflow Trainer v2.3.0 controller for the differential test (issue 6). Included from the top
# Makefile; every path is relative to the repository root. Needs $(PY)/$(PYTEST) and `tools` from the
# including Makefile and hack/cluster/cluster.mk.
#
#   make tools-upstream       build trainer-controller-manager v2.3.0 into the tool cache (no-op when warm)
#   make test-differential    our operator and upstream's controller in turn on one local control plane,
#                             same runtimes and TrainJobs; compares JobSets, Secrets, ConfigMaps, PodGroups
#                             and statuses (report: $(DIFFERENTIAL_REPORT))

UPSTREAM_HACK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
DIFFERENTIAL_REPORT ?= .cluster/differential-report.txt

.PHONY: tools-upstream test-differential

tools-upstream: ## build upstream Kubeflow Trainer v2.3.0's controller into the tool cache (no-op when warm)
	@bash $(UPSTREAM_HACK_DIR)/build.sh

test-differential: $(STAMP) tools tools-upstream ## our operator vs upstream v2.3.0 on one local control plane (own session)
	@mkdir -p $(dir $(DIFFERENTIAL_REPORT))
	TRAINJOB_OPERATOR_DIFFERENTIAL=1 TRAINJOB_OPERATOR_DIFFERENTIAL_REPORT=$(abspath $(DIFFERENTIAL_REPORT)) \
		$(PYTEST) tests/e2e/test_differential.py -q -rxX -m differential

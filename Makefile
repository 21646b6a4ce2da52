# trainjob-operator: the developer entry points. `make help` lists them.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
STAMP := $(VENV)/.installed
LOCK := requirements/lock.txt
LOCK_RUNTIME := requirements/runtime.txt
LOCK_BUILD := requirements/build.txt
UV_PIN := requirements/uv.txt
UV := $(VENV)/bin/uv
LATEST_VENV ?= .venv-latest
UV_COMPILE = $(UV) pip compile --quiet --universal --generate-hashes --python-version 3.11 --custom-compile-command "make lock"
BUILD_REQUIRES = $(PY) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")'
# One real-node cluster per machine (fixed pod subnet, global kube-proxy chains): real-node runs take this lock.
REALNODE_LOCK ?= /tmp/trainjob-realnode.lock
BENCH_SMOKE_OUT ?= $(or $(TMPDIR),/tmp)/trainjob-operator-bench-smoke
TEST_RESULTS ?= $(or $(TMPDIR),/tmp)/trainjob-operator-test-results
CHAOS_REPORT ?= .cluster/chaos-report.txt
FUZZ_EXAMPLES ?= 500

# The cluster harness (hack/cluster) runs its scripts with the project's interpreter.
CLUSTER_PYTHON := $(PY)
include hack/cluster/cluster.mk
include hack/upstream/upstream.mk

.DEFAULT_GOAL := help
.PHONY: help install lock deps-latest fuzz tools-helm tools-browser lint typecheck crds crds-check chart-sync manifests chart-check chart-test chart-cluster-test chart-golden test test-fast test-lane-a test-lane-b test-lane-c test-unit test-corpus test-integration test-e2e test-realnodes chaos bench bench-render bench-cli bench-cluster demo demo-offline demo-down clean test-multikueue bench-realnodes lock-images

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F ':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# Every Python dependency, runtime and dev, comes from the lock (pinned with hashes; docs/development.md, "Python
# dependencies"). uv installs it; uv itself comes pinned with its hashes (requirements/uv.txt), installed by the
# venv's own pip. The lock changes only through `make lock`.
$(UV): $(UV_PIN)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(UV_PIN)
	@touch $(UV)

# Bytecode is compiled at install, as pip does: uv does not by default, and where PYTHONDONTWRITEBYTECODE is set
# (this workplace's shells, CI) no import ever writes it, so every process compiled pydantic & co. from source again
# (the CLI's start-up x1.6, a test process's imports x2.8; docs/performance.md, "Start-up").
$(STAMP): pyproject.toml $(LOCK) $(UV)
	@echo ">> installing $(LOCK) into $(VENV), then trainjob-operator (editable)"
	@$(UV) pip sync --quiet --python $(PY) --compile-bytecode --require-hashes $(LOCK)
	@$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .
	@$(PY) -m compileall -q src > /dev/null
	@touch $(STAMP)

install: $(STAMP) ## create .venv from the lock (requirements/lock.txt) and install the package, editable

lock: $(UV) ## refresh the lock files from pyproject.toml (keeps every pin pyproject still allows; UPGRADE=1: newest)
	@echo ">> $(LOCK): runtime, dev and build dependencies$(if $(UPGRADE), (upgraded to the newest allowed))"
	@$(BUILD_REQUIRES) | $(UV_COMPILE) $(if $(UPGRADE),--upgrade) pyproject.toml - --extra dev -o $(LOCK)
	@echo ">> $(LOCK_RUNTIME) (the image), $(LOCK_BUILD) (the wheel's build backend), $(UV_PIN): the same pins"
	@$(UV_COMPILE) pyproject.toml -c $(LOCK) -o $(LOCK_RUNTIME)
	@$(BUILD_REQUIRES) | $(UV_COMPILE) - -c $(LOCK) -o $(LOCK_BUILD)
	@echo uv | $(UV_COMPILE) - -c $(LOCK) -o $(UV_PIN)

# The training images' wheels (JAX, TensorFlow: not in Debian bookworm) for the image's Python (bookworm's 3.11) on
# Linux x86_64 only, one lock per image (requirements/images/NAME.in -> .txt); hack/trainjob_dev/images.py installs
# them with --require-hashes. Changes only through this target.
IMAGE_LOCKS := $(patsubst %.in,%.txt,$(wildcard requirements/images/*.in))
lock-images: $(UV) ## refresh the training images' wheel locks (requirements/images/*.txt; UPGRADE=1: newest)
	@for in in $(IMAGE_LOCKS:.txt=.in); do \
		echo ">> $${in%.in}.txt"; \
		$(UV) pip compile --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
			--custom-compile-command "make lock-images" $(if $(UPGRADE),--upgrade) "$$in" -o "$${in%.in}.txt" || exit 1; \
	done

deps-latest: $(UV) ## the newest dependencies pyproject allows, in .venv-latest: unit tests and lint, a report of what breaks
	@$(PY) hack/deps_latest.py --venv $(LATEST_VENV) --lock $(LOCK) --uv $(UV)

# Every target that runs a built tool (helm, the control plane, upstream's controller) depends on the target that
# builds it, so a fresh machine with an empty tool cache works; tests/unit/project/test_makefile_graph.py checks the order.
tools-helm: ## build helm into the tool cache (no-op when warm)
	@$(MAKE) --no-print-directory tools WITH_HELM=1

# The UI's browser test (tests/integration/test_ui.py) drives Debian's Chromium through its WebDriver; it skips, saying
# why, when they are absent. Idempotent: nothing is installed when both are there.
tools-browser: ## install Chromium and chromedriver for the UI browser test (Debian/Ubuntu; no-op when present)
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		echo ">> chromium and chromedriver present"; \
	else \
		echo ">> installing chromium and chromium-driver (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi

lint: $(STAMP) ## ruff, mypy (strict: whole package, hack/trainjob_dev, tests/unit and its helpers), import-linter layering, CRD drift, chart drift (builds helm)
	@echo ">> ruff"; $(VENV)/bin/ruff check src tests bench hack/trainjob_dev
	@echo ">> ruff format"; $(VENV)/bin/ruff format --check --quiet src tests bench hack || { echo "run: .venv/bin/ruff format src tests bench hack"; exit 1; }
	@echo ">> mypy"; $(VENV)/bin/mypy
	@echo ">> import-linter"; $(VENV)/bin/lint-imports --no-cache > $(VENV)/lint-imports.log || { cat $(VENV)/lint-imports.log; exit 1; }; tail -n 2 $(VENV)/lint-imports.log
	@$(MAKE) --no-print-directory crds-check
	@$(MAKE) --no-print-directory chart-check

typecheck: $(STAMP)
	@$(VENV)/bin/mypy

crds: $(STAMP) ## regenerate crds/ from the API models (and the chart's copy)
	@$(PY) hack/trainjob_dev/crdgen.py
	@$(PY) hack/sync-chart-crds.py

chart-sync: $(STAMP) ## copy crds/ and runtimes/ into the chart, regenerate its values schema
	@$(PY) hack/sync-chart-crds.py

manifests: $(STAMP) tools-helm ## render manifests/ (kustomize) from the chart
	@$(PY) hack/render-manifests.py

chart-check: $(STAMP) tools-helm
	@echo ">> chart and manifests in sync"; $(PY) hack/sync-chart-crds.py --check && $(PY) hack/render-manifests.py --check

chart-test: $(STAMP) tools-helm ## helm lint, golden renderings, values schema (no cluster)
	@$(PYTEST) tests/chart -q -m "not cluster"

chart-cluster-test: $(STAMP) tools-helm ## helm install into the local cluster, RBAC under the chart's ServiceAccount
	@$(PYTEST) tests/chart -q -m cluster

chart-golden: $(STAMP) tools-helm ## rewrite the chart's golden renderings
	@TRAINJOB_UPDATE_GOLDEN=1 $(PYTEST) tests/chart -q -k golden

crds-check: $(STAMP)
	@echo ">> CRDs in sync with the models"; $(PY) hack/trainjob_dev/crdgen.py --check

test-unit: $(STAMP) ## unit tests: the pure core, no cluster
	@$(PYTEST) tests/unit -q

test-corpus: $(STAMP) ## upstream's own inputs (../shared/upstream-corpus) through render/validate, v2.4 delta documented
	@$(PY) hack/upstream_corpus.py $(VENV)/bin/trainjob-operator

test-integration: $(STAMP) tools tools-browser ## integration tests against the local kube-apiserver (builds the tools if needed)
	@$(PYTEST) tests/integration -q -m cluster

test-e2e: $(STAMP) ## end to end with Kueue and the kubeflow SDK (builds the tools with Kueue if needed)
	@$(MAKE) --no-print-directory tools WITH_KUEUE=1
	@TRAINJOB_OPERATOR_CLUSTER_KUEUE=1 $(PYTEST) tests/e2e -q -m e2e

test-multikueue: $(STAMP) tools-upstream ## MultiKueue on three local control planes (a manager, a worker with ours, one with upstream v2.3.0), preemption, a lost worker
	@$(MAKE) --no-print-directory tools WITH_KUEUE=1
	@TRAINJOB_OPERATOR_MULTIKUEUE=1 $(PYTEST) tests/e2e/test_multikueue.py -q -m multikueue

# `make test` (docs/development.md, "Where the time goes"): the real nodes' parts and images build in the background
# from the start, then lint, the tools and the sessions, in three lanes side by side (`make -j3`; TEST_LANES=1 runs
# them one after another), each cluster in a directory and under a name of its own. Lane A: the chart and
# integration tests, then session 4 on real nodes (`realnode_ci`, under the machine's real-node lock, once the
# background build is over). Lane B: the unit tests (no cluster), e2e with Kueue, the differential test. Lane C: the
# benchmark smoke run, the chaos tests, MultiKueue (session 5). The lanes mostly wait on their clusters, so three
# fit on 2 cores, and they end at about the same time.
TEST_LANES ?= 3
CLUSTER_DIR_BASE := $(or $(TRAINJOB_CLUSTER_DIR),$(abspath .cluster))
CLUSTER_NAME_BASE := $(or $(TRAINJOB_CLUSTER_NAME),trainjob-operator)
lane_cluster = TRAINJOB_CLUSTER_DIR=$(CLUSTER_DIR_BASE)/lane-$(1) TRAINJOB_CLUSTER_NAME=$(CLUSTER_NAME_BASE)-lane-$(1)
REALNODE_PREBUILD := $(PY) hack/trainjob_dev/realnode_prebuild.py
IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1)

test: $(STAMP) ## everything CI runs: lint, the tools, a benchmark smoke run, then every test session (4 with real nodes)
	@$(if $(IS_ROOT),$(MAKE) --no-print-directory tools-nodes-debs)
	@$(REALNODE_PREBUILD) start
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory tools WITH_HELM=1 WITH_KUEUE=1
	@$(MAKE) --no-print-directory tools-upstream
	@$(MAKE) --no-print-directory tools-browser
	@rm -rf $(TEST_RESULTS) && mkdir -p $(TEST_RESULTS)
	@echo ">> sessions 1-5 in $(TEST_LANES) lanes (each lane's output appears when it ends)"
	@$(MAKE) --no-print-directory -j$(TEST_LANES) --output-sync=target test-lane-a test-lane-b test-lane-c
	@$(PY) hack/test_summary.py $(TEST_RESULTS)

# The lanes of `make test` (they expect the tools built and $(TEST_RESULTS) made; `make test` does both).
test-lane-a: $(STAMP) tools-helm tools-browser
	@echo ">> session 1a: chart and integration tests (lane A's control plane)"
	@$(call lane_cluster,a) $(PYTEST) tests/chart tests/integration -q --junitxml=$(TEST_RESULTS)/1a-chart-integration.xml
	@$(REALNODE_PREBUILD) wait
	@$(if $(IS_ROOT),$(MAKE) --no-print-directory tools-nodes)
	@echo ">> session 4: real nodes (realnode_ci: the chart, torch across nodes, MPI over SSH, progress from a pod, a failing rank)"
	@flock -w 3600 $(REALNODE_LOCK) $(PYTEST) tests/realnode -q -m realnode_ci --junitxml=$(TEST_RESULTS)/4-realnode.xml

test-lane-c: $(STAMP) tools-upstream
	@$(MAKE) --no-print-directory tools WITH_KUEUE=1
	@echo ">> benchmark smoke run (N=50), so the harness cannot rot (its own control plane)"
	@$(PY) bench/cluster_bench.py --smoke --out $(BENCH_SMOKE_OUT)
	@echo ">> start-up guard: the CLI's start-up against a fixed yardstick in the same run (fails when it doubles)"
	@$(PY) bench/cli_bench.py --guard --runs 5
	@echo ">> session 1c: chaos tests, CI size (lane C's control plane)"
	@$(call lane_cluster,c) $(PYTEST) tests/chaos -q --junitxml=$(TEST_RESULTS)/1c-chaos.xml
	@echo ">> session 5: MultiKueue across a manager and two workers (ours and upstream v2.3.0; lane C's fleet)"
	@$(call lane_cluster,c) TRAINJOB_OPERATOR_MULTIKUEUE=1 $(PYTEST) tests/e2e/test_multikueue.py -q -m "multikueue and not slow" \
		--junitxml=$(TEST_RESULTS)/5-multikueue.xml

test-lane-b: $(STAMP) tools-upstream
	@$(MAKE) --no-print-directory tools WITH_KUEUE=1
	@echo ">> session 1b: unit tests (no cluster)"
	@$(PYTEST) tests/unit -q --junitxml=$(TEST_RESULTS)/1b-unit.xml
	@echo ">> session 2: end to end with Kueue and the kubeflow SDK (and the harness self-test with Kueue)"
	@$(call lane_cluster,b) TRAINJOB_OPERATOR_CLUSTER_KUEUE=1 $(PYTEST) tests/e2e tests/integration/test_cluster_harness.py -q \
		--junitxml=$(TEST_RESULTS)/2-e2e.xml
	@echo ">> session 3: differential test against upstream Kubeflow Trainer v2.3.0"
	@$(call lane_cluster,b) TRAINJOB_OPERATOR_DIFFERENTIAL=1 TRAINJOB_OPERATOR_DIFFERENTIAL_REPORT=$(abspath $(TEST_RESULTS))/differential.txt \
		$(PYTEST) tests/e2e/test_differential.py -q -rxX -m differential --junitxml=$(TEST_RESULTS)/3-differential.xml

test-fast: $(STAMP) tools-helm ## the quick loop: unit and chart tests without a cluster and without `slow` (seconds, not minutes)
	@$(PYTEST) tests/unit tests/chart -q -m "not slow and not cluster"

test-realnodes: $(STAMP) tools tools-helm tools-nodes ## tests on 2 real nodes (containerd + kubelet, root): pods, DNS, the chart, failures, torch across nodes, MPI over SSH, SDK progress from a pod, JAX, XGBoost, TensorFlow, initializers
	@$(PYTEST) tests/realnode -q -m realnode

chaos: $(STAMP) tools ## make fuzz (2,000 cases per fuzz property), then full-size fault runs (kills, API server restart, hostile network, cert rotation, takeover); figures
	@mkdir -p $(dir $(CHAOS_REPORT)) && rm -f $(CHAOS_REPORT)
	@$(MAKE) --no-print-directory fuzz FUZZ_EXAMPLES=2000
	@echo ">> chaos scenarios, full size (figures: $(CHAOS_REPORT), table in docs/reliability.md)"
	@TRAINJOB_CHAOS_SIZE=full TRAINJOB_CHAOS_REPORT=$(abspath $(CHAOS_REPORT)) $(PYTEST) tests/chaos -q -s -m chaos
	@cat $(CHAOS_REPORT)

# `make test` runs every property derandomized without an example database (tests/conftest.py); this is the wide
# random campaign: a new seed each run (printed; FUZZ_SEED=N runs it again), failures kept in .hypothesis/fuzz.
fuzz: $(STAMP) ## random property campaign: every hypothesis test, a printed seed, FUZZ_EXAMPLES per fuzz property
	@seed=$${FUZZ_SEED:-$$($(PY) -c 'import secrets; print(secrets.randbelow(2**32))')}; \
	echo ">> fuzz: every property test at random, seed $$seed ($(FUZZ_EXAMPLES) cases per fuzz property; again: make fuzz FUZZ_SEED=$$seed)"; \
	TRAINJOB_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTEST) tests/unit -q -m hypothesis -p no:cacheprovider \
		--hypothesis-profile=fuzz --hypothesis-seed=$$seed; \
	status=$$?; echo ">> fuzz seed was $$seed"; exit $$status

bench-render: $(STAMP) ## render throughput of the pure pipeline (2,000 TrainJobs, median of 5)
	@$(PY) bench/render.py --jobs 2000 --runs 5

BENCH_HUGE_NODES ?= 1000
bench-cluster: $(STAMP) tools tools-upstream ## the operator vs upstream on a local control plane (huge TrainJobs of BENCH_HUGE_NODES, burst, status, Kueue admission), medians of 3
	@$(MAKE) --no-print-directory tools WITH_KUEUE=1
	@$(PY) bench/cluster_bench.py --huge-nodes $(BENCH_HUGE_NODES)

bench-realnodes: $(STAMP) tools tools-nodes tools-upstream ## pod start latency on 2 real nodes (root): ours vs upstream v2.3.0, medians of 7, and the real torch run's wall time
	@flock $(REALNODE_LOCK) $(PY) bench/realnode_bench.py

BENCH_CLI_BASELINE ?= ce4043d
bench-cli: $(STAMP) ## the offline CLI as a user waits for it (whole process; --help, render, validate of 2,000 TrainJobs) beside BENCH_CLI_BASELINE, medians of 7
	@$(PY) bench/cli_bench.py --jobs 2000 --runs 7 --baseline-rev $(BENCH_CLI_BASELINE)

bench: bench-render bench-cli bench-cluster ## all benchmarks

demo-offline: $(STAMP) ## render the example TrainJobs against the example runtimes, offline
	@echo ">> validating examples/trainjobs.yaml against examples/runtimes.yaml"
	@$(VENV)/bin/trainjob-operator validate -f examples/trainjobs.yaml -r examples/runtimes.yaml
	@echo ">> objects the operator would apply:"
	@$(VENV)/bin/trainjob-operator render -f examples/trainjobs.yaml -r examples/runtimes.yaml

# As root the demo trains the examples on 2 real nodes: the Debian packages and the node parts first (no-op when
# present; where either cannot be had, the demo says why in one line and runs on kwok's fake nodes).
demo: $(STAMP) tools ## the operator on a local control plane: the example TrainJobs train on 2 real nodes (root; else kwok) to Complete
	@if [ "$$(id -u)" = 0 ] && [ -z "$$TRAINJOB_DEMO_KWOK" ]; then \
		$(MAKE) --no-print-directory tools-nodes || echo "demo: the real nodes' parts could not be installed or built (above)"; \
	fi
	@flock -w 3600 $(REALNODE_LOCK) $(PY) hack/demo.py

demo-down: ## stop the demo's operator and cluster
	@$(PY) hack/demo.py down

clean: ## remove the virtualenv and caches (not the tool cache outside the repo)
	rm -rf $(VENV) $(LATEST_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

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
BENCH_SMOKE_OUT ?= $(or $(TMPDIR),/tmp)/trainjob-operator-bench-smoke
TEST_RESULTS ?= $(or $(TMPDIR),/tmp)/trainjob-operator-test-results
CHAOS_REPORT ?= .cluster/chaos-report.txt
FUZZ_EXAMPLES ?= 500

# The cluster harness (hack/harness/tools) runs its scripts with the project's interpreter.
CLUSTER_PYTHON := $(PY)
include hack/harness/harness.mk

# Switches are 0 or 1 and all start with WITH_ (`make help` lists them); counts and paths are plain names.
WITH_UPGRADE ?= 0
WITH_JUNIT ?= 0
WITH_SLOW ?= 1
WITH_FULL_SIZE ?= 0
DIFFERENTIAL_REPORT ?= .cluster/differential-report.txt
# A session's JUnit report when `make test` runs it (WITH_JUNIT=1): $(TEST_RESULTS)/NAME.xml.
junit = $(if $(filter-out 0,$(WITH_JUNIT)),--junitxml=$(TEST_RESULTS)/$(1).xml)

.DEFAULT_GOAL := help
.PHONY: help install lock lock-images deps-latest lint typecheck crds crds-check chart-sync manifests chart-check
.PHONY: chart-test chart-cluster-test chart-golden test test-fast test-lane-a test-lane-b test-lane-c test-lane-d test-unit
.PHONY: test-integration test-e2e test-gang test-differential test-chaos test-multikueue test-corpus bench-smoke chaos fuzz
.PHONY: bench bench-render bench-cli bench-cluster demo-offline clean

##@ Start here
help: ## list the targets by group, and the switches
	@awk 'BEGIN { FS = ":.*## " } /^##@ / { g = substr($$0, 5); if (!(g in seen)) { seen[g] = 1; order[++n] = g }; next } \
		/^[a-zA-Z_-]+:.*## / { text[g] = text[g] sprintf("  %-20s %s\n", $$1, $$2) } \
		END { for (i = 1; i <= n; i++) printf "%s\n%s\n", order[i], text[order[i]] }' $(MAKEFILE_LIST)
	@echo "Switches (0 or 1): WITH_KUEUE WITH_HELM WITH_NODES (tools, cluster-up, cluster-test), WITH_KWOK (demo),"
	@echo "  WITH_UPGRADE (lock, lock-images), WITH_SLOW (test-multikueue), WITH_FULL_SIZE (test-chaos), WITH_JUNIT (sessions)"

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

##@ Dependencies
lock: $(UV) ## refresh the lock files from pyproject.toml (keeps every pin pyproject still allows; WITH_UPGRADE=1: newest)
	@echo ">> $(LOCK): runtime, dev and build dependencies$(if $(filter-out 0,$(WITH_UPGRADE)), (upgraded to the newest allowed))"
	@$(BUILD_REQUIRES) | $(UV_COMPILE) $(if $(filter-out 0,$(WITH_UPGRADE)),--upgrade) pyproject.toml - --extra dev -o $(LOCK)
	@echo ">> $(LOCK_RUNTIME) (the image), $(LOCK_BUILD) (the wheel's build backend), $(UV_PIN): the same pins"
	@$(UV_COMPILE) pyproject.toml -c $(LOCK) -o $(LOCK_RUNTIME)
	@$(BUILD_REQUIRES) | $(UV_COMPILE) - -c $(LOCK) -o $(LOCK_BUILD)
	@echo uv | $(UV_COMPILE) - -c $(LOCK) -o $(UV_PIN)

# The training images' wheels (JAX, TensorFlow: not in Debian bookworm) for the image's Python (bookworm's 3.11) on
# Linux x86_64 only, one lock per image (requirements/images/NAME.in -> .txt); hack/harness/images.py installs
# them with --require-hashes. Changes only through this target.
IMAGE_LOCKS := $(patsubst %.in,%.txt,$(wildcard requirements/images/*.in))
lock-images: $(UV) ## refresh the training images' wheel locks (requirements/images/*.txt; WITH_UPGRADE=1: newest)
	@for in in $(IMAGE_LOCKS:.txt=.in); do \
		echo ">> $${in%.in}.txt"; \
		py=$$(sed -n 's/^# python: //p' "$$in"); \
		$(UV) pip compile --quiet --generate-hashes --python-version $${py:-3.11} --python-platform x86_64-manylinux_2_28 \
			--custom-compile-command "make lock-images" $(if $(filter-out 0,$(WITH_UPGRADE)),--upgrade) "$$in" -o "$${in%.in}.txt" || exit 1; \
	done

deps-latest: $(UV) ## the newest dependencies pyproject allows, in .venv-latest: unit tests and lint, a report of what breaks
	@$(PY) hack/deps_latest.py --venv $(LATEST_VENV) --lock $(LOCK) --uv $(UV)

##@ Lint and generated files
# Every target that runs a built tool (helm, the control plane, upstream's controller) depends on the target that
# builds it, so a fresh machine with an empty tool cache works; tests/unit/project/test_makefile_graph.py checks the order.
lint: $(STAMP) typecheck crds-check chart-check ## ruff, mypy (strict: whole package, hack/trainjob_dev, hack/harness, tests/unit and its helpers), import-linter layering, CRD drift, chart drift (builds helm)
	@echo ">> ruff"; $(VENV)/bin/ruff check src tests bench hack/trainjob_dev hack/harness
	@echo ">> ruff format"; $(VENV)/bin/ruff format --check --quiet src tests bench hack || { echo "run: .venv/bin/ruff format src tests bench hack"; exit 1; }
	@echo ">> import-linter"; $(VENV)/bin/lint-imports --no-cache > $(VENV)/lint-imports.log || { cat $(VENV)/lint-imports.log; exit 1; }; tail -n 2 $(VENV)/lint-imports.log

typecheck: $(STAMP) ## mypy alone (strict; the files pyproject.toml lists)
	@echo ">> mypy"; $(VENV)/bin/mypy

crds: $(STAMP) ## regenerate crds/ from the API models (and the chart's copy)
	@$(PY) hack/trainjob_dev/crdgen.py
	@$(PY) hack/sync-chart-crds.py

crds-check: $(STAMP) ## fail when crds/ differs from what the API models generate
	@echo ">> CRDs in sync with the models"; $(PY) hack/trainjob_dev/crdgen.py --check

chart-sync: $(STAMP) ## copy crds/ and runtimes/ into the chart, regenerate its values schema
	@$(PY) hack/sync-chart-crds.py

manifests: $(STAMP) tools-helm ## render manifests/ (kustomize) from the chart
	@$(PY) hack/render-manifests.py

chart-check: $(STAMP) tools-helm ## fail when the chart or manifests/ differ from what crds/, runtimes/ and the chart render
	@echo ">> chart and manifests in sync"; $(PY) hack/sync-chart-crds.py --check && $(PY) hack/render-manifests.py --check

chart-golden: $(STAMP) tools-helm ## rewrite the chart's golden renderings
	@TRAINJOB_UPDATE_GOLDEN=1 $(PYTEST) tests/chart -q -k golden

##@ Test sessions (each defined once; `make test` runs them in lanes)
test-fast: $(STAMP) tools-helm ## the quick loop: unit and chart tests without a cluster and without `slow` (seconds, not minutes)
	@$(PYTEST) tests/unit tests/chart -q -m "not slow and not cluster"

test-unit: $(STAMP) ## session 1b: the unit tests (the pure core, the tooling; no cluster)
	@$(PYTEST) tests/unit -q $(call junit,1b-unit)

chart-test: $(STAMP) tools-helm ## helm lint, golden renderings, values schema (no cluster)
	@$(PYTEST) tests/chart -q -m "not cluster"

chart-cluster-test: $(STAMP) tools-helm ## helm install into a local control plane, RBAC under the chart's ServiceAccount
	@$(PYTEST) tests/chart -q -m cluster

test-integration: $(STAMP) tools tools-helm tools-browser ## session 1a: the chart and integration tests on a local control plane (builds the tools if needed)
	@$(PYTEST) tests/chart tests/integration -q $(call junit,1a-chart-integration)

test-chaos: $(STAMP) tools tools-upstream ## session 1c: fault injection on a local control plane, CI size (WITH_FULL_SIZE=1: full size, figures)
	@$(if $(filter-out 0,$(WITH_FULL_SIZE)),mkdir -p $(dir $(CHAOS_REPORT)) && rm -f $(CHAOS_REPORT) && TRAINJOB_CHAOS_SIZE=full TRAINJOB_CHAOS_REPORT=$(abspath $(CHAOS_REPORT))) \
		$(PYTEST) tests/chaos -q $(if $(filter-out 0,$(WITH_FULL_SIZE)),-s) $(call junit,1c-chaos)
	@$(if $(filter-out 0,$(WITH_FULL_SIZE)),cat $(CHAOS_REPORT))

test-e2e: $(STAMP) tools-kueue tools-upstream ## session 2: end to end with Kueue and the kubeflow SDK, and the harness self-test with Kueue
	@TRAINJOB_OPERATOR_CLUSTER_KUEUE=1 $(PYTEST) tests/e2e tests/integration/test_cluster_harness.py -q $(call junit,2-e2e)

test-differential: $(STAMP) tools tools-upstream ## session 3: our operator vs upstream v2.3.0 on one local control plane (report: DIFFERENTIAL_REPORT)
	@mkdir -p $(dir $(DIFFERENTIAL_REPORT))
	@TRAINJOB_OPERATOR_DIFFERENTIAL=1 TRAINJOB_OPERATOR_DIFFERENTIAL_REPORT=$(abspath $(DIFFERENTIAL_REPORT)) \
		$(PYTEST) tests/e2e/test_differential.py -q -rxX -m differential $(call junit,3-differential)

test-multikueue: $(STAMP) tools-kueue tools-upstream ## session 5: MultiKueue on three local control planes (ours, upstream v2.3.0), preemption; WITH_SLOW=0 skips the lost worker
	@TRAINJOB_OPERATOR_MULTIKUEUE=1 $(PYTEST) tests/e2e/test_multikueue.py -q -m "multikueue$(if $(filter 0,$(WITH_SLOW)), and not slow)" \
		$(call junit,5-multikueue)

# Not in `make test`: Kubernetes 1.37.2 is its own cold build (3,447 s here); docs/gang-scheduling.md.
test-gang: $(STAMP) ## gang scheduling by the Workload API on Kubernetes 1.37.2 (builds it once; WITH_SLOW=0 skips the 256-pod bench)
	@$(MAKE) --no-print-directory tools-kueue K8S_VERSION=1.37.2
	@K8S_VERSION=1.37.2 $(PYTEST) tests/integration/test_gang_workload.py -q -s -m "cluster$(if $(filter 0,$(WITH_SLOW)), and not slow)"

test-unit-py313: $(STAMP) ## the unit suite (not slow) on Python 3.13 (.venv-py313 from the same lock; skipped, saying why, without a 3.13: PY313=/path)
	@UV=$(UV) hack/py313-unit.sh $(call junit,1b-unit-py313)

test-corpus: $(STAMP) ## upstream's own inputs (../shared/upstream-corpus) through render/validate, v2.4 delta documented
	@$(PY) hack/upstream_corpus.py $(VENV)/bin/trainjob-operator

bench-smoke: $(STAMP) tools ## the cluster benchmark's smoke run (N=50, its own control plane), so the harness cannot rot
	@$(PY) bench/cluster_bench.py --smoke --out $(BENCH_SMOKE_OUT)

bench-cli-guard: $(STAMP) ## the CLI's start-up against a fixed yardstick measured in the same run: fails when it doubles
	@$(PY) bench/cli_bench.py --guard --runs 5

# `make test` (docs/development.md, "Where the time goes"): the real nodes' parts and images build in the background
# from the start, and four lanes run side by side at once (`make -j4`; TEST_LANES=1 runs them one after another), each
# cluster in a directory and under a name of its own. The lanes call the sessions above, nothing else; each session
# builds the tools it needs first (its prerequisites; the tool cache's lock makes a second lane wait for a build and
# then find it done). Lane A: every real-node test, once the background build is over (under the machine's real-node
# lock): the longest session, so it starts first and alone. Lane B: chart and integration. Lane C: the benchmark's
# smoke run, chaos, the differential test, e2e with Kueue. Lane D starts with what needs no cluster: the unit tests on
# Python 3.11 and 3.13, the CLI's start-up guard, lint (on a cold machine while the tools compile), then MultiKueue,
# which lane B ended with when it was the shorter (docs/development.md, "Where the time goes"). Lanes A-C mostly
# wait on clusters, so four fit on 2 cores.
TEST_LANES ?= 4
CLUSTER_DIR_BASE := $(or $(TRAINJOB_CLUSTER_DIR),$(abspath .cluster))
CLUSTER_NAME_BASE := $(or $(TRAINJOB_CLUSTER_NAME),trainjob-operator)
lane_cluster = TRAINJOB_CLUSTER_DIR=$(CLUSTER_DIR_BASE)/lane-$(1) TRAINJOB_CLUSTER_NAME=$(CLUSTER_NAME_BASE)-lane-$(1)

##@ Start here
test: $(STAMP) ## everything CI runs: every test session and lint in four lanes at once (real nodes as root)
	@$(if $(IS_ROOT),$(MAKE) --no-print-directory tools-nodes-debs)
	@$(REALNODE_PREBUILD) start
	@rm -rf $(TEST_RESULTS) && mkdir -p $(TEST_RESULTS)
	@echo ">> the sessions and lint in $(TEST_LANES) lanes at once (each lane's output appears when it ends)"
	@$(MAKE) --no-print-directory -j$(TEST_LANES) --output-sync=target test-lane-a test-lane-b test-lane-c test-lane-d
	@$(PY) hack/test_summary.py $(TEST_RESULTS)

##@ Test sessions (each defined once; `make test` runs them in lanes)
test-lane-a: ## lane A of `make test`: every real-node test, once the background build is over (expects TEST_RESULTS)
	@$(REALNODE_PREBUILD) wait
	@$(MAKE) --no-print-directory test-realnodes WITH_JUNIT=1

test-lane-b: ## lane B of `make test`: chart and integration (lane B's control plane)
	@$(call lane_cluster,b) $(MAKE) --no-print-directory test-integration WITH_JUNIT=1

test-lane-c: ## lane C of `make test`: the benchmark's smoke run, chaos, the differential test, e2e with Kueue (lane C's control plane)
	@$(MAKE) --no-print-directory bench-smoke WITH_JUNIT=1
	@$(call lane_cluster,c) $(MAKE) --no-print-directory test-chaos WITH_JUNIT=1
	@$(call lane_cluster,c) $(MAKE) --no-print-directory test-differential WITH_JUNIT=1 DIFFERENTIAL_REPORT=$(abspath $(TEST_RESULTS))/differential.txt
	@$(call lane_cluster,c) $(MAKE) --no-print-directory test-e2e WITH_JUNIT=1

test-lane-d: ## lane D of `make test`: the unit tests on Python 3.11 and 3.13, the CLI's start-up guard, lint, then MultiKueue (lane D's control planes)
	@$(MAKE) --no-print-directory test-unit WITH_JUNIT=1
	@$(MAKE) --no-print-directory test-unit-py313 WITH_JUNIT=1
	@$(MAKE) --no-print-directory bench-cli-guard
	@$(MAKE) --no-print-directory lint
	@$(call lane_cluster,d) $(MAKE) --no-print-directory test-multikueue WITH_JUNIT=1 WITH_SLOW=0

##@ Deep runs and benchmarks
chaos: $(STAMP) ## make fuzz (2,000 cases per fuzz property), then the chaos session at full size (figures: CHAOS_REPORT)
	@$(MAKE) --no-print-directory fuzz FUZZ_EXAMPLES=2000
	@$(MAKE) --no-print-directory test-chaos WITH_FULL_SIZE=1

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
BENCH_HUGE_SPLITS ?= 1,2
BENCH_HUGE_CUTS ?= 500
BENCH_SIZES ?= 1000,5000
BENCH_RUNNING ?= 1000
bench-cluster: $(STAMP) tools-kueue tools-upstream ## the operator vs upstream on a local control plane (BENCH_RUNNING running TrainJobs with their pods: restarts and a pod burst; huge TrainJobs of BENCH_HUGE_NODES, ours building it cut at BENCH_HUGE_CUTS pods per Job, its JobSet alone cut into BENCH_HUGE_SPLITS Jobs, bursts of BENCH_SIZES, status, Kueue admission), medians of 3
	@$(PY) bench/cluster_bench.py --running $(BENCH_RUNNING) --huge-nodes $(BENCH_HUGE_NODES) --huge-splits $(BENCH_HUGE_SPLITS) --huge-max-nodes-per-job $(BENCH_HUGE_CUTS) --sizes $(BENCH_SIZES)

BENCH_CLI_BASELINE ?= ce4043d
bench-cli: $(STAMP) ## the offline CLI as a user waits for it (whole process; --help, render, validate of 2,000 TrainJobs) beside BENCH_CLI_BASELINE, medians of 7
	@$(PY) bench/cli_bench.py --jobs 2000 --runs 7 --baseline-rev $(BENCH_CLI_BASELINE)

bench: bench-render bench-cli bench-cluster ## all benchmarks

##@ Start here
demo-offline: $(STAMP) ## render the example TrainJobs against the example runtimes, offline (no cluster)
	@echo ">> validating examples/trainjobs.yaml against examples/runtimes.yaml"
	@$(VENV)/bin/trainjob-operator validate -f examples/trainjobs.yaml -r examples/runtimes.yaml
	@echo ">> objects the operator would apply:"
	@$(VENV)/bin/trainjob-operator render -f examples/trainjobs.yaml -r examples/runtimes.yaml

clean: ## remove the virtualenv and caches (not the tool cache outside the repo)
	rm -rf $(VENV) $(LATEST_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

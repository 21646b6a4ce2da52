"""Kueue's baseline shapes with TrainJobs (bench/kueue_shapes.py, issue 37 item 3): what is pure is tested here, the
shape arithmetic (the scaled creators, the TrainJob count, Kueue's gate scaled), the objects built from a shape and
the run's figures from its watch timestamps; the runs themselves are `cluster_bench.py --kueue-shapes`'."""

from pathlib import Path
from types import ModuleType

import pytest
from test_bench_baseline import bench_module


@pytest.fixture
def shapes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("kueue_shapes", monkeypatch, tmp_path)


def test_the_full_scale_is_kueues_baseline_of_15000_workloads(shapes: ModuleType) -> None:
    classes = shapes.scaled(1.0)
    assert [(c.name, c.count, c.interval_ms, c.runtime_ms, c.priority, c.cpu) for c in classes] == [
        ("small", 350, 100, 200, 50, 1),
        ("medium", 100, 500, 500, 100, 5),
        ("large", 50, 1200, 1000, 200, 20),
    ]
    assert shapes.total(classes) == 15000
    assert shapes.scaled_gate_s(classes) == 425.0
    assert shapes.creation_span_s(classes) == 60.0


@pytest.mark.parametrize(
    ("scale", "counts", "n"),
    [
        (0.02, (7, 2, 1), 300),
        (0.1, (35, 10, 5), 1500),
        (0.001, (1, 1, 1), 90),  # every creator keeps one workload: every class is in the mix
    ],
)
def test_a_scale_takes_that_fraction_of_each_creator(
    shapes: ModuleType, scale: float, counts: tuple[int, ...], n: int
) -> None:
    classes = shapes.scaled(scale)
    assert tuple(c.count for c in classes) == counts
    assert shapes.total(classes) == n


def test_the_gate_scales_with_the_trainjobs_made_not_the_scale_asked(shapes: ModuleType) -> None:
    assert shapes.scaled_gate_s(shapes.scaled(0.02)) == pytest.approx(425 * 300 / 15000)
    assert shapes.scaled_gate_s(shapes.scaled(0.001)) == pytest.approx(425 * 90 / 15000)


@pytest.mark.parametrize("scale", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_a_scale_outside_zero_to_one_is_refused_naming_the_flag(shapes: ModuleType, scale: float) -> None:
    with pytest.raises(ValueError, match="--kueue-scale"):
        shapes.scaled(scale)


def test_the_queues_are_five_cohorts_of_six_with_kueues_quotas_and_preemption(shapes: ModuleType) -> None:
    pairs = shapes.queues("r1")
    assert len(pairs) == 30
    assert len({cohort for cohort, _ in pairs}) == 5
    assert len({name for _, name in pairs}) == 30
    cohort, name = pairs[0]
    cq = shapes.cluster_queue("r1", name, cohort)
    assert cq["spec"]["cohortName"] == cohort
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    (resource,) = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resource == {"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}
    assert cq["metadata"]["labels"] == {shapes.RUN_LABEL: "r1"}


def test_a_workload_becomes_a_queued_trainjob_of_one_node_asking_its_cpu_at_its_priority(shapes: ModuleType) -> None:
    large = shapes.scaled(1.0)[2]
    job = shapes.shaped_trainjob("ns", "large-0", large, "torch-distributed")
    assert job["spec"]["suspend"] is True
    assert job["spec"]["trainer"] == {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "20"}}}
    assert job["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "ns",
        "kueue.x-k8s.io/priority-class": "kueue-shapes-large",
    }
    assert shapes.priority_class(large)["value"] == 200


def test_the_summary_times_each_stage_to_its_last_object_and_the_unsuspend_latency(shapes: ModuleType) -> None:
    result = shapes.summary(
        2,
        100.0,
        admitted={"a": 101.0, "b": 103.0},
        jobsets={"a": 100.5, "b": 100.6},
        resumed={"a": 101.0, "b": 103.0},
        running={"a": 101.1, "b": 103.5},
        finished={"a": 102.0, "b": 105.0},
        gate_s=4.0,
    )
    assert result["all_admitted_s"] == pytest.approx(3.0)
    assert result["all_jobsets_s"] == pytest.approx(0.6)
    assert result["all_unsuspended_s"] == pytest.approx(3.5)
    assert result["all_finished_s"] == pytest.approx(5.0)
    assert result["p99_ms"] == pytest.approx(500.0)
    assert result["p50_ms"] == pytest.approx(100.0)
    assert result["within_gate"] is False


def test_a_run_cut_short_has_no_wall_and_is_not_within_the_gate(shapes: ModuleType) -> None:
    result = shapes.summary(3, 0.0, {"a": 1.0}, {"a": 0.5}, {}, {}, {}, gate_s=100.0)
    assert result["all_admitted_s"] is None
    assert result["all_finished_s"] is None
    assert result["p99_ms"] is None
    assert result["within_gate"] is False
    assert shapes.medians([result, {**result, "all_admitted_s": 4.0}])["all_admitted_s"] == 4.0


def test_the_table_has_a_column_per_contender_and_the_scaled_gate(shapes: ModuleType) -> None:
    report = {
        "scale": 0.02,
        "n": 300,
        "counts_per_cluster_queue": {"small": 7, "medium": 2, "large": 1},
        "gate_s": 8.5,
        "medians": {"ours": {"p99_ms": 120.0}, "upstream": {"p99_ms": 250.0}},
    }
    text = shapes.markdown(report)
    assert "| median | ours | upstream |" in text
    assert "| Kueue's unsuspend → JobSet unsuspended, p99 (ms) | 120.0 | 250.0 |" in text
    assert "8.5 s" in text
    assert shapes.markdown(None) == ""


def test_time_to_admission_is_the_mean_per_class_of_the_trainjobs_admitted(shapes: ModuleType) -> None:
    created = {"ns/small-0": 0.0, "ns/small-1": 1.0, "ns/large-0": 2.0, "ns/medium-0": 3.0}
    admitted = {"ns/small-0": 2.0, "ns/small-1": 5.0, "ns/large-0": 2.5}  # medium-0 not admitted yet
    assert shapes.time_to_admission(created, admitted) == {"large": 0.5, "small": 3.0}
    runs = [{"time_to_admission_s": {"small": 3.0}}, {"time_to_admission_s": {"small": 5.0, "large": 1.0}}]
    medians = shapes.medians(runs)
    assert (medians["admission_small_s"], medians["admission_large_s"], medians["admission_medium_s"]) == (
        4.0,
        1.0,
        None,
    )


def test_a_profiled_run_sums_a_metric_by_the_labels_asked_and_keeps_what_grew(shapes: ModuleType) -> None:
    before_text = (
        "# HELP controller_runtime_reconcile_total Total number of reconciliations per controller\n"
        'controller_runtime_reconcile_total{controller="trainjob",result="success"} 10\n'
        'controller_runtime_reconcile_total{controller="trainjob",result="error"} 1\n'
        'controller_runtime_reconcile_total{controller="workload_controller",result="success"} 4\n'
        'controller_runtime_reconcile_total_other{controller="trainjob",result="success"} 99\n'
    )
    after_text = before_text.replace("} 10\n", "} 25\n")
    keys = ("controller", "result")
    before = shapes.counters(before_text, "controller_runtime_reconcile_total", keys)
    assert before == {
        ("trainjob", "success"): 10.0,
        ("trainjob", "error"): 1.0,
        ("workload_controller", "success"): 4.0,
    }
    after = shapes.counters(after_text, "controller_runtime_reconcile_total", keys)
    assert shapes.grown(before, after) == {"trainjob success": 15.0}
    requests = 'apiserver_request_total{code="201",dry_run="All",resource="workloads",subresource="",verb="POST"} 7\n'
    assert shapes.grown(
        {}, shapes.counters(requests, "apiserver_request_total", ("verb", "resource", "subresource", "dry_run"))
    ) == {"POST workloads All": 7.0}


def test_the_concurrency_experiment_reads_kueues_group_kind_concurrency(shapes: ModuleType) -> None:
    assert shapes.concurrency("") == {}
    assert shapes.concurrency("TrainJob.trainer.kubeflow.org=5, Workload.kueue.x-k8s.io=10") == {
        "TrainJob.trainer.kubeflow.org": 5,
        "Workload.kueue.x-k8s.io": 10,
    }


def test_a_profiled_section_tables_the_first_runs_counts_per_column(shapes: ModuleType) -> None:
    counted = {"kueue_reconciles": {"trainjob success": 4313.0}, "api_requests": {"POST workloads All": 4318.0}}
    report = {
        "scale": 0.05,
        "n": 750,
        "counts_per_cluster_queue": {"small": 18, "medium": 5, "large": 2},
        "gate_s": 21.2,
        "medians": {"ours": {}, "Kueue alone": {}},
        "runs": {
            "ours": [{"counted": counted, "kueue_profile": {"profile": "/tmp/x.pprof"}}],
            "Kueue alone": [{"counted": {"api_requests": {"POST workloads": 750.0}}}],
        },
    }
    text = shapes.markdown(report)
    assert "| kueue_reconciles: trainjob success | 4313.0 | — |" in text
    assert "| api_requests: POST workloads All | 4318.0 | — |" in text
    assert "| api_requests: POST workloads | — | 750.0 |" in text
    assert "Kueue's CPU profile, ours: `/tmp/x.pprof`" in text
    report["runs"] = {"ours": [{}], "Kueue alone": [{}]}
    assert "Counted in the first run" not in shapes.markdown(report)


@pytest.mark.parametrize(("scale", "timeout"), [(1.0, 7500.0), (0.05, 600.0), (0.2, 1500.0)])
def test_a_column_may_run_half_a_second_per_trainjob_after_its_creators(
    shapes: ModuleType, scale: float, timeout: float
) -> None:
    assert shapes.timeout_s(shapes.scaled(scale)) == timeout

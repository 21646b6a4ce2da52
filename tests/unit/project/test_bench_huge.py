"""The huge TrainJobs section of bench/cluster_bench.py (issue 37): what is pure is tested here, the API server's
metrics read into requests by verb and resource, the deltas between two readings, the report of a run cut short
(a checkpoint, written after each column, has no medians yet), and the columns of ours building a cut TrainJob (which
bounds cut a size, where they run and print, the TrainJob the load generator creates for them); the runs themselves
are `make bench-cluster`'s."""

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_bench_baseline import REPO, bench_module

from trainjob_operator.api.runtime import ClusterTrainingRuntime
from trainjob_operator.api.trainjob import TrainJob
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.pipeline import Framework


@pytest.fixture
def cluster_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("cluster_bench", monkeypatch, tmp_path)


@pytest.fixture
def loadgen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("loadgen", monkeypatch, tmp_path)


class Answer:
    def __init__(self, stdout: str) -> None:
        self.stdout = stdout


class Cluster:
    def __init__(self, metrics: str) -> None:
        self.metrics = metrics

    def kubectl(self, *args: str, **_: Any) -> Answer:
        assert args == ("get", "--raw", "/metrics")
        return Answer(self.metrics)


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
        'apiserver_request_total{code="200",component="apiserver",group="trainer.kubeflow.org",resource="trainjobs",'
        'scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3',
        'apiserver_request_total{code="409",component="apiserver",group="trainer.kubeflow.org",resource="trainjobs",'
        'scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 1',
        'apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="cluster",'
        'subresource="",verb="WATCH",version="v1"} 2',
        'apiserver_terminated_watchers_total{group="",resource="pods"} 67',
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 22681',
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.62e+08',
        'apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="1024"} 5',
        'apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 22681',
    ]
)


def test_the_metrics_read_as_requests_by_verb_and_resource_and_what_watches_were_sent(
    cluster_bench: ModuleType,
) -> None:
    assert cluster_bench.apiserver_requests_by_subresource(Cluster(METRICS)) == {
        "PATCH trainjobs/status": 4.0,
        "WATCH pods": 2.0,
        "watches closed as unresponsive: pods": 67.0,
        "watch events sent: pods": 22681.0,
        "watch event bytes sent: pods": 1.62e8,
    }


def test_a_delta_keeps_what_grew_largest_first(cluster_bench: ModuleType) -> None:
    before = {"POST pods": 10.0, "PATCH trainjobs/status": 1.0, "GET nodes": 5.0}
    after = {"POST pods": 1010.0, "PATCH trainjobs/status": 4.0, "GET nodes": 5.0, "APPLY jobsets": 1.0}
    delta = cluster_bench.request_delta(before, after)
    assert list(delta.items()) == [("POST pods", 1000.0), ("PATCH trainjobs/status", 3.0), ("APPLY jobsets", 1.0)]


def test_a_checkpoint_without_medians_still_reports_each_run_and_its_costs(cluster_bench: ModuleType) -> None:
    run = {
        "last_pod_s": 10.0,
        "all_running_s": 20.0,
        "cpu_s": 1.5,
        "load": "2.00 1.00 0.50",
        "control_plane_cpu": {"kube-apiserver": 18.0},
        "requests": {"watch events sent: pods": 22681.0},
    }
    section = {
        "load_before": "0.1",
        "load_after": "2.0",
        "scenarios": [{"n": 1000, "runs": {"ours": [run, {**run, "all_running_s": 30.0}]}}],
    }
    lines = cluster_bench.huge_markdown(section)
    assert "| created→all pods Running (s) | 25.0 |" in lines, "the median of the runs so far"
    assert "| ours | 2 | 10.0 | 30.0 | 1.5 | 2.00 1.00 0.50 |" in lines
    assert "| kube-apiserver | 18.0 |" in lines
    assert "| watch events sent: pods | 22681 |" in lines


def names(
    cluster_bench: ModuleType, contenders: list[str], nodes: int, splits: list[int], bounds: list[int]
) -> list[str]:
    runners = [cluster_bench.Contender(name, None) for name in contenders]
    columns = cluster_bench.huge_columns(runners, nodes, splits, bounds)
    return [cluster_bench.huge_column_name(column) for column in columns]


@pytest.mark.parametrize(
    ("contenders", "nodes", "splits", "bounds", "expected"),
    [
        (
            ["ours", "upstream"],
            10000,
            [1, 10],
            [500, 1000],
            [
                "ours",
                "ours-cut(500)",
                "ours-cut(1000)",
                "upstream",
                "ceiling",
                "JobSet alone, 1 Job(s)",
                "JobSet alone, 10 Job(s)",
            ],
        ),
        (["ours", "upstream"], 1000, [], [1000, 2000], ["ours", "upstream", "ceiling"]),
        (["ours"], 997, [], [500], ["ours", "ceiling"]),
        (["ours"], 5000, [3], [500, 500], ["ours", "ours-cut(500)", "ceiling"]),
        (["upstream"], 5000, [], [500], ["upstream", "ceiling"]),
        (["ours", "before", "upstream"], 2000, [], [500], ["ours", "ours-cut(500)", "before", "upstream", "ceiling"]),
    ],
    ids=[
        "ours cut at each bound runs right after ours, then the others, the ceiling and the JobSet alone's",
        "a bound of numNodes or more leaves one Job, ours again: no column",
        "a numNodes with no equal cut within the bound (a prime) stays one Job: no column",
        "a bound given twice is one column, and a JobSet split that does not divide numNodes is skipped",
        "without ours in the run there is no operator to build the cut",
        "the baseline checkout runs after ours cut, before upstream",
    ],
)
def test_ours_cut_is_a_column_for_each_bound_that_cuts_the_size(
    cluster_bench: ModuleType,
    contenders: list[str],
    nodes: int,
    splits: list[int],
    bounds: list[int],
    expected: list[str],
) -> None:
    assert names(cluster_bench, contenders, nodes, splits, bounds) == expected


def test_the_report_prints_ours_cut_beside_ours_with_its_jobs_and_ratio(cluster_bench: ModuleType) -> None:
    def run(all_running: float, jobs: int) -> dict[str, Any]:
        return {"last_pod_s": 1.0, "all_running_s": all_running, "jobs": jobs, "load": "1.00"}

    runs = {
        "JobSet alone, 10 Job(s)": [run(70.0, 10)],
        "ceiling": [run(40.0, 0)],
        "upstream": [run(110.0, 1)],
        "ours-cut(1000)": [run(90.0, 10)],
        "ours-cut(500)": [run(80.0, 20)],
        "ours": [run(120.0, 1)],
    }
    assert cluster_bench.huge_column_order(list(runs)) == [
        "ours",
        "ours-cut(500)",
        "ours-cut(1000)",
        "upstream",
        "ceiling",
        "JobSet alone, 10 Job(s)",
    ]
    section = {"load_before": "0.1", "load_after": "2.0", "scenarios": [{"n": 10000, "runs": runs}]}
    lines = cluster_bench.huge_markdown(section)
    head = next(line for line in lines if line.startswith("| metric |"))
    assert head.startswith("| metric | ours | ours-cut(500) | ours-cut(1000) | upstream | ceiling | JobSet alone")
    assert "| ours/ours-cut(500) |" in head
    running = "| created→all pods Running (s) | 120.0 | 80.0 | 90.0 | 110.0 | 40.0 | 70.0 | 1.50 | 1.33 |"
    assert any(line.startswith(running) for line in lines), "ours' medians, then ours against each column"
    assert any(line.startswith("| trainer Jobs | 1.0 | 20.0 | 10.0 | 1.0 | 0.0 | 10.0 |") for line in lines)
    assert "| ours-cut(500) | 1 | 1.0 | 80.0 | - | 1.00 |" in lines


def test_the_huge_trainjob_asks_our_operator_for_the_cut_only_when_a_bound_is_given(loadgen: ModuleType) -> None:
    plain = loadgen.huge_trainjob("ns", "torch-distributed", 1000)
    cut = loadgen.huge_trainjob("ns", "torch-distributed", 1000, 500)
    assert plain["spec"]["trainer"]["numNodes"] == cut["spec"]["trainer"]["numNodes"] == 1000
    assert "annotations" not in plain["metadata"]
    assert cut["metadata"]["annotations"] == {"trainer.kubeflow.org/max-nodes-per-job": "500"}
    with pytest.raises(SystemExit, match="--max-nodes-per-job 0"):
        loadgen.huge_trainjob("ns", "torch-distributed", 1000, 0)


def test_the_annotated_huge_trainjob_is_rendered_by_our_pipeline_as_jobs_of_the_bound(loadgen: ModuleType) -> None:
    runtime = json.loads((REPO / "bench" / "runtime.json").read_text())
    source = RuntimeSource.of(ClusterTrainingRuntime.model_validate(runtime))
    raw = loadgen.huge_trainjob("ns", "torch-distributed", 1000, 300)
    raw["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    objects = Framework.from_registry().desired_objects(TrainJob.model_validate(raw), source)
    [jobset] = [obj for obj in objects if obj["kind"] == "JobSet"]
    [trainer] = jobset["spec"]["replicatedJobs"]
    assert (trainer["replicas"], trainer["template"]["spec"]["parallelism"]) == (4, 250)

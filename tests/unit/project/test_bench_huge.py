"""The huge TrainJobs section of bench/cluster_bench.py (issue 37): what is pure is tested here, the API server's
metrics read into requests by verb and resource, the deltas between two readings, and the report of a run cut short
(a checkpoint, written after each column, has no medians yet); the runs themselves are `make bench-cluster`'s."""

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_bench_baseline import bench_module


@pytest.fixture
def cluster_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("cluster_bench", monkeypatch, tmp_path)


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

"""The running TrainJobs section of bench/cluster_bench.py (issue 37, item 2): what is pure is tested here, when a
process's work ended from its CPU samples, the medians with their range, the report's table, and the pods the load
generator makes for an inert JobSet; the runs themselves are `make bench-cluster`'s (`--running N`)."""

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_bench_baseline import bench_module


@pytest.fixture
def cluster_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("cluster_bench", monkeypatch, tmp_path)


@pytest.fixture
def loadgen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("loadgen", monkeypatch, tmp_path)


@pytest.mark.parametrize(
    ("samples", "after", "end"),
    [
        ([(0.0, 1.0), (0.1, 1.2), (0.2, 1.5), (0.3, 1.5), (0.4, 1.5)], 0.0, 0.2),
        ([(0.0, 1.0), (0.1, 1.0), (0.2, 1.0)], 0.0, None),
        ([(0.0, 1.0), (0.1, 1.2), (0.2, 1.2)], 0.1, None),
        ([(0.0, 1.0), (0.1, 1.0), (0.2, 1.01), (0.3, 1.01), (5.0, 1.02)], 0.0, 5.0),
        ([], 0.0, None),
    ],
    ids=[
        "the work ends at the last sample whose CPU rose",
        "a process that used no CPU did no work",
        "a rise at or before the start is not the burst's work",
        "a single clock tick late in the window counts as work",
        "no samples, no work",
    ],
)
def test_the_work_ends_at_the_last_cpu_rise_after_the_start(
    cluster_bench: ModuleType, samples: list[tuple[float, float]], after: float, end: float | None
) -> None:
    assert cluster_bench.work_end(samples, after) == end


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([3.0, 1.0, 2.0], "2.0 (1.0-3.0)"),
        ([4.25], "4.2"),
        ([None, 1.0, 3.0], "2.0 (1.0-3.0)"),
        ([None, None], "-"),
        ([], "-"),
    ],
    ids=[
        "the median with the range of the runs",
        "one run: its value alone",
        "a run without the figure is left out",
        "no run with the figure: a dash",
        "no runs: a dash",
    ],
)
def test_a_figure_of_several_runs_reads_as_its_median_and_range(
    cluster_bench: ModuleType, values: list[float | None], text: str
) -> None:
    assert cluster_bench.spread(values) == text


def run(resync: float, burst: float | None) -> dict[str, Any]:
    return {"resync_s": resync, "burst_events_per_s": burst, "load_average": "1.0 1.0 1.0", "burst_load": "2.0"}


def test_the_report_shows_each_contenders_median_with_its_range_and_ours_against_upstreams(
    cluster_bench: ModuleType,
) -> None:
    upstream: list[dict[str, Any]] = [run(20.0, None), run(22.0, None), run(24.0, None)]
    section: dict[str, Any] = {
        "n": 5000,
        "nodes": 52,
        "load_before": "0.5",
        "load_after": "3.0",
        "ours": {"runs": [run(10.0, 400.0), run(12.0, 500.0), run(11.0, 450.0)]},
        "upstream": {"runs": upstream},
    }
    text = "\n".join(cluster_bench.running_markdown(section))
    assert "| metric | ours | upstream | ours/upstream |" in text
    assert (
        "| restart: process start → every TrainJob reconciled (s) | 11.0 (10.0-12.0) | 22.0 (20.0-24.0) | 0.50 |"
        in text
    )
    assert "| pod events handled per second (pods / the line above) | 450.0 (400.0-500.0) | - | - |" in text
    upstream[0]["burst_events_per_s"] = 700.0  # a run before upstream's were left out
    text = "\n".join(cluster_bench.running_markdown(section))
    assert "| pod events handled per second (pods / the line above) | 450.0 (400.0-500.0) | - | - |" in text, (
        "upstream watches no pods: its CPU ticks are not its pod events"
    )
    assert "| upstream | 3 | 1.0 1.0 1.0 | 2.0 |" in text


def test_an_inert_jobsets_pods_carry_the_labels_jobset_and_the_job_controller_would_give_them(
    loadgen: ModuleType,
) -> None:
    pod_template: dict[str, Any] = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "node", "image": "i"}]},
    }
    jobset = {
        "metadata": {"name": "tj-1", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "replicatedJobs": [
                {"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 2, "template": pod_template}}},
                {"name": "launcher", "template": {"spec": {"template": pod_template}}},
            ]
        },
    }
    pods = loadgen.jobset_pods(jobset)
    assert [p["metadata"]["name"] for p in pods] == ["tj-1-node-0-0-x", "tj-1-node-0-1-x", "tj-1-launcher-0-0-x"]
    labels = pods[1]["metadata"]["labels"]
    assert labels["app"] == "x"
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "tj-1"
    assert labels["jobset.sigs.k8s.io/jobset-uid"] == "u-1"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
    assert labels["batch.kubernetes.io/job-name"] == "tj-1-node-0"
    assert labels["batch.kubernetes.io/job-completion-index"] == "1"
    assert pods[1]["spec"]["restartPolicy"] == "Never"
    assert pods[1]["spec"]["hostname"] == "tj-1-node-0-1"
    assert "restartPolicy" not in pod_template["spec"], "the JobSet's template is not changed"


def test_a_run_of_ours_alone_has_no_ratio_column(cluster_bench: ModuleType) -> None:
    section = {"n": 10, "nodes": 2, "load_before": "0.5", "ours": {"runs": [run(10.0, 400.0)]}}
    text = "\n".join(cluster_bench.running_markdown(section))
    assert "| metric | ours |\n|---|---|\n| restart: process start → every TrainJob reconciled (s) | 10.0 |" in text


def test_a_process_counts_its_own_requests_from_the_operators_metric(cluster_bench: ModuleType) -> None:
    """The resync's GETs are counted twice: every client's (the API server's metric) and the operator's own (its
    client's metric, read here from the operator's real registry), so a count that is not the operator's shows."""
    import http.server
    import subprocess
    import threading

    from prometheus_client import generate_latest

    from trainjob_operator.metrics import Metrics

    metrics = Metrics()
    for verb, resource in (("GET", "trainjobs"), ("GET", "trainjobs"), ("GET", ""), ("POST", "selfsubjectreviews")):
        metrics.record_request(verb, resource)
    body = generate_latest(metrics.registry)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        process = cluster_bench.Process(subprocess.Popen(["true"]), url, "unused")
        assert process.own_requests() == {"GET trainjobs": 2.0, "GET ": 1.0, "POST selfsubjectreviews": 1.0}
        gone = cluster_bench.Process(subprocess.Popen(["true"]), "http://127.0.0.1:1/metrics", "unused")
        assert gone.own_requests() == {}, "metrics that do not answer: nothing counted"
        for proc in (process.proc, gone.proc):
            proc.wait()
    finally:
        server.shutdown()
        server.server_close()

"""The benchmarks' `--baseline-tree`: another checkout measured beside ours in the same run (bench/cluster_bench.py,
bench/render.py). What is pure is tested here: the option's checks, the contenders' order, the tables with the
baseline's column and the after/before ratios; the runs themselves are `make bench-cluster`'s and `make bench-render`'s.
"""

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


def bench_module(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """A fresh import of bench/<name>.py, its environment defaults (the benchmark cluster's dir) kept to this test."""
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path / "cluster"))
    monkeypatch.setenv("TRAINJOB_CLUSTER_NAME", "bench-test")
    monkeypatch.syspath_prepend(str(REPO / "hack"))
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.fixture
def cluster_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("cluster_bench", monkeypatch, tmp_path)


@pytest.fixture
def render(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    return bench_module("render", monkeypatch, tmp_path)


def checkout(root: Path, *, src: bool = True, venv: bool = True) -> Path:
    if src:
        (root / "src" / "trainjob_operator").mkdir(parents=True)
    if venv:
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "python").write_text("")
    return root


BASELINE_TREE_CASES = {
    "a checkout with its venv: its venv's interpreter": (dict(src=True, venv=True), None),
    "no package there: not a checkout of this repository": (dict(src=False, venv=True), "no src/trainjob_operator"),
    "no venv there: make install was not run in it": (dict(src=True, venv=False), "run `make install` in it"),
}


@pytest.mark.parametrize("case", BASELINE_TREE_CASES)
def test_the_baseline_tree_is_checked_before_any_cluster_starts(
    case: str, cluster_bench: ModuleType, tmp_path: Path
) -> None:
    layout, error = BASELINE_TREE_CASES[case]
    tree = checkout(tmp_path / "before", **layout)
    if error is None:
        assert cluster_bench.baseline_python(tree) == tree / ".venv" / "bin" / "python"
        return
    with pytest.raises(SystemExit) as exc:
        cluster_bench.baseline_python(tree)
    assert (
        str(exc.value)
        == f"bench: --baseline-tree {str(tree)!r}: "
        + {
            "no src/trainjob_operator": "no src/trainjob_operator there (a checkout of this repo?)",
            "run `make install` in it": "no .venv/bin/python there (run `make install` in it)",
        }[error]
    )


def test_the_baseline_runs_after_ours_and_before_upstream(cluster_bench: ModuleType, tmp_path: Path) -> None:
    tree = checkout(tmp_path / "before")
    names = [c.name for c in cluster_bench.contenders_for(True, "skipped in this test", tree)]
    assert names == ["ours", "before"]
    assert [c.name for c in cluster_bench.contenders_for(True, "skipped in this test")] == ["ours"]


ROWS = (("all_jobsets_s", "time to all JobSets (s)"), ("cpu_s", "operator CPU (s)"))
MEDIANS: dict[str, dict[str, Any]] = {
    "ours": {"all_jobsets_s": 10.0, "cpu_s": 4.0},
    "before": {"all_jobsets_s": 8.0, "cpu_s": 5.0},
    "ceiling": {"all_jobsets_s": 5.0},
}

TABLE_CASES: dict[str, tuple[list[str], list[str]]] = {
    "without a baseline: ours, upstream (not in the run: '-') and the ceiling, ours/each": (
        ["ours", "upstream", "ceiling"],
        [
            "| metric | ours | upstream | ceiling | ours/upstream | ours/ceiling |",
            "|---|---|---|---|---|---|",
            "| time to all JobSets (s) | 10.0 | - | 5.0 | - | 2.00 |",
            "| operator CPU (s) | 4.0 | - | - | - | - |",
        ],
    ),
    "with a baseline: its column beside ours and the ours/before ratio first": (
        ["ours", "before", "upstream", "ceiling"],
        [
            "| metric | ours | before | upstream | ceiling | ours/before | ours/upstream | ours/ceiling |",
            "|---|---|---|---|---|---|---|---|",
            "| time to all JobSets (s) | 10.0 | 8.0 | - | 5.0 | 1.25 | - | 2.00 |",
            "| operator CPU (s) | 4.0 | 5.0 | - | - | 0.80 | - | - |",
        ],
    ),
}


@pytest.mark.parametrize("case", TABLE_CASES)
def test_a_table_has_a_column_per_contender_then_ours_over_each(case: str, cluster_bench: ModuleType) -> None:
    columns, expected = TABLE_CASES[case]
    assert cluster_bench.compare_table(ROWS, MEDIANS, columns) == expected


def test_the_report_with_a_baseline_names_both_commits_and_shows_its_column(cluster_bench: ModuleType) -> None:
    medians = {k: 1.0 for k, _ in cluster_bench.BURST_ROWS}
    scenario = {
        "n": 50,
        "settings": "defaults",
        "ours": {**medians, "requests_per_trainjob": {"APPLY jobsets": 1.0}},
        "before": {**medians, "all_jobsets_s": 2.0, "requests_per_trainjob": {"APPLY jobsets": 2.0}},
    }
    report = {
        "stamp": "s",
        "machine": "m",
        "burst": [scenario],
        "baseline": {"tree": "/tmp/bench-before", "commit": "0411123", "ours_commit": "e50cf12"},
    }
    lines = cluster_bench.markdown(report).splitlines()
    assert (
        "ours: this checkout at e50cf12; before: the operator of /tmp/bench-before at 0411123 (its own venv), "
        "alternating with ours run by run."
    ) in lines
    assert "| time to all JobSets (s) | 1.0 | 2.0 | - | - | 0.50 | - | - |" in lines
    assert "| API requests per TrainJob | {'APPLY jobsets': 1.0} | {'APPLY jobsets': 2.0} | - | | | | |" in lines, (
        "a cell per contender, then one per ceiling and ratio column"
    )
    without = cluster_bench.markdown({**report, "baseline": None}).splitlines()
    assert "| metric | ours | upstream | ceiling | ours/upstream | ours/ceiling |" in without
    assert not [line for line in without if line.startswith("ours: this checkout")]


def test_render_compares_medians_of_rounds_per_scenario(render: ModuleType) -> None:
    def rounds(*rates: dict[str, float]) -> list[dict[str, dict[str, float]]]:
        return [{name: {"jobs_per_s": rate} for name, rate in r.items()} for r in rates]

    after = rounds({"torch": 90.0, "mpi": 40.0}, {"torch": 110.0, "mpi": 60.0}, {"torch": 100.0, "mpi": 50.0})
    before = rounds({"torch": 80.0, "old": 7.0}, {"torch": 100.0, "old": 9.0}, {"torch": 120.0, "old": 8.0})
    table = render.compare(after, before)
    assert table == {
        "torch": {"after": 100.0, "before": 100.0, "ratio": 1.0},
        "mpi": {"after": 50.0, "before": None, "ratio": None},
        "old": {"after": None, "before": 8.0, "ratio": None},
    }
    assert render.comparison_lines(table) == [
        "| scenario | before (TrainJobs/s) | after (TrainJobs/s) | after/before |",
        "|---|---|---|---|",
        "| torch | 100 | 100 | 1.00 |",
        "| mpi | - | 50 | - |",
        "| old | 8 | - | - |",
    ]


def test_render_parses_the_baseline_options(render: ModuleType) -> None:
    args = render.arguments(["--baseline-tree", "/tmp/before", "--rounds", "5"])
    assert (args.baseline_tree, args.rounds, args.jobs, args.runs) == (Path("/tmp/before"), 5, 2000, 5)
    assert render.arguments([]).baseline_tree is None


def test_steady_state_medians_skip_what_is_no_number(cluster_bench: ModuleType) -> None:
    """A burst run's steady state carries the load average (text) and the requests by verb (a dict): the median of
    those is not taken (it raised TypeError at the end of a full run's largest size)."""
    runs = [
        {"resync_s": r, "idle_rss_mib": 70.0 + r, "load_average": "1 2 3", "resync_requests": {"GET trainjobs": r}}
        for r in (3.0, 1.0, 2.0)
    ]
    assert cluster_bench.steady_medians(runs) == {"resync_s": 2.0, "idle_rss_mib": 72.0}


def test_steady_waits_grow_with_the_trainjobs_present(cluster_bench: ModuleType) -> None:
    """At 50,000 upstream's unmeasured burst took 1,086 s: a fixed 900 s wait would have left a fifth of its JobSets
    to the first measured restart. Small sizes keep the old 900 s."""
    assert cluster_bench.steady_burst_timeout(5000) == 900.0
    assert cluster_bench.steady_burst_timeout(50000) >= 2 * 1086
    assert cluster_bench.steady_resync_timeout(50000) > cluster_bench.steady_resync_timeout(20000) >= 900.0


def test_a_steady_report_with_ours_alone_is_written(cluster_bench: ModuleType) -> None:
    """The steady-only report is written after each contender: before upstream's column exists, ours' is a table."""
    steady = {"resync_s": 22.7, "idle_cpu_s_per_min": 0.02, "idle_rss_mib": 174.7, "peak_rss_mib": 190.5}
    report: dict[str, Any] = {
        "stamp": "s",
        "machine": "m",
        "burst": [{"n": 50000, "settings": "defaults", "ours": {"steady": steady, "burst_s": 625.0}}],
    }
    text = cluster_bench.markdown(report)
    assert "## Steady state with 50000 TrainJobs present" in text
    assert "| resync after restart (s) | 22.7 | - |" in text

"""Issue 35: the goodput timeline of the detail page and the table of `trainjob-operator goodput`
(trainjob_operator.ui.view), pure functions of TrainJobs and the time."""

from datetime import UTC, datetime
from typing import Any

from trainjob_operator.ui import view

NOW = datetime(2026, 11, 28, 12, 10, 0, tzinfo=UTC)


def tj(name: str, goodput: dict[str, Any] | None, state: str = "Running") -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if goodput is not None:
        status["goodput"] = goodput
    return {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"runtimeRef": {"name": "torch"}},
        "status": status,
    }


STALLED = tj(
    "llm",
    {
        "phase": "Stalled",
        "since": "2026-11-28T12:05:00Z",
        "startingSeconds": 60,
        "trainingSeconds": 240,
        "accelerators": 8,
        "idleAcceleratorSeconds": 480,
        "firstProgressSeconds": 90,
        "stalls": 1,
    },
    state="Stalled",
)


def test_the_timeline_adds_the_running_phase_up_to_now_and_gives_each_phase_its_share() -> None:
    assert view.goodput_of(STALLED, NOW) == {
        "phase": "Stalled",
        "since": "2026-11-28T12:05:00Z",
        "percent": 40,
        "totalSeconds": 600,
        "segments": [
            {"phase": "Starting", "seconds": 60, "share": 10.0, "running": False},
            {"phase": "Training", "seconds": 240, "share": 40.0, "running": False},
            {"phase": "Stalled", "seconds": 300, "share": 50.0, "running": True},
        ],
        "accelerators": 8,
        "idleAcceleratorSeconds": 480 + 8 * 300,
        "firstProgressSeconds": 90,
        "stalls": 1,
    }


def test_a_trainjob_without_accounting_or_with_a_broken_one_has_no_timeline() -> None:
    assert view.goodput_of(tj("old", None), NOW) is None
    assert view.goodput_of(tj("odd", {"phase": "Dancing", "since": "x"}), NOW) is None


def test_the_goodput_table_has_a_row_per_trainjob_and_their_sum() -> None:
    fresh = tj("fresh", {"phase": "Training", "since": "2026-11-28T12:00:00Z", "startingSeconds": 20})
    rows = view.goodput_table([STALLED, tj("old", None, state="Complete"), fresh], NOW)
    assert rows == [
        ["team", "fresh", "Running", "Training", "0s", "20s", "10m00s", "0s", "0s", "96%", "-", "-", "0"],
        ["team", "llm", "Stalled", "Stalled", "0s", "1m00s", "4m00s", "0s", "5m00s", "40%", "0.80", "1m30s", "1"],
        ["team", "old", "Complete", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"],
        ["", "ALL", "", "", "0s", "1m20s", "14m00s", "0s", "5m00s", "68%", "0.80", "", ""],
    ]
    printed = view.aligned(view.GOODPUT_COLUMNS, rows).splitlines()
    assert printed[0].split()[:4] == ["NAMESPACE", "NAME", "STATE", "PHASE"]
    assert printed[-1].split()[:2] == ["ALL", "0s"]

"""Issue 35: the goodput accounting (runtime/goodput.py), pure: phases from the state, seconds closed on a change
of phase only (no write of its own), accelerators from the JobSet, the live view readers compute."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator.api.trainjob import Goodput, TrainerStatus
from trainjob_operator.runtime import goodput
from trainjob_operator.runtime.conditions import rfc3339

T0 = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)
JOB = TrainJobBuilder.make().set("metadata.creationTimestamp", rfc3339(T0)).obj()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def g(phase: str, since: float, **fields: Any) -> Goodput:
    return Goodput(phase=phase, since=rfc3339(at(since)), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "state", "now", "accelerators", "want"),
    [
        pytest.param(
            None, "Pending", 5, None, g("Starting", 0), id="a new TrainJob: starting since its creation, no change"
        ),
        pytest.param(
            g("Starting", 0),
            "Running",
            30,
            8,
            g("Training", 30, starting_seconds=30, accelerators=8, idle_accelerator_seconds=240, percent=0),
            id="its first pod runs: 30 s of starting closed, 8 accelerators idle for them",
        ),
        pytest.param(
            g("Training", 30, starting_seconds=30, accelerators=8, idle_accelerator_seconds=240, percent=0),
            "Running",
            500,
            8,
            g("Training", 30, starting_seconds=30, accelerators=8, idle_accelerator_seconds=240, percent=0),
            id="training on: nothing changes (no write of its own)",
        ),
        pytest.param(
            g("Training", 30, starting_seconds=30, accelerators=8, idle_accelerator_seconds=240, percent=0),
            "Restarting",
            130,
            8,
            g(
                "Restarting",
                130,
                starting_seconds=30,
                training_seconds=100,
                accelerators=8,
                idle_accelerator_seconds=240,
                percent=76,
            ),
            id="a pod fails: training closed, restarting begins",
        ),
        pytest.param(
            g("Training", 30, starting_seconds=30, training_seconds=0, accelerators=8, percent=0),
            "Pending",
            40,
            8,
            g("Restarting", 40, starting_seconds=30, training_seconds=10, accelerators=8, percent=25),
            id="pending again after training (a JobSet restart, a resume): restarting, not starting",
        ),
        pytest.param(
            g("Queued", 0),
            "Pending",
            50,
            None,
            g("Starting", 50, queued_seconds=50, percent=0),
            id="Kueue admits it: 50 s queued, no accelerators held while queued",
        ),
        pytest.param(
            g("Training", 30, starting_seconds=30, accelerators=2, percent=0),
            "Complete",
            130,
            2,
            g("Finished", 130, starting_seconds=30, training_seconds=100, accelerators=2, percent=76),
            id="complete: finished, the goodput final",
        ),
        pytest.param(
            g("Finished", 130, training_seconds=100, percent=100),
            "Running",
            500,
            2,
            g("Finished", 130, training_seconds=100, percent=100),
            id="finished is final",
        ),
        pytest.param(
            g("Training", 30, starting_seconds=30, percent=0),
            "Error",
            40,
            None,
            g("Training", 30, starting_seconds=30, percent=0),
            id="Error (a reconcile failure) says nothing of the phase",
        ),
    ],
)
def test_account(before: Goodput | None, state: str, now: float, accelerators: int | None, want: Goodput) -> None:
    assert goodput.account(JOB, before, state, at(now), accelerators, None) == want


def test_a_stall_closes_training_when_its_limit_passed_not_when_it_was_seen() -> None:
    before = g("Training", 0, percent=0)
    got = goodput.account(JOB, before, "Stalled", at(100), None, None, at=at(70))
    assert got == g("Stalled", 70, training_seconds=70, percent=100)


def test_the_first_report_is_timed_from_creation_once() -> None:
    report = TrainerStatus.model_validate({"lastUpdatedTime": rfc3339(at(42))})
    first = goodput.account(JOB, g("Training", 30), "Running", at(45), None, report)
    assert first.first_progress_seconds == 42
    later = TrainerStatus.model_validate({"lastUpdatedTime": rfc3339(at(99))})
    assert goodput.account(JOB, first, "Running", at(100), None, later) == first


def test_live_adds_the_running_phase_up_to_now() -> None:
    live = goodput.live(g("Stalled", 100, training_seconds=100, accelerators=4, idle_accelerator_seconds=0), at(150))
    assert (live.seconds["Stalled"], live.total, live.percent, live.idle_accelerator_seconds) == (50, 150, 66, 200)


@pytest.mark.parametrize(
    ("jobset", "want"),
    [
        pytest.param(None, None, id="no JobSet: unknown"),
        pytest.param({"spec": {}}, 0, id="no replicated jobs: none"),
        pytest.param(
            {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "parallelism": 4,
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "resources": {
                                                        "limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "1Gi"},
                                                        "requests": {"nvidia.com/gpu": 2, "hugepages-2Mi": "1Gi"},
                                                    },
                                                }
                                            ]
                                        }
                                    },
                                }
                            },
                        },
                        {"name": "model-initializer", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
                    ]
                }
            },
            8,
            id="4 pods with 2 GPUs each (limits and requests once); cpu, memory and hugepages are no accelerators",
        ),
    ],
)
def test_accelerators(jobset: dict[str, Any] | None, want: int | None) -> None:
    assert goodput.accelerators(jobset) == want


def test_closed_deltas_are_what_a_write_adds_to_the_counters() -> None:
    before = g("Training", 30, starting_seconds=30, accelerators=8, idle_accelerator_seconds=240)
    after = g("Stalled", 130, starting_seconds=30, training_seconds=100, accelerators=8, idle_accelerator_seconds=240)
    assert goodput.closed_deltas(before, after) == {"Training": 100}
    assert goodput.closed_deltas(None, before) == {"Starting": 30, "idle": 240}
    assert goodput.closed_deltas(after, after) == {}

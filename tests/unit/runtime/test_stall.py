"""Issue 35: when a running TrainJob is Stalled (runtime/stall.py), a table keyed by sentences; the time is an
argument."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import StallPolicy
from trainjob_operator.api.trainjob import Goodput, TrainerStatus
from trainjob_operator.runtime import stall
from trainjob_operator.runtime.conditions import rfc3339

T0 = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return rfc3339(at(seconds))


def report(seconds: float | None, step: str | None = "40", percent: int | None = 40) -> TrainerStatus | None:
    if seconds is None:
        return None
    metrics = [{"name": "loss", "value": "0.1"}] + ([{"name": "step", "value": step}] if step else [])
    return TrainerStatus.model_validate(
        {"lastUpdatedTime": stamp(seconds), "progressPercentage": percent, "metrics": metrics}
    )


def training(since: float = 0, phase: str = "Training", **fields: Any) -> Goodput:
    return Goodput(phase=phase, since=stamp(since), **fields)  # type: ignore[arg-type]


POLICY = StallPolicy(progress_timeout_seconds=60, action="Report")
WITH_FIRST = StallPolicy(progress_timeout_seconds=60, first_progress_timeout_seconds=300)


@dataclass(frozen=True)
class Case:
    policy: StallPolicy | None
    report: TrainerStatus | None
    goodput: Goodput
    now: float
    want: stall.StallVerdict
    running: bool = True


CASES = [
    pytest.param(
        Case(POLICY, report(100), training(0), 130, stall.StallVerdict(requeue_after=30.0)),
        id="a report 30 s ago with a 60 s limit: not stalled, come back when the limit passes",
    ),
    pytest.param(
        Case(
            POLICY,
            report(100),
            training(0),
            175,
            stall.StallVerdict(
                stalled=True,
                new=True,
                since=at(160),
                reason=c.REASON_PROGRESS_STALLED,
                message="no progress report for 75s (progressTimeoutSeconds 60): the last at "
                "2026-11-28T12:01:40Z, step 40, progress 40%",
                report=stamp(100),
            ),
        ),
        id="the last report 75 s ago with a 60 s limit: stalled since the limit passed, naming the time and step",
    ),
    pytest.param(
        Case(POLICY, None, training(0), 10_000, stall.StallVerdict()),
        id="never reported and no first-report wait: never stalled",
    ),
    pytest.param(
        Case(POLICY, report(100), training(500), 10_000, stall.StallVerdict()),
        id="the last report is of an earlier attempt and no first-report wait: this attempt is never stalled",
    ),
    pytest.param(
        Case(WITH_FIRST, None, training(0), 200, stall.StallVerdict(requeue_after=100.0)),
        id="never reported, within the first-report wait: come back when it passes",
    ),
    pytest.param(
        Case(
            WITH_FIRST,
            None,
            training(0),
            301,
            stall.StallVerdict(
                stalled=True,
                new=True,
                since=at(300),
                reason=c.REASON_NO_FIRST_PROGRESS,
                message="no progress report 301s after the pods started running (firstProgressTimeoutSeconds 300); "
                "no progress report yet",
                report=stall.NO_REPORT,
            ),
        ),
        id="never reported past the first-report wait: stalled (NoFirstProgressReport)",
    ),
    pytest.param(
        Case(WITH_FIRST, report(100), training(0), 170, stall.StallVerdict(stalled=True, new=True)),
        id="once the attempt reported, the shorter progress limit applies, not the first-report wait",
    ),
    pytest.param(
        Case(POLICY, report(100), training(0), 175, stall.StallVerdict(), running=False),
        id="not Running (a pod failing, pending, finished): never stalled",
    ),
    pytest.param(
        Case(None, report(100), training(0), 10_000, stall.StallVerdict()),
        id="no stall policy: never stalled",
    ),
    pytest.param(
        Case(StallPolicy(action="Fail"), report(100), training(0), 10_000, stall.StallVerdict()),
        id="a policy without a limit: never stalled",
    ),
    pytest.param(
        Case(POLICY, report(100), training(0, phase="Restarting"), 10_000, stall.StallVerdict()),
        id="restarting (the accounting's phase): never stalled",
    ),
    pytest.param(
        Case(
            POLICY,
            report(100),
            training(160, phase="Stalled", stalled_report=stamp(100)),
            10_000,
            stall.StallVerdict(stalled=True, since=at(160), report=stamp(100)),
        ),
        id="stalled before and still no newer report: stalled, not anew (no second Event, counter or action)",
    ),
    pytest.param(
        Case(
            POLICY,
            report(200),
            training(160, phase="Stalled", stalled_report=stamp(100)),
            210,
            stall.StallVerdict(resumed=True, since=at(200), requeue_after=50.0),
        ),
        id="stalled, then a newer report: training again from that report, watched again",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_stall_verdict(case: Case) -> None:
    got = stall.check(case.policy, case.report, case.goodput, at(case.now), case.running)
    if case.want == stall.StallVerdict(stalled=True, new=True):  # only whether, not what
        assert (got.stalled, got.new, got.reason) == (True, True, c.REASON_PROGRESS_STALLED)
    else:
        assert got == case.want


@pytest.mark.parametrize(
    ("jobset", "left"),
    [
        pytest.param(None, 0, id="no JobSet: no restart"),
        pytest.param({"spec": {}}, 0, id="no failurePolicy: a JobSet restarts never"),
        pytest.param({"spec": {"failurePolicy": {"maxRestarts": 3}}}, 3, id="maxRestarts 3, none used"),
        pytest.param(
            {"spec": {"failurePolicy": {"maxRestarts": 3}}, "status": {"restarts": 3}}, 0, id="maxRestarts spent"
        ),
        pytest.param({"spec": {"failurePolicy": {"maxRestarts": True}}}, 0, id="not a number: none"),
    ],
)
def test_restarts_left_counts_against_the_jobsets_max_restarts(jobset: dict[str, Any] | None, left: int) -> None:
    assert stall.restarts_left(jobset) == left


@pytest.mark.parametrize(
    ("status", "want"),
    [
        pytest.param(None, "no progress report yet", id="none"),
        pytest.param(report(0, step=None, percent=None), "the last at 2026-11-28T12:00:00Z", id="time only"),
        pytest.param(
            TrainerStatus.model_validate(
                {
                    "lastUpdatedTime": stamp(0),
                    "metrics": [{"name": "epoch", "value": "3"}, {"name": "iter", "value": "9"}],
                }
            ),
            "the last at 2026-11-28T12:00:00Z, step 9",
            id="the step from the first of step, global_step, iteration, iter, epoch",
        ),
    ],
)
def test_the_report_is_described_by_its_time_step_and_progress(status: TrainerStatus | None, want: str) -> None:
    assert stall.describe_report(status) == want

"""Deadline arithmetic (`runtime/lifecycle.py`) never raises on hostile values (a crash signature of the fault run)."""

from __future__ import annotations

import datetime as dt

import pytest

from builders import TrainJobBuilder
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime.lifecycle import Timer, active_deadline, effective_run_policy

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("seconds", "start", "want"),
    [
        pytest.param(2**62, "2026-11-23T11:00:00Z", Timer(), id="a deadline past year 9999 never comes"),
        pytest.param(10**15, "2026-11-23T11:00:00Z", Timer(), id="a deadline of 10^15 s"),
        pytest.param(60, "2026-11-23T11:59:30", Timer(requeue_after=30.0), id="a time without a zone is UTC"),
        pytest.param(60, "yesterday", Timer(requeue_after=60.0), id="an unreadable start counts from now"),
        pytest.param(60, "2026-11-23T11:58:00Z", Timer(expired=True), id="an ordinary deadline still passes"),
    ],
)
def test_deadline_arithmetic_never_raises(seconds: int, start: str, want: Timer) -> None:
    job = TrainJobBuilder.make().set("spec.activeDeadlineSeconds", seconds).obj()
    status = TrainJobStatus(start_time=start)
    assert active_deadline(job, status, effective_run_policy(job, None), NOW) == want

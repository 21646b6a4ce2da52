"""A trainer cut into several Jobs (issue 37): the pods' health keys a pod by its Job and its completion index, so
the pods of different Jobs with the same completion index are different places (runtime/health.py)."""

from typing import Any

import pytest

from builders import PodBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime import health

JOB = TrainJobBuilder.make().obj()
JOBSET = {"metadata": {"name": "test-job", "uid": "jobset-uid"}, "status": {"restarts": 0}}
EARLY, LATE = "2026-11-22T11:00:00Z", "2026-11-22T11:05:00Z"


def pod(job_index: int, index: int, created: str = EARLY, suffix: str = "abcde") -> PodBuilder:
    return PodBuilder.make(job_index=job_index, index=index, created=created, suffix=suffix)


def test_every_pod_of_two_jobs_is_its_own_place() -> None:
    pods = [pod(j, i, suffix=f"p{j}{i}").running().raw() for j in range(2) for i in range(4)]
    assert len(health.newest_per_slot(pods)) == 8


CASES = {
    "a failed pod of Job 0 is not replaced by Job 1's pod of the same index": (
        [pod(0, 0).failed().raw(), pod(1, 0, LATE, "later").running().raw()],
        (c.STATE_RESTARTING, c.REASON_POD_FAILED),
    ),
    "its own replacement, in Job 0, running: Running again": (
        [pod(0, 0).failed().raw(), pod(0, 0, LATE, "later").running().raw(), pod(1, 0, LATE, "other").running().raw()],
        (c.STATE_RUNNING, None),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_cut_trainers_failures_stay_with_their_job(case: tuple[list[dict[str, Any]], tuple[str, str | None]]) -> None:
    pods, (state, reason) = case
    assessed = health.assess(JOB, TrainJobStatus(), JOBSET, pods)
    assert (assessed.state, assessed.reason) == (state, reason)

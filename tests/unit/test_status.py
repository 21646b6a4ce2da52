"""Status (spec §6) as a pure function of TrainJob, JobSet and the clock: cases 16 and 17 of §10.2."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework

FRAMEWORK = Framework.from_registry()
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
EARLIER = "2026-11-22T11:00:00Z"
NOW_TEXT = "2026-11-22T12:00:00Z"


def cond(type_: str, status: str, reason: str, message: str, at: str = NOW_TEXT) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


SUSPENDED = cond("Suspended", "True", "Suspended", "TrainJob is suspended", EARLIER)
RESUMED = cond("Suspended", "False", "Resumed", "TrainJob is resumed")
JOBS_STATUS = [
    {"name": "dataset-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
    {"name": "model-initializer", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
    {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
]


def jobset(conditions: list[dict[str, Any]] | None = None, jobs: list[dict[str, Any]] | None = None,
           suspend: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if jobs is not None:
        status["replicatedJobsStatus"] = jobs
    return {"spec": {"suspend": suspend}, "status": status}


@dataclass(frozen=True)
class Case:
    job: TrainJobBuilder
    jobset: dict[str, Any] | None
    want: dict[str, Any]
    delete_jobset: bool = False
    requeue_after: float | None = None
    observed_extra: dict[str, Any] = field(default_factory=dict)


BASE = TrainJobBuilder.make().set("metadata.creationTimestamp", EARLIER)

CASES = [
    pytest.param(Case(BASE, jobset(), {}), id="a never-suspended running job has no condition"),
    pytest.param(Case(BASE.suspend(), jobset(suspend=True), {"conditions": [
        cond("Suspended", "True", "Suspended", "TrainJob is suspended")]}), id="created suspended"),
    pytest.param(Case(BASE.set("status", {"conditions": [SUSPENDED]}), jobset(), {"conditions": [RESUMED]}),
                 id="unsuspending flips Suspended to False/Resumed"),
    pytest.param(Case(BASE.suspend().set("status", {"conditions": [SUSPENDED]}), jobset(suspend=True),
                      {"conditions": [SUSPENDED]}),
                 id="staying suspended keeps the transition time"),
    pytest.param(Case(
        BASE.set("status", {"conditions": [RESUMED]}),
        jobset([cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)], JOBS_STATUS),
        {"conditions": [RESUMED, cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully",
                                      EARLIER)], "jobsStatus": JOBS_STATUS}),
        id="JobSet Completed becomes Complete with its reason, message and time"),
    pytest.param(Case(
        BASE,
        jobset([cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures", EARLIER)],
               [{**JOBS_STATUS[2], "succeeded": 0, "failed": 1}]),
        {"conditions": [cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures",
                             EARLIER)], "jobsStatus": [{**JOBS_STATUS[2], "succeeded": 0, "failed": 1}]}),
        id="JobSet Failed becomes Failed"),
    pytest.param(Case(
        BASE, jobset([cond("StartupPolicyCompleted", "True", "x", "y"), cond("Completed", "False", "a", "b")],
                     [{**JOBS_STATUS[2], "succeeded": 0, "active": 2, "ready": 2}]),
        {"jobsStatus": [{**JOBS_STATUS[2], "succeeded": 0, "active": 2, "ready": 2}]}),
        id="other or false JobSet conditions are not copied; jobsStatus mirrors active and ready"),
    pytest.param(Case(BASE.set("spec.activeDeadlineSeconds", 60), jobset(), {
        "conditions": [cond("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")]},
        delete_jobset=True), id="deadline passed since creation: Failed and the JobSet is deleted"),
    pytest.param(Case(BASE.set("spec.activeDeadlineSeconds", 7200), jobset(), {}, requeue_after=3600.0),
                 id="deadline pending: requeue when it falls due"),
    pytest.param(Case(BASE.set("spec.activeDeadlineSeconds", 60).suspend(), jobset(suspend=True), {
        "conditions": [cond("Suspended", "True", "Suspended", "TrainJob is suspended")]}),
        id="a suspended job's deadline does not run"),
    pytest.param(Case(
        BASE.set("spec.activeDeadlineSeconds", 60).set("status", {"conditions": [
            cond("Suspended", "False", "Resumed", "TrainJob is resumed", "2026-11-22T11:59:30Z")]}),
        jobset(), {"conditions": [cond("Suspended", "False", "Resumed", "TrainJob is resumed",
                                       "2026-11-22T11:59:30Z")]}, requeue_after=30.0),
        id="the timer restarts on resume"),
    pytest.param(Case(
        BASE.set("spec.activeDeadlineSeconds", 60).set("status", {"conditions": [
            cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)]}),
        None, {"conditions": [cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully",
                                   EARLIER)]}),
        id="a finished job with its JobSet gone keeps its status and no deadline applies"),
    pytest.param(Case(
        BASE.set("status", {"trainerStatus": {"progressPercentage": 42, "lastUpdatedTime": EARLIER}}), jobset(),
        {"trainerStatus": {"progressPercentage": 42, "lastUpdatedTime": EARLIER}}),
        id="trainerStatus written by the status server is preserved"),
]


@pytest.mark.parametrize("case", CASES)
def test_status(case: Case) -> None:
    outcome = FRAMEWORK.status(case.job.obj(), Observed(jobset=case.jobset), NOW)
    assert outcome.status.to_wire() == case.want
    assert outcome.delete_jobset == case.delete_jobset
    assert outcome.requeue_after == case.requeue_after


def test_status_is_idempotent_once_applied() -> None:
    job = BASE.set("status", {"conditions": [SUSPENDED]})
    first = FRAMEWORK.status(job.obj(), Observed(jobset=jobset()), NOW).status
    again = FRAMEWORK.status(job.set("status", first.to_wire()).obj(), Observed(jobset=jobset()),
                             NOW + timedelta(minutes=5)).status
    assert again == first

"""Status (spec §6) as a pure function of TrainJob, JobSet, run policy and the clock: cases 16 and 17 of §10.2,
and the lifecycle of issue 13 (startTime, completionTime, TTL, startup deadline, restarts)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator.api.constants import RESTARTS_BEFORE_ANNOTATION as RESTARTS_BEFORE
from trainjob_operator.api.runtime import RunPolicy
from trainjob_operator.runtime.lifecycle import effective_run_policy
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


def jobset(
    conditions: list[dict[str, Any]] | None = None, jobs: list[dict[str, Any]] | None = None, suspend: bool = False
) -> dict[str, Any]:
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
    policy: RunPolicy | None = None
    """The runtime's run policy (defaults under the TrainJob's own fields)."""
    delete_trainjob: bool = False
    check_startup: bool = False


BASE = TrainJobBuilder.make().set("metadata.creationTimestamp", EARLIER)
COMPLETE = cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)
FINISHED = BASE.set(
    "status", {"conditions": [COMPLETE], "startTime": EARLIER, "completionTime": "2026-11-22T11:59:50Z"}
)
FINISHED_STATUS = FINISHED.obj().to_wire()["status"]
STARTED = {"startTime": EARLIER}

CASES = [
    pytest.param(
        Case(BASE, jobset(), STARTED), id="a never-suspended running job has no condition and started at its creation"
    ),
    pytest.param(
        Case(
            BASE.suspend(),
            jobset(suspend=True),
            {"conditions": [cond("Suspended", "True", "Suspended", "TrainJob is suspended")]},
        ),
        id="created suspended: no startTime",
    ),
    pytest.param(
        Case(BASE.set("status", {"conditions": [SUSPENDED]}), jobset(), {"startTime": NOW_TEXT}),
        id="resuming removes the Suspended condition (SDK Running) and starts the clock",
    ),
    pytest.param(
        Case(
            BASE.suspend().set("status", {"conditions": [SUSPENDED]}), jobset(suspend=True), {"conditions": [SUSPENDED]}
        ),
        id="staying suspended keeps the transition time",
    ),
    pytest.param(
        Case(
            BASE.suspend().set("status", {"startTime": EARLIER}),
            jobset(suspend=True),
            {"conditions": [cond("Suspended", "True", "Suspended", "TrainJob is suspended")]},
        ),
        id="suspending a running job clears startTime",
    ),
    pytest.param(
        Case(
            BASE.set("status", {"conditions": [RESUMED]}),
            jobset(
                [cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)], JOBS_STATUS
            ),
            {"conditions": [COMPLETE], "jobsStatus": JOBS_STATUS, "startTime": NOW_TEXT, "completionTime": NOW_TEXT},
        ),
        id="JobSet Completed becomes Complete; completionTime is when the operator saw it; an old Resumed goes",
    ),
    pytest.param(
        Case(
            BASE,
            jobset(
                [cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures", EARLIER)],
                [{**JOBS_STATUS[2], "succeeded": 0, "failed": 1}],
            ),
            {
                "conditions": [
                    cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures", EARLIER)
                ],
                "jobsStatus": [{**JOBS_STATUS[2], "succeeded": 0, "failed": 1}],
                **STARTED,
                "completionTime": NOW_TEXT,
            },
        ),
        id="JobSet Failed becomes Failed",
    ),
    pytest.param(
        Case(
            BASE,
            jobset(
                [cond("StartupPolicyCompleted", "True", "x", "y"), cond("Completed", "False", "a", "b")],
                [{**JOBS_STATUS[2], "succeeded": 0, "active": 2, "ready": 2}],
            ),
            {"jobsStatus": [{**JOBS_STATUS[2], "succeeded": 0, "active": 2, "ready": 2}], **STARTED},
        ),
        id="other or false JobSet conditions are not copied; jobsStatus mirrors active and ready",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 60),
            jobset(),
            {
                "conditions": [cond("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")],
                **STARTED,
                "completionTime": NOW_TEXT,
            },
            delete_jobset=True,
        ),
        id="deadline passed since creation: Failed and the JobSet is deleted",
    ),
    pytest.param(
        Case(BASE.set("spec.activeDeadlineSeconds", 7200), jobset(), STARTED, requeue_after=3600.0),
        id="deadline pending: requeue when it falls due",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 60).suspend(),
            jobset(suspend=True),
            {"conditions": [cond("Suspended", "True", "Suspended", "TrainJob is suspended")]},
        ),
        id="a suspended job's deadline does not run",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 60).set("status", {"startTime": "2026-11-22T11:59:30Z"}),
            jobset(),
            {"startTime": "2026-11-22T11:59:30Z"},
            requeue_after=30.0,
        ),
        id="the timer counts from startTime (the last resume)",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 60).set(
                "status",
                {"conditions": [cond("Suspended", "False", "Resumed", "TrainJob is resumed", "2026-11-22T11:59:30Z")]},
            ),
            jobset(),
            {"startTime": "2026-11-22T11:59:30Z"},
            requeue_after=30.0,
        ),
        id="a job resumed by an older operator starts at its Resumed transition",
    ),
    pytest.param(
        Case(BASE, jobset(), STARTED, policy=RunPolicy(active_deadline_seconds=7200), requeue_after=3600.0),
        id="the runtime's runPolicy.activeDeadlineSeconds is the default",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 5400),
            jobset(),
            STARTED,
            policy=RunPolicy(active_deadline_seconds=60),
            requeue_after=1800.0,
        ),
        id="the TrainJob's activeDeadlineSeconds overrides the runtime's",
    ),
    pytest.param(
        Case(
            BASE.set("spec.activeDeadlineSeconds", 60).set("status", {"conditions": [COMPLETE]}),
            None,
            {"conditions": [COMPLETE], **STARTED, "completionTime": NOW_TEXT},
        ),
        id="a finished job with its JobSet gone keeps its status and no deadline applies",
    ),
    pytest.param(
        Case(
            BASE.set("status", {"trainerStatus": {"progressPercentage": 42, "lastUpdatedTime": EARLIER}}),
            jobset(),
            {"trainerStatus": {"progressPercentage": 42, "lastUpdatedTime": EARLIER}, **STARTED},
        ),
        id="trainerStatus written by the status server is preserved",
    ),
    # ttlSecondsAfterFinished
    pytest.param(
        Case(FINISHED.set("spec.ttlSecondsAfterFinished", 60), None, FINISHED_STATUS, requeue_after=50.0),
        id="TTL pending: requeue when completionTime + TTL falls due",
    ),
    pytest.param(
        Case(FINISHED.set("spec.ttlSecondsAfterFinished", 10), None, FINISHED_STATUS, delete_trainjob=True),
        id="TTL expired: the TrainJob is deleted",
    ),
    pytest.param(
        Case(FINISHED, None, FINISHED_STATUS, policy=RunPolicy(ttl_seconds_after_finished=5), delete_trainjob=True),
        id="the runtime's runPolicy.ttlSecondsAfterFinished is the default",
    ),
    pytest.param(
        Case(
            FINISHED.set("spec.ttlSecondsAfterFinished", 3600),
            None,
            FINISHED_STATUS,
            policy=RunPolicy(ttl_seconds_after_finished=5),
            requeue_after=3590.0,
        ),
        id="the TrainJob's TTL overrides the runtime's",
    ),
    pytest.param(
        Case(
            BASE.set("spec.ttlSecondsAfterFinished", 0),
            jobset([cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully", EARLIER)]),
            {"conditions": [COMPLETE], **STARTED, "completionTime": NOW_TEXT},
            delete_trainjob=True,
        ),
        id="TTL 0: deleted as soon as the operator sees it finished",
    ),
    pytest.param(
        Case(
            BASE.set("spec.ttlSecondsAfterFinished", 60).set("status", {"conditions": [COMPLETE]}),
            None,
            {"conditions": [COMPLETE], **STARTED, "completionTime": NOW_TEXT},
            requeue_after=60.0,
        ),
        id="finished while the operator was away: the TTL counts from when it first sees it (never early)",
    ),
    pytest.param(
        Case(
            FINISHED.set("status.completionTime", "2026-11-22T12:10:00Z").set("spec.ttlSecondsAfterFinished", 60),
            None,
            {**FINISHED_STATUS, "completionTime": "2026-11-22T12:10:00Z"},
            requeue_after=660.0,
        ),
        id="a completionTime ahead of the clock (skew) never deletes early",
    ),
    pytest.param(
        Case(BASE.set("spec.ttlSecondsAfterFinished", 1), jobset(), STARTED),
        id="TTL does not apply to a job that has not finished",
    ),
    # startupDeadlineSeconds
    pytest.param(
        Case(BASE.set("spec.startupDeadlineSeconds", 7200), jobset(), STARTED, requeue_after=3600.0),
        id="startup deadline pending: requeue when it falls due",
    ),
    pytest.param(
        Case(BASE, jobset(), STARTED, policy=RunPolicy(startup_deadline_seconds=600), check_startup=True),
        id="startup deadline passed (runtime default): the pods must be checked",
    ),
    pytest.param(
        Case(
            BASE.suspend(),
            jobset(suspend=True),
            {"conditions": [cond("Suspended", "True", "Suspended", "TrainJob is suspended")]},
            policy=RunPolicy(startup_deadline_seconds=1),
        ),
        id="a suspended job's startup deadline does not run",
    ),
    # restarts
    pytest.param(
        Case(
            BASE,
            {**jobset(), "metadata": {"annotations": {RESTARTS_BEFORE: "3"}}, "status": {"restarts": 2}},
            {**STARTED, "restarts": 5},
        ),
        id="restarts: the JobSet's own plus the ones before it was created",
    ),
    pytest.param(
        Case(BASE.set("status", {"restarts": 5}), {**jobset(), "status": {"restarts": 0}}, {**STARTED, "restarts": 5}),
        id="restarts never go down when a JobSet is re-created",
    ),
    pytest.param(
        Case(BASE.set("status", {"restarts": 2}), None, {**STARTED, "restarts": 2}),
        id="restarts are kept while the JobSet is gone",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_status(case: Case) -> None:
    outcome = FRAMEWORK.status(
        case.job.obj(), Observed(jobset=case.jobset), NOW, effective_run_policy(case.job.obj(), case.policy)
    )
    # With a JobSet the restart count is always reported (0 unless the case says otherwise).
    want = case.want if case.jobset is None or "restarts" in case.want else {**case.want, "restarts": 0}
    assert outcome.status.to_wire() == want
    assert (outcome.delete_jobset, outcome.requeue_after, outcome.delete_trainjob, outcome.check_startup) == (
        case.delete_jobset,
        case.requeue_after,
        case.delete_trainjob,
        case.check_startup,
    )


def test_status_is_idempotent_once_applied() -> None:
    job = BASE.set("status", {"conditions": [SUSPENDED]})
    first = FRAMEWORK.status(job.obj(), Observed(jobset=jobset()), NOW).status
    again = FRAMEWORK.status(
        job.set("status", first.to_wire()).obj(), Observed(jobset=jobset()), NOW + timedelta(minutes=5)
    ).status
    assert again == first

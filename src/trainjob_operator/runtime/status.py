"""PostExecution: the TrainJob status as a pure function of the TrainJob, the JobSet, the run policy and the clock
(docs/upstream-behaviour.md#status; lifecycle beyond upstream in `lifecycle`)."""

from dataclasses import dataclass
from datetime import datetime

from ..api import constants as c
from ..api.runtime import RunPolicy
from ..api.trainjob import Condition, TrainJob, TrainJobStatus
from . import lifecycle
from .conditions import find, rfc3339, set_condition
from .errors import printable
from .health import assess


@dataclass(frozen=True)
class StatusOutcome:
    status: TrainJobStatus
    delete_jobset: bool = False
    """A deadline passed: the shell deletes the JobSet."""
    requeue_after: float | None = None
    """Seconds until the next timer (active or startup deadline, TTL), when one is pending."""
    delete_trainjob: bool = False
    """The TTL after finishing expired: the shell deletes the TrainJob itself (its children go with it)."""
    check_startup: bool = False
    """The startup deadline passed: the shell lists the pods and calls `startup_failed` with them."""


def suspended_condition(job: TrainJob, status: TrainJobStatus, now: datetime) -> None:
    """`Suspended=True` while suspended; removed (not `False`) once resumed, so a running TrainJob carries no
    condition and the kubeflow SDK 0.5.0 can report it Running (SDK#803; docs/compatibility.md D18)."""
    conditions = list(status.conditions or [])
    if job.spec.suspend:
        set_condition(
            conditions,
            Condition(
                type=c.CONDITION_SUSPENDED, status="True", reason=c.REASON_SUSPENDED, message=c.MESSAGE_SUSPENDED
            ),
            now,
        )
    else:
        conditions = [cond for cond in conditions if cond.type != c.CONDITION_SUSPENDED]
    status.conditions = conditions or None


def _fail(status: TrainJobStatus, reason: str, message: str, now: datetime) -> None:
    conditions = list(status.conditions or [])
    set_condition(
        conditions,
        Condition(
            type=c.CONDITION_FAILED, status="True", reason=reason, message=message, last_transition_time=rfc3339(now)
        ),
        now,
    )
    status.conditions = conditions


def _soonest(*waits: float | None) -> float | None:
    pending = [w for w in waits if w is not None]
    return min(pending) if pending else None


def desired_status(
    job: TrainJob, computed: TrainJobStatus, now: datetime, policy: RunPolicy | None = None
) -> StatusOutcome:
    """startTime, the Suspended condition, the status computed by the status plugin, the active deadline, then
    completionTime, the TTL and the startup deadline. `policy` is the effective run policy (the TrainJob's fields
    over the runtime's defaults); None means the TrainJob's own fields only."""
    effective = policy if policy is not None else lifecycle.effective_run_policy(job, None)
    status = computed.model_copy(deep=True)
    status.start_time = lifecycle.start_time(job, status, now)
    suspended_condition(job, status, now)
    deadline = lifecycle.active_deadline(job, status, effective, now)
    delete_jobset = deadline.expired
    if deadline.expired:
        _fail(status, c.REASON_DEADLINE_EXCEEDED, c.MESSAGE_DEADLINE_EXCEEDED, now)
    startup = lifecycle.startup_deadline(job, status, effective, now)
    status.completion_time = lifecycle.completion_time(status, now)
    ttl = lifecycle.ttl(status, effective, now)
    return StatusOutcome(
        status,
        delete_jobset=delete_jobset,
        requeue_after=_soonest(deadline.requeue_after, startup.requeue_after, ttl.requeue_after),
        delete_trainjob=ttl.expired,
        check_startup=startup.expired,
    )


def startup_failed(
    status: TrainJobStatus, stuck: lifecycle.StuckPod, deadline_seconds: int, now: datetime
) -> TrainJobStatus:
    """The TrainJob failed because `stuck` could not start within the startup deadline."""
    failed = status.model_copy(deep=True)
    _fail(failed, c.REASON_STARTUP_DEADLINE_EXCEEDED, stuck.describe(deadline_seconds), now)
    failed.completion_time = failed.completion_time or rfc3339(now)
    return failed


def trainjob_state(job: TrainJob, status: TrainJobStatus) -> str:
    """The one-word lifecycle state shown in `kubectl get trainjobs` (beyond upstream, T#3666) when the pods are not
    known (runtime/health.py decides with them)."""
    return assess(job, status, None, None).state


def with_reconcile_error(status: TrainJobStatus, error: tuple[str, str] | None, now: datetime) -> TrainJobStatus:
    """Set the ReconcileFailed condition for `error` (reason, message), or drop it when there is none."""
    conditions = [cond for cond in status.conditions or [] if cond.type != c.CONDITION_RECONCILE_FAILED]
    if error is not None:
        previous = find(status.conditions, c.CONDITION_RECONCILE_FAILED)
        conditions.append(
            Condition(
                type=c.CONDITION_RECONCILE_FAILED,
                status="True",
                reason=error[0],
                message=printable(error[1]),
                last_transition_time=previous.last_transition_time if previous else rfc3339(now),
            )
        )
    status.conditions = conditions or None
    return status

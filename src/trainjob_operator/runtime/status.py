"""PostExecution: the TrainJob status as a pure function of the TrainJob, the JobSet and the clock (spec §6)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..api import constants as c
from ..api.trainjob import Condition, TrainJob, TrainJobStatus
from .conditions import find, is_finished, is_true, rfc3339, set_condition


@dataclass(frozen=True)
class StatusOutcome:
    status: TrainJobStatus
    delete_jobset: bool = False
    """The deadline passed: the shell deletes the JobSet."""
    requeue_after: float | None = None
    """Seconds until the deadline, when one is pending."""


def parse_time(value: str) -> datetime:
    """An RFC 3339 time; one without a zone is UTC (Kubernetes writes UTC). Raises ValueError."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def suspended_condition(job: TrainJob, status: TrainJobStatus, now: datetime) -> None:
    conditions = list(status.conditions or [])
    if job.spec.suspend:
        set_condition(conditions, Condition(type=c.CONDITION_SUSPENDED, status="True", reason=c.REASON_SUSPENDED,
                                            message=c.MESSAGE_SUSPENDED), now)
    else:
        current = find(conditions, c.CONDITION_SUSPENDED)
        if current is not None and current.status == "True":
            set_condition(conditions, Condition(type=c.CONDITION_SUSPENDED, status="False", reason=c.REASON_RESUMED,
                                                message=c.MESSAGE_RESUMED), now)
    status.conditions = conditions or None


def deadline(job: TrainJob, status: TrainJobStatus, now: datetime) -> tuple[bool, float | None]:
    """(exceeded, seconds left). The timer starts at creation, or restarts at the last resume (§6.4)."""
    seconds = job.spec.active_deadline_seconds
    if not seconds or job.spec.suspend or is_finished(status.conditions):
        return False, None
    start_text = job.metadata.creation_timestamp
    resumed = find(status.conditions, c.CONDITION_SUSPENDED)
    if resumed is not None and resumed.status == "False" and resumed.last_transition_time:
        start_text = resumed.last_transition_time
    try:
        start = parse_time(start_text) if start_text else now
    except ValueError:  # not a time (offline input): the timer counts from now
        start = now
    try:
        left = (start + timedelta(seconds=seconds) - now).total_seconds()
    except OverflowError:  # a deadline past year 9999 never comes
        return False, None
    if left < 0:
        return True, None
    return False, max(left, 1.0)


def desired_status(job: TrainJob, computed: TrainJobStatus, now: datetime) -> StatusOutcome:
    """Suspended condition, the status computed by the status plugin, then the deadline."""
    status = computed.model_copy(deep=True)
    suspended_condition(job, status, now)
    exceeded, left = deadline(job, status, now)
    if exceeded:
        conditions = list(status.conditions or [])
        set_condition(conditions, Condition(type=c.CONDITION_FAILED, status="True",
                                            reason=c.REASON_DEADLINE_EXCEEDED,
                                            message=c.MESSAGE_DEADLINE_EXCEEDED, last_transition_time=rfc3339(now)),
                      now)
        status.conditions = conditions
        return StatusOutcome(status, delete_jobset=True)
    return StatusOutcome(status, requeue_after=left)


def trainjob_state(job: TrainJob, status: TrainJobStatus) -> str:
    """The one-word lifecycle state shown in `kubectl get trainjobs` (beyond upstream, T#3666)."""
    conditions = status.conditions
    if is_true(conditions, c.CONDITION_FAILED):
        return c.STATE_FAILED
    if is_true(conditions, c.CONDITION_COMPLETE):
        return c.STATE_COMPLETE
    if is_true(conditions, c.CONDITION_RECONCILE_FAILED):
        return c.STATE_ERROR
    if job.spec.suspend:
        return c.STATE_SUSPENDED
    if any(j.active > 0 for j in status.jobs_status or []):
        return c.STATE_RUNNING
    return c.STATE_PENDING


def with_reconcile_error(status: TrainJobStatus, error: tuple[str, str] | None, now: datetime) -> TrainJobStatus:
    """Set the ReconcileFailed condition for `error` (reason, message), or drop it when there is none."""
    conditions = [cond for cond in status.conditions or [] if cond.type != c.CONDITION_RECONCILE_FAILED]
    if error is not None:
        previous = find(status.conditions, c.CONDITION_RECONCILE_FAILED)
        conditions.append(Condition(type=c.CONDITION_RECONCILE_FAILED, status="True", reason=error[0],
                                    message=error[1],
                                    last_transition_time=previous.last_transition_time if previous else rfc3339(now)))
    status.conditions = conditions or None
    return status

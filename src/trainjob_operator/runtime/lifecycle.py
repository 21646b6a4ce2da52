"""Lifecycle beyond upstream v2.3 (issue 13): run policy, start/completion times, TTL, restart budget, startup
deadline, resize. Pure decisions: every clock reading comes in as `now`, every object as an argument.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..api import constants as c
from ..api.runtime import RunPolicy, StallPolicy
from ..api.trainjob import TrainJob, TrainJobStatus
from .conditions import find, is_finished, rfc3339

MIN_REQUEUE_SECONDS = 1.0
STARTUP_RECHECK_SECONDS = 10.0
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def parse_time(value: str) -> datetime:
    """An RFC 3339 time; one without a zone is UTC (Kubernetes writes UTC). Raises ValueError."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def time_or_none(text: str | None) -> datetime | None:
    """`parse_time` of a time a status may hold; None when it is missing or not a time (never raises)."""
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None


# --- run policy -------------------------------------------------------------------------------------------------


def effective_run_policy(job: TrainJob, runtime_policy: RunPolicy | None) -> RunPolicy:
    """The runtime's `runPolicy` defaults with every field the TrainJob sets taking precedence."""
    base = runtime_policy or RunPolicy()
    spec = job.spec
    return RunPolicy(
        active_deadline_seconds=spec.active_deadline_seconds
        if spec.active_deadline_seconds is not None
        else base.active_deadline_seconds,
        ttl_seconds_after_finished=spec.ttl_seconds_after_finished
        if spec.ttl_seconds_after_finished is not None
        else base.ttl_seconds_after_finished,
        startup_deadline_seconds=spec.startup_deadline_seconds
        if spec.startup_deadline_seconds is not None
        else base.startup_deadline_seconds,
        stall_policy=effective_stall_policy(spec.stall_policy, base.stall_policy),
    )


def effective_stall_policy(own: StallPolicy | None, runtime: StallPolicy | None) -> StallPolicy | None:
    """The runtime's `runPolicy.stallPolicy` with each field the TrainJob's `spec.stallPolicy` sets taking
    precedence (None when neither has one)."""
    if own is None or runtime is None:
        return own or runtime
    return runtime.model_copy(update={k: v for k, v in own if v is not None})


# --- status.startTime / status.completionTime -------------------------------------------------------------------


def start_time(job: TrainJob, status: TrainJobStatus, now: datetime) -> str | None:
    """JobSet's meaning: when the TrainJob last started running; none while it is suspended.

    A TrainJob never suspended started at its creation (the API server's clock); a resumed one when the operator
    first saw it resumed (an older operator recorded that as the `Suspended=False` transition).
    """
    finished = is_finished(status.conditions)
    if job.spec.suspend and not finished:
        return None
    if status.start_time or job.spec.suspend:
        return status.start_time
    suspended = find(status.conditions, c.CONDITION_SUSPENDED)
    if suspended is None:
        return job.metadata.creation_timestamp or rfc3339(now)
    if suspended.status == "False" and suspended.last_transition_time:
        return suspended.last_transition_time
    return rfc3339(now)


def completion_time(status: TrainJobStatus, now: datetime) -> str | None:
    """When the operator first saw the TrainJob finished, on its own clock: the TTL is measured on the same clock
    it was written with, so a skew between the operator and the API server or JobSet never deletes early."""
    if not is_finished(status.conditions):
        return None
    return status.completion_time or rfc3339(now)


def seconds_until(stamp: str | None, seconds: int | None, now: datetime) -> float | None:
    """Seconds left until `stamp + seconds` (negative once passed), or None when either is unset."""
    if not stamp or seconds is None:
        return None
    try:
        start = parse_time(stamp)
    except ValueError:  # not a time (offline input): the timer counts from now
        start = now
    try:
        return (start + timedelta(seconds=seconds) - now).total_seconds()
    except OverflowError:  # a deadline past year 9999 never comes
        return None


@dataclass(frozen=True)
class Timer:
    """A deadline decision: act now, or come back after `requeue_after` seconds (None: nothing pending)."""

    expired: bool = False
    requeue_after: float | None = None


def ttl(status: TrainJobStatus, policy: RunPolicy, now: datetime) -> Timer:
    """Delete the finished TrainJob once `completionTime + ttlSecondsAfterFinished` has passed."""
    if not is_finished(status.conditions):
        return Timer()
    left = seconds_until(status.completion_time, policy.ttl_seconds_after_finished, now)
    if left is None:
        return Timer()
    if left <= 0:
        return Timer(expired=True)
    return Timer(requeue_after=max(left, MIN_REQUEUE_SECONDS))


def _since_start(job: TrainJob, status: TrainJobStatus, seconds: int | None, now: datetime) -> Timer:
    """A deadline counted from `startTime` while the TrainJob runs (not suspended, not finished)."""
    if job.spec.suspend or is_finished(status.conditions):
        return Timer()
    left = seconds_until(status.start_time, seconds, now)
    if left is None:
        return Timer()
    if left < 0:
        return Timer(expired=True)
    return Timer(requeue_after=max(left, MIN_REQUEUE_SECONDS))


def active_deadline(job: TrainJob, status: TrainJobStatus, policy: RunPolicy, now: datetime) -> Timer:
    """Fail the TrainJob once it has been running (since `startTime`) longer than `activeDeadlineSeconds`."""
    return _since_start(job, status, policy.active_deadline_seconds, now)


def startup_deadline(job: TrainJob, status: TrainJobStatus, policy: RunPolicy, now: datetime) -> Timer:
    """When the pods must be checked: `expired` once `startTime + startupDeadlineSeconds` has passed."""
    return _since_start(job, status, policy.startup_deadline_seconds, now)


# --- pods that cannot start -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StuckPod:
    name: str
    reason: str
    message: str

    def describe(self, deadline_seconds: int) -> str:
        detail = f": {self.message}" if self.message else ""
        return (
            f"pod {self.name} did not start within the startup deadline of {deadline_seconds}s ({self.reason}{detail})"
        )


def stuck_reason(pod: dict[str, Any]) -> StuckPod | None:
    """Why a Pending pod cannot start on its own: unschedulable, or its image cannot be pulled. None otherwise."""
    status = pod.get("status") or {}
    name = str((pod.get("metadata") or {}).get("name", ""))
    if status.get("phase") != "Pending":
        return None
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in IMAGE_PULL_REASONS:
                return StuckPod(
                    name,
                    str(waiting["reason"]),
                    f"container {container.get('name')}: {waiting.get('message', '')}".rstrip(": "),
                )
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return StuckPod(name, "Unschedulable", str(condition.get("message", "")))
    return None


@dataclass(frozen=True)
class StartupCheck:
    stuck: StuckPod | None = None
    """A pod that cannot start: the TrainJob fails."""
    started: bool = False
    """Every pod is past Pending: no further checks are needed."""


def check_startup(pods: list[dict[str, Any]]) -> StartupCheck:
    """The startup deadline has passed: the first stuck pod (by name, so the answer is stable), or whether all
    pods have started."""
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        stuck = stuck_reason(pod)
        if stuck is not None:
            return StartupCheck(stuck=stuck)
    started = bool(pods) and all((p.get("status") or {}).get("phase") != "Pending" for p in pods)
    return StartupCheck(started=started)


# --- restarts that survive a re-created JobSet --------------------------------------------------------------------


def restarts_before(jobset: dict[str, Any] | None) -> int:
    """Restarts the TrainJob had before this JobSet was created (recorded on the JobSet by the operator)."""
    annotations = ((jobset or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return max(int(annotations.get(c.RESTARTS_BEFORE_ANNOTATION, 0)), 0)
    except (TypeError, ValueError):
        return 0


def total_restarts(previous: int | None, jobset: dict[str, Any] | None) -> int | None:
    """The TrainJob's restart count: the JobSet's own restarts on top of the ones before it; never goes down."""
    if jobset is None:
        return previous
    count = restarts_before(jobset) + int((jobset.get("status") or {}).get("restarts") or 0)
    return max(count, previous or 0)


def remaining_restarts(max_restarts: int | None, spent: int) -> int | None:
    """The `maxRestarts` budget of a re-created JobSet: what the TrainJob has not used yet."""
    if max_restarts is None:
        return None
    return max(max_restarts - spent, 0)


# --- resize while suspended ---------------------------------------------------------------------------------------


def size_view(replicated_jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Just what `needs_rebuild` compares of a JobSet's `replicatedJobs` (what the operator's cache keeps)."""
    view = []
    for rjob in replicated_jobs:
        job_spec = ((rjob.get("template") or {}).get("spec")) or {}
        pod = ((job_spec.get("template") or {}).get("spec")) or {}
        containers = [
            {"name": ct.get("name"), "resources": ct.get("resources") or {}} for ct in pod.get("containers") or []
        ]
        view.append(
            {
                "name": rjob.get("name"),
                "replicas": rjob.get("replicas", 1),  # a cut trainer's number of Jobs: without it, a rebuild loop
                "template": {
                    "spec": {
                        "parallelism": job_spec.get("parallelism"),
                        "completions": job_spec.get("completions"),
                        "template": {"spec": {"containers": containers}},
                    }
                },
            }
        )
    return view


def _sizes(jobset: dict[str, Any]) -> dict[str, Any]:
    """Per replicated job: what a resize changes (its Jobs, as JobSet defaults them: a trainer cut into bounded Jobs
    changes their number; parallelism, completions, container resources)."""
    sizes = {}
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = ((rjob.get("template") or {}).get("spec")) or {}
        pod = ((job_spec.get("template") or {}).get("spec")) or {}
        containers = {ct.get("name"): ct.get("resources") or {} for ct in pod.get("containers") or []}
        sizes[rjob.get("name")] = (
            rjob.get("replicas", 1),
            job_spec.get("parallelism"),
            job_spec.get("completions"),
            containers,
        )
    return sizes


def needs_rebuild(desired: dict[str, Any], observed: dict[str, Any] | None) -> bool:
    """The existing JobSet was built for another size: JobSet keeps `replicatedJobs` immutable, so it is deleted
    and created anew (only ever while the TrainJob is suspended or being resumed)."""
    if observed is None:
        return False
    return _sizes(desired) != _sizes(observed)


def resize_fields_changed(old: TrainJob, new: TrainJob) -> list[str]:
    """The `spec.trainer` fields a resize changed, as JSON paths."""
    before, after = old.spec.trainer, new.spec.trainer
    changed = []
    if (before.num_nodes if before else None) != (after.num_nodes if after else None):
        changed.append("spec.trainer.numNodes")
    if (before.resources_per_node if before else None) != (after.resources_per_node if after else None):
        changed.append("spec.trainer.resourcesPerNode")
    return changed

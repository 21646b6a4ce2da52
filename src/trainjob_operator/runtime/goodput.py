"""Goodput accounting (issue 35): where a TrainJob's time went, from what the operator already observes — its state
(the conditions, the pods, Kueue's suspension), its JobSet's size and the progress reports. Pure: `now` and every
object come in as arguments.

`status.goodput` holds the seconds of the phases that ended and the phase now running with its start (`since`); it
changes only with a change of phase, which is a change of `status.state` that is written anyway, so the accounting
costs no write of its own (the first progress report aside: its time is recorded once). Readers add the running
phase up to their own now (`live`)."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ..api import constants as c
from ..api.trainjob import Goodput, TrainerStatus, TrainJob
from .conditions import rfc3339
from .lifecycle import time_or_none

QUEUED, STARTING, TRAINING, RESTARTING, STALLED, FINISHED = (
    "Queued",
    "Starting",
    "Training",
    "Restarting",
    "Stalled",
    "Finished",
)
PHASES = (QUEUED, STARTING, TRAINING, RESTARTING, STALLED)
"""The phases that take time (Finished ends the accounting)."""
FIELDS: Mapping[str, str] = MappingProxyType(
    {
        QUEUED: "queued_seconds",
        STARTING: "starting_seconds",
        TRAINING: "training_seconds",
        RESTARTING: "restarting_seconds",
        STALLED: "stalled_seconds",
    }
)
IDLE = frozenset({STARTING, RESTARTING, STALLED})
"""Phases in which the TrainJob's pods hold their accelerators without training (queued: nothing is held yet)."""
NOT_ACCELERATORS = frozenset({"cpu", "memory", "ephemeral-storage", "pods", "storage"})


def phase_of(state: str | None, before: Goodput | None) -> str | None:
    """The phase a `status.state` means; None: the state says nothing of it (Error, unknown), the phase stays."""
    trained = before is not None and (
        before.training_seconds > 0 or before.stalled_seconds > 0 or before.phase in (TRAINING, STALLED, RESTARTING)
    )
    return {
        c.STATE_SUSPENDED: QUEUED,
        c.STATE_PENDING: RESTARTING if trained else STARTING,
        c.STATE_RUNNING: TRAINING,
        c.STATE_RESTARTING: RESTARTING,
        c.STATE_STALLED: STALLED,
        c.STATE_COMPLETE: FINISHED,
        c.STATE_FAILED: FINISHED,
    }.get(state or "")


def initial(job: TrainJob, now: datetime) -> Goodput:
    """The accounting of a TrainJob that has none yet: from its creation, in the phase its recorded state means (a
    new TrainJob: Starting, or Queued when created suspended)."""
    created = time_or_none(job.metadata.creation_timestamp)
    since = min(created, now) if created is not None else now
    return Goodput.model_validate({"phase": initial_phase(job), "since": rfc3339(since)})


def initial_phase(job: TrainJob) -> str:
    state = job.status.state if job.status is not None else None
    return phase_of(state, None) or (QUEUED if job.spec.suspend else STARTING)


def accelerators(jobset: dict[str, Any] | None) -> int | None:
    """Accelerators the JobSet's pods ask for, in all: every extended resource (nvidia.com/gpu, google.com/tpu,
    amd.com/gpu, ...) of every container, times the pods of its Job (None: no JobSet known)."""
    if jobset is None:
        return None
    total = 0
    for rjob in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = ((rjob.get("template") or {}).get("spec")) or {}
        pods = job_spec.get("parallelism")
        pods = pods if isinstance(pods, int) and pods > 0 else 1
        replicas = rjob.get("replicas")
        replicas = replicas if isinstance(replicas, int) and replicas > 0 else 1
        pod = ((job_spec.get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or []:
            resources = container.get("resources") or {}
            asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
            for name, quantity in asked.items():
                if name in NOT_ACCELERATORS or name.startswith("hugepages-"):
                    continue
                try:
                    count = int(float(str(quantity)))
                except ValueError:
                    continue
                total += max(count, 0) * pods * replicas
    return total


def _closed_total(g: Goodput) -> int:
    return sum(getattr(g, FIELDS[p]) for p in PHASES)


def _percent(training: int, total: int) -> int | None:
    return None if total <= 0 else min(100, training * 100 // total)


def account(
    job: TrainJob,
    before: Goodput | None,
    state: str | None,
    now: datetime,
    accelerator_count: int | None,
    trainer_status: TrainerStatus | None,
    at: datetime | None = None,
) -> Goodput:
    """The accounting after this pass: unchanged unless the phase changes (or the first progress report is seen);
    a change closes the running phase at `at` (default `now`; a stall began when its limit passed, a stall ended
    with the report that ended it) and opens the new one there."""
    g = before if before is not None else initial(job, now)
    update: dict[str, Any] = {}
    if g.first_progress_seconds is None and trainer_status is not None:
        reported, created = (
            time_or_none(trainer_status.last_updated_time),
            time_or_none(job.metadata.creation_timestamp),
        )
        if reported is not None and created is not None:
            update["first_progress_seconds"] = max(int((reported - created).total_seconds()), 0)
    phase = phase_of(state, g)
    if phase is not None and phase != g.phase and g.phase != FINISHED:
        since = time_or_none(g.since) or now
        end = max(min(at or now, now), since)
        seconds = int((end - since).total_seconds())
        update[FIELDS[g.phase]] = getattr(g, FIELDS[g.phase]) + seconds
        held = accelerator_count if accelerator_count is not None else g.accelerators
        if held is not None:
            update["accelerators"] = held
            if g.phase in IDLE:
                update["idle_accelerator_seconds"] = (g.idle_accelerator_seconds or 0) + held * seconds
        update["phase"] = phase
        update["since"] = rfc3339(end)
        closed = g.model_copy(update=update)
        update["percent"] = _percent(closed.training_seconds, _closed_total(closed))
    return g.model_copy(update=update) if update else g


@dataclass(frozen=True)
class Live:
    """The accounting as of `now`: the running phase added to its seconds."""

    seconds: Mapping[str, int]
    """Per phase (Queued, Starting, Training, Restarting, Stalled)."""
    total: int
    percent: int | None
    idle_accelerator_seconds: int | None
    phase: str
    first_progress_seconds: int | None
    stalls: int


def live(g: Goodput, now: datetime) -> Live:
    seconds = {p: getattr(g, FIELDS[p]) for p in PHASES}
    idle = g.idle_accelerator_seconds
    if g.phase in seconds:
        since = time_or_none(g.since)
        running = max(int((now - since).total_seconds()), 0) if since is not None else 0
        seconds[g.phase] += running
        if g.phase in IDLE and g.accelerators:
            idle = (idle or 0) + g.accelerators * running
    total = sum(seconds.values())
    return Live(
        seconds, total, _percent(seconds[TRAINING], total), idle, g.phase, g.first_progress_seconds, g.stalls or 0
    )


def closed_deltas(before: Goodput | None, after: Goodput | None) -> dict[str, int]:
    """The seconds per phase (and `idle` for accelerator-seconds) a write of `after` over `before` closed: what the
    counters add (each phase's seconds counted once, by the replica whose write landed)."""
    if after is None:
        return {}
    out = {}
    for phase in PHASES:
        delta = getattr(after, FIELDS[phase]) - (getattr(before, FIELDS[phase]) if before is not None else 0)
        if delta > 0:
            out[phase] = delta
    idle = (after.idle_accelerator_seconds or 0) - ((before.idle_accelerator_seconds or 0) if before else 0)
    if idle > 0:
        out["idle"] = idle
    return out

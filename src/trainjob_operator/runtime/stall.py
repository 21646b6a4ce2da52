"""Stall detection (issue 35): a running TrainJob that stopped reporting progress. Pure: the policy, the progress
reports (`status.trainerStatus`, written by the status server), the accounting's phase (`status.goodput`) and `now`
come in as arguments; nothing is remembered between passes but what the status says, so an operator restart or a new
leader decides the same.

- An attempt (the pods running since the TrainJob's state last became Running) that reported progress is Stalled
  once `progressTimeoutSeconds` passed since its last report.
- An attempt that has not reported yet is Stalled once `firstProgressTimeoutSeconds` passed since it began running;
  without that setting it is never Stalled: a TrainJob that never reports progress is never called stalled.
- A stall lasts until a newer report arrives (the report it was detected after is kept, `goodput.stalledReport`)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..api import constants as c
from ..api.runtime import StallPolicy
from ..api.trainjob import Goodput, TrainerStatus
from .goodput import STALLED, TRAINING
from .lifecycle import MIN_REQUEUE_SECONDS, time_or_none

NO_REPORT = "none"
"""`goodput.stalledReport` of a stall detected before any report of the attempt."""
STEP_METRICS = ("step", "global_step", "globalStep", "iteration", "iter", "epoch")
"""Metric names taken as the training's step, in this order."""


@dataclass(frozen=True)
class StallVerdict:
    stalled: bool = False
    new: bool = False
    """Stalled in this pass (not before): the Event, the counter and the action."""
    since: datetime | None = None
    """When the stall began (the limit passed) or, for `resumed`, the report that ended it."""
    resumed: bool = False
    """A stall ended with a newer report: training again."""
    reason: str | None = None
    message: str | None = None
    report: str | None = None
    """The report the stall was detected after (`lastUpdatedTime`, or `none`)."""
    requeue_after: float | None = None
    """When to look again: the moment the limit passes if no report comes."""


def enabled(policy: StallPolicy | None) -> bool:
    return policy is not None and (
        policy.progress_timeout_seconds is not None or policy.first_progress_timeout_seconds is not None
    )


def step_of(report: TrainerStatus | None) -> str | None:
    """The step the last report named (a metric called step, global_step, iteration or epoch), else None."""
    metrics = {m.name: m.value for m in (report.metrics or [])} if report is not None else {}
    return next((metrics[name] for name in STEP_METRICS if name in metrics), None)


def describe_report(report: TrainerStatus | None) -> str:
    """`the last at <time>, step <s> (progress <p>%)`, or `no report yet`."""
    if report is None or not report.last_updated_time:
        return "no progress report yet"
    parts = [f"the last at {report.last_updated_time}"]
    step = step_of(report)
    if step is not None:
        parts.append(f"step {step}")
    if report.progress_percentage is not None:
        parts.append(f"progress {report.progress_percentage}%")
    return ", ".join(parts)


def check(
    policy: StallPolicy | None, report: TrainerStatus | None, goodput: Goodput, now: datetime, running: bool
) -> StallVerdict:
    """Whether the TrainJob is stalled now (`running`: its state from the pods and conditions is Running)."""
    if not running or not enabled(policy) or goodput.phase not in (TRAINING, STALLED):
        return StallVerdict()
    assert policy is not None
    last_text = report.last_updated_time if report is not None else None
    last = time_or_none(last_text)
    since = time_or_none(goodput.since) or now
    if goodput.phase == STALLED:
        if (last_text or NO_REPORT) == goodput.stalled_report:
            return StallVerdict(
                stalled=True, since=since, reason=None, report=goodput.stalled_report
            )  # still stalled: state and message stay as written
        resumed_at = min(max(last or now, since), now)
        return StallVerdict(resumed=True, since=resumed_at, requeue_after=_next(policy, resumed_at, now))
    if last is not None and last >= since and policy.progress_timeout_seconds is not None:
        anchor, limit, reason = last, policy.progress_timeout_seconds, c.REASON_PROGRESS_STALLED
        setting = "progressTimeoutSeconds"
    elif (last is None or last < since) and policy.first_progress_timeout_seconds is not None:
        anchor, limit, reason = since, policy.first_progress_timeout_seconds, c.REASON_NO_FIRST_PROGRESS
        setting = "firstProgressTimeoutSeconds"
    else:
        return StallVerdict()
    deadline = anchor + timedelta(seconds=limit)
    if now < deadline:
        return StallVerdict(requeue_after=max((deadline - now).total_seconds(), MIN_REQUEUE_SECONDS))
    silent = int((now - anchor).total_seconds())
    if reason == c.REASON_PROGRESS_STALLED:
        what = f"no progress report for {silent}s ({setting} {limit}): {describe_report(report)}"
    else:
        what = (
            f"no progress report {silent}s after the pods started running ({setting} {limit}); "
            f"{describe_report(report)}"
        )
    return StallVerdict(
        stalled=True,
        new=True,
        since=deadline,
        reason=reason,
        message=what,
        report=last_text if last is not None and last >= since else NO_REPORT,
    )


def _next(policy: StallPolicy, anchor: datetime, now: datetime) -> float | None:
    if policy.progress_timeout_seconds is None:
        return None
    left = (anchor + timedelta(seconds=policy.progress_timeout_seconds) - now).total_seconds()
    return max(left, MIN_REQUEUE_SECONDS)


def action_of(policy: StallPolicy | None) -> str:
    return (policy.action if policy is not None else None) or "Report"


def restarts_left(jobset: dict[str, Any] | None) -> int:
    """What is left of the JobSet's `failurePolicy.maxRestarts` (a JobSet without one restarts never): a stall
    restart is counted against it like a failure's."""
    if jobset is None:
        return 0
    policy = (jobset.get("spec") or {}).get("failurePolicy") or {}
    budget = policy.get("maxRestarts")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return 0
    used = (jobset.get("status") or {}).get("restarts") or 0
    return max(budget - int(used), 0)

"""`meta.SetStatusCondition` semantics on TrainJob conditions, with the clock passed in."""

from datetime import datetime

from ..api.trainjob import Condition
from .errors import printable


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def find(conditions: list[Condition] | None, type_: str) -> Condition | None:
    return next((c for c in conditions or [] if c.type == type_), None)


def is_true(conditions: list[Condition] | None, type_: str) -> bool:
    found = find(conditions, type_)
    return found is not None and found.status == "True"


def set_condition(conditions: list[Condition], new: Condition, now: datetime) -> None:
    """Add or update `new` in place; lastTransitionTime moves only when the status flips. The message is stored
    `printable`: `kubectl describe` prints it to a terminal as it is."""
    existing = find(conditions, new.type)
    if existing is None:
        added = new.model_copy(update={"message": printable(new.message)})
        if added.last_transition_time is None:
            added.last_transition_time = rfc3339(now)
        conditions.append(added)
        return
    if existing.status != new.status:
        existing.status = new.status
        existing.last_transition_time = new.last_transition_time or rfc3339(now)
    existing.reason = new.reason
    existing.message = printable(new.message)
    existing.observed_generation = new.observed_generation


def is_finished(conditions: list[Condition] | None) -> bool:
    return is_true(conditions, "Complete") or is_true(conditions, "Failed")

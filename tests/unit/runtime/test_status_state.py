"""Status (`runtime/status.py`): the STATE column and the reconcile-error condition."""

import datetime as dt
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime.status import trainjob_state, with_reconcile_error

NOW = "2026-11-22T12:00:00Z"


@pytest.mark.parametrize(
    ("builder", "status", "state"),
    [
        pytest.param(TrainJobBuilder.make(), {}, "Pending", id="nothing yet"),
        pytest.param(TrainJobBuilder.make().suspend(), {}, "Suspended", id="suspended"),
        pytest.param(
            TrainJobBuilder.make(),
            {"jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]},
            "Running",
            id="active",
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "Complete", "status": "True"}]}, "Complete", id="complete"
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "Failed", "status": "True"}]}, "Failed", id="failed"
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "ReconcileFailed", "status": "True"}]}, "Error", id="error"
        ),
    ],
)
def test_state_column(builder: TrainJobBuilder, status: dict[str, Any], state: str) -> None:
    job = builder.obj()
    assert trainjob_state(job, TrainJobStatus.model_validate(status)) == state


def test_reconcile_error_condition_is_set_kept_and_removed() -> None:
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    status = with_reconcile_error(TrainJobStatus(), ("BuildFailed", "boom"), now)
    assert status.to_wire() == {
        "conditions": [
            {
                "type": "ReconcileFailed",
                "status": "True",
                "reason": "BuildFailed",
                "message": "boom",
                "lastTransitionTime": NOW,
            }
        ]
    }
    later = with_reconcile_error(
        status.model_copy(deep=True), ("BuildFailed", "boom again"), now + dt.timedelta(hours=1)
    )
    assert later.conditions is not None and later.conditions[0].last_transition_time == NOW
    assert with_reconcile_error(later, None, now).to_wire() == {}

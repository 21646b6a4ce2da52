"""Why Kueue stopped a TrainJob (runtime/kueue.py): the Workload's eviction or preemption condition in the suspended
TrainJob's status.reason and status.message, table-driven with whole-status comparisons."""

from datetime import UTC, datetime
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime import kueue
from trainjob_operator.runtime.plan import observed_status
from trainjob_operator.runtime.status import StatusOutcome

PREEMPTED = "Preempted to accommodate a workload (UID: 1a2b, JobUID: 3c4d) due to prioritization in the ClusterQueue"
NOW_TEXT = "2026-11-25T10:00:00Z"


def workload(*conditions: dict[str, Any], owner_uid: str = "uid", controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": kueue.WORKLOAD_API_VERSION,
        "kind": kueue.WORKLOAD_KIND,
        "metadata": {
            "name": "trainjob-test-job-1a2b3",
            "ownerReferences": [{"kind": "TrainJob", "name": "test-job", "uid": owner_uid, "controller": controller}],
        },
        "status": {"conditions": list(conditions)},
    }


def cond(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


EVICTED = cond("Evicted", "True", "Preempted", PREEMPTED)

WHY_STOPPED: dict[str, tuple[list[dict[str, Any]], tuple[str, str] | None]] = {
    "a preempted Workload says Preempted and Kueue's message": ([workload(EVICTED)], ("Preempted", PREEMPTED)),
    "an eviction for another cause keeps that cause": (
        [workload(cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated"))],
        ("InactiveWorkload", "The workload is deactivated"),
    ),
    "the Preempted condition alone is enough": (
        [workload(cond("Preempted", "True", "InClusterQueue", PREEMPTED))],
        ("InClusterQueue", PREEMPTED),
    ),
    "Evicted wins over Preempted": (
        [workload(cond("Preempted", "True", "InClusterQueue", "p"), EVICTED)],
        ("Preempted", PREEMPTED),
    ),
    "an eviction that is over says nothing": ([workload(cond("Evicted", "False", "Preempted", PREEMPTED))], None),
    "a Workload only waiting for quota says nothing": (
        [workload(cond("QuotaReserved", "False", "Pending", "couldn't assign flavors"))],
        None,
    ),
    "a Workload of another incarnation says nothing": ([workload(EVICTED, owner_uid="predecessor")], None),
    "an owner that is not the controller says nothing": ([workload(EVICTED, controller=False)], None),
    "no Workload": ([], None),
    "control characters are escaped and a missing reason is the condition's type": (
        [workload({"type": "Evicted", "status": "True", "message": "name\r\x1b[2J"})],
        ("Evicted", "name\\r\\x1b[2J"),
    ),
    "a long message is cut to the status bound": (
        [workload(cond("Evicted", "True", "Preempted", "x" * 5000))],
        ("Preempted", "x" * 1021 + "..."),
    ),
}


@pytest.mark.parametrize("case", WHY_STOPPED, ids=list(WHY_STOPPED))
def test_why_stopped(case: str) -> None:
    workloads, expected = WHY_STOPPED[case]
    assert kueue.why_stopped(workloads, "uid") == expected


QUEUED = TrainJobBuilder.make().set("metadata.labels", {kueue.QUEUE_NAME_LABEL: "team"})

ASKS_WHY = {
    "suspended after it ran (Kueue evicted it) asks": (QUEUED.suspend().set("status", {"state": "Running"}), True),
    "suspended while it was pending after admission asks": (
        QUEUED.suspend().set("status", {"state": "Pending"}),
        True,
    ),
    "suspended with a reason shown keeps asking": (
        QUEUED.suspend().set("status", {"state": "Suspended", "reason": "Preempted"}),
        True,
    ),
    "waiting for its first admission does not": (QUEUED.suspend().set("status", {"state": "Suspended"}), False),
    "a new queued TrainJob (no status) does not": (QUEUED.suspend(), False),
    "a running queued TrainJob does not": (QUEUED.set("status", {"state": "Running"}), False),
    "a suspended TrainJob outside Kueue does not": (
        TrainJobBuilder.make().suspend().set("status", {"state": "Running"}),
        False,
    ),
}


@pytest.mark.parametrize("case", ASKS_WHY, ids=list(ASKS_WHY))
def test_asks_why(case: str) -> None:
    job, expected = ASKS_WHY[case]
    assert kueue.asks_why(job.obj()) is expected


def test_the_selector_names_this_incarnation() -> None:
    assert kueue.workload_selector(QUEUED.obj()) == "kueue.x-k8s.io/job-uid=uid"


SUSPENDED_CONDITION = {
    "type": "Suspended",
    "status": "True",
    "reason": c.REASON_SUSPENDED,
    "message": c.MESSAGE_SUSPENDED,
    "lastTransitionTime": NOW_TEXT,
}

OBSERVED: dict[str, tuple[TrainJobBuilder, tuple[str, str] | None, dict[str, Any]]] = {
    "suspended by Kueue's preemption: the state says why": (
        QUEUED.suspend(),
        ("Preempted", PREEMPTED),
        {"conditions": [SUSPENDED_CONDITION], "state": "Suspended", "reason": "Preempted", "message": PREEMPTED},
    ),
    "suspended with no reason known: as before": (
        QUEUED.suspend(),
        None,
        {"conditions": [SUSPENDED_CONDITION], "state": "Suspended"},
    ),
    "not suspended (a stale reason is ignored)": (QUEUED, ("Preempted", PREEMPTED), {"state": "Pending"}),
}


@pytest.mark.parametrize("case", OBSERVED, ids=list(OBSERVED))
def test_observed_status_explains_a_kueue_suspension(case: str) -> None:
    builder, stopped, expected = OBSERVED[case]
    job = builder.obj()
    now = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    computed = TrainJobStatus()
    if job.spec.suspend:
        computed = TrainJobStatus.model_validate({"conditions": [SUSPENDED_CONDITION]})
    status, warnings = observed_status(job, StatusOutcome(computed), None, None, now, None, None, stopped)
    assert status.to_wire() == expected
    assert warnings == ()

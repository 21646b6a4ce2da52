"""The size of a running elastic TrainJob (runtime/elastic.py): one table keyed by sentences, from the JobSet the
torch plugin built, the trainer pods, the TrainJob's numNodes and its last `status.elastic`; the time is an
argument."""

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import PodBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.runtime import elastic

NOW = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def jobset(size: int, low: int = 1, high: int = 2, below: int = 600, admitted: int | None = None) -> dict[str, Any]:
    bounds: dict[str, Any] = {"minNodes": low, "maxNodes": high, "belowMinNodesSeconds": below}
    if admitted is not None:
        bounds["admittedNodes"] = admitted
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "jobset-uid",
            "annotations": {c.ELASTIC_ANNOTATION: json.dumps(bounds)},
        },
        "spec": {
            "replicatedJobs": [
                {"name": "dataset-initializer", "template": {"spec": {"parallelism": 1, "completions": 1}}},
                {"name": c.NODE, "template": {"spec": {"parallelism": size, "completions": size}}},
            ]
        },
    }


def running(index: int) -> dict[str, Any]:
    return PodBuilder.make(index=index, suffix=f"r{index}").running().raw()


def unplaceable(index: int) -> dict[str, Any]:
    return PodBuilder.make(index=index, suffix=f"u{index}").unschedulable("0/2 nodes are available").raw()


def pending(index: int) -> dict[str, Any]:
    return PodBuilder.make(index=index, suffix=f"p{index}").raw()


def evicted(index: int) -> dict[str, Any]:
    """A pod on a lost node: still Running to the API, being deleted (its taint's toleration ran out)."""
    pod = running(index)
    pod["metadata"]["name"] += "-evicted"
    pod["metadata"]["deletionTimestamp"] = at(5)
    return pod


def resize(size: int) -> list[dict[str, Any]]:
    return [
        {"op": "test", "path": "/metadata/uid", "value": "jobset-uid"},
        {"op": "test", "path": "/spec/replicatedJobs/1/name", "value": c.NODE},
        {"op": "replace", "path": "/spec/replicatedJobs/1/template/spec/parallelism", "value": size},
        {"op": "replace", "path": "/spec/replicatedJobs/1/template/spec/completions", "value": size},
    ]


@dataclass(frozen=True)
class Case:
    jobset: dict[str, Any]
    pods: list[dict[str, Any]]
    num_nodes: int | None = 2
    previous: dict[str, Any] | None = None
    patch: list[dict[str, Any]] | None = None
    reason: str | None = None
    current: int = 0
    desired: int = 0
    failed: str | None = None
    requeue: float | None = None
    status: dict[str, Any] = field(default_factory=dict)
    """More fields `status.elastic` must have."""
    moved: tuple[int, int] | None = None
    """The rendezvous Service moves (from, to)."""


SEEN = {"jobsetUid": "jobset-uid", "currentNodes": 2, "desiredNodes": 2, "minNodes": 1, "maxNodes": 2}

CASES = [
    pytest.param(Case(jobset(2), [running(0), running(1)], current=2, desired=2), id="at full size nothing changes"),
    pytest.param(
        Case(
            jobset(2),
            [running(0), unplaceable(1)],
            previous=SEEN,
            patch=resize(1),
            reason=c.EVENT_ELASTIC_SCALE_DOWN,
            current=1,
            desired=1,
            status={"resizes": 1, "lastShrinkTime": at(0), "lastResizeTime": at(0)},
        ),
        id="a lost pod that cannot be placed shrinks the job to the pods that run",
    ),
    pytest.param(
        Case(
            jobset(2),
            [evicted(0), unplaceable(0), running(1)],
            previous=SEEN,
            current=1,
            desired=2,
            moved=(0, 1),
            status={"rendezvousIndex": 1, "resizes": 0},
        ),
        id="a lost index 0 keeps the size (a shrink would drop the survivor, index 1) and the rendezvous moves to 1",
    ),
    pytest.param(
        Case(
            jobset(3, high=3),
            [running(0), unplaceable(1), running(2)],
            num_nodes=3,
            previous={**SEEN, "currentNodes": 3, "desiredNodes": 3, "maxNodes": 3},
            current=2,
            desired=3,
        ),
        id="a lost middle index keeps the size too: its pod joins when it can be placed",
    ),
    pytest.param(
        Case(
            jobset(2),
            [evicted(0), unplaceable(0), running(1)],
            previous={**SEEN, "rendezvousIndex": 1},
            current=1,
            desired=2,
            status={"rendezvousIndex": 1},
        ),
        id="a moved rendezvous stays where it is",
    ),
    pytest.param(
        Case(
            jobset(2),
            [running(0), running(1)],
            previous={**SEEN, "rendezvousIndex": 1},
            current=2,
            desired=2,
            status={"rendezvousIndex": 1},
        ),
        id="and stays there when index 0 is back: a move restarts every agent",
    ),
    pytest.param(
        Case(jobset(2), [pending(0), running(1)], previous=SEEN, current=1, desired=2, status={"rendezvousIndex": 0}),
        id="index 0 not running yet at the start moves nothing: nothing ran there",
    ),
    pytest.param(
        Case(
            jobset(3, high=3),
            [evicted(0), running(1), running(2)],
            num_nodes=3,
            previous={**SEEN, "currentNodes": 3, "desiredNodes": 3, "maxNodes": 3},
            current=2,
            desired=3,
            moved=(0, 1),
        ),
        id="the rendezvous moves to the lowest running index",
    ),
    pytest.param(
        Case(
            jobset(2),
            [PodBuilder.make(index=1, suffix="s1").succeeded().raw(), running(0)],
            previous={**SEEN, "rendezvousIndex": 1},
            current=1,
            desired=2,
            status={"rendezvousIndex": 1},
        ),
        id="a rendezvous pod that succeeded is the training ending: nothing moves",
    ),
    pytest.param(
        Case(
            jobset(1, low=2),
            [PodBuilder.make(index=0, suffix="s0").succeeded().raw()],
            num_nodes=2,
            previous={**SEEN, "desiredNodes": 1},
            current=0,
            desired=1,
            status={"belowMinNodesSince": None, "resizes": 0},
        ),
        id="pods completing are not below minNodes and grow nothing",
    ),
    pytest.param(
        Case(
            jobset(2),
            [PodBuilder.make(index=1, suffix="f1").failed().raw(), running(0)],
            previous={**SEEN, "rendezvousIndex": 1},
            current=1,
            desired=2,
            moved=(1, 0),
        ),
        id="one that failed is gone: the rendezvous moves",
    ),
    pytest.param(
        Case(
            jobset(2),
            [evicted(1), running(0)],
            previous={**SEEN, "rendezvousIndex": 1, "scaling": "Unavailable"},
            current=1,
            desired=2,
            moved=(1, 0),
            status={"scaling": "Unavailable"},
        ),
        id="it moves without the ElasticJobSet gate too (the rendezvous is torch's, not JobSet's)",
    ),
    pytest.param(
        Case(jobset(2), [running(0), pending(1)], previous=SEEN, current=1, desired=2),
        id="a pod not judged by the scheduler yet is waited for",
    ),
    pytest.param(
        Case(
            jobset(3, low=2, high=3),
            [running(0), unplaceable(1), unplaceable(2)],
            num_nodes=3,
            patch=resize(2),
            reason=c.EVENT_ELASTIC_SCALE_DOWN,
            current=1,
            desired=2,
        ),
        id="a shrink never goes below minNodes",
    ),
    pytest.param(
        Case(
            jobset(1),
            [running(0)],
            previous={**SEEN, "currentNodes": 1, "desiredNodes": 1, "lastShrinkTime": at(10), "lastResizeTime": at(10)},
            current=1,
            desired=1,
            requeue=20.0,
        ),
        id="growing back waits a while after a shrink for want of capacity",
    ),
    pytest.param(
        Case(
            jobset(1),
            [running(0)],
            previous={**SEEN, "currentNodes": 1, "desiredNodes": 1, "lastShrinkTime": at(40), "lastResizeTime": at(40)},
            patch=resize(2),
            reason=c.EVENT_ELASTIC_SCALE_UP,
            current=1,
            desired=2,
        ),
        id="then it grows back toward numNodes",
    ),
    pytest.param(
        Case(
            jobset(1, high=4),
            [running(0)],
            num_nodes=3,
            patch=resize(3),
            reason=c.EVENT_ELASTIC_SCALE_UP,
            current=1,
            desired=3,
        ),
        id="a user's larger numNodes grows the job at once",
    ),
    pytest.param(
        Case(
            jobset(3, high=4),
            [running(0), running(1), running(2)],
            num_nodes=1,
            patch=resize(1),
            reason=c.EVENT_ELASTIC_SCALE_DOWN,
            current=3,
            desired=1,
        ),
        id="a user's smaller numNodes shrinks the job",
    ),
    pytest.param(
        Case(
            jobset(1, high=4),
            [running(0)],
            num_nodes=9,
            patch=resize(4),
            reason=c.EVENT_ELASTIC_SCALE_UP,
            current=1,
            desired=4,
        ),
        id="numNodes above maxNodes grows only to maxNodes",
    ),
    pytest.param(
        Case(
            jobset(1, high=4, admitted=2),
            [running(0)],
            num_nodes=4,
            patch=resize(2),
            reason=c.EVENT_ELASTIC_SCALE_UP,
            current=1,
            desired=2,
        ),
        id="with Kueue it never grows past what Kueue admitted",
    ),
    pytest.param(
        Case(jobset(1), [pending(0)], num_nodes=2, current=0, desired=1),
        id="nothing grows while a pod of the current size is not running",
    ),
    pytest.param(
        Case(
            jobset(2, low=2),
            [running(0), unplaceable(1)],
            previous=SEEN,
            current=1,
            desired=2,
            requeue=600.0,
            status={"belowMinNodesSince": at(0)},
        ),
        id="below minNodes after having reached it starts the clock",
    ),
    pytest.param(
        Case(
            jobset(2, low=2, below=60),
            [running(0), unplaceable(1)],
            previous={**SEEN, "currentNodes": 1, "belowMinNodesSince": at(61)},
            current=1,
            desired=2,
            failed=c.REASON_BELOW_MIN_NODES,
        ),
        id="below minNodes longer than belowMinNodesSeconds fails the TrainJob",
    ),
    pytest.param(
        Case(jobset(2, low=2), [running(0), pending(1)], current=1, desired=2),
        id="the start-up below minNodes is not counted",
    ),
    pytest.param(
        Case(
            jobset(2),
            [running(0), unplaceable(1)],
            previous={**SEEN, "scaling": "Unavailable"},
            current=1,
            desired=2,
            status={"scaling": "Unavailable"},
        ),
        id="scaling unavailable for this JobSet resizes nothing",
    ),
    pytest.param(
        Case(
            jobset(2),
            [running(0), unplaceable(1)],
            previous={**SEEN, "desiredNodes": 1, "lastResizeTime": at(2)},
            current=2,
            desired=1,
            requeue=1.0,
        ),
        id="a resize not in the cache yet is not decided again",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_the_elastic_decision(case: Case) -> None:
    job = TrainJobBuilder.make()
    if case.num_nodes is not None:
        job = job.trainer(numNodes=case.num_nodes)
    if case.previous is not None:
        job = job.set("status", {"elastic": case.previous})
    decision = elastic.decide(job.obj(), case.jobset, case.pods, NOW)
    assert decision is not None
    assert (decision.resize.patch if decision.resize else None) == case.patch
    assert (decision.resize.reason if decision.resize else None) == case.reason
    assert (decision.status.current_nodes, decision.status.desired_nodes) == (case.current, case.desired)
    assert (decision.failed[0] if decision.failed else None) == case.failed
    assert decision.requeue_after == case.requeue
    assert decision.moved == case.moved
    wire = decision.status.to_wire()
    assert {k: wire.get(k) for k in case.status} == case.status


def test_a_jobset_without_the_annotation_or_with_a_broken_one_is_not_elastic() -> None:
    job = TrainJobBuilder.make().obj()
    plain = jobset(2)
    del plain["metadata"]["annotations"]
    assert elastic.decide(job, plain, [], NOW) is None
    for broken in ("{", '{"minNodes": 3, "maxNodes": 2}', '{"minNodes": "a"}', "[]", "x" * 2000):
        odd = jobset(2)
        odd["metadata"]["annotations"][c.ELASTIC_ANNOTATION] = broken
        assert elastic.decide(job, odd, [], NOW) is None, broken


def test_unknown_pods_resize_nothing() -> None:
    assert elastic.decide(TrainJobBuilder.make().obj(), jobset(2), None, NOW) is None


def test_a_refusal_keeps_the_size_and_says_why_once() -> None:
    job = TrainJobBuilder.make().trainer(numNodes=2).set("status", {"elastic": SEEN})
    decision = elastic.decide(job.obj(), jobset(2), [running(0), unplaceable(1)], NOW)
    assert decision is not None and decision.resize is not None
    refused = elastic.refused(job.obj(), decision, "spec.replicatedJobs: field is immutable\x1b[31m")
    assert refused.resize is None
    assert (refused.status.scaling, refused.status.desired_nodes, refused.status.resizes) == ("Unavailable", 2, 0)
    assert refused.status.message is not None and "ElasticJobSet" in refused.status.message
    assert "\x1b" not in refused.status.message


def test_a_new_jobset_starts_its_counts_afresh() -> None:
    job = (
        TrainJobBuilder.make()
        .trainer(numNodes=2)
        .set("status", {"elastic": {**SEEN, "jobsetUid": "old", "resizes": 4, "scaling": "Unavailable"}})
    )
    decision = elastic.decide(job.obj(), jobset(2), [running(0), running(1)], NOW)
    assert decision is not None
    assert (decision.status.resizes, decision.status.scaling, decision.status.jobset_uid) == (
        0,
        "Enabled",
        "jobset-uid",
    )


def test_failing_sets_the_failed_condition_with_the_reason() -> None:
    job = (
        TrainJobBuilder.make()
        .trainer(numNodes=2)
        .set("status", {"elastic": {**SEEN, "currentNodes": 1, "belowMinNodesSince": at(700)}})
    )
    decision = elastic.decide(job.obj(), jobset(2, low=2), [running(0), unplaceable(1)], NOW)
    assert decision is not None and decision.failed is not None
    current = job.obj().status
    assert current is not None
    status = elastic.with_elastic(current, decision, NOW)
    failed = next(cond for cond in status.conditions or [] if cond.type == c.CONDITION_FAILED)
    assert (failed.status, failed.reason) == ("True", c.REASON_BELOW_MIN_NODES)
    assert "fewer than elasticPolicy minNodes (2)" in (failed.message or "")

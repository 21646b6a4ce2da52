"""A watch event of a child whose very version the operator cached from its own write's answer queues nothing: the
pass that wrote it computed the status from it (issue 37: a second pass per new TrainJob in a burst). Anything
newer, a deletion, another incarnation or the initial listing still queues the TrainJob."""

import asyncio
from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.manager import Manager
from trainjob_operator.controller.store import ObjectCache

RT = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})
KEY = ("default", "test-job")


def built() -> tuple[Manager, dict[str, Any]]:
    """A manager whose pass built the TrainJob's JobSet (its answer cached), and that JobSet as the API holds it."""
    client = FakeClient()
    manager = Manager(OperatorConfig(), client)
    manager.status_ca = "a CA"
    manager.store.runtimes.put(RT.raw())
    job = TrainJobBuilder.make().set("metadata.creationTimestamp", "2026-11-22T11:00:00Z")
    client.put(job.raw())
    manager.on_trainjob({"type": None, "object": job.raw()})
    manager.queue = type(manager.queue)()  # the listing's entry dropped: what follows is what queues
    asyncio.run(manager.reconciler.reconcile(KEY))
    jobset = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default")
    assert jobset is not None
    return manager, jobset


def queued(manager: Manager, event_type: str | None, obj: dict[str, Any]) -> bool:
    kind = next(k for k in manager.watched if k.kind == c.JOBSET_KIND)
    before = len(manager.queue)
    manager.on_child(kind, {"type": event_type, "object": obj})
    return len(manager.queue) > before


def with_meta(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **meta}}


EVENTS = {
    "the watch event of the operator's own write queues nothing": ("ADDED", {}, False),
    "a newer version queues the TrainJob": ("MODIFIED", {"resourceVersion": "99"}, True),
    "a deletion queues the TrainJob": ("DELETED", {}, True),
    "the initial listing queues the TrainJob": (None, {}, True),
}


@pytest.mark.parametrize("case", EVENTS.values(), ids=EVENTS.keys())
def test_a_childs_event_queues_its_trainjob_unless_it_is_the_cached_answer_to_the_operators_write(
    case: tuple[str | None, dict[str, Any], bool],
) -> None:
    event_type, meta, expected = case
    manager, jobset = built()
    assert queued(manager, event_type, with_meta(jobset, **meta)) is expected


def test_a_cache_holds_only_the_version_it_has() -> None:
    cache = ObjectCache()
    obj = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "7"}}
    assert not cache.holds(obj)
    cache.put(obj)
    assert cache.holds(obj)
    assert not cache.holds(with_meta(obj, resourceVersion="8"))
    assert not cache.holds(with_meta(obj, name="b"))
    assert not cache.holds(with_meta(obj, resourceVersion=""))

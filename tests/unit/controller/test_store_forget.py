"""What the controller remembers of a TrainJob is one record (`store.KnownJob`, keyed by uid in `Known.jobs`), so
forgetting it is one statement: after a TrainJob was built, reported on and deleted (with its JobSet and pods), no
trace of its uid is left anywhere in the manager's memory, and create/delete cycles leave the memory as it was."""

import asyncio
import dataclasses

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.manager import Manager
from trainjob_operator.controller.store import KnownJob, PodCache
from trainjob_operator.runtime.observed import ObjectRef

RT = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})
KEY = ("default", "test-job")


def traces(root: object, needle: str) -> list[str]:
    """Where `needle` (a uid) is found in the object graph under `root`: dict keys and values, collections, str and
    bytes (the caches keep compact JSON), and the fields of the project's own objects (dataclasses, slots)."""
    found: list[str] = []
    seen: set[int] = set()
    raw = needle.encode()

    def walk(obj: object, path: str) -> None:
        if isinstance(obj, str):
            if needle in obj:
                found.append(path)
            return
        if isinstance(obj, bytes):
            if raw in obj:
                found.append(path)
            return
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, dict):
            for key, value in obj.items():
                walk(key, f"{path}[key {key!r}]")
                walk(value, f"{path}[{key!r}]")
        elif isinstance(obj, list | tuple | set | frozenset):
            for i, item in enumerate(obj):
                walk(item, f"{path}[{i}]")
        elif type(obj).__module__.startswith("trainjob_operator."):
            names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
            names += [n for n in getattr(obj, "__dict__", {}) if n not in names]
            for name in names:
                walk(getattr(obj, name, None), f"{path}.{name}")

    walk(root, "")
    return found


def memory(manager: Manager) -> dict[str, object]:
    """The manager's state of the TrainJobs it watches (not its client, plugins, settings or metrics)."""
    return {
        "store": manager.store,
        "gauge": manager.gauge,
        "queue": vars(manager.queue),
        "listing": manager.listing,
        "sync": manager.sync,
        "runtimes": manager.runtimes.sources,
    }


async def one_trainjob_lived_and_went(manager: Manager, client: FakeClient, uid: str) -> KnownJob:
    """A TrainJob of `uid` is listed and built, its JobSet and a crash-looping pod arrive and it is reported on;
    then the TrainJob, its JobSet and its pod are deleted (the garbage collector's part included). Returns a copy of
    what the manager remembered of it before."""
    job = TrainJobBuilder.make(uid=uid).set("metadata.creationTimestamp", "2026-11-22T11:00:00Z")
    client.put(job.raw())
    manager.on_trainjob({"type": None, "object": job.raw()})
    await manager.reconciler.reconcile(KEY)
    built = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default")
    assert built is not None
    version = str(
        int(built["metadata"]["resourceVersion"]) + 1
    )  # a later version: the one the pass cached queues nothing
    jobset = {**built, "metadata": {**built["metadata"], "uid": f"js-{uid}", "resourceVersion": version}, "status": {}}
    jobset_kind = next(k for k in manager.watched if k.kind == c.JOBSET_KIND)
    manager.on_child(jobset_kind, {"type": "MODIFIED", "object": jobset})
    pod = PodBuilder.make(jobset_uid=f"js-{uid}").crash_looping(restarts=5).raw()
    manager.on_pod({"type": "ADDED", "object": pod})
    await manager.reconciler.reconcile(KEY)
    known = manager.store.known
    record = known.get(uid)
    assert record is not None
    # What these passes do not reach, set the way the reconciler sets it:
    known.shared_source(uid, "a snapshot text read back", RT.source())
    known.add(uid, ObjectRef("v1", "Secret", "test-job-ssh"))
    record.started = True
    record.last_error = "a failure"
    remembered = dataclasses.replace(record, existing=set(record.existing), warned=set(record.warned))
    client.objects.clear()
    manager.on_pod({"type": "DELETED", "object": pod})
    manager.on_child(jobset_kind, {"type": "DELETED", "object": jobset})
    manager.on_trainjob({"type": "DELETED", "object": job.raw()})
    return remembered


def new_manager() -> tuple[Manager, FakeClient]:
    client = FakeClient()
    manager = Manager(OperatorConfig(), client)
    manager.status_ca = "a CA"
    manager.store.pods = PodCache()
    manager.store.runtimes.put(RT.raw())
    return manager, client


def test_a_trainjob_forgotten_leaves_no_trace_of_its_uid_anywhere_in_the_managers_memory() -> None:
    uid = "5f0c9e1a-forgotten"
    manager, client = new_manager()
    remembered = asyncio.run(one_trainjob_lived_and_went(manager, client, uid))
    empty = KnownJob()
    unset = [name for name in KnownJob.__slots__ if getattr(remembered, name) == getattr(empty, name)]
    assert unset == [], "the scenario remembers something in every field of the record"
    assert traces(memory(manager), uid) == []
    assert manager.store.known.jobs == {} and manager.store.known.shared_sources == {}
    manager.store.known.jobs[uid] = remembered  # the control: the walk sees what is remembered
    assert traces(memory(manager), uid) == [f"['store'].known.jobs[key '{uid}']"]
    job = TrainJobBuilder.make(uid=uid).raw()
    manager.store.trainjobs.put(job)
    assert f"['store'].trainjobs._data[{KEY!r}]" in traces(memory(manager), uid)


def test_create_and_delete_cycles_leave_the_memory_as_it_was() -> None:
    manager, client = new_manager()

    async def cycles() -> None:
        for i in range(20):
            await one_trainjob_lived_and_went(manager, client, f"uid-{i}")

    asyncio.run(cycles())
    store = manager.store
    assert (store.known.jobs, store.known.shared_sources, store.known.source_users) == ({}, {}, {})
    assert (len(store.trainjobs), len(store.jobsets), len(store.pods or ())) == (0, 0, 0)
    assert manager.gauge.states == {} and manager.listing == {}

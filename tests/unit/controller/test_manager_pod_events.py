"""Pod events queue their TrainJob at once after a quiet window, else once at the window's end (issue 37): a huge
TrainJob's thousands of pod events are a pass or two per window, not one each. The window is a second per 1,000 of
the JobSet's cached pods, at least one. The clock is fixed; the queue's timer is read, never waited for."""

import asyncio
import time

import pytest

from builders import PodBuilder
from fake_client import FakeClient
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.manager import Manager
from trainjob_operator.controller.store import PodCache

KEY = ("default", "test-job")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fixed = Clock()
    monkeypatch.setattr(time, "monotonic", fixed)  # the window clock; asyncio reads it too (nothing here waits)
    return fixed


def manager_with_pods(count: int) -> Manager:
    manager = Manager(OperatorConfig(), FakeClient())
    manager.store.pods = PodCache()
    for index in range(count):
        manager.store.pods.put(PodBuilder.make(index=index).raw())
    return manager


def pod_event(manager: Manager, index: int = 0) -> None:
    manager.on_pod({"type": "MODIFIED", "object": PodBuilder.make(index=index).running().raw()})


def timer_in(manager: Manager) -> float | None:
    """Seconds until the queue's timer for the TrainJob fires (None: no timer)."""
    timer = manager.queue._timers.get(KEY)
    return None if timer is None else timer.when() - asyncio.get_running_loop().time()


WINDOWS = {
    "a few pods: a window of one second": (2, 1.0),
    "3,000 pods: three seconds": (3000, 3.0),
}


@pytest.mark.parametrize("case", WINDOWS.values(), ids=WINDOWS.keys())
def test_the_first_pod_event_queues_at_once_the_next_ones_once_at_the_windows_end(
    clock: Clock, case: tuple[int, float]
) -> None:
    pods, window = case

    async def scenario() -> None:
        manager = manager_with_pods(pods)
        pod_event(manager)
        assert len(manager.queue) == 1 and timer_in(manager) is None, "queued at once"
        manager.queue = type(manager.queue)()
        clock.now += 0.25
        for index in range(pods):
            pod_event(manager, index)
        assert len(manager.queue) == 0, "not queued again within the window"
        due = timer_in(manager)
        assert due is not None and due == pytest.approx(window - 0.25, abs=0.05), "once, at the window's end"

    asyncio.run(scenario())


def test_after_a_quiet_window_a_pod_event_queues_at_once_again(clock: Clock) -> None:
    async def scenario() -> None:
        manager = manager_with_pods(2)
        pod_event(manager)
        manager.queue = type(manager.queue)()
        clock.now += 1.5
        pod_event(manager, 1)
        assert len(manager.queue) == 1 and timer_in(manager) is None

    asyncio.run(scenario())


def test_without_an_event_loop_a_pod_event_queues_at_once(clock: Clock) -> None:
    manager = manager_with_pods(2)
    pod_event(manager)
    pod_event(manager, 1)
    assert len(manager.queue) == 1


def test_a_deleted_trainjob_leaves_no_window_behind(clock: Clock) -> None:
    manager = manager_with_pods(2)
    pod_event(manager)
    assert KEY in manager.pod_passes
    manager.on_trainjob(
        {"type": "DELETED", "object": {"metadata": {"namespace": "default", "name": "test-job", "uid": "uid"}}}
    )
    assert KEY not in manager.pod_passes


class Stamp(float):
    """A clock reading that counts the subtractions of two readings (a kept time read back against the clock)."""

    reads = 0

    def __sub__(self, other: float) -> float:
        Stamp.reads += 1
        return float(self) - float(other)


def test_many_trainjobs_pod_events_inspect_a_bounded_number_of_kept_entries_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """5,000 TrainJobs' first pod events within a minute (a restart's initial pods): each event reads back at most
    two kept times, not every entry once more than 4,096 are kept."""
    manager = manager_with_pods(0)
    monkeypatch.setattr(time, "monotonic", lambda: Stamp(1000.0))
    Stamp.reads = 0
    for index in range(5000):
        manager.queue_for_pods(("default", f"job-{index}"))
    assert len(manager.pod_passes) == 5000, "every entry is younger than a minute: all kept"
    assert Stamp.reads <= 2 * 5000


def test_past_4096_kept_entries_the_ones_older_than_a_minute_go_oldest_first(clock: Clock) -> None:
    manager = manager_with_pods(0)
    for index in range(4096):
        manager.queue_for_pods(("default", f"old-{index}"))
        clock.now += 0.001
    clock.now += 30
    manager.queue_for_pods(("default", "old-0"))  # queued again since: no longer among the oldest
    clock.now += 40
    for index in range(3):
        manager.queue_for_pods(("default", f"new-{index}"))
    assert len(manager.pod_passes) == 4097, "4,096 kept, and the one just queued"
    assert ("default", "old-0") in manager.pod_passes
    assert ("default", "old-1") not in manager.pod_passes and ("default", "old-2") not in manager.pod_passes
    assert ("default", "old-3") in manager.pod_passes

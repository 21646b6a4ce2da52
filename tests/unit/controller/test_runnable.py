"""The start/stop protocol of the operator's parts (`controller/runnable.py`): started in order, stopped in reverse,
each stop bounded in time, a failing stop never skipping the others. Fake runnables write to one journal."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from trainjob_operator.controller.runnable import Loop, Runnables, Step

STOP_TIMEOUT = 0.2
"""Short: the hanging fake is cut at it (an upper bound of the test's run time, never waited for otherwise)."""


@dataclass
class Fake:
    """A runnable whose start or stop can fail or hang."""

    name: str
    journal: list[str]
    start_fails: bool = False
    stop_fails: bool = False
    stop_hangs: bool = False

    async def start(self) -> None:
        if self.start_fails:
            self.journal.append(f"start {self.name} failed")
            raise RuntimeError(f"{self.name} cannot start")
        self.journal.append(f"start {self.name}")

    async def stop(self) -> None:
        if self.stop_hangs:
            self.journal.append(f"stop {self.name} hangs")
            await asyncio.Event().wait()
        if self.stop_fails:
            self.journal.append(f"stop {self.name} failed")
            raise RuntimeError(f"{self.name} cannot stop")
        self.journal.append(f"stop {self.name}")


@dataclass(frozen=True)
class Case:
    runnables: tuple[dict[str, Any], ...]
    body_fails: bool = False
    journal: tuple[str, ...] = ()
    raised: str | None = None
    stop_failures: tuple[str, ...] = ()


CASES = {
    "all start in order and stop in reverse order": Case(
        runnables=({"name": "a"}, {"name": "b"}, {"name": "c"}),
        journal=("start a", "start b", "start c", "body", "stop c", "stop b", "stop a"),
    ),
    "a start that fails stops those already started, in reverse, and its error goes on": Case(
        runnables=({"name": "a"}, {"name": "b"}, {"name": "c", "start_fails": True}, {"name": "d"}),
        journal=("start a", "start b", "start c failed", "stop b", "stop a"),
        raised="c cannot start",
    ),
    "a stop that fails does not skip the stops after it": Case(
        runnables=({"name": "a"}, {"name": "b", "stop_fails": True}, {"name": "c"}),
        journal=("start a", "start b", "start c", "body", "stop c", "stop b failed", "stop a"),
        stop_failures=("b: b cannot stop",),
    ),
    "a stop that hangs is cut at the timeout and the others still stop": Case(
        runnables=({"name": "a"}, {"name": "b", "stop_hangs": True}, {"name": "c"}),
        journal=("start a", "start b", "start c", "body", "stop c", "stop b hangs", "stop a"),
        stop_failures=(f"b: timed out after {STOP_TIMEOUT:g}s",),
    ),
    "a body that fails still stops everything, and its error goes on": Case(
        runnables=({"name": "a"}, {"name": "b"}),
        body_fails=True,
        journal=("start a", "start b", "body failed", "stop b", "stop a"),
        raised="the watches ended",
    ),
    "nothing to run: the body alone": Case(runnables=(), journal=("body",)),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_runnables_start_in_order_and_stop_in_reverse_whatever_fails(case: Case) -> None:
    journal: list[str] = []
    runner = Runnables([Fake(journal=journal, **spec) for spec in case.runnables], stop_timeout=STOP_TIMEOUT)

    async def scenario() -> str | None:
        try:
            async with runner:
                if case.body_fails:
                    journal.append("body failed")
                    raise RuntimeError("the watches ended")
                journal.append("body")
        except RuntimeError as err:
            return str(err)
        return None

    raised = asyncio.run(scenario())
    assert (tuple(journal), raised, tuple(runner.stop_failures)) == (case.journal, case.raised, case.stop_failures)
    assert runner.started == []


@dataclass
class Supervisor:
    ended: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, name: str, task: "asyncio.Task[Any]") -> None:
        task.add_done_callback(lambda t: self.ended.append((name, "cancelled" if t.cancelled() else "ended")))


def test_a_loop_runs_in_the_background_is_supervised_and_stops_with_its_follow_up() -> None:
    journal: list[str] = []
    supervisor = Supervisor()

    async def forever() -> None:
        journal.append("loop running")
        await asyncio.Event().wait()

    async def release() -> None:
        journal.append("released")

    async def scenario() -> None:
        loop = Loop("leader election", forever, supervisor, then=release)
        async with Runnables([loop, Step("after", on_stop=lambda: asyncio.sleep(0))]):
            await asyncio.sleep(0)  # one turn: the loop's task runs up to its wait
            journal.append("body")

    asyncio.run(scenario())
    assert (journal, supervisor.ended) == (["loop running", "body", "released"], [("leader election", "cancelled")])


def test_a_loop_that_ends_by_itself_is_told_to_its_supervisor() -> None:
    supervisor = Supervisor()

    async def crashes() -> None:
        raise RuntimeError("lost the API server")

    async def scenario() -> None:
        loop = Loop("work queue", crashes, supervisor)
        await loop.start()
        assert loop.task is not None
        await asyncio.wait([loop.task])
        await loop.stop()

    asyncio.run(scenario())
    assert supervisor.ended == [("work queue", "ended")]

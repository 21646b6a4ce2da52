"""The one start/stop protocol of the operator's components, as controller-runtime's Manager runs its runnables.

Every part of `trainjob-operator run` that lives as long as the process (the health server, the start-up checks, the
webhook and status servers, the background loops, the Lease) is a `Runnable`: `start()` returns once it is started
(a loop's start spawns its task), `stop()` undoes it. `Runnables` starts a list in order and stops what it started in
reverse order, each stop bounded by `STOP_TIMEOUT`; a stop that fails or hangs is logged and the others still run, so
a shutdown never leaves a server bound or a Lease held because something before it broke.
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from .. import logs

log = logs.get("trainjob_operator.manager")

STOP_TIMEOUT = 15.0
"""Seconds one component may take to stop (a Lease release is one request: the client's 30 s would outlast the
kubelet's 30 s grace period for the whole pod)."""


class Runnable(Protocol):
    """A component of the running operator."""

    name: str

    async def start(self) -> None:
        """Start, and return once started (a long-running loop is a task it spawns). Raising stops the start-up:
        what started before is stopped and the error goes on."""

    async def stop(self) -> None:
        """Stop; called once, only after `start` returned."""


async def _nothing() -> None:
    return None


@dataclass
class Step:
    """A runnable made of two coroutine functions (either may be left out)."""

    name: str
    on_start: Callable[[], Awaitable[None]] = _nothing
    on_stop: Callable[[], Awaitable[None]] = _nothing

    async def start(self) -> None:
        await self.on_start()

    async def stop(self) -> None:
        await self.on_stop()


@dataclass
class Loop:
    """A background loop: `start` spawns its task (handed to `supervise`, which decides what its end means), `stop`
    cancels it, waits for it, then runs `then`."""

    name: str
    body: Callable[[], Coroutine[Any, Any, Any]]
    supervise: Callable[[str, "asyncio.Task[Any]"], None] | None = None
    then: Callable[[], Awaitable[None]] = _nothing
    """Run at stop once the loop has ended (the Lease's release after the election loop)."""
    task: "asyncio.Task[Any] | None" = field(default=None, init=False)

    async def start(self) -> None:
        self.task = asyncio.create_task(self.body(), name=self.name)
        if self.supervise is not None:
            self.supervise(self.name, self.task)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.then()


@dataclass
class Runnables:
    """`async with Runnables([...])`: each started in order; on the way out (or when a start fails) those started are
    stopped in reverse order, each within `stop_timeout`, every one of them whatever the others did."""

    items: Sequence[Runnable]
    stop_timeout: float = STOP_TIMEOUT
    started: list[Runnable] = field(default_factory=list, init=False)
    stop_failures: list[str] = field(default_factory=list, init=False)
    """`name: error` of each stop that failed or timed out (also logged)."""

    async def __aenter__(self) -> "Runnables":
        try:
            for item in self.items:
                await item.start()
                self.started.append(item)
        except BaseException:
            await self.stop_all()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop_all()

    async def stop_all(self) -> None:
        while self.started:
            item = self.started.pop()
            try:
                await asyncio.wait_for(item.stop(), self.stop_timeout)
            except Exception as err:  # TimeoutError included: the next ones still stop
                problem = f"timed out after {self.stop_timeout:g}s" if isinstance(err, TimeoutError) else str(err)
                self.stop_failures.append(f"{item.name}: {problem}")
                log.error("component did not stop cleanly", component=item.name, **logs.error_fields(err))


__all__ = ["STOP_TIMEOUT", "Loop", "Runnable", "Runnables", "Step"]

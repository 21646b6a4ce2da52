"""The TrainJobs-by-state gauge, and handing freed memory back to the system once the operator goes quiet."""

import asyncio
import contextlib
import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field

from ..metrics import Metrics
from .store import Key


def malloc_trim() -> Callable[[], None]:
    """glibc's `malloc_trim(0)`: freed heap goes back to the system (glibc keeps it otherwise); a no-op elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return lambda: libc.malloc_trim(0) and None
    except (OSError, AttributeError):  # not glibc: nothing to do
        return lambda: None


@dataclass
class StateGauge:
    """The state of each TrainJob as events arrive, and the counts by state kept with it (no periodic walk over
    thousands of TrainJobs). `run` publishes the counts."""

    metrics: Metrics
    interval: float = 10
    """Seconds between two publications at most (a burst of changes is published once per interval)."""
    trim_every: float = 60
    """Seconds between two heap trims at least (trimming walks the heap)."""
    states: dict[Key, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def track(self, key: Key, state: str) -> None:
        """The TrainJob at `key` is now in `state`."""
        self._count(self.states.get(key), state)
        self.states[key] = state

    def drop(self, key: Key) -> None:
        """The TrainJob at `key` is gone (its incarnation's: a successor's state stays counted)."""
        self._count(self.states.pop(key, None), None)

    def _count(self, old: str | None, new: str | None) -> None:
        if old == new:
            return
        if old is not None:
            self.counts[old] = self.counts.get(old, 1) - 1
        if new is not None:
            self.counts[new] = self.counts.get(new, 0) + 1
        self.changed.set()

    async def run(self) -> None:
        """The gauge, at most every `interval` seconds and only when a count changed; once changes stop for an
        interval, memory freed meanwhile goes back to the system (the initial listing of thousands of objects is
        parsed at once), at most every `trim_every` seconds. Nothing runs while nothing changes: an idle operator
        uses no CPU."""
        trim = malloc_trim()
        last_trim = -self.trim_every
        loop = asyncio.get_running_loop()
        while True:
            await self.changed.wait()
            self.changed.clear()
            self.metrics.record_states(self.counts)
            await asyncio.sleep(self.interval)
            while not self.changed.is_set():  # quiet: trim once, when the last trim is old enough
                wait = last_trim + self.trim_every - loop.time()
                if wait <= 0:
                    trim()
                    last_trim = loop.time()
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), wait)


__all__ = ["StateGauge", "malloc_trim"]

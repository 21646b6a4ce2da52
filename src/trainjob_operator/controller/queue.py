"""A work queue like client-go's: one entry per key, never two workers on one key, delayed requeues, backoff."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")


class WorkQueue(Generic[K]):
    def __init__(self, base_delay: float = 0.05, max_delay: float = 60.0) -> None:
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}
        self.base_delay, self.max_delay = base_delay, max_delay

    def add(self, key: K) -> None:
        if key in self._active:
            self._dirty.add(key)  # re-run once the current pass finishes
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        existing = self._timers.get(key)
        when = asyncio.get_running_loop().time() + delay
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._timers[key] = asyncio.get_running_loop().call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def backoff(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return float(min(self.base_delay * (2**failures), self.max_delay))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._queued) + len(self._active)

    async def run(
        self, worker: Callable[[K], Awaitable[None]], concurrency: int, enabled: Callable[[], bool] = lambda: True
    ) -> None:
        """Process keys with `concurrency` workers until cancelled; `enabled` gates work (leader election)."""
        await asyncio.gather(*(self._work(worker, enabled) for _ in range(concurrency)))

    async def _work(self, worker: Callable[[K], Awaitable[None]], enabled: Callable[[], bool]) -> None:
        while True:
            key = await self._ready.get()
            while not enabled():
                await asyncio.sleep(0.2)
            self._queued.discard(key)
            self._active.add(key)
            try:
                await worker(key)
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.add(key)

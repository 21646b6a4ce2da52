"""The work queue (`controller/queue.py`): each key once at a time, coalescing, backoff."""

import asyncio

from trainjob_operator.controller.queue import WorkQueue


def test_work_queue_runs_each_key_once_at_a_time_and_coalesces() -> None:
    seen: list[str] = []

    async def scenario() -> None:
        queue: WorkQueue[str] = WorkQueue()
        gate = asyncio.Event()

        async def worker(key: str) -> None:
            seen.append(key)
            if key == "a" and seen.count("a") == 1:
                queue.add("a")  # arrives while "a" runs: one more pass afterwards, not a parallel one
                queue.add("a")
                await gate.wait()

        runner = asyncio.create_task(queue.run(worker, concurrency=2))
        queue.add("a")
        queue.add("b")
        queue.add("b")
        for _ in range(100):
            if "b" in seen:
                break
            await asyncio.sleep(0.01)
        gate.set()
        for _ in range(100):
            if seen.count("a") == 2:
                break
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(scenario())
    assert sorted(seen) == ["a", "a", "b"]


def test_backoff_grows_and_resets() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.1, max_delay=0.5)
    assert [queue.backoff("k") for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    queue.forget("k")
    assert queue.backoff("k") == 0.1

"""One function over the slices of a batch, in forked worker processes: how the offline CLI uses every core.

fork, not spawn: a worker inherits the loaded modules and the inputs, so nothing is pickled on the way in and only
the results travel back, one pipe per worker. The parent works the first slice itself. Any failure of any slice (an
exception, a worker that dies) gives None for the whole call: the caller then does the work serially, so what it
reports is exactly what the serial path reports. Only the offline CLI forks (the operator is asyncio and threaded;
pyproject.toml's import contracts keep it that way).
"""

import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 8
"""More processes than this only add start-up and merging for the batch sizes a CLI sees."""
PER_WORKER = 100
"""TrainJobs a forked worker gets at the least: fewer are done sooner than a process is forked and its work merged."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as `taskset` or a container's cpuset leave it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def workers(requested: int | None) -> int:
    """How many processes a batch gets: `requested` (the CLI's --workers) or one per usable CPU, within 1..8."""
    wanted = requested if requested is not None else usable_cpus()
    return max(1, min(wanted, MAX_WORKERS)) if hasattr(os, "fork") else 1


def forked_map(fn: Callable[[T], R], slices: Sequence[T]) -> list[R] | None:
    """`[fn(s) for s in slices]`, the slices after the first each in a forked process; None when any slice failed."""
    sys.stdout.flush()
    sys.stderr.flush()
    children: list[tuple[int, int]] = []
    try:
        for piece in slices[1:]:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: compute, send, leave without running the parent's clean-up
                os.close(read_end)
                _work(fn, piece, write_end)
            os.close(write_end)
            children.append((pid, read_end))
        try:
            results = [fn(slices[0])] if slices else []
        except Exception:
            return None
        failed = False
        for pid, read_end in children:
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            if status != 0 or not data:
                failed = True
                continue
            results.append(pickle.loads(data))
        children.clear()
        return None if failed else results
    finally:
        for pid, read_end in children:  # interrupted: leave no worker behind
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(read_end)
            except OSError:
                pass


def _work(fn: Callable[[T], R], piece: T, write_end: int) -> None:
    code = 1
    try:
        data = pickle.dumps(fn(piece), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        code = 0
    except BaseException:  # any failure is the parent's signal to do the work serially
        pass
    finally:
        os._exit(code)

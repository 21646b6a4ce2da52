"""The operator's CPU for a huge TrainJob's pod events, in one process: the real work queue, manager, pod cache and
reconciler against the unit tests' in-memory API (no network, so the figure is the operator's own Python), fed N
pods created over `--spread` seconds and each Running `--running-after` seconds later, with the pod-event window
(`Manager.queue_for_pods`) and without (every pod event queues its TrainJob at once, the code before issue 37's
second session). Prints the passes and the process's CPU of each.

  python bench/pod_events.py --nodes 1000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "src")]

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder  # noqa: E402
from fake_client import FakeClient  # noqa: E402
from trainjob_operator import logs  # noqa: E402
from trainjob_operator.api import constants as c  # noqa: E402
from trainjob_operator.config import OperatorConfig  # noqa: E402
from trainjob_operator.controller.manager import Manager  # noqa: E402
from trainjob_operator.controller.store import PodCache  # noqa: E402

KEY = ("default", "test-job")


async def run(nodes: int, window: bool, spread: float, running_after: float) -> dict[str, Any]:
    client = FakeClient()
    manager = Manager(OperatorConfig(), client)
    manager.status_ca = "a CA"
    manager.store.pods = PodCache()
    manager.store.runtimes.put(RuntimeBuilder.make().ml_policy(num_nodes=nodes, torch={}).raw())
    if not window:
        manager.queue_for_pods = manager.queue.add  # type: ignore[method-assign]
    job = (
        TrainJobBuilder.make()
        .set("spec.trainer.numNodes", nodes)
        .set("metadata.creationTimestamp", "2026-01-01T00:00:00Z")
    )
    client.put(job.raw())
    manager.on_trainjob({"type": None, "object": job.raw()})
    await manager.reconciler.reconcile(KEY)
    jobset = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, KEY[1], KEY[0])
    assert jobset is not None
    passes = 0

    async def work(key: tuple[str, str]) -> None:
        nonlocal passes
        passes += 1
        await manager.work(key)

    workers = asyncio.create_task(manager.queue.run(work, 16))
    events = sorted(
        [(i * spread / nodes, "ADDED", i) for i in range(nodes)]
        + [(i * spread / nodes + running_after, "MODIFIED", i) for i in range(nodes)]
    )
    cpu, start = time.process_time(), time.monotonic()
    for at, kind, index in events:
        delay = start + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        pod = PodBuilder.make(index=index, jobset_uid=jobset["metadata"]["uid"])
        manager.on_pod({"type": kind, "object": (pod.running() if kind == "MODIFIED" else pod).raw()})
    deadline = time.monotonic() + 120
    while (len(manager.queue) or manager.queue._timers) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    workers.cancel()
    return {"passes": passes, "cpu_s": time.process_time() - cpu, "wall_s": time.monotonic() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=13.0, help="seconds over which the pods are created")
    parser.add_argument("--running-after", type=float, default=3.0, help="seconds from a pod's creation to Running")
    args = parser.parse_args()
    logs.configure("json", "WARNING")
    for window in (True, False):
        out = asyncio.run(run(args.nodes, window, args.spread, args.running_after))
        print(
            f"numNodes {args.nodes}, pod-event window {'on' if window else 'off'}: {out['passes']} passes, "
            f"{out['cpu_s']:.2f} s of CPU over {out['wall_s']:.1f} s (load {' '.join(Path('/proc/loadavg').read_text().split()[:3])})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

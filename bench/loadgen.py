"""The benchmark's load generator: a separate client process that creates objects as fast as the API server
takes them and watches for the operator's answers. Prints one JSON document with its timings.

  loadgen.py trainjobs  --kubeconfig K --namespace NS --n N [--runtime torch-distributed]
  loadgen.py jobsets    --kubeconfig K --namespace NS --n N           (the ceiling: no operator involved)
  loadgen.py complete   --kubeconfig K --namespace NS                 (mark every JobSet Completed, time Complete)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubeclient import connect, watch

from trainjob_operator.api import constants as c
from trainjob_operator.k8s.client import Client

CONCURRENCY = 64


def trainjob(namespace: str, name: str, runtime: str) -> dict[str, Any]:
    return {"apiVersion": c.API_VERSION, "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}}}


def jobset(namespace: str, name: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}]}}
    return {"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": pod}}}]}}


async def create_all(client: Client, objects: list[dict[str, Any]]) -> dict[str, float]:
    created: dict[str, float] = {}
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for obj in objects:
        queue.put_nowait(obj)

    async def worker() -> None:
        while not queue.empty():
            obj = queue.get_nowait()
            await client.create(obj)
            created[obj["metadata"]["name"]] = time.monotonic()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return created


async def trainjobs(args: argparse.Namespace) -> dict[str, Any]:
    client = connect(args.kubeconfig)
    seen: dict[str, float] = {}
    ready = asyncio.Event()
    done = asyncio.Event()

    async def follow() -> None:
        async for kind, obj, at in watch(client, c.JOBSET_API_VERSION, c.JOBSET_KIND, args.namespace, ready):
            name = obj["metadata"]["name"]
            if kind == "ADDED" and name not in seen:
                seen[name] = at
                if len(seen) >= args.n:
                    done.set()
                    return

    watcher = asyncio.create_task(follow())
    await ready.wait()
    start = time.monotonic()
    created = await create_all(client, [trainjob(args.namespace, f"tj-{i:05d}", args.runtime) for i in range(args.n)])
    created_by = time.monotonic() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    watcher.cancel()
    await client.close()
    latencies = sorted(seen[n] - created[n] for n in created if n in seen)
    last = max(seen.values()) if seen else start
    return {"n": args.n, "jobsets": len(seen), "create_seconds": created_by, "all_jobsets_seconds": last - start,
            "latencies": latencies}


async def jobsets(args: argparse.Namespace) -> dict[str, Any]:
    client = connect(args.kubeconfig)
    start = time.monotonic()
    await create_all(client, [jobset(args.namespace, f"js-{i:05d}") for i in range(args.n)])
    elapsed = time.monotonic() - start
    await client.close()
    return {"n": args.n, "seconds": elapsed, "per_second": args.n / elapsed}


async def complete(args: argparse.Namespace) -> dict[str, Any]:
    """Mark every JobSet Completed at once (as the JobSet controller would) and time each TrainJob's Complete."""
    client = connect(args.kubeconfig)
    items = await client.list(c.JOBSET_API_VERSION, c.JOBSET_KIND, args.namespace)
    names = [i["metadata"]["name"] for i in items]
    seen: dict[str, float] = {}
    ready, done = asyncio.Event(), asyncio.Event()

    async def follow() -> None:
        async for _, obj, at in watch(client, c.API_VERSION, c.TRAINJOB_KIND, args.namespace, ready):
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(x.get("type") == "Complete" and x.get("status") == "True" for x in conditions):
                seen.setdefault(obj["metadata"]["name"], at)
                if len(seen) >= len(names):
                    done.set()
                    return

    watcher = asyncio.create_task(follow())
    await ready.wait()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    patched: dict[str, float] = {}
    status = {"status": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                          "message": "jobset completed successfully", "lastTransitionTime": stamp}],
                         "terminalState": "Completed"}}
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)

    async def worker() -> None:
        while not queue.empty():
            name = queue.get_nowait()
            await client.merge_patch(c.JOBSET_API_VERSION, c.JOBSET_KIND, name, args.namespace, status,
                                     subresource="status")
            patched[name] = time.monotonic()

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    watcher.cancel()
    await client.close()
    latencies = sorted(seen[n] - patched[n] for n in patched if n in seen)
    return {"n": len(names), "complete": len(seen), "all_complete_seconds": (max(seen.values()) - start) if seen
            else None, "latencies": latencies}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("trainjobs", "jobsets", "complete"))
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--runtime", default="torch-distributed")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    result = asyncio.run({"trainjobs": trainjobs, "jobsets": jobsets, "complete": complete}[args.mode](args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

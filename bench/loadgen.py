"""The benchmark's load generator: a separate client process that creates objects as fast as the API server
takes them and watches for the operator's answers. Prints one JSON document with its timings.

  loadgen.py trainjobs  --kubeconfig K --namespace NS --n N [--runtime torch-distributed]
  loadgen.py jobsets    --kubeconfig K --namespace NS --n N           (raw JobSet creates: no operator involved)
  loadgen.py ceiling    --kubeconfig K --namespace NS --n N --concurrency C
                        (the ceiling: TrainJobs created as for `trainjobs`, and this client does exactly
                        the operator's writes for each: the runtime snapshot ConfigMap and the JobSet's apply,
                        with C workers)
  loadgen.py complete   --kubeconfig K --namespace NS                 (mark every JobSet Completed, time Complete)

`trainjobs` and `ceiling` run a probe beside the burst: another client doing ordinary reads and writes (GET and
merge-patch a Lease, LIST the Leases of a small namespace: a resource the operator does not touch, so its request
counts stay its own) in a loop; the p50/p99 of their latencies are reported (the API call SLO is 1 s).
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
from trainjob_operator.k8s.client import ApiError, Client

PROBE_NAMESPACE = "bench-probe"
LEASE = "coordination.k8s.io/v1"

CONCURRENCY = 64


def trainjob(namespace: str, name: str, runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}},
    }


def jobset(namespace: str, name: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}]}}
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {"spec": {"parallelism": 2, "completions": 2, "template": pod}},
                }
            ]
        },
    }


async def create_all(
    client: Client, objects: list[dict[str, Any]], pending: asyncio.Queue[tuple[str, str]] | None = None
) -> dict[str, float]:
    created: dict[str, float] = {}
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for obj in objects:
        queue.put_nowait(obj)

    async def worker() -> None:
        while not queue.empty():
            obj = queue.get_nowait()
            answer = await client.create(obj)
            created[obj["metadata"]["name"]] = time.monotonic()
            if pending is not None:
                pending.put_nowait((obj["metadata"]["name"], answer["metadata"]["uid"]))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return created


class Probe:
    """Ordinary reads and writes beside the burst, one at a time: what other clients of the API server see."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = connect(kubeconfig)
        self.latencies: list[float] = []
        self.errors = 0

    async def setup(self) -> None:
        for path, obj in (
            ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NAMESPACE}}),
            (
                f"/apis/coordination.k8s.io/v1/namespaces/{PROBE_NAMESPACE}/leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "spec": {"holderIdentity": "0"},
                    "metadata": {"name": "probe", "namespace": PROBE_NAMESPACE},
                },
            ),
        ):
            try:
                await self.client.request("POST", path, body=obj)
            except ApiError as err:
                if not err.conflict:  # there from an earlier run
                    raise

    async def run(self, stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            for call in (
                lambda: self.client.get(LEASE, "Lease", "probe", PROBE_NAMESPACE),
                lambda: self.client.merge_patch(
                    LEASE,
                    "Lease",
                    "probe",
                    PROBE_NAMESPACE,
                    {"spec": {"holderIdentity": str(i)}},  # noqa: B023 (called at once)
                ),
                lambda: self.client.list(LEASE, "Lease", PROBE_NAMESPACE),
            ):
                start = time.monotonic()
                try:
                    await call()
                except Exception:  # a refused probe is an SLO miss too: count it, keep going
                    self.errors += 1
                self.latencies.append(time.monotonic() - start)
            await asyncio.sleep(0.05)

    def result(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def q(p: float) -> float | None:
            return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))] if ordered else None

        return {"probe_calls": len(ordered), "probe_errors": self.errors, "probe_p50_s": q(0.5), "probe_p99_s": q(0.99)}


async def trainjobs(args: argparse.Namespace) -> dict[str, Any]:
    client = connect(args.kubeconfig)
    probe = Probe(args.kubeconfig)
    await probe.setup()
    seen: dict[str, float] = {}
    ready = asyncio.Event()
    done = asyncio.Event()
    writer = OperatorWrites(args) if args.mode == "ceiling" else None

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
    stop_probe = asyncio.Event()
    prober = asyncio.create_task(probe.run(stop_probe))
    start = time.monotonic()
    writes = asyncio.create_task(writer.run()) if writer is not None else None
    created = await create_all(
        client,
        [trainjob(args.namespace, f"tj-{i:05d}", args.runtime) for i in range(args.n)],
        writer.pending if writer is not None else None,
    )
    created_by = time.monotonic() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    stop_probe.set()
    await prober
    watcher.cancel()
    if writes is not None:
        writes.cancel()
        await writer.client.close()  # type: ignore[union-attr]
    await client.close()
    await probe.client.close()
    latencies = sorted(seen[n] - created[n] for n in created if n in seen)
    last = max(seen.values()) if seen else start
    return {
        "n": args.n,
        "jobsets": len(seen),
        "create_seconds": created_by,
        "all_jobsets_seconds": last - start,
        "latencies": latencies,
        **probe.result(),
    }


FAKE_CA = "-----BEGIN CERTIFICATE-----\n" + "A" * 1000 + "\n-----END CERTIFICATE-----\n"


class OperatorWrites:
    """The operator's writes for each TrainJob, done by a plain client: the runtime snapshot ConfigMap (create), the
    status server's CA ConfigMap and the JobSet (server-side apply), bodies built by the operator's own pipeline before
    the clock starts."""

    def __init__(self, args: argparse.Namespace) -> None:
        from trainjob_operator import jsontext
        from trainjob_operator.api.runtime import ClusterTrainingRuntime
        from trainjob_operator.api.trainjob import TrainJob
        from trainjob_operator.runtime.info import RuntimeSource
        from trainjob_operator.runtime.observed import Observed, StatusServer
        from trainjob_operator.runtime.pipeline import Framework
        from trainjob_operator.runtime.snapshot import build_snapshot

        runtime_path = Path(__file__).resolve().parent / "runtime.json"
        runtime = RuntimeSource.of(ClusterTrainingRuntime.model_validate(json.loads(runtime_path.read_text())))
        framework = Framework.from_registry()
        # The operator runs with its status server on (the default): the trainer gets its URL, and the CA goes into
        # a ConfigMap, one more write per TrainJob.
        observed = Observed(status_server=StatusServer("https://127.0.0.1:10443", FAKE_CA))
        self.args = args
        self.client = connect(args.kubeconfig)
        self.pending: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.templates: dict[str, bytes] = {}
        for i in range(args.n):
            name = f"tj-{i:05d}"
            raw = trainjob(args.namespace, name, args.runtime)
            raw["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
            job = TrainJob.model_validate(raw)
            objects = [build_snapshot(job, runtime), *framework.desired_objects(job, runtime, observed)]
            self.templates[name] = jsontext.compact(objects)
        self.jsontext = jsontext

    async def run(self) -> None:
        async def worker() -> None:
            while True:
                name, uid = await self.pending.get()
                body = self.templates[name].replace(b"00000000-0000-0000-0000-000000000000", uid.encode())
                snapshot, *children = self.jsontext.loads(body)
                await self.client.create(snapshot, "trainer")  # as the operator: a create, then applies
                for obj in children:
                    await self.client.apply(obj, "trainer", force=True)

        await asyncio.gather(*(worker() for _ in range(self.args.concurrency)))


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
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully",
                    "lastTransitionTime": stamp,
                }
            ],
            "terminalState": "Completed",
        }
    }
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)

    async def worker() -> None:
        while not queue.empty():
            name = queue.get_nowait()
            await client.merge_patch(
                c.JOBSET_API_VERSION, c.JOBSET_KIND, name, args.namespace, status, subresource="status"
            )
            patched[name] = time.monotonic()

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    watcher.cancel()
    await client.close()
    latencies = sorted(seen[n] - patched[n] for n in patched if n in seen)
    return {
        "n": len(names),
        "complete": len(seen),
        "all_complete_seconds": (max(seen.values()) - start) if seen else None,
        "latencies": latencies,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("trainjobs", "ceiling", "jobsets", "complete"))
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--runtime", default="torch-distributed")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--concurrency", type=int, default=64, help="ceiling: workers doing the operator's writes")
    args = parser.parse_args()
    result = asyncio.run(
        {"trainjobs": trainjobs, "ceiling": trainjobs, "jobsets": jobsets, "complete": complete}[args.mode](args)
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark's load generator: a separate client process that creates objects as fast as the API server
takes them and watches for the operator's answers. Prints one JSON document with its timings.

  loadgen.py trainjobs  --kubeconfig K --namespace NS --n N [--runtime torch-distributed]
  loadgen.py jobsets    --kubeconfig K --namespace NS --n N           (raw JobSet creates: no operator involved)
  loadgen.py ceiling    --kubeconfig K --namespace NS --n N --concurrency C
                        (the ceiling: TrainJobs created as for `trainjobs`, and this client does exactly
                        the operator's writes for each: the runtime snapshot ConfigMap and the JobSet's apply,
                        with C workers)
  loadgen.py complete   --kubeconfig K --namespace NS                 (mark every JobSet Completed, time Complete)
  loadgen.py huge       --kubeconfig K --namespace NS --n NODES    (one TrainJob of NODES nodes: its JobSet,
                        Jobs and pods, until every pod is Running; --max-nodes-per-job B annotates it so that
                        our operator cuts its trainer into Jobs of at most B pods; huge-ceiling creates the same
                        pods directly; huge-jobset --split K creates its JobSet directly, the trainer cut into K Jobs)
  loadgen.py pods       --kubeconfig K --namespace NS    (every inert JobSet's pods, as JobSet and the Job
                        controller would make them, created directly and left Running on kwok nodes)
  loadgen.py poke       --kubeconfig K --namespace NS --value V   (one annotation patch on every pod: one pod
                        watch event each; times the patches and this client's own watch of them)
  loadgen.py kueue      --kubeconfig K --namespace NS --n N --wave W [--operator-pid P]
                        (Kueue admission: N queued TrainJobs behind a ClusterQueue with no quota, then the quota
                        raised W TrainJobs at a time; times each TrainJob's unsuspend by Kueue to its JobSet's)

`trainjobs` and `ceiling` run a probe beside the burst: another client doing ordinary reads and writes (GET and
merge-patch a Lease, LIST the Leases of a small namespace: a resource the operator does not touch, so its request
counts stay its own) in a loop; the p50/p99 of their latencies are reported (the API call SLO is 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubeclient import connect, watch

from trainjob_operator.api import constants as c
from trainjob_operator.k8s.client import MERGE, ApiError, Client, Resource, RESTMapper

PROBE_NAMESPACE = "bench-probe"
LEASE = "coordination.k8s.io/v1"

CONCURRENCY = 64


def trainjob(namespace: str, name: str, runtime: str, nodes: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": nodes}},
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
    client: Client,
    objects: list[dict[str, Any]],
    pending: asyncio.Queue[tuple[str, str]] | None = None,
    concurrency: int = CONCURRENCY,
) -> dict[str, float]:
    """Each of `objects` created by `concurrency` workers; when each was (monotonic), by name."""
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

    await asyncio.gather(*(worker() for _ in range(concurrency)))
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
        [trainjob(args.namespace, f"tj-{i:05d}", args.runtime, args.num_nodes) for i in range(args.n)],
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
        from trainjob_operator.api.runtime import ClusterTrainingRuntime
        from trainjob_operator.api.trainjob import TrainJob
        from trainjob_operator.codec import jsontext
        from trainjob_operator.runtime.info import RuntimeSource
        from trainjob_operator.runtime.observed import Observed, StatusEndpoint
        from trainjob_operator.runtime.pipeline import Framework
        from trainjob_operator.runtime.snapshot import build_snapshot

        runtime_path = Path(__file__).resolve().parent / "runtime.json"
        runtime = RuntimeSource.of(ClusterTrainingRuntime.model_validate(json.loads(runtime_path.read_text())))
        framework = Framework.from_registry()
        # The operator runs with its status server on (the default): the trainer gets its URL, and the CA goes into
        # a ConfigMap, one more write per TrainJob.
        observed = Observed(status_server=StatusEndpoint("https://127.0.0.1:10443", FAKE_CA))
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
    status = completed_jobset_status(stamp)
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


KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR = "bench-flavor"
FLAVOR_LABELS = {"nvidia.com/gpu.product": "Fake-GPU"}
"""The flavor's node labels: Kueue writes them into the TrainJob's runtimePatches as it admits it, so the operator
must render the JobSet again, as in production."""
CPU_PER_TRAINJOB = 2
"""What Kueue counts against the quota: 2 nodes (`trainjob()`), one CPU each (`queued_trainjob()`)."""


def queued_trainjob(namespace: str, name: str, runtime: str, queue: str) -> dict[str, Any]:
    job = trainjob(namespace, name, runtime)
    job["metadata"]["labels"] = {QUEUE_LABEL: queue}
    job["spec"]["suspend"] = True
    job["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "1"}}
    return job


def cluster_queue(name: str, namespace: str, trainjobs: int) -> dict[str, Any]:
    """A ClusterQueue for `namespace` whose CPU quota admits `trainjobs` TrainJobs at a time."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": trainjobs * CPU_PER_TRAINJOB}]}
                    ],
                }
            ],
        },
    }


async def create_queues(client: Client, namespace: str, queue: str) -> None:
    """The flavor (shared by every run), a ClusterQueue with no quota and a LocalQueue, both named `queue`."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": FLAVOR_LABELS},
    }
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": namespace},
        "spec": {"clusterQueue": queue},
    }
    for path, obj in (
        (f"{KUEUE_API}/resourceflavors", flavor),
        (f"{KUEUE_API}/clusterqueues", cluster_queue(queue, namespace, 0)),
        (f"{KUEUE_API}/namespaces/{namespace}/localqueues", local),
    ):
        try:
            await client.request("POST", path, body=obj)
        except ApiError as err:
            if not err.conflict:  # the flavor, there from an earlier run
                raise


async def until_seen(seen: dict[str, float], count: int, what: str, timeout: float) -> None:
    """Poll `seen` (filled in by a watch) until it holds `count` names; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while len(seen) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"loadgen: timed out waiting for {what}")
        await asyncio.sleep(0.05)


def completed_jobset_status(stamp: str) -> dict[str, Any]:
    """The status patch of a JobSet whose Jobs all completed, as JobSet's controller writes it (at `stamp`)."""
    condition = {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": stamp,
    }
    return {"status": {"conditions": [condition], "terminalState": "Completed"}}


def programs_cpu(marker: bytes, programs: Collection[str]) -> dict[str, float]:
    """CPU seconds (user + system) so far of the processes of `programs` whose command line names `marker` (a
    cluster's directory), by program."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu: dict[str, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        program = os.path.basename(argv[0].decode(errors="replace")) if argv else ""
        if program in programs and marker in b" ".join(argv):
            cpu[program] = cpu.get(program, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return cpu


def cpu_seconds(pid: int | None) -> float:
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def kueue_waves(args: argparse.Namespace) -> dict[str, Any]:
    """N queued TrainJobs, their JobSets created suspended; then the ClusterQueue's quota raised wave by wave (Kueue
    admits each wave and unsuspends its TrainJobs). Per TrainJob: from the watch event showing Kueue's unsuspend of
    the TrainJob to the one showing its JobSet unsuspended, both seen by this process's watches."""
    client = connect(args.kubeconfig)
    ns, queue = args.namespace, args.namespace
    await create_queues(client, ns, queue)
    resumed: dict[str, float] = {}  # TrainJob name -> when its spec.suspend was seen false
    jobsets: dict[str, float] = {}  # JobSet name -> when first seen (the operator creates it suspended)
    running: dict[str, float] = {}  # JobSet name -> when its spec.suspend was seen false
    ready = [asyncio.Event(), asyncio.Event()]

    async def follow_trainjobs() -> None:
        async for _, obj, at in watch(client, c.API_VERSION, c.TRAINJOB_KIND, ns, ready[0]):
            if obj["spec"].get("suspend") is False:
                resumed.setdefault(obj["metadata"]["name"], at)

    async def follow_jobsets() -> None:
        async for _, obj, at in watch(client, c.JOBSET_API_VERSION, c.JOBSET_KIND, ns, ready[1]):
            jobsets.setdefault(obj["metadata"]["name"], at)
            if not obj["spec"].get("suspend"):
                running.setdefault(obj["metadata"]["name"], at)

    watchers = [asyncio.create_task(follow_trainjobs()), asyncio.create_task(follow_jobsets())]
    for event in ready:
        await event.wait()
    start = time.monotonic()
    await create_all(client, [queued_trainjob(ns, f"tj-{i:05d}", args.runtime, queue) for i in range(args.n)])
    await until_seen(jobsets, args.n, f"{args.n} suspended JobSets", args.timeout)

    async def workloads() -> int:
        return len((await client.request("GET", f"{KUEUE_API}/namespaces/{ns}/workloads")).get("items", []))

    deadline = time.monotonic() + args.timeout
    while await workloads() < args.n:  # Kueue's Workloads all there: the waves measure admission alone
        if time.monotonic() > deadline:
            raise SystemExit(f"loadgen: timed out waiting for {args.n} Workloads")
        await asyncio.sleep(1)
    queued_seconds = time.monotonic() - start
    if running:
        raise SystemExit(f"loadgen: {len(running)} JobSets ran before Kueue admitted anything")
    cpu_before = cpu_seconds(args.operator_pid)
    waves: list[float] = []
    admitted = 0
    admission_start = time.monotonic()
    while admitted < args.n:
        admitted = min(admitted + args.wave, args.n)
        started = time.monotonic()
        await client.request(
            "PATCH", f"{KUEUE_API}/clusterqueues/{queue}", body=cluster_queue(queue, ns, admitted), content_type=MERGE
        )
        await until_seen(running, admitted, f"{admitted} JobSets unsuspended", args.timeout)
        waves.append(time.monotonic() - started)
    admission_seconds = time.monotonic() - admission_start
    cpu = cpu_seconds(args.operator_pid) - cpu_before
    for task in watchers:
        task.cancel()
    await client.close()
    return {
        "n": args.n,
        "wave": args.wave,
        "queued_seconds": queued_seconds,
        "admission_seconds": admission_seconds,
        "wave_seconds": waves,
        "operator_cpu_seconds": cpu,
        "unsuspended": len(running),
        "latencies": sorted(running[name] - resumed[name] for name in running if name in resumed),
    }


STARTED = frozenset({"Running", "Succeeded", "Failed"})
HUGE = "huge"
"""The one TrainJob of the `huge` modes (and its JobSet's name)."""


def huge_trainjob(namespace: str, runtime: str, nodes: int, max_nodes_per_job: int | None = None) -> dict[str, Any]:
    """The one TrainJob of the `huge` mode, of `nodes` nodes; `max_nodes_per_job`: annotated so that our operator
    cuts its trainer into Jobs of at most that many pods (runtime/plugins/trainer_split.py; upstream ignores it)."""
    raw = trainjob(namespace, HUGE, runtime)
    raw["spec"]["trainer"]["numNodes"] = nodes
    if max_nodes_per_job is not None:
        if max_nodes_per_job < 1:
            raise SystemExit(f"--max-nodes-per-job {max_nodes_per_job} is not a positive number of pods")
        raw["metadata"]["annotations"] = {c.MAX_NODES_PER_JOB_ANNOTATION: str(max_nodes_per_job)}
    return raw


def rendered_jobset(namespace: str, runtime: str, nodes: int) -> dict[str, Any]:
    """The JobSet the operator's pipeline renders for the TrainJob of the `huge` modes with `nodes` nodes."""
    from trainjob_operator.api.runtime import ClusterTrainingRuntime
    from trainjob_operator.api.trainjob import TrainJob
    from trainjob_operator.runtime.info import RuntimeSource
    from trainjob_operator.runtime.pipeline import Framework

    runtime_path = Path(__file__).resolve().parent / "runtime.json"
    source = RuntimeSource.of(ClusterTrainingRuntime.model_validate(json.loads(runtime_path.read_text())))
    raw = huge_trainjob(namespace, runtime, nodes)
    raw["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    objects = Framework.from_registry().desired_objects(TrainJob.model_validate(raw), source)
    jobset = next(obj for obj in objects if obj["kind"] == c.JOBSET_KIND)
    return jobset


def huge_pods(namespace: str, runtime: str, nodes: int) -> list[dict[str, Any]]:
    """The trainer pods a TrainJob of `nodes` nodes gets, as the operator's pipeline renders its JobSet's trainer
    template (labels, env, ports, hostname and subdomain of each rank), for the ceiling to create directly."""
    jobset = rendered_jobset(namespace, runtime, nodes)
    replicated = jobset["spec"]["replicatedJobs"][0]
    template = replicated["template"]["spec"]["template"]
    pods = []
    for rank in range(nodes):
        meta = dict(template.get("metadata") or {})
        labels = {
            **(meta.get("labels") or {}),
            "bench-huge": HUGE,
            "batch.kubernetes.io/job-completion-index": str(rank),
        }
        spec = json.loads(json.dumps(template["spec"]))
        spec["hostname"] = f"{HUGE}-{replicated['name']}-0-{rank}"
        spec["subdomain"] = HUGE
        spec.pop("restartPolicy", None)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{spec['hostname']}-x",
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(rank)},  # PET_NODE_RANK's source
                },
                "spec": {**spec, "restartPolicy": "Never"},
            }
        )
    return pods


def huge_jobset(namespace: str, runtime: str, nodes: int, split: int) -> dict[str, Any]:
    """The JobSet a TrainJob of `nodes` nodes gets from the operator's pipeline, owned by nothing, its trainer's
    replicated job cut into `split` Jobs of nodes/split pods each (1: as built). For the `huge-jobset` mode, which
    measures what JobSet and the Job controller do with one Indexed Job against several, with no operator at work (the
    pods' rank env is not rewritten: kwok runs nothing)."""
    if split < 1 or nodes % split:
        raise SystemExit(f"--split {split} does not divide --n {nodes}")
    jobset = rendered_jobset(namespace, runtime, nodes)
    jobset["metadata"].pop("ownerReferences", None)  # no TrainJob: the garbage collector would delete it
    [trainer] = [r for r in jobset["spec"]["replicatedJobs"] if r["template"]["spec"].get("parallelism") == nodes]
    trainer["replicas"] = split
    trainer["template"]["spec"]["parallelism"] = nodes // split
    trainer["template"]["spec"]["completions"] = nodes // split
    return jobset


async def huge(args: argparse.Namespace) -> dict[str, Any]:
    """One TrainJob of `--n` nodes (mode `huge`), or its trainer pods created directly (`huge-ceiling`, `--concurrency`
    workers): seconds from the start to its JobSet, its first and last Job, its first and last pod, and every pod
    started (Running, or already past it: kwok's nodes run them, and complete a Job's pods soon after), as this
    client's watches see them."""
    client = connect(args.kubeconfig)
    times: dict[str, float] = {}
    jobs: set[str] = set()
    pods: set[str] = set()
    running: set[str] = set()
    done = asyncio.Event()
    ready = [asyncio.Event() for _ in range(3)]

    def mark(key: str, at: float) -> None:
        times.setdefault(key, at)

    mapper = RESTMapper().with_kinds([("Job", Resource("batch/v1", "jobs"))])

    async def follow(api_version: str, kind: str, ready_event: asyncio.Event) -> None:
        async for _, obj, at in watch(client, api_version, kind, args.namespace, ready_event, mapper):
            name = obj["metadata"]["name"]
            if kind == c.JOBSET_KIND:
                mark("jobset", at)
            elif kind == "Job":
                if name not in jobs:
                    jobs.add(name)
                    mark("first_job", at)
                    times["last_job"] = at
            else:
                if name not in pods:
                    pods.add(name)
                    mark("first_pod", at)
                    if len(pods) == args.n:
                        times["last_pod"] = at
                # started: kwok completes a Job's pods soon after they run, and one event may skip Running
                if (obj.get("status") or {}).get("phase") in STARTED and name not in running:
                    running.add(name)
                    if len(running) == args.n:
                        times["all_running"] = at
                        done.set()
                        return

    watchers = [
        asyncio.create_task(follow(c.JOBSET_API_VERSION, c.JOBSET_KIND, ready[0])),
        asyncio.create_task(follow("batch/v1", "Job", ready[1])),
        asyncio.create_task(follow("v1", "Pod", ready[2])),
    ]
    for event in ready:
        await asyncio.wait([asyncio.create_task(event.wait()), *watchers], return_when=asyncio.FIRST_COMPLETED)
        for task in watchers:
            if task.done():
                task.result()  # a watch that failed before it listed: its error, not a hang
    bodies = huge_pods(args.namespace, args.runtime, args.n) if args.mode == "huge-ceiling" else []
    start = time.monotonic()
    if args.mode == "huge-ceiling":
        await create_all(client, bodies, concurrency=args.concurrency)
    elif args.mode == "huge-jobset":
        await client.create(huge_jobset(args.namespace, args.runtime, args.n, args.split))
    else:
        await client.create(huge_trainjob(args.namespace, args.runtime, args.n, args.max_nodes_per_job))
    created = time.monotonic() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    for task in watchers:
        task.cancel()
    await client.close()
    return {
        "n": args.n,
        "create_seconds": created,
        "jobs": len(jobs),
        "pods": len(pods),
        "running": len(running),
        **{f"{key}_s": at - start for key, at in times.items()},
    }


def jobset_pods(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods an inert JobSet would get from the JobSet controller and the Job controller (every replicated job's
    Jobs, each with `parallelism` indexed pods), with the labels they would carry, not owned by a Job: kwok's nodes
    keep them Running (the `running` section's pods; the JobSet controller is stopped there)."""
    meta = jobset["metadata"]
    pods = []
    for replicated in jobset["spec"]["replicatedJobs"]:
        job_spec = replicated["template"]["spec"]
        template = job_spec["template"]
        for job_index in range(int(replicated.get("replicas", 1))):
            job = f"{meta['name']}-{replicated['name']}-{job_index}"
            for rank in range(int(job_spec.get("parallelism", 1))):
                labels = {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    c.JOBSET_NAME_LABEL: meta["name"],
                    c.JOBSET_UID_LABEL: meta["uid"],
                    c.JOBSET_REPLICATED_JOB_LABEL: replicated["name"],
                    c.JOBSET_RESTART_ATTEMPT_LABEL: "0",
                    "jobset.sigs.k8s.io/job-index": str(job_index),
                    c.JOB_NAME_LABEL: job,
                    c.JOB_COMPLETION_INDEX_LABEL: str(rank),
                }
                annotations = {
                    **((template.get("metadata") or {}).get("annotations") or {}),
                    c.JOB_COMPLETION_INDEX_LABEL: str(rank),
                }
                spec = {**json.loads(json.dumps(template["spec"])), "restartPolicy": "Never"}
                spec.setdefault("hostname", f"{job}-{rank}")
                spec.setdefault("subdomain", meta["name"])
                pods.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{job}-{rank}-x",
                            "namespace": meta["namespace"],
                            "labels": labels,
                            "annotations": annotations,
                        },
                        "spec": spec,
                    }
                )
    return pods


async def running_pods(args: argparse.Namespace) -> dict[str, Any]:
    """Every JobSet's pods in the namespace, created by `--concurrency` workers, until all are Running."""
    client = connect(args.kubeconfig)
    bodies = [
        pod for js in await client.list(c.JOBSET_API_VERSION, c.JOBSET_KIND, args.namespace) for pod in jobset_pods(js)
    ]
    running: set[str] = set()
    done = asyncio.Event()
    ready = asyncio.Event()

    async def follow() -> None:
        async for _, obj, _at in watch(client, "v1", "Pod", args.namespace, ready):
            if (obj.get("status") or {}).get("phase") == "Running":
                running.add(obj["metadata"]["name"])
                if len(running) >= len(bodies):
                    done.set()
                    return

    watcher = asyncio.create_task(follow())
    await ready.wait()
    start = time.monotonic()
    await create_all(client, bodies, concurrency=args.concurrency)
    created = time.monotonic() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    watcher.cancel()
    await client.close()
    return {
        "pods": len(bodies),
        "running": len(running),
        "create_seconds": created,
        "all_running_seconds": time.monotonic() - start,
    }


POKE = "bench.trainjob-operator.test/poke"


async def poke(args: argparse.Namespace) -> dict[str, Any]:
    """One merge patch of an annotation (`--value`) on every pod of the namespace, `--concurrency` at once: one pod
    watch event each, nothing a controller reads. Wall-clock times (epoch seconds, for the caller's CPU samples) of
    the first patch sent, the last acknowledged, and the last of them seen by this client's own watch, which also
    counts every pod event of the window (one per pod when nothing else changed a pod)."""
    client = connect(args.kubeconfig)
    names: list[str] = []
    seen: set[str] = set()
    events = 0
    last_seen = 0.0
    listed = asyncio.Event()
    done = asyncio.Event()

    async def follow() -> None:
        nonlocal events, last_seen
        async for _kind, obj, _at in watch(client, "v1", "Pod", args.namespace, listed):
            if not listed.is_set():
                names.append(obj["metadata"]["name"])
                continue
            events += 1
            if ((obj["metadata"].get("annotations") or {}).get(POKE)) == args.value:
                seen.add(obj["metadata"]["name"])
                last_seen = time.time()
                if len(seen) >= len(names):
                    done.set()

    watcher = asyncio.create_task(follow())
    await listed.wait()
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)
    patch = {"metadata": {"annotations": {POKE: args.value}}}

    async def worker() -> None:
        while not queue.empty():
            await client.merge_patch("v1", "Pod", queue.get_nowait(), args.namespace, patch)

    first = time.time()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    patched = time.time()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=args.timeout)
    await asyncio.sleep(1.0)  # events of the window that follow the pokes (a controller reacting) are counted too
    watcher.cancel()
    await client.close()
    return {
        "pods": len(names),
        "seen": len(seen),
        "events": events,
        "first_patch_at": first,
        "last_patch_at": patched,
        "last_seen_at": last_seen or None,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "mode",
        choices=(
            "trainjobs",
            "ceiling",
            "jobsets",
            "complete",
            "kueue",
            "huge",
            "huge-ceiling",
            "huge-jobset",
            "pods",
            "poke",
        ),
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--runtime", default="torch-distributed")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--concurrency", type=int, default=64, help="ceiling: workers doing the operator's writes")
    parser.add_argument("--wave", type=int, default=100, help="kueue: TrainJobs admitted per quota raise")
    parser.add_argument("--operator-pid", type=int, help="kueue: the operator's process, for its CPU during the waves")
    parser.add_argument(
        "--split", type=int, default=1, help="huge-jobset: the trainer's Jobs (numNodes/split pods each)"
    )
    parser.add_argument(
        "--max-nodes-per-job",
        type=int,
        help="huge: the TrainJob's max-nodes-per-job annotation (our operator cuts its trainer into Jobs of at most "
        "that many pods; default: none, one Job)",
    )
    parser.add_argument("--num-nodes", type=int, default=2, help="trainjobs: each TrainJob's numNodes")
    parser.add_argument("--value", default="1", help="poke: the annotation's value (a new one each burst)")
    args = parser.parse_args()
    modes = {
        "trainjobs": trainjobs,
        "ceiling": trainjobs,
        "jobsets": jobsets,
        "complete": complete,
        "kueue": kueue_waves,
        "huge": huge,
        "huge-ceiling": huge,
        "huge-jobset": huge,
        "pods": running_pods,
        "poke": poke,
    }
    result = asyncio.run(modes[args.mode](args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

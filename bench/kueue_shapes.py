"""Kueue's baseline scheduler-performance shapes with TrainJobs (issue 37, item 3).

Kueue gates its scheduler on one scenario (test/performance/scheduler/configs/baseline in kubernetes-sigs/kueue):
5 cohorts of 6 ClusterQueues, each with 20 CPU nominal and 100 CPU borrowing limit (reclaim within the cohort: Any;
within the ClusterQueue: LowerPriority), fed from its own namespace and LocalQueue by three creators at once:
350 small (1 CPU, 200 ms, priority 50, one every 100 ms), 100 medium (5 CPU, 500 ms, priority 100, one every 500 ms)
and 50 large (20 CPU, 1,000 ms, priority 200, one every 1,200 ms): 15,000 workloads, gate 425 s (mean 351 s).

Here each workload is a TrainJob of one node whose resourcesPerNode asks the workload's CPU, queued on its
ClusterQueue's LocalQueue, its priority a WorkloadPriorityClass of the workload's value. The operator makes its
JobSet, Kueue admits the TrainJob (or preempts it), the operator unsuspends (suspends) the JobSet. The run time is
made real as Kueue's runner does for its workloads: the runtime's milliseconds after this process sees the JobSet
unsuspended it marks the JobSet Completed (the JobSet controller is stopped, as in every section), the operator
marks the TrainJob Complete, Kueue finishes the Workload and frees its quota; a JobSet suspended again by a
preemption loses its pending completion, and runs its full time once admitted again.

`--scale S` takes that fraction of each creator's count (at least one each), cohorts, queues and quotas unchanged;
Kueue's gate scales with the number of workloads (its wall is throughput-bound: 15,000 in 351 s is 43 a second,
where the quota alone would finish each cohort's 7,920 CPU-seconds on 120 CPU in 66 s).

  python bench/kueue_shapes.py --kubeconfig K --scale S --run ID [--operator-pid P]   (one run: prints one JSON)
  python bench/cluster_bench.py --kueue-shapes --kueue-scale S [--runs R]            (the section, per contender)
  ... --kueue-profile SECONDS [--kueue-profile-after A]   (and Kueue's CPU profile of SECONDS from A s into each
      column, its reconciles by controller and the API writes of TrainJobs, JobSets and Workloads)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

COHORTS = 5
QUEUES_PER_COHORT = 6
NOMINAL_CPU = 20
BORROWING_LIMIT_CPU = 100
GATE_S = 425.0
"""Kueue's `maxWallMs` for the baseline (its rangespec.yaml), measured on Kueue's own CI machine with minimalkueue in
envtest: Workloads created directly, no job controller, no operator."""
MEAN_S = 351.1
"""The mean wall of Kueue's five trial runs behind that gate."""
RUN_LABEL = "bench.trainjob-operator/kueue-shapes"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_GROUP = "kueue.x-k8s.io/v1beta2"
FLAVOR = "kueue-shapes-rf"


@dataclass(frozen=True)
class WorkloadClass:
    """One of Kueue's workload creators, per ClusterQueue: `count` workloads, one every `interval_ms`."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int


BASELINE = (
    WorkloadClass("small", 350, 100, 200, 50, 1),
    WorkloadClass("medium", 100, 500, 500, 100, 5),
    WorkloadClass("large", 50, 1200, 1000, 200, 20),
)
BASELINE_TOTAL = COHORTS * QUEUES_PER_COHORT * sum(c.count for c in BASELINE)


def scaled(scale: float) -> tuple[WorkloadClass, ...]:
    """Kueue's baseline creators with each count scaled by `scale` (at least one each); intervals, run times,
    priorities and sizes as Kueue's."""
    if not (math.isfinite(scale) and 0 < scale <= 1):
        raise ValueError(f"--kueue-scale must be in (0, 1], got {scale!r}")
    return tuple(
        WorkloadClass(c.name, max(1, round(c.count * scale)), c.interval_ms, c.runtime_ms, c.priority, c.cpu)
        for c in BASELINE
    )


def total(classes: Sequence[WorkloadClass]) -> int:
    """TrainJobs in the whole scenario: every ClusterQueue gets every creator's count."""
    return COHORTS * QUEUES_PER_COHORT * sum(c.count for c in classes)


def scaled_gate_s(classes: Sequence[WorkloadClass]) -> float:
    """Kueue's gate for as many workloads as `classes` make, in proportion to its 15,000."""
    return GATE_S * total(classes) / BASELINE_TOTAL


def timeout_s(classes: Sequence[WorkloadClass]) -> float:
    """How long a column may run after its creators end: 10 times Kueue's scaled gate, and at least 0.5 s per
    TrainJob (Kueue's one TrainJob worker took 0.26-0.30 s per TrainJob at S = 0.05, docs/performance.md), and at
    least 10 minutes."""
    return max(600.0, 10 * scaled_gate_s(classes), 0.5 * total(classes))


def creation_span_s(classes: Sequence[WorkloadClass]) -> float:
    """How long the creators run: each waits its interval before each create, all at once."""
    return max(c.count * c.interval_ms for c in classes) / 1000


def queues(run: str) -> list[tuple[str, str]]:
    """(cohort, ClusterQueue) names of one run; each ClusterQueue's namespace and LocalQueue take its name."""
    return [(f"{run}-cohort-{i}", f"{run}-cq-{i}-{j}") for i in range(COHORTS) for j in range(QUEUES_PER_COHORT)]


def cluster_queue(run: str, name: str, cohort: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_GROUP,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {RUN_LABEL: run}},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": NOMINAL_CPU, "borrowingLimit": BORROWING_LIMIT_CPU}
                            ],
                        }
                    ],
                }
            ],
        },
    }


def priority_class(cls: WorkloadClass) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_GROUP,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": f"kueue-shapes-{cls.name}"},
        "value": cls.priority,
    }


def shaped_trainjob(namespace: str, name: str, cls: WorkloadClass, runtime: str) -> dict[str, Any]:
    """One of Kueue's workloads as a TrainJob: one node asking the workload's CPU, queued (suspended) on the
    namespace's LocalQueue at the class's priority."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {QUEUE_LABEL: namespace, PRIORITY_LABEL: f"kueue-shapes-{cls.name}"},
        },
        "spec": {
            "runtimeRef": {"name": runtime},
            "suspend": True,
            "trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": str(cls.cpu)}}},
        },
    }


def shaped_workload(namespace: str, name: str, cls: WorkloadClass) -> dict[str, Any]:
    """One of Kueue's workloads as Kueue's own runner makes it (no job, no operator): a Workload of one pod asking
    the class's CPU, on the namespace's LocalQueue, at the class's priority."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": str(cls.cpu)}}}],
    }
    return {
        "apiVersion": KUEUE_GROUP,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: "direct"}},
        "spec": {
            "queueName": namespace,
            "priority": cls.priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}],
        },
    }


def finished_status(name: str, namespace: str, stamp: str) -> dict[str, Any]:
    """The server-side apply of the Finished condition on a Workload's status, as Kueue's runner sets it."""
    condition = {
        "type": "Finished",
        "status": "True",
        "reason": "ByTest",
        "message": "By test runner",
        "lastTransitionTime": stamp,
    }
    return {
        "apiVersion": KUEUE_GROUP,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [condition]},
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _last(times: Mapping[str, float], start: float, n: int) -> float | None:
    """Seconds from `start` to the last of `n` moments, or None while fewer than `n` are there."""
    return max(times.values()) - start if len(times) >= n and times else None


def summary(
    n: int,
    start: float,
    admitted: Mapping[str, float],
    jobsets: Mapping[str, float],
    resumed: Mapping[str, float],
    running: Mapping[str, float],
    finished: Mapping[str, float],
    gate_s: float,
) -> dict[str, Any]:
    """The run's figures from the first moment each object was seen so (keys: namespace/name): until all Workloads
    admitted, all JobSets there, all unsuspended, all TrainJobs Complete; Kueue's unsuspend of a TrainJob to its
    JobSet unsuspended (both first times); the wall (all Complete) against Kueue's gate scaled."""
    latencies = [running[k] - resumed[k] for k in running if k in resumed]
    wall = _last(finished, start, n)
    return {
        "n": n,
        "admitted": len(admitted),
        "jobsets": len(jobsets),
        "unsuspended": len(running),
        "finished": len(finished),
        "all_admitted_s": _last(admitted, start, n),
        "all_jobsets_s": _last(jobsets, start, n),
        "all_unsuspended_s": _last(running, start, n),
        "all_finished_s": wall,
        "p50_ms": _ms(percentile(latencies, 50)),
        "p99_ms": _ms(percentile(latencies, 99)),
        "max_ms": _ms(max(latencies) if latencies else None),
        "gate_s": gate_s,
        "within_gate": wall is not None and wall <= gate_s,
    }


def time_to_admission(created: Mapping[str, float], admitted: Mapping[str, float]) -> dict[str, float]:
    """Per class (the TrainJob's name up to its first "-"), the mean seconds from its create to its Workload first
    admitted: Kueue's `wlClassesMaxAvgTimeToAdmissionMs`, for the TrainJobs admitted."""
    spans: dict[str, list[float]] = {}
    for key, at in admitted.items():
        if key in created:
            spans.setdefault(key.rsplit("/", 1)[-1].split("-", 1)[0], []).append(at - created[key])
    return {name: sum(values) / len(values) for name, values in sorted(spans.items())}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# ---------------------------------------------------------------------------------------------------- one run


async def _create(client: Any, path: str, obj: dict[str, Any]) -> None:
    from trainjob_operator.k8s.client import ApiError

    try:
        await client.request("POST", path, body=obj)
    except ApiError as err:
        if not err.conflict:  # the flavor and priority classes, there from an earlier run
            raise


def _cpu_seconds(pid: int | None) -> float:
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(x.get("type") == kind and x.get("status") == "True" for x in conditions)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    from kubeclient import connect, watch
    from loadgen import completed_jobset_status

    from trainjob_operator.api import constants as c
    from trainjob_operator.k8s.client import APPLY, Resource, RESTMapper

    classes = scaled(args.scale)
    n = total(classes)
    client = connect(args.kubeconfig)
    mapper = RESTMapper().with_kinds([("Workload", Resource(KUEUE_GROUP, "workloads"))])
    run_id = args.run
    prefix = f"{run_id}-cq-"
    runtime_of: dict[str, float] = {}
    admitted: dict[str, float] = {}
    jobsets: dict[str, float] = {}
    resumed: dict[str, float] = {}
    running: dict[str, float] = {}
    finished: dict[str, float] = {}
    suspended_now: dict[str, bool] = {}
    pending: dict[str, asyncio.Task[None]] = {}
    completed: set[str] = set()
    preempted = 0
    created: dict[str, float] = {}
    evicted: set[str] = set()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    done_status = completed_jobset_status(stamp)

    async def complete_later(key: str) -> None:
        await asyncio.sleep(runtime_of.get(key, 0.0))
        if suspended_now.get(key, True) or key in completed:
            return
        ns, name = key.split("/", 1)
        completed.add(key)
        await client.merge_patch(c.JOBSET_API_VERSION, c.JOBSET_KIND, name, ns, done_status, subresource="status")

    async def follow(
        api_version: str, kind: str, ready: asyncio.Event, seen: Callable[[dict[str, Any], float], None]
    ) -> None:
        async for _, obj, at in watch(client, api_version, kind, "", ready, mapper):
            if obj["metadata"].get("namespace", "").startswith(prefix):
                seen(obj, at)

    async def finish_later(key: str) -> None:  # Kueue alone: its runner's part, Finished the runtime after admission
        await asyncio.sleep(runtime_of.get(key, 0.0))
        ns, name = key.split("/", 1)
        path = f"/apis/{KUEUE_GROUP}/namespaces/{ns}/workloads/{name}/status"
        params = {"fieldManager": "kueue-shapes", "force": "true"}
        await client.request("PATCH", path, body=finished_status(name, ns, stamp), content_type=APPLY, params=params)

    def on_workload(obj: dict[str, Any], at: float) -> None:
        owners = obj["metadata"].get("ownerReferences") or []
        owner = next((o["name"] for o in owners if o.get("kind") == "TrainJob"), obj["metadata"]["name"])
        key = f"{obj['metadata']['namespace']}/{owner}"
        if _condition(obj, "Admitted"):
            admitted.setdefault(key, at)
            if args.direct and key not in pending:
                pending[key] = asyncio.create_task(finish_later(key))
        if args.direct and _condition(obj, "Finished"):
            finished.setdefault(key, at)
        if _condition(obj, "Evicted"):
            evicted.add(f"{obj['metadata']['namespace']}/{owner}")

    def on_trainjob(obj: dict[str, Any], at: float) -> None:
        if obj["spec"].get("suspend") is False:
            resumed.setdefault(_key(obj), at)
        if _condition(obj, "Complete"):
            finished.setdefault(_key(obj), at)

    def on_jobset(obj: dict[str, Any], at: float) -> None:
        nonlocal preempted
        key = _key(obj)
        jobsets.setdefault(key, at)
        suspend = bool(obj["spec"].get("suspend"))
        was = suspended_now.get(key, True)
        suspended_now[key] = suspend
        if not suspend and was and key not in completed:
            running.setdefault(key, at)
            pending[key] = asyncio.create_task(complete_later(key))
        elif suspend and not was:
            preempted += 1
            task = pending.pop(key, None)
            if task is not None:
                task.cancel()

    kinds = [(KUEUE_GROUP, "Workload", on_workload)]
    if not args.direct:  # Kueue alone has neither TrainJobs nor JobSets (nor, on a bare cluster, their CRDs)
        kinds += [(c.API_VERSION, c.TRAINJOB_KIND, on_trainjob), (c.JOBSET_API_VERSION, c.JOBSET_KIND, on_jobset)]
    ready = [asyncio.Event() for _ in kinds]
    watchers = [asyncio.create_task(follow(a, k, e, seen)) for (a, k, seen), e in zip(kinds, ready, strict=True)]
    flavor = {"apiVersion": KUEUE_GROUP, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}}
    await _create(client, f"/apis/{KUEUE_GROUP}/resourceflavors", flavor)
    for cls in classes:
        await _create(client, f"/apis/{KUEUE_GROUP}/workloadpriorityclasses", priority_class(cls))
    for event, watcher in zip(ready, watchers, strict=True):
        await asyncio.wait([asyncio.ensure_future(event.wait()), watcher], return_when=asyncio.FIRST_COMPLETED)
        if watcher.done():  # its LIST failed (a kind not served): say which, rather than wait for ever
            watcher.result()
    cpu_before = _cpu_seconds(args.operator_pid)
    start = time.monotonic()

    async def creator(ns: str, cls: WorkloadClass) -> None:
        for i in range(cls.count):  # as Kueue's generator: wait the interval, then create
            await asyncio.sleep(cls.interval_ms / 1000)
            name = f"{cls.name}-{i}"
            runtime_of[f"{ns}/{name}"] = cls.runtime_ms / 1000
            if args.direct:
                await client.request(
                    "POST", f"/apis/{KUEUE_GROUP}/namespaces/{ns}/workloads", body=shaped_workload(ns, name, cls)
                )
            else:
                await client.create(shaped_trainjob(ns, name, cls, args.runtime))
            created[f"{ns}/{name}"] = time.monotonic()

    async def queue(cohort: str, name: str) -> None:
        await _create(client, f"/apis/{KUEUE_GROUP}/clusterqueues", cluster_queue(run_id, name, cohort))
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {RUN_LABEL: run_id}}}
        await _create(client, "/api/v1/namespaces", ns)
        local = {
            "apiVersion": KUEUE_GROUP,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": name},
            "spec": {"clusterQueue": name},
        }
        await _create(client, f"/apis/{KUEUE_GROUP}/namespaces/{name}/localqueues", local)
        await asyncio.gather(*(creator(name, cls) for cls in classes))

    await asyncio.gather(*(queue(cohort, name) for cohort, name in queues(run_id)))
    created_s = time.monotonic() - start
    deadline = time.monotonic() + args.timeout
    while len(finished) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    cpu = _cpu_seconds(args.operator_pid) - cpu_before
    for task in [*watchers, *pending.values()]:
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(*watchers, *pending.values(), return_exceptions=True)
    await client.close()
    result = summary(n, start, admitted, jobsets, resumed, running, finished, scaled_gate_s(classes))
    result.update(
        scale=args.scale,
        created_s=created_s,
        preemptions=preempted,
        evicted=len(evicted),
        time_to_admission_s=time_to_admission(created, admitted),
        operator_cpu_s=cpu,
        counts={c.name: c.count for c in classes},
    )
    return result


# ---------------------------------------------------------------------------------------------------- profiling


@dataclass(frozen=True)
class Profiling:
    """Kueue's pprof endpoint and its metrics (HTTPS, a bearer token with the right to read them), both on
    127.0.0.1; a CPU profile of `seconds` taken `after` seconds into each column (from 0 in Kueue alone's, which is
    over in seconds)."""

    pprof_port: int
    metrics_port: int
    token: str
    seconds: float
    after: float


METRICS_ACCOUNT = "kueue-shapes-metrics"
"""The ServiceAccount (in kueue-system, bound to cluster-admin) whose token reads Kueue's metrics: Kueue serves
them behind a TokenReview and a SubjectAccessReview (controller-runtime's filters), with no opt-out."""
WRITES_OF = ("trainjobs", "jobsets", "workloads")
"""The kinds whose requests a profiled column counts (apiserver_request_total, every client's)."""


def enable_profiling(
    cluster: Any, info: Any, seconds: float, after: float, concurrency: Mapping[str, int] | None = None
) -> Profiling:
    """Restart the cluster's Kueue with `pprofBindAddress` and its metrics bound to free ports of 127.0.0.1 (its
    other settings and its webhook port as the harness started it), and make a token that may read the metrics.
    `concurrency`: Kueue's `controller.groupKindConcurrency` (say `{"TrainJob.trainer.kubeflow.org": 5}`), for an
    experiment; none: controller-runtime's 1 per controller, as the harness starts Kueue."""
    from harness.plumbing import free_ports

    controller = info.controllers["kueue"]
    config = json.loads((cluster.state_dir() / "kueue-config.json").read_text())
    pprof, metrics = free_ports(2)
    config["pprofBindAddress"] = f"127.0.0.1:{pprof}"
    config["metrics"] = {**config.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics}"}
    if concurrency:
        config["controller"] = {**config.get("controller", {}), "groupKindConcurrency": dict(concurrency)}
    cluster.stop_controller("kueue", controller)
    cluster.start_controller(info, "kueue", Path(controller["binary"]), config, int(controller["health_port"]))
    ns = "kueue-system"
    info.kubectl("create", "serviceaccount", METRICS_ACCOUNT, "-n", ns, check=False)
    role = ["--clusterrole=cluster-admin", f"--serviceaccount={ns}:{METRICS_ACCOUNT}"]
    info.kubectl("create", "clusterrolebinding", METRICS_ACCOUNT, *role, check=False)
    token = info.kubectl("create", "token", METRICS_ACCOUNT, "-n", ns, "--duration=24h").stdout.strip()
    return Profiling(pprof, metrics, token, seconds, after)


def concurrency(text: str) -> dict[str, int]:
    """`Kind.group=N,...` as Kueue's `controller.groupKindConcurrency` (empty: none)."""
    out: dict[str, int] = {}
    for item in text.split(","):
        kind, _, n = item.strip().partition("=")
        if kind:
            out[kind.strip()] = int(n)
    return out


def counters(text: str, metric: str, keys: Sequence[str]) -> dict[tuple[str, ...], float]:
    """A Prometheus text exposition's `metric` summed by the values of the labels `keys` (a missing label: "")."""
    totals: dict[tuple[str, ...], float] = {}
    for line in text.splitlines():
        if not line.startswith(metric + "{"):
            continue
        labels_text, value = line[len(metric) + 1 :].rsplit("} ", 1)
        labels = {k: v.strip('"') for k, v in (part.split("=", 1) for part in labels_text.split(",") if "=" in part)}
        key = tuple(labels.get(k, "") for k in keys)
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def grown(before: Mapping[tuple[str, ...], float], after: Mapping[tuple[str, ...], float]) -> dict[str, float]:
    """What each counter grew by between two readings (a key joined by spaces, empty parts left out), largest
    first, those that did not grow left out."""
    diff = {" ".join(p for p in key if p): after[key] - before.get(key, 0.0) for key in after}
    return dict(sorted(((k, v) for k, v in diff.items() if v > 0), key=lambda kv: -kv[1]))


def kueue_metrics(profiling: Profiling) -> str:
    """Kueue's metrics text (its serving certificate is the harness's own: not verified, on 127.0.0.1)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{profiling.metrics_port}/metrics", headers={"Authorization": f"Bearer {profiling.token}"}
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        return str(response.read().decode())


def readings(info: Any, profiling: Profiling) -> dict[str, dict[tuple[str, ...], float]]:
    """The counters a profiled column compares before and after: Kueue's reconciles by controller and result, the
    webhook requests Kueue served by path, and the API server's requests of TrainJobs, JobSets and Workloads by
    verb, resource, subresource and dry run."""
    from loadgen import programs_cpu

    kueue = kueue_metrics(profiling)
    api = info.kubectl("get", "--raw", "/metrics", timeout=60).stdout
    requests = counters(api, "apiserver_request_total", ("verb", "resource", "subresource", "dry_run"))
    return {
        "kueue_reconciles": counters(kueue, "controller_runtime_reconcile_total", ("controller", "result")),
        "kueue_reconcile_s": counters(kueue, "controller_runtime_reconcile_time_seconds_sum", ("controller",)),
        "kueue_queue_wait_s": counters(kueue, "workqueue_queue_duration_seconds_sum", ("name",)),
        "kueue_webhook_requests": counters(kueue, "controller_runtime_webhook_requests_total", ("webhook",)),
        "kueue_webhook_s": counters(kueue, "controller_runtime_webhook_latency_seconds_sum", ("webhook",)),
        "api_requests": {k: v for k, v in requests.items() if k[1] in WRITES_OF},
        "cpu_s": {
            (name,): cpu
            for name, cpu in programs_cpu(os.environ.get("TRAINJOB_CLUSTER_DIR", "").encode(), PROGRAMS).items()
        },
        "machine_cpu_s": machine_cpu(),
    }


PROGRAMS = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller", "kueue")
"""The control plane's programs whose CPU a profiled column counts (the operator's is a row of its own)."""


def machine_cpu() -> dict[tuple[str, ...], float]:
    """The machine's CPU seconds so far, every process's (other work on the machine too), busy and idle."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle + iowait
    return {("busy",): (sum(fields[:8]) - idle) / tick, ("idle",): idle / tick}


def profile_later(profiling: Profiling, after: float, path: Path) -> threading.Thread:
    """A thread that waits `after` seconds, then saves Kueue's CPU profile of `profiling.seconds` to `path`."""

    def take() -> None:
        time.sleep(after)  # a point in the column's timeline, not a wait for a condition
        url = f"http://127.0.0.1:{profiling.pprof_port}/debug/pprof/profile?seconds={round(profiling.seconds)}"
        with urllib.request.urlopen(url, timeout=profiling.seconds + 120) as response:
            path.write_bytes(response.read())

    thread = threading.Thread(target=take, name=f"pprof {path.name}", daemon=True)
    thread.start()
    return thread


def pprof_top(path: Path, lines: int = 40) -> dict[str, Any]:
    """`go tool pprof -top` of a saved profile, flat and cumulative, the first `lines` lines each."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out: dict[str, Any] = {"profile": str(path)}
    for key, extra in (("top", []), ("top_cum", ["-cum"])):
        command = [go, "tool", "pprof", "-top", *extra, f"-nodecount={lines}", str(path)]
        text = subprocess.run(command, capture_output=True, text=True, check=False)
        path.with_suffix(f".{key}.txt").write_text(text.stdout + text.stderr)
        out[key] = (text.stdout or text.stderr).splitlines()[: lines + 8]
    return out


# ---------------------------------------------------------------------------------------------------- the section


ROWS = (
    ("all_admitted_s", "until all Workloads admitted (s)"),
    ("all_jobsets_s", "until all JobSets exist (s)"),
    ("all_unsuspended_s", "until all JobSets unsuspended (s)"),
    ("all_finished_s", "until all TrainJobs Complete: Kueue's wall (s)"),
    ("p50_ms", "Kueue's unsuspend → JobSet unsuspended, p50 (ms)"),
    ("p99_ms", "Kueue's unsuspend → JobSet unsuspended, p99 (ms)"),
    ("max_ms", "Kueue's unsuspend → JobSet unsuspended, max (ms)"),
    ("evicted", "Workloads evicted (preempted) at least once"),
    ("preemptions", "JobSets suspended again by a preemption"),
    ("operator_cpu_s", "operator CPU (s)"),
    ("kueue_cpu_s", "Kueue's CPU (s)"),
)
ALONE = "Kueue alone"
"""The column of Workloads made directly, as Kueue's own runner makes them: no TrainJob, no JobSet, no operator; the
same scenario's pace of Kueue on this machine, the fair gate beside Kueue's own machine's."""
KUEUE_CLASS_GATES_S = {"small": 260.0, "medium": 90.0, "large": 23.0}
"""Kueue's `wlClassesMaxAvgTimeToAdmissionMs` at its full 15,000 (its machine), in seconds."""


def kueue_cpu_seconds(cluster_dir: str) -> float:
    """CPU seconds (user + system) so far of the Kueue process of the cluster in `cluster_dir` (its command line
    names its config there); 0 when there is none."""
    from loadgen import programs_cpu

    return programs_cpu(cluster_dir.encode(), ("kueue",)).get("kueue", 0.0)


def section(
    cluster: Any,
    prepare: Callable[[Any], None],
    contenders: Sequence[Any],
    scale: float,
    runs: int,
    logs: Path,
    settings: Any,
    profile: tuple[float, float, Mapping[str, int] | None] | None = None,
) -> dict[str, Any]:
    """On a control plane with Kueue: per run, each contender in turn on a fresh set of queues; medians. With
    `profile` (seconds, after, concurrency): Kueue restarted with pprof and metrics, and each column profiled
    (`Profiling`, `enable_profiling`)."""
    classes = scaled(scale)
    info = cluster.up(kueue=True)
    prepare(info)
    profiling = enable_profiling(cluster, info, *profile) if profile else None
    results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in contenders}
    results[ALONE] = []
    for r in range(runs):
        for contender in [*contenders, None]:  # None: Kueue alone, Workloads as its runner makes them
            name = contender.name if contender is not None else ALONE
            run_id = f"ks{r}{''.join(ch for ch in name.lower() if ch.isalpha())[:2]}{os.getpid() % 1000}"
            process = contender.start(info, settings, logs) if contender is not None else None
            kueue_before = kueue_cpu_seconds(os.environ.get("TRAINJOB_CLUSTER_DIR", ""))
            command = [sys.executable, str(BENCH / "kueue_shapes.py"), "--kubeconfig", str(info.kubeconfig)]
            command += [
                "--scale",
                str(scale),
                "--run",
                run_id,
                "--timeout",
                str(timeout_s(classes)),
            ]
            command += ["--operator-pid", str(process.proc.pid)] if process is not None else ["--direct"]
            try:
                load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                if profiling is not None:
                    before = readings(info, profiling)
                    pprof_file = logs / f"kueue-cpu-{run_id}.pprof"
                    taker = profile_later(profiling, profiling.after if contender is not None else 0.0, pprof_file)
                out = subprocess.run(command, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"bench: Kueue shapes, {name}: the run failed:\n{out.stderr[-3000:]}")
                result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
                result["load_before"] = load
                result["kueue_cpu_s"] = kueue_cpu_seconds(os.environ.get("TRAINJOB_CLUSTER_DIR", "")) - kueue_before
                result["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                if profiling is not None:
                    after = readings(info, profiling)
                    result["counted"] = {key: grown(before[key], after[key]) for key in after}
                    taker.join(profiling.seconds + 180)
                    if pprof_file.exists():
                        result["kueue_profile"] = pprof_top(pprof_file)
            finally:
                if process is not None:
                    process.stop()
                info.kubectl("delete", "namespace", "-l", f"{RUN_LABEL}={run_id}", "--wait=false", check=False)
                info.kubectl("delete", "clusterqueue", "-l", f"{RUN_LABEL}={run_id}", "--wait=false", check=False)
            results[name].append(result)
            print(f"bench: Kueue shapes S={scale} {name} run {r + 1}: {_line(result)}", flush=True)
            wait_gone(info, run_id)
    return {
        "scale": scale,
        "n": total(classes),
        "kueue_concurrency": dict(profile[2] or {}) if profile else {},
        "counts_per_cluster_queue": {c.name: c.count for c in classes},
        "gate_s": scaled_gate_s(classes),
        "runs": results,
        "medians": {name: medians(runs_of) for name, runs_of in results.items()},
    }


def wait_gone(info: Any, run_id: str, timeout: float = 1800) -> None:
    """Until the run's namespaces are gone (their TrainJobs, JobSets and Workloads with them): the next run starts
    on a quiet control plane."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = info.kubectl("get", "namespace", "-l", f"{RUN_LABEL}={run_id}", "-o", "name", check=False).stdout
        if not left.strip():
            return
        time.sleep(2)


def _line(result: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {_fmt(result.get(key))}" for key, _ in ROWS) + (
        f", {result.get('finished')}/{result.get('n')} finished, gate {result.get('gate_s', 0):.1f}s, "
        f"load {result.get('load_before')} → {result.get('load_after')}"
    )


def medians(runs_of: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """Per row, the median of the runs that have it (a run cut short by its timeout has no wall)."""
    import statistics

    runs_list = list(runs_of)
    out: dict[str, float | None] = {}
    for key, _ in ROWS:
        values = [r[key] for r in runs_list if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    for name in KUEUE_CLASS_GATES_S:
        values = [r["time_to_admission_s"][name] for r in runs_list if name in r.get("time_to_admission_s", {})]
        out[f"admission_{name}_s"] = statistics.median(values) if values else None
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def markdown(report: Mapping[str, Any] | None) -> str:
    """The section's table: a row per figure, a column per contender (medians), Kueue's gate beside the wall."""
    if not report:
        return ""
    names = list(report["medians"])
    lines = [
        "",
        f"## Kueue's baseline shapes with TrainJobs (S = {report['scale']}: {report['n']} TrainJobs, "
        f"{report['counts_per_cluster_queue']} per ClusterQueue × {COHORTS * QUEUES_PER_COHORT})",
        "",
        f"Kueue's own gate scaled to S: {report['gate_s']:.1f} s (425 s for 15,000 on Kueue's machine, minimalkueue).",
        "",
        "| median | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(_fmt(report["medians"][n].get(key)) for n in names) + " |")
    for cls, gate in KUEUE_CLASS_GATES_S.items():
        label = f"mean time to admission, {cls} (s; Kueue's gate at 15,000: {gate:.0f})"
        lines.append(
            f"| {label} | " + " | ".join(_fmt(report["medians"][n].get(f"admission_{cls}_s")) for n in names) + " |"
        )
    return "\n".join(lines + counted_rows(report, names)) + "\n"


def counted_rows(report: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """A profiled section's counts, the first run's per column: Kueue's reconciles by controller and result and
    their seconds, the seconds its work queues held items, its webhook requests and their seconds, and every client's requests of TrainJobs, JobSets and Workloads (verb resource subresource
    dry run); with the profiles' files."""
    first = {n: (report.get("runs", {}).get(n) or [{}])[0] for n in names}
    if not any("counted" in r for r in first.values()):
        return []
    lines = ["", "Counted in the first run (a profiled run):", "", "| count | " + " | ".join(names) + " |"]
    lines.append("|---" * (len(names) + 1) + "|")
    groups = (
        "kueue_reconciles",
        "kueue_reconcile_s",
        "kueue_queue_wait_s",
        "kueue_webhook_requests",
        "kueue_webhook_s",
    )
    for group in (*groups, "api_requests"):
        keys = sorted({k for r in first.values() for k in r.get("counted", {}).get(group, {})})
        for key in keys:
            cells = [_fmt(first[n].get("counted", {}).get(group, {}).get(key)) for n in names]
            lines.append(f"| {group}: {key} | " + " | ".join(cells) + " |")
    for n in names:
        if "kueue_profile" in first[n]:
            lines.append(f"\nKueue's CPU profile, {n}: `{first[n]['kueue_profile']['profile']}`")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scale", type=float, default=0.02)
    parser.add_argument("--run", required=True, help="this run's prefix for its queues and namespaces")
    parser.add_argument("--runtime", default="torch-distributed")
    parser.add_argument("--operator-pid", type=int)
    parser.add_argument("--direct", action="store_true", help="Kueue alone: Workloads, as Kueue's own runner makes")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds after the creators end")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

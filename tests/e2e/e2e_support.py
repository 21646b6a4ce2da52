"""Shared pieces of the end-to-end tests: the default runtimes, TrainJob builders, kwok pod behaviour
through runtime patches, bounded waits and the session summary."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from operator_fixtures import OPERATOR_NAMESPACE, Kube, OperatorProcess, condition, eventually

REPO = Path(__file__).resolve().parents[2]
RUNTIMES_DIR = REPO / "runtimes"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUN_FOR = "trainjob-operator.test/run-for"
EXIT_CODE = "trainjob-operator.test/exit-code"
KWOK_MANAGER = "e2e.trainjob-operator.test/kwok"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETE = ("AllJobsCompleted", "jobset completed successfully")
FAILED = ("FailedJobs", "jobset failed due to one or more job failures")


def default_runtime_names() -> list[str]:
    return sorted(yaml.safe_load(p.read_text())["metadata"]["name"] for p in RUNTIMES_DIR.glob("*.yaml"))


@pytest.fixture(scope="session")
def default_runtimes(kube: Kube, operator: OperatorProcess) -> Iterator[list[str]]:
    """Our default ClusterTrainingRuntimes (runtimes/*.yaml), applied through our webhooks."""
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(RUNTIMES_DIR))
    names = default_runtime_names()
    # Every admission webhook on TrainJobs must accept one before the tests start: with Kueue in the cluster its
    # TrainJob webhook answers "unsupported runtime" until Kueue noticed the Trainer CRDs (it polls for them,
    # up to about a minute after they are installed).
    probe = trainjob("e2e-admission-probe", "torch-distributed")

    def admitted() -> bool:
        result = kube.run(
            "create", "--dry-run=server", "-n", OPERATOR_NAMESPACE, "-f", "-", stdin=yaml.safe_dump(probe), check=False
        )
        return result.returncode == 0

    eventually(admitted, "TrainJob admission by every webhook (ours, Kueue's)", timeout=150)
    yield names
    for name in names:
        kube.delete("clustertrainingruntime", name)


def trainjob(
    name: str, runtime: str, *, kind: str = "ClusterTrainingRuntime", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": meta,
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}, **spec},
    }


def kwok_patch(jobs: dict[str, dict[str, str]], manager: str = KWOK_MANAGER) -> dict[str, Any]:
    """A runtime patch putting kwok's behaviour annotations on the pods of the named replicated jobs."""
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": job, "template": {"spec": {"template": {"metadata": {"annotations": annotations}}}}}
                        for job, annotations in jobs.items()
                    ]
                }
            }
        },
    }


def get(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    return kube.existing(kind, name, namespace)


def wait_condition(kube: Kube, namespace: str, name: str, type_: str, timeout: float = 90) -> dict[str, Any]:
    """The TrainJob's condition `type_` once it is True (bounded)."""

    def check() -> dict[str, Any] | None:
        cond = condition(kube.get("trainjob", name, namespace), type_)
        return cond if cond and cond.get("status") == "True" else None

    found: dict[str, Any] = eventually(check, f"TrainJob {namespace}/{name} {type_}=True", timeout=timeout)
    return found


def pods(kube: Kube, namespace: str, trainjob_name: str, rjob: str | None = None) -> list[dict[str, Any]]:
    selector = f"{JOBSET_NAME}={trainjob_name}" + (f",{RJOB_NAME}={rjob}" if rjob else "")
    items: list[dict[str, Any]] = json.loads(
        kube.run("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    )["items"]
    return items


def container(pod_spec: dict[str, Any], name: str = "node") -> dict[str, Any]:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


KUEUE_MANAGER = "kueue.x-k8s.io/manager"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR_LABELS = {"nvidia.com/gpu.product": "Fake-GPU"}


KUEUE_API = "kueue.x-k8s.io/v1beta2"


def kueue_object(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    """A cluster-scoped Kueue object (`spec=...`, or top-level fields such as a WorkloadPriorityClass's `value`)."""
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": {"name": name}, **fields}


@contextlib.contextmanager
def gpu_queue(
    kube: Kube,
    namespace: str,
    local_queue: str,
    *,
    gpus: int,
    flavor_spec: dict[str, Any] | None = None,
    queue_spec: dict[str, Any] | None = None,
    extra: Sequence[dict[str, Any]] = (),
) -> Iterator[str]:
    """The cluster-scoped `extra` objects (a Topology, WorkloadPriorityClasses), a ResourceFlavor, a ClusterQueue
    with `gpus` GPUs for the namespace and the LocalQueue `local_queue` in it, active; afterwards the namespace's
    TrainJobs and all of these are deleted."""
    suffix = uuid.uuid4().hex[:6]
    flavor, cq = f"e2e-flavor-{suffix}", f"e2e-cq-{suffix}"
    cluster_queue = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}],
            }
        ],
        **(queue_spec or {}),
    }
    created = [
        *extra,
        kueue_object("ResourceFlavor", flavor, spec=flavor_spec or {}),
        kueue_object("ClusterQueue", cq, spec=cluster_queue),
    ]
    kube.apply(*created)
    local = kueue_object("LocalQueue", local_queue, spec={"clusterQueue": cq})
    kube.apply(local, namespace=namespace)
    eventually(
        lambda: (q := kube.get("clusterqueue", cq)) and (condition(q, "Active") or {}).get("status") == "True",
        "the ClusterQueue active",
        timeout=30,
    )
    try:
        yield local_queue
    finally:
        kube.run("delete", "trainjobs", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)
        kube.run("delete", "localqueue", local_queue, "-n", namespace, "--wait=true", "--timeout=30s", check=False)
        for obj in reversed(created):
            kube.delete(obj["kind"].lower(), obj["metadata"]["name"])


@pytest.fixture
def local_queue(kube: Kube, namespace: str, operator: OperatorProcess, default_runtimes: list[str]) -> Iterator[str]:
    """ResourceFlavor (with node labels) + ClusterQueue (8 GPUs) + LocalQueue in the test namespace."""
    with gpu_queue(
        kube,
        namespace,
        "team",
        gpus=8,
        flavor_spec={"nodeLabels": FLAVOR_LABELS},
        queue_spec={"queueingStrategy": "BestEffortFIFO"},
    ) as queue:
        yield queue


def queued_job(name: str, queue: str, run_for: str) -> dict[str, Any]:
    return trainjob(
        name,
        "torch-distributed",
        labels={QUEUE_LABEL: queue},
        trainer={
            "numNodes": 1,
            "command": ["torchrun", "train.py"],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}},
        },
        runtimePatches=[kwok_patch({"node": {RUN_FOR: run_for}})],
    )


# ---------------------------------------------------------------------------------------------------------------
# Session summary: what ran and how long it took.

_TIMES: dict[str, dict[str, Any]] = {}
_SESSION_START: list[float] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "differential: our operator against upstream Kubeflow Trainer v2.3.0 (make test-differential)"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION_START.append(time.monotonic())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "/e2e/" not in report.nodeid and not report.nodeid.startswith("e2e/"):
        return
    entry = _TIMES.setdefault(report.nodeid, {"duration": 0.0, "outcome": "passed"})
    entry["duration"] += report.duration
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else f"error ({report.when})"
    elif getattr(report, "wasxfail", None) is not None:
        entry["outcome"] = "xfailed" if report.skipped else "xpassed"
    elif report.skipped and report.when != "teardown":
        entry["outcome"] = "skipped"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _TIMES:
        return
    total = time.monotonic() - _SESSION_START[0] if _SESSION_START else sum(e["duration"] for e in _TIMES.values())
    tr = terminalreporter
    tr.section("e2e summary")
    width = max(len(n) for n in _TIMES)
    for nodeid, entry in _TIMES.items():
        tr.write_line(f"{nodeid:<{width}}  {entry['outcome']:<16} {entry['duration']:7.1f}s")
    counts: dict[str, int] = {}
    for entry in _TIMES.values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    tests_time = sum(e["duration"] for e in _TIMES.values())
    tr.write_line(
        f"{len(_TIMES)} e2e tests ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}); "
        f"{tests_time:.1f}s in tests (setup, call and teardown), {total:.1f}s wall for the session "
        f"(including cluster and operator start-up)"
    )

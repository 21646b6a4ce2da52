"""Kueue's MultiKueue on local control planes: one manager and one or more workers, each a `cluster.py` cluster (its
own kube-apiserver, etcd, kwok nodes, JobSet and Kueue), wired together as Kueue's MultiKueue documentation says
(site/content/en/docs/tasks/run/multikueue/): on the manager a Secret in kueue-system with each worker's kubeconfig
(credentials embedded: Kueue refuses file paths), a MultiKueueCluster per worker, a MultiKueueConfig listing them,
an AdmissionCheck of controller `kueue.x-k8s.io/multikueue` and a ClusterQueue that requires it; on every cluster the
namespace's LocalQueue and a ClusterQueue with quota. Runtimes must exist on every worker (the caller applies them,
through the operator that serves them there).

Each member lives in its own state directory and kwok cluster name, derived from `TRAINJOB_CLUSTER_DIR` and
`TRAINJOB_CLUSTER_NAME` (``<dir>/manager``, ``<name>-manager``, ``<dir>/worker1``, ...), so a fleet runs beside the
single-cluster harness and beside other fleets. Usable as::

    .venv/bin/python hack/harness/multikueue.py up [--workers 2]
    .venv/bin/python hack/harness/multikueue.py down [--workers 2]

or from Python (tests/e2e/test_multikueue.py)::

    fleet = multikueue.up(workers=("worker1",))
    multikueue.connect(fleet)
    multikueue.queues(fleet, "team-a", gpus=8)
    ...
    multikueue.down(("worker1",))

Standard library and `cluster.py` only. Developer tooling: not part of the wheel.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import cluster

MANAGER = "manager"
DEFAULT_WORKERS = ("worker1",)
#: Kueue v0.19 serves v1beta1 and v1beta2 (storage); v0.20 serves only v1beta2.
KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "multikueue"
FLAVOR = "gpu"
FLAVOR_LABELS = {"nvidia.com/gpu.product": "Fake-GPU"}
#: How long the manager keeps a workload admitted on a worker it lost (Kueue's default is 15 minutes).
DEFAULT_WORKER_LOST_TIMEOUT_S = 30
#: Kueue's garbage collector of orphaned remote objects (its default is 1 minute).
DEFAULT_GC_INTERVAL_S = 10


@dataclasses.dataclass
class Fleet:
    """The running members: the manager and the workers by name."""

    manager: cluster.ClusterInfo
    workers: dict[str, cluster.ClusterInfo]

    def members(self) -> dict[str, cluster.ClusterInfo]:
        return {MANAGER: self.manager, **self.workers}


def _base() -> tuple[Path, str]:
    return cluster.state_dir(), cluster.cluster_name()


@contextlib.contextmanager
def member(role: str) -> Iterator[None]:
    """cluster.py's functions aimed at one member: its state directory and kwok cluster name in the environment
    (cluster.py reads them at each call) for the duration."""
    base_dir, base_name = _base()
    saved = {k: os.environ.get(k) for k in ("TRAINJOB_CLUSTER_DIR", "TRAINJOB_CLUSTER_NAME")}
    os.environ["TRAINJOB_CLUSTER_DIR"] = str(base_dir / role)
    os.environ["TRAINJOB_CLUSTER_NAME"] = f"{base_name}-{role}"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def manager_kueue_settings(worker_lost_timeout_s: int, gc_interval_s: int) -> dict[str, Any]:
    """What the manager's Kueue configuration adds to the harness's: the MultiKueue gate (on by default since
    v0.9; named so a reader sees it) and short timings, so a lost worker is given up within a test."""
    return {
        "featureGates": {"MultiKueue": True},
        "multiKueue": {
            "gcInterval": f"{gc_interval_s}s",
            "origin": "multikueue-e2e",
            "workerLostTimeout": f"{worker_lost_timeout_s}s",
        },
    }


def _restart_kueue(info: cluster.ClusterInfo, settings: dict[str, Any]) -> None:
    """Kueue again with `settings` merged into the configuration the harness started it with (same ports, so its
    registered webhooks still reach it)."""
    config_path = cluster.state_dir() / "kueue-config.json"
    config = json.loads(config_path.read_text())
    for key, value in settings.items():
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    old = info.controllers["kueue"]
    cluster.stop_controller("kueue", old)
    cluster.start_controller(info, "kueue", Path(old["binary"]), config, int(old["health_port"]))


def up(
    workers: Sequence[str] = DEFAULT_WORKERS,
    *,
    build: bool = True,
    worker_lost_timeout_s: int = DEFAULT_WORKER_LOST_TIMEOUT_S,
    gc_interval_s: int = DEFAULT_GC_INTERVAL_S,
) -> Fleet:
    """Every member up with Kueue and JobSet (Trainer's CRDs installed before Kueue starts, so its TrainJob
    integration is on at once), the manager's Kueue restarted with the MultiKueue settings. A failure tears down
    every member."""
    members: dict[str, cluster.ClusterInfo] = {}
    try:
        for role in (MANAGER, *workers):
            with member(role):
                members[role] = _member_up(build=build and not members)
        with member(MANAGER):
            _restart_kueue(members[MANAGER], manager_kueue_settings(worker_lost_timeout_s, gc_interval_s))
    except BaseException:
        down(workers)
        raise
    return Fleet(members.pop(MANAGER), members)


def _member_up(*, build: bool, attempts: int = 2) -> cluster.ClusterInfo:
    """One member up, once more if it did not come up (cluster.up tore it down): kwokctl picks free ports and binds them
    later, and on a machine running other clusters one can be taken in between (seen: etcd's "bind: address already
    in use")."""
    for attempt in range(1, attempts + 1):
        try:
            return cluster.up(kueue=True, trainer_crds=True, build=build)
        except cluster.ClusterError as exc:
            if attempt == attempts:
                raise
            print(f"multikueue: {cluster.cluster_name()} did not start, again: {str(exc)[:200]}", file=sys.stderr)
    raise AssertionError("unreachable")


def down(workers: Sequence[str] = DEFAULT_WORKERS) -> None:
    """Every member down (idempotent)."""
    for role in (MANAGER, *workers):
        with member(role):
            cluster.down(quiet=True)


def kueue_kubeconfig(info: cluster.ClusterInfo) -> str:
    """The worker's kubeconfig as Kueue accepts it: one context, certificates embedded (no file paths)."""
    return info.kubectl("config", "view", "--raw", "--flatten", "--minify").stdout


def multikueue_objects(workers: dict[str, cluster.ClusterInfo]) -> list[dict[str, Any]]:
    """The manager's cluster-scoped MultiKueue wiring (the Secrets live in kueue-system)."""
    objs: list[dict[str, Any]] = []
    for name, info in workers.items():
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": KUEUE_NAMESPACE},
                "stringData": {"kubeconfig": kueue_kubeconfig(info)},
            }
        )
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}}},
            }
        )
    objs.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": sorted(workers)},
        }
    )
    objs.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG},
            },
        }
    )
    return objs


def queue_objects(namespace: str, gpus: int, *, manager: bool, queue: str = "team") -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue with `gpus` of quota (on the manager requiring the MultiKueue check) and the
    namespace's LocalQueue `queue`. The names are the same on every member: MultiKueue creates the worker's copy
    with the manager's labels, so the LocalQueue it names must exist there too."""
    cq = f"cq-{namespace}"
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": FLAVOR, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}],
            }
        ],
        "preemption": {"withinClusterQueue": "LowerPriority"},
    }
    if manager:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {"nodeLabels": FLAVOR_LABELS},
        },
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec},
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]


def _condition_true(obj: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def connect(fleet: Fleet, timeout: float = 120) -> None:
    """The MultiKueue wiring on the manager; returns once every MultiKueueCluster and the AdmissionCheck are
    Active (Kueue connected to each worker's API server and watches it)."""
    cluster.apply_objects(fleet.manager, multikueue_objects(fleet.workers))

    def active() -> bool:
        clusters = fleet.manager.kubectl_json("get", "multikueueclusters")["items"]
        check = fleet.manager.kubectl_json("get", "admissionchecks", ADMISSION_CHECK)
        return (
            len(clusters) == len(fleet.workers)
            and all(_condition_true(c, "Active") for c in clusters)
            and _condition_true(check, "Active")
        )

    cluster.wait_for("the MultiKueueClusters and the AdmissionCheck Active", active, timeout, interval=1.0)


def queues(
    fleet: Fleet,
    namespace: str,
    gpus: int = 8,
    queue: str = "team",
    timeout: float = 60,
    workers: Sequence[str] | None = None,
) -> None:
    """The namespace (on every member) and its queues on the manager and on `workers` (default: all); returns once
    every ClusterQueue is Active. A worker without the LocalQueue never admits the namespace's TrainJobs, so
    `workers` steers them to the others."""
    with_queues = {MANAGER: fleet.manager} | {
        name: info for name, info in fleet.workers.items() if workers is None or name in workers
    }
    for info in fleet.members().values():
        info.kubectl("create", "namespace", namespace, check=False)
    for role, info in with_queues.items():
        cluster.apply_objects(info, queue_objects(namespace, gpus, manager=role == MANAGER, queue=queue))
    for info in with_queues.values():
        cluster.wait_for(f"ClusterQueue cq-{namespace} Active on {info.name}", _cq_active(info, namespace), timeout)


def _cq_active(info: cluster.ClusterInfo, namespace: str) -> Callable[[], bool]:
    return lambda: _condition_true(info.kubectl_json("get", "clusterqueue", f"cq-{namespace}"), "Active")


def api_server_pid(info: cluster.ClusterInfo, role: str) -> int:
    """The kube-apiserver of one member (kwokctl's binary runtime keeps its pid in the member's state directory)."""
    with member(role):
        state = cluster.state_dir()
    for pidfile in state.glob(f"**/clusters/{info.name}/pids/kube-apiserver.pid"):
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if cmdline and cmdline[0].decode().endswith("kube-apiserver"):
            return pid
    raise cluster.ClusterError(f"no kube-apiserver pid file for {info.name} under {state}")


def stop_api_server(info: cluster.ClusterInfo, role: str) -> None:
    """The member's API server gone (killed): the manager loses that worker. Not undone: tear the fleet down."""
    os.kill(api_server_pid(info, role), signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="multikueue.py", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("up", "down"))
    ap.add_argument("--workers", type=int, default=1, help="how many workers (worker1, worker2, ...)")
    ap.add_argument("--no-build", action="store_true", help="do not run build.sh first")
    args = ap.parse_args(argv)
    workers = tuple(f"worker{i + 1}" for i in range(args.workers))
    try:
        if args.command == "up":
            t0 = time.monotonic()
            fleet = up(workers, build=not args.no_build)
            connect(fleet)
            print(f"fleet ready in {time.monotonic() - t0:.0f}s", file=sys.stderr)
            for role, info in fleet.members().items():
                print(f"{role}\t{info.kubeconfig}")
        else:
            down(workers)
    except cluster.ClusterError as exc:
        print(f"multikueue: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

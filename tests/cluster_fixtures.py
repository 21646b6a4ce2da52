"""pytest fixtures for tests that need the local Kubernetes control plane.

Loaded by tests/integration/conftest.py and tests/e2e/conftest.py (or as a
plugin: ``-p tests.cluster_fixtures``). Fixtures:

``cluster`` (session)
    A :class:`harness.cluster.ClusterInfo` for a running
    cluster: ``.kubeconfig`` (Path), ``.kubectl(*args)``, ``.kubectl_json``,
    ``.env()``, ``.kueue``. The cluster is brought up once per session and torn
    down at the end, also when tests fail. While it is up, ``KUBECONFIG`` in
    ``os.environ`` points at it.
``kubeconfig`` (session)
    ``str`` path of the kubeconfig.
``namespace`` (function)
    A fresh namespace per test (default ServiceAccount present), deleted
    afterwards.

Environment:

``TRAINJOB_OPERATOR_REUSE_CLUSTER=1``
    Use the cluster already started with ``make cluster-up`` (state in
    ``.cluster/``) and leave it running afterwards. Fails fast if none answers.
``TRAINJOB_OPERATOR_CLUSTER_KUEUE=1``
    Start the session cluster with Kueue; tests marked ``kueue`` are skipped
    otherwise.
``TRAINJOB_OPERATOR_KEEP_NAMESPACES=1``
    Do not delete test namespaces (debugging).
``TRAINJOB_OPERATOR_REAL_NODES=N``
    Start the session cluster with N real nodes (containerd + kubelet) beside the kwok ones
    (``tests/realnode`` sets 2).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from harness import cluster as cluster_lib
except ImportError:  # loaded without pytest's `pythonpath` (pyproject.toml), which puts hack/ on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hack"))
    from harness import cluster as cluster_lib

REUSE_ENV = "TRAINJOB_OPERATOR_REUSE_CLUSTER"
KUEUE_ENV = "TRAINJOB_OPERATOR_CLUSTER_KUEUE"
KEEP_NS_ENV = "TRAINJOB_OPERATOR_KEEP_NAMESPACES"
REAL_NODES_ENV = "TRAINJOB_OPERATOR_REAL_NODES"

RUN_FOR_ANNOTATION = cluster_lib.RUN_FOR_ANNOTATION
EXIT_CODE_ANNOTATION = cluster_lib.EXIT_CODE_ANNOTATION


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def wait_for(fn: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``fn`` until it returns a truthy value; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


# A session-wide singleton: the fixture may be defined by more than one
# conftest (integration/ and e2e/); all of them share one cluster.
_SESSION: dict[str, Any] = {"info": None, "owned": False, "users": 0, "old_kubeconfig": None}


def _acquire() -> cluster_lib.ClusterInfo:
    if _SESSION["info"] is None:
        if _truthy(REUSE_ENV):
            info = cluster_lib.status()
            if info is None:
                pytest.fail(f"{REUSE_ENV}=1 but no local cluster answers; run `make cluster-up`", pytrace=False)
            _SESSION["owned"] = False
        else:
            worker = os.environ.get("PYTEST_XDIST_WORKER")
            if worker and "TRAINJOB_CLUSTER_DIR" not in os.environ:
                # pytest-xdist: one cluster per worker, side by side.
                os.environ["TRAINJOB_CLUSTER_DIR"] = str(cluster_lib.repo_root() / ".cluster" / worker)
                os.environ["TRAINJOB_CLUSTER_NAME"] = f"{cluster_lib.DEFAULT_NAME}-{worker}"
            try:
                # With Kueue the kwok nodes carry the block/rack/host topology its topology-aware tests ask for.
                info = cluster_lib.up(
                    kueue=_truthy(KUEUE_ENV),
                    real_nodes=int(os.environ.get(REAL_NODES_ENV) or 0),
                    topology=_truthy(KUEUE_ENV),
                )
            except cluster_lib.ClusterError as exc:
                pytest.fail(f"could not start the local cluster: {exc}", pytrace=False)
            _SESSION["owned"] = True
        _SESSION["info"] = info
        _SESSION["old_kubeconfig"] = os.environ.get("KUBECONFIG")
        os.environ["KUBECONFIG"] = str(info.kubeconfig)
    _SESSION["users"] += 1
    shared: cluster_lib.ClusterInfo = _SESSION["info"]
    return shared


def _release() -> None:
    _SESSION["users"] -= 1
    if _SESSION["users"] > 0 or _SESSION["info"] is None:
        return
    old = _SESSION["old_kubeconfig"]
    if old is None:
        os.environ.pop("KUBECONFIG", None)
    else:
        os.environ["KUBECONFIG"] = old
    if _SESSION["owned"]:
        cluster_lib.down()
    _SESSION["info"] = None


@pytest.fixture(scope="session")
def cluster() -> Iterator[cluster_lib.ClusterInfo]:
    info = _acquire()
    try:
        yield info
    finally:
        _release()


@pytest.fixture(scope="session")
def kubeconfig(cluster: cluster_lib.ClusterInfo) -> str:
    return str(cluster.kubeconfig)


@pytest.fixture(autouse=True)
def _skip_kueue_without_kueue(request: pytest.FixtureRequest) -> None:
    if not request.node.get_closest_marker("kueue") or _truthy(KUEUE_ENV):
        return
    if _truthy(REUSE_ENV):
        state = cluster_lib.load_state()
        if state is not None and state.kueue:
            return
    pytest.skip(f"needs Kueue: set {KUEUE_ENV}=1 (or make cluster-test WITH_KUEUE=1)")


def _ns_name(nodeid: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", nodeid.split("::")[-1].lower()).strip("-")[:40].strip("-")
    return f"t-{base or 'test'}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def namespace(cluster: cluster_lib.ClusterInfo, request: pytest.FixtureRequest) -> Iterator[str]:
    name = _ns_name(request.node.nodeid)
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, "trainjob-operator.test/owned=true")
    # Pods are rejected until the ServiceAccount controller made "default".
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        timeout=30,
        what=f"ServiceAccount default in {name}",
    )
    try:
        yield name
    finally:
        if not _truthy(KEEP_NS_ENV):
            cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


# --- the garbage collector held back (issue 28) ------------------------------------------------------------------


def controller_manager_pid(cluster: Any) -> int:
    """The kube-controller-manager of this cluster only: kwokctl's binary runtime keeps its pid under this cluster's
    state directory (`TRAINJOB_CLUSTER_DIR`), and the process is checked to be that binary."""
    state = cluster_lib.state_dir()
    for pidfile in state.glob(f"**/clusters/{cluster.name}/pids/kube-controller-manager.pid"):
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if cmdline and cmdline[0].decode().endswith("kube-controller-manager"):
            return pid
    raise AssertionError(f"no kube-controller-manager pid file for cluster {cluster.name} under {state}")


@contextlib.contextmanager
def garbage_collector_held(cluster: Any) -> Iterator[None]:
    """The controller-manager (and with it the garbage collector) stopped; always continued."""
    pid = controller_manager_pid(cluster)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)

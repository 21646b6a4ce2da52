"""Tests on real nodes: the local control plane with two kubelets running pods in containerd (issue 23).

Needs root and the node parts (`make tools-nodes-debs tools-nodes`); `make test-realnodes` runs this directory.
Every test here skips, saying why, when the machine cannot run containers (`realnodes.check_machine`). Run it as
its own pytest session: importing this conftest asks the session cluster for real nodes.
"""

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TRAINJOB_OPERATOR_REAL_NODES", "2")

from browser import browser  # noqa: F401  (headless Chromium for the UI tests)
from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    cluster,
    kubeconfig,
    namespace,
)
from harness import cluster as cluster_lib
from harness import realnodes
from operator_fixtures import installed, kube, operator, ui  # noqa: F401  (the operator under test, the web UI)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every real-node test, saying why, where this machine cannot run containers (not root, Debian tools
    missing, no overlay filesystem)."""
    here = Path(__file__).parent
    ours = [item for item in items if Path(str(item.fspath)).is_relative_to(here)]
    if not ours:
        return
    try:
        realnodes.check_machine()
    except cluster_lib.ClusterError as exc:
        for item in ours:
            item.add_marker(pytest.mark.skip(reason=str(exc)))


#: The session's image prefetch, once started.
_PREFETCH: dict[str, threading.Thread] = {}


@pytest.fixture(autouse=True)
def images_ahead(request: pytest.FixtureRequest) -> None:
    """From the session's first test on, the images its modules name (`IMAGES`), in their run order, are imported into
    the real nodes in the background (`realnodes.prefetch_images`): a module then finds its image there instead of
    waiting for its import. Beside the chart tests, first: they roll the operator's pods under a stream of webhook
    calls, and a torch import beside them is the load under which kopf's stop once cut the webhook's connections
    (kopf_seams.ForeignTasks)."""
    if "thread" in _PREFETCH:
        return
    names: list[str] = []
    for item in request.session.items:
        for name in getattr(getattr(item, "module", None), "IMAGES", ()):
            if name not in names:
                names.append(name)
    if names:
        _PREFETCH["thread"] = realnodes.prefetch_images(request.getfixturevalue("cluster"), names)


@pytest.fixture(scope="session", autouse=True)
def prefetch_joined(request: pytest.FixtureRequest) -> Iterator[None]:
    """The prefetch waited for before the cluster goes (this fixture needs the cluster, so it is torn down first)."""
    request.getfixturevalue("cluster")
    yield
    thread = _PREFETCH.pop("thread", None)
    if thread is not None:
        thread.join(timeout=PREFETCH_JOIN_TIMEOUT_S)


#: How long the session's end waits for the prefetch (it has usually finished long before).
PREFETCH_JOIN_TIMEOUT_S = 300.0

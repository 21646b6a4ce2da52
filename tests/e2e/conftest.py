"""End-to-end tests run against the local control plane (see tests/cluster_fixtures.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    _skip_kueue_without_kueue,
    cluster,
    kubeconfig,
    namespace,
)
from operator_fixtures import installed, kube, operator  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_support import (  # noqa: F401  (fixtures, hooks)
    default_runtimes,
    local_queue,
    pytest_configure,
    pytest_runtest_logreport,
    pytest_sessionstart,
    pytest_terminal_summary,
)

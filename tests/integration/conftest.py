"""Integration tests run against the local control plane (see tests/cluster_fixtures.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browser import browser  # noqa: F401  (headless Chromium for the UI tests)
from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    _skip_kueue_without_kueue,
    cluster,
    kubeconfig,
    namespace,
)
from operator_fixtures import installed, kube, operator, ui  # noqa: F401  (the operator under test, the web UI)

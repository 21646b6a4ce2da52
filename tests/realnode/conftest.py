"""Tests on real nodes: the local control plane with two kubelets running pods in containerd (issue 23).

Needs root and the node parts (`make tools-nodes-debs tools-nodes`); `make test-realnodes` runs this directory.
Each test module skips, saying why, when the machine cannot run containers.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TRAINJOB_OPERATOR_REAL_NODES", "2")

from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    cluster,
    kubeconfig,
    namespace,
)
from operator_fixtures import installed, kube, operator  # noqa: F401  (the operator under test)

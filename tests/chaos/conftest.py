"""The chaos suite runs against the local control plane (tests/cluster_fixtures.py) with its own operator replicas:
the session's single operator (tests/operator_fixtures.py), if a previous test started it, is stopped first, since
two sets of replicas would both reconcile and both publish the webhook configurations."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "tables"))  # test_fuzz's hostile pairs

import operator_fixtures
from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    cluster,
    kubeconfig,
    namespace,
)
from operator_fixtures import installed, kube  # noqa: F401


@pytest.fixture
def exclusive(installed: None, kube: operator_fixtures.Kube) -> Iterator[None]:  # noqa: F811
    """No other operator runs while a chaos scenario does; our webhook configurations are removed afterwards."""
    session = operator_fixtures._SESSION.get("process")
    if session is not None:
        session.stop()
    remove_webhook_configurations(kube)
    yield
    remove_webhook_configurations(kube)
    if session is not None:  # later tests of the session get their operator back
        session.start(Path(session.log_path).parent if session.log_path else Path("/tmp"))


def remove_webhook_configurations(kubectl: operator_fixtures.Kube) -> None:
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        for name in ("validator.trainer.kubeflow.org", "defaulter.trainer.kubeflow.org"):
            kubectl.run("delete", kind, name, "--ignore-not-found", check=False)

"""Chart and manifests tests: `helm lint`/`helm template` (skipped without helm), golden files, drift of the
generated copies, and — marked `cluster` — `helm install` into the local control plane plus the operator run
under the chart's ServiceAccount.

Golden files: TRAINJOB_UPDATE_GOLDEN=1 (or --update-golden) rewrites tests/chart/golden/ instead of comparing.
Helm: $HELM, the tools cache (`make tools WITH_HELM=1`), or PATH.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster_fixtures import (  # noqa: F401  (fixtures are used by name)
    _skip_kueue_without_kueue,
    cluster,
    kubeconfig,
    namespace,
)
from operator_fixtures import installed, kube  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    """A hack/ script (dashes in its name) as a module."""
    path = REPO / "hack" / name
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py").replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chart: Helm chart / kustomize manifests tests (tests/chart)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/chart/golden/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.chart)


@pytest.fixture(scope="session")
def render_manifests() -> ModuleType:
    return load_script("render-manifests.py")


@pytest.fixture(scope="session")
def sync_chart() -> ModuleType:
    return load_script("sync-chart-crds.py")


@pytest.fixture(scope="session")
def helm(render_manifests: ModuleType) -> str:
    try:
        path: str = render_manifests.find_helm()
    except render_manifests.NoHelm as err:
        pytest.skip(str(err))
    return path

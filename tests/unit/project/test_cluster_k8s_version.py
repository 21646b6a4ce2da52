"""hack/harness/cluster.py and hack/harness/tools/build-k8s.sh: the Kubernetes version of the control plane is one
setting (`K8S_VERSION`), each version has its own cache directory, and feature gates reach the components."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import cluster

REPO = Path(__file__).resolve().parents[3]
BUILD_K8S = REPO / "hack" / "harness" / "tools" / "build-k8s.sh"


def _options(config: str) -> dict[str, object]:
    return dict(json.loads(config.split("\n---\n")[0])["options"])


@pytest.mark.parametrize(
    ("env", "wanted"),
    [("", None), ("1.37.2", "1.37.2"), ("v1.37.2", "1.37.2"), ("  1.36.3 ", "1.36.3")],
)
def test_k8s_version_comes_from_one_variable(monkeypatch: pytest.MonkeyPatch, env: str, wanted: str | None) -> None:
    monkeypatch.setenv(cluster.K8S_VERSION_ENV, env)
    assert cluster.k8s_version_wanted() == wanted


def test_another_version_takes_kube_binaries_from_its_own_directory_and_the_rest_from_the_default_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path))
    seen: list[Path] = []

    def version_of(bin_dir: Path, what: str) -> str:
        seen.append(bin_dir)
        return "v1.37.2" if what == "kubernetes" else "3.6.16"

    monkeypatch.setattr(cluster, "_version_of", version_of)
    bin_dir, k8s_dir = tmp_path / "bin", tmp_path / "k8s"
    options = _options(
        cluster._kwokctl_config(
            bin_dir, 0, k8s_dir, "GenericWorkload=true,WorkloadWithJob=true", "scheduling.k8s.io/v1beta1=true"
        )
    )
    assert options["kubeBinaryPrefix"] == str(k8s_dir)
    assert options["kubeVersion"] == "v1.37.2"
    assert options["etcdBinary"] == str(bin_dir / "etcd")
    assert options["kwokControllerBinary"] == str(bin_dir / "kwok")
    assert options["kubectlBinary"] == str(bin_dir / "kubectl")
    assert options["kubeFeatureGates"] == "GenericWorkload=true,WorkloadWithJob=true"
    assert options["kubeRuntimeConfig"] == "scheduling.k8s.io/v1beta1=true"
    assert k8s_dir in seen


def test_the_default_version_passes_no_gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setattr(cluster, "_version_of", lambda bin_dir, what: "v1.36.3")
    options = _options(cluster._kwokctl_config(tmp_path / "bin"))
    assert options["kubeBinaryPrefix"] == str(tmp_path / "bin")
    assert "kubeFeatureGates" not in options and "kubeRuntimeConfig" not in options


def _print_dir(version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(BUILD_K8S), version, "--print-bin-dir"], capture_output=True, text=True, timeout=60, check=False
    )


def test_each_version_has_its_own_cache_directory_keyed_by_version() -> None:
    other = _print_dir("1.37.2")
    assert other.returncode == 0, other.stderr
    assert "/trainjob-operator/k8s/v1.37.2-" in other.stdout
    default = _print_dir("1.36.3")  # the version hack/harness/tools/go.mod pins: build.sh's directory
    assert default.returncode == 0, default.stderr
    assert "/trainjob-operator/bin/" in default.stdout


def test_a_version_without_a_module_is_refused_naming_the_versions_there_are() -> None:
    proc = _print_dir("1.35.4")
    assert proc.returncode == 2
    assert "no module for Kubernetes 1.35" in proc.stderr and "1.37.2" in proc.stderr

"""hack/harness/cluster.py: every kwokctl cluster's component ports come from the kernel's ephemeral range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cluster


def test_each_component_port_is_chosen_by_the_harness_not_by_kwokctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kwokctl's own choice is the highest free ports below 32768, the same few for every cluster: a cluster made
    while another's API server restarts takes its port."""
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setattr(cluster, "_version_of", lambda bin_dir, what: "v1.36.3")
    options = json.loads(cluster._kwokctl_config(tmp_path / "bin").split("\n---\n")[0])["options"]
    ports = [options[name] for name in cluster.KWOKCTL_PORT_OPTIONS]
    assert len(set(ports)) == len(ports), ports
    assert all(isinstance(p, int) and 1024 <= p < 65536 for p in ports), ports


def test_the_controller_manager_and_the_scheduler_run_without_leader_election(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing restarts them, and a lease renewal slower than 10 s on a loaded API server would end the process."""
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setattr(cluster, "_version_of", lambda bin_dir, what: "v1.36.3")
    patches = json.loads(cluster._kwokctl_config(tmp_path / "bin").split("\n---\n")[0])["componentsPatches"]
    assert patches == [
        {"name": "kube-controller-manager", "extraArgs": [{"key": "leader-elect", "value": "false"}]},
        {"name": "kube-scheduler", "extraArgs": [{"key": "leader-elect", "value": "false"}]},
    ]

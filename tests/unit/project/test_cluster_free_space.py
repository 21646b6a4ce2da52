"""hack/harness: a cluster's start names a full disk before anything starts (plumbing.check_free_space)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import cluster, plumbing


def test_too_little_free_space_is_named_with_the_path_and_the_numbers(tmp_path: Path) -> None:
    not_yet = tmp_path / "clone" / ".cluster"  # a fresh clone's state directory does not exist yet: its parent counts
    with pytest.raises(plumbing.ClusterError) as caught:
        plumbing.check_free_space(not_yet, 10**9, "a cluster")
    message = str(caught.value)
    assert message.startswith(f"a cluster needs 1e+09 GiB free on the filesystem of {not_yet}, and it has ")
    assert "GiB: free some space" in message
    plumbing.check_free_space(not_yet, 0.001, "a cluster")  # enough: no error


def test_a_cluster_start_checks_the_space_before_building_or_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setattr(cluster, "CONTROL_PLANE_FREE_GIB", 10.0**9)

    def never(**_: object) -> Path:
        raise AssertionError("a tool was built on a full disk")

    monkeypatch.setattr(cluster, "build_tools", never)
    with pytest.raises(
        plumbing.ClusterError, match=re.escape("a cluster (etcd's data, the logs) needs 1e+09 GiB free")
    ):
        cluster.up()

"""The MultiKueue harness's objects (hack/harness/multikueue.py), whole, as Kueue's docs ask for them: what the
manager gets for each worker and which ClusterQueue requires the MultiKueue check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import cluster, multikueue


class FakeWorker(cluster.ClusterInfo):
    """A worker whose `kubectl config view --raw --flatten --minify` is canned (no cluster)."""

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        assert args == ("config", "view", "--raw", "--flatten", "--minify")
        return type("Done", (), {"stdout": f"kubeconfig of {self.name}\n"})()


def worker(name: str) -> FakeWorker:
    return FakeWorker(name=name, kubeconfig=Path(f"/tmp/{name}"), bin_dir=Path("/bin"))


def test_the_manager_gets_a_secret_and_a_cluster_per_worker_one_config_and_the_check() -> None:
    got = multikueue.multikueue_objects({"worker2": worker("w2"), "worker1": worker("w1")})
    secret_and_cluster = [
        (
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": "kueue-system"},
                "stringData": {"kubeconfig": f"kubeconfig of {kwok}\n"},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}}},
            },
        )
        for name, kwok in (("worker2", "w2"), ("worker1", "w1"))
    ]
    assert got == [
        *(obj for pair in secret_and_cluster for obj in pair),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "multikueue"},
            "spec": {"clusters": ["worker1", "worker2"]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"},
            },
        },
    ]


@pytest.mark.parametrize(
    ("manager", "checks"),
    [
        pytest.param(True, {"admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]}}, id="manager"),
        pytest.param(False, {}, id="worker: admits and runs, no check"),
    ],
)
def test_queues_are_named_alike_on_every_member(manager: bool, checks: dict[str, Any]) -> None:
    flavor, cq, lq = multikueue.queue_objects("team-a", 8, manager=manager, queue="team")
    assert flavor == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "Fake-GPU"}},
    }
    assert cq == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq-team-a"},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
            **checks,
        },
    }
    assert lq == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team", "namespace": "team-a"},
        "spec": {"clusterQueue": "cq-team-a"},
    }


def test_the_managers_kueue_gets_the_gate_and_short_timings() -> None:
    assert multikueue.manager_kueue_settings(30, 10) == {
        "featureGates": {"MultiKueue": True},
        "multiKueue": {"gcInterval": "10s", "origin": "multikueue-e2e", "workerLostTimeout": "30s"},
    }


def test_members_live_in_their_own_directories_and_kwok_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINJOB_CLUSTER_DIR", "/tmp/fleet")
    monkeypatch.setenv("TRAINJOB_CLUSTER_NAME", "mk")
    seen = {}
    for role in ("manager", "worker1"):
        with multikueue.member(role):
            seen[role] = (str(cluster.state_dir()), cluster.cluster_name())
    assert seen == {"manager": ("/tmp/fleet/manager", "mk-manager"), "worker1": ("/tmp/fleet/worker1", "mk-worker1")}
    assert (cluster.state_dir(), cluster.cluster_name()) == (Path("/tmp/fleet"), "mk")

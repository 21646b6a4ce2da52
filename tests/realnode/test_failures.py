"""Failures for real (issue 23): a rank that exits 1 fails the TrainJob, and a TrainJob past its
activeDeadlineSeconds keeps no container running, as containerd itself reports (upstream #3833: pods kept running
after the deadline)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from real_runtimes import real_node_runtime

from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_dev import cluster as cluster_lib
from trainjob_dev import images

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]


def running_containers(cluster: cluster_lib.ClusterInfo, namespace: str) -> list[str]:
    """Containers (sandboxes included) of pods in `namespace` whose task containerd reports RUNNING, on every real
    node."""
    bins = Path(cluster.real["bins"])
    running = []
    for socket in cluster.real["sockets"]:
        ctr = [str(bins / "ctr"), "--address", socket, "--namespace", "k8s.io"]
        ours = set(
            cluster_lib._run(
                [*ctr, "containers", "ls", "-q", f'labels."io.kubernetes.pod.namespace"=={namespace}']
            ).stdout.split()
        )
        for line in cluster_lib._run([*ctr, "tasks", "ls"]).stdout.splitlines()[1:]:
            task, _pid, status = line.split()[:3]
            if task in ours and status == "RUNNING":
                running.append(task)
    return running


def trainjob(name: str, runtime: str, command: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2, "command": ["sh", "-c", command]},
            **spec,
        },
    }


def pods_running(kube: Kube, namespace: str, prefix: str) -> bool:
    pods = [p for p in kube.items("pods", namespace) if p["metadata"]["name"].startswith(prefix)]
    return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)


@pytest.mark.realnode_ci
def test_a_rank_that_exits_1_fails_the_trainjob_and_nothing_keeps_running(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.create(real_node_runtime(images.ref("busybox"), "busybox-real", backoff_limit=0), namespace)
    kube.create(
        trainjob(
            "fails",
            "busybox-real",
            'if [ "$PET_NODE_RANK" = 1 ]; then echo "rank 1 fails"; exit 1; fi; exec sleep 600',
        ),
        namespace,
    )
    job = eventually(
        lambda: condition(kube.get("trainjob", "fails", namespace), "Failed"), "the TrainJob Failed", timeout=120
    )
    assert job["status"] == "True" and "job failures" in job["message"], job
    eventually(lambda: running_containers(kube.cluster, namespace) == [], "no container running", timeout=90)


def test_past_active_deadline_no_container_keeps_running(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.create(real_node_runtime(images.ref("busybox"), "busybox-real"), namespace)
    kube.create(trainjob("late", "busybox-real", "exec sleep 600", activeDeadlineSeconds=8), namespace)
    eventually(lambda: pods_running(kube, namespace, "late-node-"), "both pods Running", timeout=120)
    # What containerd runs, not only the API's view: two pods, each its sandbox (pause) and its container.
    assert len(running_containers(kube.cluster, namespace)) == 4
    failed = eventually(
        lambda: condition(kube.get("trainjob", "late", namespace), "Failed"), "the deadline to fail it", timeout=60
    )
    assert failed["reason"] == "DeadlineExceeded", failed
    deadline_hit = time.monotonic()
    eventually(lambda: running_containers(kube.cluster, namespace) == [], "no container running", timeout=90)
    print(f"deadline: containers gone {time.monotonic() - deadline_hit:.1f}s after the TrainJob Failed")

"""Failures for real (issue 23): a rank that exits 1 fails the TrainJob, and a TrainJob past its
activeDeadlineSeconds keeps no container running, as containerd itself reports (upstream #3833: pods kept running
after the deadline)."""

from __future__ import annotations

import time

import pytest
from real_runtimes import pods_running, real_node_runtime, running_containers, shell_trainjob

from harness import images
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]


@pytest.mark.realnode_ci
def test_a_rank_that_exits_1_fails_the_trainjob_and_nothing_keeps_running(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.create(real_node_runtime(images.ref("busybox"), "busybox-real", backoff_limit=0), namespace)
    kube.create(
        shell_trainjob(
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
    kube.create(shell_trainjob("late", "busybox-real", "exec sleep 600", activeDeadlineSeconds=8), namespace)
    eventually(lambda: pods_running(kube, namespace, "late"), "both pods Running", timeout=120)
    # What containerd runs, not only the API's view: two pods, each its sandbox (pause) and its container.
    assert len(running_containers(kube.cluster, namespace)) == 4
    failed = eventually(
        lambda: condition(kube.get("trainjob", "late", namespace), "Failed"), "the deadline to fail it", timeout=60
    )
    assert failed["reason"] == "DeadlineExceeded", failed
    deadline_hit = time.monotonic()
    eventually(lambda: running_containers(kube.cluster, namespace) == [], "no container running", timeout=90)
    print(f"deadline: containers gone {time.monotonic() - deadline_hit:.1f}s after the TrainJob Failed")

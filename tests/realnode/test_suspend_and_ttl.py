"""Suspend and the TTL for real (issue 23): suspending a running TrainJob leaves no container running, as the
nodes' containerd reports it (not only the API's view), resuming starts new ones; the runtime's
`ttlSecondsAfterFinished` removes a finished TrainJob's JobSet and pods, containers included, while the TrainJob
keeps its status and its JobSet is not created again (compatibility.md §5)."""

from __future__ import annotations

import time

import pytest
from real_runtimes import busybox_runtime, containers, pods_of, pods_running, running_containers, shell_trainjob

from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]


def test_suspend_leaves_no_container_running_and_resume_starts_new_ones(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.create(busybox_runtime("pausable"), namespace)
    kube.create(shell_trainjob("pausable", "pausable", "exec sleep 600"), namespace)
    eventually(lambda: pods_running(kube, namespace, "pausable"), "both pods Running", timeout=120)
    before = set(running_containers(kube.cluster, namespace))
    assert len(before) == 4  # two pods: each its sandbox and its container

    kube.patch("trainjob", "pausable", namespace, {"spec": {"suspend": True}})
    suspended = time.monotonic()
    eventually(lambda: running_containers(kube.cluster, namespace) == [], "no container running", timeout=60)
    stopped = time.monotonic()
    eventually(lambda: pods_of(kube, namespace, "pausable") == [], "the pods deleted", timeout=60)
    job = kube.get("trainjob", "pausable", namespace)
    cond = condition(job, "Suspended")
    assert cond and (cond["status"], cond["reason"]) == ("True", "Suspended"), job
    assert (job or {})["status"].get("state") == "Suspended", job

    kube.patch("trainjob", "pausable", namespace, {"spec": {"suspend": False}})
    eventually(lambda: pods_running(kube, namespace, "pausable"), "both pods Running again", timeout=120)
    after = set(eventually(lambda: len(r := running_containers(kube.cluster, namespace)) == 4 and r, "4 running"))
    assert not after & before, "resume must start new containers"
    print(f"suspend: every container stopped {stopped - suspended:.1f}s after spec.suspend was set")


def test_ttl_after_finished_removes_the_pods_and_their_containers_and_keeps_the_status(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.create(busybox_runtime("short-lived", ttlSecondsAfterFinished=3), namespace)
    kube.create(shell_trainjob("short-lived", "short-lived", "echo done"), namespace)
    complete = eventually(
        lambda: condition(kube.get("trainjob", "short-lived", namespace), "Complete"), "Complete", timeout=120
    )
    done = time.monotonic()
    finished_status = (kube.get("trainjob", "short-lived", namespace) or {})["status"]

    eventually(lambda: kube.get("jobset", "short-lived", namespace) is None, "the JobSet removed by its TTL", 60)
    eventually(lambda: pods_of(kube, namespace, "short-lived") == [], "the pods removed", timeout=60)
    pods_gone = time.monotonic()
    # The kubelets remove a deleted pod's containers (sandboxes included) in their next container GC (each minute).
    eventually(lambda: containers(kube.cluster, namespace) == [], "no container left in containerd", timeout=150)
    containers_gone = time.monotonic()

    # The finished TrainJob keeps its status and its JobSet is not created again.
    # A reconcile after the TTL (a sync point, not a sleep): a label nudges the TrainJob.
    before = operator.metric("trainjob_operator_reconcile_duration_seconds_count")
    kube.patch("trainjob", "short-lived", namespace, {"metadata": {"labels": {"test.io/nudge": "1"}}})
    eventually(
        lambda: operator.metric("trainjob_operator_reconcile_duration_seconds_count") > before, "a reconcile", 30
    )
    job = kube.get("trainjob", "short-lived", namespace) or {}
    assert condition(job, "Complete") == complete
    assert job["status"] == finished_status
    assert kube.get("jobset", "short-lived", namespace) is None
    print(f"ttl 3s: pods gone {pods_gone - done:.1f}s and containers {containers_gone - done:.1f}s after Complete")

"""Kueue preemption through our operator: a high-priority TrainJob (WorkloadPriorityClass) takes the quota of a
running low-priority one. Kueue evicts the low one's Workload and suspends the TrainJob; our operator suspends its
JobSet so no pod is left running, the TrainJob shows Suspended and Kueue's reason reaches the user; once the high one
finishes the low one is admitted again and resumes with its restarts and its progress (trainerStatus) intact."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import yaml
from e2e_support import QUEUE_LABEL, RUN_FOR, get, gpu_queue, kueue_object, kwok_patch, pods, trainjob, wait_condition

from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(300)]

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PROGRESS = {"progressPercentage": 40, "estimatedRemainingSeconds": 90, "lastUpdatedTime": "2026-11-25T10:00:00Z"}


@pytest.fixture
def preempting_queue(
    kube: Kube, namespace: str, operator: OperatorProcess, default_runtimes: list[str]
) -> Iterator[tuple[str, str, str]]:
    """Two WorkloadPriorityClasses and a ClusterQueue of 8 GPUs that preempts lower priorities within itself;
    yields (local queue, low class, high class)."""
    suffix = uuid.uuid4().hex[:6]
    low, high = f"e2e-low-{suffix}", f"e2e-high-{suffix}"
    with gpu_queue(
        kube,
        namespace,
        "prio",
        gpus=8,
        queue_spec={"preemption": {"withinClusterQueue": "LowerPriority"}},
        extra=[
            kueue_object("WorkloadPriorityClass", low, value=100),
            kueue_object("WorkloadPriorityClass", high, value=1000),
        ],
    ) as queue:
        yield queue, low, high


def prioritized_job(name: str, queue: str, priority: str, run_for: str) -> dict[str, object]:
    """Two nodes of 4 GPUs: the whole queue."""
    return trainjob(
        name,
        "torch-distributed",
        labels={QUEUE_LABEL: queue, PRIORITY_LABEL: priority},
        trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}},
        runtimePatches=[kwok_patch({"node": {RUN_FOR: run_for}})],
    )


def running_pods(kube: Kube, namespace: str, name: str) -> list[dict[str, object]]:
    return [p for p in pods(kube, namespace, name) if p["status"].get("phase") == "Running"]


def workload_of(kube: Kube, namespace: str, uid: str) -> dict[str, object]:
    return next(w for w in kube.items("workloads", namespace) if w["metadata"]["ownerReferences"][0]["uid"] == uid)


def test_high_priority_preempts_and_the_low_one_resumes_intact(
    kube: Kube, namespace: str, preempting_queue: tuple[str, str, str]
) -> None:
    queue, low, high = preempting_queue
    kube.apply(prioritized_job("low", queue, low, "25s"), namespace=namespace)
    eventually(lambda: len(running_pods(kube, namespace, "low")) == 2, "low admitted and running", timeout=60)
    # Progress as the trainer reports it (the status server's field manager; runtime/progress.py).
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "low"}}
    kube.run(
        "apply",
        "--server-side",
        "--subresource=status",
        "--field-manager=trainer-status",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump({**body, "status": {"trainerStatus": PROGRESS}}),
    )
    before = get(kube, "trainjob", "low", namespace)
    assert before["status"]["trainerStatus"] == PROGRESS
    uid = before["metadata"]["uid"]

    kube.apply(prioritized_job("high", queue, high, "5s"), namespace=namespace)

    # Kueue evicts low's Workload for high and suspends the TrainJob; we suspend the JobSet and no pod runs.
    evicted = eventually(
        lambda: (c := condition(workload_of(kube, namespace, uid), "Evicted")) and c["status"] == "True" and c,
        "low's Workload evicted",
        timeout=60,
    )
    assert evicted["reason"] == "Preempted", evicted
    eventually(lambda: get(kube, "jobset", "low", namespace)["spec"].get("suspend") is True, "low's JobSet suspended")
    eventually(lambda: pods(kube, namespace, "low") == [], "no pod of low left", timeout=60)
    suspended = get(kube, "trainjob", "low", namespace)
    assert suspended["spec"]["suspend"] is True
    assert suspended["status"]["state"] == "Suspended"
    cond = condition(suspended, "Suspended")
    assert cond is not None and cond["status"] == "True"
    # Why, from the Workload's eviction condition: in our status.reason/message (`kubectl get trainjobs -o wide`)...
    explained = eventually(
        lambda: (s := get(kube, "trainjob", "low", namespace)["status"]).get("reason") == "Preempted" and s,
        "low's status says it was preempted",
        timeout=30,
    )
    assert explained["message"] == evicted["message"], explained

    # ... and in Kueue's own Event on the TrainJob (sent once our jobsStatus shows no active Job).
    def stopped_events() -> list[dict[str, str]]:
        items = json.loads(
            kube.run(
                "get", "events", "-n", namespace, "--field-selector", f"involvedObject.uid={uid}", "-o", "json"
            ).stdout
        )["items"]
        return [e for e in items if e["reason"] == "Stopped" and evicted["message"] in e["message"]]

    eventually(stopped_events, "Kueue's Stopped Event on low with the preemption message", timeout=60)

    # high runs to the end, then low is admitted again, resumes and keeps what it had.
    eventually(lambda: len(running_pods(kube, namespace, "high")) == 2, "high running", timeout=60)
    wait_condition(kube, namespace, "high", "Complete", timeout=90)
    eventually(lambda: len(running_pods(kube, namespace, "low")) == 2, "low running again", timeout=90)
    resumed = get(kube, "trainjob", "low", namespace)
    assert resumed["spec"].get("suspend") in (None, False)
    assert resumed["status"]["trainerStatus"] == PROGRESS
    assert resumed["status"].get("restarts", 0) == before["status"].get("restarts", 0)
    assert condition(resumed, "Suspended") is None
    assert resumed["status"].get("reason") != "Preempted", "the reason outlived the suspension"
    wait_condition(kube, namespace, "low", "Complete", timeout=90)

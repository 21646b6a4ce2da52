"""The Kueue path: Kueue's own TrainJob integration (unmodified Kueue v0.19, `trainer.kubeflow.org/trainjob` in its
integrations) admits TrainJobs to a ClusterQueue with quota for 8 GPUs; our operator runs what Kueue admits."""

from __future__ import annotations

import pytest
from e2e_support import COMPLETE, FLAVOR_LABELS, KUEUE_MANAGER, RUN_FOR, get, pods, queued_job, wait_condition

from operator_fixtures import Kube, condition, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(240)]


def suspended(kube: Kube, namespace: str, name: str) -> bool:
    return bool(get(kube, "trainjob", name, namespace)["spec"].get("suspend"))


def test_quota_admits_two_and_queues_the_third(kube: Kube, namespace: str, local_queue: str) -> None:
    # a and b run for a while; c must wait for one of them
    kube.apply(queued_job("a", local_queue, "6s"), queued_job("b", local_queue, "20s"), namespace=namespace)
    for name in ("a", "b"):
        eventually(
            lambda n=name: any(p["status"].get("phase") == "Running" for p in pods(kube, namespace, n)),
            f"{name} admitted and running",
            timeout=60,
        )
    kube.apply(queued_job("c", local_queue, "2s"), namespace=namespace)

    def pending_in_kueue() -> bool:
        workloads = [
            w for w in kube.items("workloads", namespace) if w["metadata"]["ownerReferences"][0]["name"] == "c"
        ]
        return (
            bool(workloads)
            and condition(workloads[0], "QuotaReserved") is not None
            and condition(workloads[0], "QuotaReserved")["status"] == "False"
        )

    eventually(pending_in_kueue, "c's Workload waiting for quota", timeout=30)
    assert suspended(kube, namespace, "c")
    cond = condition(get(kube, "trainjob", "c", namespace), "Suspended")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Suspended")
    assert kube.get("jobset", "c", namespace)["spec"]["suspend"] is True
    assert pods(kube, namespace, "c") == []
    assert condition(get(kube, "trainjob", "a", namespace), "Complete") is None

    # a finishes -> its quota goes back -> Kueue admits c, which our operator resumes and runs to Complete
    wait_condition(kube, namespace, "a", "Complete", timeout=60)
    cond = wait_condition(kube, namespace, "c", "Complete", timeout=90)
    assert (cond["reason"], cond["message"]) == COMPLETE
    # Resumed by Kueue: no Suspended=False condition is kept (docs/compatibility.md D18), so the SDK sees Running.
    assert condition(get(kube, "trainjob", "c", namespace), "Suspended") is None
    assert condition(get(kube, "trainjob", "b", namespace), "Complete") is None, "c should not have waited for b"
    wait_condition(kube, namespace, "b", "Complete", timeout=60)


def test_kueue_node_selector_reaches_the_pods(kube: Kube, namespace: str, local_queue: str) -> None:
    kube.apply(queued_job("sel", local_queue, "5s"), namespace=namespace)
    running = eventually(
        lambda: [p for p in pods(kube, namespace, "sel") if p["status"].get("phase") == "Running"],
        "the admitted pod running",
        timeout=60,
    )
    job = get(kube, "trainjob", "sel", namespace)
    patches = {p["manager"]: p for p in job["spec"]["runtimePatches"]}
    assert KUEUE_MANAGER in patches and "time" in patches[KUEUE_MANAGER]
    node_patch = next(
        r
        for r in patches[KUEUE_MANAGER]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        if r["name"] == "node"
    )
    assert node_patch["template"]["spec"]["template"]["spec"]["nodeSelector"] == FLAVOR_LABELS
    for pod in running:
        assert pod["spec"]["nodeSelector"].items() >= FLAVOR_LABELS.items()
        # our own runtime patch (kwok's annotation) and Kueue's both landed
        assert pod["metadata"]["annotations"][RUN_FOR] == "5s"
    jobset = get(kube, "jobset", "sel", namespace)
    node = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert node["spec"]["nodeSelector"].items() >= FLAVOR_LABELS.items()
    wait_condition(kube, namespace, "sel", "Complete", timeout=60)

"""The Kueue path: Kueue's own TrainJob integration (unmodified Kueue v0.19, `trainer.kubeflow.org/trainjob` in its
integrations) admits TrainJobs to a ClusterQueue with quota for 8 GPUs; our operator runs what Kueue admits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import COMPLETE, RUN_FOR, get, kwok_patch, pods, trainjob, wait_condition

from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(240)]

KUEUE_MANAGER = "kueue.x-k8s.io/manager"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR_LABELS = {"nvidia.com/gpu.product": "Fake-GPU"}


@pytest.fixture
def local_queue(kube: Kube, namespace: str, operator: OperatorProcess, default_runtimes: list[str]) -> Iterator[str]:
    """ResourceFlavor (with node labels) + ClusterQueue (8 GPUs) + LocalQueue in the test namespace."""
    suffix = uuid.uuid4().hex[:6]
    flavor, cq = f"e2e-gpu-{suffix}", f"e2e-cq-{suffix}"
    kube.apply(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": FLAVOR_LABELS}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "queueingStrategy": "BestEffortFIFO",
                  "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                      {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}})
    kube.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team"},
                "spec": {"clusterQueue": cq}}, namespace=namespace)
    eventually(lambda: (q := kube.get("clusterqueue", cq)) and condition(q, "Active")
               and condition(q, "Active")["status"] == "True", "the ClusterQueue active", timeout=30)
    try:
        yield "team"
    finally:
        kube.run("delete", "trainjobs", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)
        kube.run("delete", "localqueue", "team", "-n", namespace, "--wait=true", "--timeout=30s", check=False)
        kube.delete("clusterqueue", cq)
        kube.delete("resourceflavor", flavor)


def queued_job(name: str, queue: str, run_for: str) -> dict[str, Any]:
    return trainjob(name, "torch-distributed", labels={QUEUE_LABEL: queue}, trainer={
        "numNodes": 1, "command": ["torchrun", "train.py"], "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}},
        runtimePatches=[kwok_patch({"node": {RUN_FOR: run_for}})])


def suspended(kube: Kube, namespace: str, name: str) -> bool:
    return bool(get(kube, "trainjob", name, namespace)["spec"].get("suspend"))


def test_quota_admits_two_and_queues_the_third(kube: Kube, namespace: str, local_queue: str) -> None:
    # a and b run for a while; c must wait for one of them
    kube.apply(queued_job("a", local_queue, "6s"), queued_job("b", local_queue, "20s"), namespace=namespace)
    for name in ("a", "b"):
        eventually(lambda n=name: any(p["status"].get("phase") == "Running" for p in pods(kube, namespace, n)),
                   f"{name} admitted and running", timeout=60)
    kube.apply(queued_job("c", local_queue, "2s"), namespace=namespace)

    def pending_in_kueue() -> bool:
        workloads = [w for w in kube.items("workloads", namespace)
                     if w["metadata"]["ownerReferences"][0]["name"] == "c"]
        return bool(workloads) and condition(workloads[0], "QuotaReserved") is not None \
            and condition(workloads[0], "QuotaReserved")["status"] == "False"
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
    resumed = condition(get(kube, "trainjob", "c", namespace), "Suspended")
    assert resumed is not None and (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False", "Resumed", "TrainJob is resumed")
    assert condition(get(kube, "trainjob", "b", namespace), "Complete") is None, "c should not have waited for b"
    wait_condition(kube, namespace, "b", "Complete", timeout=60)


def test_kueue_node_selector_reaches_the_pods(kube: Kube, namespace: str, local_queue: str) -> None:
    kube.apply(queued_job("sel", local_queue, "5s"), namespace=namespace)
    running = eventually(lambda: [p for p in pods(kube, namespace, "sel") if p["status"].get("phase") == "Running"],
                         "the admitted pod running", timeout=60)
    job = get(kube, "trainjob", "sel", namespace)
    patches = {p["manager"]: p for p in job["spec"]["runtimePatches"]}
    assert KUEUE_MANAGER in patches and "time" in patches[KUEUE_MANAGER]
    node_patch = next(r for r in patches[KUEUE_MANAGER]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
                      if r["name"] == "node")
    assert node_patch["template"]["spec"]["template"]["spec"]["nodeSelector"] == FLAVOR_LABELS
    for pod in running:
        assert pod["spec"]["nodeSelector"].items() >= FLAVOR_LABELS.items()
        # our own runtime patch (kwok's annotation) and Kueue's both landed
        assert pod["metadata"]["annotations"][RUN_FOR] == "5s"
    jobset = get(kube, "jobset", "sel", namespace)
    node = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert node["spec"]["nodeSelector"].items() >= FLAVOR_LABELS.items()
    wait_condition(kube, namespace, "sel", "Complete", timeout=60)
